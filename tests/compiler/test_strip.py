"""Stripping unreferenced library globals (strip.py): the rules in tables, then real compiles
(CPU: NVRTC and nvJitLink need no GPU)."""

import logging

import pytest
from conftest import corpus

from cupy_rawcode import CompileError, cli
from cupy_rawcode.compiler import nvrtc, strip
from cupy_rawcode.compiler.strip import data_symbols, in_library, wanted
from cupy_rawcode.key.request import cache_key, context, make_request
from cupy_rawcode.orchestrator.compiling import compile_request
from cupy_rawcode.orchestrator.flow import compile as rc_compile

CUB = "_ZN3cub17CUB_200802_SM_9006detail9ConstantsILi4EE5valueE"
STD = "_ZN4cuda3std3__417integral_constantIbLb1EE5valueE"
INTERNAL = "_ZN35_INTERNAL_00000000_9_kernel_cu_kern4cuda3std3__48in_placeE"


@pytest.mark.parametrize(
    "name, library",
    [
        (STD, True),
        (CUB, True),
        ("_ZN6thrust6detail4trueE", True),
        ("_ZNSt17integral_constantIbLb1EE5valueE", True),
        ("_ZN15__cccl_internal30__is_non_narrowing_convertibleIffvE5valueE", True),
        ("_ZN2nv6target3sm_E", True),
        (INTERNAL, True),  # internal linkage, library inside
        ("_ZN35_INTERNAL_00000000_9_kernel_cu_kern4user6tablesE", False),
        ("_ZN4user5tableE", False),  # a user namespace
        ("_ZN5cudax4flagE", False),  # a prefix of 'cuda' is not 'cuda'
        ("_ZN3Cfg1NE", False),  # a user class's constexpr member
        ("_ZL7counter", False),
        ("counter", False),  # extern "C"
        ("_ZN", False),
        ("_ZNx", False),  # malformed: never a library
    ],
)
def test_in_library(name, library):
    assert in_library(name) is library


def _ptx(*lines: str) -> str:
    return "\n".join([".version 8.8", ".target sm_90", ".address_size 64", "", *lines, ""])


BODY = [
    ".visible .entry kern(",
    ".param .u64 kern_param_0",
    ")",
    "{",
    "\tmov.u64 \t%rd1, {ref};",
    "\tret;",
    "}",
]


def _body(ref: str) -> list[str]:
    return [line.replace("{ref}", ref) for line in BODY]


@pytest.mark.parametrize(
    "decls, ref, keep, gone",
    [
        # removed: a library global nothing names
        ([f".global .align 1 .u8 {STD} = 1;"], "0", (), {STD}),
        ([f".global .align 4 .b8 {CUB}[4] = {{4, 0, 0, 0}};"], "0", (), {CUB}),
        ([f".global .align 1 .b8 {INTERNAL}[1];"], "0", (), {INTERNAL}),
        # kept: named by code
        ([f".global .align 1 .u8 {STD} = 1;"], STD, (), set()),
        # kept: named only by another global's initializer (which is itself referenced)
        (
            [
                f".global .align 1 .u8 {STD} = 1;",
                f".global .align 8 .u64 _ZN4user1pE = generic({STD});",
            ],
            "_ZN4user1pE",
            (),
            set(),
        ),
        # kept: a user variable nobody references (get_global may want it)
        ([".global .align 4 .u32 _ZN4user5tableE;"], "0", (), set()),
        # kept: visible, extern or weak library declarations
        ([f".visible .global .align 1 .u8 {STD} = 1;"], "0", (), set()),
        ([f".extern .global .align 1 .u8 {STD};"], "0", (), set()),
        ([f".weak .global .align 1 .u8 {STD} = 1;"], "0", (), set()),
        # kept: a lowered name expression
        ([f".global .align 1 .u8 {STD} = 1;"], "0", (STD,), set()),
        # mixed: only the unreferenced library one goes
        ([f".global .align 1 .u8 {STD} = 1;", f".global .align 4 .b8 {CUB}[4];"], CUB, (), {STD}),
    ],
)
def test_strip_removes_exactly_the_unreferenced_library_globals(decls, ref, keep, gone):
    ptx = _ptx(*decls, *_body(ref))
    out, removed = strip.strip(ptx, frozenset(keep))
    assert removed == len(gone)
    for line in decls:
        name = next(
            w for w in line.replace(";", " ").replace("[", " ").split() if w.startswith("_Z")
        )
        assert (line in out) is (name not in gone), line
    assert all(line in out for line in _body(ref))


