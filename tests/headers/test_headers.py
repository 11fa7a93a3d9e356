"""CUDA library headers: cuRAND's device API, WMMA (<mma.h> and its crt/mma.h), bf16/fp8,
pipelines and cooperative groups are found in the toolkit or the NVIDIA header wheels, keyed by
content, and a header only a missing wheel ships is named with that wheel."""

import os

import pytest

import cupy_rawcode
from cupy_rawcode.headers.closure import MissingHeaderError
from cupy_rawcode.toolkit import cudaheaders
from cupy_rawcode.toolkit.record import toolchain

# header -> device code using it (inside `__global__ void k(float* p, __half* h, unsigned long long s)`)
USES = {
    "curand_kernel.h": "curandState st; curand_init(s, threadIdx.x, 0, &st); p[0] = curand_uniform(&st)"
    " + curand_normal(&st); curandStatePhilox4_32_10_t ph; curand_init(s, 0, 0, &ph);"
    " p[1] = curand_uniform4(&ph).x;",
    "mma.h": "using namespace nvcuda; wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;"
    " wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;"
    " wmma::fragment<wmma::accumulator, 16, 16, 16, float> c; wmma::fill_fragment(c, 0.0f);"
    " wmma::load_matrix_sync(a, h, 16); wmma::load_matrix_sync(b, h, 16);"
    " wmma::mma_sync(c, a, b, c); wmma::store_matrix_sync(p, c, 16, wmma::mem_row_major);",
    "cuda_bf16.h": "__nv_bfloat16 x = __float2bfloat16(p[0]); p[1] = __bfloat162float(x * x + x);",
    "cuda_fp8.h": "__nv_fp8_e4m3 x(p[0]); __nv_fp8_e5m2 y(p[1]); p[2] = float(x) + float(y);",
    "cuda_pipeline.h": "__shared__ float buf[32]; __pipeline_memcpy_async(&buf[threadIdx.x % 32], p, 4);"
    " __pipeline_commit(); __pipeline_wait_prior(0); p[1] = buf[0];",
    "cooperative_groups.h": "namespace cg = cooperative_groups; auto b = cg::this_thread_block();"
    " auto w = cg::tiled_partition<32>(b); b.sync(); p[0] = w.shfl(p[1], 0);",
    "cooperative_groups/reduce.h": "namespace cg = cooperative_groups;"
    " auto w = cg::tiled_partition<32>(cg::this_thread_block());"
    " p[0] = cg::reduce(w, p[1], cg::plus<float>());",
    "cooperative_groups/scan.h": "namespace cg = cooperative_groups;"
    " auto w = cg::tiled_partition<32>(cg::this_thread_block());"
    " p[0] = cg::inclusive_scan(w, p[1]);",
    "cooperative_groups/memcpy_async.h": "namespace cg = cooperative_groups; __shared__ float buf[64];"
    " auto b = cg::this_thread_block(); cg::memcpy_async(b, buf, p, 256);"
    " cg::wait(b); p[1] = buf[3];",
}
_NEEDS = {
    "cooperative_groups/reduce.h": ("cooperative_groups.h",),
    "cooperative_groups/scan.h": ("cooperative_groups.h",),
    "cooperative_groups/memcpy_async.h": ("cooperative_groups.h",),
    "mma.h": ("cuda_fp16.h",),
}


def _kernel(header, body):
    includes = (header,) + _NEEDS.get(header, ())
    return (
        "".join(f"#include <{h}>\n" for h in includes) + "#include <cuda_fp16.h>\n"
        f'extern "C" __global__ void k(float* p, __half* h, unsigned long long s) {{ {body} }}\n'
    )


def _roots_with(rel):
    return [d for d in toolchain().system_dirs if os.path.isfile(os.path.join(d.path, rel))]


@pytest.mark.parametrize("header", sorted(USES))
@pytest.mark.parametrize("options", [(), ("-default-device",)], ids=["plain", "default-device"])
def test_cuda_library_header_is_found_and_compiles(header, options):
    needed = {"curand_kernel.h": "curand_kernel.h", "mma.h": "crt/mma.h"}.get(header, header)
    if not _roots_with(needed):
        pytest.skip(f"<{needed}> is in no root here: install {cudaheaders.wheel_for(needed)}")
    closure = cupy_rawcode.resolve(_kernel(header, USES[header]), exact=True)
    assert not [m for m in closure.missing if not m.conditional]
    cupy_rawcode.compile(_kernel(header, USES[header]), arch="sm_90", options=options)


