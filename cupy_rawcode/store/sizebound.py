"""The size bound of a whole cache directory: every file cupy-rawcode writes there is published
here, counted in a size ledger that every process shares, and evicted least recently used first.

What a cache directory holds, by kind:
- ``entries/`` (directory.py), ``manifests/`` (headers/manifest.py), ``index/`` (key/index.py),
  ``toolchain/`` (toolkit/record.py): evicted, least recently used first; a reader marks each
  file used (its mtime);
- ``stats/``: the hit and miss counters (folded into ``stats/counts`` when they grow) and the
  ledger; ``nvrtc-headers/``: the headers NVRTC >= 13.3 extracts, a header root in use; anything
  else (``prebuilt.keys``): counted, never evicted.

The ledger (``stats/size``: bytes, and when the directory was last counted) is updated under an
flock by each write. A write that takes it past the bound evicts down to LOW_WATER of it, holding
the cache's prune lock (an flock on the directory itself), so processes evict one at a time and a
second writer past the bound waits, then finds the ledger back under it. Every RESCAN_SECONDS one
process recounts the directory in the background, so the ledger follows what was written or
removed outside it. Sizes are the files' sizes; directories do not count (eviction removes the
shard directories it empties).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path
from typing import NamedTuple

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

EVICTED = ("entries", "manifests", "index", "toolchain")
_DEPTH = {"entries": 2, "manifests": 2, "index": 2, "toolchain": 1}  # where a kind's files sit
KEPT = ("stats", "nvrtc-headers")  # and "other": counted, never evicted
LOW_WATER = 0.9  # a write past the bound evicts down to this fraction of it
RESCAN_SECONDS = 60.0
STALE_TMP_SECONDS = 3600
FOLD_BYTES = 4096  # a counter file larger than this is folded into stats/counts
_WIDTH = 48  # the ledger's one line, fixed width: rewritten in place
_BUSY = object()  # an entry a reader holds: kept
CONFIGURED = object()  # publish()'s default bound: the cache's configured one
_rescanning: set[str] = set()
_guard = threading.Lock()
_tree_memo: dict[str, tuple[int, int, int]] = {}  # directory -> (mtime_ns, files, bytes)


class CacheFile(NamedTuple):
    """One evictable file (or a directory where a file belongs, ``is_dir``): its ``kind``,
    ``path``, ``size`` in bytes, ``used`` (mtime: its last use) and ``inode``."""

    kind: str
    path: str
    size: int
    used: float
    inode: int
    is_dir: bool


class Usage(NamedTuple):
    """A count of a cache directory: ``files`` (evictable, least recently used first), ``kept``
    (kind -> [files, bytes] never evicted: counters, NVRTC's headers, temp files, others) and
    ``errors`` ((path, OSError) of what could not be read)."""

    files: list
    kept: dict
    errors: list

    @property
    def total(self) -> int:
        return sum(f.size for f in self.files) + sum(b for _, b in self.kept.values())

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """kind -> (files, bytes), every evicted kind first, then the kept ones present."""
        out = {k: [0, 0] for k in EVICTED}
        for f in self.files:
            out[f.kind][0] += 1
            out[f.kind][1] += f.size
        for kind, (n, size) in self.kept.items():
            row = out.setdefault(kind, [0, 0])
            row[0] += n
            row[1] += size
        return {k: (n, b) for k, (n, b) in out.items()}


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


def failure(what: str, root: Path, errors: list) -> OSError:
    """One OSError naming the first path that failed and why, and how many more did."""
    path, e = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return OSError(f"cannot {what} {root}: {path}: {e.strerror or e}{more}")


# ------------------------------------------------------------------ counting


def _tree(path: str, errors: list | None = None) -> tuple[int, int]:
    """(files, bytes) under a directory, walked again only when its mtime changed."""
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return 0, 0
    memo = _tree_memo.get(path)
    if memo is not None and memo[0] == mtime:
        return memo[1], memo[2]
    n = size = 0

    def failed(e: OSError) -> None:
        if errors is not None:
            errors.append((e.filename, e))

    for d, _dirs, names in os.walk(path, onerror=failed):
        for name in names:
            try:
                size += os.lstat(os.path.join(d, name)).st_size
                n += 1
            except OSError:
                pass
    _tree_memo[path] = (mtime, n, size)
    return n, size


def _add(kept: dict, kind: str, n: int, size: int) -> None:
    row = kept.setdefault(kind, [0, 0])
    row[0] += n
    row[1] += size


def _scan_kind(path: str, kind: str, depth: int, usage: Usage) -> None:
    try:
        items = list(os.scandir(path))
    except FileNotFoundError:
        return
    except OSError as e:
        usage.errors.append((path, e))
        return
    now = time.time()
    for it in items:
        try:
            st = it.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed since the listing
        except OSError as e:
            usage.errors.append((it.path, e))
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        if it.name.startswith(".") and not is_dir:  # a writer's temp file
            if it.name.endswith(".tmp") and now - st.st_mtime > STALE_TMP_SECONDS:
                try:
                    os.unlink(it.path)  # left by a writer that died mid-publish
                    continue
                except OSError:
                    pass
            _add(usage.kept, kind, 1, st.st_size)
        elif is_dir and depth < _DEPTH[kind]:
            _scan_kind(it.path, kind, depth + 1, usage)
        else:  # a file, or a directory where a file belongs (damage: evicted too)
            size = 0 if is_dir else st.st_size
            usage.files.append(CacheFile(kind, it.path, size, st.st_mtime, st.st_ino, is_dir))


def scan(root: Path, kinds: tuple[str, ...] | None = None) -> Usage:
    """Count everything under ``root`` (or only the evicted ``kinds`` named)."""
    usage = Usage([], {}, [])
    try:
        top = list(os.scandir(root))
    except FileNotFoundError:
        return usage
    except OSError as e:
        usage.errors.append((str(root), e))
        return usage
    for d in top:
        if d.name in _DEPTH:
            if kinds is None or d.name in kinds:
                _scan_kind(d.path, d.name, 1, usage)
            continue
        if kinds is not None:
            continue
        kind = d.name if d.name in KEPT else "other"
        try:
            if d.is_dir(follow_symlinks=False):
                _add(usage.kept, kind, *_tree(d.path, usage.errors))
            else:
                _add(usage.kept, kind, 1, d.stat(follow_symlinks=False).st_size)
        except OSError as e:
            usage.errors.append((d.path, e))
    usage.files.sort(key=lambda f: f.used)
    return usage


# ------------------------------------------------------------------ the ledger


def _ledger(root: Path, change) -> tuple[int | None, float]:
    """Read the ledger and write ``change(total, scanned)`` back, under its lock: (bytes, or
    None when unknown; when the directory was last counted). Raises OSError."""
    path = root / "stats" / "size"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:
        from ..fsutil import make_private_dirs

        make_private_dirs(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
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
        os.close(fd)


def _ledger_total(root: Path) -> int | None:
    try:
        return _ledger(root, lambda t, s: (t, s))[0]
    except OSError:
        return None


def wrote(root: Path, nbytes: int, max_bytes: int | None) -> None:
    """Count ``nbytes`` just written under ``root``: past ``max_bytes``, evict now (waiting for
    another process's eviction to end); when the last count is old, recount in the background."""
    if max_bytes is None:
        return
    now = time.time()
    recount = []

    def add(total, scanned):
        total = (_WIDTH if total is None else total) + nbytes  # a new ledger counts itself
        if total <= max_bytes and now - scanned > RESCAN_SECONDS:
            recount.append(True)  # this process recounts; the others see it claimed
            scanned = now
        return total, scanned

    try:
        total, _ = _ledger(root, add)
    except OSError:
        return  # a read-only or full cache: the write failed too, or was the last one
    low = int(max_bytes * LOW_WATER)
    if total is not None and total > max_bytes:
        prune(root, max_bytes, low, wait=True, trust_ledger=True)
    elif recount:
        key = str(root)
        with _guard:
            if key in _rescanning:
                return
            _rescanning.add(key)

        def run() -> None:
            try:
                prune(root, max_bytes, low, wait=False)
            finally:
                with _guard:
                    _rescanning.discard(key)

        threading.Thread(target=run, daemon=True, name="cupy-rawcode-recount").start()


# ------------------------------------------------------------------ removing


def _lock(root: Path, wait: bool):
    """The cache's prune lock (an flock on the directory): an fd to close, None when there is
    nothing to lock, or _BUSY when another process holds it and ``wait`` is False."""
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            os.close(fd)
            return _BUSY
    return fd


def _remove_tree(path: str, errors: list) -> bool:
    """Remove a directory and what it holds; each failure goes to ``errors``."""
    try:
        items = list(os.scandir(path))
    except FileNotFoundError:
        return True
    except OSError as e:
        errors.append((path, e))
        return False
    for it in items:
        try:
            if it.is_dir(follow_symlinks=False):
                _remove_tree(it.path, errors)
            else:
                os.unlink(it.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            errors.append((it.path, e))
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError as e:
        errors.append((path, e))
        return False


def remove(f: CacheFile, wait: bool = False):
    """Remove one file unless a reader holds it (with ``wait``, once it is released) or it was
    replaced since it was counted: None when removed, _BUSY when kept, or the OSError."""
    if f.is_dir:
        errors: list = []
        return None if _remove_tree(f.path, errors) else errors[0][1]
    try:
        fd = os.open(f.path, os.O_RDONLY)
    except FileNotFoundError:
        return _BUSY
    except OSError as e:
        return e
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except OSError:
                return _BUSY  # being read: keep it
        try:
            if os.fstat(fd).st_ino != f.inode or os.stat(f.path).st_ino != f.inode:
                return _BUSY  # replaced since it was counted: the new file is fresh
            os.unlink(f.path)
            return None
        except FileNotFoundError:
            return _BUSY
        except OSError as e:
            return e
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


def _fold_counters(root: Path) -> None:
    """Move the hit and miss counters' bytes into stats/counts once they grow (best effort: an
    append racing with the move may be lost)."""
    import json

    stats = root / "stats"
    for name in ("hits", "misses"):
        path, moved = stats / name, stats / f".{name}.fold"
        try:
            if not moved.exists():
                if os.stat(path).st_size <= FOLD_BYTES:
                    continue
                os.rename(path, moved)
            n = os.stat(moved).st_size
            counts = read_counts(root)
            counts[name] = counts.get(name, 0) + n
            from ..fsutil import atomic_write

            atomic_write(stats / "counts", json.dumps(counts).encode())
            os.unlink(moved)
        except (OSError, ValueError):
            continue


def read_counts(root: Path) -> dict:
    """The folded hit and miss counts ({} when none were folded)."""
    import json

    try:
        data = json.loads((root / "stats" / "counts").read_bytes())
        return {k: int(data[k]) for k in ("hits", "misses") if k in data}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


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
            os.close(lock)


def clear(root: Path) -> Pruned:
    """Remove every file of every evicted kind (waiting for readers) and the counters."""
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
    for sub in ("manifests", "index", "toolchain", "stats"):
        _remove_tree(str(root / sub), errors)
    return Pruned(removed, freed, scan(root).total, errors)


# ------------------------------------------------------------------ writing


def _clear_the_way(root: Path, path: Path) -> bool:
    """Remove a directory standing where the file ``path`` belongs, or a file standing where
    one of its directories belongs (below ``root``), with a log line; True when one was."""
    from ..log import warn

    if path.is_dir() and not path.is_symlink():
        errors: list = []
        if _remove_tree(str(path), errors):
            warn("cupy-rawcode: %s was a directory, not a cache file; removed it", path)
            return True
        return False
    for d in path.parents:
        if d == root or root not in d.parents:
            break
        if d.exists() and not d.is_dir():
            try:
                os.unlink(d)
            except OSError:
                return False
            warn("cupy-rawcode: %s was a file, not a cache directory; removed it", d)
            return True
    return False


def publish(root: Path, path: Path, data: bytes, max_bytes=CONFIGURED) -> None:
    """Write one file of the cache at ``root`` atomically and count it against the bound
    (``max_bytes``: None for none; default the cache's configured bound). Something in the way
    (a directory where the file belongs) is removed first, with a log line. Raises OSError when
    the file cannot be written."""
    from ..fsutil import atomic_write

    try:
        atomic_write(path, data)
    except (IsADirectoryError, NotADirectoryError):
        if not _clear_the_way(Path(root), Path(path)):
            raise
        atomic_write(path, data)
    if max_bytes is CONFIGURED:
        from .. import config

        max_bytes = config.cache_bound(root)
    wrote(Path(root), len(data), max_bytes)
