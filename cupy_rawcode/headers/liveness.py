"""Which ``#include`` lines NVRTC can never reach: those inside a branch whose condition is false
in every NVRTC compile, whatever the arch, standard or version.

Fast mode follows every branch, a superset that is right for the cache key but not for the
closure's standard floor (standard.py): ``cuda_fp16.h`` includes ``<cstring>`` only under
``#if defined(__cplusplus) && !defined(__CUDACC__)``, and following it there would raise a
C++14 kernel to CCCL's C++17 for a header NVRTC never opens. Conditions are read three-valued
(true, false, unknown) from what is certain in a closure:

- defined: ``__CUDACC__``, ``__CUDACC_RTC__``, ``__CUDA_ARCH__`` and ``__cplusplus`` (NVRTC
  defines them in every compile) and the options' ``-D`` macros, unless an ``#undef`` of the
  name appears anywhere in the closure;
- undefined: a name no file of the closure ``#define``s and no option defines, unless it is
  reserved (``__x``, ``_X``: the compiler may predefine it) and not another compiler's or
  platform's own (``__HIPCC__``, ``_MSC_VER``, ``__GNUC__``: NEVER_PREDEFINED).

Anything else (values, comparisons, function-like macros) is unknown, and an unknown branch
counts as reachable, so the answer errs only toward what fast mode already did. A file whose
conditionals do not balance is read as having no unreachable branch.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

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

_CODE = re.compile(  # strings and character literals stay; comments are what is blanked
    rb"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|(/\*.*?\*/|//[^\n]*)", re.S
)
# unanchored, so that re finds the '#' by fast search: a directive's line start is checked after
_DIRECTIVE = re.compile(
    rb"#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b([^\n]*(?:\\\n[^\n]*)*)"
)
# (one not at a line start, in a string or a comment, only makes a name less certain)
_MACRO = re.compile(rb"#[ \t]*(define|undef)[ \t]+([A-Za-z_]\w*)")
_TOKEN = re.compile(r"\s*([A-Za-z_]\w*|\d[\w.']*|&&|\|\||[!=<>]=|<<|>>|\S)")
_BOUNDARY = ("&&", "||", ")", None)


class Known(NamedTuple):
    """What a closure makes certain: names surely defined and names surely undefined
    (``defined`` holds; anything else not in ``maybe`` is undefined unless reserved)."""

    defined: frozenset[str]
    maybe: frozenset[str]  # #defined somewhere, or #undef'd somewhere: either way unknown


def known_macros(datas: list[bytes], options: tuple[tuple[str, str | None], ...] = ()) -> Known:
    """``Known`` for the files ``datas`` (the source and every header of a closure) compiled with
    the options' macros ``options`` ((name, value) pairs, value None for -U)."""
    defines, undefs = set[str](), set[str]()
    for data in datas:
        for kind, name in _MACRO.findall(data):
            (defines if kind == b"define" else undefs).add(name.decode())
    given = {n for n, v in options if v is not None}
    undefs |= {n for n, v in options if v is None}
    defined = (ALWAYS_DEFINED | given) - undefs
    return Known(frozenset(defined), frozenset(defines | undefs | given))


def _defined(name: str, known: Known) -> bool | None:
    if name in known.defined:
        return True
    if name in known.maybe:
        return None
    if name in NEVER_PREDEFINED:
        return False
    return None if name.startswith("__") or (name[:1] == "_" and name[1:2].isupper()) else False


def _and(values: list[bool | None]) -> bool | None:
    return False if False in values else (True if all(values) else None)


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


def _or(values: list[bool | None]) -> bool | None:
    return True if True in values else (False if all(v is False for v in values) else None)


