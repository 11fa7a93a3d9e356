"""The stamped record (ground/stamps.py: StampedRecord), the one skeleton of the header manifests,
the warm index and the toolchain record: a round trip, and each way a record is a miss."""

import json
import os

import pytest

from cupy_rawcode.ground import StampedRecord, stamps

SCHEMA = "test-record-2"
RID = "ab" + "0" * 62


def _publish(root, path, data: bytes) -> None:
    """What store/sizebound.publish does, less the size bound: write the file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _refuse(root, path, data: bytes) -> None:
    raise PermissionError(13, "read-only", str(path))


@pytest.fixture
def made(tmp_path):
    """A record of one stamped file, saved in a cache at tmp_path/cache."""
    watched = tmp_path / "src" / "a.h"
    watched.parent.mkdir()
    watched.write_text("a")
    record = StampedRecord("things", SCHEMA, owned=lambda root: True, valid=_valid)
    root = tmp_path / "cache"
    rec, values = stamps.take([stamps.stamp(str(watched))])
    data = record.save(root, RID, {"answer": 42, "stamps": rec}, _publish)
    return {"record": record, "root": root, "watched": watched, "data": data, "values": values}


def _valid(data: dict) -> bool:
    return isinstance(data["answer"], int)


def _rewrite(m, **changes):
    path = m["record"].path(m["root"], RID)
    data = json.loads(path.read_bytes())
    data.update(changes)
    path.write_text(json.dumps(data))


def _bump(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


# each case changes one thing, as a new process would meet it (the memo emptied), and says
# whether load then gives the record
CASES = {
    "round trip": (lambda m: None, True),
    "another schema": (lambda m: _rewrite(m, schema="test-record-1"), False),
    "no schema": (lambda m: _rewrite(m, schema=None), False),
    "a stamped file changed": (lambda m: m["watched"].write_text("bb"), False),
    "a stamped file touched": (lambda m: _bump(m["watched"]), False),
    "a stamped file removed": (lambda m: m["watched"].unlink(), False),
    "not JSON": (lambda m: m["record"].path(m["root"], RID).write_bytes(b"{"), False),
    "JSON, not an object": (lambda m: m["record"].path(m["root"], RID).write_text("[1]"), False),
    "JSON nested deeper than json reads": (lambda m: _write(m, "[" * 5000 + "]" * 5000), False),
    "an object nested deeper than json reads": (
        lambda m: _write(m, '{"a":' * 5000 + "1" + "}" * 5000),
        False,
    ),
    "not UTF-8": (lambda m: _write(m, b'{"schema": "\xff"}'), False),
    "the record removed": (lambda m: m["record"].path(m["root"], RID).unlink(), False),
    "a field the caller refuses": (lambda m: _rewrite(m, answer="42"), False),
    "a field the caller needs is gone": (lambda m: _drop(m), False),
    "stamps of the wrong shape": (lambda m: _rewrite(m, stamps={"dirs": 3}), False),
    "a directory where the record was": (lambda m: _replace_by_dir(m), False),
}


def _write(m, text: str | bytes) -> None:
    path = m["record"].path(m["root"], RID)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def _drop(m):
    path = m["record"].path(m["root"], RID)
    data = json.loads(path.read_bytes())
    del data["answer"]
    path.write_text(json.dumps(data))


def _replace_by_dir(m):
    path = m["record"].path(m["root"], RID)
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_record_loads_only_while_it_is_whole_of_its_schema_and_its_stamps_hold(case, made):
    record, root = made["record"], made["root"]
    change, loads = CASES[case]
    change(made)
    record.memo.clear()  # a new process
    got = record.load(root, RID)
    if loads:
        assert got == (made["data"], made["values"])
        assert got[0] == {"schema": SCHEMA, "answer": 42, "stamps": made["data"]["stamps"]}
    else:
        assert got is None


def test_the_schema_is_written_first_and_the_fields_as_given(made):
    text = made["record"].path(made["root"], RID).read_text()
    assert list(json.loads(text)) == ["schema", "answer", "stamps"]
    assert text == json.dumps(made["data"])


def test_the_memo_serves_while_the_stamps_hold_and_is_dropped_when_they_do_not(made):
    record, root, path = made["record"], made["root"], made["record"].path(made["root"], RID)
    assert record.memo == {path: made["data"]}  # save remembers
    path.write_bytes(b"{")  # the memo is served: the file is not read again
    assert record.load(root, RID) == (made["data"], made["values"])
    made["watched"].write_text("changed")
    assert record.load(root, RID) is None  # the memo's stamps are checked each time
    assert record.memo == {}


def test_a_loaded_record_is_remembered_and_marked_used(made):
    record, root, path = made["record"], made["root"], made["record"].path(made["root"], RID)
    record.memo.clear()
    os.utime(path, ns=(0, 0))
    assert record.load(root, RID) is not None
    assert path.stat().st_mtime_ns > 0  # the size bound evicts the least recently used first
    assert record.memo == {path: made["data"]}


def test_discard_forgets_the_record_here_and_on_disk(made):
    record, root, path = made["record"], made["root"], made["record"].path(made["root"], RID)
    record.discard(root, RID)
    assert record.memo == {} and not path.exists()
    assert record.load(root, RID) is None
    record.discard(root, RID)  # none there: nothing to do


def test_a_cache_not_owned_is_never_read_nor_removed_from(made):
    record = StampedRecord("things", SCHEMA, owned=lambda root: False)
    path = record.path(made["root"], RID)
    assert path.exists()
    assert record.load(made["root"], RID) is None
    record.discard(made["root"], RID)
    assert path.exists()


def test_a_read_only_cache_writes_nothing_and_this_process_remembers(tmp_path):
    record = StampedRecord("things", SCHEMA, owned=lambda root: True)
    rec, values = stamps.take([])
    data = record.save(tmp_path, RID, {"stamps": rec}, _refuse)  # must not raise
    assert not record.path(tmp_path, RID).exists()
    assert record.load(tmp_path, RID) == (data, values)


def test_without_memo_every_load_reads_the_file(made):
    record = StampedRecord("things", SCHEMA, owned=lambda root: True, remember=False)
    assert record.load(made["root"], RID) == (made["data"], made["values"])
    assert record.memo == {}
    record.path(made["root"], RID).write_bytes(b"{")
    assert record.load(made["root"], RID) is None


@pytest.mark.parametrize(
    "shard, where", [(2, "things/ab/" + RID + ".json"), (0, "things/" + RID + ".json")]
)
def test_where_a_record_lives(tmp_path, shard, where):
    record = StampedRecord("things", SCHEMA, owned=lambda root: True, shard=shard)
    assert record.path(tmp_path, RID) == tmp_path / where


def test_entries_give_back_what_take_was_given(tmp_path):
    present = tmp_path / "d" / "f.h"
    present.parent.mkdir()
    present.write_text("x")
    given = (stamps.stamp(str(present)), stamps.absent(str(tmp_path / "e" / "gone.h")))
    rec, values = stamps.take(given)
    assert stamps.entries(rec, values) == given
