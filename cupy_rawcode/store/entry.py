"""A cache entry as bytes: magic, JSON metadata (with the key, the code's size, how the code is
stored and its stored length), the code (compressed where that pays), and a SHA-256 of
everything before it. Never pickled; any damage (truncation, a flipped bit in the metadata or
the code, another key's entry, a foreign file, compressed data that does not give the size
declared) raises EntryError and is a miss.

Format 3 (``MAGIC``) is written; format 2 (``MAGIC_2``: the code always uncompressed, no
``codec``) is still read. The checksum covers the stored (compressed) bytes, so damage is found
before anything is decompressed, and a declared size over ``ENTRY_LIMIT`` is refused unread.

Two codecs, chosen by the code's size: code under ``ZSTD_FROM`` (256 KiB: every elementwise
and most CUB kernels) is deflated with the standard library's zlib, which CuPy has loaded
already, so a warm hit of such a kernel loads nothing; larger code is zstd-compressed when the
``zstandard`` package is installed (the ``zstd`` extra; the ``cu12`` and ``cu13`` extras bring
it), which decompresses it 4.5x faster, and deflated otherwise (zstd.py: loaded on the first
such entry; a zstd entry read where zstandard is missing is a miss, never a crash).
"""

from __future__ import annotations

import hashlib
import json
import zlib

from ..ground import ENTRY_LIMIT, deferred, json_data

errors = deferred("cupy_rawcode.ground.errors")  # EntryError: a broken entry only
zstd = deferred("cupy_rawcode.store.zstd")  # code of ZSTD_FROM bytes or more only

CLOSURE_RECORD = "closure_record"  # a metadata field: the key of the entry's closure record
MAGIC = b"CUPY-RAWCODE-ENTRY-3\n"
MAGIC_2 = b"CUPY-RAWCODE-ENTRY-2\n"  # read, never written
_DIGEST = 32


def encode(key: str, code: bytes, meta: dict, *, compress: bool = True) -> bytes:
    """The entry's bytes: the code compressed when ``compress`` and it gets smaller (``codec``
    "zlib" or "zstd", ``stored`` its length), else stored as it is."""
    packed = _compress(code) if compress else None
    fields = {**meta, "key": key, "size": len(code)}
    stored = code
    if packed is not None:  # no codec: stored as it is (and ``stored`` is ``size``)
        codec, stored = packed
        fields.update(codec=codec, stored=len(stored))
    head = json.dumps(fields, sort_keys=True).encode()
    body = MAGIC + len(head).to_bytes(8, "little") + head + stored
    return body + hashlib.sha256(body).digest()


def decode(key: str, data: bytes) -> tuple[bytes, dict]:
    """(code, metadata) of the entry of ``key`` in ``data`` (format 3 or 2); EntryError for
    anything else."""
    version = 3 if data.startswith(MAGIC) else 2 if data.startswith(MAGIC_2) else 0
    if not version:
        raise errors.EntryError("not a cupy-rawcode entry (or one of another format version)")
    n = len(MAGIC)  # both magics are this long
    if len(data) < n + 8 + _DIGEST:
        raise errors.EntryError("truncated")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise errors.EntryError("contents do not match their checksum")
    hlen = int.from_bytes(body[n : n + 8], "little")
    meta = json_data(body[n + 8 : n + 8 + hlen])  # None: not JSON, or nested too deep for json
    if meta is None:
        raise errors.EntryError("unreadable metadata")
    if not isinstance(meta, dict):
        raise errors.EntryError("metadata is not an object")
    stored = body[n + 8 + hlen :]
    if meta.get("key") != key:
        raise errors.EntryError("entry belongs to another key")
    if version == 2:
        if meta.get("size") != len(stored):
            raise errors.EntryError("code length does not match the metadata")
        return stored, meta
    return _unpack(stored, meta), meta


def _unpack(stored: bytes, meta: dict) -> bytes:
    """The code of a format-3 entry from its stored bytes, checked against the metadata."""
    size, codec = meta.get("size"), meta.get("codec", "none")
    if meta.get("stored", size) != len(stored) or type(size) is not int or size < 0:
        raise errors.EntryError("code length does not match the metadata")
    if codec == "none":
        if size != len(stored):
            raise errors.EntryError("code length does not match the metadata")
        return stored
    if codec not in ("zlib", "zstd"):
        raise errors.EntryError(f"code stored with an unknown codec {codec!r}")
    if size > ENTRY_LIMIT:
        raise errors.EntryError(f"declares {size} bytes of code, more than the limit {ENTRY_LIMIT}")
    return decompress(codec, stored, size)


