"""The one orchestrator: request -> key -> store -> compile -> retry on a missing header -> warm
index -> record. ``compile()``, the drop-in classes (kernel/building.py), prebuild and warmup
(parallel/task.py) make one Request (key/request.make_request, one keyword signature) and
compile it here; install()'s CuPy compiles go through payloads.py beside it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..compiler import relocated
from ..ground import config, errors
from ..ground.errors import MissingHeaderError
from ..headers.moved import new_name
from ..headers.options import Options, normalize_arch
from ..key import index_save
from ..key.request import Request, make_request
from ..store import Levels, default_store
from ..store.layout import using_cache_dir
from ..toolkit.discovery import choose_arch
from ..toolkit.record import supported_archs
from . import jitify
from .compiling import Result, compile_request, store_dir

T = TypeVar("T")

_RECORDING = __name__.rsplit(".", 2)[0] + ".hook.recording"  # sys.modules key: never imported


def request(source: str, **fields: Any) -> Request:
    """make_request (``fields``: its keywords) in the directory of the store a compile goes
    through, where the toolchain record it may write belongs."""
    with using_cache_dir(store_dir(default_store())):
        return make_request(source, **fields)


def arch_target(arch: str) -> tuple[str, str]:
    """(arch, target) for an explicit arch: 'cubin' for sm_XX, 'ptx' for compute_XX."""
    a = normalize_arch(arch, Options())
    return a, ("ptx" if a.startswith("compute_") else "cubin")


def device_target(opts_arch: str | None, cc: int | None) -> tuple[str, str]:
    """(arch, target) for a device of compute capability ``cc``, as a first launch chooses them.
    As CuPy, the device's arch comes after the options, so it overrides an -arch among them
    (``opts_arch``; the request merges the two: make_request(device=True)), PTX under CuPy's
    CUPY_COMPILE_WITH_PTX=1; with CuPy's defaults off, the options' -arch is the arch."""
    if opts_arch is not None and not config.cupy_options():
        return arch_target(opts_arch)
    assert cc is not None  # the caller asks the device (needs_device)
    return choose_arch(cc, supported_archs(), config.cupy_ptx())


def needs_device(opts_arch: str | None) -> bool:
    """Whether device_target needs the device's compute capability for these options."""
    return opts_arch is None or config.cupy_options()


def compile_for(
    req: Request,
    *,
    index_id: str | None = None,
    jitify_mode: bool = False,
    store: Levels | None = None,
    dump: bool | None = None,
) -> tuple[Request, Result]:
    """Compile a request through the cache as a first launch does: (the request compiled,
    compiling.Result). On a missing header, one retry path (_retrying). With ``index_id``, the
    key goes in the warm index (key/__init__.py) for the next process, unless a retry answered a
    header from a directory that lives as long as this process. ``jitify_mode``: as Jitify
    compiled (jitify.py): includes in headers that match no file dropped, errors also
    JitifyException. warmup()'s worker processes call this too, so they fill the cache with
    exactly what a launch looks up."""
    store = store if store is not None else default_store()
    with using_cache_dir(store_dir(store)):
        try:
            req, result, retried = _retrying(req, store, dump, jitify_mode)
        except Exception as e:
            if jitify_mode and isinstance(e, errors.CompileError):
                raise errors.as_jitify(e) from None
            raise
        if index_id is not None and not retried and result.trusted:
            index_save(
                index_id, result.key, req.arch, req.target, result.header_count, result.stamps
            )
    return req, result


