import os
import re

import pytest

from cupy_rawcode import RawKernel, RawModule, compile
from cupy_rawcode.ground.errors import BadInputError
from cupy_rawcode.headers.closure import MissingHeaderError, ResolveError
from cupy_rawcode.headers.resolver import resolve
from cupy_rawcode.key.request import cache_key


def test_missing_header_names_header_chain_and_dirs(tree):
    root = tree({"i/a.h": "// one\n#include <b.h>\n", "i/b.h": '\n\n#include "gone.h"\n'})
    for exact in (True, False):
        with pytest.raises(MissingHeaderError) as e:
            c = resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)
            c.raise_for_missing()
        msg = str(e.value)
        assert '"gone.h"' in msg
        assert "user0:b.h:3" in msg and "user0:a.h:2" in msg and "<source>:1" in msg
        assert str(root / "i") in msg


def test_missing_header_before_compile_through_cache_key(tree):
    with pytest.raises(MissingHeaderError, match="nothere.h"):
        cache_key("#include <nothere.h>\n", arch="sm_90")


def test_conditional_missing_is_not_an_error_in_fast_mode(tree):
    root = tree({"i/a.h": "#ifdef _WIN32\n#include <windows.h>\n#endif\n"})
    c = resolve("#include <a.h>\n", ("-I", str(root / "i")))
    c.raise_for_missing()
    assert [m.name for m in c.missing] == ["windows.h"]


def test_unguarded_cycle_terminates(tree):
    root = tree({"i/a.h": "#include <b.h>\n", "i/b.h": "#include <a.h>\n"})
    c = resolve("#include <a.h>\n", ("-I", str(root / "i")))
    assert {h.logical for h in c.headers} == {"user0:a.h", "user0:b.h"}
    with pytest.raises(ResolveError, match="nested too deeply"):
        resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=True)


def test_non_utf8_header_names_file_and_line(tree):
    root = tree({"i/a.h": "// fine\n"})
    (root / "i" / "bad.h").write_bytes(b"// ok\n// caf\xe9\n")
    (root / "i" / "a.h").write_text("#include <bad.h>\n")
    for exact in (False, True):
        with pytest.raises(ResolveError) as e:
            resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)
        assert "bad.h:2" in str(e.value) and "UTF-8" in str(e.value)


def test_unreadable_header(tree, monkeypatch):
    root = tree({"i/a.h": "//x\n"})
    real_open, real_os_open = open, os.open

    def denying(real):
        def deny(path, *a, **k):
            if str(path).endswith("a.h"):
                raise PermissionError(13, "Permission denied")
            return real(path, *a, **k)

        return deny

    monkeypatch.setattr("builtins.open", denying(real_open))  # (root ignores chmod)
    monkeypatch.setattr(os, "open", denying(real_os_open))
    for exact in (False, True):
        with pytest.raises(ResolveError, match="cannot read .*a.h"):
            resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)


def test_unterminated_if(tree):
    root = tree({"i/a.h": "#if 1\n"})
    with pytest.raises(ResolveError, match="unterminated"):
        resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=True)


# -- issue 22 part 1: a NUL byte or a lone surrogate never silently drops code ---------------

KERNEL = 'extern "C" __global__ void k(int* p) { p[0] = 1; }\n'
NUL_SOURCE = "// one\n// a\x00b\n" + KERNEL  # NVRTC would stop at line 2, column 5


@pytest.fixture
def no_compile(tmp_path, monkeypatch):
    """A fresh cache directory and a count of NVRTC compiles: after a refused input, both must
    still be empty (nothing compiled, nothing stored)."""
    from cupy_rawcode.orchestrator import compiling as program

    cache = tmp_path / "fresh-cache"
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(cache))
    calls: list[int] = []
    real = program._nvrtc_compile
    monkeypatch.setattr(program, "_nvrtc_compile", lambda *a: (calls.append(1), real(*a))[1])
    yield
    assert calls == []
    assert not [p for p in (cache / "entries").rglob("*") if p.is_file()]
    assert not (cache / "index").exists()


