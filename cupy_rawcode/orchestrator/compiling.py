"""Compile one normalized request through the cache: key -> store -> (on a miss) NVRTC, with the
header scan overlapped with an early compile. flow.py calls it with the retry, index and record
around it."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings

from ..compiler import early
from ..compiler.early import STEP as WAIT_STEP
from ..compiler.early import Early
from ..compiler.signals import taken_by_keeper
from ..ground import config, deferred
from ..ground.errors import MissingHeaderError, RawcodeRuntimeError, RawcodeWarning
from ..ground.stamps import absent, changed_since, first_changed, take
from ..headers.options import file_options
from ..key import closure_digest, manifest
from ..key.request import Request, compute_key, context
from ..store import Levels, default_store
from ..store.entry import CLOSURE_RECORD, encode, entry_log
from ..store.layout import using_cache_dir
from . import failures, missing

fast = deferred("cupy_rawcode.headers.fast")  # a miss whose key a manifest gave only


class Result:
    """What a compile request gave: the code bytes and symbols (enough to load into CuPy without
    importing cuda.core), and where they came from. A plain class: it validates its input and
    builds the ObjectCode on first use."""

    __slots__ = (
        "_keyed",
        "_object_code",
        "code",
        "compile_seconds",
        "header_count",
        "hit",
        "hit_layer",
        "key",
        "key_seconds",
        "log",
        "made",
        "symbols",
        "target",
        "trusted",
    )

    def __init__(
        self,
        code: bytes,
        symbols: dict,
        target: str,
        key: str,
        hit: bool,
        hit_layer: str | None,
        header_count: int,
        key_seconds: float,
        compile_seconds: float,
        object_code=None,
        made: dict | None = None,
        keyed=None,
        log: str = "",
        trusted: bool = True,
    ):
        self.code, self.symbols, self.target, self.key = code, symbols, target, key
        self.hit, self.hit_layer, self.header_count = hit, hit_layer, header_count
        self.key_seconds, self.compile_seconds = key_seconds, compile_seconds
        self.made = made if isinstance(made, dict) else {}  # nvrtc.compile_program's "how"
        self.log = log if isinstance(log, str) else ""  # NVRTC's log: replayed on every hit
        self._keyed = keyed  # request.Keyed: its stamps are what the warm index records
        self.trusted = trusted  # False: a closure file changed while it compiled; not stored
        self._object_code = object_code

    def __repr__(self) -> str:
        return (
            f"Result(key={self.key[:16]}..., hit={self.hit}, layer={self.hit_layer}, "
            f"{len(self.code)} bytes of {self.target})"
        )

    @property
    def stamps(self) -> list | None:
        """request.Keyed.stamps (None when unknown): what the warm index checks before reusing
        the key."""
        return None if self._keyed is None else self._keyed.stamps

    @property
    def object_code(self):
        """The ``cuda.core.ObjectCode`` (built on first use on a hit)."""
        if self._object_code is None:
            ObjectCode = _nvrtc().cuda_core().ObjectCode
            mapping = {k: v.encode() for k, v in self.symbols.items()}
            self._object_code = _from_bytes(ObjectCode, self.target, self.code, mapping)
        return self._object_code


def _nvrtc():
    """compiler/nvrtc.py, imported when it is used: a cache hit never loads NVRTC's module."""
    from ..compiler import nvrtc  # off a hit's path (tests/orchestrator/test_speed_paths.py)

    return nvrtc


def _nvrtc_compile(req: Request, ctx, dump: bool):
    """The compile itself (nvrtc.py: not imported on a cache hit): an nvrtc.Compiled."""
    return _nvrtc().compile_program(req, ctx, dump)


_compile_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_in_flight: dict[Request, Early] = {}  # request -> a compile started before keying


def _speculate(req: Request, ctx, dump: bool) -> Early | None:
    """On a likely miss (no manifest knows this source), start NVRTC now, so that scanning
    headers for the key overlaps the compile (NVRTC releases the GIL). One per request, on a
    daemon thread that never holds up the exit (early.py); None when early.AT_ONCE are
    running already (the caller then compiles after keying)."""
    with _locks_guard:
        found = _in_flight.get(req)
        if found is None:
            found = early.start(_nvrtc_compile, req, ctx, dump)
            if found is not None:
                _in_flight[req] = found
        return found


class HeaderChangedWarning(RawcodeWarning, UserWarning):
    """A file the key read changed while NVRTC compiled: the code was returned but not cached,
    since it may have been built from another text than the key's."""


def _not_cached(req: Request, ctx, path: str) -> None:
    """One warning naming the changed file, and the source's manifest forgotten: a compile whose
    closure changed under it stores nothing (no entry, manifest or warm-index record)."""
    manifest.discard(req.source, ctx, req.pre_includes)
    warnings.warn(
        f"cupy-rawcode: {path} changed while {req.program_name} compiled; the code is used "
        "but not cached (it may hold the new text, the key the old one)",
        HeaderChangedWarning,
        stacklevel=4,
    )


