"""The macro table of the fast scan and what computed includes expand to: every value each
macro is given (object-like and function-like), the preprocessor's rules for calls (arguments
expanded first, ``#`` and ``##``), and the probes a probe macro's uses make (``#define HAS(x)
__has_include(x)``, then ``#if HAS("h.h")``)."""

from __future__ import annotations

import itertools
import re
from typing import Any, NamedTuple

from . import scan as _scan
from .lexical import header_name, logical_start, probe_operand, spliced

_ID = re.compile(r"[A-Za-z_]\w*")
# a string or character literal (skipped: no name inside one is replaced) or a name (group 1)
_TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"?|\'(?:\\.|[^\'\\\n])*\'|([A-Za-z_]\w*)')
_LONGEST = 4096  # an expansion longer than this is cut short (a value used twice, nested)


def _names(text: str):
    """The names in ``text`` outside string literals, as matches."""
    return (m for m in _TOKEN.finditer(text) if m.group(1))


class Function(NamedTuple):
    """A function-like macro's definition, a value of the macro table: its parameters and value."""

    params: tuple[str, ...]
    body: str


Table = dict[str, set[Any]]  # macro name -> every value seen: a str, or a Function
_STRINGIZED = re.compile(r"(?<!#)#(?!#)[ \t]*([A-Za-z_]\w*)")  # '#x' in a macro's value
_PASTED = re.compile(r"#[ \t]*([A-Za-z_]\w*)|([A-Za-z_]\w*)[ \t]*##")  # '#x', 'x ##', '## x'
_PASTE = re.compile(r"[ \t]*##[ \t]*")
_LITERAL = {q: re.compile(q + r"(?:\\.|[^\\\n" + q + "])*" + q) for q in "\"'"}


def expand_computed(text: str, table: Table, limit: int = 64) -> list[tuple[str, bool]]:
    """Every header name a computed include can take, using all values seen for each macro."""
    return expansions(text, table, limit)[0]


def expansions(text: str, table: Table, limit: int = 64) -> tuple[list[tuple[str, bool]], bool]:
    """(every header name a computed include can take, whether that is all of them): False
    when the ``limit`` of values, the depth of 24 expansions or _LONGEST cut it short. A name
    inside a string literal is never replaced (``#define h 1`` leaves ``"h.h"`` as it is)."""
    done, complete = _expanded(text, table, limit, {})
    names = []
    for t in sorted(done):
        t = t.strip()
        if len(t) > 2 and ((t[0] == "<" and t[-1] == ">") or (t[0] == '"' and t[-1] == '"')):
            names.append((re.sub(r"\s+", "", t[1:-1]) if t[0] == "<" else t[1:-1], t[0] == "<"))
    return names, complete


def _expanded(text: str, table: Table, limit: int, memo: dict) -> tuple[set[str], bool]:
    """(every text ``text`` expands to, with no macro left to replace; whether that is all:
    not when more than ``limit`` texts, 24 steps or _LONGEST characters cut it short).
    ``memo`` keeps each text's answer for the rest of one expansion (an argument met again)."""
    if text in memo:
        return memo[text]
    results, done, complete = {text}, set[str](), True
    for _ in range(24):
        pending = results - done
        if not pending:
            break
        for t in pending:
            m = next((m for m in _names(t) if _expands(t, m, table)), None)
            if m is None:
                done.add(t)
                continue
            results.discard(t)
            for v in sorted(table[m.group()], key=str):
                new, whole = _replaced(t, m, v, table, limit, memo)
                kept = [n for n in new if len(n) <= _LONGEST]
                complete &= whole and len(kept) == len(new)
                complete &= len(results) + len(kept) <= limit
                results.update(kept[: max(0, limit - len(results))])
    memo[text] = done, complete and not results - done
    return memo[text]


def _expands(text: str, m: re.Match, table: Table) -> bool:
    """Whether the name at ``m`` is a macro there: object-like, or function-like and called."""
    values = table.get(m.group(), ())
    return bool(values) and (
        any(isinstance(v, str) for v in values) or _arguments(text, m.end()) is not None
    )


def _replaced(
    text: str, m: re.Match, value, table: Table, limit: int, memo: dict
) -> tuple[list[str], bool]:
    """(``text`` with the macro at ``m`` replaced by ``value``, one text for each value its
    arguments can take; whether that is all). A function-like value has no call there, or one
    of another number of arguments, gives none (NVRTC refuses that)."""
    if isinstance(value, str):
        return [text[: m.start()] + value + text[m.end() :]], True
    call = _arguments(text, m.end())
    if call is None:
        return [], True
    args, end, starts = call
    params, body = value.params, value.body
    if params and params[-1].endswith("..."):  # variadic: every argument from there, as
        if len(args) < len(params) - 1:  # written, is __VA_ARGS__ (GNU's 'args...': args)
            return [], True
        params = (*params[:-1], params[-1].removesuffix("...") or "__VA_ARGS__")
        rest = text[starts[len(params) - 1] : end - 1].strip() if len(args) >= len(params) else ""
        args = [*args[: len(params) - 1], rest]
        if not rest:  # GNU: ', ## __VA_ARGS__' drops the comma when there is none
            body = re.sub(r",[ \t]*##[ \t]*" + params[-1] + r"\b", "", body)
    elif len(args) != max(len(params), 1) or (not params and args != [""]):
        return [], True
    given = dict(zip(params, args, strict=False))  # F() has one empty argument
    # '#x' and 'x ## y' take the argument as written; elsewhere it is expanded first
    raw = {n for pair in _PASTED.findall(body) for n in pair if n in given}
    body = _STRINGIZED.sub(lambda s: _stringized(given[s[1]]) if s[1] in given else s[0], body)
    choices, whole = [], True
    for p in params:
        if p in raw:
            choices.append([given[p]])
            continue
        texts, all_ = _expanded(given[p], table, limit, memo)
        choices.append(sorted(texts))
        whole &= all_
    out = []
    for combo in itertools.islice(itertools.product(*choices), limit + 1):
        chosen = dict(zip(params, combo, strict=True))
        out.append(text[: m.start()] + _substituted(body, chosen) + text[end:])
    return out[:limit], whole and len(out) <= limit


