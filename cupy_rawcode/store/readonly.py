"""Read-only stores: ``RefusingStore``, whose put, delete and clear are refused (counted in
``refused``), never raising (a bundle is one), and ``ReadOnly(store)``, any store made so, as a
``|read-only`` remote spec asks (urls.py). Off a warm hit's path: a default stack has no
read-only level unless bundles are configured."""

from __future__ import annotations

from collections.abc import Iterable

from .base import Store


def refuse(store: Store) -> None:
    """Count one write refused by a read-only store (a compile never fails on a store write)."""
    store.refused += 1


class RefusingStore(Store):
    """A read-only store: put, delete and clear are refused and counted, never raising (a
    compile goes on without storing). A bundle, or ``ReadOnly`` around another store."""

    read_only = True

    def put(self, key: str, data: bytes) -> None:
        """Refused: the store is read-only."""
        refuse(self)

    def delete(self, key: str) -> None:
        """Refused: the store is read-only."""
        refuse(self)

    def clear(self) -> int:
        """Refused: the store is read-only; nothing is removed."""
        refuse(self)
        return 0


class ReadOnly(RefusingStore):
    """``inner`` with put, delete and clear refused (counted in ``refused``), never raising:
    a compile goes on without storing, as it does on a read-only disk."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.name = f"{inner.name} (read-only)"
        self.on_disk, self.lasting = inner.on_disk, inner.lasting

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

    def tallied(self) -> bool:
        return self.inner.tallied()

    def failures(self) -> dict[str, int]:
        return self.inner.failures()