class UnresolvedIncludeWarning(RawcodeWarning, UserWarning):
    """A computed include names its header through a macro the scan cannot expand (a value on
    more than one line): the key cannot hold that header, so the code is compiled and used,
    never cached."""


def _unresolved(req: Request, keyed) -> bool:
    """Whether the request's closure has includes the key cannot hold; warned of, once a place."""
    found = keyed.closure.unresolved if keyed.closure is not None else ()
    if found:
        warnings.warn(
            f"cupy-rawcode: {req.program_name}: " + "; ".join(found) + ": the header this "
            "names is unknown to the cache key, so the code is compiled every time, never "
            "cached (name the header directly, or through a one-line #define of it)",
            UnresolvedIncludeWarning,
            stacklevel=5,
        )
    return bool(found)


def _worth_overlapping(req: Request) -> bool:
    """A source that includes nothing keys in well under a millisecond: handing its compile to
    another thread would cost more (GIL hand-offs) than the overlap saves."""
    return not req.is_ptx and (
        ("#" in req.source and "include" in req.source) or bool(req.options.pre_includes)
    )


def compile_request(
    req: Request, *, store: Levels | None = None, dump: bool | None = None
) -> Result:
    """Key the request, return the stored code on a hit, else compile once and store it.

    Failures raise errors.CompileError (CuPy's CompileException), dumped to stderr as CuPy does
    when CUPY_DUMP_CUDA_SOURCE_ON_ERROR=1. A missing header is reported by the resolver (with
    its include chain) as errors.MissingHeaderCompileError: before NVRTC runs (a compile started
    early is abandoned when resolution fails or the store has the entry), or, for an include
    inside an #if the scan cannot decide, when NVRTC says it cannot open it (missing.py).
    Everything the compile writes goes to the directory of the store's disk layer
    (using_cache_dir). Ctrl-C and SIGTERM reach Python's handler while the headers are scanned
    beside an early compile (compiler/signals.py: taken_by_keeper, around the keying only)."""
    store = store if store is not None else default_store()
    try:
        with using_cache_dir(store_dir(store)):
            return _compile_request(req, store, dump)
    except Exception as e:
        if hasattr(e, "dump") and hasattr(e, "source") and config.cupy_dump_on_error():
            e.dump(sys.stderr)
        raise


def store_dir(store: Levels) -> str | None:
    """The directory of ``store``'s disk layer (None without one, or when it has no ``root``):
    where a compile through it writes its manifests, warm index and toolchain record too."""
    root = getattr(store.level("disk"), "root", None)  # a layer of the program's may have none
    return None if root is None else str(root)


def _compile_request(req: Request, store: Levels, dump: bool | None, fresh: bool = False) -> Result:
    """compile_request's work; ``fresh``: key from a resolve now, no manifest or closure record
    (theirs named a header shadowed since: _search_stamps)."""
    dump = config.dump_source() if dump is None else dump
    start_ns = time.time_ns()  # a closure file changed since may differ from what NVRTC read
    t0 = time.perf_counter()
    ctx = context(req)
    known = None if req.is_ptx or fresh else manifest.lookup(req.source, ctx, req.pre_includes)
    early = None
    if known is None and not fresh and _worth_overlapping(req) and config.overlap():
        early = _speculate(req, ctx, dump)
    try:
        # headers scanned beside an early compile, which may put NVRTC's handler in force
        with taken_by_keeper() if early is not None else contextlib.nullcontext():
            keyed = compute_key(req, ctx, known, fresh=fresh)
    except BaseException as e:
        _forget(req, early)
        if isinstance(e, MissingHeaderError):
            raise missing.as_compile_error(e, req, ctx) from None
        raise
    key, count, ctx = keyed.key, keyed.count, keyed.context
    # an include the key cannot name, or a file NVRTC writes or reads besides the headers
    cacheable = not _unresolved(req, keyed) and not file_options(req.options.passthrough)
    t1 = time.perf_counter()
    with _locks_guard:
        lock = _compile_locks.setdefault(key, threading.Lock())
    while not lock.acquire(timeout=WAIT_STEP):  # threads racing on one key compile once,
        pass  # waiting in steps: Ctrl-C is seen while another thread's compile holds the key
    try:
        found = _look_up(store, key, req, dump) if cacheable else None
        if found is not None:
            _forget(req, early)
            code, meta, layer = found
            return Result(
                code,
                dict(meta.get("symbols", {})),
                req.target,
                key,
                True,
                layer,
                count,
                t1 - t0,
                0.0,
                made=meta.get("made"),
                keyed=keyed,
                log=entry_log(meta, req.program_name),
            )
        search = _search_stamps(req, ctx, keyed)
        if search is not None:
            if keyed.options != req.options:  # another standard, own std templates (key/request.py)
                _forget(req, early)
                req, early = req._replace(options=keyed.options), None
            if early is not None and changed_since(keyed.closure_stamps, start_ns) is not None:
                _forget(req, early)  # NVRTC may have read a file before the key read its new text
                early = None
            try:
                made = early.result() if early is not None else _nvrtc_compile(req, ctx, dump)
            except Exception as e:
                unopened = missing.unopened(e, req, ctx, keyed)
                if unopened is not None:
                    raise unopened from None
                if cacheable:
                    _keep_failure(e, store, key, req, keyed, ctx, search)
                raise
            finally:
                _forget(req, early)
            t2 = time.perf_counter()
            # the header count, not the names: nothing reads them, and every hit parses this
            meta = {
                "target": req.target,
                "arch": req.arch,
                "symbols": made.symbols,
                "created": time.time(),
                "compile_seconds": round(t2 - t1, 4),  # what a hit saves (cache stats)
                "nvrtc": ctx.toolchain.nvrtc_version_str,
                "headers": count,
                "made": made.made,
                "log": made.log,
                "program": req.program_name,  # what the log calls the source (entry_log)
            }
            if keyed.record:  # carried along by a bundle export or a pull (store/transfer.py)
                meta[CLOSURE_RECORD] = keyed.record
            code = bytes(made.code)
            if not code:  # never cache nothing as a kernel
                raise RawcodeRuntimeError(
                    f"NVRTC returned no {req.target} code for {req.program_name}"
                )
            store.record(False)
            changed = _changed(keyed, search)  # ccache's check: still what the key saw?
            if changed is not None:
                _not_cached(req, ctx, changed)
            elif cacheable:
                store.put(key, encode(key, code, meta))
            return Result(
                code,
                dict(made.symbols),
                req.target,
                key,
                False,
                None,
                count,
                t1 - t0,
                t2 - t1,
                None,
                made.made,
                keyed,
                made.log,
                changed is None and cacheable,
            )
    finally:
        lock.release()
    # a header the manifest (or a closure record) names is shadowed now: the lock is let go,
    # and the request keyed afresh from a resolve
    _forget(req, early)
    manifest.discard(req.source, ctx, req.pre_includes)
    return _compile_request(req, store, dump, fresh=True)


