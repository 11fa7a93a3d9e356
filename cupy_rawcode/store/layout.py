"""What a cache directory holds, and whether a directory is one.

A cache directory is marked by ``CACHEDIR.TAG`` (the standard tag: backup tools skip the
directory). Its first write claims a directory that is new or empty by writing the tag; a
non-empty directory without it is not a cache: nothing there is read, written, counted or
removed, and compiles go on uncached, with one warning; unless every name in it is one the
layout writes (a cache of a release before the tag), which is marked and used. Inside a marked
directory the cache reads, counts and removes only the names its own layout writes
(``is_own``), and never follows a symbolic link: a kind directory replaced by a link makes the
cache unusable for compiles (one warning) and is neither walked nor deleted through.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from ..ground import config, deferred, read_cache_file

# off a cache hit's path (ground/deferrals.py): a write, and a warning
fsutil = deferred("cupy_rawcode.ground.fsutil")
log = deferred("cupy_rawcode.ground.log")
errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised

MARKER = "CACHEDIR.TAG"
SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
MARKER_TEXT = SIGNATURE + (
    b"\n# This file is a cache directory tag created by cupy-rawcode (compiled CUDA kernels).\n"
    b"# For information about cache directory tags see https://bford.info/cachedir/\n"
)
EVICTED = ("entries", "manifests", "index", "toolchain")  # kind directories, evicted by LRU
KEPT = ("stats", "nvrtc-headers")  # kind directories, counted and never evicted
TOP_FILES = (MARKER, "prebuilt.keys")  # the cache's files at its top: counted, never evicted
SHARDED = ("entries", "manifests", "index")  # <kind>/<first 2 chars of the name>/<name>
STATS_FILES = ("hits", "misses", "counts", "size", ".hits.fold", ".misses.fold")
_NAME = {  # a kind's file names: (lower-case hex digits, suffix)
    "entries": (64, ""),
    "manifests": (64, ".json"),
    "index": (64, ".json"),
    "toolchain": (32, ".json"),
}
_HEX = frozenset("0123456789abcdef")


class CacheLocation:
    """Where the cache lives and the configured bound on its whole size in bytes (0: none):
    resolved from configuration in one place (cache_location) and used as one value (a plain
    slotted class, as on every module of the warm-hit path: a NamedTuple costs it 0.2 ms)."""

    __slots__ = ("max_size", "path")

    def __init__(self, path: Path, max_size: int):
        self.path, self.max_size = path, max_size

    def __eq__(self, other) -> bool:
        return isinstance(other, CacheLocation) and (self.path, self.max_size) == (
            other.path,
            other.max_size,
        )

    def __hash__(self) -> int:
        return hash((self.path, self.max_size))

    def __repr__(self) -> str:
        return f"CacheLocation(path={self.path!r}, max_size={self.max_size!r})"


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
    token = _cache_dir_given.set(absolute(path))
    try:
        yield
    finally:
        _cache_dir_given.reset(token)


def cache_dir() -> Path:
    """The cache directory, absolute: the one the running compile was given (using_cache_dir),
    else CUPY_RAWCODE_CACHE_DIR, else $XDG_CACHE_HOME/cupy-rawcode, else ~/.cache/cupy-rawcode
    (a relative one counted from the working directory of now)."""
    given = _cache_dir_given.get()
    if given is not None:
        return given
    explicit = config.cache_dir_variable()
    if explicit:
        return _first_reading(explicit, "CUPY_RAWCODE_CACHE_DIR")
    xdg = config.xdg_cache_home()
    default = "the default ~/.cache (neither CUPY_RAWCODE_CACHE_DIR nor XDG_CACHE_HOME is set)"
    base = _first_reading(xdg, "XDG_CACHE_HOME") if xdg else absolute("~/.cache", default)
    return base / "cupy-rawcode"


_read: dict[str, Path] = {}  # a variable's value -> the directory it named when first read


def _first_reading(value: str, variable: str) -> Path:
    """The directory a ``variable``'s ``value`` named the first time this process read it: a
    relative CUPY_RAWCODE_CACHE_DIR keeps naming one cache after an ``os.chdir``."""
    found = _read.get(value)
    if found is None:
        found = _read.setdefault(value, absolute(value, f"{variable}={value!r}"))
    return found


def absolute(path: str | os.PathLike, what: str | None = None) -> Path:
    """``path`` (``~`` expanded) made absolute against the working directory of now, once: a
    store keeps it, so a later ``os.chdir`` never moves the cache or writes beside it. A ``~``
    that names no home is a ConfigError naming ``what`` (default: the ``cache_dir`` argument)."""
    try:
        return Path(os.fspath(path)).expanduser().absolute()
    except RuntimeError as e:  # pathlib: "Could not determine home directory"
        what = what or f"cache_dir={os.fspath(path)!r}"
        raise errors.ConfigError(f"{what}: its '~' names no home ({e})") from None


def cache_location(path: str | os.PathLike | None = None) -> CacheLocation:
    """The cache, at an absolute path: ``path`` when given (a ``cache_dir=`` argument), else
    config's cache_dir() (the running compile's directory, else CUPY_RAWCODE_CACHE_DIR, else
    $XDG_CACHE_HOME/cupy-rawcode, else ~/.cache/cupy-rawcode); bounded by
    CUPY_RAWCODE_CACHE_MAX_SIZE. An empty path names no directory: RawcodeValueError."""
    if path is not None and not os.fspath(path):
        raise errors.RawcodeValueError(f"cache_dir={path!r} names no directory (an empty path)")
    root = cache_dir() if path is None else absolute(path)
    return CacheLocation(root, config.cache_max_size())


# cache directory -> the bound given in code (make_store's max_size); directory.py and
# sizebound.py ask bound()
_bounds: dict[str, int] = {}


def set_bound(root, max_bytes: int) -> None:
    """Bound the cache directory ``root`` to ``max_bytes`` (0: no bound) in this process, over
    CUPY_RAWCODE_CACHE_MAX_SIZE: make_store(max_size=...) does."""
    _bounds[str(root)] = max_bytes


def bound(root) -> int | None:
    """The size bound of the cache directory ``root`` in bytes, None for no bound: what
    set_bound gave it, else its location's configured one (CUPY_RAWCODE_CACHE_MAX_SIZE)."""
    given = _bounds.get(str(root))
    if given is None:
        given = cache_location(root).max_size
    return given or None


