"""Bulk transfer (store/transfer.py) and the bulk calls under it (Store.get_many, put_many,
sizes), against each remote backend's real server on loopback (servers.py, tests/conftest.py):
a pull gives exactly the bytes put, counts what no level holds, never writes a damaged entry,
asks the next level for what one lacks, survives a server stopped before or during it, tells
its progress and fetches nothing the second time; a push never writes a read-only level."""

from __future__ import annotations

import http.server
import logging
import threading
import warnings

import pytest
from conftest import flipped
from servers import (  # noqa: F401  (fixtures)
    memcached_server,
    s3_server,
    shared_s3,
    shared_webdav,
    webdav_server,
)

from cupy_rawcode.store import ReadOnly, Store, make_store, open_remote, transfer
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import encode
from cupy_rawcode.store.memory import MemoryStore
from cupy_rawcode.store.remote import Parallel, RemoteLevelWarning

BACKENDS = ("redis", "memcached", "http", "s3")
N = 40  # entries per test: several chunks of CHUNK (made small below)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 16 keys, so N keys cross chunk boundaries; every warn-once speaks again."""
    from cupy_rawcode.ground import log

    monkeypatch.setattr(transfer, "CHUNK", 16)
    monkeypatch.setattr(log, "_said", set())


def key_of(i: int) -> str:
    return f"{i + 0xABC:064x}"


def entry(key: str) -> bytes:
    return encode(key, f"code of {key[-6:]}".encode() * 16, {"arch": "sm_90"})


class Remote:
    """One backend's store on its real server, with a way to damage an entry on the server
    (behind the store's back) and to stop the server."""

    def __init__(self, store: Store, damage, stop):
        self.store, self.damage, self.stop = store, damage, stop


def _remote(request, backend: str, own: bool = False) -> Remote:
    """A store on ``backend``'s server (one of the test's own when ``own``: it may be stopped)."""
    if backend == "redis":
        from cupy_rawcode.store.redis import PREFIX

        server = request.getfixturevalue("redis_server")
        url, stop = server.url, server.kill

        def damage(key):
            server.client.set(PREFIX + key, flipped(server.client.get(PREFIX + key)))

    elif backend == "memcached":
        from cupy_rawcode.store.memcached import PREFIX as MC_PREFIX

        server = request.getfixturevalue("memcached_server")
        url, stop = server.url, server.stop

        def damage(key):
            server.client.set(MC_PREFIX + key, flipped(server.client.get(MC_PREFIX + key)))

    elif backend == "http":
        server = request.getfixturevalue("webdav_server" if own else "shared_webdav")
        url, stop = server.namespace(), server.stop
        folder = server.root / url[len(server.url) + 1 :]

        def damage(key):
            (folder / key).write_bytes(flipped((folder / key).read_bytes()))

    else:
        server = request.getfixturevalue("s3_server" if own else "shared_s3")
        url, stop = server.namespace(), server.stop
        bucket, prefix = url[len("s3://") :].split("/", 1)

        def damage(key):
            name = f"{prefix}/{key}"
            data = server.client.get_object(Bucket=bucket, Key=name)["Body"].read()
            server.client.put_object(Bucket=bucket, Key=name, Body=flipped(data))

    store = open_remote(url, timeout=5.0)  # generous: a stopped server refuses at once anyway
    request.addfinalizer(store.close)
    return Remote(store, damage, stop)


@pytest.fixture(params=BACKENDS)
def remote(request) -> Remote:
    """Each backend in turn, on a server (or namespace) of the test's own, empty."""
    return _remote(request, request.param)


@pytest.fixture(params=BACKENDS)
def own_remote(request) -> Remote:
    """Each backend in turn, on a server of the test's own, which it may stop."""
    return _remote(request, request.param, own=True)


def _filled(store: Store, keys) -> dict[str, bytes]:
    entries = {key: entry(key) for key in keys}
    store.put_many(entries)
    return entries