def _file(tmp_path, data: bytes, name: str = "k.cu") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _compile_for_cupy(source, names=None):
    from cupy_rawcode.hook.install import _compile_for_cupy as route

    return route(source, (), "sm_90", names, None)


def _warmup_failure(kernel) -> None:
    """warmup() reports a refused kernel as failed, with the message, and compiles nothing."""
    import cupy_rawcode

    summary = cupy_rawcode.warmup(kernel, arch="sm_90", workers=1)
    assert not summary.compiled and len(summary.failed) == 1
    raise BadInputError(summary.failed[0].error)


PART1 = [
    # (how, call, exception, message)
    ("compile", lambda p: compile(NUL_SOURCE, arch="sm_90"), BadInputError, "<source>:2:5: NUL"),
    (
        "compile option",
        lambda p: compile(KERNEL, arch="sm_90", options=("-DY=1", "-DX=a\0b")),
        BadInputError,
        r"options\[1\] '-DX=a\\x00b' has a NUL byte .* would read only '-DX=a'",
    ),
    (
        "compile surrogate",
        lambda p: compile("// caf\udce9\n" + KERNEL, arch="sm_90"),
        BadInputError,
        "<source>:1:7: lone surrogate U[+]DCE9",
    ),
    (
        "compile name str",
        lambda p: compile(KERNEL, arch="sm_90", name_expressions="k"),
        TypeError,
        r"not a str \('k': it would be split into characters\); write \('k',\)",
    ),
    (
        "compile name NUL",
        lambda p: compile(KERNEL, arch="sm_90", name_expressions=("k", "t<\0>")),
        BadInputError,
        r"name_expressions\[1\] 't<\\x00>' has a NUL byte",
    ),
    ("cache_key", lambda p: cache_key(NUL_SOURCE, arch="sm_90"), BadInputError, "<source>:2:5"),
    ("resolve", lambda p: resolve(NUL_SOURCE), BadInputError, "<source>:2:5: NUL"),
    (
        "RawKernel",
        lambda p: RawKernel(NUL_SOURCE, "k").compile(arch="sm_90"),
        BadInputError,
        "<source>:2:5: NUL",
    ),
    (  # lines as given, not as translate_cucomplex's prepended includes shift them
        "RawKernel translate_cucomplex",
        lambda p: RawKernel(NUL_SOURCE, "k", translate_cucomplex=True).compile(arch="sm_90"),
        BadInputError,
        "<source>:2:5: NUL",
    ),
    (
        "RawKernel option",
        lambda p: RawKernel(KERNEL, "k", options=("-I\0x",)).compile(arch="sm_90"),
        BadInputError,
        r"options\[0\] '-I\\x00x'",
    ),
    (
        "RawKernel name",
        lambda p: RawKernel(KERNEL, "k\0x").compile(arch="sm_90"),
        BadInputError,
        "kernel name 'k",
    ),
    (
        "RawModule code",
        lambda p: RawModule(code=NUL_SOURCE).compile(arch="sm_90"),
        BadInputError,
        "<source>:2:5: NUL",
    ),
    (
        "RawModule name str",
        lambda p: RawModule(code=KERNEL, name_expressions="k"),
        TypeError,
        "split into characters",
    ),
    (
        "RawModule get_function",
        lambda p: RawModule(code=KERNEL).get_function("k\0"),
        BadInputError,
        "kernel name 'k",
    ),
    (
        "RawModule path",
        lambda p: RawModule(path=_file(p, NUL_SOURCE.encode())).compile(arch="sm_90"),
        BadInputError,
        r"k\.cu:2:5: NUL byte",
    ),
    (
        "RawModule path translate_cucomplex",
        lambda p: RawModule(path=_file(p, NUL_SOURCE.encode()), translate_cucomplex=True).compile(
            arch="sm_90"
        ),
        BadInputError,
        r"k\.cu:2:5: NUL byte",
    ),
    (
        "RawModule path not UTF-8",
        lambda p: RawModule(path=_file(p, b"// ok\n// caf\xe9\n")).compile(arch="sm_90"),
        BadInputError,
        r"k\.cu:2:7: not UTF-8 text \(byte 0xe9\)",
    ),
    ("install() route", lambda p: _compile_for_cupy(NUL_SOURCE), BadInputError, "<source>:2:5"),
    (
        "install() route name",
        lambda p: _compile_for_cupy(KERNEL, ("k\0",)),
        BadInputError,
        r"name_expressions\[0\]",
    ),
    (
        "warmup path",
        lambda p: _warmup_failure(RawModule(path=_file(p, NUL_SOURCE.encode()))),
        BadInputError,
        r"k\.cu:2:5: NUL byte",
    ),
]


