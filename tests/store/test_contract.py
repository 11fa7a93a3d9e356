"""One store contract, run against every backend and wrapper through one parametrised fixture:
memory, directory, bundle, Redis, memcached, HTTP (WebDAV) and S3 (each a real server on
loopback: servers.py), ReadOnly(directory) and Levels([memory, directory]). A read-only subject is filled through its own medium (a bundle
is built by write_bundle) and every write-related case asserts the write was refused."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import flipped, recounts_done
from servers import memcached_server, shared_s3, shared_webdav  # noqa: F401  (fixtures)

from cupy_rawcode.ground.errors import EntryError
from cupy_rawcode.store import Levels, ReadOnly, Store, open_store
from cupy_rawcode.store.bundle import read_index, write_bundle
from cupy_rawcode.store.entry import decode, encode

WRITERS, ROUNDS = 3, 20


def key_of(i: int) -> str:
    """A key as the key stage makes them: 64 hex digits."""
    return f"{i:064x}"


def entry(key: str, tag: str = "") -> bytes:
    """A valid entry for ``key`` whose code carries ``tag``."""
    return encode(key, f"code of {key[-4:]} {tag}".encode() * 8, {"arch": "sm_90"})


def valid(key: str, data: bytes | None) -> bool:
    """Whether ``data`` is one complete valid entry of ``key``."""
    try:
        decode(key, data or b"")
        return True
    except EntryError:
        return False


def build(spec: dict) -> Store:
    """The store a spec describes: its URLs opened, in Levels when several, ReadOnly when asked."""
    stores = [open_store(url) for url in spec["urls"]]
    store = stores[0] if len(stores) == 1 else Levels(stores)
    return ReadOnly(store) if spec.get("read_only") else store


def _writer(spec: dict, pairs: list[tuple[str, bytes]], rounds: int) -> None:
    """One concurrent writer: opens the store itself and puts ``pairs`` ``rounds`` times."""
    store = build(spec)
    for _ in range(rounds):
        for key, data in pairs:
            store.put(key, data)
    store.close()


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes."""
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class Subject:
    """A store under test: its spec (to open it again, in another process too), the store,
    ``fill`` (entries through its own medium), ``damage`` (one key's stored bytes, in the
    medium), ``snapshot`` (the medium's state), what is expected of it and its location."""

    def __init__(
        self,
        spec: dict,
        fill: Callable[[Store, dict[str, bytes]], None],
        damage: Callable[[Store, str], None],
        snapshot: Callable[[], object],
        where: str,
        *,
        writable: bool = True,
        lasting: bool = True,
        in_process: bool = False,
    ):
        self.spec, self.store = spec, build(spec)
        self._fill, self._damage, self.snapshot, self.where = fill, damage, snapshot, where
        self.writable, self.lasting, self.in_process = writable, lasting, in_process

    def fill(self, entries: dict[str, bytes]) -> None:
        self._fill(self.store, entries)

    def damage(self, key: str) -> None:
        self._damage(self.store, key)


def _put_all(store: Store, entries: dict[str, bytes]) -> None:
    """Put ``entries``, and wait for the size recount a directory's put may start (conftest)."""
    for key, data in entries.items():
        store.put(key, data)
    recounts_done()


def _damage_file(path: Path) -> None:
    path.write_bytes(flipped(path.read_bytes()))


def _memory(tmp_path: Path, request) -> Subject:
    def damage(store, key):
        store._data[key] = flipped(store._data[key])

    return Subject(
        {"urls": ["memory:"]},
        _put_all,
        damage,
        lambda: None,
        "memory",
        lasting=False,
        in_process=True,
    )


def _directory(tmp_path: Path, request) -> Subject:
    root = tmp_path / "dir"
    return Subject(
        {"urls": [str(root)]},
        _put_all,
        lambda store, key: _damage_file(store.path(key)),
        lambda: _tree(root),
        str(root),
    )


