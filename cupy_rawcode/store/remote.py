"""Remote levels: the ``CUPY_RAWCODE_REMOTE`` specs opened as stores, and what a failing one is.

A spec is a store URL (``redis://``, ``memcached://``, ``http(s)://``, ``s3://``, ``module:Class``,
any URL ``open_store`` takes) optionally followed by ccache-style attributes, of which there is
one: ``|read-only``. A remote backend raises on a failed call (refused, reset, timed out); the
``Levels`` holding it (base.py) counts the failure, warns once per process and level with a
``RemoteLevelWarning``, and skips the level for a while: a remote level never fails a compile.
"""

from __future__ import annotations

import abc
import socket
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..ground.errors import RawcodeError, RawcodeValueError, RawcodeWarning
from ..ground.log import first_time
from .base import Store

T = TypeVar("T")
READ_ONLY = "read-only"


class RemoteLevelWarning(RawcodeWarning, UserWarning):
    """A remote level failed or timed out: it is skipped for a while, and compiles go on."""


class RemoteError(RawcodeError, OSError):
    """A remote store answered something that is neither an entry nor "no such entry"."""


class MissingExtraError(RawcodeError, ImportError):
    """The client library of a store's scheme is not installed; the message names the extra."""


def missing_extra(package: str, extra: str, scheme: str) -> RawcodeError:
    """The error for a client library that is not installed, naming the extra that brings it."""
    return MissingExtraError(
        f"the {scheme} store needs the {package} package, which is not installed: "
        f"pip install 'cupy-rawcode[{extra}]'"
    )


def split_spec(spec: str) -> tuple[str, bool]:
    """(URL, read-only) of one spec: ``URL`` or ``URL|read-only``; ValueError for any other
    attribute or an empty URL."""
    url, *attrs = spec.split("|")
    bad = [a for a in attrs if a != READ_ONLY]
    if not url or bad:
        raise RawcodeValueError(
            f"remote store {spec!r}: expected a store URL, optionally followed by "
            f"'|{READ_ONLY}'" + (f" (unknown attribute {bad[0]!r})" if bad else "")
        )
    return url, READ_ONLY in attrs


def is_timeout(error: BaseException) -> bool:
    """Whether ``error`` (or the error it wraps) is a timeout rather than another failure."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (TimeoutError, socket.timeout)) or "timeout" in type(e).__name__.lower():
            return True
        reason = getattr(e, "reason", None)  # urllib's URLError(reason=timeout(...))
        if isinstance(reason, BaseException):
            e = reason
            continue
        e = e.__cause__ or e.__context__
    return False


def warn_failed(name: str, location: str, error: BaseException, opening: bool = False) -> None:
    """One RemoteLevelWarning per process and level (by location): it failed (or could not be
    opened: ``opening``), compiles go on."""
    if not first_time(("remote level", location)):
        return
    what = "cannot be opened" if opening else "timed out" if is_timeout(error) else "failed"
    then = "left out" if opening else "skipped for a while"
    warnings.warn(
        f"cupy-rawcode: the {name} store {location} {what} ({type(error).__name__}: {error}); "
        f"it is {then}, and compiles go on with the other levels",
        RemoteLevelWarning,
        stacklevel=4,
    )


def redacted(url: str) -> str:
    """``url`` without its password, to show: scheme://user:***@host/..."""
    scheme, sep, rest = url.partition("://")
    host_part, slash, path = rest.partition("/")
    auth, at, host = host_part.rpartition("@")
    if not sep or not at or ":" not in auth:
        return url
    return f"{scheme}://{auth.partition(':')[0]}:***@{host}{slash}{path}"


def host_port(url: str, default_port: int) -> tuple[str, int, str]:
    """(host, port, path) of ``scheme://host[:port][/path]``; ValueError when malformed."""
    parts = urlsplit(url)
    try:
        port = parts.port or default_port
    except ValueError:
        raise RawcodeValueError(f"store URL {url!r}: the port is not a number") from None
    if not parts.hostname:
        raise RawcodeValueError(f"store URL {url!r}: no host")
    return parts.hostname, port, parts.path


WORKERS = 8  # requests one HTTP or S3 store has in flight at once in a bulk call


class Parallel:
    """A bounded pool of threads a store sends its bulk requests through (made on first use,
    kept across calls so each thread keeps its connection, ended by ``close``)."""

    def __init__(self, workers: int = WORKERS):
        self.workers = workers
        self._pool: Any = None  # a ThreadPoolExecutor, once used
        self._lock = threading.Lock()

    def map(self, call: Callable[[str], T], keys: Iterable[str]) -> dict[str, T]:
        """``{key: call(key)}`` for each of ``keys``, at most ``workers`` at a time. The first
        call that raises cancels those not started, and is raised once the running ones end
        (a dead server costs one timeout per worker, not one per key)."""
        from concurrent.futures import ThreadPoolExecutor, as_completed

        keys = list(dict.fromkeys(keys))
        if len(keys) <= 1:
            return {key: call(key) for key in keys}
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="cupy-rawcode")
            pool = self._pool
        futures = {pool.submit(call, key): key for key in keys}
        done: dict[str, T] = {}
        error: BaseException | None = None
        for future in as_completed(futures):
            if future.cancelled():
                continue
            try:
                done[futures[future]] = future.result()
            except Exception as e:
                if error is None:
                    error = e
                    for pending in futures:
                        pending.cancel()
        if error is not None:
            raise error
        return done

    def close(self) -> None:
        """End the threads (a later ``map`` starts new ones)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


class ParallelStore(Store):
    """A remote store whose bulk calls are its single requests sent through ``self.parallel``
    (HTTP, S3): ``_length`` gives one entry's size by a HEAD request, None when it is absent."""

    parallel: Parallel

    @abc.abstractmethod
    def _length(self, key: str) -> int | None:
        """The size of the entry for ``key`` (one HEAD request), None when it is not there."""

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """GETs in parallel (``remote.WORKERS`` at a time); the first failure raises."""
        found = self.parallel.map(self.get, keys)
        return {key: data for key, data in found.items() if data is not None}

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """PUTs in parallel; the first failure raises."""
        self.parallel.map(lambda key: self.put(key, items[key]), items)

    def sizes(self, keys: Iterable[str]) -> dict[str, int] | None:
        """The size of each entry held, by HEAD requests in parallel."""
        found = self.parallel.map(self._length, keys)
        return {key: n for key, n in found.items() if n is not None}