def _stringized(arg: str) -> str:
    """``#x`` of an argument: its spelling in quotes, blanks made one space, and a backslash
    before each quote and backslash (those of its literals: what an include's name holds)."""
    text = " ".join(arg.split()).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _substituted(body: str, chosen: dict[str, str]) -> str:
    """A function-like macro's value with its parameters replaced (outside string literals)
    and its ``##`` pastes made."""
    done = _TOKEN.sub(lambda w: chosen.get(w[1], w[0]) if w[1] else w[0], body)
    return _PASTE.sub("", done) if "##" in done else done


def _arguments(text: str, at: int) -> tuple[list[str], int, list[int]] | None:
    """The arguments of a call whose '(' is the first thing after ``at`` but blanks, the end
    of the call and where each argument starts; None when none follows or it is not closed. A
    comma or parenthesis inside a string or character literal is part of its argument."""
    i = len(text) - len(text[at:].lstrip(" \t"))
    if i >= len(text) or text[i] != "(":
        return None
    depth, args, start, j, starts = 0, list[str](), i + 1, i, [i + 1]
    while j < len(text):
        c = text[j]
        if c in "\"'":
            close = _LITERAL[c].match(text, j)
            if close is None:
                return None
            j = close.end()
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if not depth:
                return [*args, text[start:j].strip()], j + 1, starts
        elif c == "," and depth == 1:
            args.append(text[start:j].strip())
            start = j + 1
            starts.append(start)
        j += 1
    return None


_HAS_INCLUDE = re.compile(r"__has_include(_next)?\b")
# a use anywhere but in a #define is read (an #if or #elif however spelled: %:if, #/**/if)
_DEFINE_LINE = re.compile(rb"[ \t]*(?:#|%:)[ \t]*define\b")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def probers_of(names: set[str], table: Table) -> set[str]:
    """``names`` (macros whose value probes: ``#define HAS(x) __has_include(x)``) and every
    macro whose value uses one of them, transitively (``#define HAS2(x) HAS(x)``)."""
    found, grew = set(names), True
    while grew:
        grew = False
        for name, values in table.items():
            if name not in found and any(
                found & set(_ID.findall(v if isinstance(v, str) else v.body)) for v in values
            ):
                found.add(name)
                grew = True
    return found


def prober_probes(data: bytes, probers: set[str], table: Table, limit: int = 64) -> list:
    """The probes the uses of ``probers`` in a file make (but in #define lines): each use
    expanded (``HAS(h)`` -> ``__has_include("h.h")``), its operands a header name or a computed
    probe; a use the expansion cannot finish is a computed probe of its own text, which names
    nothing (so the file is unresolved, never cached)."""
    uses = sorted(
        m.start()
        for name in probers
        if name.encode() in data
        for m in re.finditer(rb"(?<!\w)" + re.escape(name.encode()) + rb"(?!\w)", data)
    )
    out, line, last, memo = [], 1, 0, dict[str, Any]()
    for at in uses:
        line += data.count(b"\n", last, at)
        last = at
        if _DEFINE_LINE.match(data, logical_start(data, at)):
            continue  # another macro's value: its uses are read
        text = data[at : at + 1024].decode("utf-8", "replace")
        text = _BLOCK_COMMENT.sub(" ", spliced(text))
        name = _ID.match(text)
        if name is None:
            continue
        call = _arguments(text, name.end())
        use = text[: call[1]] if call is not None else name.group()
        texts, whole = _expanded(use, table, limit, memo)
        if not whole:
            out.append(_scan.Include(use, False, line, "computed_probe", at))
        for t in texts:
            for h in _HAS_INCLUDE.finditer(t):
                operand = probe_operand(t[h.end() :])
                kind = "probe_next" if h.group(1) else "probe"
                header, angled = header_name(operand or "")
                if header is not None:
                    out.append(_scan.Include(header, angled, line, kind, at))
                elif operand:
                    out.append(_scan.Include(operand, False, line, "computed_" + kind, -1))
    return out


def add_macros(table: Table, scan: _scan.FileScan) -> None:
    """Enter a file's object-like macros that may name a header into the table (its
    function-like ones: ``add_functions``, once an expansion needs them)."""
    for n, v in scan.defines:
        table[n].add(v)


def add_functions(table: Table, scans: list) -> None:
    """Enter the function-like macros of ``scans`` into the table, and forget them: read only
    where a computed include or a probe macro asks (a CUB closure has none)."""
    for scan in scans:
        for n, params, body in scan.functions:
            table[n].add(Function(params, body))
    scans.clear()


def names_used(text: str, table: Table) -> set[str]:
    """The names ``text`` uses, and those their values in ``table`` use, transitively."""
    used, todo = set[str](), [m.group() for m in _ID.finditer(text)]
    while todo:
        name = todo.pop()
        if name not in used:
            used.add(name)
            for value in table.get(name, ()):
                body = value if isinstance(value, str) else value.body
                todo += [m.group() for m in _names(body)]
    return used
