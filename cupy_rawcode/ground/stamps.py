"""File stamps: the (size, mtime_ns, inode, ctime_ns) of each file an answer kept on disk depended
on, and the check that they all still hold. A file that must not exist is stamped with Nones.
The ctime is what a rewrite in place cannot hide: ``os.utime`` sets the mtime back, never the
ctime (the kernel sets it on every change, as ccache relies on too).

A stamps record keeps the paths grouped by directory, ``{"dirs": [[directory, [name, ...]], ...],
"digest": hex}``, and one SHA-256 of every file's stamp in order: parsing it costs little (no
number per file), and checking it is one ``fstatat`` per file, relative to its directory, then
one digest.

``StampedRecord`` is the one way a JSON record trusted while its stamps hold is kept in the
cache: the header manifests (key/manifest.py), the warm index (key/index.py) and the toolchain
record (toolkit/record.py). It lives here, not in a module of its own, because a warm hit
imports this module anyway (tests/key/test_index.py pins those modules); the cache's store
functions it needs (``owned``, ``publish``) sit in a higher layer and are passed in.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Callable
from pathlib import Path

from . import RECORD_LIMIT, read_cache_file

_DIR_FD = os.stat in os.supports_dir_fd
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
WIDTH = 4  # values per file: size, mtime_ns, inode, ctime_ns
_ABSENT = (-1,) * WIDTH  # a missing file's stamp, in the digest
_TICK_NS = 10_000_000  # how far a file's time may lag the real time (Linux's coarse clock: 1-10 ms)
_SECONDS_TICK_NS = 2_000_000_000  # on a file system that keeps whole (FAT: even) seconds


def values_of(st: os.stat_result) -> tuple[int, int, int, int]:
    """The stamp values of a stat result (size, mtime_ns, inode, ctime_ns)."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def absent(path: str) -> tuple:
    """The stamp of a file that must not exist."""
    return (path,) + (None,) * WIDTH


def stamp(path: str) -> tuple:
    """(path, size, mtime_ns, inode, ctime_ns) now, or ``absent(path)`` when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return absent(path)
    return (path, *values_of(st))


def _digest(values: list) -> str:
    """SHA-256 of the flat stamps, in record order. The paths need no hashing of their own: a
    changed list names other files, whose stamps (inode included) differ."""
    return hashlib.sha256(array("q", values).tobytes()).hexdigest()


def take(file_ids) -> tuple[dict, list]:
    """(record, flat stamps) of (path, size, mtime_ns, inode, ctime_ns) tuples taken when the
    files were read: the record to store, and the values that ``merge`` combines with others."""
    names: dict[str, list] = {}
    values: dict[str, list] = {}
    for path, *vals in file_ids:
        head, name = os.path.split(path)
        names.setdefault(head, []).append(name)
        values.setdefault(head, []).extend(_ABSENT if vals[0] is None else vals)
    dirs = [[d, n] for d, n in names.items()]
    flat = [v for d in names for v in values[d]]
    return {"dirs": dirs, "digest": _digest(flat)}, flat


def merge(parts) -> dict:
    """One record of several (record, flat stamps) parts, checked as one."""
    dirs, flat = [], []
    for rec, values in parts:
        dirs += rec["dirs"]
        flat += values
    return {"dirs": dirs, "digest": _digest(flat)}


def _now(dirs) -> list:
    """The flat stamps of every file of a record's ``dirs`` now (-1s for an absent file): one
    ``fstatat`` per file, relative to its directory."""
    stat = os.stat
    values: list = []
    for d, names in dirs:
        try:
            fd = os.open(d, _DIR_FLAGS) if _DIR_FD else None
        except OSError:  # the directory is gone: its files are absent
            values += _ABSENT * len(names)
            continue
        try:
            for name in names:
                try:
                    st = stat(name, dir_fd=fd) if fd is not None else stat(os.path.join(d, name))
                except (FileNotFoundError, NotADirectoryError):
                    values += _ABSENT
                    continue
                values += (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        finally:
            if fd is not None:
                os.close(fd)
    return values


def check(rec: dict) -> list | None:
    """The stamps of every recorded file now (flat: size, mtime_ns, inode, ctime_ns, ...; -1s for
    an absent file) when they are all as recorded, else None. A malformed record raises
    TypeError/ValueError/KeyError/AttributeError, which callers treat as a miss."""
    values = _now(rec["dirs"])
    return values if _digest(values) == rec["digest"] else None


def _paths(rec: dict) -> list[str]:
    """The recorded files' paths, in record order."""
    return [os.path.join(d, n) for d, names in rec["dirs"] for n in names]


def first_changed(part: tuple) -> str | None:
    """The first file of a (record, flat stamps) part whose stamp differs now from the one taken,
    else None: what a compile checks after NVRTC read the files (ccache's check)."""
    rec, taken = part
    now = _now(rec["dirs"])
    for i, path in enumerate(_paths(rec)):
        if now[i * WIDTH : (i + 1) * WIDTH] != list(taken[i * WIDTH : (i + 1) * WIDTH]):
            return path
    return None


