"""A lock of the cache held by another process never hangs cupy-rawcode: a reader of an entry
locked exclusively misses at once, the ledger's and the prune lock's waits end within their
deadlines (ground/locks.py), and a child made by fork never keeps its parent's lock."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import recounts_done

from cupy_rawcode.ground import locks
from cupy_rawcode.store import eviction, ledger
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import encode

KEY = "ab" * 32


@pytest.fixture
def cache(tmp_path):
    store = DirectoryStore(tmp_path / "cache")
    store.put(KEY, encode(KEY, b"code" * 100, {}))
    recounts_done()
    return store


def _held(path, how=fcntl.LOCK_EX) -> int:
    """An fd of ``path`` locked as another process would (flock locks are per open file)."""
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, how)
    return fd


def test_an_entry_locked_exclusively_is_a_miss_at_once(cache, recwarn):
    fd = _held(cache.path(KEY))
    try:
        start = time.monotonic()
        assert cache.get(KEY) is None
        assert time.monotonic() - start < 0.5
    finally:
        os.close(fd)
    assert cache.get(KEY) is not None  # released: a hit again
    assert not recwarn.list  # a removal's instant, or a stranger's lock: no warning


def test_the_ledgers_lock_held_elsewhere_ends_in_a_timeout(cache, monkeypatch):
    monkeypatch.setattr(locks, "SHORT", 0.2)
    ledger._ledger(cache.root, lambda t, s: (t, s))  # made
    fd = _held(cache.root / "stats" / "size")
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            ledger._ledger(cache.root, lambda t, s: (t, s))
        with pytest.raises(TimeoutError), ledger.locked(cache.root):
            pass
        assert time.monotonic() - start < 2.0
    finally:
        os.close(fd)


def test_the_prune_lock_held_elsewhere_gives_up_within_its_deadline(cache, monkeypatch):
    monkeypatch.setattr(locks, "LONG", 0.2)
    fd = _held(cache.root)
    try:
        start = time.monotonic()
        assert eviction.prune(cache.root, 1) is None  # another prunes: nothing done here
        assert time.monotonic() - start < 2.0
    finally:
        os.close(fd)
    assert eviction.prune(cache.root, 1).files >= 1


def test_an_entry_being_read_is_kept_by_a_waiting_removal_within_its_deadline(cache, monkeypatch):
    monkeypatch.setattr(locks, "LONG", 0.2)
    [entry] = [f for f in eviction.scan(cache.root).files if f.kind == "entries"]
    fd = _held(cache.path(KEY), fcntl.LOCK_SH)
    try:
        assert isinstance(eviction.remove(entry, wait=True), TimeoutError)
        assert eviction.remove(entry) is eviction._BUSY  # a prune's: kept, nothing to report
        with pytest.raises(OSError, match=str(cache.path(KEY))):
            cache.clear()  # a clear names what it could not remove
    finally:
        os.close(fd)
    assert cache.get(KEY) is not None
    assert cache.clear() == 1


def test_cache_prune_says_another_process_prunes(cache, monkeypatch, capsys):
    from cupy_rawcode import cli

    monkeypatch.setattr(locks, "LONG", 0.2)
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(cache.root))
    fd = _held(cache.root)
    try:
        status = cli.main(["cache", "prune", "--max-size", "1K"])
    finally:
        os.close(fd)
    err = capsys.readouterr().err
    assert status not in (0, None) and "another process holds its prune lock" in err, err
    assert "Traceback" not in err


def test_a_forked_child_never_keeps_its_parents_prune_lock(cache, monkeypatch):
    monkeypatch.setattr(locks, "LONG", 3.0)  # the child closes its copy once it runs
    lock = eviction._lock(cache.root, wait=False)
    assert isinstance(lock, int)
    child = os.fork()
    if child == 0:  # the child lives on, as a worker forked mid-scan would
        time.sleep(5)
        os._exit(0)
    try:
        locks.release(lock)
        again = eviction._lock(cache.root, wait=True)
        assert isinstance(again, int), "the child still holds the lock"
        locks.release(again)
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)


EXIT = """\
import sys, time
from cupy_rawcode.store.directory import DirectoryStore
store = DirectoryStore(sys.argv[1])
assert store.get(sys.argv[2]) is not None
print("HIT", flush=True)
"""


def test_a_hit_exits_promptly_while_the_ledger_is_held_elsewhere(cache):
    """The exit's counts wait locks.SHORT for the ledger, then give up: best effort."""
    fd = _held(cache.root / "stats" / "size")
    try:
        start = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(EXIT), str(cache.root), KEY],
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - start
    finally:
        os.close(fd)
    assert run.returncode == 0 and run.stdout.split() == ["HIT"], run.stderr
    assert took < locks.SHORT + 10
