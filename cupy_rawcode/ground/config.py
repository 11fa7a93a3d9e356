"""All configuration read from the environment, in one place, read lazily at call time.

Every ``CUPY_RAWCODE_*`` variable is in VARIABLES with its parser. The first time a process reads
any of them, validate() checks every one that is set and refuses unknown ``CUPY_RAWCODE_*`` names
(naming the closest known one), so a bad value fails on every code path, not only on the paths
that read it; after that it costs one flag test. An empty variable counts as unset.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import ConfigError

PREFIX = "CUPY_RAWCODE_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_validated = False  # validate() passed in this process


def parse_bool(name: str, value: str) -> bool:
    """The one boolean parser: '1/true/yes/on' or '0/false/no/off' (any case)."""
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(
        f"{name}={value!r} is not a boolean (accepted: {', '.join(_TRUE + _FALSE)}; any case)"
    )


def _get(name: str) -> str | None:
    """A variable's value, None when unset or empty; validates the whole environment first, once
    per process."""
    if not _validated:
        validate()
    value = os.environ.get(name)
    return value if value else None


def _bool(name: str, default: bool) -> bool:
    value = _get(name)
    return default if value is None else parse_bool(name, value)


# the cache directory of the compile running in this context (using_cache_dir), None: none given
_cache_dir_given: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "cupy_rawcode_cache_dir", default=None
)


@contextlib.contextmanager
def using_cache_dir(path: str | os.PathLike | None) -> Iterator[None]:
    """Make cache_dir() answer ``path`` in this context, and in the threads a compile starts
    (they copy it), until the block ends: everything a compile given its own cache directory
    writes (entries, manifests, warm index, toolchain record, header copies) goes there. None
    changes nothing."""
    if path is None:
        yield
        return
    token = _cache_dir_given.set(Path(os.fspath(path)).expanduser())
    try:
        yield
    finally:
        _cache_dir_given.reset(token)


def cache_dir() -> Path:
    """The cache directory: the one the running compile was given (using_cache_dir), else
    CUPY_RAWCODE_CACHE_DIR, else $XDG_CACHE_HOME/cupy-rawcode, else ~/.cache/cupy-rawcode."""
    given = _cache_dir_given.get()
    if given is not None:
        return given
    explicit = _get("CUPY_RAWCODE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "cupy-rawcode"


TOOLCHAIN_ENV = ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX")  # read by discovery
KEY_ENV = (
    "CUPY_RAWCODE_HEADER_SOURCES",
    "CUPY_RAWCODE_STRIP",
    "CUPY_RAWCODE_CUPY_OPTIONS",
    "CUPY_RAWCODE_RAISE_STD",
) + TOOLCHAIN_ENV


def key_environment() -> list[tuple[str, str]]:
    """(name, value) of every environment variable that can change a cache key: the header
    search policy, stripping, and what toolchain discovery reads ('' when unset)."""
    if not _validated:
        validate()
    return [(v, os.environ.get(v, "")) for v in KEY_ENV]


def site_dirs() -> list[str]:
    """The site-packages directories on sys.path: where discovery finds wheels."""
    import sys

    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


HEADER_SOURCE_NAMES = ("cupy", "wheel", "nvrtc", "toolkit")  # toolkit/discovery.py's sources
HEADER_ROOT_KINDS = ("cccl", "cuda", "curand", "crt")  # the roots a KIND=DIR entry can name


def parse_header_sources(what: str, spec: str | tuple | list) -> tuple[str, ...]:
    """A header search policy (README "Header search order"): source names or ``KIND=DIR``
    entries, comma-separated in a string. ``what`` names the argument or variable in errors."""
    items = (
        [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s) for s in spec]
    )
    items = [s for s in items if s]
    accepted = (
        f"accepted: a comma-separated list of {', '.join(HEADER_SOURCE_NAMES)} and "
        f"KIND=DIR with KIND one of {', '.join(HEADER_ROOT_KINDS)}"
    )
    for item in items:
        kind, eq, path = item.partition("=")
        if eq and (kind not in HEADER_ROOT_KINDS or not path):
            raise ConfigError(
                f"{what}={spec!r}: header source {item!r} is not KIND=DIR ({accepted})"
            )
        if not eq and item not in HEADER_SOURCE_NAMES:
            raise ConfigError(f"{what}={spec!r}: unknown header source {item!r} ({accepted})")
    return tuple(items)


def header_sources() -> tuple[str, ...] | None:
    """CUPY_RAWCODE_HEADER_SOURCES: the header search policy (toolkit/discovery.py), parsed."""
    value = _get("CUPY_RAWCODE_HEADER_SOURCES")
    return None if value is None else parse_header_sources("CUPY_RAWCODE_HEADER_SOURCES", value)


def dump_source() -> bool:
    """CUPY_RAWCODE_DUMP_SOURCE (default off): a failing compile writes its source to a file."""
    return _bool("CUPY_RAWCODE_DUMP_SOURCE", False)


def raise_std() -> bool:
    """CUPY_RAWCODE_RAISE_STD (default on): a kernel asking for an older C++ standard than its
    headers accept (-std=c++11 with CCCL 3) compiles at the lowest one they accept; off: as
    asked (CCCL then stops with its own #error)."""
    return _bool("CUPY_RAWCODE_RAISE_STD", True)


INSTALL_SCOPES = ("jitify", "all")


def _install_scope(what: str, value: str) -> str:
    if value not in INSTALL_SCOPES:
        raise ConfigError(
            f"{what}={value!r} is not an install() scope (accepted: {', '.join(INSTALL_SCOPES)})"
        )
    return value


def install_scope() -> str | None:
    """CUPY_RAWCODE_INSTALL: install(scope) at the import of CuPy (autoinstall.py), or None."""
    value = _get("CUPY_RAWCODE_INSTALL")
    return None if value is None else _install_scope("CUPY_RAWCODE_INSTALL", value)


def record_path() -> str | None:
    """CUPY_RAWCODE_RECORD: record (recording.py) every compile of the process to this file."""
    return _get("CUPY_RAWCODE_RECORD")


def cupy_options() -> bool:
    """CUPY_RAWCODE_CUPY_OPTIONS (default on): compile with what CuPy adds to every compile
    (--device-as-default-execution-space, -ftz=true); off: with the options as given."""
    return _bool("CUPY_RAWCODE_CUPY_OPTIONS", True)


def cupy_dump_on_error() -> bool:
    """CUPY_DUMP_CUDA_SOURCE_ON_ERROR, read as CuPy reads it: on only when it is the integer 1."""
    value = os.environ.get("CUPY_DUMP_CUDA_SOURCE_ON_ERROR", "")
    try:
        return int(value) == 1
    except ValueError:
        return False


def parse_count(what: str, value: str | int, minimum: int, meaning: str, note: str = "") -> int:
    """A whole number >= ``minimum``; ``meaning`` says what it counts and ``note`` adds to the
    accepted values, for the error (``what`` names the argument or variable)."""
    n: int | None = None
    if isinstance(value, str):
        try:
            n = int(value.strip())
        except ValueError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        n = value
    if n is None or n < minimum:
        raise ConfigError(
            f"{what}={value!r} is not {meaning} (accepted: a whole number >= {minimum}{note})"
        )
    return n


def parse_memory_entries(what: str, value: str | int) -> int:
    """A size of the in-memory LRU: a whole number >= 0 (0 keeps nothing in memory)."""
    return parse_count(what, value, 0, "a number of in-memory entries", "; 0 keeps none")


def memory_cache_entries() -> int:
    """CUPY_RAWCODE_MEMORY_ENTRIES: entries the in-memory LRU keeps (default 256; 0: none)."""
    value = _get("CUPY_RAWCODE_MEMORY_ENTRIES")
    return 256 if value is None else parse_memory_entries("CUPY_RAWCODE_MEMORY_ENTRIES", value)


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
    if isinstance(value, bool):
        raise ConfigError(
            f"{what}={value!r} is not a size (accepted: e.g. 500M, 2G or a byte count)"
        )
    if isinstance(value, int):
        n = value
    else:
        import re

        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        if m is None or m.group(2).lower() not in _UNITS:
            raise ConfigError(
                f"{what}={value!r} is not a size (accepted: a byte count or a number with one of "
                "the units K, M, G, T (binary; KiB, MB, ... also), e.g. 500M or 2G; 0: no bound)"
            )
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n < 0:
        raise ConfigError(f"{what}={value!r} is negative (accepted: a size >= 0; 0: no bound)")
    return n


def cache_max_size() -> int:
    """CUPY_RAWCODE_CACHE_MAX_SIZE: bound on the whole cache directory (default 1 GiB); 0 means
    no bound, as in ccache."""
    value = _get("CUPY_RAWCODE_CACHE_MAX_SIZE")
    return DEFAULT_MAX_SIZE if value is None else parse_size("CUPY_RAWCODE_CACHE_MAX_SIZE", value)


_bounds: dict[str, int] = {}  # cache directory -> the bound given in code (make_store's max_size)


def set_cache_bound(root, max_bytes: int) -> None:
    """Bound the cache directory ``root`` to ``max_bytes`` (0: no bound) in this process, over
    CUPY_RAWCODE_CACHE_MAX_SIZE: make_store(max_size=...) does."""
    _bounds[str(root)] = max_bytes


def cache_bound(root) -> int | None:
    """The size bound of the cache directory ``root`` in bytes, None for no bound: what
    set_cache_bound gave it, else CUPY_RAWCODE_CACHE_MAX_SIZE."""
    bound = _bounds.get(str(root))
    return (cache_max_size() if bound is None else bound) or None


def _paths(what: str, value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(os.pathsep) if p)


def bundles() -> tuple[str, ...]:
    """CUPY_RAWCODE_BUNDLES: read-only bundle files, separated by os.pathsep, consulted in order."""
    value = _get("CUPY_RAWCODE_BUNDLES")
    return _paths("CUPY_RAWCODE_BUNDLES", value) if value else ()


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def _redis_url(what: str, value: str) -> str:
    if not value.startswith(REDIS_SCHEMES):
        raise ConfigError(
            f"{what}={value!r} is not a Redis URL (accepted: {', '.join(REDIS_SCHEMES)} URLs, "
            "e.g. redis://host:6379/0)"
        )
    return value


def redis_url() -> str | None:
    """CUPY_RAWCODE_REDIS_URL: a shared Redis store (redis://host:port/db), read through and
    written back; needs the ``redis`` extra."""
    value = _get("CUPY_RAWCODE_REDIS_URL")
    return None if value is None else _redis_url("CUPY_RAWCODE_REDIS_URL", value)


def _redis_ttl(what: str, value: str) -> int:
    return parse_count(what, value, 1, "a whole number of seconds")


def redis_ttl() -> int | None:
    """CUPY_RAWCODE_REDIS_TTL: seconds a Redis entry lives (default: no expiry)."""
    value = _get("CUPY_RAWCODE_REDIS_TTL")
    return None if value is None else _redis_ttl("CUPY_RAWCODE_REDIS_TTL", value)


def _seconds(what: str, value: str) -> float:
    try:
        t = float(value)
    except ValueError:
        t = float("nan")
    if not 0 < t < float("inf"):
        raise ConfigError(f"{what}={value!r} is not a number of seconds (accepted: a number > 0)")
    return t


def redis_timeout() -> float:
    """CUPY_RAWCODE_REDIS_TIMEOUT: seconds before a Redis call counts as failed (default 0.5)."""
    value = _get("CUPY_RAWCODE_REDIS_TIMEOUT")
    return 0.5 if value is None else _seconds("CUPY_RAWCODE_REDIS_TIMEOUT", value)


def overlap() -> bool:
    """CUPY_RAWCODE_OVERLAP (default on): on a likely miss, start NVRTC while headers are
    scanned."""
    return _bool("CUPY_RAWCODE_OVERLAP", True)


def strip() -> bool:
    """CUPY_RAWCODE_STRIP (default on): drop unreferenced library globals from new code
    (strip.py)."""
    return _bool("CUPY_RAWCODE_STRIP", True)


def _pch(what: str, value: str) -> str:
    v = value.strip().lower()
    if v == "auto":
        return v
    try:
        return "always" if parse_bool(what, value) else "never"
    except ValueError:
        raise ConfigError(
            f"{what}={value!r} is not a PCH mode (accepted: auto, or a boolean: "
            f"{', '.join(_TRUE + _FALSE)}; any case)"
        ) from None


def pch_mode() -> str:
    """CUPY_RAWCODE_PCH: 'auto' (default: NVRTC's automatic PCH for a series of compiles that
    share their header prefix, see nvrtc._Pch), '1' (every compile) or '0' (never)."""
    value = _get("CUPY_RAWCODE_PCH")
    return "auto" if value is None else _pch("CUPY_RAWCODE_PCH", value)


def check_workers(what: str, value) -> int:
    """A number of worker processes: an int >= 1 (``what`` names the argument or variable)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"{what}={value!r} is not a number of worker processes "
            "(use a whole number >= 1, or None for the default)"
        )
    if value < 1:
        raise ConfigError(f"{what}={value!r}: at least one worker process is needed")
    return value


def _workers(what: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise ConfigError(
            f"{what}={value!r} is not a whole number of worker processes (accepted: a whole "
            "number >= 1)"
        ) from None
    return check_workers(what, n)


def workers() -> int | None:
    """CUPY_RAWCODE_WORKERS: worker processes for warmup() and prebuild (default: what the
    machine can take, see pool.default_workers)."""
    value = _get("CUPY_RAWCODE_WORKERS")
    return None if value is None else _workers("CUPY_RAWCODE_WORKERS", value)


def _any(what: str, value: str) -> str:
    return value


def _boolean(what: str, value: str) -> bool:
    return parse_bool(what, value)


# every variable cupy-rawcode reads, with its parser (what, value) -> parsed value
VARIABLES = {
    "CUPY_RAWCODE_CACHE_DIR": _any,
    "CUPY_RAWCODE_HEADER_SOURCES": parse_header_sources,
    "CUPY_RAWCODE_DUMP_SOURCE": _boolean,
    "CUPY_RAWCODE_MEMORY_ENTRIES": parse_memory_entries,
    "CUPY_RAWCODE_CACHE_MAX_SIZE": parse_size,
    "CUPY_RAWCODE_BUNDLES": _paths,
    "CUPY_RAWCODE_REDIS_URL": _redis_url,
    "CUPY_RAWCODE_REDIS_TTL": _redis_ttl,
    "CUPY_RAWCODE_REDIS_TIMEOUT": _seconds,
    "CUPY_RAWCODE_OVERLAP": _boolean,
    "CUPY_RAWCODE_PCH": _pch,
    "CUPY_RAWCODE_WORKERS": _workers,
    "CUPY_RAWCODE_STRIP": _boolean,
    "CUPY_RAWCODE_CUPY_OPTIONS": _boolean,
    "CUPY_RAWCODE_RAISE_STD": _boolean,
    "CUPY_RAWCODE_INSTALL": _install_scope,
    "CUPY_RAWCODE_RECORD": _any,
}


def _unknown(name: str) -> str:
    import difflib  # only when a name is wrong

    close = difflib.get_close_matches(name, VARIABLES, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown environment variable {name}{hint}; cupy-rawcode reads {', '.join(VARIABLES)}"


def validate() -> None:
    """Check every CUPY_RAWCODE_* variable that is set: a ValueError naming each bad value with
    what it accepts, and each unknown name with the closest known one. Runs once per process by
    itself, the first time any variable is read; call it to check again after changing
    os.environ."""
    global _validated
    problems = []
    for name, value in os.environ.items():
        if not name.startswith(PREFIX):
            continue
        parse = VARIABLES.get(name)
        if parse is None:
            problems.append(_unknown(name))
        elif value:
            try:
                parse(name, value)
            except ValueError as e:
                problems.append(str(e))
    if problems:
        raise ConfigError("\n".join(problems))
    _validated = True
