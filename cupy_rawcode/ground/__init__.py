"""The ground layer: what every stage stands on and that imports nothing of the pipeline above
it: file stamps (stamps.py), the package's version, ``deferred``: a module imported on first use
(deferrals.py lists them, with the reasons), and, here rather than in modules of their own
(every warm hit uses them: a module fewer to import each), the labelled digests, the records
trusted while their files' stamps hold (``StampedRecord``, ``check_stamps``) and the cache's
file readers: only regular files (a FIFO, a device or a socket named as a source, found as a
header or standing in the cache would block a read forever, or never end), the cache's own
without following a symlink and up to a size limit (regular.py has the other readers).

The layer order (tests/layers/test_layers.py): ground, store, toolkit, headers, key, compiler
and launch, the orchestrator, then the faces (classes, CuPy integration, workers, CLI)."""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
import time

try:
    import fcntl as _fcntl
except ImportError:  # Windows: no advisory locks
    _fcntl = None  # type: ignore[assignment]

TYPE_CHECKING = False  # typing is not imported for this: a process's first import of it costs
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path
    from typing import Any

VERSION = "0.1.0"  # the package's version (pyproject.toml says the same; a test checks it)


class Deferred:
    """A module imported the first time one of its attributes is read (or set: a test's patch
    lands on the module itself). Here, not in deferrals.py: a hit loads this package anyway."""

    __slots__ = ("_deferred_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_deferred_name", name)

    def _module(self) -> Any:
        name = object.__getattribute__(self, "_deferred_name")
        module = sys.modules.get(name)
        if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
            __import__(name)  # waits for a thread still running its body (no half-made module)
            module = sys.modules[name]
        return module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._module(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._module(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._module(), attr)

    def __repr__(self) -> str:
        return f"<deferred module {object.__getattribute__(self, '_deferred_name')!r}>"


_stand_ins: dict[str, Deferred] = {}  # name -> its one stand-in, shared by every module


def deferred(name: str) -> Any:
    """A stand-in for the module ``name`` (absolute, and listed in deferrals.DEFERRED:
    tests/layers/test_layers.py checks both) that imports it on first use. Typed Any: the call sites
    are checked by the tests that run them."""
    found = _stand_ins.get(name)
    if found is None:
        found = _stand_ins[name] = Deferred(name)
    return found


# The exception roots (named and pickled as errors.py's) and the file readers' two errors: here,
# so that a module raising or subclassing them loads no other class; built when first asked for
# (``__getattr__``): a warm hit raises nothing and builds none (a class costs ~25 us).
_ERRORS = __name__ + ".errors"

if TYPE_CHECKING:  # the classes as the type checker sees them; _classes() builds them

    class RawcodeError(Exception): ...

    class RawcodeWarning(Warning): ...

    class NotRegularFileError(RawcodeError, OSError): ...

    class TooLargeError(RawcodeError, OSError): ...


_built: dict[str, type] = {}
_building = threading.Lock()


def _classes() -> dict[str, type]:
    """The four classes, built once per process (under a lock: two threads must never get two
    different RawcodeError classes; once built, no lock: ``_built`` is filled in one update)."""
    if _built:
        return _built
    with _building:
        if _built:
            return _built

        class RawcodeError(Exception):
            """Root of every exception cupy_rawcode raises: ``except RawcodeError``."""

        class RawcodeWarning(Warning):
            """Root of every warning cupy_rawcode emits: one filter for them all."""

        class NotRegularFileError(RawcodeError, OSError):
            """A path naming something other than a regular file (``strerror`` says what)."""

        class TooLargeError(RawcodeError, OSError):
            """A file larger than its reader's limit (a cache file cannot be that big)."""

        built = {}
        roots = ((RawcodeError, _ERRORS), (RawcodeWarning, _ERRORS))
        for cls, module in (*roots, (NotRegularFileError, __name__), (TooLargeError, __name__)):
            cls.__module__, cls.__qualname__ = module, cls.__name__  # where pickles find them
            built[cls.__name__] = cls
        _built.update(built)  # all four at once: a reader never sees some of them
        return _built


def __getattr__(name: str) -> type:
    """RawcodeError, RawcodeWarning, NotRegularFileError and TooLargeError, on first use."""
    value = _classes().get(name) if name in _CLASS_NAMES else None
    if value is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next look-up is a plain global
    return value


_CLASS_NAMES = ("RawcodeError", "RawcodeWarning", "NotRegularFileError", "TooLargeError")


hashlib = deferred("hashlib")  # 2-3 ms where CuPy has not loaded it: the first digest only


def encode_fields(fields: Iterable[tuple[str, str | bytes]]) -> bytes:
    """label, value pairs as len(label) label len(value) value: unambiguous, no reprs. The one
    encoding behind the cache key, the closure digest, the manifests' and records' ids."""
    out = bytearray()
    for label, value in fields:
        lab = label.encode()
        val = value if isinstance(value, bytes) else value.encode("utf-8")
        out += len(lab).to_bytes(4, "little") + lab + len(val).to_bytes(8, "little") + val
    return bytes(out)


def digest_fields(fields: list) -> str:
    """The SHA-256 (hex) of the encoded fields."""
    return hashlib.sha256(encode_fields(fields)).hexdigest()


# ---------------------------------------------------------------- reading regular files

_log = deferred("cupy_rawcode.ground.log")  # a refused cache file only: off a hit's imports
# (named _log: ``from cupy_rawcode.ground import log`` gives the module itself)

# O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer (on a
# regular file it changes nothing); O_CLOEXEC: never leaks into a worker process
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ('a FIFO (named pipe)', ...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


# the cache's limits: an entry is code (CUB kernels are < 1 MiB), a record is a JSON object
ENTRY_LIMIT = 256 << 20
RECORD_LIMIT = 8 << 20
NO_LIMIT = sys.maxsize  # a header: read whole, whatever its size


def open_regular(path: str, follow: bool = True) -> tuple[int, os.stat_result]:
    """(file descriptor, its fstat) of a regular file, opened for reading without ever
    blocking; NotRegularFileError (an OSError) for anything else, and for a symlink when
    ``follow`` is False (the cache's own files: a link there points outside it)."""
    try:
        fd = os.open(path, _FLAGS if follow else _FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise _classes()["NotRegularFileError"](
                errno.ELOOP, "a symbolic link", os.fspath(path)
            ) from None
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _classes()["NotRegularFileError"](
            errno.EINVAL, f"{kind_of(st.st_mode)}, not a regular file", os.fspath(path)
        )
    return fd, st


def read_fd(fd: int, st: os.stat_result, limit: int = NO_LIMIT, path: str = "") -> bytes:
    """A whole open file of at most ``limit`` bytes (TooLargeError past it, even when it grows
    while read): one read when it is no larger than fstat said."""
    if st.st_size > limit:
        raise _classes()["TooLargeError"](errno.EFBIG, f"larger than {limit} bytes", path)
    data = os.read(fd, st.st_size + 1)
    if len(data) <= st.st_size:
        return data
    chunks, total = [data], len(data)  # it grew meanwhile: read on to the end, or the limit
    while chunk := os.read(fd, 1 << 16):
        total += len(chunk)
        if total > limit:
            raise _classes()["TooLargeError"](errno.EFBIG, f"larger than {limit} bytes", path)
        chunks.append(chunk)
    return b"".join(chunks)


def _refused_key(path) -> tuple[str, str]:
    """The warn-once key (log.py) of a refused cache path."""
    return ("refused cache file", str(path))


def warned(path) -> bool:
    """Whether ``refused`` warned about ``path`` in this process (a repair then says nothing)."""
    return _log.said(_refused_key(path))


def refused(path, e: OSError) -> None:
    """Warn once per path that a cache file is a symlink, not a regular file or too large: a
    miss (a missing or unreadable one is a plain miss, silently)."""
    if _built and isinstance(e, (_built["NotRegularFileError"], _built["TooLargeError"])):
        _log.warn_once(
            _refused_key(path),
            "cupy-rawcode: ignoring %s in the cache: %s (a miss)",
            path,
            e.strerror,
        )


def open_cache_file(path) -> tuple[int, os.stat_result] | None:
    """(fd, fstat) of one of the cache's own files: a regular file reached without a symlink;
    None (a miss, see ``refused``) for anything else."""
    try:
        return open_regular(path, follow=False)
    except OSError as e:
        refused(path, e)
        return None


def read_cache_file(
    path, limit: int, mark_used: bool = False, *, shared_lock: bool = False, used_after: float = 0
) -> bytes | None:
    """One of the cache's own files (``open_cache_file``) of at most ``limit`` bytes, or None
    (a miss). ``mark_used`` sets its mtime through the open file (the size bound's LRU) when it
    is older than ``used_after`` seconds; ``shared_lock`` holds an flock while reading, so that
    eviction (which takes it exclusively) never removes a file being read; a file locked
    exclusively is a miss, never a wait."""
    opened = open_cache_file(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        if shared_lock and _fcntl is not None:
            _fcntl.flock(fd, _fcntl.LOCK_SH | _fcntl.LOCK_NB)  # held: being removed (a miss)
            st_read = os.fstat(fd)  # its size once locked
        else:
            st_read = st
        data = read_fd(fd, st_read, limit, os.fspath(path))
        if mark_used and time.time() - st.st_mtime > used_after:
            try:
                os.utime(fd)
            except OSError:
                pass  # a read-only cache still serves hits
        return data
    except BlockingIOError:  # locked exclusively: eviction or a clear removes it, or a stranger
        return None
    except OSError as e:
        refused(path, e)
        return None
    finally:
        os.close(fd)  # releases the lock


# ---------------------------------------------------------------- stamped records
# A stamps record (stamps.py takes them): ``{"dirs": [[directory, [name, ...]], ...], "digest":
# hex}``, one SHA-256 of every file's stamp (size, mtime_ns, inode, ctime_ns) in order, checked by
# one ``fstatat`` per file, relative to its directory. Here: every warm hit checks one.

_json = deferred("json")  # a record read (CuPy, on a hit, has loaded it)
_array = deferred("array")  # the stamps digested, as above

_DIR_FD = os.stat in os.supports_dir_fd
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
WIDTH = 4  # values per file: size, mtime_ns, inode, ctime_ns
ABSENT = (-1,) * WIDTH  # a missing file's stamp, in the digest


def stamps_digest(values: list) -> str:
    """SHA-256 of the flat stamps, in record order. The paths need no hashing of their own: a
    changed list names other files, whose stamps (inode included) differ."""
    return hashlib.sha256(_array.array("q", values).tobytes()).hexdigest()


def stamps_now(dirs) -> list:
    """The flat stamps of every file of a record's ``dirs`` now (-1s for an absent file): one
    ``fstatat`` per file, relative to its directory."""
    stat = os.stat
    values: list = []
    for d, names in dirs:
        try:
            fd = os.open(d, _DIR_FLAGS) if _DIR_FD else None
        except OSError:  # the directory is gone: its files are absent
            values += ABSENT * len(names)
            continue
        try:
            for name in names:
                try:
                    st = stat(name, dir_fd=fd) if fd is not None else stat(os.path.join(d, name))
                except (FileNotFoundError, NotADirectoryError):
                    values += ABSENT
                    continue
                values += (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
            if "." in names:  # the directory's own entry: its inode alone (stamps.values_of)
                at = len(values) - WIDTH * (len(names) - names.index("."))
                if values[at + 2] != -1:
                    values[at : at + WIDTH] = (0, 0, values[at + 2], 0)
        finally:
            if fd is not None:
                os.close(fd)
    return values


def check_stamps(rec: dict) -> list | None:
    """The stamps of every recorded file now (flat: size, mtime_ns, inode, ctime_ns, ...; -1s for
    an absent file) when they are all as recorded, else None; a malformed record raises _MISS."""
    values = stamps_now(rec["dirs"])
    return values if stamps_digest(values) == rec["digest"] else None


_MISS = (OSError, ValueError, KeyError, TypeError, AttributeError)  # a record of the wrong shape


def json_data(raw: bytes | str | None) -> Any:
    """The JSON the cache or a shared level keeps (records, counts, bundle indexes), or None (a
    miss) for none, bytes not UTF-8 or not JSON, or JSON nested deeper than json reads."""
    try:
        return None if raw is None else _json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


class StampedRecord:
    """One kind of JSON record kept in the cache and trusted while the files it stamps hold.

    A record lives at ``<cache>/<kind>/<id[:2]>/<id>.json`` (``shard=0``: ``<kind>/<id>.json``),
    a JSON object whose ``"schema"`` (the kind's format version, first, as in ccache's manifest)
    a reader trusts only if it is its own; its ``"stamps"``: a stamps record (``take``). ``load``
    gives ``(data, flat stamps now)`` or None for a miss: missing, not a regular file, too
    large, unreadable, not JSON, another schema, a shape ``valid`` refuses (or raises on), a
    stamp that changed, or a cache ``owned`` does not call ours. ``memo`` holds what this
    process loaded or saved, by path: served again, without reading the file, while its
    stamps hold (``remember=False``: nothing, for a caller keeping its own answer). The store's
    ``owned(root)`` and ``publish(root, path, bytes)`` are given: this layer cannot import them."""

    __slots__ = ("_owned", "_remember", "_shard", "_valid", "kind", "memo", "schema")

    def __init__(
        self,
        kind: str,
        schema: str,
        owned: Callable[[Path], bool],
        valid: Callable[[dict], bool] = lambda data: True,
        shard: int = 2,
        remember: bool = True,
    ):
        self.kind, self.schema, self._owned, self._valid = kind, schema, owned, valid
        self._shard, self._remember = shard, remember
        self.memo: dict[Path, dict] = {}  # path -> data, in this process (stamps still checked)

    def path(self, root: Path, rid: str) -> Path:
        """Where record ``rid`` lives in the cache at ``root``."""
        if self._shard:
            return root / self.kind / rid[: self._shard] / f"{rid}.json"
        return root / self.kind / f"{rid}.json"

    def _read(self, root: Path, path: Path) -> dict | None:
        """A record's data from disk, marked used (the LRU bound's), of this schema and shape."""
        if not self._owned(root):
            return None  # never read through a foreign or linked directory
        data = json_data(read_cache_file(path, RECORD_LIMIT, mark_used=True))
        if not isinstance(data, dict) or data.get("schema") != self.schema:
            return None
        return data if self._valid(data) else None

    def load(self, root: Path, rid: str) -> tuple[dict, list] | None:
        """(the record's data, its files' flat stamps now) while they all hold, else None."""
        path = self.path(root, rid)
        data = self.memo.get(path)
        try:
            if data is None:
                data = self._read(root, path)
            values = None if data is None else check_stamps(data["stamps"])
        except _MISS:
            values = None  # missing, unreadable or of the wrong shape: a miss
        if data is None or values is None:
            self.memo.pop(path, None)
            return None
        if self._remember:
            self.memo[path] = data
        return data, values

    def save(self, root: Path, rid: str, fields: dict, publish: Callable) -> dict:
        """Remember and write a record of ``fields`` (their ``"stamps"`` included), the schema
        first; returns its data. A read-only cache writes nothing, silently (the store warns
        once): this process still has the memo, others do without."""
        data = {"schema": self.schema, **fields}
        path = self.path(root, rid)
        if self._remember:
            self.memo[path] = data
        try:
            publish(root, path, _json.dumps(data).encode())
        except OSError:
            pass
        return data

    def discard(self, root: Path, rid: str) -> None:
        """Forget a record, here and on disk (only in a cache ``owned`` calls ours: never
        remove through a foreign or linked directory)."""
        path = self.path(root, rid)
        self.memo.pop(path, None)
        if not self._owned(root):
            return
        try:
            os.unlink(path)
        except OSError:
            pass  # none was written (a read-only cache), or it is gone already
