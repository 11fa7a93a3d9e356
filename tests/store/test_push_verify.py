"""``push`` compares sizes only: pushing a cache the remote level already holds reads no entry
back (a damaged copy of the same size is left to ``verify`` or to the next compile that misses
on it, which replaces it); ``push(verify=True)`` reads back the same-size copies and replaces
the damaged ones, never another machine's valid entry of the key."""

from __future__ import annotations

import warnings

from conftest import dict_store, flipped
from conftest import stamped_entry as entry

from cupy_rawcode.store import Levels, MemoryStore, transfer
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import decode

KEYS = [f"{i + 0xD15C:064x}" for i in range(6)]


def local_cache(tmp_path) -> DirectoryStore:
    local = DirectoryStore(tmp_path / "cache")
    for key in KEYS:
        local.put(key, entry(key))
    return local


def test_pushing_what_the_level_holds_reads_nothing_back(tmp_path):
    local = local_cache(tmp_path)
    team = dict_store()
    first = transfer.push(None, local, [team])
    assert first.sent == {team.location: len(KEYS)} and team.reads == []
    team.writes.clear()
    again = transfer.push(None, local, [team])
    assert team.reads == [] and team.writes == []  # sizes alone: no entry downloaded
    assert again.sent == {team.location: 0} and again.present == {team.location: len(KEYS)}


def test_a_plain_push_sends_what_is_missing_or_of_another_size_and_reads_nothing(tmp_path):
    local = local_cache(tmp_path)
    team = dict_store({key: entry(key) for key in KEYS[2:]})
    team.data[KEYS[2]] = entry(KEYS[2]) + b"x"  # another size: sent again
    team.data[KEYS[3]] = flipped(entry(KEYS[3]))  # the same size, damaged: left to --verify
    summary = transfer.push(None, local, [team])
    assert team.reads == [] and sorted(team.writes) == sorted(KEYS[:3])
    assert summary.sent == {team.location: 3} and summary.present == {team.location: 3}


def test_a_verified_push_replaces_a_damaged_copy_and_keeps_another_machines(tmp_path):
    local = local_cache(tmp_path)
    team = dict_store({key: entry(key) for key in KEYS})
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
    team = dict_store({KEYS[0]: flipped(entry(KEYS[0]))})
    store = Levels([MemoryStore(), DirectoryStore(tmp_path / "cache"), team])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the broken entry's warning
        assert store.get(KEYS[0]) is None  # a miss: the compile runs, then writes everywhere
    store.put(KEYS[0], entry(KEYS[0]))
    assert team.data[KEYS[0]] == entry(KEYS[0])


def test_push_from_hands_verify_on(tmp_path):
    local = local_cache(tmp_path)
    team = dict_store({key: flipped(entry(key)) for key in KEYS})
    store = Levels([MemoryStore(), local, team])
    assert transfer.push_from(store).sent == {team.location: 0}
    assert transfer.push_from(store, verify=True).sent == {team.location: len(KEYS)}
