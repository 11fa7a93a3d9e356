"""Whether the main source can expand ``__FILE__``: then NVRTC's program name (the user's file,
or ``<source>/kernel-<hash>.cu`` for a string) is in the compiled code, and the key must hold it.

Measured with NVRTC 12.9: ``assert`` (its failure message names the file) and ``__FILE__`` in the
main source put the program name into the cubin and the PTX; a source that expands neither
compiles to the same code under any program name. Not to the same bytes where it has an
anonymous namespace: NVRTC names its symbols after the program's base name and a hash that
changes from one NVRTC process to the next, so two fresh compiles differ there anyway (the
names stored with an entry are its cubin's, so lookups by name expression hold). Line and debug
information (LINE_INFO) hold the program name and every header's path whatever the source says.

Lexical and a superset, like fast mode: every identifier of the main source is followed through
every ``#define`` of the closure (every branch, every file) and of the command line; reaching one
of FILE_NAMES means it can. ``__FILE__`` expanded inside a header names that header, not the
program.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .options import macro_name

LINE_INFO = frozenset({"-lineinfo", "--generate-line-info", "-G", "--device-debug"})
FILE_NAMES = frozenset(
    {
        b"__FILE__",
        b"__BASE_FILE__",
        b"__FILE_NAME__",
        b"__builtin_FILE",
        b"__builtin_source_location",
        b"source_location",  # std::source_location::current() takes the caller's file
        b"assert",  # NVRTC's own assert needs no header
    }
)
_IDENT = re.compile(rb"[A-Za-z_]\w*")
_DEFINE = re.compile(rb"#[ \t]*define[ \t]+([A-Za-z_]\w*)")
_defines_memo: dict[str, list[tuple[bytes, int]]] = {}  # content digest -> (name, body start)


def line_info(passthrough: Iterable[str]) -> bool:
    """True when the options ask for line or debug information (the output names files)."""
    return not LINE_INFO.isdisjoint(passthrough)


def _body(data: bytes, start: int) -> bytes:
    """A #define's text from ``start`` to its end of line (continuation lines included)."""
    end = data.find(b"\n", start)
    while end > 0 and (data[end - 1 : end] == b"\\" or data[end - 2 : end] == b"\\\r"):
        end = data.find(b"\n", end + 1)
    return data[start:] if end < 0 else data[start:end]


def _defines(digest: str, data: bytes) -> list[tuple[bytes, int]]:
    """(macro name, where its body starts) of every #define in a file, once per content."""
    found = _defines_memo.get(digest)
    if found is None:
        found = _defines_memo[digest] = (
            [(m.group(1), m.end()) for m in _DEFINE.finditer(data)] if b"define" in data else []
        )
    return found


def expands_file(source: str, scans, macros: Iterable[tuple[str, str | None]] = ()) -> bool:
    """True when expanding ``source`` can reach a name of FILE_NAMES, through the #defines of
    ``scans`` (the closure's scan.FileScan objects) and ``macros`` (the command line's -D)."""
    text = source.encode("utf-8", "surrogatepass")
    names = set(_IDENT.findall(text))
    if not names.isdisjoint(FILE_NAMES):
        return True
    bodies: dict[bytes, list[bytes]] = {}
    for macro, value in macros:
        if value is not None:
            bodies.setdefault(macro_name(macro).encode(), []).append(value.encode())
    where: dict[bytes, list[tuple[bytes, int]]] = {}
    for s in scans:
        for name, start in _defines(s.digest, s.data):
            where.setdefault(name, []).append((s.data, start))
    seen: set[bytes] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in FILE_NAMES:
            return True
        expansions = bodies.get(name, []) + [_body(d, i) for d, i in where.get(name, ())]
        for body in expansions:
            todo += _IDENT.findall(body)
    return False
