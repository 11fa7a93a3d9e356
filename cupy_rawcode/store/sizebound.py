"""The size bound of a whole cache directory: every file cupy-rawcode writes there is published
here, counted in a size ledger that every process shares, and evicted least recently used first.

What a cache directory holds, by kind:
- ``entries/`` (directory.py), ``manifests/`` (key/manifest.py), ``index/`` (key/index.py),
  ``toolchain/`` (toolkit/record.py): evicted, least recently used first; a reader marks each
  file used (its mtime);
- ``stats/``: the hit and miss counters (folded into ``stats/counts`` when they grow) and the
  ledger; ``nvrtc-headers/``: the headers NVRTC >= 13.3 extracts, a header root in use;
  ``prebuilt.keys`` and the ``CACHEDIR.TAG`` marker: counted, never evicted.
Only the names the layout writes (layout.py) are counted or removed, no symbolic link is
followed, and nothing is written, counted or removed in a directory that is not marked as a
cache.

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

from ..ground.errors import RawcodeError
from . import layout
from .layout import EVICTED

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


class CacheFilesError(RawcodeError, OSError):
    """Some of the cache's files could not be read or removed: the message names the first."""


def failure(what: str, root: Path, errors: list) -> OSError:
    """One OSError naming the first path that failed and why, and how many more did."""
    path, e = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return CacheFilesError(f"cannot {what} {root}: {path}: {e.strerror or e}{more}")


# ------------------------------------------------------------------ counting


def _tree(path: str, errors: list | None = None) -> tuple[int, int]:
    """(files, bytes) under a directory that is no link (links below are not followed), walked
    again only when its mtime changed."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0, 0
    if not stat.S_ISDIR(st.st_mode):
        return 0, 0
    memo = _tree_memo.get(path)
    if memo is not None and memo[0] == st.st_mtime_ns:
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
    _tree_memo[path] = (st.st_mtime_ns, n, size)
    return n, size


def _add(kept: dict, kind: str, n: int, size: int) -> None:
    row = kept.setdefault(kind, [0, 0])
    row[0] += n
    row[1] += size


def _listing(path: str, usage: Usage) -> list:
    """The entries of a directory that is no link ([] when missing, a link, or unreadable)."""
    if not layout.real_dir(path):
        return []
    try:
        with os.scandir(path) as it:
            return list(it)
    except FileNotFoundError:
        return []
    except OSError as e:
        usage.errors.append((path, e))
        return []


def _scan_file(kind: str, it, shard: str | None, usage: Usage, now: float) -> None:
    """Count one name of a kind directory: a file of the layout's (evictable), a writer's temp
    file (kept; removed when stale) or nothing (a name the layout never writes is not ours)."""
    own = layout.is_own(kind, it.name, shard)
    if not own and not layout.is_own_temp(kind, it.name, shard):
        return
    try:
        st = it.stat(follow_symlinks=False)
    except FileNotFoundError:
        return  # removed since the listing
    except OSError as e:
        usage.errors.append((it.path, e))
        return
    is_dir = stat.S_ISDIR(st.st_mode)
    if own:  # a file, or damage where one belongs (a directory, a link, a FIFO): evicted too
        size = st.st_size if stat.S_ISREG(st.st_mode) else 0
        usage.files.append(CacheFile(kind, it.path, size, st.st_mtime, st.st_ino, is_dir))
        return
    if now - st.st_mtime > STALE_TMP_SECONDS and stat.S_ISREG(st.st_mode):
        try:
            os.unlink(it.path)  # left by a writer that died mid-publish
            return
        except OSError:
            pass
    _add(usage.kept, kind, 1, st.st_size)


def _scan_kind(path: str, kind: str, usage: Usage) -> None:
    """Count the layout's files of one evicted kind (sharded or flat), never through a link."""
    now = time.time()
    for it in _listing(path, usage):
        if kind not in layout.SHARDED:
            _scan_file(kind, it, None, usage, now)
        elif layout.is_shard(it.name):
            for f in _listing(it.path, usage):
                _scan_file(kind, f, it.name, usage, now)


def _own_size(path: str, name_ok: bool) -> int | None:
    """The size of a regular file the layout writes, None for anything else."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_size if name_ok and stat.S_ISREG(st.st_mode) else None


def _scan_kept(root: Path, usage: Usage) -> None:
    """Count the kept files: the counters and ledger, NVRTC's headers, the top files."""
    for it in _listing(os.path.join(root, "stats"), usage):
        size = _own_size(it.path, layout.is_own_stats(it.name))
        if size is not None:
            _add(usage.kept, "stats", 1, size)
    n, size = _tree(os.path.join(root, "nvrtc-headers"), usage.errors)
    if n:
        _add(usage.kept, "nvrtc-headers", n, size)
    for name in layout.TOP_FILES:
        size = _own_size(os.path.join(root, name), True)
        if size is not None:
            _add(usage.kept, "other", 1, size)


