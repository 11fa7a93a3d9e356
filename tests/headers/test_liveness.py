"""The includes no NVRTC compile reaches (liveness.py) and the standard floor they no longer
raise: conditions read three-valued, branches, the closure's floor, real CUDA headers, and the
macro facts pinned against NVRTC itself."""

import re
import warnings

import pytest
from conftest import bare_nvrtc, nvrtc_defines

import cupy_rawcode
from cupy_rawcode.headers.lexical import directives
from cupy_rawcode.headers.liveness import (
    ALWAYS_DEFINED,
    NEVER_PREDEFINED,
    PREDEFINED,
    _defined,
    condition,
    known_macros,
    unreachable,
)

MACROS = (("OPT", "1"), ("DROPPED", None))
PRELUDE = "#define MINE 1\n#undef GONE\n"
BUILTIN = frozenset({"NULL", "CUDART_VERSION"})  # NVRTC's built-in runtime header defines them
KNOWN = known_macros([PRELUDE.encode()], MACROS, BUILTIN)


@pytest.mark.parametrize(
    "text, value",
    [
        ("defined(__CUDACC__)", True),
        ("defined __CUDACC_RTC__", True),
        ("!defined(__CUDACC__)", False),
        ("defined(__cplusplus) && !defined(__CUDACC__)", False),  # cuda_fp16.h's <cstring>
        ("__cplusplus >= 201103L && !defined(__CUDACC_RTC__)", False),  # unknown && false
        ("__cplusplus >= 201103L || defined(__CUDACC__)", True),  # unknown || true
        ("__cplusplus >= 201103L", None),  # a value: unknown
        ("0", False),
        ("1", True),
        ("0x0", False),
        ("010", True),
        ("08", None),  # no octal number
        ("1ULL", True),
        ("(0)", False),
        ("!(0)", True),
        ("__HIPCC__", False),  # another compiler's name: 0 under NVRTC
        ("defined(_MSC_VER) || defined(__clang__)", False),
        ("NOWHERE", False),  # defined by no file and no option: 0
        ("true", True),  # C++ keeps true and false in #if
        ("defined(NOWHERE) || true", True),
        ("false", False),
        ("CUDART_VERSION", None),  # NVRTC's built-in runtime header defines it
        ("defined(NULL)", None),
        ("(" * 200 + "0" + ")" * 200, None),  # deeper than any header: unknown, no RecursionError
        ("!" * 1000 + "0", None),
        ("defined(NOWHERE)", False),
        ("MINE", None),  # defined in the closure: its value is not read
        ("defined(MINE)", None),  # defined somewhere, maybe after the test
        ("defined(OPT)", True),  # -DOPT, never #undef'd
        ("defined(DROPPED)", None),  # -U: maybe defined again by a file? not by these: unknown
        ("defined(GONE)", None),
        ("defined(__RESERVED_BY_SOMEONE)", None),  # a compiler may predefine it
        ("defined(_Upper)", None),
        ("NOWHERE ? 1 : 0", None),
        ("1 + 0", None),
        ("!defined(__CUDACC__) == 0", None),  # more follows the operand: unknown
        ("defined(", None),
        ("(1", None),
        ("", None),
    ],
)
def test_a_condition_is_read_three_valued(text, value):
    assert condition(text, KNOWN) is value
    if value is not None:  # NVRTC itself agrees
        assert ("TAKEN" in _nvrtc_takes(f"{PRELUDE}#if {text}\n#error TAKEN\n#endif\n")) is value


@pytest.mark.parametrize("std", ["c++11", "c++14", "c++17", "c++20"])
@pytest.mark.parametrize(
    "text",
    [
        "__cplusplus >= 201103L",
        "__cplusplus >= 201402L",
        "__cplusplus >= 201703L",
        "__cplusplus < 201703L",
        "__cplusplus == 201402L",
        "__cplusplus != 201703L",
        "__cplusplus > 201703L && !defined(__CUDACC_RTC__)",
        "__cplusplus >= 201703L || defined(NOWHERE)",
    ],
)
def test_cplusplus_is_compared_at_the_asked_standard(std, text):
    """The floor asks what a compile at the asked standard reaches: __cplusplus has its value."""
    known = known_macros([PRELUDE.encode()], MACROS, frozenset(), std)
    value = condition(text, known)
    assert value is not None
    assert ("TAKEN" in _nvrtc_takes(f"#if {text}\n#error TAKEN\n#endif\n", std)) is value