@pytest.mark.parametrize(
    "arch, virtual",
    [
        ("sm_90", "compute_90"),
        ("sm_90a", "compute_90a"),
        ("sm_100f", "compute_100f"),
        ("compute_80", "compute_80"),
    ],
)
def test_virtual_arch_of_the_ptx_step(arch, virtual):
    assert nvrtc.virtual_arch(arch) == virtual


@pytest.mark.parametrize(
    "options, target, is_ptx, on",
    [
        ((), "cubin", False, True),
        (("-ftz=true",), "cubin", False, True),  # CuPy's default, front end only
        (("--use_fast_math", "-restrict", "--diag-suppress=177"), "cubin", False, True),
        ((), "ptx", False, True),
        ((), "ltoir", False, False),  # LTO IR is linked elsewhere
        ((), "cubin", True, False),  # PTX input is the user's own
        (("-G",), "cubin", False, False),  # options that change ptxas's work
        (("-lineinfo",), "cubin", False, False),
        (("-maxrregcount=32",), "cubin", False, False),
        (("-Xptxas", "-v"), "cubin", False, False),
        (("-rdc=true",), "cubin", False, False),
        (("--some-future-flag",), "cubin", False, False),  # unknown: keep NVRTC's cubin
    ],
)
def test_wanted(options, target, is_ptx, on):
    assert wanted(options, target, is_ptx) is on


