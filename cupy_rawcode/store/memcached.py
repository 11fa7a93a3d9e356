"""A shared store on memcached (``memcached://host[:port]``, port 11211 by default).

Values are entry bytes (entry.py) under ``PREFIX + key``, never expiring (memcached's own LRU
evicts). A failed call, or one past the timeout (the whole call's deadline: remote.within),
raises; the Levels holding the store skips it (remote.py). An entry larger than the server's
item size (1 MiB by default, 1 GiB at most: memcached refuses a larger ``-I``) is not stored: a
skipped write, which ``put`` answers False (not counted as a write). That item size also bounds
what a read accepts. Counting and clearing list the keys with ``lru_crawler metadump all``
(memcached 1.4.31 and later), since the protocol has no other way to list them. Needs
``pymemcache`` (extra ``memcached``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from .base import Store
from .remote import (
    LIMIT,
    Connections,
    RemoteError,
    checked_key,
    host_port,
    missing_extra,
    shut,
    too_large,
    within,
)

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
            from pymemcache.client.base import Client
        except ImportError:
            raise missing_extra("pymemcache", "memcached", "memcached://") from None

        def connect() -> Any:
            return Client(
                (self.host, self.port),
                connect_timeout=timeout,
                timeout=timeout,
                no_delay=True,
                default_noreply=False,
            )

        self.connections = Connections(connect)  # a client per call at a time, kept open

    @property
    def location(self) -> str:
        return f"memcached://{self.host}:{self.port}"

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The client's ``method(*args, **kwargs)`` on an idle client, within the timeout
        (the whole call)."""
        return self.connections.use(
            self.timeout, lambda client, _aborted: getattr(client, method)(*args, **kwargs)
        )

    def get(self, key: str) -> bytes | None:
        name = PREFIX + checked_key(key)
        data = self._call("get", name)
        return data if isinstance(data, bytes) else None

    def put(self, key: str, data: bytes) -> bool:
        """Store the entry; False when the server refuses it as larger than its item size (a
        skipped write, no failure)."""
        from pymemcache.exceptions import MemcacheServerError

        name = PREFIX + checked_key(key)
        try:
            self._call("set", name, data, expire=0)
        except MemcacheServerError as e:  # "object too large for cache": not stored, no failure
            if "too large" not in str(e):
                raise
            return False
        return True

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """One multi-key ``get`` per batch (memcached answers the keys it holds)."""
        keys = list(keys)
        found = {}
        for start in range(0, len(keys), BATCH):
            named = {PREFIX + checked_key(key): key for key in keys[start : start + BATCH]}
            asked = list(named)
            answer = self._call("get_many", asked)
            for name, data in answer.items():
                if isinstance(data, bytes):
                    found[named[name]] = data
        return found

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """``set_many`` per batch; a batch the server refuses as too large goes one by one, so
        only the entries over the item size are skipped."""
        from pymemcache.exceptions import MemcacheServerError

        pairs = list(items.items())
        for start in range(0, len(pairs), BATCH):
            batch = {PREFIX + checked_key(k): v for k, v in pairs[start : start + BATCH]}
            try:
                self._call("set_many", batch, expire=0)
            except MemcacheServerError as e:
                if "too large" not in str(e):
                    raise
                for key, data in pairs[start : start + BATCH]:
                    self.put(key, data)

    def delete(self, key: str) -> None:
        name = PREFIX + checked_key(key)
        self._call("delete", name)

    def _metadump(self) -> bytes:
        """The server's answer to ``lru_crawler metadump all``: a line per item, then END
        (within the timeout, and up to remote.LIMIT bytes)."""
        conn = socket.create_connection((self.host, self.port), timeout=self.timeout)

        def call() -> bytes:
            buf = bytearray()
            conn.sendall(b"lru_crawler metadump all\r\n")
            while not (buf.endswith(b"END\r\n") or buf.startswith((b"ERROR", b"BUSY"))):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > LIMIT:
                    raise too_large(len(buf), f"{self.location} listing")
            return bytes(buf)

        with conn:
            return within(self.timeout, call, lambda: shut(conn))

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
            removed += bool(self._call("delete", name))
        return removed

    def __len__(self) -> int:
        return len(self._keys())

    def close(self) -> None:
        """Close the idle connections; the next call opens new ones."""
        self.connections.close()