class _Reader:
    """A recursive-descent reading of one condition: ``||``, ``&&``, ``!``, parentheses,
    ``defined``, a lone number and a lone name (0 when surely undefined); any other operand is
    unknown, up to the next ``&&``, ``||`` or ``)``."""

    def __init__(self, text: str, known: Known):
        self.tokens, self.i, self.known = _TOKEN.findall(text), 0, known

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def either(self) -> bool | None:
        values = [self.both()]
        while self.peek() == "||":
            self.i += 1
            values.append(self.both())
        return _or(values)

    def both(self) -> bool | None:
        values = [self.operand()]
        while self.peek() == "&&":
            self.i += 1
            values.append(self.operand())
        return _and(values)

    def operand(self) -> bool | None:
        value = self.unary()
        if self.peek() in _BOUNDARY:
            return value
        self.skip()  # `!A == B`, `defined(X) + 1`: more follows, so nothing certain
        return None

    def unary(self) -> bool | None:
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
            self.i += 1  # a lone operand: a number, or a name that is 0 when undefined
            if token[0].isdigit():
                number = _number(token)
                return None if number is None else number != 0
            if token[0].isalpha() or token[0] == "_":
                return False if _defined(token, self.known) is False else None
            return None
        self.skip()
        return None

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


_SPACES = bytes(10 if c == 10 else 32 for c in range(256))  # a comment's bytes but newlines


def _blank(match: re.Match) -> bytes:
    comment = match.group(1)
    return match.group(0) if comment is None else comment.translate(_SPACES)


class Unreachable(NamedTuple):
    """The changes of reachability in one file: at each offset in ``starts`` the branch from
    there on is reachable or not (``dead``, in step)."""

    starts: list[int]
    dead: list[bool]

    def at(self, pos: int) -> bool:
        """Whether the directive at byte ``pos`` is in a branch NVRTC never reaches."""
        i = bisect.bisect_right(self.starts, pos) - 1
        return i >= 0 and self.dead[i]


NONE_UNREACHABLE = Unreachable([], [])


def unreachable(data: bytes, known: Known) -> Unreachable:
    """Where ``data``'s branches are unreachable in every NVRTC compile (see the module)."""
    if b"#" not in data:
        return NONE_UNREACHABLE
    text = _CODE.sub(_blank, data) if b"/" in data else data
    # per open #if: [this branch's value, no branch so far taken] (three-valued)
    stack: list[list[bool | None]] = []
    starts, dead = [0], [False]
    for m in _DIRECTIVE.finditer(text):
        line = text.rfind(b"\n", 0, m.start()) + 1
        if text[line : m.start()].strip(b" \t"):
            continue  # not a directive: '#' is not first on its line
        kind, rest = m.group(1), m.group(2).replace(b"\\\n", b" ").decode("latin-1").strip()
        if kind in (b"if", b"ifdef", b"ifndef"):
            stack.append(_opened(kind, rest, known))
        elif not stack:
            return NONE_UNREACHABLE  # an #elif/#else/#endif with no #if: not read reliably
        elif kind == b"endif":
            stack.pop()
        else:  # #elif..., #else: reached when no earlier branch was, and its own test holds
            before = stack[-1][1]
            if kind == b"else":
                stack[-1] = [before, False]
            else:
                value = _test(kind[2:], rest, known)
                stack[-1] = [_and([before, value]), _and([before, _not(value)])]
        starts.append(m.end())
        dead.append(any(f[0] is False for f in stack))
    if stack:
        return NONE_UNREACHABLE  # an #if left open: not read reliably
    return Unreachable(starts, dead)


def _test(kind: bytes, rest: str, known: Known) -> bool | None:
    """The value of the test of an #if, #ifdef or #ifndef (``kind`` without an "el")."""
    if kind == b"if":
        return condition(rest, known)
    name = rest.split(None, 1)[0] if rest else ""
    value = _defined(name, known) if name else None
    return value if kind == b"ifdef" else _not(value)


def _opened(kind: bytes, rest: str, known: Known) -> list[bool | None]:
    """A new #if's frame: [this branch's value, no branch so far taken] (three-valued)."""
    value = _test(kind, rest, known)
    return [value, _not(value)]