def scan(root: Path, kinds: tuple[str, ...] | None = None) -> Usage:
    """Count the cache's own files under ``root`` (or only those of the evicted ``kinds``
    named): nothing when ``root`` is not marked as a cache (layout.py)."""
    usage = Usage([], {}, [])
    if not layout.is_marked(root):
        return usage
    for kind in EVICTED if kinds is None else kinds:
        _scan_kind(os.path.join(root, kind), kind, usage)
    if kinds is None:
        _scan_kept(root, usage)
    usage.files.sort(key=lambda f: f.used)
    return usage


# ------------------------------------------------------------------ the ledger


def _ledger(root: Path, change) -> tuple[int | None, float]:
    """Read the ledger and write ``change(total, scanned)`` back, under its lock: (bytes, or
    None when unknown; when the directory was last counted). Raises OSError."""
    from ..ground.regular import open_own

    path = root / "stats" / "size"
    try:
        fd = open_own(path, os.O_RDWR | os.O_CREAT)  # never a link, never a FIFO
    except FileNotFoundError:
        from ..ground.fsutil import make_private_dirs

        make_private_dirs(path.parent)
        fd = open_own(path, os.O_RDWR | os.O_CREAT)
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
    except OSError as e:
        from ..ground.regular import refused

        refused(root / "stats" / "size", e)  # a link or a FIFO: one warning
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


def _unlink_same(f: CacheFile):
    """Unlink a name that is no regular file (a link: never its target) unless it was replaced
    since it was counted: None when removed, _BUSY when kept, or the OSError."""
    try:
        if os.lstat(f.path).st_ino != f.inode:
            return _BUSY
        os.unlink(f.path)
        return None
    except FileNotFoundError:
        return _BUSY
    except OSError as e:
        return e


def remove(f: CacheFile, wait: bool = False):
    """Remove one file unless a reader holds it (with ``wait``, once it is released) or it was
    replaced since it was counted: None when removed, _BUSY when kept, or the OSError. A link
    or a FIFO standing for a file is unlinked without being opened."""
    if f.is_dir:
        errors: list = []
        return None if _remove_tree(f.path, errors) else errors[0][1]
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
            if not os.path.lexists(moved):
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or st.st_size <= FOLD_BYTES:
                    continue
                os.rename(path, moved)
            st = os.lstat(moved)
            n = st.st_size if stat.S_ISREG(st.st_mode) else 0
            counts = read_counts(root)
            counts[name] = counts.get(name, 0) + n
            from ..ground.fsutil import atomic_write

            atomic_write(stats / "counts", json.dumps(counts).encode())
            os.unlink(moved)
        except (OSError, ValueError):
            continue


def read_counts(root: Path) -> dict:
    """The folded hit and miss counts ({} when none were folded)."""
    import json

    from ..ground.regular import RECORD_LIMIT, read_cache_file

    raw = read_cache_file(root / "stats" / "counts", RECORD_LIMIT)
    try:
        data = json.loads(raw if raw is not None else b"{}")
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
            os.close(lock)


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


# ------------------------------------------------------------------ writing


def _clear_the_way(root: Path, path: Path) -> bool:
    """Remove a directory standing where the file ``path`` belongs, or a file standing where
    one of its directories belongs (below ``root``), with a log line; True when one was."""
    from ..ground.log import warn
    from ..ground.regular import warned

    if path.is_dir() and not path.is_symlink():
        errors: list = []
        if _remove_tree(str(path), errors):
            if not warned(path):  # the read that missed said so already
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


def _check_claimed(root: Path, path: Path) -> None:
    """Raise OSError unless ``root`` is the cache's (claimed now when new or empty: layout.py)
    and no directory between it and ``path`` is a link: a write never lands outside."""
    import errno

    if not layout.claim(root):
        raise layout.NotACacheError(errno.EPERM, "not a cupy-rawcode cache directory", str(root))
    for d in path.parents:
        if d == root or root not in d.parents:
            break
        if os.path.islink(d):
            layout.warn_once(d, layout.linked_message(d))
            raise layout.NotACacheError(errno.ELOOP, "a symbolic link in the cache", str(d))


def publish(root: Path, path: Path, data: bytes, max_bytes=CONFIGURED) -> None:
    """Write one file of the cache at ``root`` atomically and count it against the bound
    (``max_bytes``: None for none; default the cache's configured bound). Something in the way
    (a directory where the file belongs) is removed first, with a log line. Raises OSError when
    the file cannot be written."""
    from ..ground.fsutil import atomic_write

    _check_claimed(Path(root), Path(path))
    try:
        atomic_write(path, data)
    except (IsADirectoryError, NotADirectoryError):
        if not _clear_the_way(Path(root), Path(path)):
            raise
        atomic_write(path, data)
    if max_bytes is CONFIGURED:
        max_bytes = layout.bound(root)
    wrote(Path(root), len(data), max_bytes)
