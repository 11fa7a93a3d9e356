"""A shared store on Redis: read through from the local layers, written back on compile.

Values are the self-validating entry bytes of entry.py (code + JSON metadata + checksum), never
pickles. Redis down, slow (past the timeout) or refusing: the call is a miss or a skipped
write, one warning per process, and the store rests for ``backoff`` seconds so a dead server
does not cost a timeout per kernel. Needs the ``redis`` package (the ``redis`` extra).
"""

from __future__ import annotations

import threading
import time

from ..log import warn

PREFIX = "cupy-rawcode:entry:"
_warned = False
_warn_lock = threading.Lock()


def _warn_once(url: str, error: BaseException) -> None:
    global _warned
    with _warn_lock:
        if _warned:
            return
        _warned = True
    warn(
        "cupy-rawcode: the Redis store %s is unavailable (%s: %s); going on with the local cache",
        url,
        type(error).__name__,
        error,
    )


class RedisStore:
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
                    url,
                    ImportError(
                        "the redis package is not installed: pip install 'cupy-rawcode[redis]'"
                    ),
                )
            except Exception as e:
                self._down_until = float("inf")
                _warn_once(url, e)
        self.client = client

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, error: BaseException) -> None:
        self._down_until = time.monotonic() + self.backoff
        _warn_once(self.url, error)

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
