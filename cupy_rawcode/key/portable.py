"""Portable closure records: a source's header closure kept as a store entry, so that it travels
with the cache (bundles, remote levels) where a manifest (manifest.py), tied to this machine's
paths and inodes, cannot.

A record is keyed by everything that decides the closure apart from absolute paths (``record_id``:
the source, its pre-includes, the options, whether it has a directory of its own, and the search
directories as tags) and holds what a manifest's Facts hold plus, for each header, the tag of the
search directory it was found under, its name relative to that directory and its content digest,
and the files looked for and absent (relative to the source's directory). It is trusted by
*content*: every header is read where its tag points in this process and digested, each absent
file must still be absent, and no header may be shadowed by a file of the same name in an
earlier search directory, and no include the resolve looked for and did not find (a
``__has_include`` probe, an include in a branch) may be found now in a directory it searched:
another machine's directories may hold a header this one's lacked, and every include name with a
``..`` must still be read as spelled where it was looked up (no symbolic link before its ``..``:
headers/paths.py), as it was where the record was made (``validate``). Its entry
is an ordinary one (store/entry.py: JSON bytes, meta ``target`` TARGET), never unpickled; a
damaged or foreign one is a miss.

Only a closure of MIN_HEADERS headers or more gets a record: a smaller one resolves in about the
time a record takes to read and check, and would only add an entry to every level.

A look-up or a put of a record is no kernel's: it is left out of every count ``cache stats``
shows (store.uncounted).
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from ..ground import deferred, digest_fields, json_data, open_regular, read_fd
from ..ground.stamps import absent, take
from ..store import default_store, uncounted
from ..store.entry import decode, encode
from . import closure_digest

scan = deferred("cupy_rawcode.headers.scan")  # a header's content digest: the same function
search = deferred("cupy_rawcode.headers.search")  # stamping the paths found holding no file
paths = deferred("cupy_rawcode.headers.paths")  # how a name with '..' is read

SCHEMA = "cupy-rawcode-closure-9"  # 2: the includes looked for and not found ("missing");
#                                   3: the floor of headers NVRTC can reach (liveness.py);
#                                   4: includes however spelled, the floor read soundly; 5: split
#                                   by backslash-newlines inside their words; 6: computed
#                                   includes' every value, '..' past symlinks; 7: function-like
#                                   macros, an #include_next reached from two places; 8: the
#                                   paths found empty in the program's directories ("watched");
#                                   9: names with a '..' read physically where they were looked
#                                   up ("dotdots"), skipped directories and loops stamped
TARGET = "closure-record"  # the entry's "target": no kernel, no payload
MIN_HEADERS = 16  # the smallest closure kept as a record (CuPy's own: about 950 headers)


def record_id(source: str, ctx, pre_includes: tuple[str, ...]) -> str:
    """The record's key: manifest_id's fields with the search directories as tags, and only
    whether the source has a directory of its own (its headers are named ``src:``)."""
    fields = [("schema", SCHEMA), ("source", source), ("has_dir", "1" if ctx.source_dir else "")]
    fields += [("pre_include", p) for p in pre_includes]
    fields += ctx.opts.key_fields()
    fields += [("dir", d.tag) for d in ctx.dirs]
    return digest_fields(fields)


def _special(ctx) -> dict[str, str]:
    """The directories of the tags that are no search directory: the source's own, and "abs"."""
    return {"abs": "/", "src": ctx.source_dir} if ctx.source_dir else {"abs": "/"}


def _where(header, rel: str, ctx) -> int | None:
    """The index in the search list of the directory ``header`` lies in under its name ``rel``
    (a tag may name several: CuPy's CCCL is three), -1 for a tag of ``_special``, None when it
    lies in none (not portable)."""
    special = _special(ctx).get(header.root)
    if special is not None:
        return -1 if os.path.normpath(os.path.join(special, rel)) == header.path else None
    for i, d in enumerate(ctx.dirs):
        if d.tag == header.root and os.path.normpath(os.path.join(d.path, rel)) == header.path:
            return i
    return None


