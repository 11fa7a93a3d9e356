"""Entries with their code zstd-compressed (entry.py format 3): the round trip
through every local store, the previous format still read, and every way compressed bytes can
lie (damage, a wrong declared size, a decompression bomb, an unknown codec, zstandard missing)
is a miss, never a crash or wrong code."""

from __future__ import annotations

import hashlib
import json
import logging
import os

import pytest

from cupy_rawcode.ground import ENTRY_LIMIT
from cupy_rawcode.ground.errors import EntryError
from cupy_rawcode.store import Levels, entry, open_store
from cupy_rawcode.store.bundle import write_bundle
from cupy_rawcode.store.entry import MAGIC, MAGIC_2, decode, encode, head_length, sizes

zstandard = pytest.importorskip("zstandard")

KEY = "ab" * 32
# code that compresses as a cubin does: repeated instruction-like words, some noise
CODE = b"".join(i.to_bytes(4, "little") * 3 + b"\x00\x01\x02\x03SASS" for i in range(4000))


def v2_entry(key: str, code: bytes, meta: dict) -> bytes:
    """An entry of the previous format (2), as earlier releases wrote it."""
    head = json.dumps({**meta, "key": key, "size": len(code)}, sort_keys=True).encode()
    body = MAGIC_2 + len(head).to_bytes(8, "little") + head + code
    return body + hashlib.sha256(body).digest()


def v3_entry(key: str, stored: bytes, fields: dict) -> bytes:
    """A format-3 entry with any metadata and stored bytes, its checksum made right: only the
    checks behind the checksum can refuse it (what a careless or hostile writer could store)."""
    head = json.dumps({**fields, "key": key}, sort_keys=True).encode()
    body = MAGIC + len(head).to_bytes(8, "little") + head + stored
    return body + hashlib.sha256(body).digest()


def split(data: bytes) -> tuple[dict, bytes]:
    """(metadata, stored code) of a format-3 entry."""
    end = head_length(data)
    assert end is not None
    return json.loads(data[len(MAGIC) + 8 : end]), data[end:-32]


def test_compressible_code_is_stored_compressed_and_read_back():
    data = encode(KEY, CODE, {"arch": "sm_90"})
    meta, stored = split(data)
    assert meta["codec"] == "zstd" and meta["stored"] == len(stored) < len(CODE) // 2
    code, got = decode(KEY, data)
    assert code == CODE and got["arch"] == "sm_90" and got["size"] == len(CODE)
    assert sizes(data[: head_length(data)]) == (len(stored), len(CODE))


@pytest.mark.parametrize(
    "code, why",
    [
        (os.urandom(4096), "does not get smaller"),
        (b"x" * 100, "shorter than MIN_SIZE"),
        (b"", "empty"),
    ],
)
def test_code_that_does_not_pay_is_stored_as_it_is(code, why):
    data = encode(KEY, code, {})
    meta, stored = split(data)
    assert "codec" not in meta and stored == code, why
    assert decode(KEY, data)[0] == code
    assert sizes(data[: head_length(data)]) == (len(code), len(code))


def test_compress_false_stores_uncompressed():
    meta, stored = split(encode(KEY, CODE, {}, compress=False))
    assert "codec" not in meta and stored == CODE


def test_an_entry_of_the_previous_format_is_still_read():
    old = v2_entry(KEY, CODE, {"arch": "sm_80", "symbols": {"k<1>": "_Z1kILi1EEvv"}})
    code, meta = decode(KEY, old)
    assert code == CODE and meta["arch"] == "sm_80" and meta["symbols"]["k<1>"]
    assert sizes(old[: head_length(old)]) == (len(CODE), len(CODE))
    with pytest.raises(EntryError, match="another key"):
        decode("cd" * 32, old)
    with pytest.raises(EntryError, match="checksum"):
        decode(KEY, old[:-40] + bytes([old[-40] ^ 1]) + old[-39:])


def test_a_future_format_is_a_miss():
    with pytest.raises(EntryError, match="another format version"):
        decode(KEY, b"CUPY-RAWCODE-ENTRY-4\n" + bytes(64))


def packed(code: bytes = CODE, **options) -> bytes:
    return zstandard.ZstdCompressor(level=3, **options).compress(code)


