"""Preprocessor lines for the signature reader, read as NVRTC's preprocessor reads them: the
``-D``/``-U`` options, then the text in order, each ``#include`` of a user header read in place
(only in a live branch), ``#define``/``#undef`` and ``#if``/``#ifdef``/``#ifndef``/``#elif``/
``#elifdef``/``#elifndef``/``#else`` evaluated where that is certain (ifexpr.py has C's rules).
A name is certainly undefined only while every ``#include`` reached so far was read; after one
that was not (a system header, a pre-include, an unreadable file) a name not seen defined is
uncertain, as are NVRTC's own macros (``__``-prefixed, CUDART_VERSION). A branch whose condition
is uncertain is kept with its tokens flagged; what it defines or undefines is refused by name,
as is a macro defined more than once or #undef'd: the reader never picks one definition. An
include guard (``#ifndef G`` then ``#define G`` first in a file) is certain on first reading."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .ifexpr import ALTERNATIVE_TOKENS, evaluate_if
from .lexer import _COMMENT_OR_STRING, SignatureError, _is_id, substitute, tokenize

_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\()?(.*)", re.S)
_DIRECTIVE = re.compile(r"#\s*(\w+)\s*(.*)", re.S)
_INCLUDE = re.compile(r"\s*(?:\"([^\"]+)\"|<([^>]+)>)\s*\Z")
_NVRTC_OWN = {"CUDART_VERSION"}  # predefined.py: NVRTC's predefined names not starting "__"
_MAX_DEPTH = 200  # nested #include
Include = Callable[[str, bool, object], "tuple[object, str] | None"]


@dataclass
class Lines:
    """The code of the sources (tokens, each flagged when it lies under a condition that
    could not be evaluated), the macros in force at the end, and names refused with why."""

    tokens: list = field(default_factory=list)
    flags: list = field(default_factory=list)
    macros: dict = field(default_factory=dict)
    function_macros: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)  # macro name -> reason
    complete: bool = True  # every #include reached so far was read
    guard: str = ""  # the include guard of the file being opened, certain on first reading


def _strip_comments(text: str) -> str:
    """``text`` with each comment replaced by a space (string literals are kept)."""
    return _COMMENT_OR_STRING.sub(lambda m: m.group() if m.group()[0] in "\"'" else " ", text)


def _defined(name: str, out: Lines) -> bool | None:
    """Whether ``name`` is a macro here: None when that is not certain."""
    if name in out.refused:
        return None
    if name in out.macros or name in out.function_macros:
        return True
    if name == out.guard:
        return False
    if name.startswith("__") or name in _NVRTC_OWN or not out.complete:
        return None
    return False


def condition(text: str, out: Lines) -> bool | None:
    """The value of an ``#if`` expression: None when it cannot be evaluated for certain."""
    toks = tokenize(text)
    resolved: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] == "defined":
            paren = toks[i + 1 : i + 2] == ["("]
            j = i + 2 if paren else i + 1
            if j >= len(toks) or (paren and toks[j + 1 : j + 2] != [")"]):
                return None
            d = _defined(toks[j], out)
            if d is None:
                return None
            resolved.append("1" if d else "0")
            i = j + (2 if paren else 1)
            continue
        resolved.append({"true": "1", "false": "0"}.get(toks[i], toks[i]))
        i += 1
    try:
        toks = substitute(resolved, out.macros, refused=out.refused)
    except SignatureError:
        return None
    final = []
    for t in toks:
        if _is_id(t) and t not in ("true", "false") and t not in ALTERNATIVE_TOKENS:
            if t == "defined" or _defined(t, out) is not False:
                return None  # a function-like macro, or a name that may be defined
            t = "0"
        final.append({"true": "1", "false": "0"}.get(t, t))
    try:
        return evaluate_if(final)
    except SignatureError:
        return None


def _record_define(line: str, out: Lines, certain: bool, seen: set) -> None:
    m = _DEFINE.match(line)
    if not m:
        return
    name = m.group(1)
    if not certain:
        out.refused[name] = f"{name!r} is defined under #if/#ifdef"
    elif name in seen and _body(m) != _body_of(name, out):
        out.refused[name] = f"the macro {name!r} is defined more than once"
    seen.add(name)
    params, body = _body(m)
    if params is not None:
        out.function_macros[name] = (params, body)
        out.macros.pop(name, None)
    else:
        out.macros[name] = body
        out.function_macros.pop(name, None)


def _body(m: re.Match) -> tuple:
    """A ``#define``'s parameters and body, as compared for a redefinition."""
    if not m.group(2):
        return (None, tokenize(m.group(3)))
    close = m.group(3).find(")")
    return (
        [t for t in tokenize(m.group(3)[:close]) if t != ","],
        tokenize(m.group(3)[close + 1 :]),
    )


def _body_of(name: str, out: Lines) -> tuple | None:
    if name in out.function_macros:
        return tuple(out.function_macros[name])
    return (None, out.macros[name]) if name in out.macros else None


def _guard(lines: list[str]) -> str:
    """The include guard ``G`` when the file's first two directives are ``#ifndef G`` and
    ``#define G``; else ''."""
    found: list[re.Match] = []
    for line in lines:
        s = line.strip()
        if s and not s.startswith("#"):
            return ""
        d = _DIRECTIVE.match(s) if s.startswith("#") else None
        if d is not None and d.group(1) != "pragma":
            found.append(d)
            if len(found) == 2:
                break
    if len(found) < 2 or found[0].group(1) != "ifndef" or found[1].group(1) != "define":
        return ""
    g = (tokenize(found[0].group(2)) or [""])[0]
    return g if (tokenize(found[1].group(2)) or [""])[0] == g else ""


