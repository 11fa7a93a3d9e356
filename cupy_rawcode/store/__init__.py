"""Storage: bytes in, bytes out. Backends implement ``get(key) -> bytes | None`` and
``put(key, data)``; entry.py turns compiled code + JSON metadata into self-validating bytes."""
from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger("cupy_rawcode")


class Backend(Protocol):
    name: str

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, data: bytes) -> None: ...


class Layered:
    """Memory in front of disk (and later shared stores): read-through, write to every layer."""

    def __init__(self, layers: list[Backend]):
        self.layers = layers

    def get(self, key: str, validate) -> tuple[object, str] | None:
        """(decoded entry, layer name) from the first layer holding a valid entry."""
        from .entry import EntryError
        for i, layer in enumerate(self.layers):
            data = layer.get(key)
            if data is None:
                continue
            try:
                value = validate(data)
            except EntryError as e:
                log.warning("cupy-rawcode: ignoring a broken cache entry %s in %s (%s); recompiling",
                            key[:16], layer.name, e)
                continue
            for upper in self.layers[:i]:
                upper.put(key, data)
            return value, layer.name
        return None

    def put(self, key: str, data: bytes) -> None:
        for layer in self.layers:
            layer.put(key, data)
