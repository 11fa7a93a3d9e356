"""Storage: bytes in, bytes out. Backends implement ``get(key) -> bytes | None`` and
``put(key, data)``; entry.py turns compiled code + JSON metadata into self-validating bytes.

The default stack, in lookup order: memory LRU, the cache directory, read-only bundles
(CUPY_RAWCODE_BUNDLES), then Redis (CUPY_RAWCODE_REDIS_URL). A hit below copies the entry into
the layers above it; a compile writes to every layer."""
from __future__ import annotations

from typing import Protocol


def warn(msg: str, *args) -> None:
    """Log a warning on the 'cupy_rawcode' logger (logging is imported only when one is due:
    it is not on the path of a cache hit)."""
    import logging
    logging.getLogger("cupy_rawcode").warning(msg, *args)


class Backend(Protocol):
    name: str

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, data: bytes) -> None: ...


class Layered:
    """Memory in front of disk (and later shared stores): read-through, write to every layer."""

    def __init__(self, layers: list[Backend]):
        self.layers = layers

    def get(self, key: str, validate) -> tuple[object, str] | None:
        """(decoded entry, layer name) from the first layer holding a valid entry."""
        from .entry import EntryError
        for i, layer in enumerate(self.layers):
            data = layer.get(key)
            if data is None:
                continue
            try:
                value = validate(data)
            except EntryError as e:
                warn("cupy-rawcode: ignoring a broken cache entry %s in %s (%s); recompiling",
                     key[:16], layer.name, e)
                continue
            for upper in self.layers[:i]:
                upper.put(key, data)
            return value, layer.name
        return None

    def put(self, key: str, data: bytes) -> None:
        for layer in self.layers:
            layer.put(key, data)

    def record(self, hit: bool) -> None:
        """Count a hit or a miss in the layers that keep counts."""
        for layer in self.layers:
            rec = getattr(layer, "record", None)
            if rec is not None:
                rec(hit)

    def layer(self, name: str):
        return next((l for l in self.layers if l.name == name), None)


def make_store(cache_dir=None, *, max_size=None, memory_entries: int | None = None,
               bundles=None, redis_url: str | None = None, redis_ttl: int | None = None,
               redis_timeout: float | None = None) -> Layered:
    """The layered store; every argument left None comes from the environment (config.py)."""
    from .. import config
    from .directory import DirectoryStore
    from .memory import MemoryStore
    cache_dir = config.cache_dir() if cache_dir is None else cache_dir
    max_bytes = None if max_size is None else config.parse_size("max_size", max_size)
    layers: list = [MemoryStore(config.memory_cache_entries() if memory_entries is None
                                else memory_entries),
                    DirectoryStore(cache_dir, max_bytes)]
    for path in config.bundles() if bundles is None else bundles:
        from .bundle import BundleStore
        layers.append(BundleStore(path))
    url = config.redis_url() if redis_url is None else redis_url
    if url:
        from .redis import RedisStore
        layers.append(RedisStore(url, ttl=config.redis_ttl() if redis_ttl is None else redis_ttl,
                                 timeout=config.redis_timeout() if redis_timeout is None
                                 else redis_timeout))
    return Layered(layers)
