"""A shared store on Redis: read through from the local layers, written back on compile.

Values are the self-validating entry bytes of entry.py (code + JSON metadata + checksum), never
pickles. Redis down, slow (past the timeout: the whole call's deadline, remote.within) or
refusing: the call is a miss or a skipped write, counted in the level's tally, one
RemoteLevelWarning per process and level (remote.warn_failed), and the store rests for
``backoff`` seconds so a dead server does not cost a timeout per kernel. Each call is one
pipeline on a connection it alone holds (``_Lease``): its deadline closes that connection, never
another thread's call. A value is read with its length first and up to remote.LIMIT bytes
(STRLEN and GETRANGE in one round trip): a larger one is a failure, never read whole; a key that
holds no string (WRONGTYPE) is a miss of that key alone. Needs the ``redis`` package (the
``redis`` extra).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .base import Store, tally
from .remote import (
    LIMIT,
    DeadlineError,
    checked_key,
    is_timeout,
    redacted,
    too_large,
    warn_failed,
    within,
)

PREFIX = "cupy-rawcode:entry:"


def _scan(cursor: int, pipe: Any) -> None:
    """One SCAN of the entries' keys on ``pipe`` (SCAN, not KEYS: the server goes on serving)."""
    pipe.scan(cursor, match=PREFIX + "*", count=1000)


def _delete(names: list, pipe: Any) -> None:
    """One DEL of ``names`` on ``pipe``."""
    pipe.delete(*names)


class _Lease:
    """The connection pool one call's pipeline sees: it hands the call one connection of the
    client's pool and takes it back, so the call's deadline (``abort``) closes that connection
    alone, and never one given back already, now another call's."""

    def __init__(self, pool: Any):
        self.pool, self.conn, self.aborted = pool, None, False
        self._lock = threading.Lock()

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        """A connection of the pool for the call, none once its deadline passed."""
        conn = self.pool.get_connection(*args, **kwargs)  # redis 5 names a command, later none
        with self._lock:
            if not self.aborted:
                self.conn = conn
                return conn
        self.pool.release(conn)
        raise DeadlineError("the call was aborted at its deadline")

    def release(self, conn: Any) -> None:
        """The call's connection back to the pool: no abort closes it from now on."""
        with self._lock:
            self.conn = None
        self.pool.release(conn)

    def abort(self) -> None:
        """Close the call's connection, which wakes it (the pool reconnects it when reused)."""
        with self._lock:
            self.aborted = True
            if self.conn is not None:
                self.conn.disconnect()


