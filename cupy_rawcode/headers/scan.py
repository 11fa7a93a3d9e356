"""Fast mode: a lexical scan of one file's directives, with no condition evaluation.

Every ``#include``, ``#include_next`` and ``__has_include`` probe in every branch is reported,
so the closure built from it is a superset of what NVRTC reads. Object-like ``#define``s are
collected so computed includes (``#define H <cub/x.cuh>`` / ``#include H``) can be expanded.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from ..ground import open_regular, read_fd
from ..ground.errors import RawcodeError
from ..ground.inputs import not_utf8
from ..ground.stamps import values_of
from ..toolkit.specializable import specialized_names
from .lexical import GAP, continued, directives, header_name, hidden_spans, spliced, splits_token
from .probes import probes
from .standard import guard_year

# patterns open with a literal '#', which re finds by fast search; line starts are checked after
_INCLUDE = re.compile(
    rb"#[ \t\f\v\r]*include(_next)?[ \t\f\v\r]*(?:(<[^>\n]*>|\"[^\"\n]*\")|([^\n]*))"
)
# a file that may spell an #include so that _INCLUDE misses it (a comment or a backslash-newline
# between its words or before its '#', '%:' or a trigraph for the '#'): each pattern opens with
# a literal, which re finds by fast search; only such a file is read again (_odd_includes)
_ODD = tuple(
    re.compile(p)
    for p in (
        rb"#[ \t\f\v]*(?:/\*|\\\r?\n)",
        rb"\*/[ \t\f\v]*(?:#|%:)",
        rb"include(?:_next)?[ \t\f\v]*(?:/\*|\\)",
    )
)
_TRIGRAPHS = (("??/", "\\"), ("??=", "#"))  # the two that can make or hide a directive
_READINGS = ("nvrtc", "raw", "joined", "skipped")  # lexical.directives' readings: a superset
_DEFINE = re.compile(  # a value that names a header, or a word or call that may lead to one
    rb"#[ \t]*define[ \t]+(\w+)[ \t]+"
    rb"(<[^>\n]*>|\"[^\"\n]*\"|[\w/.]+(?:[ \t]*\((?:[^\n/]|/(?![/*]))*\))?)[ \t]*(?://[^\n]*)?$",
    re.M,
)
# a function-like macro ('#define H(x) <cuda/std/x>', CUTLASS's; '#define S(x) #x'): its value
# is read apart (_value), and only for the names computed includes use (fast.py)
_FUNCTION = re.compile(rb"#[ \t]*define[ \t]+(\w+)\(([\w \t,.]*)\)([^\n]*)")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/")
_ANY_DEFINE = re.compile(rb"#[ \t]*define[ \t]+([A-Za-z_]\w*)")  # every definition, any value
_CONDITIONAL = re.compile(rb"#[ \t]*(ifndef|ifdef|if|endif|include|define)\b([^\n]*)")
_COMMENT = re.compile(rb"/\*.*?\*/|//.*", re.S)
_IFNDEF = re.compile(rb"\s*([A-Za-z_]\w*)")
_NAME = re.compile(rb"(<[^>\n]*>|\"[^\"\n]*\")")
_PARAM = re.compile(r"[A-Za-z_]\w*", re.ASCII)


class Include(NamedTuple):  # a NamedTuple: thousands are made per closure
    name: str  # header name, or the macro text of a computed include
    angled: bool
    line: int
    # "include", "next", "probe", "probe_next", "computed", "computed_next", "computed_probe",
    # "computed_probe_next"; "prober": a function-like macro whose value probes what its
    # arguments make (its uses in #if lines probe: fast.py)
    kind: str
    pos: int = 0  # byte offset of the directive (or probe) in the file


@dataclass
class FileScan:
    digest: str
    includes: tuple[Include, ...]
    defines: tuple[tuple[str, str], ...]  # object-like macros whose value may name a header
    data: bytes
    std_floor: int = 0  # the standard year an #error guard of this file demands (standard.py)
    specializes: tuple[str, ...] = ()  # std templates it specializes (toolkit/specializable.py)
    _marks: _Marks | None = field(default=None, repr=False, compare=False)
    _functions: tuple | None = field(default=None, repr=False, compare=False)
    _unread: frozenset[str] | None = field(default=None, repr=False, compare=False)
    _hidden: list[tuple[int, int]] | None = field(default=None, repr=False, compare=False)

    @property
    def functions(self) -> tuple[tuple[str, tuple[str, ...], str], ...]:
        """Its function-like macros, (name, parameters, value): read at the first question
        (only a computed include or a probe macro asks: a CUB closure has none)."""
        if self._functions is None:
            self._functions = _functions(self.data)
        return self._functions

    @property
    def unread(self) -> frozenset[str]:
        """The names it defines more often than ``defines`` and ``functions`` hold them (a
        value the scan does not read: an include that uses one is unresolved)."""
        if self._unread is None:
            sites = Counter(_ANY_DEFINE.findall(self.data))
            read = [a.encode() for a, _ in self.defines] + [
                a.encode() for a, _, _ in self.functions
            ]
            sites.subtract(read)
            self._unread = frozenset(n.decode() for n, left in sites.items() if left > 0)
        return self._unread

    def conditional(self, pos: int) -> bool:
        """True when the directive at byte ``pos`` sits inside #if (an include guard does not
        count). Only includes that match nothing ask, so the file's conditionals are read at
        the first question, once, and each question is then a bisection."""
        if self._marks is None:
            self._marks = _Marks.of(self.data)
        return self._marks.conditional(pos)

    def hidden(self, pos: int) -> bool:
        """True when byte ``pos`` lies inside a comment or a raw string, where no directive is
        read (asked, as ``conditional``, only of includes that match nothing)."""
        if self._hidden is None:  # latin-1: one character per byte, so offsets are the bytes'
            self._hidden = hidden_spans(self.data.decode("latin-1"))
        i = bisect.bisect_right(self._hidden, (pos, 1 << 62)) - 1
        return i >= 0 and self._hidden[i][0] < pos < self._hidden[i][1]


class ScanError(RawcodeError):
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
        raise ScanError(not_utf8(e, path)) from None


BOM = b"\xef\xbb\xbf"


def check_header(data: bytes, path: str) -> None:
    """Raise ScanError naming ``path:line:col`` for a header NVRTC cannot read as it is: bytes
    that are not UTF-8, or a leading byte order mark (NVRTC reads headers from disk itself and
    rejects one, where nvcc skips it: so it is reported, never stripped)."""
    if data.startswith(BOM):
        raise ScanError(
            f"{path}:1:1: the file starts with a UTF-8 byte order mark (BOM), which NVRTC "
            "rejects (nvcc skips it); save the header without it"
        )
    _check_utf8(data, path)


def _at_line_start(data: bytes, start: int) -> bool:
    return (
        not start
        or data[start - 1] == 10
        or not data[data.rfind(b"\n", 0, start) + 1 : start].strip(b" \t\f\v\r")
    )


def scan_bytes(data: bytes, path: str = "<source>") -> FileScan:
    """Includes, probes and header-like object macros of one file, in every branch."""
    _check_utf8(data, path)
    includes: list[Include] = []
    line, last = 1, 0
    for m in _INCLUDE.finditer(data):
        start = m.start()
        if not _at_line_start(data, start):
            continue  # not a directive: '#' is not first on its line
        line += data.count(b"\n", last, start)
        last = start
        nxt, name, rest = m.groups()
        if name is None:  # a comment before the name, a name split by a backslash-newline,
            name, rest = _name_after(data, m.start(3))  # or a computed include
        if name is not None:
            text = name.decode()
            includes.append(
                Include(text[1:-1], text[0] == "<", line, "next" if nxt else "include", start)
            )
        elif rest:
            includes.append(
                Include(rest.decode(), False, line, "computed_next" if nxt else "computed", start)
            )
    split = splits_token(data)  # a backslash-newline inside a word: '#inc\' newline 'lude'
    if split or b"%:" in data or b"??" in data or any(p.search(data) for p in _ODD):
        includes += _odd_includes(data, includes)
    if split or b"has_include" in data or b"HAS_INCLUDE" in data:
        includes += [Include(*p) for p in probes(data, split)]
        includes.sort(key=lambda i: i.pos)
    defines = tuple((a.decode(), b.decode()) for a, b in _DEFINE.findall(data))
    return FileScan(
        digest_bytes(data),
        tuple(includes),
        defines,
        data,
        guard_year(data),
        specialized_names(data),
    )


def _functions(data: bytes) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """A file's function-like #defines whose parameters and value the scan reads."""
    return tuple(
        (m[1].decode(), params, value)
        for m in (_FUNCTION.finditer(data) if b"define" in data else ())
        if (params := _parameters(m[2].decode())) is not None
        and (value := _value(_whole_value(data, m).decode())) is not None
    )


