"""Directive lines: the ``#`` lines of a source or header, comments removed and continuations
joined, each as (line, directive, rest), remembered per file (by its scan.py file id, with its
digest) so a header read again costs nothing; and the header name of an ``#include`` or
``__has_include`` operand (``<...>`` or ``"..."``). Exact mode (exact.py) walks only these lines:
text lines are never read for macros."""

from __future__ import annotations

import re

from ..ground.regular import read_bytes
from . import scan as _scan

_TOKENS = re.compile(
    r'(?<!\w)(?:u8|[uUL])?R"([^()\\\s]{0,16})\(.*?\)\1"'  # a raw string: no directives
    r'|"(?:\\.|[^"\\\n])*"?'  # a string or character literal: one left open ends with its line,
    r"|'(?:(?<![\w.]')|(?<=(?<![\w.])[uUL]')|(?<=(?<![\w.])u8'))(?:\\.|[^'\\\n])*'?"
    #   as NVRTC reads it (don't /* opens no comment); a ' after a digit or a letter other than
    #   a prefix (L'a', u8'a') opens none: a digit separator (C++14: 1'000)
    r"|//(?:[^\n\\]|\\\r?\n|\\)*"  # a line comment, with the lines a backslash joins to it
    r"|/\*.*?\*/",
    re.S,
)
# a directive: '#' (or its digraph '%:') first on a line that no backslash joined to the one
# before; a backslash-newline (or a comment, made one by _strip) may stand before its name
_DIRECTIVE = re.compile(
    r"(?<!\\\n)(?<!\\\r\n)^[ \t\f\v]*(?:#|%:)(?:[ \t\f\v]|\\\r?\n)*([A-Za-z_]\w*)"
    r"((?:[^\n\\]|\\\r?\n|\\)*)",
    re.M,
)
_SPLICE = re.compile(r"\\\r?\n")


def _header_name(text: str) -> tuple[str | None, bool]:
    text = text.strip()
    if len(text) >= 2 and text[0] == "<" and text[-1] == ">":
        return re.sub(r"\s+", "", text[1:-1]) if " " in text else text[1:-1], True
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1], False
    return None, False


def _strip(m: re.Match) -> str:
    """A string as it is; a comment as one space, and a raw string as spaces, each keeping its
    line breaks (as backslash-newlines, so a directive a comment spans goes on past it)."""
    s = m.group(0)
    if m.group(1) is not None:  # a raw string
        return " " + "\n" * s.count("\n")
    if s[0] in "\"'":  # a literal
        return s
    return " " + "\\\n" * s.count("\n")


_lines_memo: dict[tuple, tuple[str, list]] = {}


def directives(text: str) -> list[tuple[int, str, str]]:
    """(line, directive, rest) of every directive line, comments removed, continuations joined."""
    clean = _TOKENS.sub(_strip, text)
    out, line, pos = [], 1, 0
    for m in _DIRECTIVE.finditer(clean):
        line += clean.count("\n", pos, m.start())
        pos = m.start()
        out.append((line, m.group(1), _SPLICE.sub(" ", m.group(2)).strip()))
    return out


def _file_directives(path: str) -> tuple[tuple, tuple[str, list]]:
    fid = _scan.file_id(path)
    hit = _lines_memo.get(fid)
    if hit is None:
        data = read_bytes(path)  # a regular file only: a FIFO would block
        _scan.check_header(data, path)  # ScanError naming file:line:col
        text = data.decode("utf-8")
        hit = _lines_memo[fid] = (_scan.digest_bytes(data), directives(text))
    return fid, hit


def scanned_directives(fid: tuple, scan: _scan.FileScan) -> list[tuple[int, str, str]]:
    """The directive lines of a file fast mode scanned (its file id and FileScan), from the
    bytes the scan read: remembered with _file_directives', no second read or digest."""
    hit = _lines_memo.get(fid)
    if hit is None:
        hit = _lines_memo[fid] = (scan.digest, directives(scan.data.decode("utf-8")))
    return hit[1]