class RedisStore(Store):
    """Entries under ``PREFIX`` on a Redis server (``redis://``, ``rediss://``, ``unix://``)."""

    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        ttl: int | None = None,
        timeout: float = 0.5,
        backoff: float = 10.0,
        client=None,
    ):
        self.url, self.ttl, self.backoff, self.timeout = url, ttl, backoff, timeout
        self.errors = self.timeouts = 0  # failed calls, by kind (see _failed)
        self._down_until = 0.0
        if client is None:
            try:
                import redis

                client = redis.Redis.from_url(
                    url, socket_timeout=timeout, socket_connect_timeout=timeout
                )
            except ImportError:
                self._down_until = float("inf")
                missing = "the redis package is not installed: pip install 'cupy-rawcode[redis]'"
                warn_failed(self.name, redacted(url), ImportError(missing), opening=True)
            except Exception as e:
                self._down_until = float("inf")
                warn_failed(self.name, redacted(url), e, opening=True, url=url)
        self.client = client

    @property
    def location(self) -> str:
        return redacted(self.url)

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    def up(self) -> bool:
        return self._available()

    def failures(self) -> dict[str, int]:
        return {"errors": self.errors, "timeouts": self.timeouts}

    def _failed(self, error: BaseException) -> None:
        """A failed call: counted (``timeouts`` or ``errors``, here for Levels.stats and in the
        level's tally for ``cache stats``: this store keeps its own failures rather than
        raising), warned once (a RemoteLevelWarning), then a rest."""
        kind = "timeouts" if is_timeout(error) else "errors"
        setattr(self, kind, getattr(self, kind) + 1)
        tally(self.name)[kind] += 1
        self._down_until = time.monotonic() + self.backoff
        warn_failed(self.name, self.location, error, url=self.url)

    def _run(self, queue: Callable[[Any], object], raise_on_error: bool = True) -> list[Any]:
        """The answers of the commands ``queue(pipe)`` puts on a pipeline, in one round trip
        within the timeout (the whole call: redis-py's timeout is per socket operation), on a
        connection the call alone holds (``_Lease``); ``raise_on_error=False``: a command's
        error (WRONGTYPE) is its answer, the others stand."""
        pipe = self.client.pipeline(transaction=False)
        queue(pipe)
        lease = _Lease(pipe.connection_pool)
        pipe.connection_pool = lease
        return within(self.timeout, lambda: pipe.execute(raise_on_error), lease.abort)

    def _read(self, keys: list[str]) -> list[Any]:
        """The value of each key (None: absent, no string, or gone between the two commands),
        asking its length (STRLEN) and at most remote.LIMIT + 1 bytes (GETRANGE) in one round
        trip; a larger value raises."""
        names = [PREFIX + checked_key(key) for key in keys]

        def queue(pipe: Any) -> None:
            for name in names:
                pipe.strlen(name)
                pipe.getrange(name, 0, LIMIT)

        answers = self._run(queue, raise_on_error=False)
        values: list[Any] = []
        for size, data in zip(answers[::2], answers[1::2], strict=True):
            if not isinstance(size, int) or not isinstance(data, bytes) or not data:
                values.append(None)  # absent, WRONGTYPE (an error answer), deleted meanwhile
            elif max(size, len(data)) > LIMIT:
                raise too_large(max(size, len(data)), f"{self.location} entry")
            else:
                values.append(data)
        return values

    def get(self, key: str) -> bytes | None:
        checked_key(key)
        if not self._available():
            return None
        try:
            return self._read([key])[0]
        except Exception as e:
            self._failed(e)
            return None

    def put(self, key: str, data: bytes) -> None:
        name = PREFIX + checked_key(key)
        if not self._available():
            return
        try:
            self._run(lambda pipe: pipe.set(name, data, ex=self.ttl))
        except Exception as e:
            self._failed(e)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """One round trip for all ``keys``; a failure is a miss for each (counted and warned
        once)."""
        keys = list(keys)
        if not keys or not self._available():
            return {}
        try:
            values = self._read(keys)
        except Exception as e:
            self._failed(e)
            return {}
        return {k: v for k, v in zip(keys, values, strict=True) if v is not None}

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """Every SET in one pipeline (no transaction: each entry stands alone)."""
        if not items or not self._available():
            return
        try:
            names = {PREFIX + checked_key(key): data for key, data in items.items()}
            self._run(lambda pipe: [pipe.set(n, data, ex=self.ttl) for n, data in names.items()])
        except Exception as e:
            self._failed(e)

    def sizes(self, keys: Iterable[str]) -> dict[str, int] | None:
        """STRLEN of each key in one pipeline (0 or WRONGTYPE: not there); None when the server
        failed."""
        keys = list(keys)
        if not self._available():
            return None
        try:
            names = [PREFIX + checked_key(key) for key in keys]
            lengths = self._run(lambda pipe: [pipe.strlen(n) for n in names], raise_on_error=False)
        except Exception as e:
            self._failed(e)
            return None
        return {k: n for k, n in zip(keys, lengths, strict=True) if isinstance(n, int) and n > 0}

    def delete(self, key: str) -> None:
        name = PREFIX + checked_key(key)
        if not self._available():
            return
        try:
            self._run(lambda pipe: pipe.delete(name))
        except Exception as e:
            self._failed(e)

    def _keys(self) -> list:
        """Every entry's Redis key (SCAN, not KEYS: the server goes on serving meanwhile; each
        SCAN call within the timeout)."""
        if not self._available():
            return []
        keys: list = []
        cursor = 0
        try:
            while True:
                [(cursor, found)] = self._run(functools.partial(_scan, cursor))
                keys.extend(found)
                if not int(cursor):
                    return keys
        except Exception as e:
            self._failed(e)
            return []

    def clear(self) -> int:
        """Remove every cupy-rawcode entry on the server (every user's: the store is shared)."""
        keys, removed = self._keys(), 0
        try:
            for start in range(0, len(keys), 1000):
                batch = keys[start : start + 1000]
                removed += int(self._run(functools.partial(_delete, batch))[0])
        except Exception as e:
            self._failed(e)
        return removed

    def __len__(self) -> int:
        return len(self._keys())

    def close(self) -> None:
        """Close the connections; the next call opens new ones."""
        try:
            if self.client is not None:
                self.client.close()
        except Exception:
            pass
