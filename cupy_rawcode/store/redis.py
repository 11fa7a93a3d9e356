"""A shared store on Redis: read through from the local layers, written back on compile.

Values are the self-validating entry bytes of entry.py (code + JSON metadata + checksum), never
pickles. Redis down, slow (past the timeout) or refusing: the call is a miss or a skipped
write, one warning per process, and the store rests for ``backoff`` seconds so a dead server
does not cost a timeout per kernel. Needs the ``redis`` package (the ``redis`` extra).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from ..ground.log import warn_once
from .base import Store
from .remote import is_timeout

PREFIX = "cupy-rawcode:entry:"


def _warn_once(url: str, error: BaseException) -> None:
    """One warning per process, whichever Redis store failed first (log.warn_once)."""
    warn_once(
        ("redis unavailable",),
        "cupy-rawcode: the Redis store %s is unavailable (%s: %s); going on with the local cache",
        url,
        type(error).__name__,
        error,
    )


def redacted(url: str) -> str:
    """``url`` without its password, to show: redis://user:***@host:6379/0."""
    scheme, sep, rest = url.partition("://")
    auth, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in auth:
        return url
    return f"{scheme}://{auth.partition(':')[0]}:***@{host}"


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
        self.url, self.ttl, self.backoff = url, ttl, backoff
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
                _warn_once(
                    redacted(url),
                    ImportError(
                        "the redis package is not installed: pip install 'cupy-rawcode[redis]'"
                    ),
                )
            except Exception as e:
                self._down_until = float("inf")
                _warn_once(redacted(url), e)
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
        """A failed call: counted (``timeouts`` or ``errors``, which Levels.stats reports: this
        store keeps its own failures rather than raising), warned once, then a rest."""
        if is_timeout(error):
            self.timeouts += 1
        else:
            self.errors += 1
        self._down_until = time.monotonic() + self.backoff
        _warn_once(self.location, error)

    def get(self, key: str) -> bytes | None:
        if not self._available():
            return None
        try:
            data = self.client.get(PREFIX + key)
        except Exception as e:
            self._failed(e)
            return None
        return data if isinstance(data, bytes) else None

    def put(self, key: str, data: bytes) -> None:
        if not self._available():
            return
        try:
            self.client.set(PREFIX + key, data, ex=self.ttl)
        except Exception as e:
            self._failed(e)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """One MGET for all ``keys``; a failure is a miss for each (counted and warned once)."""
        keys = list(keys)
        if not keys or not self._available():
            return {}
        try:
            values = self.client.mget([PREFIX + key for key in keys])
        except Exception as e:
            self._failed(e)
            return {}
        return {k: v for k, v in zip(keys, values, strict=False) if isinstance(v, bytes)}

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """Every SET in one pipeline (no transaction: each entry stands alone)."""
        if not items or not self._available():
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for key, data in items.items():
                pipe.set(PREFIX + key, data, ex=self.ttl)
            pipe.execute()
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
                pipe.strlen(PREFIX + key)
            lengths = pipe.execute()
        except Exception as e:
            self._failed(e)
            return None
        return {k: int(n) for k, n in zip(keys, lengths, strict=False) if n}

    def delete(self, key: str) -> None:
        if not self._available():
            return
        try:
            self.client.delete(PREFIX + key)
        except Exception as e:
            self._failed(e)

    def _keys(self) -> list:
        """Every entry's Redis key (SCAN, not KEYS: the server goes on serving meanwhile)."""
        if not self._available():
            return []
        try:
            return list(self.client.scan_iter(match=PREFIX + "*", count=1000))
        except Exception as e:
            self._failed(e)
            return []

    def clear(self) -> int:
        """Remove every cupy-rawcode entry on the server (every user's: the store is shared)."""
        keys, removed = self._keys(), 0
        try:
            for start in range(0, len(keys), 1000):
                removed += int(self.client.delete(*keys[start : start + 1000]))
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