def sizes(head: bytes) -> tuple[int, int] | None:
    """(stored code bytes, code bytes once decompressed) from an entry's first bytes (its magic,
    length and metadata: ``head_length`` says how many), or None when they are no entry's."""
    n = len(MAGIC)
    version = 3 if head.startswith(MAGIC) else 2 if head.startswith(MAGIC_2) else 0
    end = head_length(head)
    if not version or end is None or len(head) < end:
        return None
    meta = json_data(head[n + 8 : end])
    if not isinstance(meta, dict) or "size" not in meta:
        return None
    size = meta["size"]
    stored = meta.get("stored", size) if version == 3 else size
    if type(size) is not int or type(stored) is not int:
        return None
    return stored, size


def head_length(head: bytes) -> int | None:
    """How many bytes an entry's magic, length and metadata take, from its first 29 bytes
    (``len(MAGIC) + 8``); None when they are no entry's."""
    n = len(MAGIC)
    if len(head) < n + 8 or not (head.startswith(MAGIC) or head.startswith(MAGIC_2)):
        return None
    return n + 8 + int.from_bytes(head[n : n + 8], "little")


def entry_log(meta: dict, program: str | None) -> str:
    """NVRTC's log stored with an entry, naming ``program`` where it named the program the entry
    was compiled as: a file and the same text as a string share an entry (key/__init__.py), and
    each sees its own name in the warnings replayed on a hit."""
    log = meta.get("log")
    if not isinstance(log, str):
        return ""
    compiled_as = meta.get("program")
    if log and program and isinstance(compiled_as, str) and compiled_as and compiled_as != program:
        log = log.replace(compiled_as, program)
    return log


# ------------------------------------------------------------------ the codecs

MIN_SIZE = 256  # shorter code is stored as it is (a codec's overhead would eat the gain)
ZSTD_FROM = 256 << 10  # below: zlib (loading zstd costs a process more than zlib's slower
#                        decompression of a smaller cubin: 0.8 ms for 256 KiB on the CPU VM)
ZLIB_LEVEL = 6  # zlib's default: 3.0x on the cache's cubins, about 20 ms per MiB to compress


def _compress(code: bytes) -> tuple[str, bytes] | None:
    """(codec, ``code`` compressed), or None: the code is shorter than MIN_SIZE, or it did not
    get smaller. zstd (one frame declaring its size) from ZSTD_FROM bytes when zstandard is
    installed, else zlib."""
    if len(code) < MIN_SIZE:
        return None
    codec, packed = "zstd", zstd.compress(code) if len(code) >= ZSTD_FROM else None
    if packed is None:
        codec, packed = "zlib", zlib.compress(code, ZLIB_LEVEL)
    return (codec, packed) if len(packed) < len(code) else None


def decompress(codec: str, packed: bytes, size: int) -> bytes:
    """The ``size`` bytes that ``packed`` (of ``codec``, "zlib" or "zstd") holds: never more
    (``size`` was checked against a limit by the caller), and exactly that many; else
    EntryError."""
    return _inflate(packed, size) if codec == "zlib" else zstd.decompress(packed, size)


def _inflate(packed: bytes, size: int) -> bytes:
    """zlib's data: never more than ``size`` + 1 bytes are made (the one more says it lies),
    and the stream must end after exactly ``size``, at the end of ``packed``."""
    inflater = zlib.decompressobj()
    try:
        # one byte more than declared, never 0 (zlib's "no limit"): a stream that gives it lies
        code = inflater.decompress(packed, size + 1)
        if len(code) <= size and not inflater.eof:  # the stream's end, or a byte too many
            code += inflater.decompress(inflater.unconsumed_tail, 1)
    except zlib.error as e:
        raise errors.EntryError(f"damaged zlib data ({e})") from None
    if len(code) > size:
        raise errors.EntryError(f"zlib data gives more than {size} bytes")
    if not inflater.eof or inflater.unused_data:
        raise errors.EntryError("zlib data cut short, or followed by other bytes")
    if len(code) != size:
        raise errors.EntryError(f"zlib data gave {len(code)} bytes, not {size}")
    return code
