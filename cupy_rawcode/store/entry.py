"""A cache entry as bytes: magic, JSON metadata (with the code's SHA-256 and the key), code.
Never pickled; a corrupt, truncated or foreign entry raises EntryError and is a miss."""
from __future__ import annotations

import hashlib
import json

MAGIC = b"CUPY-RAWCODE-ENTRY-1\n"


class EntryError(ValueError):
    pass


def encode(key: str, code: bytes, meta: dict) -> bytes:
    head = json.dumps({**meta, "key": key, "size": len(code),
                       "sha256": hashlib.sha256(code).hexdigest()}, sort_keys=True).encode()
    return MAGIC + len(head).to_bytes(8, "little") + head + code


def decode(key: str, data: bytes) -> tuple[bytes, dict]:
    if not data.startswith(MAGIC):
        raise EntryError("not a cupy-rawcode entry")
    n = len(MAGIC)
    if len(data) < n + 8:
        raise EntryError("truncated header")
    hlen = int.from_bytes(data[n:n + 8], "little")
    try:
        meta = json.loads(data[n + 8:n + 8 + hlen])
    except ValueError:
        raise EntryError("unreadable metadata") from None
    if not isinstance(meta, dict):
        raise EntryError("metadata is not an object")
    code = data[n + 8 + hlen:]
    if meta.get("key") != key:
        raise EntryError("entry belongs to another key")
    if meta.get("size") != len(code) or meta.get("sha256") != hashlib.sha256(code).hexdigest():
        raise EntryError("code does not match its checksum")
    return code, meta
