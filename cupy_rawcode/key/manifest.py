"""Direct mode (as ccache's): remember a source's closure, validated by ``stat``, to key it again
in a new process without re-scanning headers.

A manifest is keyed by everything that decides the closure *on this machine* (source, options,
absolute search directories) and holds the closure's digest, whether the source can expand
``__FILE__`` (filename.py) and the stamps (size, mtime_ns, inode, ctime_ns; stamps.py) each
closure file had when it was read, plus each file a quoted include of the source looked for in
the source's own directory and did not find there, stamped absent.
If every file still stats the same, the stored digest is used; otherwise the closure is
resolved again and the manifest replaced. With no manifest here, a portable closure record
(portable.py: found in any level of the store, a bundle's or a remote one's, and checked by
content) answers in its place and a manifest is written from it; after a fresh resolve one is
put in the store. Every path the search found empty in the program's own directories is
stamped (search.empty_stamp: absent, or a directory's or symlink loop's stamp; fast.py
``_own_empty``): a new file there (a shadowing header, a probe answered)
is a miss; a miss also resolves again before it compiles (orchestrator/compiling.py).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import NamedTuple

from ..ground import StampedRecord, deferred, digest_fields
from ..ground.stamps import take
from ..headers.standard import Floor
from ..store.layout import cache_location, owned
from . import closure_digest, portable

# resolving and writing: a source without a manifest only, never a hit
headers_closure = deferred("cupy_rawcode.headers.closure")
fast = deferred("cupy_rawcode.headers.fast")
search = deferred("cupy_rawcode.headers.search")  # stamping the paths found holding no file
filename = deferred("cupy_rawcode.headers.filename")
sizebound = deferred("cupy_rawcode.store.sizebound")

SCHEMA = "cupy-rawcode-manifest-17"  # 6: the stamps' digest covers values only; 7: "file",
#                                        and the source directory's absent files; 8: the
#                                        closure's standard floor and the std templates it
#                                        specializes; 9: stamps hold the ctime; 10: "::name"
#                                        entries (toolkit/jitify_names.py); 11: the key
#                                        of the closure's portable record (portable.py);
#                                        12: the floor of headers NVRTC can reach; 13: includes
#                                        however spelled, the floor read soundly; 14: and
#                                        split by backslash-newlines inside their words; 15:
#                                        computed includes' every value, '..' past symlinks;
#                                        16: an #include_next reached from two places, a
#                                        -include in the working directory first; 17: '..'
#                                        read physically in names and -I, -no-source-include,
#                                        skipped directories and loops stamped, the shims'
#                                        pre-include found in the search list
NOT_LOOKED_UP = object()  # closure_digests' default: look the manifest up first


def manifest_id(source: str, ctx, pre_includes: tuple[str, ...]) -> str:
    fields = [("schema", SCHEMA), ("source", source), ("source_dir", ctx.source_dir or "")]
    fields += [("pre_include", p) for p in pre_includes]
    fields += ctx.opts.key_fields()
    fields += [("dir", f"{d.tag}={d.path}") for d in ctx.dirs]
    if ctx.opts.pre_includes:  # searched in the working directory first (headers/fast.py)
        fields.append(("cwd", os.getcwd()))
    return digest_fields(fields)


def _valid(data: dict) -> bool:
    """Whether a manifest read from disk has the fields keying needs, of their types."""
    return (
        isinstance(data["closure"], str)
        and isinstance(data["count"], int)
        and isinstance(data["file"], bool)
        and _is_floor(data["floor"])
        and _is_names(data["specialized"])
    )


_RECORD = StampedRecord("manifests", SCHEMA, owned, _valid)
_memo = _RECORD.memo  # manifest path -> its data, in this process (stamps still checked)


def _path(mid: str) -> Path:
    return _RECORD.path(cache_location().path, mid)


def _is_floor(value) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], int)
        and isinstance(value[1], str)
    )


def _is_names(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


class Facts(NamedTuple):
    """What keying needs to know of a closure, from a manifest or a fresh resolve: its digest,
    header count, the headers' stamps (as stamps.take gives them), whether the source can expand
    ``__FILE__`` (filename.py), its standard Floor, the std templates its own files
    specialize (toolkit/specializable.py) and the key of its portable record (portable.py;
    "" for none)."""

    digest: str
    header_count: int
    stamps: tuple
    expands_file: bool
    floor: Floor
    specialized: tuple[str, ...]
    record: str = ""


def discard(source: str, ctx, pre_includes: tuple[str, ...] = ()) -> None:
    """Forget a source's manifest, here and on disk: one of its files changed while a compile
    read them, so what it holds was never compiled (program.py stores nothing then)."""
    _RECORD.discard(cache_location().path, manifest_id(source, ctx, pre_includes))


def _facts(data: dict, values) -> Facts:
    record = data.get("record")
    return Facts(
        data["closure"],
        data["count"],
        (data["stamps"], values),
        data["file"],
        Floor(*data["floor"]),
        tuple(data["specialized"]),
        record if isinstance(record, str) else "",
    )


def lookup(source: str, ctx, pre_includes: tuple[str, ...] = ()) -> Facts | None:
    """The closure's Facts when a valid manifest knows it, else None."""
    loaded = _RECORD.load(cache_location().path, manifest_id(source, ctx, pre_includes))
    return None if loaded is None else _facts(*loaded)


def closure_digests(
    source: str,
    ctx,
    pre_includes: tuple[str, ...] = (),
    known=NOT_LOOKED_UP,
    main_name: str | None = None,
    fresh: bool = False,
):
    """(the closure's Facts, the closure or None when the manifest answered).
    ``known`` is a ``lookup`` result the caller already has (None: no manifest, so it is
    not read again); ``main_name`` names the source in a missing header's include chain;
    ``fresh``: resolve, whatever closure record a level holds."""
    if known is NOT_LOOKED_UP:
        known = lookup(source, ctx, pre_includes)
    if known is not None:
        return known, None
    mid = manifest_id(source, ctx, pre_includes)
    rid = portable.record_id(source, ctx, pre_includes)
    carried = None if fresh else portable.load(rid, ctx)  # as a bundle or remote level has it
    if carried is not None:
        fields, (rec, values) = carried
        fields = {**fields, "stamps": rec, "record": rid}
        data = _RECORD.save(cache_location().path, mid, fields, sizebound.publish)
        return _facts(data, values), None
    closure = fast.resolve_fast(source, ctx, pre_includes, main_name or headers_closure.MAIN)
    closure.raise_for_missing()
    rec, values = take(search.closure_stamps(closure, ctx))
    if closure.unresolved:  # no manifest or record, and a digest no other compile shares
        unknown = [("unresolved", secrets.token_hex(16))]
        digest = closure_digest(closure.digests() + unknown)
        found = filename.expands_file(source, closure.scans.values(), ctx.opts.macros)
        count = len(closure.headers)
        facts = Facts(digest, count, (rec, values), found, closure.floor, closure.specialized)
        return facts, closure  # the closure's unresolved includes: the orchestrator's to warn
    fields = {
        "closure": closure_digest(closure.digests()),
        "count": len(closure.headers),
        "file": filename.expands_file(source, closure.scans.values(), ctx.opts.macros),
        "floor": list(closure.floor),
        "specialized": list(closure.specialized),
    }
    record = portable.make(closure, fields, ctx)
    if record is not None:
        portable.save(rid, record)
    fields = {**fields, "stamps": rec, "record": rid if record is not None else ""}
    data = _RECORD.save(cache_location().path, mid, fields, sizebound.publish)
    return _facts(data, values), closure
