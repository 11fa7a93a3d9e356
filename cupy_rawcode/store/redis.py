"""A shared store on Redis: read through from the local layers, written back on compile.

Values are the self-validating entry bytes of entry.py (code + JSON metadata + checksum), never
pickles. Redis down, slow (past the timeout: the whole call's deadline, remote.within) or
refusing: the call is a miss or a skipped write, counted in the level's tally, one
RemoteLevelWarning per process and level (remote.warn_failed), and the store rests for
``backoff`` seconds so a dead server does not cost a timeout per kernel. A value is read with
its length first and up to remote.LIMIT bytes (STRLEN and GETRANGE in one round trip): a larger
one is a failure, never read whole. Needs the ``redis`` package (the ``redis`` extra).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from .base import Store, tally
from .remote import LIMIT, checked_key, is_timeout, redacted, too_large, warn_failed, within

PREFIX = "cupy-rawcode:entry:"
T = TypeVar("T")


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
                warn_failed(self.name, redacted(url), e, opening=True)
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
        warn_failed(self.name, self.location, error)

    def _call(self, call: Callable[[], T]) -> T:
        """``call()`` within the timeout (the whole call: redis-py's timeout is per socket
        operation); past it the pool's connections are closed, which wakes the call."""
        return within(self.timeout, call, self._abort)

    def _abort(self) -> None:
        self.client.connection_pool.disconnect()

    def _read(self, keys: list[str]) -> list[Any]:
        """The value of each key (None: absent), asking its length (STRLEN) and at most
        remote.LIMIT + 1 bytes (GETRANGE) in one round trip; a larger value raises."""
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.strlen(PREFIX + checked_key(key))
            pipe.getrange(PREFIX + key, 0, LIMIT)
        answers = self._call(pipe.execute)
        values: list[Any] = []
        for size, data in zip(answers[::2], answers[1::2], strict=True):
            if size > LIMIT:
                raise too_large(int(size), f"{self.location} entry")
            values.append(data if size and isinstance(data, bytes) else None)
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
            self._call(lambda: self.client.set(name, data, ex=self.ttl))
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
            pipe = self.client.pipeline(transaction=False)
            for key, data in items.items():
                pipe.set(PREFIX + checked_key(key), data, ex=self.ttl)
            self._call(pipe.execute)
        except Exception as e:
            self._failed(e)

    def sizes(self, keys: Iterable[str]) -> dict[str, int] | None:
        """STRLEN of each key in one pipeline (0: not there); None when the server failed."""
        keys = list(keys)
        if not self._available():
            return None
        try:
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.strlen(PREFIX + checked_key(key))
            lengths = self._call(pipe.execute)
        except Exception as e:
            self._failed(e)
            return None
        return {k: int(n) for k, n in zip(keys, lengths, strict=False) if n}

    def delete(self, key: str) -> None:
        name = PREFIX + checked_key(key)
        if not self._available():
            return
        try:
            self._call(lambda: self.client.delete(name))
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
                scan = functools.partial(self.client.scan, cursor, match=PREFIX + "*", count=1000)
                cursor, found = self._call(scan)
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
                removed += int(self._call(functools.partial(self.client.delete, *batch)))
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
