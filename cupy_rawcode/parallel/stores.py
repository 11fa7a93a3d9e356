"""Which store a worker compiles through, so that warmup fills the store the program uses and
writes nowhere the program did not point. The parent describes its store in the hello
(``hello_fields``). A worker whose environment builds that same stack over the same cache
directory compiles through it, as the parent would (``worker_store``). Any other stack (one the
program set: memory only, a directory made read-only, remote levels of its own) is filled by
the parent: the worker compiles into a ``Collecting`` store, reading the parent's writable
cache directory but never writing it, and sends each entry's bytes back (entry.py's bytes, no
pickle), which the parent validates and puts into its own store (``land``). A read-only level
never becomes a writable one in a worker: it is simply not there.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterable

from ..store import Levels, Store, make_store, uncounted
from ..store.directory import DirectoryStore
from ..store.entry import decode
from ..store.readonly import ReadOnly


def describe(store: Levels) -> list[list]:
    """The levels of ``store``, as JSON: [class, name, location, read-only] each."""
    return [
        [type(level).__name__, level.name, level.location, bool(level.read_only)]
        for level in store.levels
    ]


def plain_disk(store: Levels) -> DirectoryStore | None:
    """The first level of ``store`` that is a cache directory it writes (not made read-only)."""
    return next(
        (lv for lv in store.levels if type(lv) is DirectoryStore and not lv.read_only), None
    )


def hello_fields(store: Levels) -> dict:
    """What a worker needs to compile into ``store``: its writable cache directory (None
    without one) and that directory's bound, and the levels to compare its own stack with."""
    disk = plain_disk(store)
    return {
        "cache_dir": None if disk is None else str(disk.root),
        "max_size": 0 if disk is None else disk.max_bytes or 0,  # 0: no bound
        "levels": describe(store),
    }


class Collecting(Store):
    """A worker's store when the parent fills its own: every entry put is kept until
    ``drain()`` hands it over (to be sent to the parent). Lasting, so that what a compile keeps
    only in lasting levels (a closure record) is collected too."""

    name = "collected"

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        return "worker:"

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self._data[key] = bytes(data)

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def clear(self) -> int:
        return len(self.drain())

    def __len__(self) -> int:
        return len(self._data)

    def tallied(self) -> bool:
        """True: counted nowhere (a hand-over inside a worker, no level ``cache stats`` shows)."""
        return True

    def drain(self) -> dict[str, bytes]:
        """Every entry put since the last drain, forgotten here."""
        with self._lock:
            data, self._data = self._data, {}
        return data


def worker_store(hello: dict) -> tuple[Levels, Collecting | None]:
    """(the store a worker compiles through, the Collecting level whose entries it sends back,
    or None when it writes the parent's own stack itself). The environment's stack over the
    hello's cache directory, when it is the parent's; else a Collecting level, above the
    parent's cache directory made read-only (hits are read there, never written)."""
    cache_dir = hello.get("cache_dir")
    if cache_dir:
        own = make_store(cache_dir, max_size=hello.get("max_size") or 0)
        if describe(own) == hello.get("levels"):
            return own, None
        own.close()
    collecting = Collecting()
    levels: list[Store] = [collecting]
    if cache_dir:
        levels.append(ReadOnly(DirectoryStore(cache_dir)))
    return Levels(levels), collecting


def encode_entries(entries: dict[str, bytes]) -> dict[str, str]:
    """Entries as JSON can carry them: key -> base64 of the entry's bytes."""
    return {key: base64.b64encode(data).decode("ascii") for key, data in entries.items()}


def decode_entries(sent: object) -> Iterable[tuple[str, bytes]]:
    """The (key, bytes) pairs a worker sent (encode_entries); anything malformed is skipped."""
    if not isinstance(sent, dict):
        return
    for key, text in sent.items():
        if isinstance(key, str) and isinstance(text, str):
            try:
                yield key, base64.b64decode(text.encode("ascii"), validate=True)
            except ValueError:
                continue


def land(store: Levels, key: str | None, sent: object) -> bool:
    """Put the entries a worker sent into ``store`` (the entry of ``key`` into every writable
    level, the others, such as closure records, into the lasting ones, as a compile does),
    each only when its bytes are a valid entry of its key. Whether ``store`` now holds the
    entry of ``key``: False when no level kept it (every level read-only, say)."""
    for k, data in decode_entries(sent):
        try:
            decode(k, data)  # raises a ValueError for bytes that are no entry of k
            store.put(k, data, memory=(k == key))
        except ValueError:
            continue
    if key is None:
        return False
    with uncounted():  # a check, no look-up of a kernel
        return store.find(key, lambda data: decode(key, data)) is not None
