"""What a cache directory holds, counted: ``scan`` lists the layout's own files under a root
marked as a cache (layout.py), never through a symbolic link: every evictable file of each kind
as a ``CacheFile``, least recently used first, and the kept ones (the counters and the ledger,
NVRTC's headers, the top files, writers' temp files) as totals by kind, in a ``Usage``. A
writer's temp file left past STALE_TMP_SECONDS is removed as it is counted. What could not be
read is kept in ``Usage.errors``; ``failure`` turns such a list into one ``CacheFilesError``.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import NamedTuple

from ..ground import RECORD_LIMIT, open_regular
from ..ground.errors import RawcodeError
from ..ground.regular import read_at
from . import layout
from .entry import MAGIC, head_length, sizes
from .layout import EVICTED

STALE_TMP_SECONDS = 3600
_tree_memo: dict[str, tuple[int, int, int]] = {}  # directory -> (mtime_ns, files, bytes)


class CacheFile(NamedTuple):
    """One evictable file (or a link, a FIFO or a device where one belongs): its ``kind``,
    ``path``, ``size`` in bytes, ``used`` (mtime: its last use) and ``inode``. A directory at
    a file's name is not the cache's: never listed."""

    kind: str
    path: str
    size: int
    used: float
    inode: int


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


class CacheFilesError(RawcodeError, OSError):
    """Some of the cache's files could not be read or removed: the message names the first."""


def described(path, e: OSError) -> str:
    """A path that failed and why, as the cache commands say it ('path: Permission denied')."""
    return f"{path}: {e.strerror or e}"


def failure(what: str, root: Path, errors: list) -> OSError:
    """One OSError naming the first path that failed and why, and how many more did."""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return CacheFilesError(f"cannot {what} {root}: {described(*errors[0])}{more}")


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
    file (kept; removed when stale) or nothing (a name the layout never writes is not ours,
    nor is a directory at one of its names: never counted, evicted or removed, it and what it
    holds; a write there fails as in a read-only cache)."""
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
    if stat.S_ISDIR(st.st_mode):
        return  # someone else's tree (the read that missed warned about it)
    if own:  # a file, or damage where one belongs (a link, a FIFO): evicted too (the name only)
        size = st.st_size if stat.S_ISREG(st.st_mode) else 0
        usage.files.append(CacheFile(kind, it.path, size, st.st_mtime, st.st_ino))
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
    """The size of a regular file the layout writes, None for anything else (a hard link too:
    the counters and the ledger never write one, regular.open_own)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_size if name_ok and stat.S_ISREG(st.st_mode) and st.st_nlink == 1 else None


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


def entry_sizes(files: list) -> tuple[int, int, int]:
    """(stored bytes, bytes once decompressed, entries not read) of the entries among
    ``files`` (CacheFile), from each entry's metadata (entry.py): an entry that cannot be read
    counts as stored, uncompressed. Reads each file's first bytes only, never a link."""
    stored = plain = unread = 0
    for f in files:
        if f.kind != "entries":
            continue
        stored += f.size
        found = None
        try:
            fd, _ = open_regular(f.path, follow=False)
            try:
                head = read_at(fd, 0, len(MAGIC) + 8 + 4096)
                end = head_length(head)
                if end is not None and len(head) < end <= RECORD_LIMIT:
                    head = read_at(fd, 0, end)
                found = sizes(head)
            finally:
                os.close(fd)
        except OSError:
            pass
        if found is None:
            unread += 1
            plain += f.size
        else:
            plain += f.size - found[0] + found[1]
    return stored, plain, unread


class EntryInfo(NamedTuple):
    """One published entry: its key, size, last use (mtime, seconds since the epoch), path."""

    key: str
    size: int
    used: float
    path: Path

    def __repr__(self) -> str:
        return f"EntryInfo({self.key[:16]}..., {self.size} B, used {self.used:.0f})"


def entries(root: Path) -> list[EntryInfo]:
    """Every published entry of the cache at ``root``, least recently used first."""
    return [
        EntryInfo(os.path.basename(f.path), f.size, f.used, Path(f.path))
        for f in scan(root, ("entries",)).files
    ]
