"""The text of C++ as NVRTC's preprocessor reads it, as pure functions: comments, strings and
raw strings told apart (``_TOKENS``), the directive lines of a text (``directives``), the header
name of an ``#include`` or ``__has_include`` operand, and what may stand between a directive's
words (``GAP``). The fast scan (scan.py), directive lines per file (directives.py), liveness and
exact mode read text through these."""

from __future__ import annotations

import re

# what may stand between a directive's '#' and its name, and between its words: blanks, a
# comment (never read past its */) or a backslash-newline (bytes: the scans read bytes)
GAP = rb"(?:[ \t\f\v]|/\*(?:[^*]|\*(?!/)){0,256}\*/|\\\r?\n)"  # {0,256}: never n²
_RAW = r'(?<!\w)(?:u8|[uUL])?R"([^()\\\s]{0,16})\(.*?\)\1"'  # a raw string: no directives
_STRING = r'|"(?:\\.|[^"\\\n])*"?'  # a string or character literal: one left open ends with
_CHAR = r"|'(?:(?<![\w.]')|(?<=(?<![\w.])[uUL]')|(?<=(?<![\w.])u8'))(?:\\.|[^'\\\n])*'?"
#   its line, as NVRTC reads it (don't /* opens no comment); a ' after a digit or a letter other
#   than a prefix (L'a', u8'a') opens none: a digit separator (C++14: 1'000)
_ANY_CHAR = r"|'(?:\\.|[^'\\\n])*'?"  # as NVRTC reads a skipped group: every ' opens one
_COMMENTS = (
    r"|//(?:[^\n\\]|\\\r?\n|\\)*"  # a line comment, with the lines a backslash joins to it
    r"|/\*.*?(?:\*/|\Z)"  # a comment; one left open ends the text (linear, never n²)
)
_TOKENS = re.compile(_RAW + _STRING + _CHAR + _COMMENTS, re.S)
_LEADING_COMMENTS = re.compile(r"^(?:[ \t\f\v\r]|/\*.*?\*/)*")
_TOKENS_SKIPPED = re.compile(_RAW + _STRING + _ANY_CHAR + _COMMENTS, re.S)
# a directive: '#' (or its digraph '%:') first on a line that no backslash joined to the one
# before; a backslash-newline (or a comment, made one by _strip) may stand before its name
_DIRECTIVE = re.compile(
    r"(?<!\\\n)(?<!\\\r\n)^[ \t\f\v\r]*(?:#|%:)(?:[ \t\f\v\r]|\\\r?\n)*([A-Za-z_]\w*)"
    r"((?:[^\n\\]|\\\r?\n|\\)*)",
    re.M,
)
_SPLICE = re.compile(r"\\\r?\n")
# a backslash-newline inside a token (``#el\`` newline ``se``, ``"h\`` newline ``.h"``): rare,
# so only a text holding one is spliced first (the others' splices end lines, inside comments,
# or continue directives, which the patterns above read as they are)
_IN_TOKEN = re.compile(r"\\\r?\n[\w\"<>.:%#]")


def header_name(text: str) -> tuple[str | None, bool]:
    text = text.strip()
    if len(text) >= 2 and text[0] == "<" and text[-1] == ">":
        return re.sub(r"\s+", "", text[1:-1]) if " " in text else text[1:-1], True
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1], False
    return None, False


def _strip(m: re.Match) -> str:
    """A string as it is; a comment as one space, and a raw string as spaces, each keeping its
    line breaks: as backslash-newlines in a directive's line (a directive a comment spans goes
    on past it), as newlines elsewhere (NVRTC starts a directive at a '#' after a comment that
    spans lines: ``x; /*`` newline ``*/ #else`` is one)."""
    s = m.group(0)
    if m.group(1) is not None:  # a raw string
        return " " + "\n" * s.count("\n")
    if s[0] in "\"'":  # a literal
        return s
    lines = s.count("\n")
    if lines:
        text, at = m.string, m.start()
        start = text.rfind("\n", 0, at) + 1
        head = _LEADING_COMMENTS.sub("", text[start:at])  # `/**/#include /*`: a directive's
        directive = head.startswith(("#", "%:")) or "*/" in head  # after a comment's end: go on
        if not directive and not text.endswith(("\\\n", "\\\r\n"), 0, start):
            return " " + "\n" * lines
    return " " + "\\\n" * lines


