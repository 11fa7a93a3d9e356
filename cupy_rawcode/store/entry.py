"""A cache entry as bytes: magic, JSON metadata (with the key and the code's size), code, and a
SHA-256 of everything before it. Never pickled; any damage (truncation, a flipped bit in the
metadata or the code, another key's entry, a foreign file) raises EntryError and is a miss."""

from __future__ import annotations

import hashlib
import json

from ..ground.errors import RawcodeError

MAGIC = b"CUPY-RAWCODE-ENTRY-2\n"
_DIGEST = 32


class EntryError(RawcodeError, ValueError):
    """Bytes that are no valid entry of the key asked for: a miss."""


def encode(key: str, code: bytes, meta: dict) -> bytes:
    head = json.dumps({**meta, "key": key, "size": len(code)}, sort_keys=True).encode()
    body = MAGIC + len(head).to_bytes(8, "little") + head + code
    return body + hashlib.sha256(body).digest()


def decode(key: str, data: bytes) -> tuple[bytes, dict]:
    if not data.startswith(MAGIC):
        raise EntryError("not a cupy-rawcode entry (or one of another format version)")
    n = len(MAGIC)
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
    code = body[n + 8 + hlen :]
    if meta.get("key") != key:
        raise EntryError("entry belongs to another key")
    if meta.get("size") != len(code):
        raise EntryError("code length does not match the metadata")
    return code, meta


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
