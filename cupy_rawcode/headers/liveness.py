"""Which ``#include`` lines NVRTC cannot reach at the asked standard: those inside a branch whose
condition is false in every NVRTC compile at that standard, whatever the arch or version.

Fast mode follows every branch, a superset that is right for the cache key but not for the
closure's standard floor (standard.py): ``cuda_fp16.h`` includes ``<cstring>`` only under
``#if defined(__cplusplus) && !defined(__CUDACC__)``, and following it there would raise a
C++14 kernel to CCCL's C++17 for a header NVRTC never opens. Conditions are read three-valued
(true, false, unknown) from what is certain in a closure:

- defined: ``__CUDACC__``, ``__CUDACC_RTC__``, ``__CUDA_ARCH__`` and ``__cplusplus`` (NVRTC
  defines them in every compile) and the options' ``-D`` macros, unless an ``#undef`` of the
  name appears anywhere in the closure;
- undefined: a name no file of the closure ``#define``s, no option defines, NVRTC does not
  predefine (predefined.py) and its built-in runtime header does not define (the toolkit's
  ``<cuda_runtime.h>`` closure: ``CUDART_VERSION``, ``NULL``, ``cudaStreamNonBlocking``; with no
  toolkit headers found, no name is), unless it is reserved (``__x``, ``_X``: the compiler may
  predefine it) and not another compiler's or platform's own (``__HIPCC__``, ``_MSC_VER``,
  ``__GNUC__``: NEVER_PREDEFINED), or ``<nv/target>``'s (``NV_IS_DEVICE``: NVRTC defines them
  built in). ``true``/``false`` keep their values unless a file defines them, and
  ``__cplusplus`` its standard's unless a file or option defines or undefines it; ``and``,
  ``or``, ``not`` are operators, as in C++.

``__cplusplus`` compared with a number is read at the asked standard: the floor is the question
"does a compile at the asked standard reach a header that refuses it?" (an include under
``#if __cplusplus >= 201703L`` raises nothing, and the branch a C++14 compile takes stays).
Anything else (values, comparisons, function-like macros) is unknown, and an unknown branch
counts as reachable, so the answer errs only toward what fast mode already did. A file whose
conditionals do not balance is read as having no unreachable branch; ``#elifdef`` and
``#elifndef`` (NVRTC knows neither) are unknown. tests/headers/test_liveness.py holds the shapes
a differential fuzzer against NVRTC found read wrongly, each checked against NVRTC. Not read as
NVRTC does, and rare enough to leave: trigraphs (C++14 and older), ``'`` in a skipped group
after a digit (there NVRTC opens a character literal), raw strings at C++03.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from typing import NamedTuple

from .lexical import GAP, spliced, splits_token
from .options import macro_name
from .predefined import STD_CPLUSPLUS, nvrtc_macros

ALWAYS_DEFINED = frozenset({"__CUDACC__", "__CUDACC_RTC__", "__CUDA_ARCH__", "__cplusplus"})
# reserved names of other compilers, platforms and libraries that NVRTC defines under no option
# (tests/headers/test_liveness.py asks NVRTC itself)
NEVER_PREDEFINED = frozenset(
    (
        *("__HIPCC__", "__HIPCC_RTC__", "__HIP__", "__HIP_DEVICE_COMPILE__"),
        *("__HIP_PLATFORM_AMD__", "__HIP_PLATFORM_HCC__", "__SYCL_DEVICE_ONLY__"),
        *("_MSC_VER", "_MSC_FULL_VER", "_MSVC_LANG", "_WIN32", "_WIN64", "__MINGW32__"),
        *("__CYGWIN__", "__APPLE__", "__ANDROID__", "__QNX__", "__QNXNTO__"),
        *("__clang__", "__GNUC__", "__GNUG__", "__INTEL_COMPILER", "__INTEL_LLVM_COMPILER"),
        *("__ICC", "__PGIC__", "__NVCOMPILER", "__ibmxl__", "__NVCC__"),
        *("_LIBCPP_VERSION", "__GLIBCXX__"),
    )
)

# a name as bytes: ASCII, a UTF-8 letter's bytes, a universal character name (\u00e9)
_NAME_BYTES = (
    rb"((?:[A-Za-z_\x80-\xff]|\\[uU][0-9A-Fa-f]{4})(?:[\w\x80-\xff]|\\[uU][0-9A-Fa-f]{4})*)"
)
# a macro's name where it is defined or undefined; unanchored, so re finds the '#' by fast search
# (one not first on its line, in a string or a comment, only makes a name less certain); a
# comment or a backslash-newline may stand between the words, and '%:' or '??=' for the '#'
_MACRO = re.compile(rb"#" + GAP + rb"*(define|undef)" + GAP + rb"+" + _NAME_BYTES)
_MACRO_SPELLED = re.compile(
    rb"(?:%:|\?\?=)" + GAP + rb"*(define|undef)" + GAP + rb"+" + _NAME_BYTES
)
_TOKEN = re.compile(r"\s*([A-Za-z_]\w*|\d[\w.']*|&&|\|\||[!=<>]=|<<|>>|\S)")
# C++'s alternative tokens are operators in #if too: `#if A or B` is `#if A || B`
_ALTERNATIVE = {"and": "&&", "or": "||", "not": "!", "not_eq": "!="}
_NAME = re.compile(r"[A-Za-z_]\w*")
_BOUNDARY = ("&&", "||", ")", None)
_DEPTH = 64  # the most nested operands read
_COMPARE = {
    "<": int.__lt__,
    "<=": int.__le__,
    ">": int.__gt__,
    ">=": int.__ge__,
    "==": int.__eq__,
    "!=": int.__ne__,
}


# every name NVRTC's predefined table holds (predefined.py), whatever its arch, standard or version
PREDEFINED = frozenset(nvrtc_macros("sm_90", "c++20", (12, 9)))


class Known(NamedTuple):
    """What a closure makes certain: names surely defined (``defined``) and names that may be
    (``maybe``); any other name is surely undefined when ``strict`` and it is not reserved."""

    defined: frozenset[str]
    maybe: frozenset[str]  # #defined or #undef'd somewhere, predefined, or NVRTC's built-ins'
    strict: bool = True  # False: NVRTC's built-in macros are not known, no name is surely undefined
    cplusplus: int = 0  # __cplusplus at the asked standard (201402 for C++14); 0: not known


def macro_names(datas: Iterable[bytes]) -> tuple[set[str], set[str]]:
    """(names #defined, names #undef'd) in the files ``datas``; a name spelled so anywhere (a
    comment, a string) counts, which only makes it less certain."""
    defines, undefs = set[str](), set[str]()
    for data in datas:
        if b"??/" in data:  # a trigraph splice (C++14 and older): both readings, a superset
            data += b"\n" + data.replace(b"??/", b"\\")
        if splits_token(data):  # `#defin\` newline `e X`: read it spliced
            data = spliced(data.decode("utf-8", "replace")).encode()
        found = _MACRO.findall(data)
        if b"%:" in data or b"??=" in data:  # a digraph or trigraph '#': rare, so looked at apart
            found += _MACRO_SPELLED.findall(data)
        for kind, name in found:
            (defines if kind == b"define" else undefs).add(name.decode(errors="replace"))
    return defines, undefs


def known_macros(
    datas: list[bytes],
    options: tuple[tuple[str, str | None], ...] = (),
    builtin: frozenset[str] | None = None,
    std: str | None = None,
) -> Known:
    """``Known`` for the files ``datas`` (the source and every header of a closure) compiled with
    the options' macros ``options`` ((head, value) pairs, value None for -U); ``builtin``: the
    macros NVRTC's built-in headers define (None when they are not known); ``std``: the asked
    standard ('c++14'), at which ``__cplusplus`` comparisons are read (None: unknown)."""
    defines, undefs = macro_names(datas)
    given = {macro_name(n) for n, v in options if v is not None}
    undefs |= {n for n, v in options if v is None}
    defined = (ALWAYS_DEFINED | given) - undefs
    maybe = defines | undefs | given | PREDEFINED | (builtin or frozenset())
    redefined = "__cplusplus" in defines | undefs | given  # then not the standard's value
    cplusplus = _number(STD_CPLUSPLUS[std]) or 0 if std and not redefined else 0
    return Known(frozenset(defined), frozenset(maybe), builtin is not None, cplusplus)


def _defined(name: str, known: Known) -> bool | None:
    if name in known.defined:
        return True
    if name in known.maybe:
        return None
    if name in NEVER_PREDEFINED:
        return False
    if (
        not known.strict
        or name.startswith(("__", "NV_"))
        or (name[:1] == "_" and name[1:2].isupper())
    ):
        return None  # reserved, or <nv/target>'s, which NVRTC defines built in (NV_IS_DEVICE)
    return False


def _number(token: str) -> int | None:
    """A preprocessing number's value (C's bases and suffixes), or None when it is no integer."""
    digits = token.rstrip("uUlL").replace("'", "")
    base = 16 if digits[:2] in ("0x", "0X") else 2 if digits[:2] in ("0b", "0B") else 10
    if base == 10 and len(digits) > 1 and digits[0] == "0":
        base = 8
    try:
        return int(digits[2:] if base in (2, 16) else digits, base)
    except ValueError:
        return None


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


def _and(values: list[bool | None]) -> bool | None:
    return False if False in values else (True if all(values) else None)


def _or(values: list[bool | None]) -> bool | None:
    return True if True in values else (False if all(v is False for v in values) else None)


class _Reader:
    """A recursive-descent reading of one condition: ``||``, ``&&``, ``!``, parentheses,
    ``defined``, a lone number and a lone name (0 when surely undefined); any other operand is
    unknown, up to the next ``&&``, ``||`` or ``)``."""

    def __init__(self, text: str, known: Known):
        tokens = [_ALTERNATIVE.get(t, t) for t in _TOKEN.findall(text)]
        self.tokens, self.i, self.known, self.depth = tokens, 0, known, 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def either(self) -> bool | None:
        return self.joined("||", self.both, _or)

    def both(self) -> bool | None:
        return self.joined("&&", self.operand, _and)

    def joined(self, op: str, part, combine) -> bool | None:
        """``part`` ``op`` ``part`` ...: the values of the parts, combined."""
        values = [part()]
        while self.peek() == op:
            self.i += 1
            values.append(part())
        return combine(values)

    def operand(self) -> bool | None:
        if self.peek() == "__cplusplus" and self.known.cplusplus:
            compared = self.cplusplus_compared()  # `!__cplusplus < N` is `(!__cplusplus) < N`
            if compared is not None:
                return compared
        value = self.unary()
        if self.peek() in _BOUNDARY:
            return value
        self.skip()  # `!A == B`, `defined(X) + 1`: more follows, so nothing certain
        return None

    def unary(self) -> bool | None:
        if self.depth >= _DEPTH:  # nesting no header writes: unknown, never a RecursionError
            self.skip()
            return None
        self.depth += 1
        try:
            return self.operand_value()
        finally:
            self.depth -= 1

    def operand_value(self) -> bool | None:
        token = self.peek()
        if token == "!":
            self.i += 1
            return _not(self.unary())
        if token == "(":
            self.i += 1
            value = self.either()
            if self.peek() != ")":
                self.skip()
                return None
            self.i += 1
            return value
        if token == "defined":
            self.i += 1
            parens = self.peek() == "("
            self.i += parens
            name = self.peek()
            if name is None or not (name[0].isalpha() or name[0] == "_"):
                self.skip()
                return None
            self.i += 1
            if parens:
                if self.peek() != ")":
                    self.skip()
                    return None
                self.i += 1
            return _defined(name, self.known)
        after = self.tokens[self.i + 1] if self.i + 1 < len(self.tokens) else None
        if token is not None and after in _BOUNDARY:
            self.i += 1  # a lone operand: a number, true/false, or a name 0 when undefined
            if token in ("true", "false"):  # C++ keeps their values in #if, unless #defined
                return None if token in self.known.maybe else token == "true"
            if token[0].isdigit():
                number = _number(token)
                return None if number is None else number != 0
            if token[0].isalpha() or token[0] == "_":
                return False if _defined(token, self.known) is False else None
            return None
        self.skip()
        return None

    def cplusplus_compared(self) -> bool | None:
        """``__cplusplus <op> <number>`` at the asked standard (None, reading nothing, for any
        other shape)."""
        op, number, after = (self.tokens[self.i + k : self.i + k + 1] or [None] for k in (1, 2, 3))
        value = _number(number[0]) if number[0] and number[0][0].isdigit() else None
        if op[0] not in _COMPARE or value is None or after[0] not in _BOUNDARY:
            return None
        self.i += 3
        return _COMPARE[op[0]](self.known.cplusplus, value)

    def skip(self) -> None:
        """Past the rest of this operand: to the next ``&&``/``||`` or unmatched ``)``."""
        depth = 0
        while (token := self.peek()) is not None:
            if token == "(":
                depth += 1
            elif token == ")":
                if depth == 0:
                    return
                depth -= 1
            elif depth == 0 and token in ("&&", "||"):
                return
            self.i += 1


def condition(text: str, known: Known) -> bool | None:
    """The value of an ``#if`` condition in every NVRTC compile: True, False or None (unknown).
    A ``?:`` or a stray token after the whole makes it unknown."""
    if "?" in text:
        return None
    reader = _Reader(text, known)
    value = reader.either()
    return value if reader.peek() is None else None


class Unreachable(NamedTuple):
    """The changes of reachability in one file: after each directive line in ``lines`` the text
    is reachable or not (``dead``, in step)."""

    lines: list[int]
    dead: list[bool]

    def at(self, line: int) -> bool:
        """Whether line ``line`` (an #include's) is in a branch NVRTC never reaches."""
        i = bisect.bisect_left(self.lines, line) - 1
        return i >= 0 and self.dead[i]


NONE_UNREACHABLE = Unreachable([], [])


def unreachable(lines: list[tuple[int, str, str]], known: Known) -> Unreachable:
    """Where a file's branches are unreachable in every NVRTC compile (see the module), from its
    directive lines (directives.py: comments removed, continuations joined)."""
    # per open #if: [this branch's value, no branch so far taken] (three-valued)
    stack: list[list[bool | None]] = []
    starts, dead = [0], [False]
    for line, kind, rest in lines:
        if kind in ("if", "ifdef", "ifndef"):
            stack.append(_opened(kind, rest, known))
        elif kind not in ("elif", "elifdef", "elifndef", "else", "endif"):
            continue
        elif not stack:
            return NONE_UNREACHABLE  # an #elif/#else/#endif with no #if: not read reliably
        elif kind == "endif":
            stack.pop()
        else:  # #elif..., #else: reached when no earlier branch was, and its own test holds
            before = stack[-1][1]
            if kind == "else":
                stack[-1] = [before, False]
            else:  # NVRTC knows no #elifdef/#elifndef: skipped, or an error, so unknown
                value = _test(kind[2:], rest, known) if kind == "elif" else None
                stack[-1] = [_and([before, value]), _and([before, _not(value)])]
        starts.append(line)
        dead.append(any(f[0] is False for f in stack))
    if stack:
        return NONE_UNREACHABLE  # an #if left open: not read reliably
    return Unreachable(starts, dead)


def _test(kind: str, rest: str, known: Known) -> bool | None:
    """The value of the test of an #if, #ifdef or #ifndef (``kind`` without an "el")."""
    if kind == "if":
        return condition(rest, known)
    name = _NAME.match(rest)  # `#ifdef MINE;` tests MINE, as NVRTC reads it
    after = rest[name.end() : name.end() + 1] if name else ""
    if name is None or after == "\\" or not after.isascii():  # `X\u00e9`, `Xé`: a longer name
        return None
    value = _defined(name.group(), known)
    return value if kind == "ifdef" else _not(value)


def _opened(kind: str, rest: str, known: Known) -> list[bool | None]:
    """A new #if's frame: [this branch's value, no branch so far taken] (three-valued)."""
    value = _test(kind, rest, known)
    return [value, _not(value)]
