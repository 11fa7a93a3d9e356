"""A compiled entry names its closure's portable record (key/portable.py), stored beside it,
so that a bundle export or a pull takes the record along; a closure too small for a record
names none."""

import shutil

import pytest
from conftest import corpus

from cupy_rawcode.headers import fast
from cupy_rawcode.key import manifest, portable
from cupy_rawcode.key.request import compute_key, context, make_request
from cupy_rawcode.orchestrator.compiling import compile_request
from cupy_rawcode.store import default_store
from cupy_rawcode.store.entry import CLOSURE_RECORD, decode


@pytest.mark.parametrize("name, has_record", [("block_reduce.cu", True), ("plain.cu", False)])
def test_an_entry_names_its_closure_record(name, has_record):
    result = compile_request(make_request(corpus(name), arch="sm_90"))
    store = default_store()
    _code, meta = decode(result.key, store.get(result.key))
    record = meta.get(CLOSURE_RECORD)
    assert (record is not None) == has_record
    if has_record:
        _text, head = decode(record, store.get(record))
        assert head["target"] == portable.TARGET
        assert compile_request(make_request(corpus(name), arch="sm_90")).hit


def test_a_record_holds_where_a_tag_names_several_directories(tmp_path, monkeypatch):
    """CuPy's CCCL is three directories under one tag: each header's record names its own."""
    dirs = context(make_request(corpus("block_reduce.cu"), arch="sm_90")).dirs
    tags = [d.tag for d in dirs]
    if len(set(tags)) == len(tags):
        pytest.skip("no tag names several directories in this toolkit")
    key = compute_key(make_request(corpus("block_reduce.cu"), arch="sm_90")).key
    manifest._memo.clear()
    shutil.rmtree(tmp_path / "cache" / "manifests")
    monkeypatch.setattr(fast, "resolve_fast", None)  # calling it fails
    assert compute_key(make_request(corpus("block_reduce.cu"), arch="sm_90")).key == key
