"""File stamps: the (size, mtime_ns, inode) of each file an answer kept on disk depended on, and
the check that they all still hold. A file that must not exist has the stamp (None, None, None).

Used by the header manifests, the toolchain record and the warm index. Stamps are kept grouped by
directory, ``[[directory, [name, size, mtime_ns, inode, name, ...]], ...]``: a compact JSON shape
that is quick to parse, and checked with one ``fstatat`` per file relative to its directory.
"""
from __future__ import annotations

import os

_DIR_FD = os.stat in os.supports_dir_fd
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)


def stamp(path: str) -> tuple:
    """(path, size, mtime_ns, inode) now, or (path, None, None, None) when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return (path, None, None, None)
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def group(file_ids) -> list:
    """(path, size, mtime_ns, inode) tuples, grouped by directory (the shape ``hold`` checks)."""
    by_dir: dict[str, list] = {}
    for path, size, mtime, ino in file_ids:
        head, name = os.path.split(path)
        by_dir.setdefault(head, []).extend((name, size, mtime, ino))
    return [[d, flat] for d, flat in by_dir.items()]


def hold(groups: list) -> bool:
    """True when every file still has its recorded size, mtime and inode (and every file
    stamped absent is still absent). Any malformed group raises TypeError/ValueError/KeyError,
    which a caller treats as "does not hold"."""
    stat = os.stat
    for d, flat in groups:
        if len(flat) % 4:
            return False
        try:
            fd = os.open(d, _DIR_FLAGS) if _DIR_FD else None
        except OSError:  # the directory is gone: only files stamped absent may be in it
            if any(flat[i + 1] is not None for i in range(0, len(flat), 4)):
                return False
            continue
        try:
            for i in range(0, len(flat), 4):
                name = flat[i]
                try:
                    st = stat(name, dir_fd=fd) if fd is not None else stat(os.path.join(d, name))
                except (FileNotFoundError, NotADirectoryError):
                    if flat[i + 1] is not None:
                        return False
                    continue
                if st.st_size != flat[i + 1] or st.st_mtime_ns != flat[i + 2] \
                        or st.st_ino != flat[i + 3]:
                    return False
        finally:
            if fd is not None:
                os.close(fd)
    return True