def _value(text: str) -> str | None:
    """A #define's value as read on its line, comments gone; None where it goes on past the
    line (a backslash-newline, a comment left open): then it is not read."""
    if "/" in text:
        text = _BLOCK_COMMENT.sub(" ", text).partition("//")[0]
        if "/*" in text:
            return None
    text = text.strip()
    return None if text.endswith("\\") else text


def _whole_value(data: bytes, m: re.Match) -> bytes:
    """A function-like #define's value (_FUNCTION's group 3), with the lines backslash-newlines
    join to it (a macro written over several lines)."""
    value = m[3]
    if not value.rstrip(b" \t\r").endswith(b"\\"):
        return value
    return _logical_line(data, m.start(3), m.end(3))


def _parameters(text: str) -> tuple[str, ...] | None:
    """A function-like macro's parameter names (``"a, b"``; the last may be ``...`` or GNU's
    ``args...``), None unless all are names."""
    names = tuple(p.strip() for p in text.split(","))
    if names == ("",):
        return ()
    last = names[-1].removesuffix("...")
    named = (*names[:-1], last) if last else names[:-1]
    return names if all(_PARAM.fullmatch(n) for n in named) else None


# blanks and comments before an #include's name (read first, and only them: see _name_after)
_LEADING = re.compile(rb"(?:[ \t\f\v\r]|/\*.*?\*/)*")
_SPLICE = re.compile(rb"\\\r?\n")
_MAX_SPLICES = 64  # a name split over more lines than this is read as a computed include


