"""Hints for names CCCL 3 removed (compiler/hints.py): code written for CCCL 2 (CuPy 13, Jitify)
names cub::Max or thrust::unary_function, and NVRTC only says the namespace has no such member;
the CompileError names the replacement."""

from __future__ import annotations

import pytest

import cupy_rawcode
from cupy_rawcode.compiler.hints import REMOVED, compile_hints, removed_name_hints

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