def test_cplusplus_is_unknown_without_a_standard():
    assert condition("__cplusplus >= 201103L", KNOWN) is None
    known = known_macros([b""], (), frozenset(), "c++03")
    assert condition("__cplusplus >= 201103L", known) is False
    assert condition("__cplusplus + 0 >= 201103L", known) is None  # another shape: unknown


def test_without_the_builtin_macros_no_name_is_surely_undefined():
    """No toolkit <cuda_runtime.h> to read NVRTC's built-in macros from: unknown."""
    assert condition("NOWHERE", known_macros([b""])) is None
    assert condition("defined(__HIPCC__)", known_macros([b""])) is False  # another compiler's


def _dead(text: str) -> list[bool]:
    """Whether each `#include` line of ``text`` is in a branch no NVRTC compile takes; NVRTC
    itself never reaches one called so (each include made an #error: soundness)."""
    found = unreachable(directives(text), KNOWN)
    lines = [i for i, t in enumerate(text.splitlines(), 1) if t.startswith("#include")]
    dead = [found.at(line) for line in lines]
    errors = text.splitlines()
    for n, line in enumerate(lines):
        errors[line - 1] = f"#error INCLUDE{n}"
    reached = _nvrtc_takes(PRELUDE + "\n".join(errors) + "\n")
    assert not any(d and f"INCLUDE{n}" in reached for n, d in enumerate(dead)), (dead, reached)
    return dead


@pytest.mark.parametrize(
    "text, dead",
    [
        ('#include "a"\n', [False]),
        ('#if !defined(__CUDACC__)\n#include "a"\n#endif\n#include "b"\n', [True, False]),
        ('#ifndef __CUDACC_RTC__\n#include "a"\n#else\n#include "b"\n#endif\n', [True, False]),
        ('#ifdef __CUDACC__\n#include "a"\n#else\n#include "b"\n#endif\n', [False, True]),
        (
            '#if 0\n#include "a"\n#elif 1\n#include "b"\n#else\n#include "c"\n#endif\n',
            [True, False, True],
        ),
        ('#ifdef NOWHERE\n#include "a"\n#elif __HIPCC__\n#include "b"\n#endif\n', [True, True]),
        (
            '#if X > 2\n#include "a"\n#elif 1\n#include "b"\n#else\n#include "c"\n#endif\n',
            [False, False, True],
        ),
        (
            '#if X > 2\n#include "a"\n#elif 0\n#include "b"\n#else\n#include "c"\n#endif\n',
            [False, True, False],
        ),
        (
            '#if 0\n#if 1\n#include "a"\n#endif\n#include "b"\n#endif\n#include "c"\n',
            [True, True, False],
        ),
        ('#if 1\n#if 0\n#include "a"\n#endif\n#include "b"\n#endif\n', [True, False]),
        ('#elifdef NOWHERE\n#include "a"\n', [False]),  # no #if: not read, nothing dead
        ('#if 0\n#include "a"\n', [False]),  # left open: not read, nothing dead
        ('/* #if 0 */\n#include "a"\n', [False]),  # a directive in a comment is none
        ('#if 0 /* a\n comment */\n#include "a"\n#endif\n', [True]),
        ('#if 0 \\\n || 1\n#include "a"\n#endif\n', [False]),  # a continued line
        ('#ifdef __CUDACC__ // why\n#include "a"\n#endif\n', [False]),
        ('#  if  0\n#include "a"\n#  endif\n', [True]),
        ("#elifndef X\n", []),
    ],
)
def test_includes_in_branches_no_nvrtc_compile_takes(text, dead):
    assert _dead(text) == dead


NEEDS17 = '#pragma once\n#if __cplusplus < 201703L\n#error "needs C++17"\n#endif\n'
# the standard compiled at, checked in any standard (C++03 has no static_assert)
KERNEL = 'typedef char std_is[__cplusplus == {year}L ? 1 : -1];\nextern "C" __global__ void k(int* x) {{ x[0] = 1; }}\n'


