"""JSON nested deeper than json can read (``[[[...]]]``, a million levels) in any JSON the cache keeps
or is handed is a miss, never a RecursionError: the cache's own records (manifests, the warm
index, the toolchain record, ``stats/counts``), the records inside valid (checksummed) entries
any level may serve (a failure record, a closure record), an entry's metadata and a bundle's
index. All of them read JSON through one reader, ``ground.json_data``."""

from __future__ import annotations

import hashlib
import json

import pytest

from cupy_rawcode.ground import json_data
from cupy_rawcode.ground.errors import EntryError
from cupy_rawcode.store import Levels, counters, set_store
from cupy_rawcode.store.base import tally
from cupy_rawcode.store.bundle import MAGIC, BundleError, read_index
from cupy_rawcode.store.entry import MAGIC as ENTRY_MAGIC
from cupy_rawcode.store.entry import decode, encode, sizes
from cupy_rawcode.store.memory import MemoryStore

# json recurses once per level, up to a limit that depends on Python (3.13 reads 9,998 levels,
# 3.10-3.12 fewer than 5,000; 3.14 measures the C stack): a million levels is past every one
DEEP = b"[" * 1_000_000 + b"]" * 1_000_000
DEEP_OBJECT = b'{"a":' * 1_000_000 + b"1" + b"}" * 1_000_000
KEY = "ab" * 32

# bytes -> what the one reader gives: None is a miss
READS = [
    (b'{"hits": 3}', {"hits": 3}),
    (b"[1, 2]", [1, 2]),
    (b"[" * 30 + b"]" * 30, json.loads("[" * 30 + "]" * 30)),
    (DEEP, None),
    (DEEP_OBJECT, None),
    (b"{", None),
    (b"", None),
    (b'{"a": "\xff"}', None),  # not UTF-8
    (b"1" * 5000, None),  # an int longer than Python converts
    (None, None),  # no file
]


@pytest.mark.parametrize("raw, value", READS, ids=range(len(READS)))
def test_json_data_reads_json_and_gives_none_for_anything_else(raw, value):
    assert json_data(raw) == value


def _depth(value) -> int:
    """How deeply ``value`` nests lists (walked without recursion)."""
    n = 0
    while isinstance(value, list):
        n, value = n + 1, value[0] if value else None
    return n


@pytest.mark.parametrize("depth", [4000, 5000, 9000, 12000])
def test_json_as_deep_as_some_pythons_read_is_read_or_a_miss_never_an_error(depth):
    """Near the limit, whether json reads it depends on the Python: all of it, or None."""
    value = json_data(b"[" * depth + b"]" * depth)
    assert value is None or _depth(value) == depth


# ---------------------------------------------------------------- each reader, deep JSON met


def _counts(root, text: bytes):
    (root / "stats").mkdir(parents=True, exist_ok=True)
    (root / "stats" / "counts").write_bytes(text)


def _read_counts(tmp_path, deep):
    _counts(tmp_path, deep)
    return counters.read_counts(tmp_path)


def _read_levels(tmp_path, deep):
    _counts(tmp_path, deep)
    return counters.read_levels(tmp_path)


def _keep_tallies(tmp_path, deep):
    """A process's tallies added to a stats/counts that holds deep JSON: it is rewritten."""
    _counts(tmp_path, deep)
    counters.zero_tallies()
    tally("disk")["hits"] += 2
    counters.keep_tallies(tmp_path)
    return json.loads((tmp_path / "stats" / "counts").read_bytes())["levels"]["disk"]["hits"]


def _failure_record(tmp_path, deep):
    from cupy_rawcode.orchestrator import failures

    return failures.read(deep, "CompileError")


def _closure_record(tmp_path, deep):
    """A closure record's entry, whole and checksummed, from any level: its text is deep."""
    from cupy_rawcode.key import portable

    store = MemoryStore()
    store.put(KEY, encode(KEY, deep, {"target": portable.TARGET}))
    set_store(Levels([store]))
    try:
        return portable.load(KEY, None)  # no ctx: the record is refused before it is read
    finally:
        set_store(None)


def _bundle_index(tmp_path, deep):
    path = tmp_path / "deep.bundle"
    path.write_bytes(MAGIC + len(deep).to_bytes(8, "little") + deep)
    with pytest.raises(BundleError, match="unreadable index") as e:
        read_index(path)
    return str(e.value)


def _entry_metadata(tmp_path, deep):
    head = ENTRY_MAGIC + len(deep).to_bytes(8, "little") + deep
    with pytest.raises(EntryError, match="unreadable metadata"):
        decode(KEY, head + hashlib.sha256(head).digest())
    return sizes(head)


# reader -> (what it does with deep JSON, what it gives)
READERS = {
    "stats/counts: the folded counts": (_read_counts, {}),
    "stats/counts: the levels' counts": (_read_levels, {}),
    "stats/counts: a process's tallies added": (_keep_tallies, 2),
    "a failure record in a valid entry": (_failure_record, None),
    "a closure record in a valid entry": (_closure_record, None),
    "a bundle's index": (_bundle_index, "unreadable index (not JSON, or nested too deeply)"),
    "an entry's metadata": (_entry_metadata, None),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("deep", [DEEP, DEEP_OBJECT], ids=["array", "object"])
def test_deep_json_is_a_miss_for_every_reader(tmp_path, reader, deep):
    read, expected = READERS[reader]
    assert read(tmp_path, deep) == expected


# ---------------------------------------------------------------- the command line


def test_bundle_info_on_a_deep_index_says_it_is_unreadable_without_a_traceback(tmp_path, capsys):
    from cupy_rawcode.cli import main

    path = tmp_path / "deep.bundle"
    path.write_bytes(MAGIC + len(DEEP).to_bytes(8, "little") + DEEP)
    assert main(["bundle", "info", str(path)]) == 4
    err = capsys.readouterr().err
    assert (
        err == f"cupy-rawcode: error: {path}: unreadable index (not JSON, or nested too deeply)\n"
    )
