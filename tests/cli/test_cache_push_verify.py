"""``cache push`` compares sizes and downloads nothing; ``cache push --verify`` reads back the
entries the team's level holds at the same size and replaces the damaged ones; ``--verify``
goes with ``cache push`` alone. No GPU, no CuPy: the entries are put in the cache directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import flipped

from cupy_rawcode.cli import main
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import decode, encode

TEAM = "test_cache_push_verify:TeamCache"  # the remote level, as CUPY_RAWCODE_REMOTE names it
KEYS = [f"{i + 0xFACE:064x}" for i in range(4)]


class TeamCache(DirectoryStore):
    """The team's level: a directory (TEAM_CACHE) that counts the entries read from it."""

    name = "team"
    reads: list[str] = []

    def __init__(self) -> None:
        super().__init__(Path(os.environ["TEAM_CACHE"]))

    def get(self, key: str) -> bytes | None:
        TeamCache.reads.append(key)
        return super().get(key)


def entry(key: str) -> bytes:
    return encode(key, f"code of {key[-6:]}".encode() * 8, {"arch": "sm_90"})


@pytest.fixture
def team(tmp_path, monkeypatch):
    """This machine's cache holding KEYS, and the team's level holding them too, one of them
    damaged at its size."""
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TEAM_CACHE", str(tmp_path / "team"))
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", TEAM)
    local, remote = DirectoryStore(tmp_path / "cache"), TeamCache()
    for key in KEYS:
        local.put(key, entry(key))
        remote.put(key, entry(key))
    remote.put(KEYS[1], flipped(entry(KEYS[1])))
    monkeypatch.setattr(TeamCache, "reads", [])
    return remote


def push(capsys, *flags: str) -> dict:
    status = main(["cache", "push", "--json", *flags])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out)


def test_push_reads_nothing_back_and_verify_replaces_the_damaged_copy(team, capsys):
    where = team.location
    plain = push(capsys)
    assert TeamCache.reads == [] and plain["sent"] == {where: 0}
    assert plain["present"] == {where: len(KEYS)}
    assert team.get(KEYS[1]) == flipped(entry(KEYS[1]))  # left: sizes alone were compared
    TeamCache.reads.clear()
    verified = push(capsys, "--verify")
    assert sorted(TeamCache.reads) == sorted(KEYS)
    assert verified["sent"] == {where: 1} and verified["present"] == {where: len(KEYS) - 1}
    decode(KEYS[1], team.get(KEYS[1]))  # replaced


@pytest.mark.parametrize("action", ["pull", "stats", "list"])
def test_verify_goes_with_push_alone(team, capsys, action):
    status = main(["cache", action, "--verify"])
    out, err = capsys.readouterr()
    assert status == 2 and "--verify goes with 'cache push'" in err and out == ""
