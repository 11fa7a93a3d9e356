"""Remote levels: the ``CUPY_RAWCODE_REMOTE`` specs opened as stores, and what a failing one is.

A spec is a store URL (``redis://``, ``memcached://``, ``http(s)://``, ``s3://``, ``module:Class``,
any URL ``open_store`` takes) optionally followed by ccache-style attributes, of which there is
one: ``|read-only``. A remote backend raises on a failed call (refused, reset, timed out); the
``Levels`` holding it (base.py) counts the failure, warns once per process and level with a
``RemoteLevelWarning``, and skips the level for a while: a remote level never fails a compile.

Every call a remote backend makes runs under one deadline (``within``: connect, send and the
whole answer, not each socket operation), and an answer is read in pieces up to ``ENTRY_LIMIT``
(``read_bounded``), the bound the disk level holds its entries to: a server that drips bytes or
sends a huge answer costs one timeout, never a hang or the process's memory. Keys are checked
(``checked_key``) and URLs shown only ``redacted``.
"""

from __future__ import annotations

import abc
import socket
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..ground import ENTRY_LIMIT
from ..ground.errors import RawcodeError, RawcodeValueError, RawcodeWarning
from ..ground.log import first_time
from ..ground.redaction import redacted
from .base import Store
from .directory import is_key

T = TypeVar("T")
READ_ONLY = "read-only"


class RemoteLevelWarning(RawcodeWarning, UserWarning):
    """A remote level failed or timed out: it is skipped for a while, and compiles go on."""


class RemoteError(RawcodeError, OSError):
    """A remote store answered something that is neither an entry nor "no such entry"."""


class DeadlineError(RawcodeError, TimeoutError):
    """A remote call had no complete answer within its deadline (the store's timeout)."""


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


def warn_failed(
    name: str, location: str, error: BaseException, opening: bool = False, url: str = ""
) -> None:
    """One RemoteLevelWarning per process and level (by location): it failed (or could not be
    opened: ``opening``), compiles go on. ``url``: the level's own, whose password's pieces a
    client library's error may quote (redacted masks them)."""
    if not first_time(("remote level", location)):
        return
    what = "cannot be opened" if opening else "timed out" if is_timeout(error) else "failed"
    then = "left out" if opening else "skipped for a while"
    message = (
        f"cupy-rawcode: the {name} store {location} {what} ({type(error).__name__}: {error}); "
        f"it is {then}, and compiles go on with the other levels"
    )
    warnings.warn(redacted(message, url), RemoteLevelWarning, stacklevel=4)


def url_of(level: object) -> str:
    """The URL a level was opened with (through a read-only wrapper too), or ''."""
    return getattr(level, "url", "") or getattr(getattr(level, "inner", None), "url", "")


def checked_key(key: str) -> str:
    """``key`` when it is a cache key (64 lower-case hex digits, as every key is), else a
    ValueError naming it: a remote store names nothing else (no path out of its prefix)."""
    if not is_key(key):
        raise RawcodeValueError(f"not a cache key: {key!r:.80} (a key is 64 lower-case hex digits)")
    return key


LIMIT = ENTRY_LIMIT  # the most bytes one answer may hold: the disk level's bound on an entry
PIECE = 1 << 16  # bytes asked of a stream at a time


def too_large(size: int, what: str) -> RemoteError:
    """The error for an answer over ``LIMIT``: the level failed (it is no entry)."""
    return RemoteError(f"{what}: an answer of {size} bytes or more, over the limit of {LIMIT}")


def read_bounded(read: Callable[[int], bytes], declared: object, what: str) -> bytes:
    """The whole of a stream ``read(n)`` gives, read in pieces and refused past ``LIMIT``
    bytes (``declared``: the length its header gave, refused unread when over the limit)."""
    if isinstance(declared, (int, str)) and str(declared).isdigit() and int(declared) > LIMIT:
        raise too_large(int(declared), what)
    pieces, total = [], 0
    while piece := read(PIECE):
        total += len(piece)
        if total > LIMIT:
            raise too_large(total, what)
        pieces.append(piece)
    return b"".join(pieces)


def shut(sock: Any) -> None:
    """Shut ``sock`` down (a socket, or None): a thread blocked reading or writing it wakes."""
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def within(seconds: float, call: Callable[[], T], abort: Callable[[], None]) -> T:
    """``call()``, run on a daemon thread of its own and waited for ``seconds`` at most: the
    deadline of the whole call (a socket's timeout bounds one operation only, and a server
    that drips a byte at a time never trips it). Past the deadline, or when the wait is
    interrupted (Ctrl-C), ``abort()`` wakes the call (it shuts its socket) and DeadlineError
    (a TimeoutError) or the interrupt is raised; exit never waits for the thread."""
    done = threading.Event()
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as e:  # handed to the caller
            box.append((False, e))
        finally:
            done.set()

    threading.Thread(target=run, name="cupy-rawcode-remote", daemon=True).start()
    try:
        finished = done.wait(seconds)
    except BaseException:
        _quietly(abort)
        raise
    if not finished:
        _quietly(abort)
        raise DeadlineError(f"no complete answer within {seconds:g} s")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def _quietly(abort: Callable[[], None]) -> None:
    """``abort()``, whatever it raises (waking a call is best effort)."""
    try:
        abort()
    except Exception:
        pass


class Connections:
    """The idle connections of a store (an ``http.client`` connection, a pymemcache client:
    each has ``sock``, and reconnects itself when it is closed), taken by one call at a time,
    so a call's deadline can shut exactly the socket it uses."""

    def __init__(self, make: Callable[[], Any]):
        self.make = make
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    def use(self, seconds: float, call: Callable[[Any, threading.Event], T]) -> T:
        """``call(connection, aborted)`` within ``seconds`` (``within``) on an idle connection
        (or a new one), given back when it succeeded and closed when it failed; past the
        deadline its socket is shut and ``aborted`` set (the call tries nothing more)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        conn = self.make() if conn is None else conn
        aborted = threading.Event()

        def run() -> T:
            try:
                return call(conn, aborted)
            except BaseException:
                conn.close()
                raise

        def abort() -> None:
            aborted.set()
            shut(getattr(conn, "sock", None))

        value = within(seconds, run, abort)
        with self._lock:
            kept = len(self._idle) < 2 * WORKERS
            if kept:
                self._idle.append(conn)
        if not kept:
            conn.close()
        return value

    def close(self) -> None:
        """Close the idle connections (those in use close when their call ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def host_port(url: str, default_port: int) -> tuple[str, int, str]:
    """(host, port, path) of ``scheme://host[:port][/path]``; ValueError when malformed."""
    parts = urlsplit(url)
    try:
        port = parts.port or default_port
    except ValueError:
        raise RawcodeValueError(f"store URL {redacted(url)!r}: the port is not a number") from None
    if not parts.hostname:
        raise RawcodeValueError(f"store URL {redacted(url)!r}: no host")
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
        (a dead server costs one timeout per worker, not one per key). An interrupt (Ctrl-C)
        cancels them too and ends the pool at once: exit waits for the calls running, each
        within its deadline (``within``), never for the queued ones."""
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
        try:
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
        except BaseException:  # an interrupt: nothing more is sent
            for pending in futures:
                pending.cancel()
            self.close()
            raise
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
