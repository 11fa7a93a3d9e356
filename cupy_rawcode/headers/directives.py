"""Directive lines per file: the ``#`` lines of a header (lexical.directives: comments removed,
continuations joined), remembered by its scan.py file id, with its digest, so a header read
again costs nothing. Exact mode (exact.py) walks only these lines: text lines are never read
for macros."""

from __future__ import annotations

from ..ground.regular import read_bytes
from . import scan as _scan
from .lexical import directives

_lines_memo: dict[tuple, tuple[str, list]] = {}


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
