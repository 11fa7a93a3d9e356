"""The macro table of the fast scan and what computed includes expand to: every value each
macro is given (object-like and function-like), the preprocessor's rules for calls (arguments
expanded first, ``#`` and ``##``), and the probes a ``__has_include`` wrapper's calls make."""

from __future__ import annotations

import itertools
import re
from typing import Any, NamedTuple

from . import scan as _scan
from .lexical import header_name

_ID = re.compile(r"[A-Za-z_]\w*")
_WORD = re.compile(r'[A-Za-z_]\w*(?=(?:[^"]*"[^"]*")*[^"]*$)')  # a name outside "..."


class Function(NamedTuple):
    """A function-like macro's definition, a value of the macro table: its parameters and value."""

    params: tuple[str, ...]
    body: str


Table = dict[str, set[Any]]  # macro name -> every value seen: a str, or a Function
_STRINGIZED = re.compile(r"(?<!#)#(?!#)[ \t]*([A-Za-z_]\w*)")  # '#x' in a macro's value
_PASTED = re.compile(r"#[ \t]*([A-Za-z_]\w*)|([A-Za-z_]\w*)[ \t]*##")  # '#x', 'x ##', '## x'
_PASTE = re.compile(r"[ \t]*##[ \t]*")


def expand_computed(text: str, table: Table, limit: int = 64) -> list[tuple[str, bool]]:
    """Every header name a computed include can take, using all values seen for each macro."""
    return expansions(text, table, limit)[0]


def expansions(text: str, table: Table, limit: int = 64) -> tuple[list[tuple[str, bool]], bool]:
    """(every header name a computed include can take, whether that is all of them): False
    when the ``limit`` of values or the depth of 24 expansions cut it short, or a call's
    arguments hold a quote. A name inside a string literal is never replaced (``#define h 1``
    leaves ``"h.h"`` as it is)."""
    done, complete = _expanded(text, table, limit)
    names = []
    for t in sorted(done):
        t = t.strip()
        if len(t) > 2 and ((t[0] == "<" and t[-1] == ">") or (t[0] == '"' and t[-1] == '"')):
            names.append((re.sub(r"\s+", "", t[1:-1]) if t[0] == "<" else t[1:-1], t[0] == "<"))
    return names, complete


def _expanded(text: str, table: Table, limit: int) -> tuple[set[str], bool]:
    """(every text ``text`` expands to, with no macro left to replace; whether that is all)."""
    results, done, complete = {text}, set[str](), True
    for _ in range(24):
        pending = results - done
        if not pending:
            break
        for t in pending:
            m = next((m for m in _WORD.finditer(t) if _expands(t, m, table)), None)
            if m is None:
                done.add(t)
                continue
            results.discard(t)
            for v in sorted(table[m.group()], key=str):
                new, whole = _replaced(t, m, v, table, limit)
                complete &= whole and len(results) + len(new) <= limit
                results.update(new[: max(0, limit - len(results))])
    return done, complete and not results - done


def _expands(text: str, m: re.Match, table: Table) -> bool:
    """Whether the name at ``m`` is a macro there: object-like, or function-like and called."""
    values = table.get(m.group(), ())
    return bool(values) and (
        any(isinstance(v, str) for v in values) or _arguments(text, m.end()) is not None
    )


