"""Preprocessor lines for the signature reader: ``#define``/``#undef`` in text order after the
``-D``/``-U`` options, and ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else`` evaluated where
that is certain (a macro the sources and options define or not, ``0``/``1``, ``defined``,
integer comparisons). A dead branch is dropped; a branch whose condition cannot be evaluated
(a macro a system header or NVRTC may define, ``__CUDA_ARCH__``, a function-like macro) is
kept with its tokens flagged, and whatever it defines or undefines is refused by name, as is a
macro defined more than once or #undef'd: the reader never picks one definition."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .lexer import _COMMENT_OR_STRING, SignatureError, _match, substitute, tokenize

_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\()?(.*)", re.S)
_DIRECTIVE = re.compile(r"#\s*(\w+)\s*(.*)", re.S)
# macros a system header (CUDA, CUB, Thrust, libc) may define: unknown unless defined here
_EXTERNAL = re.compile(
    r"_|CUDA|CUDART|CU_|NV|CUB|THRUST|CCCL|LIBCUDACXX|CUTLASS|CUTE|CUPY|M_|U?INT\d*_|U?LL?ONG_|"
    r"FLT_|DBL_|LDBL_|U?SHRT_|[SU]?CHAR_|SIZE_|PTRDIFF_|INFINITY$|NAN$|HUGE_|NULL$|EOF$|WCHAR_|"
    r"U?INTMAX_|U?INTPTR_|WINT_|WEOF$|RAND_MAX$|EXIT_|CLOCKS_PER_SEC$|MB_LEN_MAX$|BUFSIZ$|"
    r"FILENAME_MAX$|SEEK_|SIG|E[A-Z0-9]+$|FE_|FP_|MATH_ERR|LC_|PRI|SCN|TIME_UTC$|assert$|errno$"
)


@dataclass
class Lines:
    """The code of the sources (tokens, each flagged when it lies under a condition that
    could not be evaluated), the macros in force at the end, and names refused with why."""

    tokens: list = field(default_factory=list)
    flags: list = field(default_factory=list)
    macros: dict = field(default_factory=dict)
    function_macros: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)  # macro name -> reason


def _strip_comments(text: str) -> str:
    """``text`` with each comment replaced by a space (string literals are kept)."""
    return _COMMENT_OR_STRING.sub(lambda m: m.group() if m.group()[0] in "\"'" else " ", text)


def _defined(name: str, out: Lines) -> bool | None:
    """Whether ``name`` is a macro here: None when that is not certain."""
    if name in out.refused:
        return None
    if name in out.macros or name in out.function_macros:
        return True
    return None if _EXTERNAL.match(name) else False


def _nots(tokens: list[str]) -> list[str]:
    """``! x`` and ``! ( ... )`` rewritten as Python's ``( not x )`` with C's precedence."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] != "!":
            out.append(tokens[i])
            i += 1
            continue
        end = _match(tokens, i + 1, "(", ")") if tokens[i + 1 : i + 2] == ["("] else i + 1
        out += ["(", "not", *_nots(tokens[i + 1 : end + 1]), ")"]
        i = end + 1
    return out


_PY = {"&&": "and", "||": "or"}
_NODES: tuple[type, ...] = (
    *(ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd),
    *(ast.Invert, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.LShift, ast.RShift, ast.BitAnd),
    *(ast.BitOr, ast.BitXor, ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE),
    *(ast.Constant, ast.Load),
)


def condition(text: str, out: Lines) -> bool | None:
    """The value of an ``#if`` expression: None when it cannot be evaluated for certain."""
    toks = tokenize(text)
    resolved: list[str] = []
    i = 0
    while i < len(toks):
        if toks[i] == "defined":
            paren = toks[i + 1 : i + 2] == ["("]
            name = toks[i + 2] if paren else toks[i + 1] if i + 1 < len(toks) else ""
            d = _defined(name, out)
            if d is None:
                return None
            resolved.append("1" if d else "0")
            i += 4 if paren else 2
            continue
        resolved.append({"true": "1", "false": "0"}.get(toks[i], toks[i]))
        i += 1
    try:
        toks = substitute(resolved, out.macros, refused=out.refused)
    except SignatureError:
        return None
    for t in toks:
        if t in out.function_macros or (t[:1].isalpha() or t[:1] == "_") and _defined(t, out):
            return None
        if (t[:1].isalpha() or t[:1] == "_") and _defined(t, out) is None:
            return None
    toks = ["0" if (t[:1].isalpha() or t[:1] == "_") else t for t in toks]
    parts = [_PY.get(t, t) for t in _nots(toks)]
    if any(p[:1].isdigit() and not p.isdigit() for p in parts) or "?" in parts:
        return None  # suffixes, hex, and ?: are left to the compiler
    try:
        tree = ast.parse(" ".join(parts).replace("> >", ">>"), mode="eval")
        if not all(isinstance(n, _NODES) for n in ast.walk(tree)):
            return None
        return bool(eval(compile(tree, "<if>", "eval"), {"__builtins__": {}}))  # checked nodes
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError, OverflowError):
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


def read_lines(texts: list[str], defines=()) -> Lines:
    """The tokens and macros of ``texts`` (the user's headers, then the source), with the
    ``-D``/``-U`` options ``defines`` applied first."""
    out, seen = Lines(), set()
    for name, value in defines:
        if value is None:
            out.macros.pop(name, None)
        else:
            if name in seen:
                out.refused[name] = f"the macro {name!r} is given more than once"
            seen.add(name)
            out.macros[name] = tokenize(value)
    for text in texts:
        stack: list[list] = []  # per open #if: [state of this branch, taken so far]
        for line in _strip_comments(text.replace("\\\n", "")).splitlines():
            states = [s for s, _ in stack]
            live = False not in states
            certain = live and None not in states
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
                    stack.append([False, True])
                    continue
                if kind == "if":
                    c = condition(rest, out)
                else:
                    c = _defined((tokenize(rest) or [""])[0], out)
                    c = c if c is None or kind == "ifdef" else not c
                stack.append([c, c])
            elif kind in ("elif", "else") and stack:
                taken = stack[-1][1]
                outer_live = False not in states[:-1]
                c = True if kind == "else" else condition(rest, out) if outer_live else False
                if taken is True:
                    stack[-1] = [False, True]
                elif taken is False:
                    stack[-1] = [c, c]
                else:
                    stack[-1] = [None if c is not False else False, None]
            elif kind == "endif" and stack:
                stack.pop()
            elif kind == "define" and live:
                _record_define(s, out, certain, seen)
            elif kind == "undef" and live:
                name = (tokenize(rest) or [""])[0]
                out.refused[name] = (
                    f"{name!r} is #undef'd" if certain else f"{name!r} is undefined under #if"
                )
                out.macros.pop(name, None)
                out.function_macros.pop(name, None)
    return out