@pytest.mark.parametrize("header, kind", [("curand_kernel.h", "curand"), ("crt/mma.h", "crt")])
def test_library_roots_of_the_installed_wheels(header, kind):
    """With the cu12/cu13 extras installed, the wheel that ships the header is a root (CUDA 13
    wheels share the runtime's directory, which then holds it)."""
    roots = _roots_with(header)
    if not roots:
        pytest.skip(f"{cudaheaders.wheel_for(header)} is not installed")
    assert roots[0].tag in (kind, "cuda")
    closure = cupy_rawcode.resolve(f"#include <{header}>\n", exact=False)
    assert any(h.logical == f"{roots[0].tag}:{header}" for h in closure.headers)


@pytest.mark.parametrize(
    "header, wheel12, wheel13",
    [
        ("curand_kernel.h", "nvidia-curand-cu12", "nvidia-curand"),
        ("curand_philox4x32_x.h", "nvidia-curand-cu12", "nvidia-curand"),
        ("crt/mma.h", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-crt"),
        ("mma.h", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"),
        ("cuda_bf16.h", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"),
        ("cooperative_groups/reduce.h", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"),
        ("cub/block/block_reduce.cuh", "nvidia-cuda-cccl-cu12", "nvidia-cuda-cccl"),
        ("cuda/std/type_traits", "nvidia-cuda-cccl-cu12", "nvidia-cuda-cccl"),
    ],
)
def test_wheel_for_a_cuda_header(header, wheel12, wheel13):
    assert cudaheaders.wheel_for(header) == f"{wheel12} (CUDA 12) or {wheel13} (CUDA 13)"


@pytest.mark.parametrize(
    "header", ["my_header.h", "vector", "cuda", "cooperative_groups/details/x/y.h"]
)
def test_no_wheel_for_other_headers(header):
    assert cudaheaders.wheel_for(header) is None


@pytest.mark.parametrize(
    "header, wheel", [("curand_kernel.h", "nvidia-curand-cu12"), ("mma.h", "nvidia-cuda-nvcc-cu12")]
)
def test_missing_header_names_the_wheel(tmp_path, monkeypatch, header, wheel):
    """Without the wheel (here: no CUDA roots at all, or a runtime root without crt/), the error
    names the wheel to install."""
    cccl = tmp_path / "cccl"
    cccl.mkdir()
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "mma.h").write_text('#pragma once\n#include "crt/mma.h"\n')
    monkeypatch.setenv("CUPY_RAWCODE_HEADER_SOURCES", f"cccl={cccl},cuda={runtime}")
    with pytest.raises(MissingHeaderError) as e:
        cupy_rawcode.compile(f"#include <{header}>\n__global__ void k() {{}}\n", arch="sm_90")
    assert wheel in str(e.value) and "pip install" in str(e.value)


def test_library_headers_are_keyed_by_content_not_path(tree):
    """A library root is keyed like the others: same content elsewhere, same key; one byte
    changed, another key."""
    src = "#include <curand_kernel.h>\n__global__ void k() {}\n"
    a = tree({"a/curand_kernel.h": "#pragma once\n#define X 1\n", "cccl/.keep": ""})
    b = tree({"b/curand_kernel.h": "#pragma once\n#define X 1\n"}, a)
    key = lambda d: cupy_rawcode.cache_key(
        src, arch="sm_90", header_sources=f"cccl={a / 'cccl'},curand={d}"
    )
    first = key(a / "a")
    assert key(b / "b") == first
    (a / "a" / "curand_kernel.h").write_text("#pragma once\n#define X 2\n")
    assert key(a / "a") != first


@pytest.mark.parametrize("header", sorted(cudaheaders.TABLE))
def test_the_readme_table_agrees_with_the_wheel_lookup(header):
    kind, _ = cudaheaders.TABLE[header]
    assert cudaheaders.root_kind_of(header.replace("*", "reduce")) == kind


@pytest.mark.parametrize(
    "header, says",
    [
        ("cub/device/dispatch/kernels/no_such.cuh", "CUPY_RAWCODE_HEADER_SOURCES=cccl=DIR"),
        ("cuda_no_such.h", "CUDA_HOME"),
    ],
)
def test_a_header_the_installed_library_lacks_is_not_sent_to_pip(header, says):
    """The wheel that ships such headers is installed, and holds no such file (another
    release's header): the error says so, never 'pip install it'."""
    if not _roots_with("cuda_runtime.h"):
        pytest.skip("no CUDA runtime root here")
    with pytest.raises(MissingHeaderError) as e:
        cupy_rawcode.compile(f"#include <{header}>\n__global__ void k() {{}}\n", arch="sm_90")
    assert "pip install" not in str(e.value) and "another release" in str(e.value)
    assert says in str(e.value)