def _failures(caught, caplog) -> list[str]:
    """The warnings a failed level gave (Redis speaks through the log, the others through
    RemoteLevelWarning)."""
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    return said + [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]


def test_pull_into_an_empty_directory_gives_exactly_the_bytes_put(remote, tmp_path):
    keys = [key_of(i) for i in range(N)]
    put = _filled(remote.store, keys)
    disk = DirectoryStore(tmp_path / "local")
    summary = transfer.pull(keys, [remote.store], disk)
    assert {key: disk.get(key) for key in keys} == put
    assert summary.asked == N and summary.local == 0 and summary.missing == 0
    assert summary.fetched == {remote.store.location: N}
    assert summary.bytes == sum(map(len, put.values())) and summary.failed == []


def test_bulk_get_answers_only_the_keys_held(remote):
    held = _filled(remote.store, [key_of(i) for i in range(0, N, 2)])
    assert remote.store.get_many([key_of(i) for i in range(N)]) == held
    assert remote.store.get_many([]) == {}


def test_keys_missing_remotely_are_counted_missing(remote, tmp_path):
    keys = [key_of(i) for i in range(N)]
    _filled(remote.store, keys[::2])
    disk = DirectoryStore(tmp_path / "local")
    summary = transfer.pull(keys, [remote.store], disk)
    assert summary.missing == N // 2 and summary.fetched[remote.store.location] == N // 2
    assert [disk.get(key) is not None for key in keys] == [i % 2 == 0 for i in range(N)]


def test_a_damaged_remote_entry_is_missing_and_never_written_locally(remote, tmp_path):
    keys = [key_of(i) for i in range(N)]
    _filled(remote.store, keys)
    remote.damage(keys[5])
    disk = DirectoryStore(tmp_path / "local")
    summary = transfer.pull(keys, [remote.store], disk)
    assert disk.get(keys[5]) is None and not disk.path(keys[5]).exists()
    assert summary.missing == 1 and summary.damaged == 1
    assert summary.fetched[remote.store.location] == N - 1


