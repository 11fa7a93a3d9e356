"""A record of what a process compiles (``record(path)``, ``CUPY_RAWCODE_RECORD``): one JSON line
per distinct compile, with what is needed to redo it, for ``prebuild`` and ``warmup`` to compile
ahead on another machine.

A line holds the source, the options, the name expressions and the kind of compile ("cupy": a
compile CuPy makes, seen through install()'s hook; "raw": a cupy_rawcode RawKernel/RawModule,
or a ``cupy_rawcode.compile()`` call, with its ``target`` when that is not "cubin"),
never code and never a path of this machine: the include directories CuPy adds to every compile
are recorded as "CuPy's own" and assembled again where the record is replayed, and any other
absolute path is written relative to the record's directory (``{record}/...``). Lines are
appended under an exclusive lock on the file, after reading what other processes appended since,
so that many processes recording at once write each compile once.

Recording never fails a compile: a record that cannot be written (a missing directory, a
directory, a full disk) or an entry that cannot be made is one RecordWarning per recorder,
naming where the record was asked for (CUPY_RAWCODE_RECORD or record()), and the compile goes on.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from ..ground import deferred, json_data, locks
from ..ground.errors import RawcodeTypeError, RawcodeWarning
from ..ground.log import first_time
from ..ground.regular import read_lines

schema = deferred("cupy_rawcode.ground.schema")  # reading a record (prebuild, warmup) only
confinement = deferred("cupy_rawcode.ground.confine")

SCHEMA = 1
_PLACE = "{record}"  # confine.PLACE: where a record's paths are counted from


class RecordWarning(RawcodeWarning, RuntimeWarning):
    """The record could not be written: compiles go on, unrecorded."""


_recorders = itertools.count()


class Recorder:
    """Appends distinct entries to one record file, from any number of processes. ``origin``
    names where the record was asked for (the variable, or record()), for the warning."""

    def __init__(self, path: str | os.PathLike, origin: str = "record()"):
        self.path = os.path.abspath(os.fspath(path))
        self.base = os.path.dirname(self.path)
        self.origin = origin
        self.seen: set[str] = set()
        self.offset = 0
        self.lock = threading.Lock()
        self.ident = next(_recorders)  # its warn-once key (log.py): one warning per recorder

    def note(self, make_entry) -> None:
        """Add the entry ``make_entry(self.base)`` builds; any failure warns once (warn_once),
        never raises: recording never fails a compile."""
        try:
            self.add(make_entry(self.base))
        except Exception as e:
            self.warn_once(e)

    def warn_once(self, error: BaseException) -> None:
        """One RecordWarning per recorder, naming the record's origin, its path and why."""
        if not first_time(("record", self.ident)):
            return
        warnings.warn(record_failure(self.origin, self.path, error), RecordWarning, stacklevel=2)

    def add(self, entry: dict) -> bool:
        """Append ``entry`` unless the record holds it already; True when it was appended."""
        ident = entry_id(entry)
        if ident in self.seen:
            return False
        line = json.dumps({**entry, "id": ident}, sort_keys=True) + "\n"
        with self.lock:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                locks.hold(fd, seconds=locks.LONG, keep=True)  # TimeoutError: a RecordWarning
                self._catch_up(fd)
                if ident in self.seen:
                    return False
                os.write(fd, line.encode())
                self.seen.add(ident)
                self.offset = os.fstat(fd).st_size
                return True
            finally:
                locks.release(fd)  # releases the lock

    def _catch_up(self, fd: int) -> None:
        """Read the ids other processes appended since this one last looked."""
        size = os.fstat(fd).st_size
        if size <= self.offset:
            return
        data = os.pread(fd, size - self.offset, self.offset)
        end = data.rfind(b"\n") + 1  # a line being written stays for next time
        for raw in data[:end].splitlines():
            line = json_data(raw)  # a line not JSON, nested too deep, or no object: skipped
            ident = line.get("id") if isinstance(line, dict) else None
            if isinstance(ident, str):
                self.seen.add(ident)
        self.offset += end


