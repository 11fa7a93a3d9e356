"""File stamps: the (size, mtime_ns, inode, ctime_ns) of each file an answer kept on disk depended
on, and the check that they all still hold. A file that must not exist is stamped with Nones.
The ctime is what a rewrite in place cannot hide: ``os.utime`` sets the mtime back, never the
ctime (the kernel sets it on every change, as ccache relies on too).

Used by the header manifests and the warm index (the toolchain record keeps its own list). A
record keeps the paths grouped by directory, ``{"dirs": [[directory, [name, ...]], ...],
"digest": hex}``, and one SHA-256 of every file's stamp in order: parsing it costs little (no
number per file), and checking it is one ``fstatat`` per file, relative to its directory, then
one digest.
"""

from __future__ import annotations

import hashlib
import os
from array import array

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