@pytest.mark.parametrize(
    "header, options, raised",
    [
        ('#include "needs17.h"\n', (), True),
        ('#if !defined(__CUDACC__)\n#include "needs17.h"\n#endif\n', (), False),
        (
            '#ifndef __CUDACC_RTC__\n#include "needs17.h"\n#else\n#include "needs17.h"\n#endif\n',
            (),
            True,
        ),
        ('#ifdef HOST_ONLY\n#include "needs17.h"\n#endif\n', (), False),
        ('#ifdef HOST_ONLY\n#include "needs17.h"\n#endif\n', ("-DHOST_ONLY",), True),
        ('#define HOST_ONLY\n#ifdef HOST_ONLY\n#include "needs17.h"\n#endif\n', (), True),
        ('#if VALUE > 3\n#include "needs17.h"\n#endif\n', ("-DVALUE=1",), True),  # undecided: taken
        (
            "#if __has_include(<needs17.h>)\n#define HAVE 1\n#endif\n",
            (),
            False,
        ),  # a probe opens nothing
        ('#if 0\n#include "needs17.h"\n#endif\n#include "plain.h"\n', (), False),
        ('#if __cplusplus >= 201703L\n#include "needs17.h"\n#endif\n', (), False),  # C++14 stays
        ('#if __cplusplus >= 201103L\n#include "needs17.h"\n#endif\n', (), True),
    ],
)
def test_the_floor_counts_only_headers_nvrtc_reaches(tmp_path, header, options, raised):
    """A C++14 kernel is compiled at C++17 only when NVRTC can reach a header that refuses
    C++14; the compile shows which (the static_assert, or the header's #error if under-raised)."""
    (tmp_path / "needs17.h").write_text(NEEDS17)
    (tmp_path / "plain.h").write_text("#pragma once\n")
    (tmp_path / "top.h").write_text(header)
    opts = ("-std=c++14", f"-I{tmp_path}", *options)
    src = '#include "top.h"\n' + KERNEL.format(year=201703 if raised else 201402)
    closure = cupy_rawcode.resolve(src, options=opts)
    assert (closure.floor.year == 2017) is raised
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the raise's warning: once per process anyway
        assert cupy_rawcode.compile(src, options=opts, arch="sm_90").code


def test_the_key_holds_the_standard_used(tmp_path):
    (tmp_path / "needs17.h").write_text(NEEDS17)
    (tmp_path / "top.h").write_text('#if 0\n#include "needs17.h"\n#endif\n')
    src = '#include "top.h"\nextern "C" __global__ void k(int* x) { x[0] = 1; }\n'
    keys = {
        std: cupy_rawcode.cache_key(src, options=(f"-std={std}", f"-I{tmp_path}"), arch="sm_90")
        for std in ("c++14", "c++17")
    }
    assert keys["c++14"] != keys["c++17"]  # kept at C++14: not the C++17 entry


def _has(header: str) -> bool:
    missing = cupy_rawcode.resolve(f"#include <{header}>\n").missing
    return not any(m.name == header for m in missing)


@pytest.mark.parametrize(
    "header, std, year",
    [
        ("cuda_fp16.h", "c++14", 201402),
        ("cuda_bf16.h", "c++14", 201402),
        ("mma.h", "c++14", 201402),
        ("cuComplex.h", "c++14", 201402),
        ("cupy/carray.cuh", "c++14", 201402),
        ("curand_kernel.h", "c++14", 201703),
        ("curand_kernel.h", "c++03", 199711),  # reaches CCCL only under __cplusplus >= 201103L
        ("cooperative_groups.h", "c++14", 201703),
        ("cub/block/block_reduce.cuh", "c++14", 201703),
    ],
)
def test_real_headers_keep_their_standard_unless_they_reach_cccl(header, std, year):
    """CUDA's half, bfloat16, mma and complex headers and CuPy's carray.cuh include standard
    headers only for host compilers: a C++14 kernel stays C++14, as in CuPy; cuRAND at C++03
    takes no C++11 branch. cuRAND, cooperative groups and CUB at C++14 reach CCCL, which
    refuses C++14: raised."""
    if not _has(header):
        pytest.skip(f"<{header}> is not installed here")
    src = f"#include <{header}>\n" + KERNEL.format(year=year)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cupy_rawcode.compile(src, options=(f"-std={std}",), arch="sm_90").code


