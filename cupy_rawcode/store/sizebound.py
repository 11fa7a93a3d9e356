"""The size bound of a whole cache directory: every file cupy-rawcode writes there is published
here and counted in a size ledger that every process shares (ledger.py); a write past the bound
evicts least recently used files first (eviction.py, which counts the directory with usage.py
and folds the hit and miss counters with counters.py).

What a cache directory holds, by kind:
- ``entries/`` (directory.py), ``manifests/`` (key/manifest.py), ``index/`` (key/__init__.py),
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

import errno
import os
import threading
import time
from pathlib import Path

from ..ground import deferred, refused
from ..ground.fsutil import atomic_write
from ..ground.log import warn_once
from . import layout
from .eviction import prune
from .ledger import _WIDTH, _ledger

errors = deferred("cupy_rawcode.ground.errors")  # NotACacheError: a write refused only

LOW_WATER = 0.9  # a write past the bound evicts down to this fraction of it
RESCAN_SECONDS = 60.0
CONFIGURED = object()  # publish()'s default bound: the cache's configured one
_rescanning: set[str] = set()
_guard = threading.Lock()


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


def _in_the_way(root: Path, path: Path) -> Path | None:
    """What stands where one of the directories of ``path`` belongs (below ``root``) and is no
    directory, if anything: a file the layout never writes there, so not the cache's, and left
    as it is (the write fails, as in a read-only cache)."""
    for d in path.parents:
        if d == root or root not in d.parents:
            break
        if os.path.lexists(d) and not os.path.isdir(d):
            return d
    return None


def _check_claimed(root: Path, path: Path) -> None:
    """Raise OSError unless ``root`` is the cache's (claimed now when new or empty: layout.py)
    and no directory between it and ``path`` is a link: a write never lands outside."""
    if not layout.claim(root):
        raise errors.NotACacheError(errno.EPERM, "not a cupy-rawcode cache directory", str(root))
    for d in path.parents:
        if d == root or root not in d.parents:
            break
        if os.path.islink(d):
            layout.warn_once(d, layout.linked_message(d))
            raise errors.NotACacheError(errno.ELOOP, "a symbolic link in the cache", str(d))


def publish(root: Path, path: Path, data: bytes, max_bytes=CONFIGURED) -> None:
    """Write one file of the cache at ``root`` atomically and count it against the bound
    (``max_bytes``: None for none; default the cache's configured bound). Raises OSError when
    the file cannot be written (IsADirectoryError: a directory at its name; NotACacheError:
    something not the cache's where a directory of it belongs, named once in a warning)."""
    _check_claimed(Path(root), Path(path))
    try:
        atomic_write(path, data)
    except NotADirectoryError:
        stranger = _in_the_way(Path(root), Path(path))
        if stranger is None:
            raise
        warn_once(
            ("in the way", str(stranger)),
            "cupy-rawcode: %s stands where the cache keeps a directory; it is not the "
            "cache's and is left alone (nothing is stored below it)",
            stranger,
        )
        raise errors.NotACacheError(errno.ENOTDIR, "not the cache's", str(stranger)) from None
    if max_bytes is CONFIGURED:
        max_bytes = layout.bound(root)
    wrote(Path(root), len(data), max_bytes)
