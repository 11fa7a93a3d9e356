"""Stores opened by URL: ``open_store`` (a plain path, ``file:``, ``bundle:``, ``memory:``,
``redis://``, ``memcached://``, ``http(s)://``, ``s3://`` or a user's ``module:Class``),
``parse_url``, ``path_url``, ``store_class``, and the remote levels of CUPY_RAWCODE_REMOTE
(``open_remote``). Named by the store package (store/__init__.py), which imports this module
only when a store is opened by URL: a default stack's memory and directory levels are not."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..ground import config, deferred
from .base import Store
from .readonly import ReadOnly

errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised
importlib = deferred("importlib")  # a backend's module, on first use
remote = deferred("cupy_rawcode.store.remote")  # a remote spec's parts, and its warning
parse = deferred("urllib.parse")  # a file: URL with an authority only

BACKENDS = {  # URL scheme -> its backend, imported on first use
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
WHOLE_URL = config.URL_SCHEMES  # schemes whose backend is given the whole URL: scheme://...


def _dotted(text: str) -> bool:
    """Whether ``text`` is a dotted Python name (``pkg.mod``, ``Outer.Inner``)."""
    return all(part.isidentifier() for part in text.split("."))


def _url_path(scheme: str, rest: str) -> str:
    """The path of ``file:``/``bundle:`` URL text after the colon: ``//[localhost]/abs/path``
    (percent-decoded), else the rest as it is (``file:relative/path``, ``file:/abs``)."""
    if not rest.startswith("//"):
        return rest
    parts = parse.urlsplit(f"{scheme}:{rest}")
    if parts.netloc not in ("", "localhost"):
        raise errors.RawcodeValueError(
            f"{scheme}:{rest}: a store on another host is not a {scheme}: URL"
        )
    return parse.unquote(parts.path)


def parse_url(url: str | os.PathLike) -> tuple[str, tuple[str, ...]]:
    """(backend as ``module:Class``, its positional arguments) for a store URL: a plain path
    (a directory; ending ``.bundle``: a bundle), ``file:PATH``, ``bundle:PATH``, ``memory:``,
    ``redis://``/``rediss://``/``unix://``, ``memcached://``, ``http(s)://`` and ``s3://`` URLs,
    or ``module:Class`` (a user's Store)."""
    text = os.fspath(url)
    scheme, colon, rest = text.partition(":")
    if colon and scheme in WHOLE_URL and rest.startswith("//"):
        return BACKENDS[scheme], (text,)
    if colon and scheme == "memory":
        if rest:
            raise errors.RawcodeValueError(
                f"store URL {text!r}: memory: takes nothing after the colon"
            )
        return BACKENDS[scheme], ()
    if colon and scheme in ("file", "bundle"):
        path = _url_path(scheme, rest)
        if not path:
            raise errors.RawcodeValueError(f"store URL {text!r}: {scheme}: needs a path")
        return BACKENDS[scheme], (path,)
    if colon and _dotted(scheme) and _dotted(rest):
        return text, ()
    if colon and "://" in text and _dotted(scheme):
        raise errors.RawcodeValueError(
            f"store URL {text!r}: unknown scheme {scheme!r} ({_schemes()})"
        )
    return BACKENDS["bundle" if text.endswith(".bundle") else "file"], (text,)


def _schemes() -> str:
    return (
        "accepted: a path, file:, bundle:, memory:, redis://, rediss://, unix://, memcached://, "
        "http://, https://, s3://, module:Class"
    )


def store_class(target: str) -> Callable[..., Store]:
    """The Store subclass ``module:Class`` names (a leading dot: a module of this package);
    ValueError when it cannot be imported, TypeError when it is no Store subclass."""
    module, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module, __package__ if module.startswith(".") else None)
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
    return f"{scheme}://{parse.quote(text)}"


def open_remote(spec: str, *, timeout: float, **options: object) -> Store:
    """The store one remote spec names (``URL`` or ``URL|read-only``): a remote scheme's backend
    given ``timeout`` (and ``options``), wrapped in ReadOnly when the spec says so; a URL of no
    remote level's form (config.remote_url_problem: a scheme missing or unknown, a bad port) is
    a RawcodeValueError, never a directory in the working directory."""
    url, read_only = remote.split_spec(spec)
    problem = config.remote_url_problem(url)
    if problem is not None:
        raise errors.RawcodeValueError(f"remote store {remote.redacted(url)!r}: {problem}")
    target, args = parse_url(url)
    if target == BACKENDS["file"]:  # a directory as a remote level: a shared one
        target = ".directory:SharedDirectoryStore"
    if url.partition(":")[0] in WHOLE_URL:
        options = {"timeout": timeout, **options}
    store = store_class(target)(*args, **options)
    return ReadOnly(store) if read_only else store


def remote_level(spec: str, timeout: float) -> Store | None:
    """open_remote(spec), or None with one warning when it cannot be opened (a missing client
    library, a class that is no Store, a URL of no remote level's form: CUPY_RAWCODE_REMOTE's
    are refused before, by config): a remote level never fails a compile."""
    url, _ = remote.split_spec(spec)  # a malformed spec is an error, not a warning
    extra = {"ttl": config.redis_ttl()} if url.startswith(config.REDIS_SCHEMES) else {}
    try:
        return open_remote(spec, timeout=timeout, **extra)
    except Exception as e:  # a user's class may raise anything while it connects
        remote.warn_failed("remote", remote.redacted(url), e, opening=True, url=url)
        return None