def _retrying(
    req: Request, store: Levels, dump: bool | None, jitify_mode: bool
) -> tuple[Request, Result, bool]:
    """(request, result, whether it was retried): compile_request, and on a missing header once
    more with an answer for each new name: a header that moved is found by its new name
    (relocated.py); with ``jitify_mode``, includes in headers that match no file are answered
    by empty ones after a warning (jitify.py), and a failure after that names them first.
    NVRTC names the includes inside an #if one at a time, as it meets them: one more compile
    for each (Jitify found them so too)."""
    answered: set[str] = set()  # the names answered so far
    dropped: dict[str, Any] = {}  # name -> the Missing of each include dropped so far
    retried = False
    while True:
        try:
            return req, compile_request(req, store=store, dump=dump), retried
        except Exception as e:
            new = [m for m in getattr(e, "missing", ()) if m.name not in answered]
            again = _answered(req, e, new, jitify_mode, dropped) if new else None
            if again is None:
                if dropped:
                    jitify.annotate(e, tuple(dropped.values()))
                raise
            answered.update(m.name for m in new)
        req, retried = again, True


def _answered(req: Request, e: Exception, new: list, jitify_mode: bool, dropped: dict):
    """``req`` with an answer for each of the ``new`` missing includes (moved headers forwarded
    to their new names; with ``jitify_mode``, the others dropped: ``dropped`` gains them), or
    None when one has none (an include of the source's own is never dropped)."""
    moved = [m for m in new if new_name(m.name) is not None]
    rest = [m for m in new if m not in moved]
    if rest:
        if not (jitify_mode and isinstance(e, errors.MissingHeaderCompileError)):
            return None
        stubs = jitify.dropping(rest)
        if stubs is None:
            return None
        dropped.update((m.name, m) for m in rest)
        req = _with_isystem(req, stubs)
    return forwarded(req, moved) if moved else req


def moved_answered(req: Request, use: Callable[[Request], T]) -> T:
    """``use(req)``, or, when it raises MissingHeaderError for moved headers only, ``use`` of
    ``req`` with them answered by their new names (forwarded): what a compile's retry does,
    for what resolves or keys a request without compiling (deps, a record's keys)."""
    try:
        return use(req)
    except MissingHeaderError as e:
        again = forwarded(req, e.missing)
        if again is None:
            raise
    return use(again)


def forwarded(req: Request, missing) -> Request | None:
    """``req`` again, with the directory that answers a moved header's old name (relocated.py)
    as one more -isystem directory; None when no header of ``missing`` moved. A compile retries
    with it once (_retrying), and a record's keys are computed the same way (parallel/keys.py)."""
    extra = relocated.forwarding_dir(missing)
    return None if extra is None else _with_isystem(req, extra)


def _with_isystem(req: Request, extra: str) -> Request:
    opts = req.options._replace(isystem_dirs=req.options.isystem_dirs + (extra,))
    return req._replace(options=opts)


def compile(
    source: str,
    *,
    cache_dir: str | os.PathLike | None = None,
    dump: bool | None = None,
    log_stream=None,
    **fields: Any,
):
    """Compile CUDA C++ (or link PTX) to a ``cuda.core.ObjectCode`` through the cache.

    ``fields``: the request's keywords (key/request.make_request: ``arch`` (required),
    ``options``, ``name_expressions``, ``target``, ``source_dir``). ``cache_dir`` overrides
    CUPY_RAWCODE_CACHE_DIR; ``dump`` overrides CUPY_RAWCODE_DUMP_SOURCE (write the source and
    options of a failing compile to a file named in the error); ``log_stream`` receives NVRTC's
    log (warnings), on a compile and replayed on a hit."""
    with using_cache_dir(cache_dir):  # the toolchain record make_request may write
        req = make_request(source, **fields)
        store = default_store(os.fspath(cache_dir)) if cache_dir is not None else None
        _, result = compile_for(req, store=store, dump=dump)
    _note(source, fields)
    if log_stream is not None and result.log:
        log_stream.write(result.log)
    return result.object_code


def _note(source: str, fields: dict) -> None:
    """Write a compile() call to the record when one is being written (recording.py; started
    by record() or CUPY_RAWCODE_RECORD, never imported here)."""
    rec = sys.modules.get(_RECORDING)
    if rec is not None and rec.recording():
        rec.note_compile(
            source,
            fields.get("options", ()),
            fields.get("name_expressions", ()),
            fields.get("target", "cubin"),
            fields.get("source_dir"),
        )