def record_failure(origin: str, path: str, error: BaseException) -> str:
    """What the warning says: where the record was asked for, the file, and why it failed."""
    why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    where = f"{origin}={path}" if origin.startswith("CUPY_RAWCODE_") else f"{origin} of {path}"
    return (
        f"cupy-rawcode: cannot write the record ({where}): {why or type(error).__name__}; "
        "compiles go on, unrecorded"
    )


def entry_id(entry: dict) -> str:
    """What makes two entries the same compile: every field but the id."""
    body = json.dumps({k: v for k, v in entry.items() if k != "id"}, sort_keys=True)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# -- paths out and back in ----------------------------------------------------------------------


def portable_options(options: tuple[str, ...], base: str) -> list[str]:
    """The options with every path written relative to ``base`` as {record}/... (a relative
    directory is taken from the current one, as NVRTC takes it; a pre-included header given
    by name stays a name; an empty -I, which names no directory, stays empty). Options are
    read as a manifest's are (confine.pieces: every spelling NVRTC takes)."""
    out: list[str] = []
    for flag, value, given in confinement.pieces(options):
        if flag is None or not value:  # no path (as given: CuPy tests some by their text)
            out += given
        else:
            name = confinement.PATH_OPTIONS[flag]  # a relative value is a header's name
            out += confinement.spelled(flag, _portable_path(value, base, name))
    return out


def _portable_path(path: str, base: str, header_name: bool = False) -> str:
    if not path:
        return path  # an empty -I: no directory, here or on the machine reading the record
    if not os.path.isabs(path):
        if header_name:
            return path
        path = os.path.abspath(path)
    return _PLACE + "/" + os.path.relpath(path, base)


def local_options(options: list[str], base: str) -> tuple[str, ...]:
    """portable_options undone against the directory the record now lies in."""
    out = []
    for o in options:
        if _PLACE in o:
            flag, _, rest = o.partition(_PLACE)
            o = flag + os.path.normpath(base + rest)
        out.append(o)
    return tuple(out)


def cupy_user_options(options: tuple[str, ...]) -> tuple[str, ...] | None:
    """The options a CuPy compile was given before CuPy added its own (its CCCL, include and CUDA
    directories, and --std=c++17 when none was given), or None when they are not CuPy's
    assembly of anything (then the options are recorded as they are)."""
    from cupy._core import core

    head, tail = _cupy_dirs()
    std = "--std=c++17"
    n, m = len(head), len(tail)
    if tuple(options[:n]) != tuple(head) or tuple(options[len(options) - m :]) != tuple(tail):
        return None
    user = tuple(options[n : len(options) - m])
    if user[-1:] == (std,) and not any("-std=" in o for o in user[:-1]):
        user = user[:-1]
    return user if tuple(core.assemble_cupy_compiler_options(user)) == tuple(options) else None


@functools.cache
def _cupy_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The -I options CuPy puts before a compile's own (its CCCL) and after them (its include
    and CUDA directories), as this CuPy assembles them."""
    from cupy._core import core

    bare = tuple(core.assemble_cupy_compiler_options(()))
    head = tuple(o for o in bare if o.startswith("-I") and "_cccl" in o)
    return head, tuple(o for o in bare if o.startswith("-I") and o not in head)


def _cupy_roots() -> list[str]:
    """The directories this CuPy adds -I options for (its CCCL, include and CUDA directories):
    a CuPy compile recorded with them as given may name them; none without CuPy."""
    try:
        head, tail = _cupy_dirs()
    except ImportError:
        return []
    return [o[2:] for o in head + tail]


# -- the process's recorder ---------------------------------------------------------------------

_recorder: Recorder | None = None


def start(path: str | os.PathLike, origin: str = "record()") -> None:
    """Write every compile from now on to ``path`` (hook.record also wraps CuPy's compiles);
    ``origin`` names where it was asked for, in the warning when the record cannot be written."""
    global _recorder
    _recorder = Recorder(path, origin)


def stop() -> None:
    global _recorder
    _recorder = None


def recording() -> bool:
    return _recorder is not None


def note_cupy(call) -> None:
    """Record one call of CuPy's compile function (cupy_compiles.Call)."""
    if _recorder is not None:
        _recorder.note(functools.partial(cupy_entry, call))


def cupy_entry(call, base: str) -> dict:
    """The record entry of one call of CuPy's compile function, paths relative to ``base``."""
    user = cupy_user_options(call.options)
    options = call.options if user is None else user
    from cupy._core import core

    extra = call.extra_source
    entry: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": "cupy",
        "source": call.source,
        "options": portable_options(options, base),
        "cupy_options": user is not None,
        "name_expressions": list(call.name_expressions) if call.name_expressions else None,
        "jitify": call.jitify,
        "cooperative": call.cooperative,
        "extra_source": "cupy"
        if extra is not None and extra == core._get_header_source()
        else None,
    }
    if extra is not None and entry["extra_source"] is None:
        entry["extra_source_text"] = extra
    return entry