def _nvrtc_takes(source: str, std: str = "c++17") -> set[str]:
    """The words of the ``#error WORD`` lines NVRTC reaches in ``source`` (-DOPT=1 -UDROPPED,
    at ``std``), each asked as a failing static_assert: an #error stops NVRTC at the first."""
    source = re.sub(r"#error (\w+)", r'static_assert(false, "\1");', source)
    log = bare_nvrtc(source, ("-DOPT=1", "-UDROPPED", f"-std={std}")).log
    return set(re.findall(r'static assertion failed with "(\w+)"', log))


OPTION_SETS = [(), ("-G",), ("-rdc=true",), ("-std=c++11",), ("-use_fast_math",)]


@pytest.mark.parametrize("options", OPTION_SETS)
def test_nvrtc_defines_what_is_always_defined_and_none_of_the_others(options):
    assert all(nvrtc_defines(n, options) for n in ALWAYS_DEFINED)
    assert not any(nvrtc_defines(n, options) for n in NEVER_PREDEFINED)


def test_always_defined_names_are_in_nvrtcs_predefined_table():
    assert ALWAYS_DEFINED <= PREDEFINED


@pytest.mark.parametrize(
    "header",
    ["cuda_fp16.h", "cupy/carray.cuh", "curand_kernel.h", "cooperative_groups.h", "mma.h"],
)
def test_names_read_as_surely_undefined_in_real_headers_are_undefined_to_nvrtc(header):
    """Every name a condition of these headers' closures tests that liveness calls surely
    undefined, NVRTC indeed leaves undefined (its built-in runtime header included)."""
    from cupy_rawcode.headers import fast
    from cupy_rawcode.headers.search import make_context

    ctx = make_context(("-std=c++14",))
    closure = fast.resolve_fast(f"#include <{header}>\n", ctx)
    if any(m.name == header for m in closure.missing):
        pytest.skip(f"<{header}> is not installed here")
    builtin = fast._builtin_macros(ctx)
    if builtin is None:
        pytest.skip("no toolkit <cuda_runtime.h> here: no name is surely undefined then")
    datas = [s.data for s in closure.scans.values()]
    known = known_macros(datas, (), builtin)
    names = set()
    for data in datas:
        for _, kind, rest in directives(data.decode("utf-8")):
            if kind in ("if", "elif", "ifdef", "ifndef", "elifdef", "elifndef"):
                names |= {
                    n for n in re.findall(r"[A-Za-z_]\w*", rest) if _defined(n, known) is False
                }
    names -= {"defined", "true", "false"}
    assert names  # the check is not empty: such names are tested there
    probe = "".join(f"#ifdef {n}\n#error {n}\n#endif\n" for n in sorted(names))
    assert _nvrtc_takes(probe) == set()


RUNTIME_NAMES = (
    *("CUDART_VERSION", "NULL", "CUDARTAPI", "CUDART_CB", "cudaStreamNonBlocking"),
    *("cudaHostAllocDefault", "cudaEventDefault", "CUDA_IPC_HANDLE_SIZE"),
)


def test_nvrtcs_builtin_runtime_macros_are_never_surely_undefined():
    """NVRTC's built-in runtime header defines these (not reserved names); they are read from the
    toolkit's <cuda_runtime.h>, so a branch testing them counts as taken."""
    from cupy_rawcode.headers import fast
    from cupy_rawcode.headers.search import make_context

    builtin = fast._builtin_macros(make_context(()))
    if builtin is None:
        pytest.skip("no toolkit <cuda_runtime.h> here: no name is surely undefined then")
    probe = "".join(f"#ifdef {n}\n#error {n}\n#endif\n" for n in RUNTIME_NAMES)
    assert _nvrtc_takes(probe) == set(RUNTIME_NAMES)
    known = known_macros([b""], (), builtin)
    assert [n for n in RUNTIME_NAMES if _defined(n, known) is not None] == []


