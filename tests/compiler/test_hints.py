"""Hints for code written for CCCL 2 and CuPy 13 (compiler/hints.py): names CCCL 3 removed
(cub::Max, thrust::unary_function: NVRTC only says the namespace has no such member), CUB's
device-wide headers (<cub/cub.cuh>: errors deep inside CUB), CuPy's float16 with only its
declaration (NVRTC: an incomplete type). The CompileError says what to do."""

from __future__ import annotations

import pytest

import cupy_rawcode
from cupy_rawcode.compiler.hints import (
    CUB_DEVICE,
    HALF,
    REMOVED,
    compile_hints,
    cub_device_hint,
    cupy_half_hints,
    removed_name_hints,
    stub_hints,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore::cupy_rawcode.headers.standard.StandardRaisedWarning"
)


def _log(message: str) -> str:
    return f"kernel.cu(3): error: {message}\n    the echoed source line\n    ^\n"


@pytest.mark.parametrize(
    "log, names",
    [
        (_log('namespace "cub" has no member "Max"'), ["cub::Max"]),
        (
            _log('namespace "thrust" has no member class "unary_function"'),
            ["thrust::unary_function"],
        ),
        (_log('namespace "std" has no member class "binary_function"'), ["std::binary_function"]),
        # two errors, one name twice: one line each, in log order
        (
            _log('namespace "cub" has no member "Sum"')
            + _log('namespace "cub" has no member "FpLimits"')
            + _log('namespace "cub" has no member "Sum"'),
            ["cub::Sum", "cub::FpLimits"],
        ),
        # no hint: a name CCCL 3 keeps, another namespace's Max, a warning, the echoed line only
        (_log('namespace "cub" has no member "BlockReduce"'), []),
        (_log('namespace "mylib" has no member "Max"'), []),
        ('kernel.cu(3): warning: namespace "cub" has no member "Max"\n', []),
        (_log('identifier "x" is undefined').replace("the echoed source line", "cub::Max()"), []),
        ("", []),
    ],
)
def test_removed_name_hints_name_each_removed_name_once(log, names):
    hints = removed_name_hints(log).splitlines()
    assert [h.split(" ", 1)[0] for h in hints] == names
    for name, hint in zip(names, hints, strict=True):
        assert hint.endswith(f"use {REMOVED[name][1]}")


def test_the_hint_is_among_every_hint_of_a_failed_compile():
    log = _log('namespace "cub" has no member "Min"')
    assert "cub::Min was removed in CCCL 3: use cuda::minimum<>{}" in compile_hints(log, "")


# a reduction as CuPy 13's cupyx.jit wrote it for jit.cub.WarpReduce (jitify=True there)
WARP_MAX = r"""
#include <cub/warp/warp_reduce.cuh>
extern "C" __global__ void warp_max(const int* x, int* out) {
    __shared__ cub::WarpReduce<int>::TempStorage temp;
    int m = cub::WarpReduce<int>(temp).Reduce(x[threadIdx.x], cub::Max());
    if (threadIdx.x == 0) out[0] = m;
}
"""


@pytest.mark.parametrize("jitify", [False, True])
def test_a_removed_cub_functor_fails_naming_its_replacement(jitify):
    import cupy

    with pytest.raises(cupy.cuda.compiler.CompileException) as e:
        cupy_rawcode.RawModule(code=WARP_MAX, options=("-std=c++14",), jitify=jitify).compile(
            arch="sm_90"
        )
    message = str(e.value)
    assert 'namespace "cub" has no member "Max"' in message
    assert "cub::Max was removed in CCCL 3: use cuda::maximum<>{} from <cuda/functional>" in message


def test_the_replacement_compiles():
    fixed = WARP_MAX.replace("#include <cub", "#include <cuda/functional>\n#include <cub").replace(
        "cub::Max()", "cuda::maximum<>{}"
    )
    cupy_rawcode.RawModule(code=fixed, options=("-std=c++14",)).compile(arch="sm_90")


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_each_removed_name_is_gone_from_these_headers(name):
    """The table says only what holds: each name fails here, and the hint names it."""
    namespace = name.split("::")[0]
    header = {
        "cub": "cub/thread/thread_operators.cuh",
        "thrust": "thrust/functional.h",
        "std": "functional",
    }[namespace]
    src = f"#include <{header}>\n#include <cub/util_type.cuh>\nusing probe = {name};\n"
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.compile(src, arch="sm_90")
    assert f"{name} was removed in {REMOVED[name][0]}" in str(e.value)


