"""Direct mode (as ccache's): remember a source's closure, validated by ``stat``, to key it again
in a new process without re-scanning headers.

A manifest is keyed by everything that decides the closure *on this machine* (source, options,
absolute search directories) and holds the closure's digest and each closure file's (size,
mtime_ns, inode), grouped by directory (one ``fstatat`` per file, relative to its directory).
If every file still stats the same, the stored digest is used; otherwise the closure is
resolved again and the manifest replaced. A new file shadowing a header earlier in the search
path is not seen by ``stat`` validation (ccache has the same limit): ``cupy-rawcode cache clear``.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import config
from .key import closure_digest, digest_fields
from .stamps import group, hold

SCHEMA = "cupy-rawcode-manifest-4"
_memo: dict[str, dict] = {}  # manifest id -> its data, in this process
NOT_LOOKED_UP = object()  # closure_digests' default: look the manifest up first


def manifest_id(source: str, ctx, pre_includes: tuple[str, ...]) -> str:
    fields = [("schema", SCHEMA), ("source", source), ("source_dir", ctx.source_dir or "")]
    fields += [("pre_include", p) for p in pre_includes]
    fields += ctx.opts.key_fields()
    fields += [("dir", f"{d.tag}={d.path}") for d in ctx.dirs]
    return digest_fields(fields)


def _path(mid: str) -> Path:
    return config.cache_dir() / "manifests" / mid[:2] / f"{mid}.json"


def _load(mid: str) -> dict | None:
    data = _memo.get(mid)
    try:
        if data is None:
            data = json.loads(_path(mid).read_bytes())
            if data.get("schema") != SCHEMA or not isinstance(data["closure"], str) \
                    or not isinstance(data["count"], int):
                return None
        return data if hold(data["dirs"]) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing, unreadable or of the wrong shape: a miss


def lookup(source: str, ctx, pre_includes: tuple[str, ...] = ()) -> tuple[str, int, list] | None:
    """(closure digest, header count, the headers' stamp groups) when a valid manifest knows
    this closure, else None."""
    mid = manifest_id(source, ctx, pre_includes)
    data = _load(mid)
    if data is None:
        return None
    _memo[mid] = data
    return data["closure"], data["count"], data["dirs"]


def closure_digests(source: str, ctx, pre_includes: tuple[str, ...] = (),
                    known=NOT_LOOKED_UP):
    """((closure digest, header count, stamp groups), closure or None when the manifest
    answered).
    ``known`` is a ``lookup`` result the caller already has (None: no manifest, so it is
    not read again)."""
    if known is NOT_LOOKED_UP:
        known = lookup(source, ctx, pre_includes)
    if known is not None:
        return known, None
    from .closure import resolve_fast  # not imported on a hit
    mid = manifest_id(source, ctx, pre_includes)
    closure = resolve_fast(source, ctx, pre_includes)
    closure.raise_for_missing()
    ids = [(h.path, *closure.file_ids[h.path][1:]) for h in closure.headers]
    data = {"schema": SCHEMA, "closure": closure_digest(closure.digests()), "count": len(ids),
            "dirs": group(ids)}
    _memo[mid] = data
    try:
        from .fsutil import atomic_write  # not imported on a hit
        atomic_write(_path(mid), json.dumps(data).encode())
    except OSError:
        pass  # a read-only cache still keys and compiles; store.py warns once
    return (data["closure"], len(ids), data["dirs"]), closure