# shapes a differential fuzzer of conditions against NVRTC found read as dead where NVRTC takes
# the branch: (text, standard, whether each #include line is dead)
TAKEN = {
    "'!' before a __cplusplus comparison is (!__cplusplus) < N": (
        '#if !__cplusplus < 202002L\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "'!!' before a __cplusplus comparison": (
        '#if !!__cplusplus < 201703\n#include "a"\n#endif\n',
        "c++20",
        [False],
    ),
    "NVRTC knows no #elifdef: the #else after it is taken": (
        '#if 0\n#elifdef __CUDACC__\n#else\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "#ifdef tests the name before junk": ('#ifdef MINE;\n#include "a"\n#endif\n', "c++17", [False]),
    "#ifdef tests an option's name before junk": (
        '#ifdef OPT+1\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "'%:' is '#'": ('#ifdef NOWHERE\n%:else\n#include "a"\n#endif\n', "c++17", [False]),
    "a backslash-newline after '#'": (
        '#ifdef NOWHERE\n#\\\nelse\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "a comment across lines after '#'": (
        '#ifdef NOWHERE\n#/*\n*/else\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "a form feed before '#'": ('#ifdef NOWHERE\n\f#else\n#include "a"\n#endif\n', "c++17", [False]),
    "a vertical tab before '#'": (
        '#ifdef NOWHERE\n\v#else\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "a comment between #define and its name": (
        '#define/**/XQ 1\n#if XQ\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "%:define": ('%:define XQ 1\n#if XQ\n#include "a"\n#endif\n', "c++17", [False]),
    "%:undef of an always-defined name": (
        '%:undef __CUDACC__\n#ifndef __CUDACC__\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "a digit separator opens no character literal": (
        'static_assert(1\'0 == 10, ""); /*\n#if 0\n*/\n#include "a"\n'
        'static_assert(2\'0 == 20, ""); /*\n#endif\n*/\n',
        "c++14",
        [False],
    ),
    "true defined by a file": (
        '#define true 0\n#if !true\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "__cplusplus defined by a file": (
        "#undef __cplusplus\n#define __cplusplus 202002L\n#if __cplusplus >= 202002L\n"
        '#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "NVRTC defines <nv/target>'s names built in": (
        '#ifdef NV_IS_DEVICE\n#include "a"\n#endif\n#if defined(NV_PROVIDES_SM_90)\n'
        '#include "b"\n#endif\n',
        "c++17",
        [False, False],
    ),
    "'or' is '||'": ('#if 1 or 1 && 0\n#include "a"\n#endif\n', "c++17", [False]),
    "a UTF-8 name a file defines": (
        '#define Xé 1\n#ifdef Xé\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "a universal character name glued to an #ifndef's": (
        '#ifndef __CUDACC__\\u00e9\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "a comment across lines before '#'": (
        '#ifdef NOWHERE\n/*\n*/#else\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "a backslash-newline inside a directive's name": (
        '#ifdef NOWHERE\n#el\\\nse\n#include "a"\n#endif\n',
        "c++17",
        [False],
    ),
    "still dead: a branch no compile takes": (
        '#if !(__cplusplus >= 201103L)\n#include "a"\n#elif !defined(__CUDACC__)\n'
        '#include "b"\n#endif\n',
        "c++17",
        [True, True],
    ),
}


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_what_nvrtc_takes_is_never_read_dead(name):
    text, std, dead = TAKEN[name]
    known = known_macros([(PRELUDE + text).encode()], MACROS, BUILTIN, std)
    found = unreachable(directives(PRELUDE + text), known)
    lines = [i for i, t in enumerate((PRELUDE + text).splitlines(), 1) if t.startswith("#include")]
    assert [found.at(line) for line in lines] == dead
    marked = (PRELUDE + text).splitlines()
    for n, line in enumerate(lines):
        marked[line - 1] = f"#error INCLUDE{n}"
    reached = _nvrtc_takes("\n".join(marked) + "\n", std)
    assert {f"INCLUDE{n}" for n, d in enumerate(dead) if not d} <= reached
    assert not {f"INCLUDE{n}" for n, d in enumerate(dead) if d} & reached


def test_cplusplus_an_option_defines_is_not_the_standards():
    known = known_macros([b""], (("__cplusplus", "1"),), BUILTIN, "c++17")
    assert condition("__cplusplus < 201103L", known) is None


def test_a_function_like_macro_an_option_defines_is_defined():
    """``-DF(x)=x`` defines F (NVRTC takes it: tests/headers/test_options.py): the options give
    its head with the parameter list, and ``#ifdef F`` is taken, ``#ifndef F`` is not."""
    known = known_macros([b""], (("F(x)", "x"),), BUILTIN)
    text = '#ifdef F\n#include "a"\n#endif\n#ifndef F\n#include "b"\n#endif\n'
    found = unreachable(directives(text), known)
    assert [found.at(2), found.at(5)] == [False, True]
