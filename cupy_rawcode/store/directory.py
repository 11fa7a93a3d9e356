"""The default store: one file per key under a 0700 directory, published atomically; the size
bound of the whole directory (entries, manifests, index, toolchain records) is sizebound.py's.

A reader holds a shared ``flock`` on the entry while it reads and marks the entry used (mtime);
eviction takes the exclusive lock without waiting and skips an entry it cannot lock, so it never
removes an entry another process is reading. Hits and misses are counted by appending one byte
to ``stats/hits`` or ``stats/misses`` (O_APPEND writes do not interleave).
"""

from __future__ import annotations  # unevaluated: less work on a warm hit

import os
import stat
import sys
import threading
from pathlib import Path

from ..ground import ENTRY_LIMIT, deferred, read_cache_file
from .base import Store, tally
from .layout import (
    absolute,
    bound,
    claim,
    foreign_message,
    is_own,
    owned,
    real_dir,
    set_bound,
)

# off a warm hit's path (ground/deferrals.py says why): a write, a miss, maintenance, stats
fsutil = deferred("cupy_rawcode.ground.fsutil")
regular = deferred("cupy_rawcode.ground.regular")  # a counter file opened to write
log = deferred("cupy_rawcode.ground.log")
errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised
sizebound = deferred("cupy_rawcode.store.sizebound")
eviction = deferred("cupy_rawcode.store.eviction")
usage = deferred("cupy_rawcode.store.usage")
counters = deferred("cupy_rawcode.store.counters")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .usage import EntryInfo


class DirectoryStore(Store):
    """One file per entry under ``root``/entries (a plain path, or ``file:``)."""

    name = "disk"
    on_disk = True

    def __init__(self, root: Path, max_bytes: int | None = None):
        """``max_bytes``: the bound of the whole directory (None: the configured one; 0: none).
        A relative ``root`` is made absolute here, once: every later path derives from it."""
        self.root = absolute(root)
        if max_bytes is not None:  # manifests, index and toolchain records count against it too
            set_bound(self.root, max_bytes)
        self.max_bytes = bound(self.root)
        self.tally = _home(self.root, self.name)  # this process's reads and writes (counters.py)

    @property
    def location(self) -> str:
        return str(self.root)

    @property
    def entries_dir(self) -> Path:
        return self.root / "entries"

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives: ``entries/<key[:2]>/<key>``. RawcodeValueError for
        a key of another form (``is_key``): a name such as '/etc/passwd' or '../x' never
        becomes a path, inside the cache or outside it."""
        if not is_key(key):
            raise errors.RawcodeValueError(
                f"not a cache key (64 lower-case hex digits, a SHA-256): {str(key)[:80]!r}"
            )
        return self.entries_dir / key[:2] / key

    def get(self, key: str) -> bytes | None:
        """The entry's bytes, or None: missing, or not a regular file reached without a link
        (a FIFO would block, /dev/zero never ends: one warning), or the directory is not a
        cache (layout.py), or ``key`` is of no form this store holds (``is_key``)."""
        tally = self.tally
        if not (is_key(key) and owned(self.root)):
            tally["misses"] += 1
            return None
        data = read_cache_file(
            self.path(key), ENTRY_LIMIT, True, shared_lock=True, used_after=USE_RESOLUTION
        )
        if data is None:
            tally["misses"] += 1
        else:
            tally["hits"] += 1
            tally["bytes_read"] += len(data)
        return data

    def put(self, key: str, data: bytes) -> None:
        """Write the entry (best effort: a read-only or full cache warns once); a key of
        another form than ``is_key``'s is a RawcodeValueError, and nothing is written."""
        try:
            # private dirs, the bound (sizebound.py: not imported on a hit)
            sizebound.publish(self.root, self.path(key), data, self.max_bytes)
            self.tally["writes"] += 1
            self.tally["bytes_written"] += len(data)
        except errors.NotACacheError:
            pass  # layout.py warned once
        except OSError as e:  # read-only or full: compiling goes on from memory
            log.warn_once(
                ("cache not writable",),  # once per process, whichever directory
                "cupy-rawcode: cannot write the cache at %s (%s); kernels are kept in memory only",
                self.root,
                e.strerror or e,
            )

    def sizes(self, keys: Iterable[str]) -> dict[str, int]:
        """The size of each entry of ``keys`` published here (a regular file, by lstat: nothing
        is read): what a pull checks it stored, and a push compares."""
        if not owned(self.root):
            return {}
        found: dict[str, int] = {}
        for key in filter(is_key, keys):
            try:
                st = os.lstat(self.path(key))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found[key] = st.st_size
        return found

    def delete(self, key: str) -> None:
        """Remove the entry once no reader holds it; the size ledger is settled at the next
        recount (it only over-counts meanwhile)."""
        if not is_key(key):
            return  # no entry can be under that name
        path = self.path(key)
        if not (owned(self.root) and real_dir(path.parent)):
            return
        try:
            st = os.lstat(path)
        except OSError:
            return
        found = usage.CacheFile("entries", str(path), st.st_size, st.st_mtime, st.st_ino)
        eviction.remove(found, wait=True)

    def __len__(self) -> int:
        return len(self.entries())

    def close(self) -> None:
        """Write the hits counted and not written yet."""
        self.flush_counts()

    # ------------------------------------------------------------ maintenance

    def entries(self) -> list[EntryInfo]:
        """Every published entry, least recently used first (usage.py)."""
        return usage.entries(self.root)

    def prune(self, max_bytes: int):
        """Evict least recently used files of every kind (entries, manifests, index entries,
        toolchain records) until the whole directory holds at most ``max_bytes`` (0: no bound,
        as CUPY_RAWCODE_CACHE_MAX_SIZE=0: nothing is removed); an entry being read is kept.
        Returns eviction.Pruned (what was removed, and what could not be); None when another
        process prunes it and held its lock past locks.LONG."""
        return eviction.prune(self.root, max_bytes or sys.maxsize)

    def clear(self) -> int:
        """Remove every entry, manifest, warm index entry, toolchain record and counter; returns
        the number of entries removed. Raises OSError naming a path that could not be removed
        and why (a read-only cache)."""
        done = eviction.clear(self.root)
        if done.errors:
            raise usage.failure("clear", self.root, done.errors)
        return done.removed.get("entries", 0)

    def record(self, hit: bool) -> None:
        """Count one hit or miss (best effort: a read-only cache counts nothing). Hits are
        written HIT_BATCH at a time, and at exit (a killed process loses at most that many):
        a process serving hundreds of CuPy kernels pays no file write per hit."""
        if hit:
            with _pending_lock:
                n = _pending[self.root] = _pending.get(self.root, 0) + 1
                if n == 1:
                    _at_exit()
                if n < HIT_BATCH:
                    return
            _flush(self.root)  # the tallies wait for the exit: no JSON rewrite on a hit
            return
        counters.append(self.root, "misses", 1)

    def flush_counts(self) -> None:
        """Write the hits this process counted in this directory and has not written yet, and
        every level's tally (counters.py)."""
        _flush(self.root)
        counters.keep(self.root)

    def zero_counts(self) -> None:
        """Start the hit and miss counts and every level's counts again from 0 (ccache's
        ``-z``). Counters are append-only files, one byte per event: truncating them loses no
        concurrent append."""
        if not claim(self.root):
            raise errors.NotACacheError(f"cannot zero the counts: {foreign_message(self.root)}")
        fsutil.make_private_dirs(self.root / "stats")
        counters.zero_tallies()  # this process's own, not written yet
        try:
            os.unlink(self.root / "stats" / "counts")  # folded counts, every level's counts
        except FileNotFoundError:
            pass
        for name in ("hits", "misses"):
            fd = regular.open_own(self.root / "stats" / name, os.O_WRONLY | os.O_CREAT)
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)

    def counts(self) -> tuple[int, int] | None:
        """(hits, misses) recorded, or None when nothing was recorded."""
        self.flush_counts()
        folded = counters.read_counts(self.root)
        sizes: list[int | None] = []
        for name in ("hits", "misses"):
            try:
                st = os.lstat(self.root / "stats" / name)  # a link (soft or hard) counts nothing
                size = st.st_size if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 else 0
                sizes.append(size + folded.get(name, 0))
            except OSError:
                sizes.append(folded.get(name))
        return None if sizes == [None, None] else (sizes[0] or 0, sizes[1] or 0)


