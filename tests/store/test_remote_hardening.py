"""Remote levels against servers that misbehave: one that drips its answer a byte at a time (the
timeout is the deadline of the whole call), one that answers more than an entry can be (read up
to the bound, never whole), Ctrl-C during a bulk call, foreign objects in an S3 prefix, S3's 403
for a missing object, credentials in messages, per-level counts of Redis and memcached, Redis's
warning, and keys that are no cache keys. The misbehaving servers are small socket servers on
loopback in this file; the well-behaved ones are servers.py's and conftest.py's."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable

import pytest
from conftest import free_port
from servers import memcached_server, s3_server  # noqa: F401  (fixtures)

from cupy_rawcode.ground.errors import RawcodeError
from cupy_rawcode.store import Levels, MemoryStore, make_store, open_remote, open_store
from cupy_rawcode.store import remote as remote_module
from cupy_rawcode.store.base import tally
from cupy_rawcode.store.entry import encode
from cupy_rawcode.store.remote import RemoteError, RemoteLevelWarning, redacted, warn_failed

KEY = "ab" * 32
OTHER = "cd" * 32
DEADLINE = 1.0  # the remote timeout the slow servers are given
WAIT = 6.0  # generous: a call bounded by DEADLINE returns well within it
SMALL_LIMIT = 1 << 20  # the size bound, made small: answers of a few MiB are over it


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Every warn-once speaks again in each test."""
    from cupy_rawcode.ground import log

    monkeypatch.setattr(log, "_said", set())


def _entry(key: str = KEY) -> bytes:
    return encode(key, b"code " * 16, {"arch": "sm_90"})


class FakeServer:
    """A TCP server on loopback running ``handler(conn, stop)`` per connection on a daemon
    thread; ``stop`` is set when the test ends, which every handler heeds."""

    def __init__(self, handler: Callable[[socket.socket, threading.Event], None]):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.handler, self.stop = handler, threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.handler(conn, self.stop)
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def serve():
    """``serve(handler)``: a FakeServer, closed after the test."""
    made: list[FakeServer] = []

    def start(handler):
        made.append(FakeServer(handler))
        return made[-1]

    yield start
    for server in made:
        server.close()


