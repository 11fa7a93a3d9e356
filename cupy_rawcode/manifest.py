"""Direct mode (as ccache's): remember a source's closure, validated by ``stat``, to key it again
in a new process without re-scanning headers.

A manifest is keyed by everything that decides the closure *on this machine* (source, options,
absolute search directories) and lists each closure file with (size, mtime_ns, inode) and its
digest. If every file still stats the same, the stored digests are used; otherwise the closure is
resolved again and the manifest replaced. A new file shadowing a header earlier in the search
path is not seen by ``stat`` validation (ccache has the same limit): ``cupy-rawcode cache clear``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from . import config
from .fsutil import atomic_write
from .key import digest_fields

SCHEMA = "cupy-rawcode-manifest-2"
_memo: dict[str, list] = {}


def manifest_id(source: str, ctx, pre_includes: tuple[str, ...]) -> str:
    fields = [("schema", SCHEMA), ("source", source), ("source_dir", ctx.source_dir or "")]
    fields += [("pre_include", p) for p in pre_includes]
    fields += ctx.opts.key_fields()
    fields += [("dir", f"{d.tag}={d.path}") for d in ctx.dirs]
    return digest_fields(fields)


def _path(mid: str) -> Path:
    return config.cache_dir() / "manifests" / mid[:2] / f"{mid}.json"


def _valid(files: list) -> bool:
    for path, size, mtime, ino, _logical, _digest in files:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_size != size or st.st_mtime_ns != mtime or st.st_ino != ino:
            return False
    return True


def _load(mid: str) -> list | None:
    files = _memo.get(mid)
    if files is None:
        try:
            data = json.loads(_path(mid).read_bytes())
            if data.get("schema") != SCHEMA:
                return None
            files = data["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
    try:
        return files if _valid(files) else None
    except (TypeError, ValueError):  # a manifest of the wrong shape is a miss
        return None


def lookup(source: str, ctx, pre_includes: tuple[str, ...] = ()) -> list | None:
    """The sorted (logical, digest) list when a valid manifest knows this closure, else None."""
    mid = manifest_id(source, ctx, pre_includes)
    files = _load(mid)
    if files is None:
        return None
    _memo[mid] = files
    return sorted((f[4], f[5]) for f in files)


def closure_digests(source: str, ctx, pre_includes: tuple[str, ...] = (), known=None):
    """(sorted (logical, digest) list, closure or None when the manifest answered).
    ``known`` is a ``lookup`` result the caller already has."""
    from .closure import resolve_fast
    if known is None:
        known = lookup(source, ctx, pre_includes)
    if known is not None:
        return known, None
    mid = manifest_id(source, ctx, pre_includes)
    closure = resolve_fast(source, ctx, pre_includes)
    closure.raise_for_missing()
    files = [[h.path, *closure.file_ids[h.path][1:], h.logical, h.digest] for h in closure.headers]
    _memo[mid] = files
    try:
        atomic_write(_path(mid), json.dumps({"schema": SCHEMA, "files": files}).encode())
    except OSError:
        pass  # a read-only cache still keys and compiles; store.py warns once
    return closure.digests(), closure
