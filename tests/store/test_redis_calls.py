"""The Redis level's calls one by one: a call past its deadline closes its own connection only
(another thread's call that answers in time still succeeds), a key under the prefix that holds
no string is a miss of that key alone, and a key deleted between its STRLEN and its GETRANGE is a
miss, never an empty hit."""

from __future__ import annotations

import socket
import threading
import time
import warnings

import pytest

from cupy_rawcode.store import redis as redis_module
from cupy_rawcode.store.entry import encode
from cupy_rawcode.store.redis import PREFIX, RedisStore

KEYS = [f"{i + 0xC0FFEE:064x}" for i in range(40)]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Every warn-once speaks again in each test."""
    from cupy_rawcode.ground import log

    monkeypatch.setattr(log, "_said", set())


def entry(key: str) -> bytes:
    return encode(key, b"code " * 16, {"arch": "sm_90"})


class SlowProxy:
    """A TCP proxy on loopback to ``port``: once its n-th connection has asked a GETRANGE or an
    MGET (its handshake is done), its next answer is held back ``delays[n]`` seconds (a slow
    path for that connection alone; once, however many reads the answer takes)."""

    def __init__(self, port: int, delays: list[float]):
        self.port_to, self.delays, self.count = port, delays, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            delay = self.delays[self.count] if self.count < len(self.delays) else 0.0
            self.count += 1
            server = socket.create_connection(("127.0.0.1", self.port_to))
            asked = threading.Event()
            threading.Thread(target=_pipe, args=(client, server, 0.0, asked), daemon=True).start()
            threading.Thread(target=_pipe, args=(server, client, delay, asked), daemon=True).start()

    def close(self) -> None:
        self.sock.close()


def _pipe(source: socket.socket, sink: socket.socket, delay: float, asked: threading.Event) -> None:
    """Bytes from ``source`` to ``sink``: the client's side sets ``asked`` at its first GETRANGE
    or MGET, the server's side holds the next answer back ``delay`` seconds."""
    held = False
    try:
        while data := source.recv(65536):
            if b"GETRANGE" in data.upper() or b"MGET" in data.upper():
                asked.set()
            if asked.is_set() and not held:
                time.sleep(delay)
                held = True
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_a_deadline_closes_its_own_connection_not_another_threads(redis_server):
    redis_server.client.mset({PREFIX + key: entry(key) for key in KEYS})
    # thread A's connection (the first) answers after 8 s, past its 4 s deadline; thread B's
    # (the second) after 2 s: B's call is in flight when A's deadline passes (1 s either side),
    # and answered 2 s before its own (margins a loaded CI host keeps)
    proxy = SlowProxy(redis_server.port, [8.0, 2.0])
    store = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", timeout=4.0)
    got: dict = {}

    def a() -> None:
        got["A"] = store.get(KEYS[0])

    def b() -> None:
        time.sleep(3.0)
        got["B"] = store.get_many(KEYS[1:])
        got["B at"] = time.monotonic()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    proxy.close()
    assert got["A"] is None and store.timeouts == 1
    assert got["B at"] - start > 4.0  # B's answer came after A's deadline passed
    assert store.errors == 0 and got["B"] == {key: entry(key) for key in KEYS[1:]}


def test_a_deadline_leaves_the_callers_own_client_alone(redis_server):
    import redis

    redis_server.client.mset({PREFIX + key: entry(key) for key in KEYS})
    proxy = SlowProxy(redis_server.port, [5.0, 1.0])  # the store's call, then the application's
    app = redis.Redis.from_url(f"redis://127.0.0.1:{proxy.port}/0", socket_timeout=10)
    store = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", timeout=2.0, client=app)
    got: dict = {}

    def application() -> None:
        time.sleep(1.5)
        got["app"] = app.mget([PREFIX + key for key in KEYS[1:]])
        got["at"] = time.monotonic()

    thread = threading.Thread(target=application)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.monotonic()
        thread.start()
        assert store.get(KEYS[0]) is None and store.timeouts == 1
        thread.join()
    proxy.close()
    assert got["at"] - start > 2.0 and got["app"] == [entry(key) for key in KEYS[1:]]


def test_a_key_that_holds_no_string_is_a_miss_of_that_key_alone(redis_server):
    redis_server.client.mset({PREFIX + key: entry(key) for key in KEYS[1:]})
    redis_server.client.rpush(PREFIX + KEYS[0], b"x")  # another tool's list under the prefix
    store = RedisStore(redis_server.url, timeout=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no failure is warned
        assert store.get_many(KEYS) == {key: entry(key) for key in KEYS[1:]}
        assert store.get(KEYS[0]) is None and store.get(KEYS[1]) == entry(KEYS[1])
        assert store.sizes(KEYS) == {key: len(entry(key)) for key in KEYS[1:]}
    assert store.failures() == {"errors": 0, "timeouts": 0} and store.up()


def test_the_other_calls_still_work_on_a_connection_of_their_own(redis_server):
    store = RedisStore(redis_server.url, timeout=2.0)
    store.put_many({key: entry(key) for key in KEYS[:3]})
    store.put(KEYS[3], entry(KEYS[3]))
    assert len(store) == 4
    store.delete(KEYS[0])
    assert store.get(KEYS[0]) is None and store.clear() == 3 and len(store) == 0
    assert store.failures() == {"errors": 0, "timeouts": 0}


class CannedPipeline:
    """A pipeline that answers what it is given, whatever was asked."""

    def __init__(self, answers: list):
        self.answers, self.connection_pool = answers, None

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None  # strlen, getrange: queued

    def execute(self, raise_on_error: bool = True) -> list:
        return self.answers


class CannedClient:
    def __init__(self, answers: list):
        self.answers = answers

    def pipeline(self, transaction: bool = True) -> CannedPipeline:
        return CannedPipeline(self.answers)


def test_a_key_deleted_between_its_length_and_its_bytes_is_a_miss():
    store = RedisStore("redis://127.0.0.1:1/0", client=CannedClient([120, b""]))
    assert store.get(KEYS[0]) is None and store.errors == 0


def test_an_answer_past_the_bound_read_after_a_small_length_still_fails(monkeypatch):
    monkeypatch.setattr(redis_module, "LIMIT", 100)
    store = RedisStore("redis://127.0.0.1:1/0", client=CannedClient([10, b"y" * 101]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert store.get(KEYS[0]) is None
    assert store.errors == 1  # replaced by a larger value between the two commands
