"""A compile that failed with a compile error, kept under the key a success would have had, so
the same failing request in any process raises the same exception without compiling.

What is kept is data, never a pickle: a small JSON record (kind "compile-error", the exception's
class name, message, NVRTC's log and what the class is rebuilt from) as the entry's code, with
``target`` "compile-error" in the entry's metadata, stored and fetched through the store like
any entry (so its compression and levels apply). Kept only when the error is NVRTC's verdict on
the text the key read: no missing header (a retry or a new file may answer it), no header that
changed while NVRTC read it, a log of at most MAX_LOG bytes (a longer one compiles again, so its
error is never cut short). CUPY_RAWCODE_CACHE_FAILURES=0: neither kept nor served. A record that
does not read back is a miss: the request compiles again."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..ground import config, errors, json_data  # errors' CuPy-based classes are built on first use
from ..store import Levels
from ..store.entry import decode, encode

FAILED = "compile-error"  # the record's kind and the entry's target
MAX_LOG = 256 * 1024  # bytes of message and log kept, each; a longer failure is not kept
MISSING = "cannot open source file"  # NVRTC's words for a missing header: never kept


def wanted() -> bool:
    """Whether failures are kept and served (CUPY_RAWCODE_CACHE_FAILURES, default on)."""
    return config.cache_failures()


def is_failure(meta: dict) -> bool:
    """Whether an entry's metadata says it holds a failure record, not code."""
    return meta.get("target") == FAILED


def keepable(message: str, log: str) -> bool:
    """A message and log worth keeping: within MAX_LOG each, and no missing header in them."""
    return (
        isinstance(message, str)
        and isinstance(log, str)
        and len(message.encode(errors="replace")) <= MAX_LOG
        and len(log.encode(errors="replace")) <= MAX_LOG
        and MISSING not in log
        and MISSING not in message
    )


def record(cls: str, message: str, log: str, **fields: Any) -> bytes | None:
    """The JSON record of a failure (``fields``: what rebuilds the exception, JSON values), or
    None when it is not worth keeping (keepable)."""
    if not keepable(message, log):
        return None
    body = {"kind": FAILED, "class": cls, "message": message, "log": log, **fields}
    return json.dumps(body, sort_keys=True).encode()


def read(code: bytes, cls: str) -> dict | None:
    """The record in an entry's code when it is one of class ``cls`` with a string message and
    log; None otherwise (a miss)."""
    body = json_data(code)  # None: not JSON (or nested too deep for json)
    if not isinstance(body, dict) or body.get("kind") != FAILED or body.get("class") != cls:
        return None
    if not isinstance(body.get("message"), str) or not isinstance(body.get("log"), str):
        return None
    return body


def strings(value: Any) -> tuple[str, ...] | None:
    """A record's list of strings as a tuple; None when it is not one."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value)


def keep(store: Levels, key: str, data: bytes, arch: str, **meta: Any) -> None:
    """Store a failure record under ``key`` (``meta``: more of the entry's metadata). Not a
    miss of a kernel: cache statistics count kernels compiled and served."""
    head = {"target": FAILED, "arch": arch, "created": time.time(), **meta}
    store.put(key, encode(key, data, head))


def look_up(
    store: Levels, key: str, accept: Callable[[dict], bool] | None = None
) -> tuple[bytes, dict, str] | None:
    """(code, metadata, level) of the entry under ``key``, as Levels.fetch finds it: a failure
    record (``is_failure``), counted as nothing (a failure served is no kernel served), or code
    that ``accept(metadata)`` takes, counted as a hit as Levels.fetch counts one; None for a
    miss or code ``accept`` refuses."""
    found = store.find(key, lambda data: decode(key, data))
    if found is None:
        return None
    (code, meta), level = found
    if not is_failure(meta):
        if accept is not None and not accept(meta):
            return None
        store.served(level, meta)
    return code, meta, level


def renamed(text: str, compiled_as: Any, program: str) -> str:
    """``text`` naming ``program`` where it named the program the failure was compiled as (a
    file and the same text as a string share a key, as entry_log replays logs)."""
    if isinstance(compiled_as, str) and compiled_as and program and compiled_as != program:
        return text.replace(compiled_as, program)
    return text


# -- cupy_rawcode's own compiles (compiling.py): errors.CompileError -------------------------


def nvrtc_verdict(e: BaseException) -> bool:
    """Whether ``e`` is NVRTC's compile failure as errors.CompileError (exactly that class: a
    missing header's is not), without a source dump named in its message (a file of this
    process's)."""
    if getattr(e, "nvrtc_result", None) != "NVRTC_ERROR_COMPILATION":
        return False
    if getattr(e, "dump_path", None):
        return False
    return type(e) is errors.CompileError  # the class (and CuPy) built on a failure only


def of_compile_error(e: Any, program: str) -> bytes | None:
    """The record of a CompileError (nvrtc_verdict), or None when it is not worth keeping."""
    return record(
        "CompileError",
        e.get_message(),
        e.log if isinstance(e.log, str) else "",
        options=list(e.options),
        backend=e.backend,
        program=program,
    )


def compile_error(code: bytes, source: str, program: str):
    """The CompileError a record holds, for ``source`` compiled as ``program``; None when the
    code is no such record (a miss)."""
    body = read(code, "CompileError")
    options = strings(body.get("options")) if body is not None else None
    if body is None or options is None or not isinstance(body.get("backend"), str):
        return None
    was = body.get("program")
    return errors.CompileError(
        renamed(body["message"], was, program),
        source,
        program,
        options,
        body["backend"],
        log=renamed(body["log"], was, program),
    )
