"""A cache entry as bytes: magic, JSON metadata (with the key, the code's size, how the code is
stored and its stored length), the code (zstd-compressed where that pays, compression.py), and
a SHA-256 of everything before it. Never pickled; any damage (truncation, a flipped bit in the
metadata or the code, another key's entry, a foreign file, a zstd frame that does not give the
size declared) raises EntryError and is a miss.

Format 3 (``MAGIC``) is written; format 2 (``MAGIC_2``: the code always uncompressed, no
``codec``) is still read. The checksum covers the stored (compressed) bytes, so damage is found
before anything is decompressed, and a declared size over ``ENTRY_LIMIT`` is refused unread.
"""

from __future__ import annotations

import hashlib
import json

from ..ground import RawcodeError
from ..ground.regular import ENTRY_LIMIT
from . import compression

MAGIC = b"CUPY-RAWCODE-ENTRY-3\n"
MAGIC_2 = b"CUPY-RAWCODE-ENTRY-2\n"  # read, never written
_DIGEST = 32


class EntryError(RawcodeError, ValueError):
    """Bytes that are no valid entry of the key asked for: a miss."""


def encode(key: str, code: bytes, meta: dict, *, compress: bool = True) -> bytes:
    """The entry's bytes: the code zstd-compressed when ``compress``, zstandard is installed
    and it gets smaller (``codec`` "zstd", ``stored`` its length), else stored as it is."""
    packed = compression.compress(code) if compress else None
    fields = {**meta, "key": key, "size": len(code)}
    if packed is not None:  # no codec: stored as it is (and ``stored`` is ``size``)
        fields.update(codec="zstd", stored=len(packed))
    head = json.dumps(fields, sort_keys=True).encode()
    stored = code if packed is None else packed
    body = MAGIC + len(head).to_bytes(8, "little") + head + stored
    return body + hashlib.sha256(body).digest()


def decode(key: str, data: bytes) -> tuple[bytes, dict]:
    """(code, metadata) of the entry of ``key`` in ``data`` (format 3 or 2); EntryError for
    anything else."""
    version = 3 if data.startswith(MAGIC) else 2 if data.startswith(MAGIC_2) else 0
    if not version:
        raise EntryError("not a cupy-rawcode entry (or one of another format version)")
    n = len(MAGIC)  # both magics are this long
    if len(data) < n + 8 + _DIGEST:
        raise EntryError("truncated")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise EntryError("contents do not match their checksum")
    hlen = int.from_bytes(body[n : n + 8], "little")
    try:
        meta = json.loads(body[n + 8 : n + 8 + hlen])
    except ValueError:
        raise EntryError("unreadable metadata") from None
    if not isinstance(meta, dict):
        raise EntryError("metadata is not an object")
    stored = body[n + 8 + hlen :]
    if meta.get("key") != key:
        raise EntryError("entry belongs to another key")
    if version == 2:
        if meta.get("size") != len(stored):
            raise EntryError("code length does not match the metadata")
        return stored, meta
    return _unpack(stored, meta), meta


def _unpack(stored: bytes, meta: dict) -> bytes:
    """The code of a format-3 entry from its stored bytes, checked against the metadata."""
    size, codec = meta.get("size"), meta.get("codec", "none")
    if meta.get("stored", size) != len(stored) or type(size) is not int or size < 0:
        raise EntryError("code length does not match the metadata")
    if codec == "none":
        if size != len(stored):
            raise EntryError("code length does not match the metadata")
        return stored
    if codec != "zstd":
        raise EntryError(f"code stored with an unknown codec {codec!r}")
    if size > ENTRY_LIMIT:
        raise EntryError(f"declares {size} bytes of code, more than the limit {ENTRY_LIMIT}")
    try:
        return compression.decompress(stored, size)
    except compression.CompressionError as e:
        raise EntryError(str(e)) from None


def sizes(head: bytes) -> tuple[int, int] | None:
    """(stored code bytes, code bytes once decompressed) from an entry's first bytes (its magic,
    length and metadata: ``head_length`` says how many), or None when they are no entry's."""
    n = len(MAGIC)
    version = 3 if head.startswith(MAGIC) else 2 if head.startswith(MAGIC_2) else 0
    end = head_length(head)
    if not version or end is None or len(head) < end:
        return None
    try:
        meta = json.loads(head[n + 8 : end])
        size = meta["size"]
        stored = meta.get("stored", size) if version == 3 else size
    except (ValueError, TypeError, KeyError):
        return None
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
