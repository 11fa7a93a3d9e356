"""Fast mode: a lexical scan of one file's directives, with no condition evaluation.

Every ``#include``, ``#include_next`` and ``__has_include`` probe in every branch is reported,
so the closure built from it is a superset of what NVRTC reads. Object-like ``#define``s are
collected so computed includes (``#define H <cub/x.cuh>`` / ``#include H``) can be expanded.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

# patterns open with a literal '#', which re finds by fast search; line starts are checked after
_INCLUDE = re.compile(rb"#[ \t]*include(_next)?[ \t]*(?:(<[^>\n]*>|\"[^\"\n]*\")|([^\n]*))")
_PROBE = re.compile(rb"(?:has_include|HAS_INCLUDE)(_next|_NEXT)?\s*\(\s*(<[^>\n]*>|\"[^\"\n]*\")")
_DEFINE = re.compile(rb"#[ \t]*define[ \t]+(\w+)[ \t]+(<[^>\n]*>|\"[^\"\n]*\"|[\w/.]+)[ \t]*$", re.M)
_CONDITIONAL = re.compile(rb"#[ \t]*(ifndef|ifdef|if|endif|include|define)\b([^\n]*)")
_COMMENT = re.compile(rb"/\*.*?\*/|//.*", re.S)
_IFNDEF = re.compile(rb"\s*([A-Za-z_]\w*)")
_NAME = re.compile(rb"(<[^>\n]*>|\"[^\"\n]*\")")


@dataclass(frozen=True)
class Include:
    name: str            # header name, or the macro text of a computed include
    angled: bool
    line: int
    kind: str            # "include", "next", "probe", "probe_next", "computed", "computed_next"


@dataclass
class FileScan:
    digest: str
    includes: tuple[Include, ...]
    defines: tuple[tuple[str, str], ...]  # object-like macros whose value may name a header
    data: bytes
    _conditional: frozenset | None = None

    def conditional(self, line: int) -> bool:
        """True when the directive on ``line`` sits inside #if (an include guard does not count).
        Computed on first use: only includes that match nothing need it."""
        if self._conditional is None:
            self._conditional = _conditional_lines(self.data)
        return line in self._conditional


class ScanError(Exception):
    """A file that cannot be scanned: not UTF-8 text."""


def digest_bytes(data: bytes) -> str:
    """A header's content digest (SHA-256: hardware-accelerated, twice blake2b's speed here)."""
    return hashlib.sha256(data).hexdigest()


def _check_utf8(data: bytes, path: str) -> None:
    if data.isascii():  # nearly every header: a C-speed check instead of a full decode
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ScanError(f"{path}:{line}:{col}: not UTF-8 text (byte 0x{data[e.start]:02x}); "
                        "save the file as UTF-8") from None


def _line_numbers(data: bytes, positions: list[int]) -> list[int]:
    out, line, pos = [], 1, 0
    for p in positions:
        line += data.count(b"\n", pos, p)
        pos = p
        out.append(line)
    return out


def scan_bytes(data: bytes, path: str = "<source>") -> FileScan:
    """Includes, probes and header-like object macros of one file, in every branch."""
    _check_utf8(data, path)
    found: list[tuple[int, str, bool, str]] = []  # (pos, name, angled, kind)
    for m in _INCLUDE.finditer(data):
        start = m.start()
        if start and data[start - 1] != 10 and data[data.rfind(b"\n", 0, start) + 1:start].strip(b" \t"):
            continue  # not a directive: '#' is not first on its line
        nxt, name, rest = m.groups()
        if name is None:  # a comment before the name, or a computed include
            rest = (_COMMENT.sub(b" ", rest) if b"/" in rest else rest).strip()
            n = _NAME.match(rest)
            name = n.group(1) if n else None
        if name is not None:
            text = name.decode()
            found.append((start, text[1:-1], text[0] == "<", "next" if nxt else "include"))
        elif rest:
            found.append((start, rest.decode(), False, "computed_next" if nxt else "computed"))
    if b"has_include" in data or b"HAS_INCLUDE" in data:
        for m in _PROBE.finditer(data):
            text = m.group(2).decode()
            found.append((m.start(), text[1:-1], text[0] == "<", "probe_next" if m.group(1) else "probe"))
        found.sort()
    lines = _line_numbers(data, [f[0] for f in found])
    includes = tuple(Include(name, angled, line, kind)
                     for (_, name, angled, kind), line in zip(found, lines))
    defines = tuple((a.decode(), b.decode()) for a, b in _DEFINE.findall(data))
    return FileScan(digest_bytes(data), includes, defines, data)


def _conditional_lines(data: bytes) -> frozenset:
    """Line numbers of #include directives inside #if blocks, not counting an include guard."""
    depth, out = 0, set()
    matches = list(_CONDITIONAL.finditer(data))
    matches = [m for m in matches if not data[data.rfind(b"\n", 0, m.start()) + 1:m.start()].strip(b" \t")]
    offset = 1 if _guarded(matches) else 0
    for m, line in zip(matches, _line_numbers(data, [m.start() for m in matches])):
        kind = m.group(1)
        if kind in (b"if", b"ifdef", b"ifndef"):
            depth += 1
            if depth > offset:
                out.add(line)  # probes on #if lines are conditional by nature
        elif kind == b"endif":
            depth = max(0, depth - 1)
        elif depth > offset:
            out.add(line)
    return frozenset(out)


def _guarded(matches: list) -> bool:
    """True when the file opens with "#ifndef X" directly followed by "#define X"."""
    if len(matches) < 2 or matches[0].group(1) != b"ifndef" or matches[1].group(1) != b"define":
        return False
    a, b = _IFNDEF.match(matches[0].group(2)), _IFNDEF.match(matches[1].group(2))
    return bool(a and b and a.group(1) == b.group(1))


FileId = tuple  # (path, size, mtime_ns, inode)
_memo: dict[FileId, FileScan] = {}


def _id(path: str, st: os.stat_result) -> FileId:
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def file_id(path: str) -> FileId:
    return _id(path, os.stat(path))


def scan_file(path: str) -> tuple[FileId, FileScan]:
    """Scan a file at most once per process while its (size, mtime_ns, inode) stay the same."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fid = _id(path, os.fstat(fd))
        hit = _memo.get(fid)
        if hit is None:
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            hit = _memo[fid] = scan_bytes(data, path)
    finally:
        os.close(fd)
    return fid, hit
