"""Entries with their code compressed (entry.py format 3: zlib under ZSTD_FROM bytes, zstd from
there when zstandard is installed): the round trip of each codec through every local store, the
codec chosen by size, the previous format still read, and every way compressed bytes can lie
(damage, a wrong declared size, a decompression bomb, an unknown codec, zstandard missing) is a
miss, never a crash or wrong code."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import zlib

import pytest

from cupy_rawcode.ground import ENTRY_LIMIT
from cupy_rawcode.ground.errors import EntryError
from cupy_rawcode.store import Levels, entry, open_store, zstd
from cupy_rawcode.store.bundle import write_bundle
from cupy_rawcode.store.entry import MAGIC, MAGIC_2, decode, encode, head_length, sizes

try:
    import zstandard
except ImportError:  # the zlib cases still run
    zstandard = None

needs_zstd = pytest.mark.skipif(zstandard is None, reason="zstandard is not installed")

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


@pytest.fixture(params=["zlib", pytest.param("zstd", marks=needs_zstd)])
def codec(request, monkeypatch):
    """Each codec in turn: zstd by lowering the size it starts from to CODE's."""
    if request.param == "zstd":
        monkeypatch.setattr(entry, "ZSTD_FROM", len(CODE))
    return request.param


@pytest.mark.parametrize(
    "size, codec_used",
    [
        (entry.MIN_SIZE, "zlib"),
        (entry.ZSTD_FROM - 1, "zlib"),
        pytest.param(entry.ZSTD_FROM, "zstd", marks=needs_zstd),
        pytest.param(4 * entry.ZSTD_FROM, "zstd", marks=needs_zstd),
    ],
)
def test_the_codec_follows_the_code_size(size, codec_used):
    code = (CODE * (size // len(CODE) + 1))[:size]
    data = encode(KEY, code, {})
    meta, stored = split(data)
    assert meta["codec"] == codec_used and len(stored) < len(code) // 2
    assert decode(KEY, data)[0] == code


def test_compressible_code_is_stored_compressed_and_read_back(codec):
    data = encode(KEY, CODE, {"arch": "sm_90"})
    meta, stored = split(data)
    assert meta["codec"] == codec and meta["stored"] == len(stored) < len(CODE) // 2
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


def test_metadata_nested_deeper_than_json_reads_is_a_miss():
    """A checksum-valid entry whose metadata nests past the recursion limit is a miss (an
    EntryError, a ValueError that Levels counts as broken), never a RecursionError."""
    head = b"[" * 100_000
    body = MAGIC + len(head).to_bytes(8, "little") + head
    data = body + hashlib.sha256(body).digest()
    with pytest.raises(EntryError, match="unreadable metadata"):
        decode(KEY, data)
    assert sizes(data[: head_length(data)]) is None


def test_a_future_format_is_a_miss():
    with pytest.raises(EntryError, match="another format version"):
        decode(KEY, b"CUPY-RAWCODE-ENTRY-4\n" + bytes(64))


def packed(code: bytes = CODE, **options) -> bytes:
    return zstandard.ZstdCompressor(level=3, **options).compress(code)


def deflated(code: bytes = CODE) -> bytes:
    return zlib.compress(code, 6)


def zstd_lies():
    """(name, stored, fields, match) of zstd data that lies (built only with zstandard)."""
    if zstandard is None:
        return []
    return [
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
        ("zstd cut short", packed()[:-20], {"size": len(CODE), "codec": "zstd"}, "damaged|gave"),
        (
            "bytes after the frame",
            packed() + b"junk",
            {"size": len(CODE), "codec": "zstd"},
            "damaged",
        ),
        ("a second frame", packed() + packed(), {"size": len(CODE), "codec": "zstd"}, "damaged"),
        (
            "zstd stored length lies",
            packed(),
            {"size": len(CODE), "codec": "zstd", "stored": 5},
            "length",
        ),
        ("unknown codec", packed(), {"size": len(CODE), "codec": "lz4"}, "unknown codec"),
    ]


ZLIB_LIES = [
    (
        "damaged stream",
        deflated()[:40] + bytes(64) + deflated()[104:],
        {"size": len(CODE), "codec": "zlib"},
        "damaged zlib data|cut short|gave",
    ),
    ("not a stream", b"\x00" * 64, {"size": len(CODE), "codec": "zlib"}, "damaged zlib data"),
    ("gives more than declared", deflated(), {"size": len(CODE) - 1, "codec": "zlib"}, "more than"),
    ("declares nothing", deflated(), {"size": 0, "codec": "zlib"}, "more than 0 bytes"),
    ("gives less than declared", deflated(), {"size": len(CODE) + 1, "codec": "zlib"}, "gave"),
    ("zlib cut short", deflated()[:-20], {"size": len(CODE), "codec": "zlib"}, "cut short"),
    (
        "zlib without its checksum",
        deflated()[:-4],
        {"size": len(CODE), "codec": "zlib"},
        "cut short",
    ),
    (
        "bytes after the stream",
        deflated() + b"extra",
        {"size": len(CODE), "codec": "zlib"},
        "followed",
    ),
    (
        "zlib stored length lies",
        deflated(),
        {"size": len(CODE), "codec": "zlib", "stored": 5},
        "length",
    ),
    ("negative size", deflated(), {"size": -1, "codec": "zlib"}, "length"),
    ("size not a number", deflated(), {"size": "1", "codec": "zlib"}, "length"),
    ("uncompressed, size lies", CODE, {"size": len(CODE) + 1}, "length"),
]


@pytest.mark.parametrize("name, stored, fields, match", ZLIB_LIES + zstd_lies())
def test_compressed_bytes_that_lie_are_a_miss(name, stored, fields, match):
    fields = {"stored": len(stored), **fields}
    with pytest.raises(EntryError, match=match):
        decode(KEY, v3_entry(KEY, stored, fields))


def test_damage_behind_the_checksum_is_found_before_decompressing(monkeypatch, codec):
    data = bytearray(encode(KEY, CODE, {}))
    data[len(data) - 100] ^= 0x10  # in the compressed code
    monkeypatch.setattr(entry, "decompress", pytest.fail)
    with pytest.raises(EntryError, match="checksum"):
        decode(KEY, bytes(data))


def test_a_decompression_bomb_is_refused_before_decompressing(monkeypatch, codec):
    zeros = bytes(ENTRY_LIMIT + 1)  # 256 MiB of zeros: a few kB compressed
    bomb = packed(zeros) if codec == "zstd" else zlib.compress(zeros, 1)
    calls = []
    monkeypatch.setattr(entry, "decompress", lambda *a: calls.append(a) or b"")
    fields = {"size": ENTRY_LIMIT + 1, "codec": codec, "stored": len(bomb)}
    with pytest.raises(EntryError, match="more than the limit"):
        decode(KEY, v3_entry(KEY, bomb, fields))
    assert not calls  # refused on the declared size alone


@needs_zstd
def test_a_zstd_bomb_declaring_a_small_size_is_never_decompressed(monkeypatch):
    bomb = packed(bytes(64 << 20))
    backend = zstd.load()  # the module zstd.py decompresses with
    monkeypatch.setattr(backend, "ZstdDecompressor", lambda *a, **k: pytest.fail("decompressed"))
    with pytest.raises(EntryError, match="declares 67108864 bytes, not 1000"):
        decode(KEY, v3_entry(KEY, bomb, {"size": 1000, "codec": "zstd", "stored": len(bomb)}))


@pytest.fixture
def inflated(monkeypatch) -> list[int]:
    """The bytes each call of the inflater entry.py uses makes; a call without a limit (zlib
    reads 0 as none) fails the test."""
    made: list[int] = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self):
            self.inner = real()

        def decompress(self, data, max_length=0):
            assert max_length > 0, "decompressed without a limit"
            out = self.inner.decompress(data, max_length)
            made.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(entry.zlib, "decompressobj", Counting)
    return made


ZLIB_BOMB = zlib.compress(bytes(64 << 20), 1)  # 64 MiB of zeros in ~64 KiB


@pytest.mark.parametrize("size", [1000, 0])  # 0: zlib's "no limit", never passed on
def test_a_zlib_bomb_declaring_a_small_size_makes_no_more_than_that(inflated, size):
    fields = {"size": size, "codec": "zlib", "stored": len(ZLIB_BOMB)}
    with pytest.raises(EntryError, match=f"more than {size} bytes"):
        decode(KEY, v3_entry(KEY, ZLIB_BOMB, fields))
    assert sum(inflated) <= size + 1


def test_without_zstandard_code_is_deflated_and_zstd_entries_are_misses(monkeypatch):
    monkeypatch.setattr(entry, "ZSTD_FROM", len(CODE))
    zstd_entry = encode(KEY, CODE, {}) if zstandard is not None else None
    monkeypatch.setattr(zstd, "_backend", [])
    monkeypatch.setattr(zstd, "_missing", ["No module named 'zstandard'"])
    assert zstd.load() is None
    meta, stored = split(encode(KEY, CODE, {}))  # large enough for zstd: deflated instead
    assert meta["codec"] == "zlib" and decode(KEY, encode(KEY, CODE, {}))[0] == CODE
    if zstd_entry is not None:
        with pytest.raises(EntryError, match="pip install 'cupy-rawcode\\[zstd\\]'"):
            decode(KEY, zstd_entry)


@needs_zstd
def test_a_zstandard_too_old_to_refuse_extra_data_counts_as_missing(monkeypatch):
    """zstandard before 0.22 has no allow_extra_data: it is not used (large code is deflated,
    zstd entries are misses naming the extra), never a decompressor that accepts trailing bytes
    or a TypeError on every hit."""

    class Old:  # zstandard's interface before 0.22
        frame_content_size = staticmethod(zstandard.frame_content_size)
        ZstdCompressor = zstandard.ZstdCompressor

        class ZstdDecompressor:
            def decompress(self, data, max_output_size=0):
                return zstandard.ZstdDecompressor().decompress(data, max_output_size)

    monkeypatch.setattr(entry, "ZSTD_FROM", len(CODE))
    zstd_entry = encode(KEY, CODE, {})
    monkeypatch.setattr(zstd, "_backend", [])
    monkeypatch.setattr(zstd, "_missing", [])
    monkeypatch.setattr(zstd, "_c_backend", lambda: Old)
    assert zstd.load() is None and "older than 0.22" in zstd._missing[0]
    assert split(encode(KEY, CODE, {}))[0]["codec"] == "zlib"
    with pytest.raises(EntryError, match="pip install 'cupy-rawcode\\[zstd\\]'"):
        decode(KEY, zstd_entry)


@needs_zstd
def test_the_package_import_is_used_where_the_c_backend_cannot_be_loaded(monkeypatch):
    def broken():
        raise OSError("unusual install")

    monkeypatch.setattr(entry, "ZSTD_FROM", len(CODE))
    monkeypatch.setattr(zstd, "_backend", [])
    monkeypatch.setattr(zstd, "_missing", [])
    monkeypatch.setattr(zstd, "_c_backend", broken)
    assert decode(KEY, encode(KEY, CODE, {}))[0] == CODE
    assert zstd._backend == [zstandard]


def test_a_small_kernel_never_loads_zstd(monkeypatch):
    """A warm hit of a kernel under ZSTD_FROM (most are) loads no codec module: zlib is the
    standard library's, which CuPy has loaded already."""
    monkeypatch.setattr(zstd, "load", lambda: pytest.fail("zstd loaded"))
    data = encode(KEY, CODE, {})
    assert split(data)[0]["codec"] == "zlib" and decode(KEY, data)[0] == CODE


@pytest.mark.parametrize("kind", ["memory", "directory", "bundle"])
def test_compressed_entries_through_each_local_store(kind, tmp_path, caplog, codec):
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
        assert code == codes[k] and meta["codec"] == codec
    with caplog.at_level(logging.WARNING, logger="cupy_rawcode"):
        assert levels.fetch(keys[2]) is None  # damaged: a miss, with the usual warning
    assert "ignoring a broken cache entry" in caplog.text
    assert levels.counts[0]["errors"] == 1
