"""An in-process LRU of entry bytes, in front of the disk. It keeps the bytes as they are
stored (a compressed entry stays compressed: a memory hit decompresses again, about 10 us for
a small cubin, where keeping them plain would cost a second encode on every backfill)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from .base import Store
from .tally import tally


class MemoryStore(Store):
    """The ``max_entries`` most recently used entries of this process (``memory:``)."""

    name = "memory"

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.tally = tally(self.name)  # this process's reads and writes (counters.py)

    @property
    def location(self) -> str:
        return "memory:"

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._data.get(key)
            if data is None:
                self.tally["misses"] += 1
                return None
            self._data.move_to_end(key)
            self.tally["hits"] += 1
            self.tally["bytes_read"] += len(data)
            return data

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self.tally["writes"] += 1
            self.tally["bytes_written"] += len(data)
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
