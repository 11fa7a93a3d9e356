"""File stamps: the (size, mtime_ns, inode) of each file an answer kept on disk depended on, and
the check that they all still hold. A file that must not exist is stamped (None, None, None).

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
_ABSENT = (-1, -1, -1)  # a missing file's stamp, in the digest


def stamp(path: str) -> tuple:
    """(path, size, mtime_ns, inode) now, or (path, None, None, None) when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return (path, None, None, None)
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def _digest(values: list) -> str:
    """SHA-256 of the flat stamps, in record order. The paths need no hashing of their own: a
    changed list names other files, whose stamps (inode included) differ."""
    return hashlib.sha256(array("q", values).tobytes()).hexdigest()


def take(file_ids) -> tuple[dict, list]:
    """(record, flat stamps) of (path, size, mtime_ns, inode) tuples taken when the files were
    read: the record to store, and the values that ``merge`` combines with other parts."""
    names: dict[str, list] = {}
    values: dict[str, list] = {}
    for path, size, mtime, ino in file_ids:
        head, name = os.path.split(path)
        names.setdefault(head, []).append(name)
        values.setdefault(head, []).extend(_ABSENT if size is None else (size, mtime, ino))
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


def check(rec: dict) -> list | None:
    """The stamps of every recorded file now (flat: size, mtime_ns, inode, ...; -1s for an
    absent file) when they are all as recorded, else None. A malformed record raises
    TypeError/ValueError/KeyError/AttributeError, which callers treat as a miss."""
    stat = os.stat
    dirs, want = rec["dirs"], rec["digest"]
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
                values += (st.st_size, st.st_mtime_ns, st.st_ino)
        finally:
            if fd is not None:
                os.close(fd)
    return values if _digest(values) == want else None
