"""The names Jitify's built-in headers made visible outside ``std``, for ``jitify=True``.

Jitify 1 answered ``<type_traits>``, ``<cstdint>``, ``<ctime>``, ... with built-in headers. Several
put their names in a namespace of their own, then ``namespace std { using namespace N; }`` and a
second ``using namespace N;`` at global scope: code compiled by Jitify uses ``enable_if_t``,
``nullptr_t`` or ``tm`` without ``std::``. Until NVIDIA/jitify de1797c (2020-05-02) the C++
headers did it too (type_traits, limits, iterator, utility, ...); the version CuPy 14.2 vendors
(1a0ca0e, 2023) still does it for its C headers (stddef, stdint, cstring, time) and declares a few
C functions at global scope (stdio.h, string.h). Projects of that time (cuDF's JIT binary
operations) wrote ``enable_if_t<...>`` unqualified after ``#include <type_traits>``.

Under ``jitify=True`` (``-DCUPY_USE_JITIFY``, which CuPy and jitify_compat add), each shim in
``include/`` ends with a block generated from GLOBALS: using-declarations of the libcu++
(``std::``) names in ``namespace __cupy_rawcode_jitify_globals``, then a global using-directive
of it, so the names are the libcu++ entities (a specialization of ``std::numeric_limits`` is
seen through ``::numeric_limits`` too). Names libcu++ lacks get declarations of our own, as
Jitify's were. A program's own global declaration of one of these names (found by
``own_global_names`` in the program's own files, as specializable.py finds specializations)
defines ``CUPY_RAWCODE_OWN_GLOBAL_<name>``, and the block leaves that name out: the program's
declaration is the one its code sees, where a using-directive and a declaration of the same name
would make every unqualified use ambiguous. Without ``jitify=True`` no block is compiled.
"""

from __future__ import annotations

import re
from typing import NamedTuple

GUARD = "CUPY_USE_JITIFY"  # defined by CuPy's jitify=True and by jitify_compat.jitify_options
NAMESPACE = "__cupy_rawcode_jitify_globals"
OWN = "CUPY_RAWCODE_OWN_GLOBAL_"  # + name: the program declares that name at global scope


class Names(NamedTuple):
    """Names one Jitify header made global: ``using`` ones taken from ``std::`` (libcu++),
    ``decls`` C++ of our own (for names libcu++ lacks: name -> declaration), from the C++
    standard ``std`` on (11, 14, 17), by the Jitify version ``jitify`` ("1a0ca0e": the one
    CuPy 14.2 vendors; "before de1797c": Jitify until 2020-05-02), and why."""

    using: tuple[str, ...]
    std: int
    jitify: str
    reason: str
    decls: tuple[tuple[str, str], ...] = ()
    condition: str = ""  # a preprocessor condition the using-declarations also need


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_CUPY = "1a0ca0e"
_OLD = "before de1797c"

