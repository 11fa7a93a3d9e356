"""``ReadOnly(store)``: any store with put, delete and clear refused (counted in ``refused``),
never raising, as a ``|read-only`` remote spec asks (urls.py). Off a warm hit's path: a default
stack has no read-only wrapper."""

from __future__ import annotations

from collections.abc import Iterable

from .base import RefusingStore, Store


class ReadOnly(RefusingStore):
    """``inner`` with put, delete and clear refused (counted in ``refused``), never raising:
    a compile goes on without storing, as it does on a read-only disk."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.name = f"{inner.name} (read-only)"
        self.on_disk = inner.on_disk

    @property
    def location(self) -> str:
        return self.inner.location

    def get(self, key: str) -> bytes | None:
        return self.inner.get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        return self.inner.get_many(keys)

    def sizes(self, keys: Iterable[str]) -> dict[str, int] | None:
        return self.inner.sizes(keys)

    def __len__(self) -> int:
        return len(self.inner)

    def up(self) -> bool:
        return self.inner.up()

    def close(self) -> None:
        self.inner.close()