def test_readme_lists_every_removed_name():
    from pathlib import Path

    readme = Path(__file__).resolve().parents[2].joinpath("README.md").read_text()
    section = readme.split("### Names CCCL 3 removed", 1)[1].split("\n## ", 1)[0]
    for name in REMOVED:
        assert f"`{name}" in section, name


CUB_HEADER_ERROR = (
    '/site/cupy/_cccl/cub/cub/detail/temporary_storage.cuh(354): error: namespace "cuda" has '
    'no member "stream_ref"\n'
)
THRUST_HEADER_ERROR = (
    "/site/cupy/_cccl/thrust/thrust/system/cuda/detail/core/triple_chevron_launch.h(61): error: "
    "A function explicitly marked as a __host__ function is not allowed in JIT mode\n"
)


@pytest.mark.parametrize(
    "log, source, hinted",
    [
        (CUB_HEADER_ERROR, "#include <cub/cub.cuh>\n", True),
        (THRUST_HEADER_ERROR, "#include <cub/cub.cuh>\n", True),
        (CUB_HEADER_ERROR, '#include "cub/device/device_reduce.cuh"\n', True),
        (CUB_HEADER_ERROR, "#  include <cub/device/device_scan.cuh>\n", True),
        # no hint: block and warp headers compile; the error is the kernel's own; no error
        (CUB_HEADER_ERROR, "#include <cub/block/block_reduce.cuh>\n", False),
        (_log('identifier "x" is undefined'), "#include <cub/cub.cuh>\n", False),
        ("", "#include <cub/cub.cuh>\n", False),
        (CUB_HEADER_ERROR.replace("error", "warning"), "#include <cub/cub.cuh>\n", False),
    ],
)
def test_cub_device_hint(log, source, hinted):
    assert cub_device_hint(log, source) == (CUB_DEVICE if hinted else "")


@pytest.mark.parametrize(
    "log, types",
    [
        (_log('incomplete type "float16 [32]" is not allowed'), ["float16"]),
        (_log('incomplete type "T [48][32]" (aka "float16 [48][32]") is not allowed'), ["float16"]),
        (
            _log('incomplete type "bfloat16" is not allowed')
            + _log('incomplete type "float16" is not allowed')
            + _log('incomplete type "float16 [4]" is not allowed'),
            ["bfloat16", "float16"],
        ),
        (_log('identifier "half" is undefined') * 2, ["half"]),
        (
            _log('incomplete type "float16" is not allowed')
            + _log('identifier "half" is undefined'),
            ["float16", "half"],
        ),
        # no hint: another type, a name containing float16, a warning, no incomplete type
        (_log('identifier "halfway" is undefined'), []),
        (_log('incomplete type "Node" is not allowed'), []),
        (_log('incomplete type "myfloat16 [4]" is not allowed'), []),
        ('kernel.cu(3): warning: incomplete type "float16" is not allowed\n', []),
        (_log('identifier "float16" is undefined'), []),
    ],
)
def test_cupy_half_hints_name_the_defining_header(log, types):
    hints = cupy_half_hints(log).splitlines()
    assert [h.split(" ", 1)[0] for h in hints] == types
    for t, hint in zip(types, hints, strict=True):
        assert hint == HALF if t == "half" else hint.endswith(f"include <cupy/{t}.cuh>")


# the umbrella header, as Jitify-era code included it for one block reduction
CUB_UMBRELLA = r"""
#include <cub/cub.cuh>
extern "C" __global__ void block_sum(const float* x, float* out) {
    typedef cub::BlockReduce<float, 128> R;
    __shared__ typename R::TempStorage temp;
    float s = R(temp).Sum(x[threadIdx.x]);
    if (threadIdx.x == 0) out[0] = s;
}
"""


@pytest.mark.parametrize("jitify", [False, True])
def test_cubs_umbrella_header_fails_naming_the_block_headers(jitify):
    import cupy

    with pytest.raises(cupy.cuda.compiler.CompileException) as e:
        cupy_rawcode.RawModule(code=CUB_UMBRELLA, jitify=jitify).compile(arch="sm_90")
    message = str(e.value)
    assert CUB_DEVICE in message
    assert "has no device implementation" not in message  # CUB's names, not the kernel's
    fixed = CUB_UMBRELLA.replace("cub/cub.cuh", "cub/block/block_reduce.cuh")
    cupy_rawcode.RawModule(code=fixed, jitify=jitify).compile(arch="sm_90")