@pytest.mark.parametrize("how, call, exc, message", PART1, ids=[c[0] for c in PART1])
def test_nul_and_surrogates_are_refused_before_nvrtc(how, call, exc, message, tmp_path, no_compile):
    with pytest.raises(exc, match=message):
        call(tmp_path)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compile", "{f}", "--arch", "sm_90"], "{f}:2:5: NUL byte"),
        (["key", "{f}", "--arch", "sm_90"], "{f}:2:5: NUL byte"),
        (["deps", "{f}"], "{f}:2:5: NUL byte"),
        (["compile", "{ok}", "--arch", "sm_90", "-DX=a\0b"], r"options\[0\] '-DX=a\\x00b'"),
        (["compile", "{ok}", "--arch", "sm_90", "--name-expression", "k\0"], "name_expressions"),
    ],
)
def test_cli_refuses_a_nul_naming_the_file(argv, message, tmp_path, no_compile, capsys):
    from cupy_rawcode.cli import main

    files = {"f": _file(tmp_path, NUL_SOURCE.encode()), "ok": _file(tmp_path, b"//\n", "ok.cu")}
    assert main([a.format(**files) for a in argv]) == 2
    err = capsys.readouterr().err
    assert re.search(message.format(**{k: re.escape(v) for k, v in files.items()}), err), err


def test_cli_prebuild_reports_a_nul_and_fails(tmp_path, no_compile, capsys):
    from cupy_rawcode.cli import main

    f = _file(tmp_path, NUL_SOURCE.encode())
    assert main(["prebuild", f, "--arch", "sm_90", "-j", "1"]) == 1
    err = capsys.readouterr().err
    assert f"{f}:2:5: NUL byte" in err


def test_a_nul_in_a_header_is_reported_by_nvrtc_with_its_file_and_line(tree):
    """NVRTC reads headers from disk whole (it is given none in memory): a NUL in a header's
    code is its own error naming the header and line, and one in a comment is ignored, so no
    code is dropped and the resolver leaves headers to it."""
    from cupy_rawcode.ground.errors import CompileError

    root = tree({"i/h.h": "// fine\n"})
    (root / "i" / "h.h").write_bytes(b"// a\0b\n#define VAL 3\0 + 4\n")
    src = "#include <h.h>\n" + KERNEL.replace("1;", "VAL;")
    with pytest.raises(CompileError, match=r"h\.h\(2\): error: invalid character") as e:
        compile(src, arch="compute_90", target="ptx", options=("-I", str(root / "i")))
    assert "h.h(1)" not in e.value.log  # the NUL in the comment: ignored


def test_a_valid_source_still_compiles_to_its_kernel():
    """The checks refuse only what they name: non-ASCII text and a kernel compile as before."""
    from cupy_rawcode.compiler.strip import entry_functions

    code = compile("// café\n" + KERNEL, arch="sm_90").code
    assert entry_functions(bytes(code), "cubin") == ["k"]


# -- issue 22 part 7: architecture and option conflicts, undefined kernel names --------------