def make(closure, facts: dict, ctx) -> dict | None:
    """A record of a fresh closure (``facts``: a manifest's closure, count, file, floor and
    specialized fields), or None for a closure of fewer than MIN_HEADERS headers or one with a
    header that lies in no directory of its tag (not portable). Each header is [its tag, the
    index of its directory in the search list (-1: the source's own, or an absolute path), its
    name in that directory, its content digest]."""
    if len(closure.headers) < MIN_HEADERS or ctx.opts.pre_includes:
        return None  # a -include is found in the working directory first: tied to this one
    headers = []
    for h in closure.headers:
        rel = h.logical[len(h.root) + 1 :]
        where = _where(h, rel, ctx)
        if where is None:
            return None
        headers.append([h.root, where, rel, h.digest])
    watched = [_watched_place(path, ctx) for path in closure.watched]
    if None in watched:
        return None
    dotdots = []  # names with a '..': the same file lexically and as open() reads them, here
    for directory, name, found in closure.dotdots:
        place = _place(directory, ctx)
        if place is None or not paths.same_reading(directory, name, found):
            return None  # a '..' past a symbolic link: where it leads is this tree's own
        dotdots.append([*place, name, found])
    gone = []
    for path in closure.absent:
        if not ctx.source_dir:
            return None
        gone.append(os.path.relpath(path, ctx.source_dir))
    missing: set[tuple[str, int, str, str]] = set()
    for m in closure.missing:
        places = [_place(d, ctx) for d in m.searched]
        if not places:  # nowhere to look again (an absolute path)
            return None
        for place in places:
            if place is None:
                return None
            missing.add((m.name, *place))
    return {
        "schema": SCHEMA,
        **facts,
        "headers": headers,
        "absent": gone,
        "missing": sorted(missing),
        "watched": sorted(watched),
        "dotdots": sorted(dotdots),
    }


def _place(path: str, ctx) -> tuple[int, str, str] | None:
    """A directory an include searched, as (the index in the search list of the directory it
    lies in, -1 for the source's own; that directory's tag; its path under it), or None where
    it lies in none (not portable)."""
    path = os.path.normpath(path)
    bases = [(i, d.tag, d.path) for i, d in enumerate(ctx.dirs)]
    if ctx.source_dir:
        bases.append((-1, "src", ctx.source_dir))
    for i, tag, base in bases:
        base = os.path.normpath(base)
        if path == base or path.startswith(base.rstrip(os.sep) + os.sep):
            return i, tag, os.path.relpath(path, base)
    return None


