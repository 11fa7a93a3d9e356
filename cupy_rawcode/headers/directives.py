"""Directive lines: the ``#`` lines of a source or header, comments removed and continuations
joined, each as (line, directive, rest), remembered per file (by its scan.py file id, with its
digest) so a header read again costs nothing; and the header name of an ``#include`` or
``__has_include`` operand (``<...>`` or ``"..."``). Exact mode (exact.py) walks only these lines:
text lines are never read for macros."""

from __future__ import annotations

import re

from ..ground.regular import read_bytes
from . import scan as _scan

_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z_]\w*)((?:[^\n\\]|\\\n|\\)*)", re.M)


def _header_name(text: str) -> tuple[str | None, bool]:
    text = text.strip()
    if len(text) >= 2 and text[0] == "<" and text[-1] == ">":
        return re.sub(r"\s+", "", text[1:-1]) if " " in text else text[1:-1], True
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1], False
    return None, False


def _strip(m: re.Match) -> str:
    s = m.group(0)
    if s[0] in "\"'":
        return s
    return " " + "\n" * s.count("\n")


_lines_memo: dict[tuple, tuple[str, list]] = {}


def directives(text: str) -> list[tuple[int, str, str]]:
    """(line, directive, rest) of every directive line, comments removed, continuations joined."""
    clean = _TOKENS.sub(_strip, text)
    out, line, pos = [], 1, 0
    for m in _DIRECTIVE.finditer(clean):
        line += clean.count("\n", pos, m.start())
        pos = m.start()
        out.append((line, m.group(1), m.group(2).replace("\\\n", " ").strip()))
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
