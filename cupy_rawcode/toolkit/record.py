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
import json
import os
import sys
from pathlib import Path

from ..ground import config
from ..ground.digest import digest_fields
from ..ground.stamps import stamp
from .discovery import SearchDir, Toolchain, discover, parse_sources, toolkit_home

SCHEMA = "cupy-rawcode-toolchain-4"  # 2: CuPy's include root; 3: the curand and crt roots;
#                                        4: stamps hold the ctime
ENV_VARS = config.TOOLCHAIN_ENV


def record_path(sources: tuple[str, ...]) -> Path:
    """Where the record of one search policy in this Python environment lives."""
    rid = digest_fields(
        [
            ("schema", SCHEMA),
            ("python", sys.executable),
            ("prefix", sys.prefix),
            ("sources", ",".join(sources)),
            ("package", __file__),
        ]
    )
    return config.cache_dir() / "toolchain" / f"{rid[:32]}.json"


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


def environment() -> dict[str, str]:
    return {v: os.environ.get(v, "") for v in ENV_VARS}


def save(tc) -> tuple:
    """Write the record of a discovered toolchain (silently skipped when the cache is read-only
    or the NVRTC library's path is unknown: then every process discovers). Returns its stamps
    (() when the NVRTC library's path is unknown)."""
    if not tc.nvrtc_library:
        return ()
    stamps = tuple(stamp(p) for p in watched_paths(tc))
    data = {
        "schema": SCHEMA,
        "nvrtc_version": list(tc.nvrtc_version),
        "supported_archs": list(tc.supported_archs),
        "nvrtc_library": tc.nvrtc_library,
        "dirs": [[d.tag, d.path, d.origin] for d in tc.system_dirs],
        "cccl_version": tc.cccl_version,
        "env": environment(),
        "stamps": [list(s) for s in stamps],
    }
    try:
        from ..store.sizebound import publish  # not imported on a hit

        publish(config.cache_dir(), record_path(tc.sources), json.dumps(data).encode())
    except OSError:
        pass
    return stamps


def load(sources: tuple[str, ...]):
    """The recorded Toolchain when its record exists and every stamp still matches, else None."""
    from ..ground.regular import RECORD_LIMIT, read_cache_file
    from ..store.layout import owned

    try:
        path = record_path(sources)
        raw = read_cache_file(path, RECORD_LIMIT) if owned(config.cache_dir()) else None
        if raw is None:
            return None
        data = json.loads(raw)
        if data.get("schema") != SCHEMA or data["env"] != environment():
            return None
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
        stamps = tuple(tuple(s) for s in data["stamps"])
        if [s[0] for s in stamps] != watched_paths(tc):
            return None
        if any(stamp(s[0]) != s for s in stamps):
            return None
        try:
            os.utime(
                path, follow_symlinks=False
            )  # marked used: the size bound evicts least recently used first
        except OSError:
            pass  # a read-only cache
        return tc._replace(stamps=stamps)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing, unreadable or malformed: discover again


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
