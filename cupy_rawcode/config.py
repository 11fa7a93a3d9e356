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
    raise ValueError(
        f"environment variable {name}={value!r} is not a boolean "
        f"(use one of {sorted(_TRUE | _FALSE - {''})})"
    )


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


TOOLCHAIN_ENV = ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX")  # read by discovery
KEY_ENV = (
    "CUPY_RAWCODE_HEADER_SOURCES",
    "CUPY_RAWCODE_STRIP",
    "CUPY_RAWCODE_CUPY_OPTIONS",
) + TOOLCHAIN_ENV


def key_environment() -> list[tuple[str, str]]:
    """(name, value) of every environment variable that can change a cache key: the header
    search policy, stripping, and what toolchain discovery reads ('' when unset)."""
    return [(v, os.environ.get(v, "")) for v in KEY_ENV]


def site_dirs() -> list[str]:
    """The site-packages directories on sys.path: where discovery finds wheels."""
    import sys

    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def header_sources() -> str | None:
    """CUPY_RAWCODE_HEADER_SOURCES: comma-separated search policy (see toolchain.py)."""
    return env_str("CUPY_RAWCODE_HEADER_SOURCES")


def dump_source() -> bool:
    return env_bool("CUPY_RAWCODE_DUMP_SOURCE")


def cupy_options() -> bool:
    """CUPY_RAWCODE_CUPY_OPTIONS (default on): compile with what CuPy adds to every compile
    (--device-as-default-execution-space, -ftz=true); off: with the options as given."""
    return env_bool("CUPY_RAWCODE_CUPY_OPTIONS", True)


def cupy_dump_on_error() -> bool:
    """CUPY_DUMP_CUDA_SOURCE_ON_ERROR, read as CuPy reads it: on only when it is the integer 1."""
    value = os.environ.get("CUPY_DUMP_CUDA_SOURCE_ON_ERROR", "")
    try:
        return int(value) == 1
    except ValueError:
        return False


def memory_cache_entries() -> int:
    value = env_str("CUPY_RAWCODE_MEMORY_ENTRIES")
    if value is None:
        return 256
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"CUPY_RAWCODE_MEMORY_ENTRIES={value!r} is not an integer") from None


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}
DEFAULT_MAX_SIZE = 1 << 30


def parse_size(what: str, value: str | int) -> int:
    """'1G', '512MiB', '300k', '1048576' -> bytes (binary units)."""
    if isinstance(value, int):
        n = value
    else:
        import re

        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        if m is None or m.group(2).lower() not in _UNITS:
            raise ValueError(f"{what}={value!r} is not a size (use e.g. 500M, 2G or a byte count)")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n < 0:
        raise ValueError(f"{what}={value!r} is negative")
    return n


def cache_max_size() -> int:
    """CUPY_RAWCODE_CACHE_MAX_SIZE: bound on the cache directory's entries (default 1 GiB)."""
    value = env_str("CUPY_RAWCODE_CACHE_MAX_SIZE")
    return DEFAULT_MAX_SIZE if value is None else parse_size("CUPY_RAWCODE_CACHE_MAX_SIZE", value)


def bundles() -> tuple[str, ...]:
    """CUPY_RAWCODE_BUNDLES: read-only bundle files, separated by os.pathsep, consulted in order."""
    value = env_str("CUPY_RAWCODE_BUNDLES")
    return tuple(p for p in value.split(os.pathsep) if p) if value else ()


def redis_url() -> str | None:
    """CUPY_RAWCODE_REDIS_URL: a shared Redis store (redis://host:port/db), read through and
    written back; needs the ``redis`` extra."""
    return env_str("CUPY_RAWCODE_REDIS_URL")


def redis_ttl() -> int | None:
    """CUPY_RAWCODE_REDIS_TTL: seconds a Redis entry lives (default: no expiry)."""
    value = env_str("CUPY_RAWCODE_REDIS_TTL")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"CUPY_RAWCODE_REDIS_TTL={value!r} is not a whole number of seconds"
        ) from None


def redis_timeout() -> float:
    """CUPY_RAWCODE_REDIS_TIMEOUT: seconds before a Redis call counts as failed (default 0.5)."""
    value = env_str("CUPY_RAWCODE_REDIS_TIMEOUT")
    try:
        return 0.5 if value is None else float(value)
    except ValueError:
        raise ValueError(
            f"CUPY_RAWCODE_REDIS_TIMEOUT={value!r} is not a number of seconds"
        ) from None


def overlap() -> bool:
    """CUPY_RAWCODE_OVERLAP (default on): on a likely miss, start NVRTC while headers are
    scanned."""
    return env_bool("CUPY_RAWCODE_OVERLAP", True)


def strip() -> bool:
    """CUPY_RAWCODE_STRIP (default on): drop unreferenced library globals from new code
    (strip.py)."""
    return env_bool("CUPY_RAWCODE_STRIP", True)


def pch_mode() -> str:
    """CUPY_RAWCODE_PCH: 'auto' (default: NVRTC's automatic PCH for a series of compiles that
    share their header prefix, see nvrtc._Pch), '1' (every compile) or '0' (never)."""
    value = (env_str("CUPY_RAWCODE_PCH") or "auto").strip().lower()
    if value == "auto":
        return value
    return "always" if parse_bool("CUPY_RAWCODE_PCH", value) else "never"


def check_workers(what: str, value) -> int:
    """A number of worker processes: an int >= 1 (``what`` names the argument or variable)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"{what}={value!r} is not a number of worker processes "
            "(use a whole number >= 1, or None for the default)"
        )
    if value < 1:
        raise ValueError(f"{what}={value!r}: at least one worker process is needed")
    return value


def workers() -> int | None:
    """CUPY_RAWCODE_WORKERS: worker processes for warmup() and prebuild (default: what the
    machine can take, see pool.default_workers)."""
    value = env_str("CUPY_RAWCODE_WORKERS")
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        raise ValueError(
            f"CUPY_RAWCODE_WORKERS={value!r} is not a whole number of worker processes"
        ) from None
    return check_workers("CUPY_RAWCODE_WORKERS", n)