# a kernel written for CuPy 13, whose <cupy/carray.cuh> defined float16
HALF_BUFFER = r"""
#include <cupy/carray.cuh>
extern "C" __global__ void add_one(float16* x) {
    __shared__ float16 buf[32];
    buf[threadIdx.x] = x[threadIdx.x];
    x[threadIdx.x] = buf[(threadIdx.x + 1) % 32] + float16(1.0f);
}
"""


@pytest.mark.parametrize("jitify", [False, True])
def test_cupys_float16_declared_only_fails_naming_its_header(jitify):
    import cupy

    with pytest.raises(cupy.cuda.compiler.CompileException) as e:
        cupy_rawcode.RawModule(code=HALF_BUFFER, options=("-std=c++17",), jitify=jitify).compile(
            arch="sm_90"
        )
    assert (
        "float16 is declared by <cupy/carray.cuh> and defined by <cupy/float16.cuh>: include "
        "<cupy/float16.cuh>"
    ) in str(e.value)
    fixed = HALF_BUFFER.replace("carray.cuh>", "carray.cuh>\n#include <cupy/float16.cuh>")
    cupy_rawcode.RawModule(code=fixed, options=("-std=c++17",), jitify=jitify).compile(arch="sm_90")


# half through <cupy/carray.cuh>, as CuPy 13's cupyx.signal kernels wrote it
HALF_SCALE = r"""
#include <cupy/carray.cuh>
extern "C" __global__ void scale(half* x, float a) {
    x[threadIdx.x] = half(float(x[threadIdx.x]) * a);
}
"""


def test_half_with_only_carray_fails_naming_cuda_fp16():
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.RawModule(code=HALF_SCALE).compile(arch="sm_90")
    assert HALF in str(e.value)
    # <cuda_fp16.h> included, half taken away by CUDA_NO_HALF: the same line names __half
    fp16 = HALF_SCALE.replace("cupy/carray.cuh", "cuda_fp16.h")
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.RawModule(code=fp16, options=("-DCUDA_NO_HALF",)).compile(arch="sm_90")
    assert HALF in str(e.value) and "__half" in HALF
    for header in ("cupy/float16.cuh", "cuda_fp16.h"):
        fixed = HALF_SCALE.replace("cupy/carray.cuh", header)
        cupy_rawcode.RawModule(code=fixed).compile(arch="sm_90")


def test_stub_names_in_errors_inside_cccl_are_the_librarys_not_the_kernels():
    """A stub's name in an error inside CCCL's own headers gets no stub hint (CUB's device code
    names std::mutex); the same error in the kernel's source does."""
    message = 'namespace "std" has no member "mutex"'
    inside = f"/site/cupy/_cccl/cub/cub/util_device.cuh(120): error: {message}\n"
    assert stub_hints(inside) == ""
    assert stub_hints(_log(message)).startswith("<mutex> has no device implementation")


@pytest.mark.parametrize(
    "log, headers",
    [
        ("ptxas fatal   : Unresolved extern function '_ZNSt6vectorIiSaIiEE9push_backERKi'", ["vector"]),
        ("ptxas fatal   : Unresolved extern function '_ZNSbIcN4cuda3std3__411char_traitsIcEEEC1EPKc'", ["string"]),
        ("ptxas fatal   : Unresolved extern function '_ZNSt13runtime_errorC1EPKc'", ["stdexcept"]),
        ("ptxas fatal   : Unresolved extern function '_ZNSt13basic_ostreamIcSt11char_traitsIcEElsEi'", ["ostream"]),
        ("ptxas fatal   : Unresolved extern function '_Z6helperf'", []),  # the kernel's own
        ("ptxas fatal   : Unresolved extern function '_Z11DoSomethingPf'", []),  # "So" in a name
        ("ptxas fatal   : Unresolved extern function '_Z8SbufferPi'", []),
        ("ptxas fatal   : Unresolved extern function '_Z3fooRKSs'", []),  # takes a std::string
        ("ERROR 9: Undefined reference to '_ZNKSt6vectorIiSaIiEE4sizeEv' in 'x.cubin'", ["vector"]),  # nvJitLink, -rdc
        ("ptxas fatal   : Unresolved extern function '_ZNSolsEi'", ["ostream"]),
        ("ptxas fatal   : Unresolved extern function '_ZNSt6bitsetILm8EE3setEv'", []),  # no stub class
        ("error: identifier \"vector\" is undefined", []),  # not ptxas's unresolved call
    ],
)  # fmt: skip
def test_unresolved_stub_members_name_their_header(log, headers):
    from cupy_rawcode.compiler.hints import unresolved_stub_hints

    hint = unresolved_stub_hints(log)
    assert [line.split(">")[0][1:] for line in hint.splitlines()] == headers