_owned: set[str] = set()  # cache directories known to be marked, in this process


@functools.cache
def _temp_pattern(kind: str):
    """The compiled pattern of a writer's temp files of a kind's files (fsutil.atomic_write's:
    .<name>.<8 chars>.tmp)."""
    return re.compile(rf"\.({file_pattern(kind)})\.[a-z0-9_]{{8}}\.tmp")


def file_pattern(kind: str) -> str:
    """The regular expression of a kind's file names (``_NAME``)."""
    digits, suffix = _NAME[kind]
    return f"[0-9a-f]{{{digits}}}" + re.escape(suffix)


def _own_name(kind: str, name: str) -> bool:
    """Whether ``name`` is of the form of the kind's files (``_NAME``), matched without a regular
    expression: a warm hit checks one key, and compiling the pattern would cost it 60-100 us."""
    digits, suffix = _NAME[kind]
    return (
        len(name) == digits + len(suffix)
        and name.endswith(suffix)
        and _HEX.issuperset(name[:digits])
    )


def is_shard(name: str) -> bool:
    """A shard directory's name: two lower-case hex digits."""
    return len(name) == 2 and all(c in "0123456789abcdef" for c in name)


def is_own(kind: str, name: str, shard: str | None = None) -> bool:
    """Whether ``name`` (in ``shard``, for a sharded kind) is a file the layout writes."""
    if not _own_name(kind, name):
        return False
    return kind not in SHARDED or (shard is not None and is_shard(shard) and name[:2] == shard)


def is_own_temp(kind: str, name: str, shard: str | None = None) -> bool:
    """Whether ``name`` is a writer's temp file of one of the kind's own files."""
    m = _temp_pattern(kind).fullmatch(name)
    return m is not None and (kind not in SHARDED or m.group(1)[:2] == shard)


def is_own_stats(name: str) -> bool:
    """A file of stats/: a counter, the folded counts, the ledger, or a temp file of counts."""
    return name in STATS_FILES or (name.startswith(".counts.") and name.endswith(".tmp"))


