"""All configuration read from the environment, in one place, read lazily at call time.

Every variable read is one row of TABLE (a Var: name, parser, default, whether it enters the warm
index's id, its line in the README's "Environment" table, which markdown() renders and a test
checks); calling the row reads it. The first time a process reads any ``CUPY_RAWCODE_*`` one,
validate() checks every one that is set and refuses unknown ``CUPY_RAWCODE_*`` names (naming the
closest known one), so a bad value fails on every code path, not only on the paths that read it;
after that it costs one flag test. An empty variable counts as unset.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable

from . import deferred

errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised
sources = deferred("cupy_rawcode.ground.sources")  # a header search policy: when one is given
redaction = deferred("cupy_rawcode.ground.redaction")  # a bad remote URL's message only

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
    raise errors.ConfigError(
        f"{name}={value!r} is not a boolean (accepted: {', '.join(_TRUE + _FALSE)}; any case)"
    )


TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Generic, TypeVar

    T = TypeVar("T")

    class _Typed(Generic[T]):
        """Var's base as the type checker sees it: a row parses to a T."""

else:  # at run time ``_Typed[T]`` is object: subclassing Generic cost a warm hit's imports
    T = None  # ~0.15 ms, a base class of its own ~25 us
    _Typed = {None: object}


_rows: list[Var] = []  # every Var, in the order they are made: the table


class Var(_Typed[T]):
    """One row of the table: a variable's name, its parser ``(name, value) -> parsed`` (raising
    ConfigError with what it accepts), its default (unset or empty), whether it enters the warm
    index's id (``keyed``: it can change a cache key) and its line in the README's table. Calling
    the row reads the variable now (a CUPY_RAWCODE_* one validates the environment first, once
    per process; another program's variable is read as that program reads it, never refused)."""

    __slots__ = ("default", "doc", "keyed", "name", "parse")

    def __init__(self, name: str, parse: Callable[[str, str], T], default: T, keyed: bool = False):
        self.name, self.parse, self.default, self.keyed = name, parse, default, keyed
        self.doc = ""  # documented() gives it
        _rows.append(self)

    def documented(self, doc: str) -> Var[T]:
        """Give the row its README line (prose: a run of white space is a space); returns it."""
        self.doc = " ".join(doc.split())
        return self

    def __call__(self) -> T:
        if not _validated and self.name.startswith(PREFIX):
            validate()
        value = os.environ.get(self.name)
        return self.parse(self.name, value) if value else self.default

    def __repr__(self) -> str:
        return f"Var({self.name})"


def key_environment() -> list[tuple[str, str]]:
    """(name, value) of every environment variable that can change a cache key (KEY_ENV: the
    header search policy, stripping, CuPy's options, the standard, what discovery reads)."""
    if not _validated:
        validate()
    return [(name, os.environ.get(name, "")) for name in KEY_ENV]


def site_dirs() -> list[str]:
    """The site-packages directories on sys.path: where discovery finds wheels."""
    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def _header_sources(what: str, value: str) -> tuple[str, ...]:
    return sources.parse_header_sources(what, value)


INSTALL_SCOPES = ("jitify", "all")


def _install_scope(what: str, value: str) -> str:
    if value not in INSTALL_SCOPES:
        raise errors.ConfigError(
            f"{what}={value!r} is not an install() scope (accepted: {', '.join(INSTALL_SCOPES)})"
        )
    return value


def _cupy_flag(what: str, value: str) -> bool:
    """A flag read as CuPy reads CUPY_DUMP_CUDA_SOURCE_ON_ERROR: on only when it is the integer
    1; any other value is off, never an error."""
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
        raise errors.ConfigError(
            f"{what}={value!r} is not {meaning} (accepted: a whole number >= {minimum}{note})"
        )
    return n


def parse_memory_entries(what: str, value: str | int) -> int:
    """A size of the in-memory LRU: a whole number >= 0 (0 keeps nothing in memory)."""
    return parse_count(what, value, 0, "a number of in-memory entries", "; 0 keeps none")


_UNITS = {"": 1, "b": 1} | {  # binary: k, kb, kib = 1 << 10 (any case); m, g, t likewise
    f"{unit}{tail}": 1 << 10 * n for n, unit in enumerate("kmgt", 1) for tail in ("", "b", "ib")
}
DEFAULT_MAX_SIZE = 1 << 30