def _toolkit_dir(tmp_path, version):
    d = tmp_path / "cuda" / "include"
    d.mkdir(parents=True)
    if version is not None:
        (d / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION  {version}\n")
    (d / "fp8.hpp").write_text("#pragma once\nNOT_A_TYPE x;\n")
    return str(d)


@pytest.mark.parametrize(
    "version, nvrtc, where, hinted",
    [
        (13000, (12, 9), "fp8.hpp", True),  # the toolkit is newer than NVRTC
        (11080, (12, 9), "fp8.hpp", True),  # another major
        (13000, (13, 0), "fp8.hpp", False),  # the same release
        (12040, (12, 9), "fp8.hpp", False),  # an older minor of the same major
        (13000, (12, 9), None, False),  # the errors are elsewhere
        (None, (12, 9), "fp8.hpp", False),  # no toolkit there
    ],
)
def test_toolkit_hint(tmp_path, version, nvrtc, where, hinted):
    from cupy_rawcode.compiler.hints import toolkit_hint

    d = _toolkit_dir(tmp_path, version)
    file = f"{d}/{where}" if where else "<source>/kernel-0.cu"
    log = f"{file}(2): error: this declaration has no storage class or type specifier\n"
    hint = toolkit_hint(log, (str(tmp_path / "other"), d), nvrtc)
    assert bool(hint) is hinted
    if hinted:
        assert hint.startswith(f"{d} (an -I directory) holds CUDA {version // 1000}.")


def test_a_newer_toolkit_on_the_include_path_fails_naming_it(tmp_path):
    """Jitify-era code passes -I/usr/local/cuda/include; a toolkit newer than NVRTC there fails
    inside its headers, and the error says why."""
    d = _toolkit_dir(tmp_path, 99000)
    src = '#include "fp8.hpp"\nextern "C" __global__ void k(float* p) { p[0] = 1.0f; }\n'
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.compile(src, options=(f"-I{d}",), arch="sm_90")
    assert f"{d} (an -I directory) holds CUDA 99.0's headers, but NVRTC is" in str(e.value)


def test_an_include_directory_with_a_cccl_of_its_own_is_named_when_it_mixes(tree):
    """A newer CCCL on -I: the package's CCCL answers the headers both have, the -I tree the
    ones only it has, and those fail on what its own versions of the others define."""
    import cupy_rawcode
    from cupy_rawcode.ground.errors import CompileError

    root = tree(
        {
            "cccl/cuda/std/version": "#define MY_CCCL_VERSION 9009000\n",
            "cccl/cuda/std/type_traits": "#define MY_CCCL_NEW_MACRO\n",
            "cccl/cuda/new_feature.h": "#include <cuda/std/type_traits>\nMY_CCCL_NEW_MACRO int f();\n",
        }
    )
    source = '#include <cuda/new_feature.h>\nextern "C" __global__ void k() {}\n'
    with pytest.raises(CompileError) as e:
        cupy_rawcode.compile(source, arch="sm_90", options=(f"-I{root / 'cccl'}",))
    assert f"CUPY_RAWCODE_HEADER_SOURCES=cccl={root / 'cccl'}" in str(e.value)


@pytest.mark.parametrize(
    "own_cccl, failing, hinted",
    [
        (True, "{d}/cuda/new.h", True),  # an error in the -I tree's CCCL
        (True, "/site/cupy/_cccl/cub/cub/x.cuh", True),  # or in the package's
        (True, "<source>/kernel-0.cu", False),  # the errors are the kernel's own
        (False, "{d}/cuda/new.h", False),  # no CCCL of its own there
    ],
)
def test_mixed_cccl_hint(tmp_path, own_cccl, failing, hinted):
    from cupy_rawcode.compiler.hints import mixed_cccl_hint

    d = tmp_path / "inc"
    (d / "cuda" / "std").mkdir(parents=True)
    if own_cccl:
        (d / "cuda" / "std" / "version").write_text("")
    log = f"{failing.format(d=d)}(3): error: this declaration has no storage class\n"
    assert bool(mixed_cccl_hint(log, (str(d),))) is hinted