@pytest.mark.parametrize(
    "name, stored, fields, match",
    [
        (
            "damaged frame",
            packed()[:40] + bytes(64) + packed()[104:],
            {"size": len(CODE), "codec": "zstd"},
            "damaged zstd data|zstd data gave",
        ),
        ("not a frame", b"\x00" * 64, {"size": len(CODE), "codec": "zstd"}, "not a zstd frame"),
        (
            "frame declares another size",
            packed(),
            {"size": len(CODE) - 1, "codec": "zstd"},
            "declares",
        ),
        (
            "frame without its size",
            packed(write_content_size=False),
            {"size": len(CODE), "codec": "zstd"},
            "declares",
        ),
        ("cut short", packed()[:-20], {"size": len(CODE), "codec": "zstd"}, "damaged|gave"),
        ("unknown codec", packed(), {"size": len(CODE), "codec": "lz4"}, "unknown codec"),
        (
            "stored length lies",
            packed(),
            {"size": len(CODE), "codec": "zstd", "stored": 5},
            "length",
        ),
        ("negative size", packed(), {"size": -1, "codec": "zstd"}, "length"),
        ("size not a number", packed(), {"size": "1", "codec": "zstd"}, "length"),
        ("uncompressed, size lies", CODE, {"size": len(CODE) + 1}, "length"),
    ],
)
def test_compressed_bytes_that_lie_are_a_miss(name, stored, fields, match):
    fields = {"stored": len(stored), **fields}
    with pytest.raises(EntryError, match=match):
        decode(KEY, v3_entry(KEY, stored, fields))


def test_damage_behind_the_checksum_is_found_before_decompressing(monkeypatch):
    data = bytearray(encode(KEY, CODE, {}))
    data[len(data) - 100] ^= 0x10  # in the compressed code
    monkeypatch.setattr(entry, "decompress", pytest.fail)
    with pytest.raises(EntryError, match="checksum"):
        decode(KEY, bytes(data))


def test_a_decompression_bomb_is_refused_before_decompressing(monkeypatch):
    bomb = packed(bytes(ENTRY_LIMIT + 1))  # 256 MiB of zeros: a few kB compressed
    calls = []
    monkeypatch.setattr(entry, "decompress", lambda *a: calls.append(a) or b"")
    with pytest.raises(EntryError, match="more than the limit"):
        decode(
            KEY,
            v3_entry(KEY, bomb, {"size": ENTRY_LIMIT + 1, "codec": "zstd", "stored": len(bomb)}),
        )
    assert not calls  # refused on the declared size alone


def test_a_bomb_declaring_a_small_size_is_never_decompressed(monkeypatch):
    bomb = packed(bytes(64 << 20))
    backend = entry.load_zstd()  # the module entry.py decompresses with
    monkeypatch.setattr(backend, "ZstdDecompressor", lambda *a, **k: pytest.fail("decompressed"))
    with pytest.raises(EntryError, match="declares 67108864 bytes, not 1000"):
        decode(KEY, v3_entry(KEY, bomb, {"size": 1000, "codec": "zstd", "stored": len(bomb)}))


def test_without_zstandard_entries_are_written_plain_and_compressed_ones_are_misses(monkeypatch):
    compressed = encode(KEY, CODE, {})
    monkeypatch.setattr(entry, "_backend", [])
    monkeypatch.setattr(entry, "_missing", ["No module named 'zstandard'"])
    assert entry.load_zstd() is None
    meta, stored = split(encode(KEY, CODE, {}))
    assert "codec" not in meta and stored == CODE
    with pytest.raises(EntryError, match="pip install 'cupy-rawcode\\[zstd\\]'"):
        decode(KEY, compressed)


def test_the_package_import_is_used_where_the_c_backend_cannot_be_loaded(monkeypatch):
    def broken():
        raise OSError("unusual install")

    monkeypatch.setattr(entry, "_backend", [])
    monkeypatch.setattr(entry, "_missing", [])
    monkeypatch.setattr(entry, "_c_backend", broken)
    assert decode(KEY, encode(KEY, CODE, {}))[0] == CODE
    assert entry._backend == [zstandard]


@pytest.mark.parametrize("kind", ["memory", "directory", "bundle"])
def test_compressed_entries_through_each_local_store(kind, tmp_path, caplog):
    keys = [f"{i:064x}" for i in range(3)]
    codes = {k: CODE + k.encode() for k in keys}
    entries = {k: encode(k, codes[k], {"arch": "sm_90"}) for k in keys}
    bad = bytearray(entries[keys[2]])
    bad[len(bad) // 2] ^= 1
    entries[keys[2]] = bytes(bad)
    if kind == "bundle":
        write_bundle(tmp_path / "b.bundle", entries.items())
        store = open_store(tmp_path / "b.bundle")
    else:
        store = open_store("memory:" if kind == "memory" else tmp_path / "cache")
        for k, data in entries.items():
            store.put(k, data)
    levels = Levels([store])
    for k in keys[:2]:
        code, meta, _ = levels.fetch(k)
        assert code == codes[k] and meta["codec"] == "zstd"
    with caplog.at_level(logging.WARNING, logger="cupy_rawcode"):
        assert levels.fetch(keys[2]) is None  # damaged: a miss, with the usual warning
    assert "ignoring a broken cache entry" in caplog.text
    assert levels.counts[0]["errors"] == 1
