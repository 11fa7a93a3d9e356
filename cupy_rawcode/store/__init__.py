"""Stage 4, the store: takes a key and gives the entry's bytes, or stores them.

Storage: bytes in, bytes out. Every backend is a ``Store`` (base.py) opened by URL
(``open_store``); entry.py turns compiled code + JSON metadata into self-validating bytes.

The default stack (make_store), a ``Levels`` in lookup order: memory LRU (``MemoryStore``,
defined here: every stack starts with it, and a warm hit then loads one module fewer), the cache
directory,
read-only bundles (CUPY_RAWCODE_BUNDLES), then the remote levels: Redis (CUPY_RAWCODE_REDIS_URL)
and each store of CUPY_RAWCODE_REMOTE in order (remote.py). A hit below copies the entry into the
writable levels above it; a compile writes to every writable level; a remote level that fails
is skipped with one warning (wrappers.py)."""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..ground import deferred
from .base import Store
from .layout import cache_location
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
    in-process LRU of entry bytes, in front of the disk."""

    name = "memory"

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        return "memory:"

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._data.get(key)
            if data is not None:
                self._data.move_to_end(key)
            return data

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
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


errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised

_BACKENDS = {  # URL scheme -> its backend, imported on first use
    "memory": ".memory:MemoryStore",
    "file": ".directory:DirectoryStore",
    "bundle": ".bundle:BundleStore",
    "redis": ".redis:RedisStore",
    "rediss": ".redis:RedisStore",
    "unix": ".redis:RedisStore",
    "memcached": ".memcached:MemcachedStore",
    "http": ".http:HttpStore",
    "https": ".http:HttpStore",
    "s3": ".s3:S3Store",
}
# schemes whose backend is given the whole URL
_WHOLE_URL = ("redis", "rediss", "unix", "memcached", "http", "https", "s3")


def _dotted(text: str) -> bool:
    """Whether ``text`` is a dotted Python name (``pkg.mod``, ``Outer.Inner``)."""
    return all(part.isidentifier() for part in text.split("."))


def _url_path(scheme: str, rest: str) -> str:
    """The path of ``file:``/``bundle:`` URL text after the colon: ``//[localhost]/abs/path``
    (percent-decoded), else the rest as it is (``file:relative/path``, ``file:/abs``)."""
    if not rest.startswith("//"):
        return rest
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(f"{scheme}:{rest}")
    if parts.netloc not in ("", "localhost"):
        raise errors.RawcodeValueError(
            f"{scheme}:{rest}: a store on another host is not a {scheme}: URL"
        )
    return unquote(parts.path)


def parse_url(url: str | os.PathLike) -> tuple[str, tuple[str, ...]]:
    """(backend as ``module:Class``, its positional arguments) for a store URL: a plain path
    (a directory; ending ``.bundle``: a bundle), ``file:PATH``, ``bundle:PATH``, ``memory:``,
    ``redis://``/``rediss://``/``unix://``, ``memcached://``, ``http(s)://`` and ``s3://`` URLs,
    or ``module:Class`` (a user's Store)."""
    text = os.fspath(url)
    scheme, colon, rest = text.partition(":")
    if colon and scheme in _WHOLE_URL and rest.startswith("//"):
        return _BACKENDS[scheme], (text,)
    if colon and scheme == "memory":
        if rest:
            raise errors.RawcodeValueError(
                f"store URL {text!r}: memory: takes nothing after the colon"
            )
        return _BACKENDS[scheme], ()
    if colon and scheme in ("file", "bundle"):
        path = _url_path(scheme, rest)
        if not path:
            raise errors.RawcodeValueError(f"store URL {text!r}: {scheme}: needs a path")
        return _BACKENDS[scheme], (path,)
    if colon and _dotted(scheme) and _dotted(rest):
        return text, ()
    if colon and "://" in text and _dotted(scheme):
        raise errors.RawcodeValueError(
            f"store URL {text!r}: unknown scheme {scheme!r} ({_schemes()})"
        )
    return _BACKENDS["bundle" if text.endswith(".bundle") else "file"], (text,)


def _schemes() -> str:
    return (
        "accepted: a path, file:, bundle:, memory:, redis://, rediss://, unix://, memcached://, "
        "http://, https://, s3://, module:Class"
    )


def store_class(target: str) -> Callable[..., Store]:
    """The Store subclass ``module:Class`` names (a leading dot: a module of this package);
    ValueError when it cannot be imported, TypeError when it is no Store subclass."""
    import importlib

    module, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module, __name__ if module.startswith(".") else None)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise errors.RawcodeValueError(f"store {target!r} cannot be loaded: {e}") from None
    if not (isinstance(obj, type) and issubclass(obj, Store)):
        raise errors.RawcodeTypeError(
            f"store {target!r} is not a subclass of cupy_rawcode.store.Store "
            f"(got {obj!r}); see cupy_rawcode/store/base.py"
        )
    return obj


