"""store.uncounted: reads that are no look-ups of a kernel (a closure record, a maintenance
command's listing) change no count `cache stats` shows, in this thread only: another thread's
counts made meanwhile are kept."""

from __future__ import annotations

import threading

import pytest

from cupy_rawcode.store import Levels, MemoryStore, counters, open_store, uncounted
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import encode

KEY = "ab" * 32


@pytest.fixture(autouse=True)
def _fresh_tallies():
    counters.zero_tallies()
    yield
    counters.zero_tallies()


def _levels(tmp_path) -> Levels:
    return Levels([open_store("memory:"), DirectoryStore(tmp_path / "c")])


def _snapshot(levels: Levels) -> list:
    return [dict(counters.tally(n)) for n in ("memory", "disk")] + [dict(c) for c in levels.counts]


@pytest.mark.parametrize(
    "what",
    ["get a miss", "put then get", "fetch a hit", "record a miss", "record a hit"],
)
def test_nothing_done_uncounted_is_counted(tmp_path, what):
    levels = _levels(tmp_path)
    data = encode(KEY, b"code" * 100, {"compile_seconds": 1.0})
    before = _snapshot(levels)
    with uncounted():
        if what == "get a miss":
            assert levels.get(KEY) is None
        elif what == "put then get":
            levels.put(KEY, data)
            assert levels.get(KEY) == data
        elif what == "fetch a hit":
            levels.put(KEY, data)
            assert levels.fetch(KEY) is not None
        else:
            levels.record(what == "record a hit")
    assert _snapshot(levels) == before
    assert levels.level("disk").counts() in (None, (0, 0))  # no hit or miss written


def test_counting_resumes_after_the_block_and_blocks_nest(tmp_path):
    levels = _levels(tmp_path)
    with uncounted():
        with uncounted():
            levels.get(KEY)
        levels.get(KEY)
    assert counters.tally("memory")["misses"] == 0
    levels.get(KEY)
    assert counters.tally("memory")["misses"] == 1
    assert levels.counts[0]["misses"] == 1


def test_another_threads_counts_made_meanwhile_are_kept():
    store = MemoryStore()
    inside, done = threading.Event(), threading.Event()

    def reader() -> None:
        with uncounted():
            inside.set()
            done.wait(10)
            store.get(KEY)

    t = threading.Thread(target=reader)
    t.start()
    assert inside.wait(10)
    store.get(KEY)  # this thread counts, while the other one is uncounted
    done.set()
    t.join()
    assert counters.tally("memory")["misses"] == 1
