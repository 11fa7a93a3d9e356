"""Direct mode (as ccache's): remember a source's closure, validated by ``stat``, to key it again
in a new process without re-scanning headers.

A manifest is keyed by everything that decides the closure *on this machine* (source, options,
absolute search directories) and holds the closure's digest and the stamps (size, mtime_ns,
inode; stamps.py) each closure file had when it was read.
If every file still stats the same, the stored digest is used; otherwise the closure is
resolved again and the manifest replaced. A new file shadowing a header earlier in the search
path is not seen by ``stat`` validation (ccache has the same limit): ``cupy-rawcode cache clear``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import config
from ..key import closure_digest, digest_fields
from ..key.stamps import check, take

SCHEMA = "cupy-rawcode-manifest-6"  # 5: stamps.py records; 6: their digest covers values only
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


def _load(mid: str) -> tuple[dict, list] | None:
    """(manifest data, its files' stamps now) while they all hold, else None."""
    data = _memo.get(mid)
    try:
        if data is None:
            data = json.loads(_path(mid).read_bytes())
            if (
                data.get("schema") != SCHEMA
                or not isinstance(data["closure"], str)
                or not isinstance(data["count"], int)
            ):
                return None
        values = check(data["stamps"])
        return None if values is None else (data, values)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing, unreadable or of the wrong shape: a miss


def lookup(source: str, ctx, pre_includes: tuple[str, ...] = ()) -> tuple[str, int, tuple] | None:
    """(closure digest, header count, the headers' stamps as stamps.take gives them) when a
    valid manifest knows this closure, else None."""
    mid = manifest_id(source, ctx, pre_includes)
    loaded = _load(mid)
    if loaded is None:
        return None
    data, values = loaded
    _memo[mid] = data
    return data["closure"], data["count"], (data["stamps"], values)


def closure_digests(source: str, ctx, pre_includes: tuple[str, ...] = (), known=NOT_LOOKED_UP):
    """((closure digest, header count, stamps as stamps.take gives them), closure or None when
    the manifest answered).
    ``known`` is a ``lookup`` result the caller already has (None: no manifest, so it is
    not read again)."""
    if known is NOT_LOOKED_UP:
        known = lookup(source, ctx, pre_includes)
    if known is not None:
        return known, None
    from .fast import resolve_fast  # not imported on a hit

    mid = manifest_id(source, ctx, pre_includes)
    closure = resolve_fast(source, ctx, pre_includes)
    closure.raise_for_missing()
    ids = [(h.path, *closure.file_ids[h.path][1:]) for h in closure.headers]
    rec, values = take(ids)
    data = {
        "schema": SCHEMA,
        "closure": closure_digest(closure.digests()),
        "count": len(ids),
        "stamps": rec,
    }
    _memo[mid] = data
    try:
        from ..fsutil import atomic_write  # not imported on a hit

        atomic_write(_path(mid), json.dumps(data).encode())
    except OSError:
        pass  # a read-only cache still keys and compiles; store.py warns once
    return (data["closure"], len(ids), (rec, values)), closure