def _look_up(store: Levels, key: str, req: Request, dump: bool) -> tuple[bytes, dict, str] | None:
    """(code, metadata, level) of the kernel stored under ``key``, counted as a hit; a failure
    stored there (failures.py) is raised again, as NVRTC raised it, unless failures are off or
    the source is to be dumped (then it compiles again). A record that does not read back, or
    an entry for none of these, is a miss."""
    found = failures.look_up(store, key)
    if found is None or not failures.is_failure(found[1]):
        return found
    if failures.wanted() and not dump:
        error = failures.compile_error(found[0], req.source, req.program_name)
        if error is not None:
            raise error
    return None


def _search_stamps(req: Request, ctx, keyed) -> tuple | None:
    """Every path the header search looked at and found no file at, stamped absent (stamps.take
    part): a file that appears at one while NVRTC runs may be read in place of a keyed header
    (an earlier -I directory's), which ``_changed`` sees. From the key's closure, or where a
    manifest answered, from a resolve now (a compile costs far more): None when that finds
    another closure than the manifest holds (a header shadowed since it was written)."""
    closure = keyed.closure
    if closure is None and not req.is_ptx:
        closure = fast.resolve_fast(req.source, ctx, req.pre_includes, req.program_name)
        if closure_digest(closure.digests()) != keyed.digest:
            return None
    return take([absent(p) for p in (closure.probed if closure is not None else ())])


def _changed(keyed, search: tuple) -> str | None:
    """The first file that differs now from what the key read, once NVRTC read the files
    (ccache's check): a closure file whose stamp changed, or a file where the search found
    none (``_search_stamps``); else None."""
    return first_changed(keyed.closure_stamps) or first_changed(search)


def _keep_failure(
    e: Exception, store: Levels, key: str, req: Request, keyed, ctx, search: tuple
) -> None:
    """Keep NVRTC's compile failure under the key (failures.py), when failures are kept and no
    file the key read changed while NVRTC compiled (the check a success gets)."""
    if not failures.nvrtc_verdict(e) or not failures.wanted():
        return
    if _changed(keyed, search) is not None:
        return
    data = failures.of_compile_error(e, req.program_name)
    if data is not None:
        failures.keep(
            store,
            key,
            data,
            req.arch,
            nvrtc=ctx.toolchain.nvrtc_version_str,
            headers=keyed.count,
            program=req.program_name,
        )


def _forget(req: Request, early) -> None:
    if early is not None:
        with _locks_guard:
            if _in_flight.get(req) is early:
                del _in_flight[req]


def _from_bytes(ObjectCode, target: str, code: bytes, mapping: dict):
    make = {
        "cubin": ObjectCode.from_cubin,
        "ptx": ObjectCode.from_ptx,
        "ltoir": ObjectCode.from_ltoir,
    }[target]
    return make(code, symbol_mapping=mapping)
