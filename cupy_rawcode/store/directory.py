"""The default store: one file per key under a 0700 directory, published atomically."""
from __future__ import annotations

import os
from pathlib import Path

from ..fsutil import atomic_write
from . import log

_warned = False


class DirectoryStore:
    name = "disk"

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / key

    def get(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except OSError:
            return None

    def put(self, key: str, data: bytes) -> None:
        global _warned
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(self.path(key), data)
        except OSError as e:
            if not _warned:  # read-only or full: compiling goes on from memory
                _warned = True
                log.warning("cupy-rawcode: cannot write the cache at %s (%s); "
                            "kernels are kept in memory only", self.root, e.strerror or e)