def test_what_one_level_lacks_or_holds_damaged_is_asked_of_the_next(remote, tmp_path):
    keys = [key_of(i) for i in range(N)]
    _filled(remote.store, keys[: N // 2])
    remote.damage(keys[0])
    second = MemoryStore()
    put = _filled(second, keys)
    disk = DirectoryStore(tmp_path / "local")
    summary = transfer.pull(keys, [remote.store, second], disk)
    assert {key: disk.get(key) for key in keys} == put
    assert summary.fetched == {remote.store.location: N // 2 - 1, second.location: N // 2 + 1}
    assert summary.missing == 0 and summary.damaged == 1


def test_pull_is_idempotent(remote, tmp_path):
    keys = [key_of(i) for i in range(N)]
    _filled(remote.store, keys)
    disk = DirectoryStore(tmp_path / "local")
    transfer.pull(keys, [remote.store], disk)
    again = transfer.pull(keys, [remote.store], disk)
    assert again.local == N and sum(again.fetched.values()) == 0 and again.bytes == 0


def test_progress_counts_never_go_down_and_end_at_the_total(remote, tmp_path):
    keys = [key_of(i) for i in range(N)]
    _filled(remote.store, keys[:-3])  # three are missing: settled only at the end
    calls: list[tuple[int, int]] = []
    transfer.pull(
        keys + keys[:4], [remote.store], DirectoryStore(tmp_path / "l"), lambda *a: calls.append(a)
    )
    done = [d for d, _ in calls]
    assert {t for _, t in calls} == {N} and done == sorted(done) and calls[-1] == (N, N)
    assert len(calls) > 2  # told along the way, not only at the start and the end


@pytest.mark.parametrize("when", ["before", "during"])
def test_a_server_stopped_warns_once_and_the_other_levels_still_serve(
    own_remote, tmp_path, caplog, when
):
    keys = [key_of(i) for i in range(N)]
    _filled(own_remote.store, keys)
    backup = MemoryStore()
    put = _filled(backup, keys)
    if when == "before":
        own_remote.stop()

    def progress(done: int, total: int) -> None:
        if done and when == "during":
            own_remote.stop()

    disk = DirectoryStore(tmp_path / "local")
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = transfer.pull(keys, [own_remote.store, backup], disk, progress)
    assert {key: disk.get(key) for key in keys} == put and summary.missing == 0
    assert len(_failures(caught, caplog)) == 1, _failures(caught, caplog)
    assert summary.failed == [own_remote.store.location]
    from_remote = summary.fetched[own_remote.store.location]
    assert from_remote == 0 if when == "before" else 0 < from_remote < N


def test_a_failed_level_with_nothing_behind_it_leaves_the_keys_missing(own_remote, tmp_path):
    keys = [key_of(i) for i in range(N)]
    own_remote.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = transfer.pull(keys, [own_remote.store], DirectoryStore(tmp_path / "l"))
    assert summary.missing == N and summary.failed == [own_remote.store.location]


def test_push_sends_to_writable_levels_and_never_to_a_read_only_one(request, tmp_path):
    local = DirectoryStore(tmp_path / "local")
    keys = [key_of(i) for i in range(N)]
    put = _filled(local, keys)
    written = _remote(request, "http").store
    read_only = ReadOnly(_remote(request, "s3").store)
    summary = transfer.push(None, local, [read_only, written])
    assert written.get_many(keys) == put and read_only.get_many(keys) == {}
    assert summary.read_only == [read_only.location] and summary.sent == {written.location: N}
    assert read_only.refused == 0  # never even tried


def test_push_past_a_stopped_server_warns_once_and_reaches_the_others(
    own_remote, request, tmp_path, caplog
):
    local = DirectoryStore(tmp_path / "local")
    keys = [key_of(i) for i in range(N)]
    put = _filled(local, keys)
    other = _remote(request, "http").store
    own_remote.stop()
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = transfer.push(keys, local, [own_remote.store, other])
    assert other.get_many(keys) == put and summary.sent[other.location] == N
    assert (
        summary.failed == [own_remote.store.location]
        and summary.sent[own_remote.store.location] == 0
    )
    assert len(_failures(caught, caplog)) == 1, _failures(caught, caplog)


def test_push_then_pull_moves_a_cache_between_machines(remote, tmp_path):
    a, b = DirectoryStore(tmp_path / "a"), DirectoryStore(tmp_path / "b")
    keys = [key_of(i) for i in range(N)]
    put = _filled(a, keys)
    a.put(key_of(N), flipped(entry(key_of(N))))  # a damaged local entry is not sent
    pushed = transfer.push(None, a, [remote.store])
    assert pushed.sent == {remote.store.location: N} and pushed.unreadable == 1
    pulled = transfer.pull(keys + [key_of(N)], [remote.store], b)
    assert {key: b.get(key) for key in keys} == put and pulled.missing == 1
    again = transfer.push(keys, a, [remote.store])
    # what the server can tell the size of cheaply is not sent again (memcached cannot tell)
    cheap = remote.store.sizes(keys) is not None
    assert again.present[remote.store.location] == (N if cheap else 0)
    assert again.sent[remote.store.location] == (0 if cheap else N)


def test_pull_into_and_push_from_use_the_levels_of_a_compile_store(request, tmp_path):
    url = request.getfixturevalue("shared_webdav").namespace()
    keys = [key_of(i) for i in range(N)]
    first = make_store(tmp_path / "one", bundles=(), redis_url="", remote=[url])
    put = _filled(first.level("disk"), keys)
    assert transfer.push_from(first).sent == {url: N}
    second = make_store(tmp_path / "two", bundles=(), redis_url="", remote=[url + "|read-only"])
    summary = transfer.pull_into(second, keys)
    assert summary.fetched == {url: N}
    assert {key: second.level("disk").get(key) for key in keys} == put
    assert transfer.push_from(second).read_only == [url]


def test_parallel_gives_every_answer_and_raises_the_first_failure():
    pool = Parallel(workers=4)
    seen = set()
    lock = threading.Lock()

    def call(key: str) -> str:
        with lock:
            seen.add(threading.get_ident())
        if key == "bad":
            raise OSError("refused")
        return key.upper()

    keys = [f"k{i}" for i in range(50)]
    assert pool.map(call, keys) == {k: k.upper() for k in keys}
    with pytest.raises(OSError, match="refused"):
        pool.map(call, [*keys, "bad"])
    pool.close()
    assert pool.map(call, ["x"]) == {"x": "X"}  # usable again after close


def test_the_default_bulk_calls_loop_over_get_and_put():
    store = MemoryStore()
    store.put_many({key_of(1): b"one", key_of(2): b"two"})
    assert store.get_many([key_of(1), key_of(3), key_of(2)]) == {
        key_of(1): b"one",
        key_of(2): b"two",
    }
    assert store.sizes([key_of(1)]) is None


class _Entries(http.server.BaseHTTPRequestHandler):
    """Answers every GET with one entry over HTTP/1.1, noting the client's port (one per
    connection); ``hang_up``: closes each connection after its answer without saying so."""

    protocol_version = "HTTP/1.1"
    hang_up = False
    ports: list[int] = []

    def do_GET(self):
        self.ports.append(self.client_address[1])
        key = self.path.rpartition("/")[2]
        body = entry(key)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = self.hang_up

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("hang_up", [False, True])
def test_http_keeps_its_connection_and_reconnects_when_the_server_closed_it(hang_up):
    handler = type("H", (_Entries,), {"hang_up": hang_up, "ports": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    store = open_remote(f"http://127.0.0.1:{server.server_address[1]}/c", timeout=2.0)
    try:
        keys = [key_of(i) for i in range(5)]
        assert [store.get(key) for key in keys] == [entry(key) for key in keys]
        assert len(set(handler.ports)) == (5 if hang_up else 1)
    finally:
        store.close()
        server.shutdown()
        server.server_close()


def test_http_goes_through_the_proxy_the_environment_names(monkeypatch):
    handler = type("P", (_Entries,), {"ports": []})
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    for name in ("no_proxy", "NO_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_address[1]}")
    store = open_remote("http://cache.invalid/c", timeout=2.0)  # a host only the proxy reaches
    try:
        assert store.get_many([key_of(1), key_of(2)]) == {k: entry(k) for k in map(key_of, (1, 2))}
        assert len(handler.ports) == 2
    finally:
        store.close()
        proxy.shutdown()
        proxy.server_close()


@pytest.mark.parametrize("spelling", ["path", "file-url"])
def test_a_directory_as_a_remote_level_is_one_push_pull_and_backfill_reach(tmp_path, spelling):
    """A shared directory in CUPY_RAWCODE_REMOTE is a remote level like the others: cache push
    sends to it, cache pull fetches from it, and a hit there lands in the cache directory."""
    shared = tmp_path / "shared"
    url = str(shared) if spelling == "path" else f"file:{shared}"
    keys = [key_of(i) for i in range(N)]
    first = make_store(tmp_path / "one", bundles=(), redis_url="", remote=[url])
    disk, [level] = transfer.split_levels(first)
    assert disk is first.level("disk") and level.location == str(shared)
    put = _filled(first.level("disk"), keys)
    assert transfer.push_from(first).sent == {str(shared): N}
    second = make_store(tmp_path / "two", bundles=(), redis_url="", remote=[url])
    assert transfer.pull_into(second, keys[:2]).fetched == {str(shared): 2}
    third = make_store(tmp_path / "three", bundles=(), redis_url="", remote=[url])
    assert third.get(keys[3]) == put[keys[3]]  # a hit in the shared directory ...
    assert third.level("disk").get(keys[3]) == put[keys[3]]  # ... copied into the cache's
