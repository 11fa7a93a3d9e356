"""A worker's reply of another shape than the pool expects (a key that is no cache key, a number
that is not one, no object at all) fails its own task with a WorkerError; the pool goes on with
the others and never raises for it."""

import os

import pytest

from cupy_rawcode.parallel import pool
from cupy_rawcode.parallel.task import Task
from cupy_rawcode.store import set_store
from cupy_rawcode.store.memory import MemoryStore

GOOD = {"key": "0" * 64, "hit": True, "seconds": 0.1}
REPLIES = {
    "a key that is no cache key": {"key": "../x", "hit": False, "entries": {}},
    "a key that is a number": {"key": 5, "hit": False, "entries": {"a": "AAAA"}},
    "seconds that are words": {"key": "0" * 64, "seconds": "fast"},
    "entries of another shape": {"key": "0" * 64, "hit": False, "entries": {"k": 3}},
}


class _FakeWorker:
    """A worker that answers each task with the reply its test gives."""

    replies: list = []

    def __init__(self, hello):
        self.proc = type("P", (), {"pid": os.getpid(), "poll": lambda self: None})()

    def send(self, message):
        self.id = message["id"]

    def receive(self):
        return {"id": self.id, **_FakeWorker.replies[self.id]}

    def death(self):
        return "WorkerError: gone"

    def close(self):
        pass


@pytest.mark.parametrize("name", REPLIES)
def test_a_malformed_reply_fails_its_task_alone(monkeypatch, name):
    monkeypatch.setattr(pool, "_Worker", _FakeWorker)
    set_store(MemoryStore())  # a store of the program's: entries come back to be stored
    try:
        monkeypatch.setattr(_FakeWorker, "replies", [dict(REPLIES[name]), dict(GOOD)])
        tasks = [Task(f"int x{i};", arch="sm_90") for i in range(2)]
        first, second = pool.run(tasks, 1)
    finally:
        set_store(None)
    assert second.error is None and second.hit
    if name != "entries of another shape":  # skipped entry by entry: the task itself stands
        assert first.error is not None and first.error.startswith("WorkerError")
