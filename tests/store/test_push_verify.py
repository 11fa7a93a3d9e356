"""``push`` compares sizes only: pushing a cache the remote level already holds reads no entry
back (a damaged copy of the same size is left to ``verify`` or to the next compile that misses
on it, which replaces it); ``push(verify=True)`` reads back the same-size copies and replaces
the damaged ones, never another machine's valid entry of the key."""

from __future__ import annotations

import warnings

from cupy_rawcode.store import Levels, MemoryStore, Store, transfer
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import decode, encode

KEYS = [f"{i + 0xD15C:064x}" for i in range(6)]


def entry(key: str, stamp: str = "1") -> bytes:
    return encode(key, f"code of {key[-6:]}".encode() * 8, {"arch": "sm_90", "t": stamp})


def flipped(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :]


class Counted(Store):
    """A remote level in a dict that tells sizes cheaply (as Redis, HTTP, S3) and counts the
    entries read from it and written to it."""

    name = "team"

    def __init__(self, data: dict[str, bytes] | None = None) -> None:
        self.data = dict(data or {})
        self.reads: list[str] = []
        self.writes: list[str] = []

    def get(self, key: str) -> bytes | None:
        self.reads.append(key)
        return self.data.get(key)

    def get_many(self, keys):
        return {key: data for key in keys if (data := self.get(key)) is not None}

    def put(self, key: str, data: bytes) -> None:
        self.writes.append(key)
        self.data[key] = data

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def clear(self) -> int:
        n = len(self.data)
        self.data.clear()
        return n

    def __len__(self) -> int:
        return len(self.data)

    @property
    def location(self) -> str:
        return "counted://team"

    def sizes(self, keys):
        return {key: len(self.data[key]) for key in keys if key in self.data}


def local_cache(tmp_path) -> DirectoryStore:
    local = DirectoryStore(tmp_path / "cache")
    for key in KEYS:
        local.put(key, entry(key))
    return local


def test_pushing_what_the_level_holds_reads_nothing_back(tmp_path):
    local = local_cache(tmp_path)
    team = Counted()
    first = transfer.push(None, local, [team])
    assert first.sent == {team.location: len(KEYS)} and team.reads == []
    team.writes.clear()
    again = transfer.push(None, local, [team])
    assert team.reads == [] and team.writes == []  # sizes alone: no entry downloaded
    assert again.sent == {team.location: 0} and again.present == {team.location: len(KEYS)}


def test_a_plain_push_sends_what_is_missing_or_of_another_size_and_reads_nothing(tmp_path):
    local = local_cache(tmp_path)
    team = Counted({key: entry(key) for key in KEYS[2:]})
    team.data[KEYS[2]] = entry(KEYS[2]) + b"x"  # another size: sent again
    team.data[KEYS[3]] = flipped(entry(KEYS[3]))  # the same size, damaged: left to --verify
    summary = transfer.push(None, local, [team])
    assert team.reads == [] and sorted(team.writes) == sorted(KEYS[:3])
    assert summary.sent == {team.location: 3} and summary.present == {team.location: 3}


def test_a_verified_push_replaces_a_damaged_copy_and_keeps_another_machines(tmp_path):
    local = local_cache(tmp_path)
    team = Counted({key: entry(key) for key in KEYS})
    team.data[KEYS[1]] = flipped(entry(KEYS[1]))  # a bit flipped on the server
    team.data[KEYS[2]] = entry(KEYS[3])[: len(entry(KEYS[2]))]  # another key's bytes
    team.data[KEYS[3]] = entry(KEYS[3], stamp="2")  # another machine's valid entry: kept
    summary = transfer.push(None, local, [team], verify=True)
    assert sorted(team.reads) == sorted(KEYS)  # read back: every copy is of the same size
    assert sorted(team.writes) == sorted(KEYS[1:3])
    assert summary.sent == {team.location: 2} and summary.present == {team.location: 4}
    for key in KEYS:
        decode(key, team.data[key])
    assert team.data[KEYS[3]] == entry(KEYS[3], stamp="2")


def test_a_damaged_same_size_copy_is_replaced_by_the_next_compile_that_misses_on_it(tmp_path):
    team = Counted({KEYS[0]: flipped(entry(KEYS[0]))})
    store = Levels([MemoryStore(), DirectoryStore(tmp_path / "cache"), team])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the broken entry's warning
        assert store.get(KEYS[0]) is None  # a miss: the compile runs, then writes everywhere
    store.put(KEYS[0], entry(KEYS[0]))
    assert team.data[KEYS[0]] == entry(KEYS[0])


def test_push_from_hands_verify_on(tmp_path):
    local = local_cache(tmp_path)
    team = Counted({key: flipped(entry(key)) for key in KEYS})
    store = Levels([MemoryStore(), local, team])
    assert transfer.push_from(store).sent == {team.location: 0}
    assert transfer.push_from(store, verify=True).sent == {team.location: len(KEYS)}
