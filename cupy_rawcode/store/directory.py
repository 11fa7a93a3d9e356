"""The default store: one file per key under a 0700 directory, published atomically, kept under
a size bound by evicting the least recently used entries.

A reader holds a shared ``flock`` on the entry while it reads and marks the entry used (mtime);
eviction takes the exclusive lock without waiting and skips an entry it cannot lock, so it never
removes an entry another process is reading. Hits and misses are counted by appending one byte
to ``stats/hits`` or ``stats/misses`` (O_APPEND writes do not interleave).
"""

from __future__ import annotations  # unevaluated: less work on a warm hit

import os
import threading
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; eviction then relies on open files surviving
    fcntl = None  # type: ignore[assignment]

_warned = False
_STALE_TMP_SECONDS = 3600
_RESCAN_SECONDS = 60.0


class EntryInfo:
    """One published entry (a plain slotted class, as on every module of the warm-hit path)."""

    __slots__ = ("key", "path", "size", "used")

    def __init__(self, key: str, size: int, used: float, path: Path):
        self.key, self.size, self.path = key, size, path
        self.used = used  # last use (mtime), seconds since the epoch

    def __repr__(self) -> str:
        return f"EntryInfo({self.key[:16]}..., {self.size} B, used {self.used:.0f})"


class DirectoryStore:
    name = "disk"

    def __init__(self, root: Path, max_bytes: int | None = None):
        from .. import config

        self.root = Path(root)
        self.max_bytes = config.cache_max_size() if max_bytes is None else max_bytes
        # total size as last scanned plus what this process wrote since; a full scan happens
        # when that passes the bound or after _RESCAN_SECONDS (other processes write too)
        self._estimate, self._next_scan = 0, 0.0

    @property
    def entries_dir(self) -> Path:
        return self.root / "entries"

    def path(self, key: str) -> Path:
        return self.entries_dir / key[:2] / key

    def get(self, key: str) -> bytes | None:
        try:
            fd = os.open(self.path(key), os.O_RDONLY)
        except OSError:
            return None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            try:
                os.utime(fd)  # mark used, for LRU eviction
            except OSError:
                pass  # a read-only cache still serves hits
            return data
        except OSError:
            return None
        finally:
            os.close(fd)  # releases the lock

    def put(self, key: str, data: bytes) -> None:
        global _warned
        from ..fsutil import atomic_write  # not imported on a hit

        try:
            atomic_write(self.path(key), data)  # makes missing directories 0700
        except OSError as e:
            if not _warned:  # read-only or full: compiling goes on from memory
                _warned = True
                from ..log import warn

                warn(
                    "cupy-rawcode: cannot write the cache at %s (%s); "
                    "kernels are kept in memory only",
                    self.root,
                    e.strerror or e,
                )
            return
        if self.max_bytes is not None:
            self._estimate += len(data)
            if self._estimate > self.max_bytes:
                self.prune(self.max_bytes)
            elif time.monotonic() > self._next_scan:
                # other processes write too: recount now and then, off the compile's path
                self._next_scan = time.monotonic() + _RESCAN_SECONDS
                threading.Thread(
                    target=self.prune,
                    args=(self.max_bytes,),
                    daemon=True,
                    name="cupy-rawcode-prune",
                ).start()

    # ------------------------------------------------------------ maintenance

    def entries(self) -> list[EntryInfo]:
        """Every published entry, least recently used first."""
        out: list = []
        try:
            shards = list(os.scandir(self.entries_dir))
        except OSError:
            return out
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            try:
                files = list(os.scandir(shard.path))
            except OSError:
                continue
            for f in files:
                if f.name.startswith("."):
                    self._drop_stale_tmp(f)
                    continue
                try:
                    st = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append(EntryInfo(f.name, st.st_size, st.st_mtime, Path(f.path)))
        out.sort(key=lambda e: e.used)
        return out

    @staticmethod
    def _drop_stale_tmp(f: os.DirEntry) -> None:
        """A temp file left by a writer that died mid-publish."""
        try:
            if f.name.endswith(".tmp") and time.time() - f.stat().st_mtime > _STALE_TMP_SECONDS:
                os.unlink(f.path)
        except OSError:
            pass

    def prune(self, max_bytes: int) -> tuple[int, int]:
        """Evict least recently used entries until the total is at most ``max_bytes``; an
        entry being read is skipped. Returns (entries removed, bytes freed)."""
        entries = self.entries()
        total = sum(e.size for e in entries)
        removed = freed = 0
        for e in entries:
            if total <= max_bytes:
                break
            if _evict(e.path):
                total -= e.size
                removed, freed = removed + 1, freed + e.size
        self._estimate, self._next_scan = total, time.monotonic() + _RESCAN_SECONDS
        return removed, freed

    def clear(self) -> int:
        """Remove every entry, manifest, warm index entry, toolchain record and counter; returns
        the number of entries removed."""
        import shutil

        n = 0
        for e in self.entries():
            n += _evict(e.path, wait=True)
        for sub in ("manifests", "index", "toolchain", "stats"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        return n

    def record(self, hit: bool) -> None:
        """Count one hit or miss (best effort: a read-only cache counts nothing)."""
        path = self.root / "stats" / ("hits" if hit else "misses")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:
            try:
                from ..fsutil import make_private_dirs

                make_private_dirs(path.parent)
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            except OSError:
                return
        except OSError:
            return
        try:
            os.write(fd, b".")
        except OSError:
            pass
        finally:
            os.close(fd)

    def counts(self) -> tuple[int, int] | None:
        """(hits, misses) recorded, or None when nothing was recorded."""
        sizes: list[int | None] = []
        for name in ("hits", "misses"):
            try:
                sizes.append(os.stat(self.root / "stats" / name).st_size)
            except OSError:
                sizes.append(None)
        return None if sizes == [None, None] else (sizes[0] or 0, sizes[1] or 0)


def _evict(path: Path, wait: bool = False) -> bool:
    """Unlink ``path`` unless a reader holds it (or, with ``wait``, once it is released)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except OSError:
                return False  # being read: keep it
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                return False  # replaced since we looked: the new entry is fresh
            os.unlink(path)
            return True
        except OSError:
            return False
    finally:
        os.close(fd)