def parse_size(what: str, value: str | int) -> int:
    """'1G', '512MiB', '300k', '1048576' -> bytes (binary units)."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:  # a bool is no size: "True" matches no size's text
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(value))
        if m is None or m.group(2).lower() not in _UNITS:
            raise errors.ConfigError(
                f"{what}={value!r} is not a size (accepted: a byte count or a number with one of "
                "the units K, M, G, T (binary; KiB, MB, ... also), e.g. 500M or 2G; 0: no bound)"
            )
        size = float(m.group(1)) * _UNITS[m.group(2).lower()]
        n = int(size) if size < 1 << 100 else -1  # past that (a float's range): no disk holds it
    if n < 0:
        why = "is negative" if isinstance(value, int) else "is too large to be a size"
        raise errors.ConfigError(f"{what}={value!r} {why} (accepted: a size >= 0; 0: no bound)")
    return n


def _paths(what: str, value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(os.pathsep) if p)


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def _redis_url(what: str, value: str) -> str:
    if not value.startswith(REDIS_SCHEMES):
        raise errors.ConfigError(
            f"{what}={value!r} is not a Redis URL (accepted: {', '.join(REDIS_SCHEMES)} URLs, "
            "e.g. redis://host:6379/0)"
        )
    return value


URL_SCHEMES = ("redis", "rediss", "unix", "memcached", "http", "https", "s3")  # scheme://...
# local: /dir, C:\dir, C:/dir (a letter, then a slash: never host:port), \\srv\share, memory:, file:
_LOCAL = r"/|[A-Za-z]:[\\/]|\\\\|memory:\Z|(?:file|bundle):."  # compiled when first matched


def remote_url_problem(url: str, quote: bool = True) -> str | None:
    """What makes ``url`` no remote level, or None: a typo fails, never opens a directory. A user
    part ends at the last ``@`` (a password holds anything): a URL with one is quoted in no piece
    (nor any URL when not ``quote``)."""
    (scheme, sep, rest), (head, _, tail) = url.partition("://"), url.partition(":")
    if not sep or scheme in ("file", "bundle"):  # a local level (_LOCAL) or a module:Class
        named = tail and all(p.isidentifier() for p in f"{head}.{tail}".split("."))
        ok = named or re.match(_LOCAL, url)
        return f"no // after {head}:" if head in URL_SCHEMES else None if ok else "no scheme"
    netloc = re.split("[/?#]", rest.rpartition("@")[2])[0]
    host, _, port = netloc.rpartition("]")[2].partition(":")  # [v6]:port
    quote = quote and "@" not in url
    if scheme not in URL_SCHEMES:
        return "unknown scheme" + (f" {scheme!r}" if quote else "")
    if port and not (port.isascii() and port.isdigit() and int(port) < 1 << 16):
        return "the port" + (f" {port!r}" if quote else "") + " is not a number from 0 to 65535"
    hosted = host or "]" in netloc or scheme in ("redis", "rediss", "unix")  # Redis: localhost
    return None if hosted else "no bucket" if scheme == "s3" else "no host"


def _remote(what: str, value: str) -> tuple[str, ...]:
    for n, spec in enumerate(value.split(), 1):
        url, *attrs = spec.split("|")
        bad = not url or any(a != "read-only" for a in attrs)
        problem = "not a URL, then `|read-only` or nothing" if bad else None
        if problem := problem or remote_url_problem(url, quote="@" not in value):
            hid = "@" in value and "@" not in spec  # a password split off by a space: not quoted
            shown = f"entry {n} (not shown: a user part)" if hid else repr(redaction.redacted(spec))
            raise errors.ConfigError(
                f"{what}: {shown}: {problem} (accepted, separated by spaces: a URL "
                f"{'://, '.join(URL_SCHEMES)}://, module:Class, memory:, file:PATH or an absolute "
                "path, each may end `|read-only`; e.g. 's3://bucket/k memcached://host:11211')"
            )
    return tuple(value.split())


def _redis_ttl(what: str, value: str) -> int:
    return parse_count(what, value, 1, "a whole number of seconds")


def _seconds(what: str, value: str) -> float:
    try:
        t = float(value)
    except ValueError:
        t = float("nan")
    if not 0 < t < float("inf"):
        raise errors.ConfigError(
            f"{what}={value!r} is not a number of seconds (accepted: a number > 0)"
        )
    return t


def _pch(what: str, value: str) -> str:
    v = value.strip().lower()
    if v == "auto":
        return v
    try:
        return "always" if parse_bool(what, value) else "never"
    except ValueError:
        raise errors.ConfigError(
            f"{what}={value!r} is not a PCH mode (accepted: auto, or a boolean: "
            f"{', '.join(_TRUE + _FALSE)}; any case)"
        ) from None


def check_workers(what: str, value) -> int:
    """A number of worker processes: an int >= 1 (``what`` names the argument or variable)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.ConfigError(
            f"{what}={value!r} is not a number of worker processes "
            "(use a whole number >= 1, or None for the default)"
        )
    if value < 1:
        raise errors.ConfigError(f"{what}={value!r}: at least one worker process is needed")
    return value