def test_wanted_is_off_with_the_environment_switch(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_STRIP", "0")
    assert not wanted((), "cubin", False)
    monkeypatch.setenv("CUPY_RAWCODE_STRIP", "maybe")
    with pytest.raises(ValueError, match="CUPY_RAWCODE_STRIP"):
        wanted((), "cubin", False)


def test_key_differs_when_stripping_is_turned_off(monkeypatch):
    src = corpus("std_traits.cu")
    on = cache_key(src, arch="sm_90")
    assert cache_key(src, arch="sm_90") == on
    monkeypatch.setenv("CUPY_RAWCODE_STRIP", "0")
    assert cache_key(src, arch="sm_90") != on


@pytest.mark.parametrize("name", ["block_reduce.cu", "radix_sort.cu", "std_traits.cu"])
def test_cub_cubin_keeps_no_library_globals_and_its_kernel(name, tmp_path, monkeypatch):
    src = corpus(name)
    code = bytes(rc_compile(src, arch="sm_90", cache_dir=tmp_path / "on").code)
    monkeypatch.setenv("CUPY_RAWCODE_STRIP", "0")
    full = bytes(rc_compile(src, arch="sm_90", cache_dir=tmp_path / "off").code)
    kept = [n for n in data_symbols(code) if in_library(n)]
    assert kept == [] and len([n for n in data_symbols(full) if in_library(n)]) > 100
    assert code[:4] == b"\x7fELF" and b"kern\0" in code and len(code) < len(full) / 4


def test_stripped_ptx_target_has_no_unreferenced_library_globals(tmp_path):
    ptx = bytes(
        rc_compile(corpus("block_reduce.cu"), arch="sm_90", target="ptx", cache_dir=tmp_path).code
    ).decode()
    assert ".entry kern(" in ptx
    assert strip.strip(ptx) == (ptx, 0)  # nothing left to strip
    assert ptx.count("\n.global") < 5


USER_GLOBALS = r"""
#include <cuda/std/type_traits>
__device__ int unused_visible;
static __device__ int unused_static;
namespace user { __device__ float table[4]; }
extern "C" __global__ void kern(int* y) { y[0] = cuda::std::is_same<int, int>::value; }
"""


def test_user_globals_survive_even_unreferenced(tmp_path):
    names = data_symbols(bytes(rc_compile(USER_GLOBALS, arch="sm_90", cache_dir=tmp_path).code))
    assert {"unused_visible", "_ZN4user5tableE"} <= set(names)
    assert any("unused_static" in n for n in names)
    assert not [n for n in names if in_library(n)]


def test_without_a_matching_nvjitlink_nvrtc_makes_the_cubin(tmp_path, monkeypatch, caplog):
    """nvJitLink of another CUDA release (or none): the cubin is NVRTC's, whole, with one log
    line, and the compile still succeeds."""

    class OtherRelease(strip._NvJitLink):
        def get(self):
            self.loaded, self.module, self.version = True, object(), (9, 9)
            return self.module

    state = OtherRelease()
    state.get()
    monkeypatch.setattr(strip, "nvjitlink", state)
    calls = []
    orig = nvrtc._nvrtc
    monkeypatch.setattr(nvrtc, "_nvrtc", lambda req, *a: (calls.append(req.arch), orig(req, *a))[1])
    with caplog.at_level(logging.WARNING):
        code = bytes(rc_compile(corpus("std_traits.cu"), arch="sm_90", cache_dir=tmp_path).code)
    assert calls == ["sm_90"]  # known unusable: straight to NVRTC's cubin, no PTX detour
    assert len([n for n in data_symbols(code) if in_library(n)]) > 100
    state.loaded = False  # not yet known: the PTX detour is tried, then NVRTC makes the cubin
    calls.clear()
    code = bytes(rc_compile(corpus("std_traits.cu"), arch="sm_90", cache_dir=tmp_path / "2").code)
    assert calls == ["compute_90", "sm_90"] and code[:4] == b"\x7fELF"
    req = make_request(corpus("complex.cu"), arch="sm_90")
    assert compile_request(req).made == {"stripped": 0}  # NVRTC's cubin, nothing stripped
    assert "nvJitLink is 9.9" in caplog.text


TOO_MUCH_SHARED = r"""
#include <cuda/std/type_traits>
extern "C" __global__ void k(float* x) {
  __shared__ float s[18432];  // 72 KiB of static shared memory: 48 KiB is the most
  s[threadIdx.x] = x[threadIdx.x] * cuda::std::is_same<float, float>::value;
  __syncthreads();
  x[threadIdx.x] = s[threadIdx.x + 1];
}
"""


def test_a_program_the_assembler_refuses_is_the_codes_error_not_nvjitlinks(monkeypatch):
    """ptxas (inside nvJitLink) refusing the program is the code's own error: NVRTC's error is
    raised, no line blames nvJitLink, and the next kernels are still stripped."""
    fresh = strip._NvJitLink()
    if fresh.get() is None:
        pytest.skip("no nvJitLink here")
    monkeypatch.setattr(strip, "nvjitlink", fresh)
    blamed = []
    monkeypatch.setattr(strip, "_warn_once", blamed.append)
    with pytest.raises(CompileError, match="uses too much shared data"):
        compile_request(make_request(TOO_MUCH_SHARED, arch="sm_90"))
    assert blamed == [] and not fresh.failed
    made = compile_request(make_request(corpus("block_reduce.cu"), arch="sm_90")).made
    assert made["assembler"].startswith("nvJitLink ") and made["stripped"] > 100


def test_the_entry_and_the_cli_say_what_was_stripped(tmp_path, capsys):
    """A miss records how many globals went and what assembled the cubin; a hit reads it back
    from the entry, and `cupy-rawcode compile` prints it."""
    req = make_request(corpus("block_reduce.cu"), arch="sm_90")
    miss, hit = compile_request(req), compile_request(req)
    assert not miss.hit and hit.hit and miss.made == hit.made
    assert miss.made["stripped"] > 100 and miss.made["assembler"].startswith("nvJitLink ")
    assert compile_request(make_request(corpus("plain.cu"), arch="sm_90")).made == {"stripped": 0}
    src = tmp_path / "k.cu"
    src.write_text(corpus("std_traits.cu"))
    for _ in range(2):
        assert cli.main(["compile", str(src), "--arch", "sm_90"]) == 0
        out = capsys.readouterr().out
        assert "unreferenced library globals, cubin by nvJitLink" in out


LOCAL_ARRAY = r"""
#include <cuda/std/type_traits>
__constant__ float coef[16];
extern "C" __global__ void k(const float* x, float* y, int n) {
  float buf[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int j = 0; j < 32; ++j) buf[j] = v * coef[j % 16] + j;
  if (i < n) y[i] = buf[(unsigned)(fabsf(v) * 7.0f) % 32];
}
"""


def test_a_cubin_never_needs_more_stack_or_registers_than_nvrtcs_own():
    # nvJitLink assembles relocatable code (ptxas -c): it keeps buf[] in 128 bytes of local
    # memory, where NVRTC's whole-program ptxas keeps it in registers; NVRTC's cubin is used
    from cuda.core import Program, ProgramOptions

    req = make_request(LOCAL_ARRAY, arch="sm_90")
    result = compile_request(req)
    own = (
        Program(
            LOCAL_ARRAY,
            "c++",
            ProgramOptions(
                arch="sm_90",
                std="c++17",
                device_as_default_execution_space=True,
                include_path=[d.path for d in context(req).dirs],
                pre_include=["cupy_rawcode/workaround.h"],
            ),
        )
        .compile("cubin")
        .code
    )
    assert strip.function_resources(result.code) == strip.function_resources(bytes(own))
    assert strip.function_resources(result.code)["k"][1:] == (0, 0)  # no stack frame
    assert result.made["kept"].startswith("nvJitLink's cubin needed more")
    block = compile_request(make_request(corpus("block_reduce.cu"), arch="sm_90"))
    assert "kept" not in block.made and not strip.uses_stack(block.code)


def test_nothing_to_strip_and_local_arrays_make_nvrtcs_own_cubin_at_once(tmp_path, monkeypatch):
    """A source with headers but no library globals, whose PTX keeps an array in local memory:
    nvJitLink's cubin would gain nothing and may need a stack (then NVRTC's is compiled as
    well): NVRTC's own cubin is made at once, one compile after the PTX, no nvJitLink."""
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")  # one compile at a time, to count them
    (tmp_path / "mine.h").write_text("#define WIDTH 32\n")
    source = '#include "mine.h"\n' + LOCAL_ARRAY.split("\n", 2)[2].replace("32", "WIDTH")
    assembled, compiles = [], []
    monkeypatch.setattr(strip, "assemble", lambda *a: assembled.append(a))
    real = nvrtc._nvrtc
    monkeypatch.setattr(
        nvrtc, "_nvrtc", lambda req, *a: compiles.append(req.target) or real(req, *a)
    )
    req = make_request(source, arch="sm_90", options=(f"-I{tmp_path}",))
    result = compile_request(req)
    assert result.made == {"stripped": 0} and not assembled
    assert compiles == ["ptx", "cubin"]
    assert strip.function_resources(result.code)["k"][1:] == (0, 0)  # no stack frame


@pytest.mark.parametrize(
    "mine, theirs, expected",
    [
        ({"k": (32, 0, 0)}, {"k": (32, 0, 0)}, True),
        ({"k": (31, 128, 128)}, {"k": (39, 0, 0)}, False),  # fewer registers, but local memory
        ({"k": (40, 0, 0)}, {"k": (39, 0, 0)}, False),
        ({"k": (30, 0, 0)}, {"k": (39, 0, 0)}, True),
        ({"k": (30, 16, 16)}, {"k": (39, 16, 32)}, True),
        ({"k": (30, 0, 0)}, {"k": (39, 0, 0), "g": (8, 0, 0)}, False),  # a function missing
    ],
)
def test_no_worse(monkeypatch, mine, theirs, expected):
    monkeypatch.setattr(strip, "function_resources", lambda c: mine if c == b"mine" else theirs)
    assert strip.no_worse(b"mine", b"theirs") is expected


def test_a_compile_error_in_the_ptx_step_says_why_the_arch_is_virtual(tmp_path):
    src = "#include <cuda/std/type_traits>\n__global__ void k() {\n  nope();\n}\n"
    with pytest.raises(nvrtc.CompileError) as e:
        rc_compile(src, arch="sm_90", cache_dir=tmp_path)
    text = str(e.value)
    assert ">     3 |   nope();" in text and "-arch=compute_90" in text
    assert "the first step of a cubin for sm_90" in text
