"""Eviction: ``prune`` counts a cache directory (usage.py) and, past a bound, removes least
recently used files of every evicted kind down to a target, holding the cache's prune lock (an
flock on the directory itself, so processes evict one at a time), then folds the counters and
sets the ledger; ``clear`` removes every file of every evicted kind and the counters. A file a
reader holds (an flock on it) or one replaced since it was counted is kept; shard directories
left empty are removed; only the names the layout writes are removed, in a directory marked as
a cache. What was done comes back as ``Pruned``."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import NamedTuple

from ..ground import locks
from . import layout
from .counters import _fold_counters
from .layout import EVICTED
from .ledger import _ledger, _ledger_total
from .usage import CacheFile, scan

_BUSY = object()  # an entry a reader holds: kept


class Pruned(NamedTuple):
    """What a prune or a clear did: files ``removed`` by kind, bytes ``freed``, the ``total``
    left, and ``errors`` ((path, OSError) of what could not be read or removed)."""

    removed: dict
    freed: int
    total: int
    errors: list

    @property
    def files(self) -> int:
        return sum(self.removed.values())


def _lock(root: Path, wait: bool):
    """The cache's prune lock (an flock on the directory): an fd to release (locks.release),
    None when there is nothing to lock, or _BUSY when another process holds it (with ``wait``:
    still after locks.LONG)."""
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        locks.hold(fd, seconds=locks.LONG if wait else 0, keep=True)
    except OSError:
        locks.release(fd)
        return _BUSY
    except BaseException:  # Ctrl-C while waiting: no fd left behind
        locks.release(fd)
        raise
    return fd


def _unlink_same(f: CacheFile, fd: int | None = None):
    """Unlink the name (a link: never its target) unless it was replaced since it was counted:
    its inode, or that of ``fd`` (the file as opened), is no longer the counted one. None when
    removed, _BUSY when kept, or the OSError."""
    try:
        opened_other = fd is not None and os.fstat(fd).st_ino != f.inode
        if opened_other or os.lstat(f.path).st_ino != f.inode:
            return _BUSY  # replaced since it was counted: the new file is fresh
        os.unlink(f.path)
        return None
    except FileNotFoundError:
        return _BUSY
    except OSError as e:
        return e


def remove(f: CacheFile, wait: bool = False):
    """Remove one file unless a reader holds it (with ``wait``, once it is released; still held
    after locks.LONG: its TimeoutError) or it was replaced since it was counted: None when
    removed, _BUSY when kept, or the OSError. A link or a FIFO standing for a file is unlinked
    without being opened."""
    try:
        if not stat.S_ISREG(os.lstat(f.path).st_mode):
            return _unlink_same(f)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(f.path, flags)
    except FileNotFoundError:
        return _BUSY
    except OSError as e:
        return e
    try:
        try:
            locks.hold(fd, seconds=locks.LONG if wait else 0)
        except OSError as e:
            return e if wait else _BUSY  # being read: kept (a clear names it)
        return _unlink_same(f, fd)
    finally:
        os.close(fd)


def _drop_if_empty(root: Path, f: CacheFile) -> None:
    """Remove the shard directory an evicted file leaves empty (a writer that finds it gone
    makes it again: fsutil.atomic_write)."""
    shard = os.path.dirname(f.path)
    if shard != os.path.join(root, f.kind):
        try:
            os.rmdir(shard)
        except OSError:
            pass  # not empty, or already gone


def prune(
    root: Path,
    limit: int,
    target: int | None = None,
    *,
    wait: bool = True,
    trust_ledger: bool = False,
) -> Pruned | None:
    """Count the directory and, when it holds more than ``limit`` bytes, evict least recently
    used files of every evicted kind until it holds at most ``target`` (default ``limit``); an
    entry being read is kept. Sets the ledger. None when another process is pruning and ``wait``
    is False, or (``trust_ledger``) when the ledger says it is under ``limit`` already."""
    target = limit if target is None else min(target, limit)
    if not layout.is_marked(root):
        return Pruned({}, 0, 0, [])  # not a cache: nothing there is the cache's to remove
    lock = _lock(root, wait)
    if lock is _BUSY:
        return None
    try:
        before = _ledger_total(root)
        if trust_ledger and before is not None and before <= limit:
            return None  # another process evicted while this one waited
        usage = scan(root)
        total = usage.total
        removed: dict[str, int] = {}
        freed, errors = 0, list(usage.errors)
        if total > limit:
            for f in usage.files:
                if total <= target:
                    break
                outcome = remove(f)
                if outcome is None:
                    _drop_if_empty(root, f)
                    total -= f.size
                    freed += f.size
                    removed[f.kind] = removed.get(f.kind, 0) + 1
                elif outcome is not _BUSY:
                    errors.append((f.path, outcome))
        _fold_counters(root)

        def settle(now_total, _scanned):
            grown = now_total - before if now_total is not None and before is not None else 0
            return total + max(0, grown), time.time()

        try:
            _ledger(root, settle)
        except OSError:
            pass
        return Pruned(removed, freed, total, errors)
    finally:
        if isinstance(lock, int):
            locks.release(lock)


def _drop_empty_dirs(root: Path) -> None:
    """Remove the kind and shard directories left empty (rmdir: never a link, never a non-empty
    directory)."""
    for kind in EVICTED + ("stats",):
        top = os.path.join(root, kind)
        if kind in layout.SHARDED and layout.real_dir(top):
            try:
                shards = [d for d in os.listdir(top) if layout.is_shard(d)]
            except OSError:
                shards = []
            for shard in shards:
                try:
                    os.rmdir(os.path.join(top, shard))
                except OSError:
                    pass
        try:
            os.rmdir(top)
        except OSError:
            pass  # not empty, a link (ENOTDIR), or gone


def _remove_stats(root: Path, errors: list) -> None:
    """Remove the counters, the folded counts and the ledger (their names only)."""
    stats = os.path.join(root, "stats")
    if not layout.real_dir(stats):
        return
    for name in layout.STATS_FILES:
        try:
            os.unlink(os.path.join(stats, name))
        except FileNotFoundError:
            pass
        except OSError as e:
            errors.append((os.path.join(stats, name), e))


def clear(root: Path) -> Pruned:
    """Remove every file of every evicted kind (waiting for readers) and the counters: only the
    names the layout writes, in a directory marked as a cache."""
    usage = scan(root, EVICTED)
    removed: dict[str, int] = {}
    freed, errors = 0, list(usage.errors)
    for f in usage.files:
        outcome = remove(f, wait=True)
        if outcome is None:
            _drop_if_empty(root, f)
            removed[f.kind] = removed.get(f.kind, 0) + 1
            freed += f.size
        elif outcome is not _BUSY:
            errors.append((f.path, outcome))
    if layout.is_marked(root):
        _remove_stats(root, errors)
        _drop_empty_dirs(root)
    return Pruned(removed, freed, scan(root).total, errors)
