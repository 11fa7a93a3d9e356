"""All configuration read from the environment, in one place, read lazily at call time."""
from __future__ import annotations

import os
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(name: str, value: str) -> bool:
    """The one boolean parser: '1/true/yes/on' or '0/false/no/off' (any case)."""
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"environment variable {name}={value!r} is not a boolean "
                     f"(use one of {sorted(_TRUE | _FALSE - {''})})")


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    return default if value is None else parse_bool(name, value)


def env_str(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value else None


def cache_dir() -> Path:
    """CUPY_RAWCODE_CACHE_DIR, else $XDG_CACHE_HOME/cupy-rawcode, else ~/.cache/cupy-rawcode."""
    explicit = env_str("CUPY_RAWCODE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env_str("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "cupy-rawcode"


def header_sources() -> str | None:
    """CUPY_RAWCODE_HEADER_SOURCES: comma-separated search policy (see toolchain.py)."""
    return env_str("CUPY_RAWCODE_HEADER_SOURCES")


def dump_source() -> bool:
    return env_bool("CUPY_RAWCODE_DUMP_SOURCE")


def memory_cache_entries() -> int:
    value = env_str("CUPY_RAWCODE_MEMORY_ENTRIES")
    if value is None:
        return 256
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"CUPY_RAWCODE_MEMORY_ENTRIES={value!r} is not an integer") from None



def overlap() -> bool:
    """CUPY_RAWCODE_OVERLAP (default on): on a likely miss, start NVRTC while headers are scanned."""
    return env_bool("CUPY_RAWCODE_OVERLAP", True)


def pch_mode() -> str:
    """CUPY_RAWCODE_PCH: 'auto' (default: NVRTC's automatic PCH for a series of compiles that
    share their header prefix, see program._Pch), '1' (every compile) or '0' (never)."""
    value = (env_str("CUPY_RAWCODE_PCH") or "auto").strip().lower()
    if value == "auto":
        return value
    return "always" if parse_bool("CUPY_RAWCODE_PCH", value) else "never"
