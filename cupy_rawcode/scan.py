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

_DIRECTIVE = re.compile(
    rb"^[ \t]*#[ \t]*(include_next|include|define|ifndef|ifdef|if|elif|else|endif|pragma)\b"
    rb"((?:[^\n\\]|\\\n|\\)*)", re.M)
_COMMENT = re.compile(rb"/\*.*?\*/|//.*", re.S)
_PROBE = re.compile(rb"\w*(?:has_include|HAS_INCLUDE)(_next|_NEXT)?\s*\(\s*(<[^>\n]*>|\"[^\"\n]*\")")
_NAME = re.compile(rb"\s*(<[^>\n]*>|\"[^\"\n]*\")")
_DEFINE = re.compile(rb"\s*([A-Za-z_]\w*)(\(?)\s*(.*)", re.S)
_IFNDEF = re.compile(rb"\s*([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Include:
    name: str            # header name, or the macro text of a computed include
    angled: bool
    line: int
    kind: str            # "include", "next", "probe", "probe_next", "computed", "computed_next"
    conditional: bool    # inside #if (an include guard does not count)


@dataclass(frozen=True)
class FileScan:
    digest: str
    includes: tuple[Include, ...]
    defines: tuple[tuple[str, str], ...]  # object-like macros (name, value)


class ScanError(Exception):
    """A file that cannot be scanned: not UTF-8 text."""


def digest_bytes(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def _check_utf8(data: bytes, path: str) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ScanError(f"{path}:{line}:{col}: not UTF-8 text (byte 0x{data[e.start]:02x}); "
                        "save the file as UTF-8") from None


def scan_bytes(data: bytes, path: str = "<source>") -> FileScan:
    """Directives of one file, in order."""
    _check_utf8(data, path)
    includes: list[Include] = []
    defines: list[tuple[str, str]] = []
    matches = list(_DIRECTIVE.finditer(data))
    offset = 1 if _guarded(matches) else 0  # an include guard's #ifndef is no condition
    depth, line, pos = 0, 1, 0
    for m in matches:
        kind = m.group(1)
        body = _COMMENT.sub(b" ", m.group(2).replace(b"\\\n", b" "))
        line += data.count(b"\n", pos, m.start())
        pos = m.start()
        conditional = depth > offset
        if kind in (b"if", b"ifdef", b"ifndef"):
            depth += 1
            if kind == b"if":
                _probes(body, line, conditional=True, out=includes)
        elif kind == b"elif":
            _probes(body, line, conditional=True, out=includes)
        elif kind == b"endif":
            depth = max(0, depth - 1)
        elif kind in (b"include", b"include_next"):
            nxt = kind == b"include_next"
            n = _NAME.match(body)
            if n:
                text = n.group(1).decode()
                includes.append(Include(text[1:-1], text[0] == "<", line,
                                        "next" if nxt else "include", conditional))
            elif body.strip():
                includes.append(Include(body.strip().decode(), False, line,
                                        "computed_next" if nxt else "computed", conditional))
        elif kind == b"define":
            d = _DEFINE.match(body)
            if d and not d.group(2) and d.group(3).strip():
                defines.append((d.group(1).decode(), d.group(3).strip().decode()))
    return FileScan(digest_bytes(data), tuple(includes), tuple(defines))


def _guarded(matches: list) -> bool:
    """True when the file opens with "#ifndef X" directly followed by "#define X"."""
    if len(matches) < 2 or matches[0].group(1) != b"ifndef" or matches[1].group(1) != b"define":
        return False
    a, b = _IFNDEF.match(matches[0].group(2)), _IFNDEF.match(matches[1].group(2))
    return bool(a and b and a.group(1) == b.group(1))


def _probes(body: bytes, line: int, conditional: bool, out: list[Include]) -> None:
    for p in _PROBE.finditer(body):
        text = p.group(2).decode()
        out.append(Include(text[1:-1], text[0] == "<", line,
                           "probe_next" if p.group(1) else "probe", conditional))


FileId = tuple  # (path, size, mtime_ns, inode)
_memo: dict[FileId, FileScan] = {}


def file_id(path: str) -> FileId:
    st = os.stat(path)
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def scan_file(path: str) -> tuple[FileId, FileScan]:
    """Scan a file at most once per process while its (size, mtime_ns, inode) stay the same."""
    fid = file_id(path)
    hit = _memo.get(fid)
    if hit is None:
        with open(path, "rb") as f:
            data = f.read()
        hit = _memo[fid] = scan_bytes(data, path)
    return fid, hit