_SPLICE_BYTES = re.compile(rb"\\\r?\n[\w\"<>.:%#]")
_TOKEN_BYTES = frozenset(b'_"<>.:%#0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz')


def splits_token(data: bytes) -> bool:
    """Whether a backslash-newline splits a token of ``data`` (``#inc\\`` newline ``lude``): a
    token character on both sides (a macro's continuation line after a blank is no split)."""
    return any(
        m.start() and data[m.start() - 1] in _TOKEN_BYTES for m in _SPLICE_BYTES.finditer(data)
    )


def spliced(text: str) -> str:
    """``text`` with its backslash-newlines removed (translation phase 2), each line they join
    followed by as many empty lines, so that every line keeps its number."""
    parts = _SPLICE.split(text)
    out, owed = [], 0
    for i, piece in enumerate(parts):
        if owed and "\n" in piece:
            at = piece.index("\n")
            piece, owed = piece[:at] + "\n" * owed + piece[at:], 0
        out.append(piece)
        owed += i < len(parts) - 1
    return "".join(out) + "\n" * owed


def _joined(m: re.Match) -> str:
    s = m.group(0)
    return s if m.group(1) is None and s[0] in "\"'" else " "


def directives(text: str, reading: str = "nvrtc") -> list[tuple[int, str, str]]:
    """(line, directive, rest) of every directive line, comments removed, continuations joined.
    Other ``reading``s, each a superset for the fast scan where NVRTC's own may differ: "raw"
    (comments and literals left in), "joined" (a comment is one space, its line breaks gone:
    phase 3 to the letter), "skipped" (every ' opens a character literal, as in a skipped
    group)."""
    if _IN_TOKEN.search(text):
        text = spliced(text)
    if reading == "raw":
        clean = text
    elif reading == "joined":
        clean = _TOKENS.sub(_joined, text)
    else:
        clean = (_TOKENS_SKIPPED if reading == "skipped" else _TOKENS).sub(_strip, text)
    out, line, pos = [], 1, 0
    for m in _DIRECTIVE.finditer(clean):
        line += clean.count("\n", pos, m.start())
        pos = m.start()
        out.append((line, m.group(1), _SPLICE.sub(" ", m.group(2)).strip()))
    return out


def hidden_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each comment and raw string of ``text``, in order: a line inside one is
    no directive (an ``#include`` there is never read)."""
    return [m.span() for m in _TOKENS.finditer(text) if m.group(1) is not None or m[0][0] == "/"]


def probe_operand(text: str) -> str | None:
    """The operand of a ``__has_include`` whose name ``text`` follows, as the preprocessor reads
    it: the text between its parentheses with backslash-newlines, comments and outer blanks
    gone (a header name inside kept whole: ``<a//b.h>``); None when no '(' comes first or it is
    not closed within ``text``."""
    text = _SPLICE.sub("", text)
    out: list[str] = []
    i, depth = 0, 0
    while i < len(text):
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return None
            out.append(" ")
            i = end + 2
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        c = text[i]
        if not depth:
            if c != "(" and not c.isspace():
                return None
            depth, i = (1, i + 1) if c == "(" else (0, i + 1)
            continue
        if c in '<"' and not "".join(out).strip():  # the name first: read whole
            end = text.find(">" if c == "<" else '"', i + 1)
            if end < 0 or "\n" in text[i:end]:
                return None
            out.append(text[i : end + 1])
            i = end + 1
            continue
        depth += c == "("
        depth -= c == ")"
        if not depth:
            return "".join(out).strip()
        out.append(c)
        i += 1
    return None


def continued(data: bytes, end: int) -> bool:
    """Whether the line ending at byte ``end`` (its newline) ends in a backslash-newline."""
    return data.endswith(b"\\", 0, end) or data.endswith(b"\\\r", 0, end)


def logical_start(data: bytes, at: int) -> int:
    """Where the line holding byte ``at`` starts, lines joined by backslash-newlines."""
    start = data.rfind(b"\n", 0, at) + 1
    while start > 1 and continued(data, start - 1):
        start = data.rfind(b"\n", 0, start - 1) + 1
    return start