CPP_KERNEL = (
    "__device__ __noinline__ int helper(int x) { return 2 * x; }\n"
    "__global__ void cpp(int* p) { p[0] = helper(p[1]); }\n"
    'extern "C" __global__ void k(int* p) { p[0] = 1; }\n'
)
TEMPLATE = "template <typename T> __global__ void twice(T* x) { x[0] *= 2; }\n"
CONFLICT = r"arch='sm_90' conflicts with the option -arch=sm_80"
UNSUPPORTED = r"architecture '{}' is not one NVRTC \d+\.\d+ can compile for; it supports sm_\d+, "


def _mangled_kernel(name: str):
    """A RawKernel of a RawModule's name expression, as get_function makes it (without a GPU)."""
    m = RawModule(code=TEMPLATE, name_expressions=["twice<float>"])
    return RawKernel._from_build(m._build, name, False)


def _on_device_90(monkeypatch):
    """compile() without arch= as on an sm_90 GPU: the device's code is compiled, and checked
    before anything would load it."""
    import cupy_rawcode.kernel

    monkeypatch.setattr(cupy_rawcode.kernel, "_compute_capability", lambda: 90)
    monkeypatch.setattr(RawKernel, "_kernel", lambda self, log=None: pytest.fail("loaded"))


PART7 = [
    (
        "RawKernel.compile(arch=) against -arch",
        lambda mp: RawKernel(KERNEL, "k", options=("-arch=sm_80",)).compile(arch="sm_90"),
        ValueError,
        CONFLICT,
    ),
    (
        "RawModule.compile(arch=) against -arch",
        lambda mp: RawModule(code=KERNEL, options=("-arch=sm_80",)).compile(arch="sm_90"),
        ValueError,
        CONFLICT,
    ),
    (
        "compile() against -arch",
        lambda mp: compile(KERNEL, arch="sm_90", options=("-arch=sm_80",)),
        ValueError,
        CONFLICT,
    ),
    ("sm_999", lambda mp: compile(KERNEL, arch="sm_999"), ValueError, UNSUPPORTED.format("sm_999")),
    ("sm_9", lambda mp: compile(KERNEL, arch=9), ValueError, UNSUPPORTED.format("sm_9")),
    (
        "sm_35",
        lambda mp: RawKernel(KERNEL, "k").compile(arch="sm_35"),
        ValueError,
        UNSUPPORTED.format("sm_35"),
    ),
    (
        "compute_35",
        lambda mp: compile(KERNEL, arch="compute_35", target="ptx"),
        ValueError,
        UNSUPPORTED.format("compute_35"),
    ),
    (
        "-arch=sm_999",
        lambda mp: compile(KERNEL, arch=None, options=("-arch=sm_999",)),
        ValueError,
        UNSUPPORTED.format("sm_999"),
    ),
]


@pytest.mark.parametrize("how, call, exc, message", PART7, ids=[c[0] for c in PART7])
def test_arch_conflicts_and_unsupported_archs_fail_before_nvrtc(
    how, call, exc, message, monkeypatch, no_compile
):
    with pytest.raises(exc, match=message):
        call(monkeypatch)


@pytest.mark.parametrize(
    "make, arch, message",
    [
        (lambda: RawKernel(KERNEL, "nope"), "sm_90", r"kernel 'nope' .*\(cubin\); it defines k \("),
        (lambda: RawKernel(KERNEL, "nope"), "compute_90", r"\(ptx\); it defines k \("),
        (lambda: RawKernel(KERNEL, "nope"), None, r"\(cubin\); it defines k \("),
        (  # a C++ kernel is found by its mangled name; a device function is no kernel
            lambda: RawKernel(CPP_KERNEL, "cpp"),
            "sm_90",
            r"kernel 'cpp' .* it defines _Z3cppPi, k \(",
        ),
        (lambda: RawKernel(CPP_KERNEL, "_Z6helperi"), "compute_90", r"it defines _Z3cppPi, k \("),
        (  # a name expression is shown with its lowered name
            lambda: _mangled_kernel("twice<int>"),
            "sm_90",
            r"it defines twice<float> \(_Z5twiceIfEvPT_\) \(",
        ),
        (lambda: RawKernel("// nothing\n", "k"), "sm_90", r"it defines no kernel \("),
        (  # linked with the device runtime: its own kernels are not listed
            lambda: RawKernel(KERNEL, "nope", options=("-rdc=true",)),
            "sm_90",
            r"\(cubin\); it defines k \(",
        ),
    ],
)
def test_compile_names_the_kernels_of_a_module_without_the_name(make, arch, message, monkeypatch):
    _on_device_90(monkeypatch)
    with pytest.raises(BadInputError, match=message):
        make().compile(arch=arch)


