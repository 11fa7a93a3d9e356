"""A ``__has_include`` probe however its operand is written: whether the header exists changes
what NVRTC compiles, so the key changes when it appears or goes (checked against NVRTC)."""

import pytest
from conftest import bare_nvrtc, nvrtc_defines

import cupy_rawcode

TAIL = '\nstatic_assert(false, "THERE");\n#else\nstatic_assert(false, "GONE");\n#endif\n'
# name -> the condition line(s) before TAIL
PROBES = {
    "a name": '#if __has_include("h.h")',
    "a macro naming it": '#define HH "h.h"\n#if __has_include(HH)',
    "a function-like macro naming it": "#define HH(x) <x.h>\n#if __has_include(HH(h))",
    "a backslash-newline before the name": '#if __has_include(\\\n"h.h")',
    "a comment before the name": '#if __has_include(/* c */ "h.h")',
    "a comment after the word": '#if __has_include /**/ ("h.h")',
    "a backslash-newline inside the word": '#if __has_incl\\\nude("h.h")',
    "a wrapper macro of another name": '#define HAS(x) __has_include(x)\n#if HAS("h.h")',
    "a wrapper macro given a macro": (
        '#define HAS(x) __has_include(x)\n#define HH "h.h"\n#if HAS(HH)'
    ),
    "a variadic wrapper": '#define HAS(...) __has_include(__VA_ARGS__)\n#if HAS("h.h")',
    "__has_include_next": "#if __has_include_next(<h.h>)",
    "a wrapper that builds the name": (
        "#define S(x) #x\n#define Q(x) S(x.h)\n#define HAS(n) __has_include(Q(n))\n#if HAS(h)"
    ),
    "a wrapper that stringizes": "#define HAS(x) __has_include(#x)\n#if HAS(h.h)",
    "a wrapper that pastes": "#define HAS(n) __has_include(<n##.h>)\n#if HAS(h)",
    "a wrapper of a wrapper": (
        '#define HAS(x) __has_include(x)\n#define HAS2(x) HAS(x)\n#if 0\n#elif HAS2("h.h")'
    ),
    "a wrapper used on a continued #if line": (
        '#define HAS(x) __has_include(x)\n#if 0 || \\\n    HAS("h.h")'
    ),
    "a wrapper used on an #if spelled %:if": '#define HAS(x) __has_include(x)\n%:if HAS("h.h")',
    "a comment between a wrapper and its call": (
        '#define HAS(x) __has_include(x)\n#if HAS /**/ ("h.h")'
    ),
    "a character literal argument with a quote": (
        '#define HAS(a, b) __has_include(b)\n#if HAS(\'"\', "h.h")'
    ),
    "a GNU named variadic wrapper": '#define HAS(args...) __has_include(args)\n#if HAS("h.h")',
    "a wrapper written over two lines": ('#define HAS(x) \\\n    __has_include(x)\n#if HAS("h.h")'),
    "an object-like alias of __has_include": '#define HI __has_include\n#if HI("h.h")',
    "GNU's comma dropped before an empty __VA_ARGS__": (
        "#define S(...) #__VA_ARGS__\n#define X(...) S(__VA_ARGS__)\n"
        "#define HV(a, ...) __has_include(X(a, ## __VA_ARGS__))\n#if HV(h.h)"
    ),
    "an object-like use of a wrapper": (
        '#define HAS(x) __has_include(x)\n#define HAVE HAS("h.h")\n#if HAVE'
    ),
}


@pytest.mark.parametrize("name", sorted(PROBES))
def test_the_key_changes_when_a_probed_header_appears_or_goes(name, tree):
    """Keyed as a probe whatever this NVRTC makes of it: where it has no
    ``__has_include_next``, its #if is an error either way, and a key that changes costs a
    compile, never a wrong kernel."""
    root = tree({"i/h.h": "// here\n"})
    source = PROBES[name] + TAIL
    options = (f"-I{root / 'i'}",)
    lacking = "__has_include_next" in source and not nvrtc_defines("__has_include_next")
    said = "function call is not allowed" if lacking else "THERE"
    assert said in bare_nvrtc(source, options).log
    there = cupy_rawcode.cache_key(source, arch="sm_90", options=options)
    (root / "i" / "h.h").unlink()
    assert ("function call is not allowed" if lacking else "GONE") in bare_nvrtc(
        source, options
    ).log
    gone = cupy_rawcode.cache_key(source, arch="sm_90", options=options)
    assert there != gone
    (root / "i" / "h.h").write_text("// here\n")
    assert cupy_rawcode.cache_key(source, arch="sm_90", options=options) == there


