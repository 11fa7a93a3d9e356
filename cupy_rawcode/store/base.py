"""The one interface every store implements: bytes in, bytes out, keyed by a hex string; each
level's counts in this process (``tally``); and ``MemoryStore``, the in-process LRU at the top of
every default stack.

A backend subclasses ``Store`` and implements its abstract methods; ``open_store`` (store/
__init__.py) opens one by URL. Read-only and layering are wrappers around any store
(``ReadOnly`` and ``RefusingStore`` in readonly.py, ``Levels`` in store/__init__.py), not flags
inside each backend. A store never raises on a broken or missing entry: ``get`` gives None or
the bytes it holds, and the layer above validates them (entry.py).

There is no ``__contains__``: on a shared or remote store, "is it there?" answered apart from
``get`` costs a second round trip and can be stale before the value is read, so callers ``get``
and test for None (as cuda-python's program cache explains).

Bulk transfer (store/transfer.py) asks many keys at once: ``get_many``, ``put_many`` and
``sizes`` default to a loop (or "cannot tell"), and a backend with a bulk form (Redis MGET,
memcached's multi-get, parallel requests for HTTP and S3) overrides them. Like ``get``, they
give raw bytes: the caller validates each entry, so a damaged one is a miss.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

# each store level's counts in this process: a plain dict per level name, written out by
# counters.py
FIELDS = (
    "hits",
    "misses",
    "errors",
    "timeouts",
    "writes",
    "bytes_read",
    "bytes_written",
    "saved_ms",  # the compile time its hits saved: each entry's compile_seconds (Levels.served)
)

_quiet = threading.local()  # depth > 0: this thread's reads are no look-ups (``uncounted``)


class Tally(dict):
    """Counts in this process: a dict of counts whose changes are dropped while the thread
    making them is ``uncounted``, and added to ``also`` as well when one is given (a level's
    counts in a Levels, added to its level's tally: see Levels)."""

    __slots__ = ("also",)

    def __init__(self, counts: dict[str, int], also: dict[str, int] | None = None) -> None:
        dict.__init__(self, counts)
        self.also = also

    def __setitem__(self, field: str, value: int) -> None:
        if not getattr(_quiet, "depth", 0):
            if self.also is not None:
                self.also[field] += value - self[field]
            dict.__setitem__(self, field, value)


_tallies: dict[str, Tally] = {}  # level name -> its counts, not written yet


def tally(name: str) -> Tally:
    """The counts of the level ``name`` in this process (one dict per name, shared by every
    store of that name): a store adds to its FIELDS, e.g. ``tally("redis")["timeouts"] += 1``."""
    found = _tallies.get(name)
    if found is None:
        found = _tallies.setdefault(name, Tally(dict.fromkeys(FIELDS, 0)))
    return found


def counting() -> bool:
    """Whether this thread's store reads and writes are counted now (not ``uncounted``)."""
    return not getattr(_quiet, "depth", 0)


@contextlib.contextmanager
def uncounted():
    """Store reads and writes of this thread, in the block, that are no look-ups of a kernel (a
    closure record, a maintenance command's listing): they change no count ``cache stats``
    shows (the levels' tallies, a Levels' Counts)."""
    _quiet.depth = getattr(_quiet, "depth", 0) + 1
    try:
        yield
    finally:
        _quiet.depth -= 1


class Store(abc.ABC):
    """Entries by key: ``get``, ``put``, ``delete``, ``clear``, ``len``, ``location``, ``close``."""

    name: str = "store"  # shown as the layer a hit came from ("memory", "disk", "redis", ...)
    read_only: bool = False  # True: put, delete and clear are refused (and counted in refused)
    refused: int = 0  # writes a read-only store refused
    # on this machine's disk (the cache directory, a bundle): a hit here is copied to the levels
    # in memory above it, not to another on the disk, which would be no faster to read
    on_disk: bool = False
    lasting: bool = True  # it outlives the process (all but the memory level)

    @abc.abstractmethod
    def get(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or None when there are none (or they are unreadable)."""

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> bool | None:
        """Store ``data`` under ``key``, replacing what was there; best effort. False: the store
        declined it (too large for it), which the levels above count as no write."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove the entry for ``key``, if any."""

    @abc.abstractmethod
    def clear(self) -> int:
        """Remove every entry; returns how many were removed."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """How many entries the store holds."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the entries live, as shown to the user (a path, a URL without its password)."""

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The bytes of each of ``keys`` the store holds (absent keys left out). A remote
        backend raises on a failed call, as ``get`` does; the default asks ``get`` per key."""
        found = {}
        for key in keys:
            data = self.get(key)
            if data is not None:
                found[key] = data
        return found

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """Store each ``key: data`` of ``items``; the default calls ``put`` per entry."""
        for key, data in items.items():
            self.put(key, data)

    def sizes(self, keys: Iterable[str]) -> dict[str, int] | None:
        """The stored size of each of ``keys`` the store holds, where the backend can tell
        without reading the entries (a push skips an entry already there with the same size);
        None: it cannot tell cheaply, which is the default."""
        return None

    def up(self) -> bool:
        """Whether the store answers now: False while one that handles its own failures (Redis)
        rests after one, so the levels above count no hit, miss or write for it."""
        return True

    def close(self) -> None:
        """Release what the store holds open (a connection, a read index); it may be used again."""
        return None

    def tallied(self) -> bool:
        """Whether the store counts its own reads and writes in its ``tally`` (memory, disk,
        bundle): a Levels then adds nothing to it, lest they count twice."""
        return hasattr(self, "tally")

    def failures(self) -> dict[str, int]:
        """Failed calls the store counts itself rather than raising (``errors``, ``timeouts``:
        Redis), which Levels.stats adds to its own counts of the level; none by default."""
        return {}

    def __bool__(self) -> bool:
        """Always true: an empty store is still a store (``store or default`` must keep it)."""
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


class MemoryStore(Store):
    """The ``max_entries`` most recently used entries of this process (``memory:``): an
    in-process LRU of entry bytes, in front of the disk. It keeps the bytes as they are stored
    (a compressed entry stays compressed: a memory hit decompresses again, about 10 us for a
    small cubin, where keeping them plain would cost a second encode on every backfill)."""

    name = "memory"
    lasting = False

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.tally = tally(self.name)  # this process's reads and writes (counters.py)

    @property
    def location(self) -> str:
        return "memory:"

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._data.get(key)
            if data is None:
                self.tally["misses"] += 1
                return None
            self._data.move_to_end(key)
            self.tally["hits"] += 1
            self.tally["bytes_read"] += len(data)
            return data

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self.tally["writes"] += 1
            self.tally["bytes_written"] += len(data)
            self._data[key] = data
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def clear(self) -> int:
        with self._lock:
            n = len(self._data)
            self._data.clear()
            return n

    def __len__(self) -> int:
        return len(self._data)