@pytest.mark.parametrize(
    "make, arch",
    [
        (lambda: RawKernel(KERNEL, "k"), "sm_90"),
        (lambda: RawKernel(KERNEL, "k", options=("-arch=sm_90",)), "sm_90"),
        (lambda: RawKernel(CPP_KERNEL, "_Z3cppPi"), "compute_90"),
        (lambda: _mangled_kernel("twice<float>"), "sm_90"),
        (lambda: _mangled_kernel("_Z5twiceIfEvPT_"), "sm_90"),
    ],
)
def test_compile_accepts_a_defined_kernel(make, arch):
    make().compile(arch=arch)


BOM_KERNEL = 'extern "C" __global__ void k(int* p) { *p = 7; }\n'


def test_a_source_starting_with_a_bom_compiles_keyed_as_without_it(tmp_path):
    """nvcc skips a leading UTF-8 byte order mark; NVRTC would read it as four bad tokens."""
    assert cache_key("\ufeff" + BOM_KERNEL, arch="sm_80") == cache_key(BOM_KERNEL, arch="sm_80")
    assert compile("\ufeff" + BOM_KERNEL, arch="sm_80", target="ptx").code
    path = tmp_path / "k.cu"
    path.write_bytes(b"\xef\xbb\xbf" + BOM_KERNEL.encode())
    from cupy_rawcode.cli import main

    assert main(["compile", str(path), "--arch", "sm_80", "--target", "ptx"]) == 0


def test_a_header_starting_with_a_bom_is_reported_at_its_first_byte(tree):
    """NVRTC reads headers from disk itself and rejects a BOM (nvcc skips it): it is reported
    as file:1:1 with the include chain, before NVRTC runs."""
    root = tree({"i/a.h": "#include <b.h>\n"})
    (root / "i" / "b.h").write_bytes(b"\xef\xbb\xbf#define VAL 3\n")
    for exact in (False, True):
        with pytest.raises(ResolveError) as e:
            resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)
        msg = str(e.value)
        assert f"{root / 'i' / 'b.h'}:1:1:" in msg and "byte order mark" in msg
        assert "user0:a.h:1" in msg
    with pytest.raises(ResolveError, match="byte order mark"):
        compile("#include <a.h>\n" + BOM_KERNEL, arch="sm_80", options=("-I", str(root / "i")))


def _symlink_loop(path):
    os.symlink(path.name, path)  # a link to itself


# an #include that names something other than a file says what it is
NOT_FILES = [
    ("a directory", lambda p: p.mkdir(), "is a directory"),
    ("a symlink loop", _symlink_loop, "is a symlink loop"),
]


@pytest.mark.parametrize("what, make, words", NOT_FILES, ids=[c[0] for c in NOT_FILES])
def test_an_include_of_a_directory_or_a_symlink_loop_says_what_it_is(what, make, words, tree):
    root = tree({"i/a.h": '// one\n#include "thing.h"\n'})
    make(root / "i" / "thing.h")
    for exact in (False, True):
        with pytest.raises(MissingHeaderError) as e:
            resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact).raise_for_missing()
        msg = str(e.value)
        assert f"{root / 'i' / 'thing.h'} {words}" in msg, msg
        assert "user0:a.h:2" in msg and "<source>:1" in msg and "not found" not in msg