GLOBALS: dict[str, tuple[Names, ...]] = {
    "type_traits": (
        Names(
            _words(
                "enable_if true_type false_type is_floating_point is_integral is_signed "
                "is_unsigned is_same is_array is_function remove_reference remove_extent "
                "remove_const remove_volatile remove_cv conditional add_pointer decay"
            ),
            11,
            _OLD,
            "Jitify's <type_traits> ended with a global using-directive until 2020 (cuDF's JIT "
            "binary operations write enable_if_t unqualified)",
        ),
        Names(
            ("result_of",),
            11,
            _OLD,
            "as above; removed from the standard in C++20",
            condition="__cplusplus < 202002L",
        ),
        Names(
            _words(
                "enable_if_t remove_reference_t remove_extent_t remove_cv_t remove_const_t "
                "remove_volatile_t conditional_t add_pointer_t decay_t"
            ),
            14,
            _OLD,
            "as above (Jitify declared the _t aliases from C++14 on)",
        ),
    ),
    "limits": (
        Names(
            ("numeric_limits",),
            11,
            _OLD,
            "Jitify's <limits> ended with a global using-directive until 2020",
        ),
    ),
    "iterator": (
        Names(
            _words(
                "input_iterator_tag output_iterator_tag forward_iterator_tag "
                "bidirectional_iterator_tag random_access_iterator_tag iterator_traits"
            ),
            11,
            _OLD,
            "Jitify's <iterator> ended with a global using-directive until 2020",
        ),
    ),
    "utility": (
        Names(
            ("pair", "make_pair"),
            11,
            _OLD,
            "Jitify's <utility> ended with a global using-directive until 2020",
        ),
    ),
    "cstddef": (
        Names(
            ("nullptr_t", "max_align_t"),
            11,
            _CUPY,
            "Jitify's <cstddef>/<stddef.h> ends with a global using-directive",
        ),
        Names(("byte",), 17, _CUPY, "as above (std::byte from C++17 on)"),
    ),
    "cstring": (
        Names(
            ("strcpy", "strcmp"),
            11,
            _CUPY,
            "Jitify's <cstring> ends with a global using-directive and its <string.h> "
            "declares them globally; libcu++ (CCCL >= 3.1) implements them, older CCCL gets "
            "Jitify's declarations",
            decls=(
                ("strcpy", "char* strcpy(char* destination, const char* source);"),
                ("strcmp", "int strcmp(const char* str1, const char* str2);"),
            ),
            condition="__has_include(<cuda/std/__string/constexpr_c_functions.h>)",
        ),
        Names(
            (),
            11,
            _CUPY,
            "as above; a declaration only, as Jitify's (no device implementation)",
            decls=(("strerror", "char* strerror(int errnum);"),),
        ),
    ),
    "cstdio": (
        Names(
            (),
            11,
            _CUPY,
            "Jitify's <cstdio>/<stdio.h> declares them globally (FILE was a macro for int); "
            "declarations only (no device implementation); it also includes <stddef.h>",
            decls=(
                ("FILE", "typedef int FILE;"),
                ("fflush", "int fflush(FILE* stream);"),
                ("fprintf", "int fprintf(FILE* stream, const char* format, ...);"),
            ),
        ),
    ),
    "ctime": (
        Names(
            (),
            11,
            _CUPY,
            "Jitify's <ctime>/<time.h> ends with a global using-directive; libcu++ has no tm, "
            "so it is Jitify's struct (time_t, clock_t, timespec are global already)",
            decls=(
                (
                    "tm",
                    "struct tm { int tm_sec; int tm_min; int tm_hour; int tm_mday; int tm_mon; "
                    "int tm_year; int tm_wday; int tm_yday; int tm_isdst; };",
                ),
            ),
        ),
    ),
}

# Other Jitify headers whose names come along: its <cstdlib> and <cstdio> include <stddef.h>.
INCLUDES: dict[str, tuple[str, ...]] = {"cstdlib": ("cstddef",), "cstdio": ("cstddef",)}

# Macros Jitify's headers defined that NVRTC and libcu++ do not (global whatever the mode: a
# macro has no namespace). Defined under jitify=True only, unless already defined.
MACROS: dict[str, tuple[tuple[str, str], ...]] = {
    "cmath": (("M_PI", "3.14159265358979323846"),),
    "ctime": (("CLOCKS_PER_SEC", "1000000"),),
}

# What Jitify made global before de1797c that jitify=True leaves in std, and why.
LEFT_IN_STD: dict[str, str] = {
    "algorithm": "min and max: global templates would take part in overload resolution next to "
    "NVRTC's built-in ::min/::max and change which one existing kernels call",
    "complex": "complex: CuPy's <cupy/complex.cuh> declares ::complex (thrust's), so a second "
    "global complex would make CuPy-style complex<T> ambiguous",
    "ostream, istream, vector, string, stdexcept, mutex": "declaration stubs with no device "
    "meaning; global string, vector, mutex would only risk clashes",
}


def names(header: str) -> tuple[str, ...]:
    """Every name a header's block makes global (its own and those of INCLUDES), in order."""
    out: list[str] = []
    for h in (*INCLUDES.get(header, ()), header):
        for group in GLOBALS.get(h, ()):
            out += group.using
            out += [n for n, _ in group.decls if n not in group.using]
        out += [m for m, _ in MACROS.get(h, ())]
    return tuple(out)


def all_names() -> tuple[str, ...]:
    """The names (not macros) any block makes global, sorted."""
    found = {n for g in GLOBALS.values() for x in g for n in (*x.using, *(d for d, _ in x.decls))}
    return tuple(sorted(found))


def _std_condition(std: int) -> str:
    return {11: "", 14: "__cplusplus >= 201402L", 17: "__cplusplus >= 201703L"}[std]


def _guarded(name: str, text: str) -> list[str]:
    return [f"#ifndef {OWN}{name}", text, "#endif"]


def _if(conds: list[str], lines: list[str]) -> list[str]:
    conds = [c for c in conds if c]
    return [f"#if {' && '.join(conds)}", *lines, "#endif"] if conds and lines else lines