def may_lag(ctime_ns: int) -> int:
    """How far a file's ctime may lag the real time of its change: two seconds where the file
    system keeps whole seconds, else a tick of the kernel's coarse clock."""
    return _SECONDS_TICK_NS if ctime_ns % 1_000_000_000 == 0 else _TICK_NS


def changed_since(part: tuple, since_ns: int) -> str | None:
    """The first file of a (record, flat stamps) part that may have changed at or after
    ``since_ns`` (wall clock, ns) by its ctime, the clock's granularity allowed for; else None.
    A compile that read the files before they were stamped cannot tell which text it read."""
    rec, taken = part
    for i, path in enumerate(_paths(rec)):
        ctime = taken[i * WIDTH + WIDTH - 1]
        if ctime >= 0 and ctime >= since_ns - may_lag(ctime):
            return path
    return None


def entries(rec: dict, values: list) -> tuple:
    """The (path, size, mtime_ns, inode, ctime_ns) tuples of a record and its flat stamps (as
    ``check`` or ``take`` gives them), ``absent`` for a file stamped missing: what ``take``
    was given, in the record's order (grouped by directory)."""
    out = []
    for i, path in enumerate(_paths(rec)):
        vals = tuple(values[i * WIDTH : (i + 1) * WIDTH])
        out.append(absent(path) if vals == _ABSENT else (path, *vals))
    return tuple(out)


_MISS = (OSError, ValueError, KeyError, TypeError, AttributeError)  # a record of the wrong shape


def _any(data: dict) -> bool:
    return True


class StampedRecord:
    """One kind of JSON record kept in the cache and trusted while the files it stamps hold.

    A record lives at ``<cache>/<kind>/<id[:2]>/<id>.json`` (``shard=0``: ``<kind>/<id>.json``)
    and is a JSON object whose ``"schema"`` is the kind's format version, written first, as
    ccache's manifest starts with its version: a reader trusts only the layout it was written
    for, and a new layout gets a new version. Its ``"stamps"`` is a stamps record (``take``,
    ``merge``). ``load`` gives ``(data, flat stamps now)`` or None for a miss: missing, not
    a regular file, too large, unreadable, not JSON, another schema, a shape ``valid`` refuses
    (or raises on), a stamp that changed, or a cache ``owned`` does not call ours. ``memo`` holds
    what this process loaded or saved, by path: served again, without reading the file, while
    its stamps hold (``remember=False``: nothing, for a caller that keeps its own answer once
    per process). ``owned(root)`` (store/layout.py) and the ``publish(root, path, bytes)``
    given to ``save`` (store/sizebound.py) are the store's: this layer cannot import them."""

    __slots__ = ("_owned", "_remember", "_shard", "_valid", "kind", "memo", "schema")

    def __init__(
        self,
        kind: str,
        schema: str,
        owned: Callable[[Path], bool],
        valid: Callable[[dict], bool] = _any,
        shard: int = 2,
        remember: bool = True,
    ):
        self.kind, self.schema, self._owned, self._valid = kind, schema, owned, valid
        self._shard, self._remember = shard, remember
        self.memo: dict[Path, dict] = {}  # path -> data, in this process (stamps still checked)

    def path(self, root: Path, rid: str) -> Path:
        """Where record ``rid`` lives in the cache at ``root``."""
        if self._shard:
            return root / self.kind / rid[: self._shard] / f"{rid}.json"
        return root / self.kind / f"{rid}.json"

    def _read(self, root: Path, path: Path) -> dict | None:
        """A record's data from disk, marked used (the size bound evicts the least recently
        used files first), when it is of this schema and shape; else None."""
        if not self._owned(root):
            return None  # never read through a foreign or linked directory
        raw = read_cache_file(path, RECORD_LIMIT, mark_used=True)
        if raw is None:
            return None
        data = json.loads(raw)
        if data.get("schema") != self.schema or not self._valid(data):
            return None
        return data

    def load(self, root: Path, rid: str) -> tuple[dict, list] | None:
        """(the record's data, its files' flat stamps now) while they all hold, else None."""
        path = self.path(root, rid)
        data = self.memo.get(path)
        try:
            if data is None:
                data = self._read(root, path)
            values = None if data is None else check(data["stamps"])
        except _MISS:
            values = None  # missing, unreadable or of the wrong shape: a miss
        if data is None or values is None:
            self.memo.pop(path, None)
            return None
        if self._remember:
            self.memo[path] = data
        return data, values

    def save(self, root: Path, rid: str, fields: dict, publish: Callable) -> dict:
        """Remember and write a record of ``fields`` (their ``"stamps"`` included), the schema
        first; returns its data. A read-only cache writes nothing, silently (the store warns
        once): this process still has the memo, others do without."""
        data = {"schema": self.schema, **fields}
        path = self.path(root, rid)
        if self._remember:
            self.memo[path] = data
        try:
            publish(root, path, json.dumps(data).encode())
        except OSError:
            pass
        return data

    def discard(self, root: Path, rid: str) -> None:
        """Forget a record, here and on disk (only in a cache ``owned`` calls ours: never
        remove through a foreign or linked directory)."""
        path = self.path(root, rid)
        self.memo.pop(path, None)
        if not self._owned(root):
            return
        try:
            os.unlink(path)
        except OSError:
            pass  # none was written (a read-only cache), or it is gone already