def _is_file(path: str) -> bool:
    """Whether the search would take ``path``: it exists and is no directory (search.py)."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _shadowed(root: str, rel: str, dirs: dict[str, bool]) -> bool:
    """Whether the search directory ``root`` holds a file ``rel``; ``dirs`` memoizes whether
    each directory on the way exists, so that a closure of a thousand headers under a few top
    directories costs about a stat per directory, not one per header and search directory."""
    head = rel.rpartition("/")[0]
    if head and _has_dir(root, head, dirs) is False:
        return False
    return _is_file(os.path.join(root, rel))


def _has_dir(root: str, head: str, dirs: dict[str, bool]) -> bool:
    """Whether ``root``/``head`` is a directory, asked of its parents first (memoized)."""
    where = f"{root}/{head}"
    there = dirs.get(where)
    if there is None:
        up = head.rpartition("/")[0]
        parent = not up or up.endswith("..") or _has_dir(root, up, dirs)
        there = dirs[where] = parent and os.path.isdir(where)
    return there


def validate(data: Any, ctx) -> tuple[dict, list] | None:
    """(the record's facts, the ids (path, stamp values) of its headers and absent files, stamped
    before each was read) when it holds in this process, else None: a record of another shape,
    a header missing, changed or shadowed by an earlier search directory, or an absent file
    that is there now."""
    try:
        return _validate(data, ctx)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None


def _validate(data: Any, ctx) -> tuple[dict, list] | None:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None
    if ctx.opts.pre_includes:  # a -include is searched in the working directory: not portable
        return None
    facts = {k: data[k] for k in ("closure", "count", "file", "floor", "specialized")}
    if not (
        isinstance(facts["closure"], str)
        and isinstance(facts["file"], bool)
        and isinstance(facts["specialized"], list)
        and all(isinstance(s, str) for s in facts["specialized"])
    ):
        return None
    floor = facts["floor"]
    if not (isinstance(floor, list) and len(floor) == 2 and isinstance(floor[0], int)):
        return None
    if not isinstance(floor[1], str):
        return None
    special, dirs = _special(ctx), ctx.dirs
    ids, names, seen_dirs, digest_of = [], [], dict[str, bool](), scan.digest_bytes
    watched: list[tuple] = []  # places in the program's directories a file would change
    for tag, where, rel, digest in data["headers"]:
        root = _root(where, tag, rel, special, dirs)
        if root is None:
            return None
        path = os.path.normpath(os.path.join(root, rel))
        fd, st = open_regular(path)  # OSError: missing, or no regular file
        try:
            text = read_fd(fd, st, path=path)
        finally:
            os.close(fd)
        if digest_of(text) != digest:
            return None
        # found through the search list: a file of that name in an earlier directory now wins
        if any(_shadowed(d.path, rel, seen_dirs) for d in dirs[: max(where, 0)]):
            return None
        ids.append((path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns))
        names.append((f"{tag}:{rel}", digest))
    if facts["count"] != len(ids) or facts["closure"] != closure_digest(sorted(names)):
        return None  # its facts are not those of its own headers
    for rel in data["absent"]:
        if not ctx.source_dir or not isinstance(rel, str):
            return None
        path = os.path.normpath(os.path.join(ctx.source_dir, rel))
        if _is_file(path):
            return None
        ids.append(absent(path))
    for name, where, tag, sub in data["missing"]:  # an include not found there: still not
        root = _root(where, tag, sub, special, dirs)
        if root is None or not isinstance(name, str):
            return None
        if _shadowed(os.path.normpath(os.path.join(root, sub)), name, seen_dirs):
            return None
    for tag, where, rel in data["watched"]:  # still empty, and stamped so (fast.py watched)
        root = _root(where, tag, rel, special, dirs)
        if root is None:
            return None
        path = os.path.normpath(os.path.join(root, rel))
        if _is_file(path):
            return None  # a header there now shadows one, or answers a probe
        watched.append(search.empty_stamp(path))  # absent, or a directory's or loop's stamp
    for where, tag, sub, name, found in data["dotdots"]:  # read past a link: another file
        root = _root(where, tag, sub, special, dirs)
        if root is None or not isinstance(name, str) or not isinstance(found, bool):
            return None
        if not paths.same_reading(os.path.normpath(os.path.join(root, sub)), name, found):
            return None
    watched += search.linked_stamps(ctx.opts)  # -I lnk/..
    return facts, ids + [w for w in dict.fromkeys(watched) if w not in ids]


def _watched_place(path: str, ctx) -> list | None:
    """[tag, index, name] of a path the search found empty in the program's own directories
    (fast.py: Closure.watched): under an -I or -isystem directory, or the source's own; None
    elsewhere (the working directory of a -include, or '..' out of them: not portable)."""
    for i, d in enumerate(ctx.dirs):
        if d.tag.startswith(("user", "isys")) and path.startswith(os.path.join(d.path, "")):
            return [d.tag, i, os.path.relpath(path, d.path)]
    if ctx.source_dir and path.startswith(os.path.join(ctx.source_dir, "")):
        return ["src", -1, os.path.relpath(path, ctx.source_dir)]
    return None


def _root(where: Any, tag: Any, rel: Any, special: dict[str, str], dirs) -> str | None:
    """The directory here of a record's place (the index of a search directory, -1 for a tag of
    ``_special``; its tag), or None for a place of the wrong types or one this search list does
    not have; raises KeyError/IndexError for a tag or an index it does not have."""
    if not (isinstance(tag, str) and isinstance(rel, str) and type(where) is int):
        return None
    if where < 0:
        return special[tag]
    return dirs[where].path if dirs[where].tag == tag else None


def load(rid: str, ctx) -> tuple[dict, tuple] | None:
    """(facts, stamps as stamps.take gives them) of the record ``rid`` from the store, when it
    holds here (``validate``); None for a miss: none stored, damaged, foreign or stale, or
    a request with a -include (``make`` keeps none)."""
    with uncounted():  # decoded once, as the store checks it
        found = default_store().find(rid, lambda raw: decode(rid, raw), memory=False)
    if found is None:
        return None
    (text, meta), _level = found
    if meta.get("target") != TARGET:
        return None
    held = validate(json_data(text), ctx)  # not JSON (or nested too deep for json): None
    if held is None:
        return None
    facts, ids = held
    return facts, take(ids)


def save(rid: str, record: dict) -> None:
    """Put a record in every writable level of the store that outlives the process (none:
    nothing is written)."""
    store = default_store()
    if store.read_only:
        return
    meta = {"target": TARGET, "headers": record["count"]}  # as `cache list -l` shows them
    raw = encode(rid, json.dumps(record, separators=(",", ":")).encode(), meta)
    with uncounted():  # read once per process (then a manifest answers): not kept in memory
        store.put(rid, raw, memory=False)
