"""Stage 4, the store: takes a key and gives the entry's bytes, or stores them.

Storage: bytes in, bytes out. Every backend is a ``Store`` (base.py) opened by URL
(``open_store``, urls.py); entry.py turns compiled code + JSON metadata into self-validating
bytes.

The default stack (make_store), a ``Levels`` in lookup order: memory LRU (``MemoryStore``,
defined here, and built here with the cache directory's level: a warm hit then loads neither
memory.py nor urls.py), the cache directory, read-only bundles (CUPY_RAWCODE_BUNDLES), then the
remote levels: Redis (CUPY_RAWCODE_REDIS_URL) and each store of CUPY_RAWCODE_REMOTE in order
(remote.py). A hit below copies the entry into the writable levels above it; a compile writes
to every writable level; a remote level that fails is skipped with one warning (wrappers.py)."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable

from ..ground import config, deferred
from .base import Store
from .layout import cache_location
from .tally import tally
from .wrappers import Levels, ReadOnly

__all__ = [
    "Levels",
    "MemoryStore",
    "ReadOnly",
    "Store",
    "default_store",
    "make_store",
    "open_remote",
    "open_store",
]


class MemoryStore(Store):
    """The ``max_entries`` most recently used entries of this process (``memory:``): an
    in-process LRU of entry bytes, in front of the disk. It keeps the bytes as they are stored
    (a compressed entry stays compressed: a memory hit decompresses again, about 10 us for a
    small cubin, where keeping them plain would cost a second encode on every backfill)."""

    name = "memory"

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


_directory = deferred("cupy_rawcode.store.directory")  # the cache directory: every stack's
_urls = deferred("cupy_rawcode.store.urls")  # stores opened by URL: open_store and the others

# opening a store by URL (urls.py), named here: not imported by a default stack
_URLS = ("open_store", "open_remote", "parse_url", "path_url", "store_class")

TYPE_CHECKING = False
if TYPE_CHECKING:  # what __getattr__ gives, as the type checker sees it
    from .urls import open_remote, open_store, parse_url, path_url, store_class  # noqa: F401


def __getattr__(name: str):
    """open_store and the other URL functions (urls.py), on first use."""
    if name not in _URLS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_urls, name)
    globals()[name] = value  # the next look-up is a plain global
    return value


def make_store(
    cache_dir=None,
    *,
    max_size=None,
    memory_entries: int | None = None,
    bundles=None,
    redis_url: str | None = None,
    redis_ttl: int | None = None,
    redis_timeout: float | None = None,
    remote: Iterable[str | Store] | None = None,
    remote_timeout: float | None = None,
) -> Levels:
    """The layered store; every argument left None comes from the environment (config.py).
    ``remote``: the remote levels after Redis's, as CUPY_RAWCODE_REMOTE lists them (a spec
    each: a URL, optionally ``|read-only``) or as stores; ``remote_timeout``: seconds a call to
    one may take (CUPY_RAWCODE_REMOTE_TIMEOUT)."""
    location = cache_location(cache_dir)
    max_bytes = None if max_size is None else config.parse_size("max_size", max_size)
    entries = (
        config.memory_cache_entries()
        if memory_entries is None
        else config.parse_memory_entries("memory_entries", memory_entries)
    )
    levels: list[Store] = [  # what open_store("memory:") and open_store("file:...") give
        MemoryStore(max_entries=entries),
        _directory.DirectoryStore(location.path, max_bytes=max_bytes),
    ]
    for path in config.bundles() if bundles is None else bundles:
        levels.append(_urls.open_store(_urls.path_url("bundle", path)))
    url = config.redis_url() if redis_url is None else redis_url
    if url:
        redis = _urls.store_class(
            _urls.BACKENDS["redis"]
        )  # any text: one the client refuses warns once
        levels.append(
            redis(
                url,
                ttl=config.redis_ttl() if redis_ttl is None else redis_ttl,
                timeout=config.redis_timeout() if redis_timeout is None else redis_timeout,
            )
        )
    timeout = config.remote_timeout() if remote_timeout is None else remote_timeout
    for spec in config.remote() if remote is None else remote:
        level = spec if isinstance(spec, Store) else _urls.remote_level(spec, timeout)
        if level is not None:
            levels.append(level)
    return Levels(levels)


@functools.lru_cache(maxsize=8)
def _store_for(
    cache_dir: str,
    max_size: int,
    bundles: tuple[str, ...],
    redis_url: str | None,
    memory_entries: int,
    remote: tuple[str, ...] = (),
    remote_timeout: float = 2.0,
) -> Levels:
    return make_store(
        cache_dir,
        max_size=max_size,
        bundles=bundles,
        redis_url=redis_url or "",
        memory_entries=memory_entries,
        remote=remote,
        remote_timeout=remote_timeout,
    )


_override: Levels | None = None


def set_store(store: Store | None) -> None:
    """Use ``store`` (see ``make_store``; a single Store becomes ``Levels([store])``) for every
    compile of this process; None goes back to the store the environment describes."""
    global _override
    _override = store if store is None or isinstance(store, Levels) else Levels([store])


def default_store(cache_dir=None) -> Levels:
    """The store for a compile: set_store's, else the one the environment describes (read at
    call time, one instance per distinct configuration)."""
    if _override is not None and cache_dir is None:
        return _override
    location = cache_location(cache_dir)
    return _store_for(
        str(location.path),
        location.max_size,
        config.bundles(),
        config.redis_url(),
        config.memory_cache_entries(),
        config.remote(),
        config.remote_timeout(),
    )
