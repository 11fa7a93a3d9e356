"""A computed include (``#include H``) is keyed on the header it names, wherever the macro is
defined; one the scan cannot expand is compiled every time and never cached, with a warning:
an edit of the header it names is never served stale (from the store or a PCH)."""

import warnings

import pytest

import cupy_rawcode
from cupy_rawcode.orchestrator.compiling import UnresolvedIncludeWarning

KERNEL = 'extern "C" __global__ void k(int* o) { o[0] = VAL; }\n'
# name -> (the source's lines before the kernel, whether it is cached)
CASES = {
    "an object-like macro the source defines": ('#define H "h.h"\n#include H\n', True),
    "a chain of them": ('#define P Q\n#define Q "h.h"\n#include P\n', True),
    "a macro an option defines": ("#include H\n", True),  # -DH="h.h" (below)
    "a function-like macro that stringizes": (
        "#define S(x) #x\n#define H(x) S(x)\n#include H(h.h)\n",
        True,
    ),
    "a stringized argument that is a macro, expanded first": (
        "#define S_(x) #x\n#define S(x) S_(x)\n#define NAME h.h\n#include S(NAME)\n",
        True,
    ),
    "pasted names": ("#define P(a, b) <a ## b.h>\n#include P(h, )\n", True),
    "a value on the next line": ('#define H \\\n "h.h"\n#include H\n', False),
    "a comment after the #define's value": ('#define H "h.h" // the header\n#include H\n', True),
    "a name in a string literal is no macro": ('#define h 1\n#define H "h.h"\n#include H\n', True),
    "one value a name, another a call of a function-like macro": (
        '#define S(x) #x\n#ifdef NOWHERE\n#define H "x.h"\n#else\n#define H S(h.h)\n#endif\n'
        "#include H\n",
        True,
    ),
    "a call with a comment after it": (
        "#define S(x) #x\n#define H S(h.h) /* here */\n#include H\n",
        False,
    ),
    "more values than the scan follows": (
        "".join(f'#define H "a{i}.h"\n#undef H\n' for i in range(70))
        + '#define H "h.h"\n#include H\n',
        False,
    ),
    "a macro a header defines with a comment in the way": (
        '#include "names.h"\n#include HEADER\n',
        False,
    ),
    # CUTLASS 4.2 and later: '#define CUDA_STD_HEADER(header) <cuda/std/header>'
    "a function-like macro whose value is a header name": (
        "#define HDR(name) <name.h>\n#include HDR(h)\n",
        True,
    ),
    "a function-like macro a header defines, in two branches": (
        '#include "hdr.h"\n#include HDR(h)\n',
        True,
    ),
    "a function-like macro calling another": (
        "#define G(n) <n.h>\n#define HDR(n) G(n)\n#include HDR(h)\n",
        True,
    ),
    "a function-like macro an option defines": ("#include HDR(h)\n", True),  # -DHDR(n)=<n.h>
    "a call with a string among its arguments": (
        '#define HDR(n, s) <n.h>\n#include HDR(h, "x")\n',
        True,
    ),
    "a variadic macro": ("#define HDR(...) <__VA_ARGS__.h>\n#include HDR(h)\n", True),
}
OPTIONS = {"#include H\n": ('-DH="h.h"',), "#include HDR(h)\n": ("-DHDR(n)=<n.h>",)}


def _value(source: str, root) -> str:
    options = (f"-I{root}",) + next(
        (given for head, given in OPTIONS.items() if source.startswith(head)), ()
    )
    code = cupy_rawcode.compile(source, options=options, arch="sm_90", target="ptx").code
    moves = [ln for ln in bytes(code).decode().splitlines() if "mov.u32" in ln]
    return moves[0].rsplit(",", 1)[1].strip(" ;")


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_edited_header_a_computed_include_names_is_never_served_stale(
    name, tree, compiles, tmp_path
):
    head, cached = CASES[name]
    source = head + KERNEL
    root = tree(
        {
            "h.h": "#define VAL 1\n",
            "names.h": '#define/**/HEADER "h.h"\n',
            "hdr.h": "#ifdef NOWHERE\n#define HDR(n) <x/n.h>\n#else\n#define HDR(n) <n.h>\n#endif\n",
        }
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = _value(source, root)
        before = len(compiles)
        again = _value(source, root)
        compiled_again = len(compiles) - before
        (root / "h.h").write_text("#define VAL 2\n")
        edited = _value(source, root)
    assert (first, again, edited) == ("1", "1", "2")
    unresolved = [w for w in caught if issubclass(w.category, UnresolvedIncludeWarning)]
    if cached:
        assert compiled_again == 0 and not unresolved
    else:
        assert compiled_again == 1 and "#include H" in str(unresolved[0].message)
        assert not [p for p in (tmp_path / "cache" / "entries").rglob("*") if p.is_file()]


def test_a_computed_include_of_a_macro_nothing_defines_keeps_the_cache():
    """NVRTC opens nothing there (the branch is skipped), so nothing is unknown to the key."""
    source = "#ifdef NOWHERE\n#include NOWHERE\n#endif\n" + KERNEL.replace("VAL", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnresolvedIncludeWarning)
        cupy_rawcode.compile(source, arch="sm_90", target="ptx")


# a computed include with a comment near it: keyed (once read as never cached)
COMMENTED = {
    "a line comment, beside an oddly spelled include": (
        '#define H(x) #x\n#include H(h.h) // the header\n%:include "g.h"\n'
    ),
    "a comment before the macro": '#define H "h.h"\n#include /**/ H\n',
    "a comment before a call": "#define H(x) #x\n#include /* x */ H(h.h)\n",
    "a comment that goes on past the line": '#define H "h.h"\n#include H /*\n*/\n',
}


@pytest.mark.parametrize("name", sorted(COMMENTED))
def test_a_computed_include_with_a_comment_near_it_is_cached(name, tree, compiles):
    root = tree({"h.h": "#define VAL 1\n", "g.h": ""})
    source = COMMENTED[name] + KERNEL
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnresolvedIncludeWarning)
        assert _value(source, root) == "1"
        before = len(compiles)
        assert _value(source, root) == "1"
    assert len(compiles) == before


LIBRARIES = [
    "<cub/cub.cuh>",
    "<thrust/device_vector.h>",
    "<thrust/sort.h>",
    "<cuda/std/type_traits>",
    "<cuda/std/mdspan>",
    "<cuda/barrier>",
    "<curand_kernel.h>",
    "<cupy/complex.cuh>",
    "<cuda_fp16.h>",
    "<mma.h>",
    "<cooperative_groups.h>",
    "<type_traits>",
]


@pytest.mark.parametrize("header", LIBRARIES)
def test_the_librarys_own_computed_includes_and_probes_are_all_keyed(header):
    """Every computed include and __has_include of CCCL, CUDA's and CuPy's headers expands to
    names the key holds: their kernels are cached."""
    closure = cupy_rawcode.resolve(f"#include {header}\n", ("-std=c++17",))
    assert closure.unresolved == ()
