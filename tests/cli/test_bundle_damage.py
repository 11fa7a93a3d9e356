"""``bundle info`` on a bundle whose index names entries with no valid span (a damaged length,
a span that is no pair of ints >= 0): each is listed BROKEN and the command exits 4, as the
README says; as a read layer the bundle skips them with one warning. Each row passed
``bundle info`` (exit 0, "0 broken") before the fix."""

import json

import pytest

from cupy_rawcode import cli
from cupy_rawcode.ground import ENTRY_LIMIT
from cupy_rawcode.store.bundle import MAGIC, BundleStore, read_index, write_bundle
from cupy_rawcode.store.entry import encode

GOOD, DAMAGED = "aa" * 32, "bb" * 32

SPANS = {
    "a negative offset": ([-5, 10], "bad span [-5, 10]"),
    "a length over the limit": ([0, ENTRY_LIMIT + 1], f"length {ENTRY_LIMIT + 1} in the index"),
    "a huge length": ([0, 2**62], f"length {2**62} in the index"),
    "three numbers": ([0, 1, 2], "bad span [0, 1, 2]"),
    "a string": ("0:10", 'bad span "0:10"'),
    "a float length": ([0, 1.5], "bad span [0, 1.5]"),
    "a boolean": ([0, True], "bad span [0, true]"),
}


def _damaged_bundle(tmp_path, span):
    """A bundle of two entries whose index gives the second ``span``."""
    path = tmp_path / "app.bundle"
    write_bundle(path, [(k, encode(k, b"x" * 300, {"arch": "sm_90"})) for k in (GOOD, DAMAGED)])
    data = path.read_bytes()
    hlen = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
    index = json.loads(data[len(MAGIC) + 8 : len(MAGIC) + 8 + hlen])
    index["entries"][DAMAGED] = span
    head = json.dumps(index).encode()
    body = data[len(MAGIC) + 8 + hlen :]
    path.write_bytes(MAGIC + len(head).to_bytes(8, "little") + head + body)
    return path


@pytest.mark.parametrize("span, words", SPANS.values(), ids=SPANS.keys())
def test_bundle_info_lists_a_malformed_index_entry_broken(capsys, tmp_path, span, words):
    path = _damaged_bundle(tmp_path, span)
    rc = cli.main(["bundle", "info", str(path)])
    out, err = capsys.readouterr()
    assert rc == cli.EXIT_ERROR
    assert f"{GOOD}  sm_90 " in out
    line = next(x for x in out.splitlines() if x.startswith(DAMAGED))
    assert "BROKEN" in line and words in line
    assert "2 entries" in out and "1 broken" in out
    assert "app.bundle: 1 of 2 index entries malformed" in err


@pytest.mark.parametrize("span, words", SPANS.values(), ids=SPANS.keys())
def test_a_bundle_layer_skips_a_malformed_entry_with_one_warning(tmp_path, caplog, span, words):
    path = _damaged_bundle(tmp_path, span)
    assert read_index(path).bad.keys() == {DAMAGED}
    store = BundleStore(path)
    assert store.get(GOOD) is not None
    assert store.get(DAMAGED) is None and store.get(DAMAGED) is None
    warned = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert len(warned) == 1 and str(path) in warned[0]
