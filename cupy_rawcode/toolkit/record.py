"""The discovered toolchain remembered on disk, validated by ``stat`` (like the header manifests),
so that a warm process neither imports cuda.pathfinder nor loads NVRTC to build a cache key.

A record is kept per search policy and Python environment under ``<cache>/toolchain/``. It holds
what discovery found (NVRTC version and architectures, header directories, CCCL version) and a
stamp (size, mtime_ns, inode, ctime_ns; or absent) of everything that decides it: the NVRTC library,
each header directory (the shims included) and CCCL's version header, every site-packages
directory on ``sys.path`` (a ``pip install`` changes its mtime) and the toolkit's include
directory, plus the environment variables the search reads. Any difference means discovery
runs again and the record is replaced. ``cupy-rawcode cache clear`` removes records.

``toolchain()`` is the one way in: the record when it still holds, else discovery
(toolchain.py) and a new record.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from ..ground import StampedRecord, config, deferred, digest_fields
from ..ground.stamps import entries, stamp, take
from ..store.layout import cache_location, owned
from .discovery import SearchDir, Toolchain, discover, parse_sources, toolkit_home

sizebound = deferred("cupy_rawcode.store.sizebound")  # writing the record: a new toolchain only

SCHEMA = "cupy-rawcode-toolchain-5"  # 2: CuPy's include root; 3: the curand and crt roots;
#                                        4: stamps hold the ctime; 5: the stamps are a stamps
#                                        record (ground/stamps.py: take), as the others' are
ENV_VARS = config.TOOLCHAIN_ENV


def environment() -> dict[str, str]:
    return {v: os.environ.get(v, "") for v in ENV_VARS}


def _valid(data: dict) -> bool:
    """Whether a record read from disk was made under the environment variables of now."""
    return data["env"] == environment()


# no memo: toolchain() answers once per process and policy
_RECORD = StampedRecord("toolchain", SCHEMA, owned, _valid, shard=0, remember=False)


def _record_id(sources: tuple[str, ...]) -> str:
    """The record id of one search policy in this Python environment."""
    return digest_fields(
        [
            ("schema", SCHEMA),
            ("python", sys.executable),
            ("prefix", sys.prefix),
            ("sources", ",".join(sources)),
            ("package", __file__),
        ]
    )[:32]


def record_path(sources: tuple[str, ...]) -> Path:
    """Where the record of one search policy in this Python environment lives."""
    return _RECORD.path(cache_location().path, _record_id(sources))


def watched_paths(tc) -> list[str]:
    """Every path whose change could change what discovery finds."""
    paths = [tc.nvrtc_library] if tc.nvrtc_library else []
    for d in tc.system_dirs:  # the shims included: they are always the last root
        paths.append(d.path)
        if d.tag == "cccl":
            paths.append(os.path.join(d.path, "cuda", "std", "__cccl", "version.h"))
    paths += config.site_dirs()
    home = toolkit_home()
    paths.append(str(home / "include") if home else "/usr/local/cuda/include")
    return paths


def save(tc) -> tuple:
    """Write the record of a discovered toolchain (silently skipped when the cache is read-only
    or the NVRTC library's path is unknown: then every process discovers). Returns its stamps
    (() when the NVRTC library's path is unknown), in the record's order (grouped by
    directory), as ``load`` gives them."""
    if not tc.nvrtc_library:
        return ()
    rec, values = take(stamp(p) for p in watched_paths(tc))
    fields = {
        "nvrtc_version": list(tc.nvrtc_version),
        "supported_archs": list(tc.supported_archs),
        "nvrtc_library": tc.nvrtc_library,
        "dirs": [[d.tag, d.path, d.origin] for d in tc.system_dirs],
        "cccl_version": tc.cccl_version,
        "env": environment(),
        "stamps": rec,
    }
    _RECORD.save(cache_location().path, _record_id(tc.sources), fields, sizebound.publish)
    return entries(rec, values)


def load(sources: tuple[str, ...]):
    """The recorded Toolchain when its record exists and every stamp still matches, else None."""
    loaded = _RECORD.load(cache_location().path, _record_id(sources))
    if loaded is None:
        return None
    data, values = loaded
    try:
        major, minor = data["nvrtc_version"]
        tc = Toolchain(
            (int(major), int(minor)),
            tuple(SearchDir(str(t), str(p), str(o)) for t, p, o in data["dirs"]),
            data["cccl_version"],
            sources,
            tuple(int(a) for a in data["supported_archs"]),
            str(data["nvrtc_library"]),
            from_record=True,
        )
        stamps = entries(data["stamps"], values)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # malformed: discover again
    if sorted(s[0] for s in stamps) != sorted(watched_paths(tc)):
        return None  # another site-packages directory or toolkit: discover again
    return tc._replace(stamps=stamps)


@functools.lru_cache(maxsize=16)
def _toolchain(sources: tuple[str, ...]) -> Toolchain:
    tc = load(sources)
    if tc is None:
        tc = discover(sources)
        tc = tc._replace(stamps=save(tc))
    return tc


def toolchain(header_sources: str | tuple[str, ...] | None = None) -> Toolchain:
    """The toolchain for a search policy: once per process and policy, from the on-disk record
    (this module) when it is still valid, else discovered and recorded."""
    return _toolchain(parse_sources(header_sources))


def supported_archs() -> tuple[int, ...]:
    """The SM numbers the NVRTC in use can emit code for (e.g. (50, ..., 90, 100, 120)),
    without loading NVRTC when the toolchain record knows them."""
    return toolchain().supported_archs
