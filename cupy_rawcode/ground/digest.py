"""Labelled, length-prefixed fields and their SHA-256: the one encoding behind the cache key, the
closure digest, the header manifests' and the toolchain record's ids."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def encode_fields(fields: Iterable[tuple[str, str | bytes]]) -> bytes:
    """label, value pairs as len(label) label len(value) value: unambiguous, no reprs."""
    out = bytearray()
    for label, value in fields:
        lab = label.encode()
        val = value if isinstance(value, bytes) else value.encode("utf-8")
        out += len(lab).to_bytes(4, "little") + lab + len(val).to_bytes(8, "little") + val
    return bytes(out)


def digest_fields(fields: list) -> str:
    """The SHA-256 (hex) of the encoded fields."""
    return hashlib.sha256(encode_fields(fields)).hexdigest()
