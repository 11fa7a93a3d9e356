"""The size ledger, ``stats/size``: one fixed-width line (the bytes a cache directory holds, and
when it was last counted) that every process shares, read and rewritten in place under an flock
on the file. ``_ledger`` applies a change to it; a new or damaged ledger reads as unknown until
the directory is counted again. It is never a link or a FIFO (ground/regular.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..ground import locks
from ..ground.fsutil import make_private_dirs
from ..ground.regular import open_own

_WIDTH = 48  # the ledger's one line, fixed width: rewritten in place


def _open(root: Path) -> int:
    """The ledger's file, open for reading and writing (made when missing): never a link,
    never a FIFO. Raises OSError."""
    path = root / "stats" / "size"
    try:
        return open_own(path, os.O_RDWR | os.O_CREAT)
    except FileNotFoundError:
        make_private_dirs(path.parent)
        return open_own(path, os.O_RDWR | os.O_CREAT)


def _ledger(root: Path, change) -> tuple[int | None, float]:
    """Read the ledger and write ``change(total, scanned)`` back, under its lock: (bytes, or
    None when unknown; when the directory was last counted). Raises OSError (TimeoutError when
    another process holds the lock past locks.SHORT)."""
    fd = _open(root)
    try:
        locks.hold(fd, seconds=locks.SHORT, keep=True)
        raw = os.read(fd, _WIDTH)
        try:
            t, s = raw.split()
            old: tuple[int | None, float] = (int(t), float(s))
        except ValueError:
            old = (None, 0.0)  # new or damaged: unknown until counted
        new = change(*old)
        if new != old:
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{new[0] or 0} {new[1]:.3f}".ljust(_WIDTH - 1).encode() + b"\n")
        return new
    finally:
        locks.release(fd)


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the ledger's lock (an exclusive flock on stats/size) meanwhile: stats/counts is
    rewritten under it (counters.py). Raises OSError, as _ledger."""
    fd = _open(root)
    try:
        locks.hold(fd, seconds=locks.SHORT, keep=True)
        yield
    finally:
        locks.release(fd)


def _ledger_total(root: Path) -> int | None:
    try:
        return _ledger(root, lambda t, s: (t, s))[0]
    except OSError:
        return None