def _bundle(tmp_path: Path, request) -> Subject:
    path, held = tmp_path / "shipped.bundle", {}
    write_bundle(path, [])

    def fill(store, entries):
        held.update(entries)
        write_bundle(path, sorted(held.items()))
        store.close()  # forget the index read before

    def damage(store, key):
        offset, length = read_index(path).entries[key]
        raw = bytearray(path.read_bytes())
        raw[offset + length // 2] ^= 0x01
        path.write_bytes(bytes(raw))

    return Subject({"urls": [str(path)]}, fill, damage, path.read_bytes, str(path), writable=False)


def _redis(tmp_path: Path, request) -> Subject:
    from cupy_rawcode.store.redis import PREFIX

    server = request.getfixturevalue("redis_server")

    def damage(store, key):
        server.client.set(PREFIX + key, flipped(server.client.get(PREFIX + key)))

    return Subject(
        {"urls": [server.url]},
        _put_all,
        damage,
        lambda: sorted(server.client.keys()),
        f"127.0.0.1:{server.port}",
    )


def _memcached(tmp_path: Path, request) -> Subject:
    from cupy_rawcode.store.memcached import PREFIX

    server = request.getfixturevalue("memcached_server")

    def damage(store, key):
        server.client.set(PREFIX + key, flipped(server.client.get(PREFIX + key)))

    return Subject({"urls": [server.url]}, _put_all, damage, lambda: None, server.url)


def _http(tmp_path: Path, request) -> Subject:
    server = request.getfixturevalue("shared_webdav")
    url = server.namespace()
    folder = server.root / url[len(server.url) + 1 :]
    return Subject(
        {"urls": [url]}, _put_all, lambda store, key: _damage_file(folder / key), lambda: None, url
    )


def _s3(tmp_path: Path, request) -> Subject:
    server = request.getfixturevalue("shared_s3")
    url = server.namespace()
    bucket, prefix = url[len("s3://") :].split("/", 1)

    def damage(store, key):
        name = f"{prefix}/{key}"
        data = server.client.get_object(Bucket=bucket, Key=name)["Body"].read()
        server.client.put_object(Bucket=bucket, Key=name, Body=flipped(data))

    return Subject({"urls": [url]}, _put_all, damage, lambda: None, url)


def _read_only_directory(tmp_path: Path, request) -> Subject:
    root = tmp_path / "dir"
    return Subject(
        {"urls": [str(root)], "read_only": True},
        lambda store, entries: _put_all(store.inner, entries),
        lambda store, key: _damage_file(store.inner.path(key)),
        lambda: _tree(root),
        str(root),
        writable=False,
    )


def _levels(tmp_path: Path, request) -> Subject:
    root = tmp_path / "dir"

    def damage(store, key):
        memory, disk = store.levels
        memory._data[key] = flipped(memory._data[key])
        _damage_file(disk.path(key))

    return Subject(
        {"urls": ["memory:", str(root)]}, _put_all, damage, lambda: _tree(root), str(root)
    )


KINDS = {
    "memory": _memory,
    "directory": _directory,
    "bundle": _bundle,
    "redis": _redis,
    "memcached": _memcached,
    "http": _http,
    "s3": _s3,
    "read-only-directory": _read_only_directory,
    "levels-memory-directory": _levels,
}


@pytest.fixture(params=list(KINDS))
def subject(request, tmp_path) -> Subject:
    """Each backend and wrapper in turn, empty; closed after the test."""
    made = KINDS[request.param](tmp_path, request)
    yield made
    made.store.close()


def test_round_trip(subject):
    k = key_of(1)
    subject.fill({k: entry(k)})
    assert subject.store.get(k) == entry(k)


def test_a_missing_key_is_a_miss(subject):
    assert subject.store.get(key_of(2)) is None
    subject.fill({key_of(1): entry(key_of(1))})
    assert subject.store.get(key_of(2)) is None


def test_overwrite(subject):
    k = key_of(3)
    subject.fill({k: entry(k, "first")})
    subject.store.put(k, entry(k, "second"))
    assert subject.store.get(k) == entry(k, "second" if subject.writable else "first")


def test_a_broken_entry_is_a_miss(subject, caplog):
    k = key_of(4)
    subject.fill({k: entry(k)})
    subject.damage(k)
    assert not valid(k, subject.store.get(k))  # what the backend gives back is no valid entry
    assert Levels([subject.store]).get(k) is None  # so the store a compile reads misses
    assert "ignoring a broken cache entry" in caplog.text


def test_read_only_refuses_writes_and_is_never_written(subject):
    store = subject.store
    assert store.read_only is not subject.writable
    if subject.writable:
        return
    k, other = key_of(5), key_of(6)
    subject.fill({k: entry(k)})
    before = subject.snapshot()
    store.put(other, entry(other))
    store.put(k, entry(k, "replaced"))
    store.delete(k)
    assert store.clear() == 0
    assert store.refused == 4
    assert subject.snapshot() == before
    assert store.get(k) == entry(k) and store.get(other) is None
    assert len(store) == 1


def test_concurrent_writers(subject):
    """Several writers put one shared key and one key each: every get afterwards is one
    complete valid value that a writer put (threads for an in-process store)."""
    shared = key_of(7)
    jobs = [
        [(shared, entry(shared, f"writer {i}")), (key_of(100 + i), entry(key_of(100 + i)))]
        for i in range(WRITERS)
    ]
    if subject.in_process:
        runs = [threading.Thread(target=_put_many, args=(subject.store, pairs)) for pairs in jobs]
    else:
        spawn = multiprocessing.get_context("spawn")
        runs = [spawn.Process(target=_writer, args=(subject.spec, p, ROUNDS)) for p in jobs]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
        assert getattr(run, "exitcode", 0) == 0
    reader = subject.store if subject.in_process else build(subject.spec)
    got = reader.get(shared)
    if not subject.writable:
        assert got is None and all(reader.get(key_of(100 + i)) is None for i in range(WRITERS))
        return
    assert got in {pairs[0][1] for pairs in jobs} and valid(shared, got)
    for pairs in jobs:
        key, data = pairs[1]
        assert reader.get(key) == data


def _put_many(store: Store, pairs: list[tuple[str, bytes]]) -> None:
    for _ in range(ROUNDS):
        for key, data in pairs:
            store.put(key, data)


def test_delete(subject):
    k, kept = key_of(8), key_of(9)
    subject.fill({k: entry(k), kept: entry(kept)})
    subject.store.delete(k)
    subject.store.delete(key_of(10))  # nothing there: no error
    assert subject.store.get(k) == (None if subject.writable else entry(k))
    assert subject.store.get(kept) == entry(kept)


def test_clear(subject):
    keys = [key_of(20 + i) for i in range(3)]
    subject.fill({k: entry(k) for k in keys})
    removed = subject.store.clear()
    if subject.writable:
        assert removed == 3 and len(subject.store) == 0
        assert all(subject.store.get(k) is None for k in keys)
    else:
        assert removed == 0 and len(subject.store) == 3


def test_len(subject):
    assert len(subject.store) == 0 and bool(subject.store)  # empty, still a store
    keys = [key_of(30 + i) for i in range(3)]
    subject.fill({k: entry(k) for k in keys})
    subject.fill({keys[0]: entry(keys[0], "again")})
    assert len(subject.store) == 3


def test_location(subject):
    location = subject.store.location
    assert isinstance(location, str) and subject.where in location
    assert location in repr(subject.store)


def test_close_then_reopen(subject):
    k = key_of(40)
    subject.fill({k: entry(k)})
    subject.store.close()
    assert subject.store.get(k) == entry(k)  # a closed store may be used again
    subject.store.close()
    again = build(subject.spec)
    assert again.get(k) == (entry(k) if subject.lasting else None)
    again.close()