def real_dir(path) -> bool:
    """A directory that is no symbolic link (lstat)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def is_marked(root) -> bool:
    """Whether ``root`` holds the cache's marker: a regular file starting with the signature
    that says cupy-rawcode made it (ccache's and cargo's tags are the same standard tag, and
    their directories are theirs)."""
    data = read_cache_file(Path(root, MARKER), 4096)
    return data is not None and data.startswith(SIGNATURE) and b"cupy-rawcode" in data


def linked_kind(root) -> str | None:
    """The first kind directory of ``root`` that is a symbolic link (or no directory), if any."""
    for kind in EVICTED + KEPT:
        path = os.path.join(root, kind)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return path
        except FileNotFoundError:
            continue
        except OSError:
            return path
    return None


def _only_marker_temps(root) -> bool | None:
    """True when ``root`` is empty but for marker temp files, False when it holds anything else,
    None when it is no directory (missing, or a file: a write there fails and says why). Stops at
    the first other name: never walks a large tree."""
    try:
        with os.scandir(root) as it:
            for d in it:
                if not (d.name.startswith(f".{MARKER}.") and d.name.endswith(".tmp")):
                    return False
    except (FileNotFoundError, NotADirectoryError):
        return None
    return True


def _own_entry(kind: str, d: os.DirEntry) -> bool:
    """Whether ``d``, found in the kind directory ``kind``, is a name that directory's writer
    makes (a shard of own files for a sharded kind; any tree under nvrtc-headers/)."""
    if kind == "nvrtc-headers":
        return True
    if kind == "stats":
        return is_own_stats(d.name) and d.is_file(follow_symlinks=False)
    if kind not in SHARDED:
        return (is_own(kind, d.name) or is_own_temp(kind, d.name)) and d.is_file(
            follow_symlinks=False
        )
    if not (is_shard(d.name) and d.is_dir(follow_symlinks=False)):
        return False
    with os.scandir(d.path) as files:
        return all(
            (is_own(kind, f.name, d.name) or is_own_temp(kind, f.name, d.name))
            and f.is_file(follow_symlinks=False)
            for f in files
        )


def written_by_layout(root) -> bool:
    """Whether everything in the unmarked directory ``root`` is a name the layout writes: a cache
    written before the marker existed, adopted (marked) rather than refused. Stops at the first
    other name, so a foreign tree is never walked far."""
    try:
        with os.scandir(root) as it:
            for d in it:
                if d.name in TOP_FILES or (
                    d.name.startswith(f".{MARKER}.") and d.name.endswith(".tmp")
                ):
                    if not d.is_file(follow_symlinks=False):
                        return False
                    continue
                if d.name not in EVICTED + KEPT or not d.is_dir(follow_symlinks=False):
                    return False
                with os.scandir(d.path) as inner:
                    if not all(_own_entry(d.name, e) for e in inner):
                        return False
    except OSError:
        return False
    return True


def _adopt(root) -> bool:
    """Mark ``root`` when it holds only the layout's names (a cache of an earlier release);
    whether it may be used. A marker that cannot be written (a read-only cache) still lets it
    be read."""
    if not written_by_layout(root):
        return False
    try:
        fsutil.atomic_write(Path(root, MARKER), MARKER_TEXT, mode=0o644)
    except OSError:
        pass
    return True


def foreign_message(root) -> str:
    """Why ``root`` is not used as a cache (its marker missing, or something else in its place),
    and what to do."""
    return (
        f"{root} is not a cupy-rawcode cache directory: it is not empty and {_marker_state(root)}; "
        "cupy-rawcode neither writes, reads nor removes anything there. Point "
        "CUPY_RAWCODE_CACHE_DIR at a new or empty directory"
    )


def _marker_state(root) -> str:
    """What stands at ``root``'s marker, for a message: nothing, or what is not cupy-rawcode's."""
    try:
        mode = os.lstat(os.path.join(root, MARKER)).st_mode
    except FileNotFoundError:
        return f"has no {MARKER}"
    except OSError as e:
        return f"its {MARKER} cannot be read ({e.strerror})"
    if not stat.S_ISREG(mode):
        return f"its {MARKER} is no regular file (a link, FIFO, device or directory)"
    return f"its {MARKER} is not cupy-rawcode's (another tool's tag, or unreadable)"


def linked_message(path) -> str:
    """Why a cache with a kind directory replaced by a symbolic link is not used."""
    return (
        f"{path} is a symbolic link (or not a directory): cupy-rawcode never follows links "
        "inside its cache directory; remove it, or point CUPY_RAWCODE_CACHE_DIR at the other "
        "disk instead"
    )


def warn_once(root, message: str) -> None:
    """One warning per directory and process (log.warn_once): the cache is not used there."""
    log.warn_once(
        ("cache not used", str(root)), "cupy-rawcode: %s; compiling without the cache", message
    )


def owned(root) -> bool:
    """Whether ``root`` is a usable cache to read: marked, no kind directory a link (checked
    once per process; a link or a foreign directory is warned about once)."""
    key = str(root)
    if key in _owned:
        return True
    if not is_marked(root):
        if _only_marker_temps(root) is not False:
            return False  # missing or empty: nothing to read, claim() marks it
        if not _adopt(root):
            warn_once(root, foreign_message(root))
            return False
    linked = linked_kind(root)
    if linked is not None:
        warn_once(root, linked_message(linked))
        return False
    _owned.add(key)
    return True


def claim(root) -> bool:
    """Whether the cache may write in ``root``: it is the cache's (``owned``), or it is new or
    empty and is marked now. False for anything else (warned about once); OSError when the
    marker cannot be written (a read-only or full disk: the caller's write says why). A cache
    removed while this process runs (rm -rf) is claimed again, not rebuilt unmarked."""
    if str(root) in _owned and not os.path.lexists(os.path.join(root, MARKER)):
        _owned.discard(str(root))
    if owned(root):
        return True
    if is_marked(root):
        return False  # a kind directory is a link: owned warned
    if _only_marker_temps(root) is None:
        fsutil.make_private_dirs(Path(root))
    empty = _only_marker_temps(root)
    if empty is None:
        raise errors.CacheNotADirectoryError(errno.ENOTDIR, "not a directory", str(root))
    if not empty:
        return False  # foreign: owned warned
    fsutil.atomic_write(Path(root, MARKER), MARKER_TEXT, mode=0o644)
    return owned(root)


def refusal(root) -> str | None:
    """For the cache commands: why ``root`` must be left alone, or None (a cache, or a
    directory that is missing or empty)."""
    if is_marked(root):
        linked = linked_kind(root)
        return None if linked is None else linked_message(linked)
    if _only_marker_temps(root) is False and not _adopt(root):
        return foreign_message(root)
    return None