def note_build(build) -> None:
    """Record one of our RawKernel/RawModule builds (kernel.building._Build) compiling source."""
    if _recorder is not None and not build.is_file:
        _recorder.note(functools.partial(build_entry, build))


def build_entry(build, base: str) -> dict:
    """The record entry of a RawKernel/RawModule build, paths relative to ``base``."""
    source, where = build.source()
    return {
        "schema": SCHEMA,
        "kind": "raw",
        "source": source,
        "options": portable_options(build.options, base),
        "name_expressions": list(build.name_expressions) if build.name_expressions else None,
        "jitify": build.jitify,
        "source_dir": _portable_path(where, base) if where else None,
        "source_name": build.source_name,
    }


def note_compile(
    source: str, options, name_expressions, target: str, source_dir: str | None
) -> None:
    """Record one ``cupy_rawcode.compile()`` call (options given as strings) as a raw entry."""
    if _recorder is not None:
        entry = functools.partial(
            compile_entry, source, options, name_expressions, target, source_dir
        )
        _recorder.note(entry)


def compile_entry(
    source: str, options, name_expressions, target: str, source_dir: str | None, base: str
) -> dict:
    """The raw entry of a ``compile()`` call, paths relative to ``base``: a RawModule build of
    the same source, plus its target when that is not the "cubin" prebuild makes by default."""
    options = (options,) if isinstance(options, str) else tuple(options or ())
    names = name_expressions or ()
    names = (names,) if isinstance(names, str) else tuple(names)
    if not all(isinstance(o, str) for o in options + names):
        raise RawcodeTypeError(
            "options and name expressions that are not strings cannot be recorded"
        )
    entry: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": "raw",
        "source": source,
        "options": portable_options(options, base),
        "name_expressions": list(names) or None,
        "jitify": False,
        "source_dir": _portable_path(os.path.abspath(source_dir), base) if source_dir else None,
        "source_name": None,
    }
    if target != "cubin":
        entry["target"] = target
    return entry


def _text(raw: bytes, where: str) -> str:
    """A record line as text; a line that is not UTF-8 is a SchemaError naming it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise schema.SchemaError(
            f"{where}: not UTF-8 text ({e.reason} at byte {e.start})"
        ) from None


def read(path: str | os.PathLike, roots: Sequence[str | os.PathLike] = ()) -> list[dict]:
    """The entries of a record, checked (schema.py) and their paths made local again, each
    inside the record's directory or one of ``roots`` (confine.py); ValueError naming the line
    for a line that is not an entry or names a path outside."""
    base = os.path.dirname(os.path.abspath(os.fspath(path)))
    allowed = [os.path.abspath(os.fspath(r)) for r in roots]
    out = []
    for number, raw in enumerate(read_lines(os.fspath(path)), 1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        entry = schema.record_entry(schema.loads(_text(raw, where), where), where)
        own = _cupy_roots() if entry["kind"] == "cupy" else []
        options = confinement.confine_options(entry["options"], base, allowed + own, where)
        entry["options"] = local_options(list(options), base)
        if entry.get("source_dir"):
            entry["source_dir"] = confinement.confine(
                entry["source_dir"], base, allowed, "source_dir", where
            )
        out.append(entry)
    return out
