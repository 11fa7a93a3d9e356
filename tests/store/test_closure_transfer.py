"""Closure records travel with the entries that name them (store/transfer.py CLOSURE_RECORD):
a pull, a push and ``bundle export --prebuilt`` take them along, counted apart from entries; a
record no level holds, or a name that is no key, is no error."""

from __future__ import annotations

import pytest

from cupy_rawcode import cli
from cupy_rawcode.store import entry, maintenance, transfer
from cupy_rawcode.store.bundle import BundleStore
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import encode

RECORD = "c" * 64
OTHER = "d" * 64


def key_of(i: int) -> str:
    return f"{i + 0xABC:064x}"


def kernel(key: str, record: object = RECORD) -> bytes:
    meta = {"arch": "sm_90", entry.CLOSURE_RECORD: record}
    return encode(key, b"code " + key[-6:].encode(), meta)


def record(key: str = RECORD) -> bytes:
    return encode(key, b'{"schema": "cupy-rawcode-closure-1"}', {"target": "closure-record"})


# (what an entry's CLOSURE_RECORD holds, the records named)
NAMES = [
    ("a record's key", RECORD, [RECORD]),
    ("none", None, []),
    ("not a key", "../../etc/passwd", []),
    ("upper-case hex", RECORD.upper(), []),
    ("a number", 7, []),
    ("its own key", key_of(0), []),
]


@pytest.mark.parametrize("value, named", [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
def test_the_record_an_entry_names(value, named):
    entries = [(key_of(0), kernel(key_of(0), value))]
    assert transfer.records_named(entries) == named
    assert transfer.records_named(entries * 2) == named  # each once
    assert transfer.records_named(entries, {RECORD}) == []  # skipped: transferred already
    assert transfer.named_record(key_of(0), b"damaged") is None


@pytest.mark.parametrize("held_locally", [False, True], ids=["fetched", "local"])
def test_a_pull_takes_the_records_its_entries_name(tmp_path, held_locally):
    remote, local = DirectoryStore(tmp_path / "remote"), DirectoryStore(tmp_path / "local")
    keys = [key_of(i) for i in range(3)]
    for key in keys:
        remote.put(key, kernel(key, RECORD if key != keys[2] else OTHER))
    remote.put(RECORD, record())  # OTHER is held nowhere: no error
    if held_locally:
        for key in keys:
            local.put(key, kernel(key, RECORD if key != keys[2] else OTHER))
    summary = transfer.pull(keys, [remote], local)
    assert summary.asked == 3 and summary.records == 1 and summary.missing == 0
    assert local.get(RECORD) == record() and local.get(OTHER) is None
    assert transfer.pull(keys, [remote], local).records == 0  # held now


def test_a_push_sends_the_records_its_entries_name(tmp_path):
    local, remote = DirectoryStore(tmp_path / "local"), DirectoryStore(tmp_path / "remote")
    keys = [key_of(i) for i in range(3)]
    for key in keys:
        local.put(key, kernel(key))
    local.put(RECORD, record())
    summary = transfer.push(keys, local, [remote])
    assert summary.asked == 3 and summary.records == 1 and summary.sent == {remote.location: 3}
    assert remote.get(RECORD) == record()


def test_a_prebuilt_bundle_carries_the_records(tmp_path, capsys):
    disk = maintenance.disk()
    keys = [key_of(i) for i in range(3)]
    for key in keys:
        disk.put(key, kernel(key))
    disk.put(RECORD, record())
    disk.put(OTHER, record(OTHER))  # named by no prebuilt entry: left out
    disk.put(key_of(9), kernel(key_of(9), OTHER))  # not prebuilt
    assert maintenance.record_prebuilt(keys) is None
    out = tmp_path / "app.bundle"
    assert cli.main(["bundle", "export", str(out), "--prebuilt"]) == 0
    assert f"wrote 3 entries to {out} with 1 closure records" in capsys.readouterr().out
    assert BundleStore(out).keys() == sorted([*keys, RECORD])
    assert cli.main(["bundle", "info", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"{RECORD}  closure record" in shown and "3 entries and 1 closure records" in shown