class SharedDirectoryStore(DirectoryStore):
    """A directory given as a remote level (CUPY_RAWCODE_REMOTE, ``make_store(remote=...)``):
    a shared mount, named and treated as the other remote levels are: a hit there is copied
    into the cache directory, and ``cache push``/``cache pull`` reach it."""

    name = "shared-dir"
    on_disk = False


def is_key(key: object) -> bool:
    """Whether ``key`` is of the one form this store holds: 64 lower-case hex digits, as every
    key is (an entry's, a failure's, a closure record's: a SHA-256, ground.digest_fields)."""
    return isinstance(key, str) and is_own("entries", key, key[:2])


HIT_BATCH = 32
USE_RESOLUTION = 60.0  # seconds: an entry used more recently is not marked again (LRU order)
_pending_lock = threading.Lock()
_pending: dict[Path, int] = {}  # cache directory -> hits counted and not written yet
_exit_registered: list[bool] = []


_homes: list[Path] = []  # the first cache directory opened: every level's tallies go there


def _home(root: Path, name: str) -> dict[str, int]:
    """This process's tally of the level ``name`` (counters.py); the first directory opened
    is where every level's tallies are written (at exit, and when its counts are read)."""
    if not _homes:
        _homes.append(root)
        _at_exit()
    return tally(name)


def _at_exit() -> None:
    """Write every directory's pending hits, and the levels' tallies, when the process exits
    (registered once)."""
    if not _exit_registered:
        import atexit

        _exit_registered.append(True)
        atexit.register(_flush_all)


def _flush_all() -> None:
    """atexit: best effort, as every count is; Ctrl-C during it (a lock held elsewhere: within
    locks.SHORT) ends it quietly, the process exiting as it was."""
    try:
        for root in list(_pending):
            _flush(root)
        if _homes:
            counters.keep(_homes[0])
    except KeyboardInterrupt:
        pass


def _flush(root: Path) -> None:
    with _pending_lock:
        n = _pending.pop(root, 0)
    if n:
        counters.append(root, "hits", n)