def _replaced(text: str, m: re.Match, value, table: Table, limit: int) -> tuple[list[str], bool]:
    """(``text`` with the macro at ``m`` replaced by ``value``, one text for each value its
    arguments can take; whether that is all). A function-like value has no call there, or one
    of another number of arguments, gives none (NVRTC refuses that)."""
    if isinstance(value, str):
        return [text[: m.start()] + value + text[m.end() :]], True
    call = _arguments(text, m.end())
    if call is None:
        return [], True
    args, end = call
    if any(q in a for a in args for q in "\"'"):
        return [], False  # a comma or parenthesis may hide in a literal: not split here
    params = value.params
    if len(args) != max(len(params), 1) or (not params and args != [""]):
        return [], True
    given = dict(zip(params, args, strict=False))  # F() has one empty argument
    # '#x' and 'x ## y' take the argument as written; elsewhere it is expanded first
    raw = {n for pair in _PASTED.findall(value.body) for n in pair if n in given}
    body = _STRINGIZED.sub(
        lambda s: '"' + " ".join(given[s[1]].split()) + '"' if s[1] in given else s[0],
        value.body,
    )
    choices, whole = [], True
    for p in params:
        if p in raw:
            choices.append([given[p]])
            continue
        texts, all_ = _expanded(given[p], table, limit)
        choices.append(sorted(texts))
        whole &= all_
    out = []
    for combo in itertools.islice(itertools.product(*choices), limit + 1):
        chosen = dict(zip(params, combo, strict=True))
        out.append(text[: m.start()] + _substituted(body, chosen) + text[end:])
    return out[:limit], whole and len(out) <= limit


def _substituted(body: str, chosen: dict[str, str]) -> str:
    """A function-like macro's value with its parameters replaced (outside string literals)
    and its ``##`` pastes made."""
    done = _WORD.sub(lambda w: chosen.get(w.group(), w.group()), body)
    return _PASTE.sub("", done) if "##" in done else done


def _arguments(text: str, at: int) -> tuple[list[str], int] | None:
    """The arguments of a call whose '(' is the first thing after ``at`` but blanks, and the
    end of the call; None when none follows or it is not closed."""
    i = len(text) - len(text[at:].lstrip(" \t"))
    if i >= len(text) or text[i] != "(":
        return None
    depth, args, start = 0, list[str](), i + 1
    for j in range(i, len(text)):
        c = text[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if not depth:
                return [*args, text[start:j].strip()], j + 1
        elif c == "," and depth == 1:
            args.append(text[start:j].strip())
            start = j + 1
    return None


def wrapper_calls(data: bytes, macro: str, indexes: set[int]) -> list[_scan.Include]:
    """The probes the calls of a wrapper macro in ``data`` make (``HAS("h.h")`` of ``#define
    HAS(x) __has_include(x)``): the arguments at ``indexes``, a header name or a computed
    probe (its definition's own head is no call)."""
    if macro.encode() not in data:
        return []
    out = []
    for m in re.finditer(rb"(?<!\w)" + re.escape(macro.encode()) + rb"[ \t]*\(", data):
        start = data.rfind(b"\n", 0, m.start()) + 1
        if re.fullmatch(rb"[ \t]*#[ \t]*define[ \t]*", data[start : m.start()]):
            continue
        call = _arguments(data[m.end() - 1 : m.end() + 1024].decode("utf-8", "replace"), 0)
        args = call[0] if call is not None else []
        line = data.count(b"\n", 0, m.start()) + 1
        for i in sorted(indexes) if args else ():
            arg = args[i] if i < len(args) else ""
            header, angled = header_name(arg)
            if header is not None:
                out.append(_scan.Include(header, angled, line, "probe", m.start()))
            elif arg:
                out.append(_scan.Include(arg, False, line, "computed_probe", m.start()))
    return out


def add_macros(table: Table, scan: _scan.FileScan) -> None:
    """Enter a file's macros that may name a header into the table."""
    for n, v in scan.defines:
        table[n].add(v)
    for n, params, body in scan.functions:
        table[n].add(Function(params, body))


def names_used(text: str, table: Table) -> set[str]:
    """The names ``text`` uses, and those their values in ``table`` use, transitively."""
    used, todo = set[str](), [m.group() for m in _ID.finditer(text)]
    while todo:
        name = todo.pop()
        if name not in used:
            used.add(name)
            for value in table.get(name, ()):
                body = value if isinstance(value, str) else value.body
                todo += [m.group() for m in _WORD.finditer(body)]
    return used