@dataclass
class _Reader:
    """The state of one read: the output, names seen defined, files read, the include hook."""

    out: Lines
    seen: set
    include: Include | None
    read: set = field(default_factory=set)
    once: set = field(default_factory=set)

    def text(self, text: str, key: object = None, depth: int = 0) -> None:
        """Read one file's text, its includes in place."""
        if depth > _MAX_DEPTH:
            raise SignatureError("#include nested too deeply")
        out = self.out
        lines = _strip_comments(text.replace("\r\n", "\n").replace("\\\n", "")).splitlines()
        ident = getattr(key, "path", key)  # search.Found: one file, however it was reached
        first = key is None or ident not in self.read
        self.read.add(ident)
        guard = _guard(lines) if first else ""
        stack: list[list] = []  # per open #if: [state of this branch, taken so far]
        dead = unsure = 0  # how many open branches are False / None
        for line in lines:
            live, certain = dead == 0, dead == 0 and unsure == 0
            s = line.lstrip()
            d = _DIRECTIVE.match(s) if s.startswith("#") else None
            if d is None:
                if live and not s.startswith("#"):
                    toks = tokenize(line)
                    out.tokens += toks
                    out.flags += [not certain] * len(toks)
                continue
            kind, rest = d.group(1), d.group(2)
            if kind in ("if", "ifdef", "ifndef"):
                if not live:
                    c: bool | None = False
                    stack.append([False, True])
                else:
                    out.guard = guard if kind == "ifndef" and guard else ""
                    c = self.test(kind, rest)
                    out.guard, guard = "", ""
                    stack.append([c, c])
                dead += c is False
                unsure += c is None
            elif kind.startswith("el") and stack:
                state, taken = stack[-1]
                dead -= state is False
                unsure -= state is None
                outer_live = dead == 0
                if kind == "else":
                    c = True
                elif kind in ("elif", "elifdef", "elifndef"):
                    c = self.test(kind[2:] or "if", rest) if outer_live else False
                else:
                    c = None  # an #el... directive this reader does not know
                if taken is True:
                    stack[-1] = [False, True]
                elif taken is False:
                    stack[-1] = [c, c]
                else:
                    stack[-1] = [None if c is not False else False, None]
                dead += stack[-1][0] is False
                unsure += stack[-1][0] is None
            elif kind == "endif" and stack:
                state, _ = stack.pop()
                dead -= state is False
                unsure -= state is None
            elif not live:
                continue
            elif kind == "define":
                _record_define(s, out, certain, self.seen)
            elif kind == "undef":
                name = (tokenize(rest) or [""])[0]
                out.refused[name] = (
                    f"{name!r} is #undef'd" if certain else f"{name!r} is undefined under #if"
                )
                out.macros.pop(name, None)
                out.function_macros.pop(name, None)
            elif kind == "pragma" and tokenize(rest)[:1] == ["once"]:
                self.once.add(ident)
            elif kind in ("include", "include_next", "import"):
                self.include_file(kind, rest, key, certain, depth)

    def test(self, kind: str, rest: str) -> bool | None:
        """The value of an #if/#ifdef/#ifndef condition, None when uncertain."""
        if kind in ("if", "elif"):
            return condition(rest, self.out)
        names = tokenize(rest)
        if len(names) != 1 or not _is_id(names[0]):
            return None
        c = _defined(names[0], self.out)
        return c if c is None or kind in ("ifdef", "elifdef", "def") else not c

    def include_file(self, kind: str, rest: str, key: object, certain: bool, depth: int) -> None:
        """Read an #include in place; one not read (or under an uncertain branch) makes every
        name not seen defined uncertain from here on."""
        m = _INCLUDE.match(rest)
        found = None
        if kind == "include" and m and certain and self.include is not None:
            found = self.include(m.group(1) or m.group(2), m.group(2) is not None, key)
        if found is None:
            self.out.complete = False
            return
        if getattr(found[0], "path", found[0]) not in self.once:
            self.text(found[1], found[0], depth + 1)


def read_lines(
    texts: list[str], defines=(), include: Include | None = None, complete=True
) -> Lines:
    """The tokens and macros of ``texts`` (read in order; the last is the source), with the
    ``-D``/``-U`` options ``defines`` applied first. ``include(name, angled, includer)`` gives
    (key, text) of a user header or None (not read); ``complete`` False when something NVRTC
    reads first (a pre-include) is not read here."""
    out, seen = Lines(complete=complete), set()
    for head, value in defines:
        name = re.split(r"[(=]", head, maxsplit=1)[0]
        if value is None:
            out.macros.pop(name, None)
            out.function_macros.pop(name, None)
            continue
        if name in seen:
            out.refused[name] = f"the macro {name!r} is given more than once"
        seen.add(name)
        if "(" in head:
            params = [t for t in tokenize(head[head.index("(") + 1 : head.rfind(")")]) if t != ","]
            out.function_macros[name] = (params, tokenize(value))
        else:
            out.macros[name] = tokenize(value)
    reader = _Reader(out, seen, include)
    for text in texts:
        reader.text(text)
    return out
