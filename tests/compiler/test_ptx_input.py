"""PTX given as the source is linked, not compiled: the options that steer the assembler apply
to it (each gives another cubin than none, as cuda.core's own linker does given them), the C++
compiler's change nothing."""

from __future__ import annotations

import pytest

import cupy_rawcode
from cupy_rawcode.compiler.ptx_input import link_options
from cupy_rawcode.compiler.strip import function_resources

pytest.importorskip("cuda.core")

CPP = r"""
extern "C" __global__ void k(float* p, float a) {
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = p[i * 7] * a + p[i * 3];
  float s = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) s += acc[i] * acc[31 - i];
  p[0] = s;
}
"""


@pytest.fixture(scope="module")
def ptx(tmp_path_factory) -> str:
    cache = tmp_path_factory.mktemp("ptx-cache")
    made = cupy_rawcode.compile(CPP, arch="compute_90", target="ptx", cache_dir=cache)
    text = bytes(made.code).decode()
    assert text.lstrip().startswith("//") or text.startswith(".version")
    return text


def _cubin(ptx: str, options: tuple[str, ...], cache) -> bytes:
    return bytes(cupy_rawcode.compile(ptx, arch="sm_90", options=options, cache_dir=cache).code)


@pytest.mark.parametrize(
    "options", [("-maxrregcount=16",), ("-G",), ("-lineinfo",), ("-Xptxas=-O0",)], ids=repr
)
def test_an_assembler_option_changes_a_ptx_sources_cubin(ptx, options, tmp_path):
    assert _cubin(ptx, options, tmp_path) != _cubin(ptx, (), tmp_path)


def test_a_register_bound_holds_for_a_ptx_source(ptx, tmp_path):
    free = function_resources(_cubin(ptx, (), tmp_path))["k"][0]
    bound = function_resources(_cubin(ptx, ("-maxrregcount=32",), tmp_path))["k"][0]
    assert bound <= 32 < free


def test_the_c_compilers_options_change_nothing_in_a_ptx_source(ptx, tmp_path):
    plain = _cubin(ptx, (), tmp_path)
    assert _cubin(ptx, ("-DX=1", "-std=c++20", "--use_fast_math"), tmp_path) == plain


@pytest.mark.parametrize(
    "passthrough, fields",
    [
        (("-maxrregcount=32",), {"max_register_count": 32}),
        (("--maxrregcount=8", "-lineinfo"), {"max_register_count": 8, "lineinfo": True}),
        (("--device-debug",), {"debug": True}),
        (("-Xptxas=-v", "--ptxas-options=-O1"), {"ptxas_options": ["-v", "-O1"]}),
        (("-dopt=on",), {"device_code_optimize": True}),
        (("--use_fast_math", "-ftz=true"), {}),
    ],
)
def test_link_options_read_the_assemblers_options(passthrough, fields):
    assert link_options(passthrough) == fields


def test_a_register_bound_that_is_no_number_is_named():
    with pytest.raises(ValueError, match="-maxrregcount=many"):
        link_options(("-maxrregcount=many",))


def test_an_option_the_assembler_refuses_is_a_compile_error(ptx, tmp_path):
    """As the same option on C++ source: a CompileError (CuPy's CompileException)."""
    from cupy_rawcode import CompileError

    with pytest.raises(CompileError):
        _cubin(ptx, ("-Xptxas=--no-such-ptxas-option",), tmp_path)