def block(header: str) -> str:
    """The C++ a shim ends with: the names Jitify's own header made global, compiled only under
    jitify=True; each name left out where the program declares it (CUPY_RAWCODE_OWN_GLOBAL_)."""
    if header not in GLOBALS and header not in INCLUDES and header not in MACROS:
        return ""
    flag = "CUPY_RAWCODE_JITIFY_GLOBALS_" + re.sub(r"\W", "_", header.upper())
    lines = [
        f"// jitify=True: what Jitify's own <{header}> made visible outside std "
        "(cupy_rawcode/toolkit/jitify_names.py)",
        f"#if defined({GUARD}) && !defined({flag})",
        f"#define {flag}",
    ]
    lines += [f"#include <{h}>" for h in INCLUDES.get(header, ())]
    usings: list[str] = []
    decls: list[str] = []
    for g in GLOBALS.get(header, ()):
        std = _std_condition(g.std)
        used = [x for n in g.using for x in _guarded(n, f"using ::std::{n};")]
        own = [x for n, d in g.decls for x in _guarded(n, d)]
        if g.using and g.decls:  # libcu++'s where it has them, else Jitify's declarations
            usings += _if([std, g.condition], used)
            decls += _if([std, f"!({g.condition})"], own)
        else:
            usings += _if([std, g.condition], used)
            decls += _if([std], own)
    if usings:
        lines += [f"namespace {NAMESPACE} {{", *usings, f"}}  // namespace {NAMESPACE}"]
        lines.append(f"using namespace {NAMESPACE};")
    lines += decls
    lines += [f"#ifndef {m}\n#define {m} {v}\n#endif" for m, v in MACROS.get(header, ())]
    lines.append(f"#endif  // {flag}")
    return "\n".join(lines) + "\n"


_KEYWORDS = {b"return", b"else", b"case", b"throw", b"sizeof", b"decltype", b"new", b"delete"}


_SEPARATORS = b" \t\n\r\f\v*&"  # what may stand between a function's type and its name
_ALIAS_BEFORE = re.compile(rb"\busing\s+$")  # using name = ...
_CLASS_BEFORE = re.compile(rb"\b(?:struct|class|union|enum)\s+$")  # struct name {, :, ;
_TYPEDEF = re.compile(rb"\btypedef\b")  # typedef ... name;
_WORD_AT_END = re.compile(rb"(\w+)$")
_ALL = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in all_names()) + rb")\b")
_CONTEXT = 256  # bytes looked at before a name


def _declared_at(data: bytes, start: int, end: int) -> bool:
    """Whether the name at data[start:end] is declared there: an alias (``using n =``), a class
    or enum (``struct n {``), a typedef (``typedef ... n;``, ``} n;``), or a function (a type,
    or ``>``, then ``n(``; not after a keyword such as ``return``). Read from the bytes around
    the name, so that a file is read once whatever the names in it."""
    after = data[end : end + _CONTEXT].lstrip()[:1]
    before = data[max(0, start - _CONTEXT) : start]
    if after == b"=" and _ALIAS_BEFORE.search(before):
        return True
    if after in (b"{", b":", b";") and _CLASS_BEFORE.search(before):
        return True
    if after == b";":
        if before.rstrip().endswith(b"}"):
            return True
        statement = max(data.rfind(c, 0, start) for c in (b";", b"{", b"}")) + 1
        if _TYPEDEF.search(data, statement, start):
            return True
    if after == b"(":
        kind = before.rstrip(_SEPARATORS)
        if len(kind) < len(before):  # at least one separator
            if kind.endswith(b">"):
                return True
            word = _WORD_AT_END.search(kind)
            return word is not None and word.group(1) not in _KEYWORDS
    return False


def own_global_names(data: bytes) -> tuple[str, ...]:
    """The GLOBALS names a program's file declares itself, sorted: a superset (a declaration in
    a namespace of its own, or a function declaration of another signature, counts too), so
    that the jitify=True blocks leave those names to the program. One pass over the file: the
    closure of a CuPy kernel holds some 2,000 headers, each read here in a new process."""
    found: set[bytes] = set()
    for m in _ALL.finditer(data):
        if m.group(0) not in found and _declared_at(data, m.start(), m.end()):
            found.add(m.group(0))
    return tuple(sorted(n.decode() for n in found))


def own_macros(names) -> tuple[tuple[str, str], ...]:
    """The -D macros that leave ``names`` (own_global_names) to the program."""
    return tuple((OWN + n, "1") for n in sorted(names))