def test_a_wrapper_definition_alone_probes_nothing():
    """``_CCCL_HAS_INCLUDE(_X) __has_include(_X)``: the parameter is no header, and a closure
    of such headers has nothing unresolved."""
    closure = cupy_rawcode.resolve("#define HAS(_X) __has_include(_X)\n", ())
    assert not closure.unresolved and not closure.missing


@pytest.mark.parametrize(
    "line", ['#include "../o/h.h"', "#include <../o/h.h>", '#if __has_include("../o/h.h")\n#endif']
)
def test_a_file_appearing_where_a_dot_dot_include_looked_changes_the_key(line, tree):
    """``..`` leaves the -I directory: the path it looked at first is watched all the same."""
    root = tree({"x/i0/keep.h": "", "y/i1/keep.h": "", "y/o/h.h": "#define V 1\n"})
    options = (f"-I{root / 'x' / 'i0'}", f"-I{root / 'y' / 'i1'}")
    source = line + '\nextern "C" __global__ void k() {}\n'
    before = cupy_rawcode.cache_key(source, arch="sm_90", options=options)
    (root / "x" / "o").mkdir()
    (root / "x" / "o" / "h.h").write_text("#define V 2\n")
    assert cupy_rawcode.cache_key(source, arch="sm_90", options=options) != before


@pytest.mark.parametrize("spelled", ["h,x.h", "h , x.h"])
def test_a_stringized_va_args_keeps_its_arguments_as_written(spelled, tree):
    """``#__VA_ARGS__`` of ``h , x.h`` is "h , x.h": the commas and blanks as written."""
    root = tree({f"i/{spelled}": 'static_assert(false, "READ");\n'})
    source = f"#define S(...) #__VA_ARGS__\n#include S({spelled})\n"
    options = (f"-I{root / 'i'}",)
    assert "READ" in bare_nvrtc(source, options).log
    closure = cupy_rawcode.resolve(source, options)
    assert [h.path for h in closure.headers] == [str(root / "i" / spelled)]


# a condition on the probe operators themselves -> the branch NVRTC takes is the one exact mode
# takes (whatever this NVRTC defines)
OPERATOR_CONDITIONS = [
    "#ifdef __has_include_next",
    "#if defined(__has_include_next)",
    "#ifndef __has_include_next",
    "#ifdef __has_include",
    '#if __has_include_next("h.h")',
    "#if __has_include_next(<h.h>)",
    '#if __has_include("h.h")',
]


@pytest.mark.parametrize("condition", OPERATOR_CONDITIONS)
def test_exact_mode_takes_the_branch_nvrtc_takes_on_the_probe_operators(condition, tree):
    root = tree({"i/h.h": "// here\n", "i/a.h": "// a\n", "i/b.h": "// b\n"})
    options = (f"-I{root / 'i'}",)
    marked = f'{condition}\nstatic_assert(false, "FIRST");\n#else\nstatic_assert(false, "SECOND");\n#endif\n'
    log = bare_nvrtc(marked, options).log
    first = "FIRST" in log
    assert first != ("SECOND" in log), log
    source = f'{condition}\n#include "a.h"\n#else\n#include "b.h"\n#endif\n'
    closure = cupy_rawcode.resolve(source, options, exact=True)
    assert [h.path.rsplit("/", 1)[-1] for h in closure.headers] == ["a.h" if first else "b.h"]
    failed = "function call is not allowed" in log
    assert any("has no __has_include_next" in e for e in closure.errors) == failed