def _http_request(conn: socket.socket) -> bytes:
    """One HTTP request's head (and body, by its Content-Length)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return buf
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head


def _drip(conn: socket.socket, head: bytes, stop: threading.Event) -> None:
    """Send ``head``, then one byte every 0.2 s (each well within a socket timeout)."""
    conn.sendall(head)
    while not stop.wait(0.2):
        conn.sendall(b"x")


def _drip_http(conn, stop):
    _http_request(conn)
    _drip(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n", stop)


def _drip_memcached(conn, stop):
    line = b""
    while not line.endswith(b"\r\n"):
        line += conn.recv(1)
    _drip(conn, b"VALUE " + line.split()[1] + b" 0 10000000\r\n", stop)


def _drip_redis(conn, stop):
    """A Redis server (RESP) that answers the handshake, then drips a value."""
    f = conn.makefile("rb")
    while True:
        first = f.readline()
        if not first:
            return
        args = []
        for _ in range(int(first[1:])):
            n = int(f.readline()[1:])
            args.append(f.read(n + 2)[:-2])
        command = args[0].upper()
        if command == b"HELLO":  # RESP3
            conn.sendall(b"%2\r\n$5\r\nproto\r\n:3\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n")
        elif command == b"STRLEN":
            conn.sendall(b":10000000\r\n")
        elif command in (b"GET", b"GETRANGE", b"MGET"):
            _drip(conn, b"$10000000\r\n", stop)
            return
        else:
            conn.sendall(b"+OK\r\n")


def _drip_s3(conn, stop):
    _http_request(conn)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n"
    _drip(conn, head + b"Content-Type: application/octet-stream\r\n\r\n", stop)


DRIPPERS = {
    "http": (_drip_http, "http://127.0.0.1:{port}/cache"),
    "memcached": (_drip_memcached, "memcached://127.0.0.1:{port}"),
    "redis": (_drip_redis, "redis://127.0.0.1:{port}/0"),
    "s3": (_drip_s3, "s3://kernels/cache"),
}


def _s3_env(monkeypatch, port: int) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def _bounded(call: Callable[[], object], seconds: float = WAIT) -> tuple[dict, float]:
    """Run ``call`` on a daemon thread; (its result or error, seconds it took), or fail when
    it has not returned within ``seconds`` (the thread is left: a hang must not hang the run)."""
    out: dict = {}

    def run():
        try:
            out["value"] = call()
        except BaseException as e:
            out["error"] = e

    t0 = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    took = time.monotonic() - t0
    assert not thread.is_alive(), f"still blocked after {took:.1f} s"
    return out, took


# 1. the timeout is a deadline for the whole call


@pytest.mark.parametrize("backend", list(DRIPPERS))
def test_a_server_dripping_its_answer_costs_one_deadline(
    backend, serve, tmp_path, monkeypatch, request
):
    pytest.importorskip(
        {"http": "http", "memcached": "pymemcache", "redis": "redis"}.get(backend, "boto3")
    )
    handler, url = DRIPPERS[backend]
    server = serve(handler)
    if backend == "s3":
        _s3_env(monkeypatch, server.port)
    store = make_store(
        tmp_path / "c",
        bundles=(),
        redis_url="",
        remote=[url.format(port=server.port)],
        remote_timeout=DEADLINE,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, took = _bounded(lambda: store.get(KEY))
    assert out == {"value": None} and took < WAIT
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert len(said) == 1 and "timed out" in said[0], said
    assert store.stats()["levels"][-1]["timeouts"] == 1


def test_the_deadline_wakes_the_call_it_ends():
    woken = threading.Event()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        remote_module.within(0.2, lambda: woken.wait(30), woken.set)
    assert time.monotonic() - t0 < WAIT
    assert remote_module.within(1.0, lambda: 7, lambda: None) == 7


# 2. an answer is read up to the bound, never whole


def _big_http(conn, stop):
    _http_request(conn)
    body = b"y" * (3 * SMALL_LIMIT)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def _huge_declared_http(conn, stop):
    _http_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\nyyyy")
    stop.wait(30)


def _big_chunked_http(conn, stop):
    _http_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"y" * 65536
    for _ in range(3 * SMALL_LIMIT // len(piece)):
        conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
    conn.sendall(b"0\r\n\r\n")


@pytest.mark.parametrize("handler", [_big_http, _huge_declared_http, _big_chunked_http])
def test_an_http_answer_over_the_bound_is_refused(handler, serve, monkeypatch):
    monkeypatch.setattr(remote_module, "LIMIT", SMALL_LIMIT, raising=False)
    server = serve(handler)
    store = open_store(f"http://127.0.0.1:{server.port}/cache", timeout=5.0)
    out, _ = _bounded(lambda: store.get(KEY))
    assert isinstance(out.get("error"), RemoteError), out
    assert "over the limit" in str(out["error"])


def test_an_s3_object_over_the_bound_is_refused(request, monkeypatch):
    client = request.getfixturevalue("s3_server").client
    monkeypatch.setattr(remote_module, "LIMIT", SMALL_LIMIT, raising=False)
    client.put_object(Bucket="kernels", Key=f"big/{KEY}", Body=b"y" * 3 * SMALL_LIMIT)
    client.put_object(Bucket="kernels", Key=f"big/{OTHER}", Body=_entry(OTHER))
    store = open_store("s3://kernels/big")
    with pytest.raises(RemoteError, match="over the limit"):
        store.get(KEY)
    assert store.get(OTHER) == _entry(OTHER)


def test_a_redis_value_over_the_bound_is_a_failure_not_read_whole(redis_server, monkeypatch):
    from cupy_rawcode.store import redis as redis_module

    monkeypatch.setattr(remote_module, "LIMIT", SMALL_LIMIT, raising=False)
    monkeypatch.setattr(redis_module, "LIMIT", SMALL_LIMIT, raising=False)
    redis_server.client.set(redis_module.PREFIX + KEY, b"y" * 3 * SMALL_LIMIT)
    redis_server.client.set(redis_module.PREFIX + OTHER, _entry(OTHER))
    store = open_store(redis_server.url)
    assert store.get(OTHER) == _entry(OTHER)
    assert store.get_many([OTHER, "ef" * 32]) == {OTHER: _entry(OTHER)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.get(KEY) is None
    assert store.failures()["errors"] == 1
    assert any("over the limit" in str(w.message) for w in caught)


# 3. Ctrl-C during a bulk call ends the process

CHILD = """
import sys
from cupy_rawcode.store import open_remote
store = open_remote(sys.argv[1], timeout=1.0)
print("asking", flush=True)
store.get_many(["%064x" % i for i in range(128)])
"""


def test_ctrl_c_during_a_bulk_call_ends_the_process_within_a_deadline(serve):
    def blackhole(conn, stop):
        _http_request(conn)
        stop.wait(60)  # never answers

    server = serve(blackhole)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, f"http://127.0.0.1:{server.port}/cache"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"asking"
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        child.wait(30)  # before: 128 keys / 8 workers x 1 s, about 16 s
        assert time.monotonic() - t0 < WAIT
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode != 0


# 4. an S3 store's objects are prefix/<key> only


def test_s3_counts_and_clears_its_entries_only(request):
    client = request.getfixturevalue("s3_server").client
    foreign = ["team/README.md", f"team/sub/{KEY}", "team/notes", "unrelated/data.csv", "x"]
    for name in foreign:
        client.put_object(Bucket="kernels", Key=name, Body=b"not ours")
    store = open_store("s3://kernels/team")
    store.put(KEY, _entry())
    assert len(store) == 1
    assert store.clear() == 1 and len(store) == 0
    left = sorted(o["Key"] for o in client.list_objects_v2(Bucket="kernels")["Contents"])
    assert left == sorted(foreign)
    whole = open_store("s3://kernels")  # no prefix: the bucket's top level, keys only
    whole.put(OTHER, _entry(OTHER))
    assert len(whole) == 1 and whole.clear() == 1
    left = sorted(o["Key"] for o in client.list_objects_v2(Bucket="kernels")["Contents"])
    assert left == sorted(foreign)


# 6. S3's 403 for a missing object is a miss


class _DeniedS3(http.server.BaseHTTPRequestHandler):
    """GetObject as S3 answers it to credentials without s3:ListBucket: 403 for what is not
    there."""

    protocol_version = "HTTP/1.1"
    held: dict[str, bytes] = {}

    def do_GET(self):
        data = self.held.get(self.path.rstrip("/").rpartition("/")[2])
        if data is None:
            body = (
                b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                b"<Message>Access Denied</Message></Error>"
            )
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
        else:
            body = data
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_s3_access_denied_on_get_is_a_miss_and_the_level_goes_on(tmp_path, monkeypatch):
    pytest.importorskip("boto3")
    handler = type("Denied", (_DeniedS3,), {"held": {OTHER: _entry(OTHER)}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _s3_env(monkeypatch, server.server_address[1])
        store = make_store(
            tmp_path / "c", bundles=(), redis_url="", remote=["s3://kernels/cuda12|read-only"]
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert store.get(KEY) is None
            assert store.get(OTHER) == _entry(OTHER)
    finally:
        server.shutdown()
        server.server_close()
    assert not [w for w in caught if issubclass(w.category, RemoteLevelWarning)]
    level = store.stats()["levels"][-1]
    assert (level["misses"], level["hits"], level["errors"]) == (1, 1, 0)


# 9. credentials never shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://alice:s3cr3tPW@h/c", "https://alice:***@h/c"),
        ("https://s3cr3tPW@h/c", "https://***@h/c"),
        ("redis://h:6379/0?password=s3cr3tPW", "redis://h:6379/0?password=***"),
        ("redis://:s3cr3tPW@h/0", "redis://:***@h/0"),
        ("http://h/c", "http://h/c"),
        (
            "error at 'memcached://u:s3cr3tPW@h:port': bad",
            "error at 'memcached://u:***@h:port': bad",
        ),
    ],
)
def test_redacted_hides_every_secret_of_a_url(url, shown):
    assert redacted(url) == shown


def test_no_warning_or_location_shows_a_password(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_store(
            tmp_path / "c",
            bundles=(),
            redis_url="",
            remote=["memcached://alice:s3cr3tPW@cache.internal:port", "htps://alice:s3cr3tPW@h/c"],
        )
        warn_failed("http", "http://h", OSError("at https://bob:s3cr3tPW@h/x: refused"))
    said = [str(w.message) for w in caught]
    assert len(said) == 3 and not [m for m in said if "s3cr3tPW" in m], said
    for url in ("https://s3cr3tPW@h/c", "redis://h:6379/0?password=s3cr3tPW"):
        assert "s3cr3tPW" not in open_remote(url, timeout=1.0).location


# 11. per-level counts


def test_a_failing_redis_level_counts_in_the_process_tally(tmp_path):
    pytest.importorskip("redis")
    before = dict(tally("redis"))
    store = make_store(tmp_path / "c", bundles=(), redis_url=f"redis://127.0.0.1:{free_port()}/0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert store.get(KEY) is None
    after = tally("redis")
    assert after["errors"] + after["timeouts"] == before["errors"] + before["timeouts"] + 1


def test_a_write_memcached_refuses_as_too_large_is_no_write(request):
    store = open_store(request.getfixturevalue("memcached_server").url)
    levels = Levels([store], check=lambda key, data: None)
    levels.put(KEY, b"z" * (3 << 20))  # over memcached's 1 MiB item size
    assert store.get(KEY) is None
    assert (levels.counts[0]["writes"], levels.counts[0]["bytes_written"]) == (0, 0)
    levels.put(OTHER, _entry(OTHER))
    assert levels.counts[0]["writes"] == 1 and store.get(OTHER) == _entry(OTHER)


# 12. a failing Redis level is a RemoteLevelWarning, once per level


def test_each_failing_redis_level_warns_once_with_a_remote_level_warning(tmp_path):
    pytest.importorskip("redis")
    first, second = (f"redis://127.0.0.1:{free_port()}/{db}" for db in (0, 1))
    store = make_store(tmp_path / "c", bundles=(), redis_url=first, remote=[second])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.get(KEY) is None
        for level in store.levels[-2:]:
            level._down_until = 0.0  # its rest over: it fails again, and says nothing more
        assert store.get(KEY) is None
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert len(said) == 2, said
    assert first in said[0] and second in said[1]


# 13. a key that is no cache key is refused, naming it


def _remote_stores(tmp_path):
    yield open_store("http://127.0.0.1:1/cache/team-a", timeout=0.5)
    if _has("pymemcache"):
        yield open_store("memcached://127.0.0.1:1", timeout=0.5)
    if _has("redis"):
        yield open_store("redis://127.0.0.1:1/0", timeout=0.5)
    if _has("boto3"):
        yield open_store("s3://kernels/team-a", timeout=0.5)


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("key", ["../../team-b/everything", "AB" * 32, "ab" * 31, "x"])
def test_a_key_that_is_no_cache_key_is_refused_by_every_level(key, tmp_path):
    stores = [*_remote_stores(tmp_path), Levels([MemoryStore()])]
    for store in stores:
        for method, args in (("get", ()), ("put", (b"data",)), ("delete", ())):
            with pytest.raises(ValueError, match="not a cache key") as raised:
                getattr(store, method)(key, *args)
            assert isinstance(raised.value, RawcodeError) and repr(key)[:20] in str(raised.value)
