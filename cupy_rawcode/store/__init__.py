"""Stage 4, the store: takes a key and gives the entry's bytes, or stores them.

Storage: bytes in, bytes out. Backends implement ``get(key) -> bytes | None`` and
``put(key, data)``; entry.py turns compiled code + JSON metadata into self-validating bytes.

The default stack, in lookup order: memory LRU, the cache directory, read-only bundles
(CUPY_RAWCODE_BUNDLES), then Redis (CUPY_RAWCODE_REDIS_URL). A hit below copies the entry into
the layers above it; a compile writes to every layer."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers only: not defined on the warm-hit path
    from typing import Protocol

    class Backend(Protocol):
        name: str

        def get(self, key: str) -> bytes | None: ...

        def put(self, key: str, data: bytes) -> None: ...


class Layered:
    """Memory in front of disk (and later shared stores): read-through, write to every layer."""

    def __init__(self, layers: list[Backend]):
        self.layers = layers

    def get(self, key: str, validate) -> tuple[Any, str] | None:
        """(decoded entry, layer name) from the first layer holding a valid entry."""
        from .entry import EntryError

        for i, layer in enumerate(self.layers):
            data = layer.get(key)
            if data is None:
                continue
            try:
                value = validate(data)
            except EntryError as e:
                from ..log import warn

                warn(
                    "cupy-rawcode: ignoring a broken cache entry %s in %s (%s); recompiling",
                    key[:16],
                    layer.name,
                    e,
                )
                continue
            for upper in self.layers[:i]:
                upper.put(key, data)
            return value, layer.name
        return None

    def fetch(self, key: str) -> tuple[bytes, dict, str] | None:
        """(code, metadata, layer name) of the first valid entry for ``key``, counted as a hit;
        None when no layer holds one."""
        from .entry import decode

        found = self.get(key, lambda data: decode(key, data))
        if found is None:
            return None
        self.record(True)
        (code, meta), layer = found
        return code, meta, layer

    def put(self, key: str, data: bytes) -> None:
        for layer in self.layers:
            layer.put(key, data)

    def kept(self, key: str) -> bool:
        """Whether a layer that outlives the process (any but memory) holds a valid entry for
        ``key``: a put on a full or read-only disk only warns, so prebuild checks here. True
        when no such layer exists (nothing could keep it)."""
        from .entry import EntryError, decode

        lasting = [layer for layer in self.layers if layer.name != "memory"]
        for layer in lasting:
            try:
                decode(key, layer.get(key) or b"")
                return True
            except EntryError:
                continue
        return not lasting

    def record(self, hit: bool) -> None:
        """Count a hit or a miss in the layers that keep counts."""
        for layer in self.layers:
            rec = getattr(layer, "record", None)
            if rec is not None:
                rec(hit)

    def layer(self, name: str):
        return next((layer for layer in self.layers if layer.name == name), None)


def make_store(
    cache_dir=None,
    *,
    max_size=None,
    memory_entries: int | None = None,
    bundles=None,
    redis_url: str | None = None,
    redis_ttl: int | None = None,
    redis_timeout: float | None = None,
) -> Layered:
    """The layered store; every argument left None comes from the environment (config.py)."""
    from .. import config
    from .directory import DirectoryStore
    from .memory import MemoryStore

    cache_dir = config.cache_dir() if cache_dir is None else cache_dir
    max_bytes = None if max_size is None else config.parse_size("max_size", max_size)
    layers: list = [
        MemoryStore(
            config.memory_cache_entries()
            if memory_entries is None
            else config.parse_memory_entries("memory_entries", memory_entries)
        ),
        DirectoryStore(cache_dir, max_bytes),
    ]
    for path in config.bundles() if bundles is None else bundles:
        from .bundle import BundleStore

        layers.append(BundleStore(path))
    url = config.redis_url() if redis_url is None else redis_url
    if url:
        from .redis import RedisStore

        layers.append(
            RedisStore(
                url,
                ttl=config.redis_ttl() if redis_ttl is None else redis_ttl,
                timeout=config.redis_timeout() if redis_timeout is None else redis_timeout,
            )
        )
    return Layered(layers)


@functools.lru_cache(maxsize=8)
def _store_for(
    cache_dir: str,
    max_size: int,
    bundles: tuple[str, ...],
    redis_url: str | None,
    memory_entries: int,
) -> Layered:
    return make_store(
        cache_dir,
        max_size=max_size,
        bundles=bundles,
        redis_url=redis_url or "",
        memory_entries=memory_entries,
    )


_override: Layered | None = None


def set_store(store: Layered | None) -> None:
    """Use ``store`` (see ``make_store``) for every compile of this process; None goes back to
    the store the environment describes."""
    global _override
    _override = store


def default_store(cache_dir=None) -> Layered:
    """The store for a compile: set_store's, else the one the environment describes (read at
    call time, one instance per distinct configuration)."""
    if _override is not None and cache_dir is None:
        return _override
    from .. import config

    return _store_for(
        str(config.cache_dir() if cache_dir is None else cache_dir),
        config.cache_max_size(),
        config.bundles(),
        config.redis_url(),
        config.memory_cache_entries(),
    )
