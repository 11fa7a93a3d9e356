"""Stage 3, the key: takes a normalized request and its header closure (request.py) and gives
the cache key; the warm index (index.py) maps a kernel's inputs as given straight to it, checked
by file stamps (ground/stamps.py); a source's header manifest (manifest.py) keys it again
in a new process without re-scanning. The key itself is built here, so that a warm hit loads no more
modules than it needs.

The cache key: labelled, length-prefixed fields, schema version first, hashed with SHA-256.

It covers exactly what the compiler receives: source, normalized options (include directories as
tags, never paths), NVRTC version, arch, output kind, sorted name expressions and the closure's
(logical name, content digest) list. The closure enters as one field, the digest of that list
(closure_digest), so that a manifest can hold it and a warm key costs no per-header encoding.
The source's directory enters only through the closure: a header found there is named
``src:...``; when none is, a file and the same text as a string share a key. Paths enter only
where the compiled code holds them (headers/filename.py): the program name when the source can
expand ``__FILE__`` (``assert``), and every search directory's path under -lineinfo or -G.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from ..ground import config, digest_fields

SCHEMA = "cupy-rawcode-key-5"  # 2: SHA-256 header digests; 3: closure as one digest; 4: entries
#                                 hold NVRTC's log, CuPy's default options, program name; 5: the
#                                 source directory through the closure only, the program name and
#                                 search paths where the code holds them
STRIP_RULES = "library-globals-1"  # strip.py's rules: change this when they change
LINK_RULES = "cudadevrt-1"  # devrt.link's: bump when what it does to the same input changes


def strip_field() -> tuple[str, str]:
    """The key field of strip.py's post-processing: its rules' version, or 'off'
    (CUPY_RAWCODE_STRIP=0). Whether it applies to a request follows from the other fields
    (options, target, input kind), so strip.py is not imported to key a hit."""
    return ("strip", STRIP_RULES if config.strip() else "off")


def program_name(source: str, source_dir: str | None, source_name: str | None) -> str:
    """The name NVRTC gives the source: the user's file when there is one, else a stable name
    derived from the source, in a directory that does not exist (so that a quoted include never
    searches the working directory, as in CuPy)."""
    if source_dir:
        return os.path.join(source_dir, source_name or "kernel.cu")
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    return f"<source>/kernel-{digest[:12]}.cu"


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