def _name_after(data: bytes, at: int) -> tuple[bytes | None, bytes]:
    """The header name of an #include on whose line _INCLUDE read none, its rest of line
    starting at byte ``at``; else (None, that rest, comments gone: a computed include's text).
    Leading comments go first, and only them: a '//' inside the name (``#include /**/
    <a//b.h>``) is no comment to NVRTC, it reads the name as one token. A name that a
    backslash-newline splits (``"sub\\`` newline ``/h.h"``) is read spliced, as NVRTC reads it
    (phase 2 comes first), and keeps its own line and position (so liveness sees it)."""
    end = data.find(b"\n", at)
    end = len(data) if end < 0 else end
    lead = _LEADING.match(data, at, end)  # always matches (maybe nothing)
    start = lead.end() if lead else at
    n = _NAME.match(data, start, end)
    if n is None and data[start : start + 1] in (b'"', b"<") and continued(data, end):
        n = _NAME.match(_logical_line(data, start, end))
    if n is not None:
        return n.group(1), b""
    rest = data[at:end]
    if b"/" in rest:  # comments go; one left open goes on past the line: no part of it
        rest = _COMMENT.sub(b" ", rest).partition(b"/*")[0]
    rest = rest.strip()
    n = _NAME.match(rest)
    return (n.group(1) if n else None), rest


def _logical_line(data: bytes, start: int, end: int) -> bytes:
    """The text from ``start`` to the end of the line that backslash-newlines join to the one
    ending at ``end``, spliced (at most _MAX_SPLICES lines: never read to the file's end)."""
    for _ in range(_MAX_SPLICES):
        if end >= len(data) or not continued(data, end):
            break
        nxt = data.find(b"\n", end + 1)
        end = len(data) if nxt < 0 else nxt
    return _SPLICE.sub(b"", data[start:end])


# an #include's angled name holding '//' or '/*' (``/**/#include <a//b.h>``): a header name to
# NVRTC, where lexical.directives' readings take a comment to start inside it (see _protected)
_SLASHED = re.compile(r"(include(?:_next)?(?:%s)*<)([^>\n]*/[/*][^>\n]*>)" % GAP.decode())


def _protected(text: str) -> str:
    """``text`` with the '/' of every angled name that holds '//' or '/*' after an ``include``
    made a NUL, so that no reading takes a comment to start there (the NUL is made '/' again in
    the name read: no file name holds one). A reading of its own, added to the others: a
    superset, whatever else such a line is."""
    return _SLASHED.sub(lambda m: m.group(1) + m.group(2).replace("/", "\0"), text)


