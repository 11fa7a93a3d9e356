"""Levels and ReadOnly beyond the contract: write-back, per-level counts, read-only levels."""

from __future__ import annotations

import pytest

from cupy_rawcode.store import Levels, ReadOnly, Store
from cupy_rawcode.store.entry import encode
from cupy_rawcode.store.memory import MemoryStore

KEY = "ab" * 32


def _entry(tag: str = "") -> bytes:
    return encode(KEY, f"code {tag}".encode(), {})


def test_a_hit_below_is_written_back_to_the_writable_levels_above():
    top, middle, bottom = MemoryStore(), ReadOnly(MemoryStore()), MemoryStore()
    bottom.put(KEY, _entry())
    levels = Levels([top, middle, bottom])
    assert levels.find(KEY, lambda data: data) == (_entry(), "memory")
    assert top.get(KEY) == _entry()  # copied up
    assert middle.inner.get(KEY) is None and middle.refused == 0  # read-only: never asked
    assert [(c["hits"], c["misses"], c["writes"]) for c in levels.counts] == [
        (0, 1, 1),
        (0, 1, 0),
        (1, 0, 0),
    ]
    assert levels.get(KEY) == _entry()
    assert levels.counts[0]["hits"] == 1


def test_a_put_goes_to_every_writable_level_and_counts_writes():
    first, frozen, last = MemoryStore(), ReadOnly(MemoryStore()), MemoryStore()
    levels = Levels([first, frozen, last])
    levels.put(KEY, _entry())
    assert first.get(KEY) == last.get(KEY) == _entry() and frozen.get(KEY) is None
    assert [c["writes"] for c in levels.counts] == [1, 0, 1]
    assert not levels.read_only and Levels([frozen]).read_only


def test_a_broken_level_counts_an_error_and_the_next_level_answers(caplog):
    broken, good = MemoryStore(), MemoryStore()
    broken.put(KEY, b"garbage")
    good.put(KEY, _entry())
    levels = Levels([broken, good])
    assert levels.get(KEY) == _entry()
    assert levels.counts[0]["errors"] == 1 and levels.counts[1]["hits"] == 1
    assert broken.get(KEY) == _entry()  # the good entry replaced the broken one
    assert "ignoring a broken cache entry" in caplog.text


def test_a_miss_counts_in_every_level():
    levels = Levels([MemoryStore(), MemoryStore()])
    assert levels.get(KEY) is None and levels.fetch(KEY) is None
    assert [c["misses"] for c in levels.counts] == [2, 2]


def test_levels_take_stores_only():
    class Duck:
        def get(self, key):
            return None

    with pytest.raises(TypeError, match="must be a Store, not Duck"):
        Levels([MemoryStore(), Duck()])  # type: ignore[list-item]


def test_read_only_names_the_store_it_wraps():
    inner = MemoryStore()
    wrapped = ReadOnly(inner)
    assert isinstance(wrapped, Store) and wrapped.read_only and not inner.read_only
    assert wrapped.name == "memory (read-only)" and wrapped.location == inner.location


@pytest.mark.parametrize(
    "failures, errors, timeouts",
    [
        ({"errors": 2, "timeouts": 1}, 2, 1),
        ({"errors": "2", "timeouts": -1}, 0, 0),  # not a count: nothing added
        ({"bogus": 5}, 0, 0),  # not a count Levels keeps: left out, never a KeyError
    ],
)
def test_a_levels_stats_adds_the_failures_a_store_counts_itself(failures, errors, timeouts):
    class Counting(MemoryStore):
        def failures(self):
            return failures

    (row,) = Levels([Counting(4)]).stats()["levels"]
    assert (row["errors"], row["timeouts"]) == (errors, timeouts) and "bogus" not in row


def test_kept_looks_past_memory():
    key = KEY
    memory, disk = MemoryStore(4), MemoryStore(4)
    disk.name, disk.lasting = "disk", True  # a level that outlives the process
    memory.put(key, encode(key, b"code", {}))
    store = Levels([memory, disk])
    assert not store.kept(key)
    disk.put(key, encode(key, b"code", {}))
    assert store.kept(key)
    disk.put(key, b"garbage")
    assert not store.kept(key)
    assert Levels([memory]).kept(key)  # nothing lasting to keep it in


def test_set_store_takes_a_single_store_as_one_level():
    from cupy_rawcode.store import default_store, set_store

    only = MemoryStore()
    set_store(only)
    try:
        assert isinstance(default_store(), Levels) and default_store().levels == [only]
    finally:
        set_store(None)


def test_stats_are_plain_data_per_level_in_order():
    import json

    top, bottom = MemoryStore(), ReadOnly(MemoryStore())
    bottom.inner.put(KEY, _entry())
    levels = Levels([top, bottom])
    assert levels.get(KEY) == _entry() and levels.get("ef" * 32) is None
    rows = json.loads(json.dumps(levels.stats()))["levels"]
    size = len(_entry())
    assert rows == [
        {"level": "memory", "location": "memory:", "read_only": False, "hits": 0, "misses": 2,
         "errors": 0, "timeouts": 0, "writes": 1, "bytes_read": 0, "bytes_written": size},
        {"level": "memory (read-only)", "location": "memory:", "read_only": True, "hits": 1,
         "misses": 1, "errors": 0, "timeouts": 0, "writes": 0, "bytes_read": size,
         "bytes_written": 0},
    ]  # fmt: skip


class _OnDisk(MemoryStore):
    """A level on this machine's disk (a cache directory, a bundle), kept in memory here."""

    on_disk = True


@pytest.mark.parametrize(
    "hit_in, copied_to",
    [
        (3, {0, 1}),  # a remote level's hit: to memory and to the cache directory
        (2, {0}),  # a bundle's hit: to memory only, the disk is no faster to read
        (1, {0}),  # the cache directory's hit: to memory
    ],
)
def test_a_hit_is_copied_to_the_nearer_levels_that_are_faster(hit_in, copied_to):
    stores = [MemoryStore(), _OnDisk(), ReadOnly(_OnDisk()), MemoryStore()]
    holder = stores[hit_in].inner if isinstance(stores[hit_in], ReadOnly) else stores[hit_in]
    holder.put(KEY, _entry())
    levels = Levels(stores)
    assert levels.find(KEY, lambda data: data)[0] == _entry()
    assert {i for i in range(hit_in) if stores[i].get(KEY) is not None} == copied_to
    assert ReadOnly(_OnDisk()).on_disk