def _workers(what: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise errors.ConfigError(
            f"{what}={value!r} is not a whole number of worker processes (accepted: a whole "
            "number >= 1)"
        ) from None
    return check_workers(what, n)


def _any(what: str, value: str) -> str:
    return value


# The table: every variable cupy-rawcode reads, one row each, in the README's order (the rows
# register themselves as they are made); a row is called to read it (config.strip()).
# - the cache and its stores (store/)
cache_dir_variable = Var("CUPY_RAWCODE_CACHE_DIR", _any, None).documented(
    """cache directory (a `cache_dir=` given to `compile()`, or `set_store(make_store(dir))`,
    takes its place for everything that compile writes)"""
)
memory_cache_entries = Var("CUPY_RAWCODE_MEMORY_ENTRIES", parse_memory_entries, 256).documented(
    "size of the in-memory LRU (default 256; `0`: none)"
)
cache_max_size = Var("CUPY_RAWCODE_CACHE_MAX_SIZE", parse_size, DEFAULT_MAX_SIZE).documented(
    """bound on the whole cache directory, e.g. `500M`, `2G` (binary units; default 1 GiB; `0`:
    no bound)"""
)
_NO_PATHS: tuple[str, ...] = ()  # typed: Var[tuple[str, ...]] without subscripting at run time
bundles = Var("CUPY_RAWCODE_BUNDLES", _paths, _NO_PATHS).documented(
    "read-only bundle files, `:`-separated, consulted before compiling"
)
redis_url = Var("CUPY_RAWCODE_REDIS_URL", _redis_url, None).documented(
    """shared Redis store, e.g. `redis://cache:6379/0` (`redis://`, `rediss://` or `unix://`;
    extra `redis`)"""
)
redis_ttl = Var("CUPY_RAWCODE_REDIS_TTL", _redis_ttl, None).documented(
    "whole seconds >= 1 a Redis entry lives (default: no expiry)"
)
redis_timeout = Var("CUPY_RAWCODE_REDIS_TIMEOUT", _seconds, 0.5).documented(
    "seconds (> 0) before a Redis call counts as failed (default 0.5)"
)
remote = Var("CUPY_RAWCODE_REMOTE", _remote, _NO_PATHS).documented(
    "remote levels after the local ones and Redis's, in look-up order, separated by spaces: "
    "`s3://bucket/prefix`, `memcached://host:11211`, `http(s)://host/path`, `redis://...`, "
    '`module:Class`; each may end `\\|read-only` (see "Sharing a cache")'
)
remote_timeout = Var("CUPY_RAWCODE_REMOTE_TIMEOUT", _seconds, 2.0).documented(
    "seconds (> 0) a call to a remote level may take before it is skipped (default 2)"
)
cache_failures = Var("CUPY_RAWCODE_CACHE_FAILURES", parse_bool, True).documented(
    """`1` (default): a compile error is cached under the kernel's key and raised again, with
    NVRTC's log, without compiling (see "Compiling, failing and logging as CuPy does"); `0`:
    failures are neither cached nor served"""
)

# - what a compile does; the keyed rows enter the warm index's id in this order (another order
#   would make every index entry miss once)
header_sources = Var("CUPY_RAWCODE_HEADER_SOURCES", _header_sources, None, keyed=True).documented(
    "header search policy (above)"
)
strip = Var("CUPY_RAWCODE_STRIP", parse_bool, True, keyed=True).documented(
    "`1` (default): strip unreferenced library globals from new cubins and PTX (see above)"
)
cupy_options = Var("CUPY_RAWCODE_CUPY_OPTIONS", parse_bool, True, keyed=True).documented(
    """`1` (default): compile with what CuPy adds (`--device-as-default-execution-space`,
    `-ftz=true`); `0`: the options as given"""
)
raise_std = Var("CUPY_RAWCODE_RAISE_STD", parse_bool, True, keyed=True).documented(
    """`1` (default): a `-std` older than the headers accept is raised to their floor, with one
    warning; `0`: compiled as asked"""
)
overlap = Var("CUPY_RAWCODE_OVERLAP", parse_bool, True).documented(
    """`1` (default): on a likely miss, NVRTC starts while headers are scanned (on a daemon
    thread: a compile no longer wanted never holds up the exit)"""
)
pch_mode = Var("CUPY_RAWCODE_PCH", _pch, "auto").documented(
    """`auto` (default): NVRTC's automatic precompiled headers only where they pay (below); `1`
    always, `0` never"""
)
dump_source = Var("CUPY_RAWCODE_DUMP_SOURCE", parse_bool, False).documented(
    "`1`: a compile error writes the source and options to a file it names"
)
workers = Var("CUPY_RAWCODE_WORKERS", _workers, None).documented(
    """worker processes for `warmup()` and `prebuild` (default: cores, and memory at ~400 MB a
    compile)"""
)

# - the CuPy hook of every Python process (cupy_rawcode.pth, autoinstall.py)
install_scope = Var("CUPY_RAWCODE_INSTALL", _install_scope, None).documented(
    """`jitify` or `all`: `install(scope=...)` in every Python process of the environment, as
    soon as it imports CuPy (through the installed `cupy_rawcode.pth`; see "Every CuPy
    compile"); a bad value of any `CUPY_RAWCODE_*` variable turns the hook off with one line on
    stderr, never a traceback"""
)
record_path = Var("CUPY_RAWCODE_RECORD", _any, None).documented(
    """a file: `record(file)` in every Python process of the environment (the same way); a file
    that cannot be written warns once, and compiles go on"""
)

# - other programs' variables, read as their owners read them: CuPy's, the XDG convention's,
#   and what toolchain discovery reads (the toolchain record holds while they are unchanged)
cupy_dump_on_error = Var("CUPY_DUMP_CUDA_SOURCE_ON_ERROR", _cupy_flag, False).documented(
    "CuPy's: `1` writes a failing compile's source to stderr (`CompileException.dump`)"
)
cupy_debug = Var("CUPY_CUDA_COMPILE_WITH_DEBUG", _cupy_flag, False, keyed=True).documented(
    """CuPy's: `1` compiles with `--device-debug --generate-line-info`, as CuPy adds them to
    every compile (unless `CUPY_RAWCODE_CUPY_OPTIONS=0`)"""
)
cupy_ptx = Var("CUPY_COMPILE_WITH_PTX", _cupy_flag, False, keyed=True).documented(
    """CuPy's: `1` compiles a kernel for the device to PTX (`compute_XX`), which the driver
    compiles when it loads it, instead of a cubin, as CuPy does"""
)
xdg_cache_home = Var("XDG_CACHE_HOME", _any, None).documented(
    """where the cache directory is when `CUPY_RAWCODE_CACHE_DIR` is unset:
    `$XDG_CACHE_HOME/cupy-rawcode`, else `~/.cache/cupy-rawcode`"""
)
cuda_home = Var("CUDA_HOME", _any, None, keyed=True).documented(
    """the toolkit's headers (its `include/`, before `CUDA_PATH`'s and `/usr/local/cuda`'s; see
    the search order); a change makes the warm index and the toolchain record miss"""
)
cuda_path = Var("CUDA_PATH", _any, None, keyed=True).documented("read as `CUDA_HOME` is, after it")
ld_library_path = Var("LD_LIBRARY_PATH", _any, None, keyed=True).documented(
    """where the NVRTC library may be loaded from: a change makes the warm index and the
    toolchain record miss"""
)
conda_prefix = Var("CONDA_PREFIX", _any, None, keyed=True).documented(
    """a conda environment, where NVRTC and headers may be found: a change makes the warm index
    and the toolchain record miss"""
)

TABLE: tuple[Var, ...] = tuple(_rows)
VARIABLES = {v.name: v for v in TABLE if v.name.startswith(PREFIX)}  # what validate() knows
KEY_ENV = tuple(v.name for v in TABLE if v.keyed)  # key_environment()'s, in the table's order
TOOLCHAIN_ENV = tuple(v.name for v in (cuda_home, cuda_path, ld_library_path, conda_prefix))


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
    # names only, then the values of ours: decoding every value costs a warm hit ~0.1 ms
    for name in [n for n in os.environ if n.startswith(PREFIX)]:
        value, row = os.environ.get(name), VARIABLES.get(name)
        if row is None:
            problems.append(_unknown(name))
        elif value:
            try:
                row.parse(name, value)
            except ValueError as e:
                problems.append(str(e))
    if problems:
        raise errors.ConfigError("\n".join(problems))
    _validated = True


def markdown() -> str:
    """The README's "## Environment" table, rendered from TABLE (tests/ground/test_config.py checks
    that the README holds exactly this)."""
    lines = ["| variable | meaning |", "| --- | --- |"]
    lines += [f"| `{v.name}` | {v.doc} |" for v in TABLE]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m cupy_rawcode.ground.config --markdown
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m cupy_rawcode.ground.config --markdown")
    sys.stdout.write(markdown())
