"""Stage 3, the key: takes a normalized request and its header closure (request.py) and gives
the cache key; the warm index (index.py) maps a kernel's inputs as given straight to it, checked
by file stamps (stamps.py). The key itself is built here, so that a warm hit loads no more
modules than it needs.

The cache key: labelled, length-prefixed fields, schema version first, hashed with SHA-256.

It covers exactly what the compiler receives: source, normalized options (include directories as
tags, never paths), NVRTC version, arch, output kind, sorted name expressions and the closure's
(logical name, content digest) list. The closure enters as one field, the digest of that list
(closure_digest), so that a manifest can hold it and a warm key costs no per-header encoding.
Install paths never enter it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

SCHEMA = "cupy-rawcode-key-4"  # 2: SHA-256 header digests; 3: closure as one digest; 4: entries
#                                 hold NVRTC's log, CuPy's default options, program name
STRIP_RULES = "library-globals-1"  # strip.py's rules: change this when they change


def strip_field() -> tuple[str, str]:
    """The key field of strip.py's post-processing: its rules' version, or 'off'
    (CUPY_RAWCODE_STRIP=0). Whether it applies to a request follows from the other fields
    (options, target, input kind), so strip.py is not imported to key a hit."""
    from .. import config

    return ("strip", STRIP_RULES if config.strip() else "off")


def encode_fields(fields: Iterable[tuple[str, str | bytes]]) -> bytes:
    """label, value pairs as len(label) label len(value) value: unambiguous, no reprs."""
    out = bytearray()
    for label, value in fields:
        lab = label.encode()
        val = value if isinstance(value, bytes) else value.encode("utf-8")
        out += len(lab).to_bytes(4, "little") + lab + len(val).to_bytes(8, "little") + val
    return bytes(out)


def key_fields(
    *,
    source: str,
    option_fields: list[tuple[str, str]],
    search_tags: list[str],
    nvrtc_version: str,
    arch: str,
    target: str,
    name_expressions: Iterable[str],
    closure: str,
    extra: Iterable[tuple[str, str]] = (),
) -> list:
    """All fields of a key, in a fixed order (pure; see module docstring)."""
    fields: list[tuple[str, str]] = [("schema", SCHEMA), ("source", source)]
    fields += option_fields
    fields += [("search", tag) for tag in search_tags]
    fields += [("nvrtc", nvrtc_version), ("arch", arch), ("target", target)]
    fields += [("name_expression", n) for n in sorted(set(name_expressions))]
    fields += list(extra)
    fields += [("closure", closure)]
    return fields


def closure_digest(closure: Iterable[tuple[str, str]]) -> str:
    """The digest of a sorted (logical name, content digest) list: the closure's key field."""
    fields: list[tuple[str, str]] = [("closure_schema", SCHEMA)]
    for logical, digest in closure:
        fields += [("header", logical), ("digest", digest)]
    return digest_fields(fields)


def digest_fields(fields: list) -> str:
    return hashlib.sha256(encode_fields(fields)).hexdigest()
