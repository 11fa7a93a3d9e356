"""Stage 4, the store: takes a key and gives the entry's bytes, or stores them.

Storage: bytes in, bytes out. Every backend is a ``Store`` (base.py); entry.py turns compiled
code + JSON metadata into self-validating bytes.

The default stack (make_store), a ``Levels`` in lookup order: memory LRU, the cache directory,
read-only bundles (CUPY_RAWCODE_BUNDLES), then Redis (CUPY_RAWCODE_REDIS_URL). A hit below
copies the entry into the writable levels above it; a compile writes to every writable level."""

from __future__ import annotations

import functools

from .base import Store
from .wrappers import Levels, ReadOnly

__all__ = ["Levels", "ReadOnly", "Store", "default_store", "make_store"]


def make_store(
    cache_dir=None,
    *,
    max_size=None,
    memory_entries: int | None = None,
    bundles=None,
    redis_url: str | None = None,
    redis_ttl: int | None = None,
    redis_timeout: float | None = None,
) -> Levels:
    """The layered store; every argument left None comes from the environment (config.py)."""
    from .. import config

    cache_dir = config.cache_dir() if cache_dir is None else cache_dir
    max_bytes = None if max_size is None else config.parse_size("max_size", max_size)
    entries = (
        config.memory_cache_entries()
        if memory_entries is None
        else config.parse_memory_entries("memory_entries", memory_entries)
    )
    from .directory import DirectoryStore
    from .memory import MemoryStore

    levels: list[Store] = [MemoryStore(entries), DirectoryStore(cache_dir, max_bytes)]
    for path in config.bundles() if bundles is None else bundles:
        from .bundle import BundleStore

        levels.append(BundleStore(path))
    url = config.redis_url() if redis_url is None else redis_url
    if url:
        from .redis import RedisStore

        levels.append(
            RedisStore(
                url,
                ttl=config.redis_ttl() if redis_ttl is None else redis_ttl,
                timeout=config.redis_timeout() if redis_timeout is None else redis_timeout,
            )
        )
    return Levels(levels)


@functools.lru_cache(maxsize=8)
def _store_for(
    cache_dir: str,
    max_size: int,
    bundles: tuple[str, ...],
    redis_url: str | None,
    memory_entries: int,
) -> Levels:
    return make_store(
        cache_dir,
        max_size=max_size,
        bundles=bundles,
        redis_url=redis_url or "",
        memory_entries=memory_entries,
    )


_override: Levels | None = None


def set_store(store: Levels | None) -> None:
    """Use ``store`` (see ``make_store``) for every compile of this process; None goes back to
    the store the environment describes."""
    global _override
    _override = store


def default_store(cache_dir=None) -> Levels:
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