def _odd_includes(data: bytes, known: list[Include]) -> list[Include]:
    """The #include lines of a file as NVRTC's preprocessor may read them that _INCLUDE missed
    (``%:include``, ``#/**/include``, ``#inc\\`` + newline + ``lude``): NVRTC reads them all,
    so the closure, and the key, hold them too. A superset: the text is read with trigraphs and
    without, and with '//' in angled names kept (_protected), in each of lexical.directives'
    readings (where one may hide a line NVRTC reads).
    One is new unless an include of ``known`` (_INCLUDE's) or one read before has its name,
    kind, delimiter and line: the same name in another branch or between other delimiters is
    another include (it may find another file, or be the one NVRTC reaches). The "joined"
    reading's lines drift (a comment there loses its line breaks), so one of its includes is new
    only where no other has its name, kind and delimiter at all.
    Their position is -1 (unknown: fast.py never calls one unconditional) and their lines are
    the spliced text's, which are the file's."""
    text = data.decode("utf-8")
    seen = {(i.name, i.kind, i.angled, i.line) for i in known}
    names = {(i.name, i.kind, i.angled) for i in known}
    variants = {text, _with_trigraphs(text)}
    variants |= {_protected(v) for v in variants if _SLASHED.search(v)}
    found = []
    for variant in variants:
        lines = spliced(variant)
        for reading in _READINGS:
            for line, name, rest in directives(lines, reading):
                include = _odd_include(line, name, rest)
                if include is None:
                    continue
                key = (include.name, include.kind, include.angled)
                if (*key, line) in seen or (reading == "joined" and key in names):
                    continue
                seen.add((*key, line))
                names.add(key)
                found.append(include)
    return found


def _odd_include(line: int, directive: str, rest: str) -> Include | None:
    """The include a directive line of _odd_includes' readings makes, None for another
    directive or an #include of nothing: its header name read first (what follows it NVRTC
    only warns of), else its text, a computed include."""
    if directive not in ("include", "include_next"):
        return None
    kind = "next" if directive == "include_next" else "include"
    m = _NAME.match(rest.encode())
    header, angled = header_name(m.group(1).decode()) if m else (None, False)
    if header is None:  # a computed include: its text, comments gone (a reading may keep one)
        text = _COMMENT.sub(b" ", rest.encode()).partition(b"/*")[0].strip()
        header, kind = text.decode(), "computed_next" if kind == "next" else "computed"
    if not header:
        return None
    return Include(header.replace("\0", "/"), angled, line, kind, -1)


def _with_trigraphs(text: str) -> str:
    for trigraph, char in _TRIGRAPHS:
        text = text.replace(trigraph, char)
    return text


class _Marks(NamedTuple):
    """A file's conditional directives at line starts, in order: their byte offsets, the #if
    depth after each, and whether the first two make an include guard."""

    starts: list[int]
    depths: list[int]
    guarded: bool

    @classmethod
    def of(cls, data: bytes) -> _Marks:
        starts, depths, opened, depth = [], [], list[re.Match](), 0
        for m in _CONDITIONAL.finditer(data):
            if not _at_line_start(data, m.start()):
                continue
            kind = m.group(1)
            if len(opened) < 2:
                opened.append(m)
            if kind in (b"if", b"ifdef", b"ifndef"):
                depth += 1
            elif kind == b"endif":
                depth = max(0, depth - 1)
            starts.append(m.start())
            depths.append(depth)
        return cls(starts, depths, _guarded(opened))

    def conditional(self, pos: int) -> bool:
        """Whether the directive at ``pos`` is inside an #if block, not counting an include
        guard (a file opening with "#ifndef X" directly followed by "#define X")."""
        before = bisect.bisect_left(self.starts, pos)  # the directives that start before pos
        if not before:
            return False
        guard = 1 if before >= 2 and self.guarded else 0
        return self.depths[before - 1] > guard


def _guarded(matches: list) -> bool:
    """True when the file opens with "#ifndef X" directly followed by "#define X"."""
    if len(matches) < 2 or matches[0].group(1) != b"ifndef" or matches[1].group(1) != b"define":
        return False
    a, b = _IFNDEF.match(matches[0].group(2)), _IFNDEF.match(matches[1].group(2))
    return bool(a and b and a.group(1) == b.group(1))


FileId = tuple  # (path, size, mtime_ns, inode, ctime_ns): stamps.py's stamp
_memo: dict[FileId, FileScan] = {}


def _id(path: str, st: os.stat_result) -> FileId:
    return (path, *values_of(st))


def file_id(path: str) -> FileId:
    return _id(path, os.stat(path))


def scan_file(path: str) -> tuple[FileId, FileScan]:
    """Scan a file at most once per process while its stamp (size, mtime_ns, inode, ctime_ns)
    stays the same.
    Only a regular file is read: anything else (a FIFO would block) is a NotRegularFileError,
    an OSError."""
    fd, st = open_regular(path)
    try:
        fid = _id(path, st)
        hit = _memo.get(fid)
        if hit is None:
            data = read_fd(fd, st)  # os.read straight into bytes: no file object per header
            check_header(data, path)
            hit = _memo[fid] = scan_bytes(data, path)
    finally:
        os.close(fd)
    return fid, hit