def open_store(url: str | os.PathLike, **options: object) -> Store:
    """The store ``url`` names (parse_url), built with ``options`` as keyword arguments:
    ``max_bytes`` for a directory, ``max_entries`` for memory, ``ttl`` and ``timeout`` for
    Redis, anything a user's class takes."""
    target, args = parse_url(url)
    return store_class(target)(*args, **options)


def path_url(scheme: str, path: str | os.PathLike) -> str:
    """A ``file:``/``bundle:`` URL that opens exactly ``path`` (no decoding of ``%``; a path
    starting with ``//`` goes in the percent-encoded form)."""
    text = os.fspath(path)
    if not text.startswith("//"):
        return f"{scheme}:{text}"
    from urllib.parse import quote

    return f"{scheme}://{quote(text)}"


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
    from ..ground import config

    location = cache_location(cache_dir)
    max_bytes = None if max_size is None else config.parse_size("max_size", max_size)
    entries = (
        config.memory_cache_entries()
        if memory_entries is None
        else config.parse_memory_entries("memory_entries", memory_entries)
    )
    levels: list[Store] = [
        MemoryStore(max_entries=entries),  # what open_store("memory:") gives, without the lookup
        open_store(path_url("file", location.path), max_bytes=max_bytes),
    ]
    for path in config.bundles() if bundles is None else bundles:
        levels.append(open_store(path_url("bundle", path)))
    url = config.redis_url() if redis_url is None else redis_url
    if url:
        redis = store_class(_BACKENDS["redis"])  # any text: one the client refuses warns once
        levels.append(
            redis(
                url,
                ttl=config.redis_ttl() if redis_ttl is None else redis_ttl,
                timeout=config.redis_timeout() if redis_timeout is None else redis_timeout,
            )
        )
    timeout = config.remote_timeout() if remote_timeout is None else remote_timeout
    for spec in config.remote() if remote is None else remote:
        level = spec if isinstance(spec, Store) else _remote_level(spec, timeout)
        if level is not None:
            levels.append(level)
    return Levels(levels)


def open_remote(spec: str, *, timeout: float, **options: object) -> Store:
    """The store one remote spec names (``URL`` or ``URL|read-only``): a remote scheme's backend
    given ``timeout`` (and ``options``), wrapped in ReadOnly when the spec says so."""
    from .remote import split_spec

    url, read_only = split_spec(spec)
    target, args = parse_url(url)
    if url.partition(":")[0] in _WHOLE_URL:
        options = {"timeout": timeout, **options}
    store = store_class(target)(*args, **options)
    return ReadOnly(store) if read_only else store


def _remote_level(spec: str, timeout: float) -> Store | None:
    """open_remote(spec), or None with one warning when it cannot be opened (a missing client
    library, a class that is no Store): a remote level never fails a compile."""
    from ..ground import config
    from .remote import split_spec, warn_failed

    url, _ = split_spec(spec)  # a malformed spec is an error, not a warning
    extra = {"ttl": config.redis_ttl()} if url.startswith(config.REDIS_SCHEMES) else {}
    try:
        return open_remote(spec, timeout=timeout, **extra)
    except Exception as e:  # a user's class may raise anything while it connects
        from .remote import redacted

        warn_failed("remote", redacted(url), e, opening=True)
        return None


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
    from ..ground import config

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
