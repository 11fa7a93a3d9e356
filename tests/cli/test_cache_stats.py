"""`cupy-rawcode cache stats`: stored and uncompressed sizes with their ratio, `--json` (one
object of a stable schema: every level's hits, misses, errors, timeouts, writes and bytes,
grouped local and remote), `-z` zeroing every count, and the per-level counts kept across
processes (counters.py) without losing any to a concurrent writer."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import pytest
from conftest import dict_store

from cupy_rawcode import cli
from cupy_rawcode.store import COUNTS, Levels, ReadOnly, counters, counts, open_store
from cupy_rawcode.store.bundle import write_bundle
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import encode

pytest.importorskip("zstandard")

CODE = b"".join(i.to_bytes(4, "little") * 3 + b"\x00\x01\x02\x03SASS" for i in range(2000))
LEVEL_KEYS = {"hits", "misses", "errors", "timeouts", "writes", "bytes_read", "bytes_written"}
SAVED = "saved_ms"  # a level's saved compile time: in its tally, not in a Levels' counts
TOP_KEYS = {
    "schema",
    "location",
    "bound_bytes",
    "size_bytes",
    "files",
    "entries",
    "hits",
    "misses",
    "hit_rate",
    "compile_seconds_saved",
    "levels",
    "totals",
    "unreadable_files",
}


def key_of(i: int) -> str:
    return f"{i:064x}"


@pytest.fixture(autouse=True)
def _fresh_tallies():
    """This process's per-level tallies start from 0 (other tests' reads stay theirs)."""
    counters.zero_tallies()
    yield
    counters.zero_tallies()


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def stats_json(capsys) -> dict:
    rc, out, err = run(capsys, "cache", "stats", "--json")
    assert rc == cli.EXIT_OK, err
    return json.loads(out)


def cache_dir() -> str:
    return os.environ["CUPY_RAWCODE_CACHE_DIR"]


def test_stats_show_stored_and_uncompressed_sizes_and_the_ratio(capsys):
    disk = DirectoryStore(cache_dir())
    for i in range(4):
        disk.put(key_of(i), encode(key_of(i), CODE, {"arch": "sm_90"}))
    disk.put(key_of(9), encode(key_of(9), os.urandom(3000), {}))  # does not compress
    files = [e.path for e in disk.entries()]
    stored = sum(os.path.getsize(p) for p in files)
    got = stats_json(capsys)["entries"]
    plain_extra = 4 * len(CODE)  # what the four compressed entries would take more, plain
    assert got["count"] == 5 and got["stored_bytes"] == stored and got["unreadable"] == 0
    assert stored < got["uncompressed_bytes"] < stored + plain_extra
    assert got["ratio"] == round(got["uncompressed_bytes"] / stored, 3) and got["ratio"] > 2
    rc, out, _ = run(capsys, "cache", "stats")
    assert rc == cli.EXIT_OK
    assert f"uncompressed ({got['ratio']:.2f}x)" in out and "stored    " in out


def test_an_entry_that_cannot_be_read_counts_as_stored_plain(capsys):
    disk = DirectoryStore(cache_dir())
    disk.put(key_of(1), encode(key_of(1), CODE, {}))
    disk.path(key_of(2)).write_bytes(b"not an entry at all" * 10)
    got = stats_json(capsys)["entries"]
    assert got["count"] == 2 and got["unreadable"] == 1


def test_json_schema_is_stable_and_counts_every_local_level(capsys, tmp_path):
    disk = DirectoryStore(cache_dir())
    write_bundle(tmp_path / "app.bundle", [(key_of(7), encode(key_of(7), CODE, {}))])
    levels = Levels([open_store("memory:"), disk, ReadOnly(open_store(tmp_path / "app.bundle"))])
    levels.put(key_of(1), encode(key_of(1), CODE, {}))  # memory and disk write it
    assert levels.fetch(key_of(1))[2] == "memory"
    assert levels.fetch(key_of(7))[2] == "bundle:app.bundle (read-only)"  # copied to memory
    assert levels.fetch(key_of(5)) is None  # every level misses
    got = stats_json(capsys)
    assert set(got) == TOP_KEYS and got["schema"] == 1
    assert set(got["levels"]) == {"local", "remote"} and got["levels"]["remote"] == {}
    local = got["levels"]["local"]
    assert set(local) == {"memory", "disk", "bundle:app.bundle"}
    assert all(set(c) == LEVEL_KEYS | {SAVED} for c in local.values())
    entry_bytes = len(encode(key_of(1), CODE, {}))
    assert local["memory"] == {
        "hits": 1,
        "misses": 2,
        "errors": 0,
        "timeouts": 0,
        "writes": 2,
        "bytes_read": entry_bytes,
        "bytes_written": entry_bytes + len(encode(key_of(7), CODE, {})),
        SAVED: 0,  # its entries recorded no compile time
    }
    assert (local["disk"]["hits"], local["disk"]["misses"], local["disk"]["writes"]) == (0, 2, 1)
    assert (local["bundle:app.bundle"]["hits"], local["bundle:app.bundle"]["misses"]) == (1, 1)
    assert got["totals"]["hits"] == 2 and got["totals"]["misses"] == 5
    assert got["hits"] == 2 and got["misses"] is not None
    assert set(got["files"]) >= {"entries", "manifests", "index", "toolchain"}
    rc, out, _ = run(capsys, "cache", "stats")
    assert "local storage:\n  memory " in out and "remote storage:" not in out
    assert "  bundle:app.bundle " in out and "1 hits, 1 misses" in out


def test_zero_clears_every_count(capsys):
    disk = DirectoryStore(cache_dir())
    levels = Levels([open_store("memory:"), disk])
    levels.put(key_of(1), encode(key_of(1), CODE, {}))
    levels.fetch(key_of(1))
    levels.record(False)
    before = stats_json(capsys)
    assert before["totals"]["writes"] == 2 and before["hits"] == 1
    rc, out, _ = run(capsys, "cache", "stats", "--json", "-z")
    assert rc == cli.EXIT_OK and json.loads(out)["totals"] == before["totals"]  # shown, then 0
    after = stats_json(capsys)
    assert after["hits"] == 0 and after["misses"] == 0
    assert all(v == 0 for v in after["totals"].values())
    assert all(v == 0 for c in after["levels"]["local"].values() for v in c.values())


@pytest.mark.parametrize(
    "recorded, saved_ms",
    [
        (1.5, 1500),  # an entry's compile_seconds, saved by each hit
        (0.0004, 0),  # under half a millisecond: nothing to show
        (None, 0),  # written before entries recorded it
        ("1.5", 0),  # not a number
        (True, 0),  # a bool is no duration
        (-2.0, 0),
        (float("nan"), 0),
        (float("inf"), 0),
        (1e9, 0),  # more than a day: not a compile time
    ],
)
def test_each_hit_adds_the_compile_time_its_entry_recorded(capsys, recorded, saved_ms):
    disk = DirectoryStore(cache_dir())
    meta = {} if recorded is None else {"compile_seconds": recorded}
    disk.put(key_of(3), encode(key_of(3), CODE, meta))
    for _ in range(2):  # two processes' worth of hits: each served from the disk level
        assert Levels([open_store("memory:"), disk]).fetch(key_of(3))[2] == "disk"
    got = stats_json(capsys)
    assert got["levels"]["local"]["disk"][SAVED] == 2 * saved_ms
    assert got["totals"][SAVED] == 2 * saved_ms
    assert got["compile_seconds_saved"] == 2 * saved_ms / 1000
    _, out, _ = run(capsys, "cache", "stats")
    assert ("saved     3.0 s of compiling" in out) == (saved_ms == 1500)


@pytest.mark.parametrize("action", ["list", "clear", "prune"])
def test_json_goes_with_stats_only(capsys, action):
    rc, _, err = run(capsys, "cache", action, "--json")
    assert rc == cli.EXIT_USAGE and "--json goes with 'cache stats'" in err


def test_merge_levels_takes_dicts_and_level_counts():
    c = counts()
    c["hits"], c["errors"], c["writes"] = 2, 1, 3
    merged = counters.merge_levels(
        {"disk": {"hits": 1, "bytes_read": 10}, "redis": {"timeouts": 2, "junk": 5}},
        {"disk": c, "redis": {"hits": -3, "misses": "x"}},  # nonsense counts as 0
    )
    assert merged["disk"] == {**dict.fromkeys(LEVEL_KEYS | {SAVED}, 0), "hits": 3, "errors": 1} | {
        "writes": 3,
        "bytes_read": 10,
    }
    assert merged["redis"] == {**dict.fromkeys(LEVEL_KEYS | {SAVED}, 0), "timeouts": 2}


@pytest.mark.parametrize(
    "name, local",
    [
        ("memory", True),
        ("disk", True),
        ("disk (read-only)", True),
        ("bundle:app.bundle", True),
        ("bundle:app.bundle (read-only)", True),
        ("redis", False),
        ("s3", False),
        ("http", False),
        ("my_pkg.stores:S3Store", False),
    ],
)
def test_levels_are_grouped_local_and_remote(name, local):
    assert counters.is_local(name) is local
    assert name in counters.grouped({name: {}})["local" if local else "remote"]


def test_merge_levels_takes_what_levels_stats_gives(tmp_path):
    disk = DirectoryStore(tmp_path / "c")
    levels = Levels([open_store("memory:"), disk])
    levels.put(key_of(1), encode(key_of(1), CODE, {}))
    levels.fetch(key_of(1))
    levels.fetch(key_of(2))
    merged = counters.merge_levels(levels.stats())
    assert list(merged) == ["memory", "disk"]
    for name, c in zip(merged, levels.counts, strict=True):
        assert merged[name] == {f: c[f] for f in LEVEL_KEYS} | {SAVED: 0}
    assert merged["memory"]["hits"] == 1 and merged["disk"]["misses"] == 1


def test_two_levels_of_one_name_in_levels_stats_add_up():
    rows = [{"level": "redis", "hits": 2}, {"level": "redis", "hits": 3, "timeouts": 1}]
    assert counters.merge_levels({"levels": rows})["redis"]["hits"] == 5


def test_the_collected_stats_take_another_mapping_of_levels(capsys):
    from cupy_rawcode.cli import stats
    from cupy_rawcode.store import maintenance

    disk = maintenance.disk()
    got = stats.collect(disk, {"redis": {"hits": 4, "timeouts": 1}}, {"redis": {"hits": 1}})
    assert got["levels"]["remote"]["redis"]["hits"] == 5
    assert got["levels"]["remote"]["redis"]["timeouts"] == 1
    assert "remote storage:\n  redis " in "\n".join(stats.lines(got))


def _add_one_hit(root: str, n: int) -> None:
    for _ in range(n):
        counters.tally("disk")["hits"] += 1
        counters.keep_tallies(DirectoryStore(root, max_bytes=0).root)


def test_processes_adding_their_counts_at_once_lose_none(tmp_path):
    root = tmp_path / "shared"
    # a marked cache, unbounded: no background recount holds a lock while the test forks
    DirectoryStore(root, max_bytes=0).put(key_of(1), encode(key_of(1), b"x", {}))
    counters.zero_tallies()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_add_one_hit, args=(str(root), 20)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert counters.read_levels(root)["disk"]["hits"] == 80


def test_counts_of_another_process_are_kept_at_its_exit(capsys, tmp_path):
    DirectoryStore(cache_dir()).put(key_of(1), encode(key_of(1), CODE, {}))
    counters.zero_tallies()
    script = (
        "from cupy_rawcode.store import make_store\n"
        "s = make_store()\n"
        f"assert s.fetch({key_of(1)!r}) is not None and s.fetch({key_of(2)!r}) is None\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    local = stats_json(capsys)["levels"]["local"]
    assert (local["disk"]["hits"], local["disk"]["misses"]) == (1, 1)
    assert (local["memory"]["hits"], local["memory"]["misses"], local["memory"]["writes"]) == (
        0,
        2,
        1,
    )


def test_maintenance_reads_are_no_look_ups(capsys, tmp_path):
    disk = DirectoryStore(cache_dir())
    disk.put(key_of(1), encode(key_of(1), CODE, {}))
    counters.zero_tallies()
    for argv in (["cache", "list", "-l"], ["bundle", "export", tmp_path / "b.bundle"]):
        assert run(capsys, *argv)[0] == cli.EXIT_OK
    assert run(capsys, "bundle", "info", tmp_path / "b.bundle")[0] == cli.EXIT_OK
    local = stats_json(capsys)["levels"]["local"]
    assert all(c["hits"] == 0 and c["misses"] == 0 for c in local.values()), local


def test_a_remote_levels_counts_reach_cache_stats(capsys):
    """What a Levels counted for a remote level in this process is shown under "remote" by
    `cache stats` (its tally is kept with the local levels' ones), not only by Levels.stats()."""
    team = dict_store(sizes=False, location="team://cache")
    team.put(key_of(3), encode(key_of(3), CODE, {}))
    levels = Levels([open_store("memory:"), DirectoryStore(cache_dir()), team])
    assert levels.fetch(key_of(3))[2] == "team"  # a hit, copied to memory and disk
    assert levels.fetch(key_of(4)) is None  # a miss in every level
    remote = stats_json(capsys)["levels"]["remote"]
    assert set(remote) == {"team"}
    assert (remote["team"]["hits"], remote["team"]["misses"]) == (1, 1)
    assert dict(levels.counts[2]) == {k: remote["team"][k] for k in COUNTS}
