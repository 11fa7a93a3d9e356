"""A shared store on memcached (``memcached://host[:port]``, port 11211 by default).

Values are entry bytes (entry.py) under ``PREFIX + key``, never expiring (memcached's own LRU
evicts). A failed or slow call raises; the Levels holding the store skips it (remote.py). An
entry larger than the server's item size (1 MiB by default) is not stored: a skipped write.
Counting and clearing list the keys with ``lru_crawler metadump all`` (memcached 1.4.31 and
later), since the protocol has no other way to list them. Needs ``pymemcache`` (extra
``memcached``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

from .base import Store
from .remote import RemoteError, host_port, missing_extra

PREFIX = "cupy-rawcode:"
DEFAULT_PORT = 11211
BATCH = 100  # keys per multi-key request


class MemcachedStore(Store):
    """Entries under ``PREFIX`` on one memcached server."""

    name = "memcached"

    def __init__(self, url: str, *, timeout: float = 2.0):
        self.url, self.timeout = url, timeout
        self.host, self.port, _ = host_port(url, DEFAULT_PORT)
        try:
            from pymemcache.client.base import PooledClient
        except ImportError:
            raise missing_extra("pymemcache", "memcached", "memcached://") from None
        self.client = PooledClient(
            (self.host, self.port),
            connect_timeout=timeout,
            timeout=timeout,
            no_delay=True,
            default_noreply=False,
        )

    @property
    def location(self) -> str:
        return f"memcached://{self.host}:{self.port}"

    def get(self, key: str) -> bytes | None:
        data = self.client.get(PREFIX + key)
        return data if isinstance(data, bytes) else None

    def put(self, key: str, data: bytes) -> None:
        from pymemcache.exceptions import MemcacheServerError

        try:
            self.client.set(PREFIX + key, data, expire=0)
        except MemcacheServerError as e:  # "object too large for cache": not stored, no failure
            if "too large" not in str(e):
                raise

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """One multi-key ``get`` per batch (memcached answers the keys it holds)."""
        keys = list(keys)
        found = {}
        for start in range(0, len(keys), BATCH):
            named = {PREFIX + key: key for key in keys[start : start + BATCH]}
            for name, data in self.client.get_many(list(named)).items():
                if isinstance(data, bytes):
                    found[named[name]] = data
        return found

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """``set_many`` per batch; a batch the server refuses as too large goes one by one, so
        only the entries over the item size are skipped."""
        from pymemcache.exceptions import MemcacheServerError

        pairs = list(items.items())
        for start in range(0, len(pairs), BATCH):
            batch = pairs[start : start + BATCH]
            try:
                self.client.set_many({PREFIX + k: v for k, v in batch}, expire=0)
            except MemcacheServerError as e:
                if "too large" not in str(e):
                    raise
                for key, data in batch:
                    self.put(key, data)

    def delete(self, key: str) -> None:
        self.client.delete(PREFIX + key)

    def _metadump(self) -> bytes:
        """The server's answer to ``lru_crawler metadump all``: a line per item, then END."""
        with socket.create_connection((self.host, self.port), timeout=self.timeout) as conn:
            conn.sendall(b"lru_crawler metadump all\r\n")
            buf = b""
            while not (buf.endswith(b"END\r\n") or buf.startswith((b"ERROR", b"BUSY"))):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return buf

    def _keys(self) -> list[str]:
        """Every entry's memcached key, from the server's LRU crawler (which serves one dump at
        a time: BUSY is asked again, for up to about ``timeout`` seconds)."""
        for _ in range(max(1, int(self.timeout / 0.05))):
            buf = self._metadump()
            if not buf.startswith(b"BUSY"):
                break
            time.sleep(0.05)
        if not buf.endswith(b"END\r\n"):
            raise RemoteError(f"{self.location} cannot list its keys ({buf[:60]!r})")
        keys = []
        for line in buf.decode("ascii", "replace").splitlines():
            field = line.partition(" ")[0]
            if field.startswith("key="):
                name = unquote(field[4:])
                if name.startswith(PREFIX):
                    keys.append(name)
        return keys

    def clear(self) -> int:
        """Remove every cupy-rawcode entry on the server (every user's: the store is shared)."""
        removed = 0
        for name in self._keys():
            removed += bool(self.client.delete(name))
        return removed

    def __len__(self) -> int:
        return len(self._keys())

    def close(self) -> None:
        """Close the pooled connections; the next call opens new ones."""
        self.client.close()
