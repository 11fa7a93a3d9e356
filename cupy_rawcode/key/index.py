"""The warm index: a kernel's inputs as given -> the cache key they compiled under, so that a new
process finds its entry without importing the key path (options, search, toolchain, manifest,
request, program).

An index entry is keyed by the raw inputs (source as compiled, options as given, the device's
compute capability or an explicit arch, name expressions, source directory) and by everything
else the key path reads: the environment variables of config.KEY_ENV, the Python environment
(executable, prefix, site-packages directories), this package's version and key schema. It holds
the key, the arch and target chosen, and the stamps (stamps.py) of every file the key depended
on: the toolchain record's, each closure header's, and this package's own modules. A hit needs
every stamp to hold; anything else (a missing, damaged or foreign entry, a changed file) is a
miss, and the caller keys the full way (request.compute_key) and writes the entry again.

Like a manifest, stamps cannot see a new header that would now shadow a recorded one earlier in
the search path; ``cupy-rawcode cache clear`` removes the index with everything else.
"""

from __future__ import annotations

import sys

from ..ground import VERSION, StampedRecord, config, deferred, digest_fields
from ..store.layout import cache_location, owned
from . import SCHEMA as KEY_SCHEMA
from . import strip_field

_stamps = deferred("cupy_rawcode.ground.stamps")  # taking stamps: saving an entry only

SCHEMA = "cupy-rawcode-index-3"  # 2: stamps digest the values only; 3: stamps hold the ctime


class Found:
    """An index hit: the cache ``key`` and the ``arch``/``target`` chosen for it, with the
    closure's header ``count`` (a plain slotted class, as on every module of the warm-hit path)."""

    __slots__ = ("arch", "count", "key", "target")

    def __init__(self, key: str, arch: str, target: str, count: int):
        self.key, self.arch, self.target, self.count = key, arch, target, count


def index_id(
    source: str,
    options: tuple[str, ...],
    device: str,
    name_expressions: tuple[str, ...],
    source_dir: str | None,
) -> str:
    """The id of an index entry (pure but for the environment it reads: see module docstring).
    ``options`` exactly as compiled; ``device`` is 'cc90' or an explicit arch such as 'sm_90'."""
    fields = [
        ("schema", SCHEMA),
        ("package", VERSION),
        ("key_schema", KEY_SCHEMA),
        strip_field(),
        ("device", device),
        ("source", source),
        ("source_dir", source_dir or ""),
    ]
    fields += [("option", o) for o in options]
    fields += [("name_expression", n) for n in name_expressions]
    fields += [("env", f"{k}={v}") for k, v in config.key_environment()]
    fields += [("python", sys.executable), ("prefix", sys.prefix)]
    fields += [("site", p) for p in config.site_dirs()]
    return digest_fields(fields)


def _valid(data: dict) -> bool:
    """Whether an entry read from disk has the fields a hit needs, of their types."""
    return all(isinstance(data[f], str) for f in ("key", "arch", "target")) and isinstance(
        data["count"], int
    )


_RECORD = StampedRecord("index", SCHEMA, owned, _valid)
_memo = _RECORD.memo  # entry path -> its data, in this process (stamps still checked)


def lookup(iid: str) -> Found | None:
    """The key and target recorded for these inputs while every stamp still holds, else None."""
    loaded = _RECORD.load(cache_location().path, iid)
    if loaded is None:
        return None
    data = loaded[0]
    return Found(data["key"], data["arch"], data["target"], data["count"])


def save(iid: str, key: str, arch: str, target: str, count: int, stamps: list | None) -> None:
    """Record what these inputs keyed to. ``stamps``: the parts taken when the key was computed
    (request.Keyed.stamps); None (the toolchain is not stamped) writes nothing. A read-only
    cache writes nothing either: other processes then key the full way."""
    if stamps is None:
        return
    fields = {
        "key": key,
        "arch": arch,
        "target": target,
        "count": count,
        "stamps": _stamps.merge(stamps + [_stamps.take(_stamps.package_stamps())]),
    }
    from ..store.sizebound import publish  # not imported on a hit

    _RECORD.save(cache_location().path, iid, fields, publish)
