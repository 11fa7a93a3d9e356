"""Compile: request -> key -> store -> (on a miss) cuda.core Program -> ObjectCode."""
from __future__ import annotations

import functools
import os
import re
import threading
import time

from . import config
from .request import Request, compute_key, context, make_request
from .store import Layered, warn
from .store.entry import encode, decode

_NO_DIR = "/dev/null/kernel.cu"  # a program name whose directory can never exist: quoted
#                                  includes from the main source then use the -I list, as in CuPy


class CompileError(RuntimeError):
    """NVRTC rejected the source. Carries the log, the options and the lines around each error."""

    def __init__(self, log: str, options: list[str], source: str, dump_path: str | None = None):
        self.log, self.options, self.source, self.dump_path = log, options, source, dump_path
        super().__init__(self._message())

    def _message(self) -> str:
        lines = self.source.splitlines()
        context = []
        for m in re.finditer(r"kernel\.cu\((\d+)\): (?:error|catastrophic error)", self.log):
            n = int(m.group(1))
            for i in range(max(1, n - 2), min(len(lines), n + 2) + 1):
                context.append(f"{'>' if i == n else ' '} {i:5d} | {lines[i - 1]}")
            context.append("")
        msg = f"NVRTC compile failed\n{self.log.strip()}\n\noptions: {' '.join(self.options)}"
        if context:
            msg += "\n\nsource:\n" + "\n".join(context)
        if self.dump_path:
            msg += f"\nfull source and options written to {self.dump_path}"
        return msg


_cuda_core_lock = threading.Lock()


def cuda_core():
    """The cuda.core module, imported under one lock. cuda.core 1.2 swaps its versioned
    subpackage's ``__spec__`` in during its own import, so Python lets a second thread through
    to a half-imported module ("cannot import name 'ObjectCode'"): a compile started on another
    thread (overlap) and a cache hit on this one would race."""
    with _cuda_core_lock:
        import cuda.core
    return cuda.core


class Result:
    """What a compile request gave: the code bytes and symbols (enough to load into CuPy without
    importing cuda.core), and where they came from. (A plain class: a dataclass costs ~1 ms to
    define, and this module is on the path of every cache hit.)"""
    __slots__ = ("code", "symbols", "target", "key", "hit", "hit_layer", "header_count",
                 "key_seconds", "compile_seconds", "_object_code")

    def __init__(self, code: bytes, symbols: dict, target: str, key: str, hit: bool,
                 hit_layer: str | None, header_count: int, key_seconds: float,
                 compile_seconds: float, object_code=None):
        self.code, self.symbols, self.target, self.key = code, symbols, target, key
        self.hit, self.hit_layer, self.header_count = hit, hit_layer, header_count
        self.key_seconds, self.compile_seconds = key_seconds, compile_seconds
        self._object_code = object_code

    def __repr__(self) -> str:
        return (f"Result(key={self.key[:16]}..., hit={self.hit}, layer={self.hit_layer}, "
                f"{len(self.code)} bytes of {self.target})")

    @property
    def object_code(self):
        """The ``cuda.core.ObjectCode`` (built on first use on a hit)."""
        if self._object_code is None:
            ObjectCode = cuda_core().ObjectCode
            mapping = {k: v.encode() for k, v in self.symbols.items()}
            self._object_code = _from_bytes(ObjectCode, self.target, self.code, mapping)
        return self._object_code


@functools.lru_cache(maxsize=8)
def _store_for(cache_dir: str, max_size: int, bundles: tuple[str, ...], redis_url: str | None,
               memory_entries: int) -> Layered:
    from .store import make_store
    return make_store(cache_dir, max_size=max_size, bundles=bundles, redis_url=redis_url or "",
                      memory_entries=memory_entries)


_override: Layered | None = None


def set_store(store: Layered | None) -> None:
    """Use ``store`` (see ``cupy_rawcode.store.make_store``) for every compile of this process;
    None goes back to the store the environment describes."""
    global _override
    _override = store


def default_store(cache_dir=None) -> Layered:
    """The store for a compile: set_store's, else the one the environment describes (read at
    call time, one instance per distinct configuration)."""
    if _override is not None and cache_dir is None:
        return _override
    return _store_for(str(config.cache_dir() if cache_dir is None else cache_dir),
                      config.cache_max_size(), config.bundles(), config.redis_url(),
                      config.memory_cache_entries())


def include_prefix(source: str) -> str:
    """The leading block of directive, comment and blank lines: what a PCH can cover."""
    lines = []
    for line in source.splitlines():
        if not re.match(r"\s*(#.*|//.*)?$", line):
            break
        lines.append(line.strip())
    return "\n".join(l for l in lines if l)


class _Pch:
    """NVRTC's automatic precompiled headers (NVRTC >= 12.8). A PCH lives in the NVRTC
    instance that made it (facts.md) and only the latest one is reused, and creating one makes
    that compile ~40 % slower. So 'auto' asks for it only when a compile has the same header
    prefix and options as the one before it in this process: the second of a series creates
    it, the third on reuse it. Files go to a private temp directory removed at exit. If
    cuda.core fails on a PCH compile, PCH is turned off for the process with one log line."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = None
        self.broken = False
        self.dir: str | None = None

    def wanted(self, req: Request, nvrtc_version: tuple[int, int]) -> bool:
        mode = config.pch_mode()
        if self.broken or mode == "never" or nvrtc_version < (12, 8) or req.is_ptx:
            return False
        signature = (include_prefix(req.source), req.options, req.arch, req.source_dir)
        with self.lock:
            repeat, self.last = signature == self.last, signature
        return mode == "always" or repeat

    def directory(self) -> str:
        with self.lock:
            if self.dir is None:
                import atexit
                import shutil
                import tempfile
                self.dir = tempfile.mkdtemp(prefix="cupy-rawcode-pch-")
                atexit.register(shutil.rmtree, self.dir, True)
            return self.dir

    def disable(self, why: Exception) -> None:
        self.broken = True
        warn("cupy-rawcode: NVRTC precompiled headers turned off for this process "
             "(cuda.core failed on a PCH compile: %s)", why)


_pch = _Pch()


@functools.lru_cache(maxsize=2)
def _options_class(passthrough: bool):
    """cuda.core's ProgramOptions, or (only when needed: making a dataclass costs ~2 ms) a
    subclass that appends the NVRTC options cuda.core has no field for."""
    import dataclasses
    ProgramOptions = cuda_core().ProgramOptions
    if not passthrough:
        return ProgramOptions

    @dataclasses.dataclass
    class _Options(ProgramOptions):
        passthrough: tuple = ()

        def as_bytes(self, backend, *args, **kwargs):
            return list(super().as_bytes(backend, *args, **kwargs)) + [o.encode() for o in self.passthrough]

    return _Options


def _program_options(req: Request, ctx, pch: bool = False):
    o = req.options
    if req.is_ptx:  # PTX is linked, not compiled: only the target matters
        return _options_class(False)(arch=req.arch)
    extra = {"passthrough": o.passthrough} if o.passthrough else {}
    return _options_class(bool(o.passthrough))(
        name=os.path.join(req.source_dir, "kernel.cu") if req.source_dir else _NO_DIR,
        arch=req.arch, std=o.std, include_path=[d.path for d in ctx.dirs] or None,
        pre_include=list(req.pre_includes + o.pre_includes) or None,
        define_macro=o.defines or None, undefine_macro=o.undefines or None,
        device_as_default_execution_space=o.default_device or None,
        pch=True if pch else None, pch_dir=_pch.directory() if pch else None, **extra)


def _dump(req: Request, options: list[str]) -> str:
    import tempfile
    fd, path = tempfile.mkstemp(prefix="cupy-rawcode-", suffix=".cu")
    with os.fdopen(fd, "w") as f:
        f.write(f"// options: {' '.join(options)}\n{req.source}")
    return path


def _nvrtc_compile(req: Request, ctx, dump: bool):
    pch = _pch.wanted(req, ctx.toolchain.nvrtc_version)
    popts = _program_options(req, ctx, pch)
    if req.target == "ptx" and not req.is_ptx and not _driver_loadable():
        return _ptx_without_driver(req, popts, dump)
    prog = cuda_core().Program(req.source, "ptx" if req.is_ptx else "c++", popts)
    try:
        return prog.compile(req.target, name_expressions=req.name_expressions or ())
    except TypeError as e:
        if not pch:
            raise
        _pch.disable(e)  # cuda.core 1.2.2: "Expected str, got PCHStatusType" on some compiles
        return _nvrtc_compile(req, ctx, dump)
    except Exception as e:
        text = str(e)
        if "NVRTC_ERROR" not in text and "error" not in text:
            raise
        raise _compile_error(text, req, popts, dump) from None
    finally:
        prog.close()


def _compile_error(log: str, req: Request, popts, dump: bool) -> CompileError:
    flags = [b.decode() for b in popts.as_bytes("nvrtc")]
    return CompileError(log, flags, req.source, _dump(req, flags) if dump else None)


@functools.lru_cache(maxsize=1)
def _driver_loadable() -> bool:
    """Whether the CUDA driver library loads (False on build and CI hosts without a GPU)."""
    try:
        from cuda.bindings import driver
        driver.cuDriverGetVersion()
        return True
    except Exception:  # cuda.pathfinder's DynamicLibNotFoundError, or a driver that fails
        return False


def _ptx_without_driver(req: Request, popts, dump: bool):
    """C++ to PTX through NVRTC directly. cuda.core 1.2 asks the driver whether it could load
    the PTX it just made and raises where there is no driver; NVRTC itself needs none."""
    from cuda.bindings import nvrtc
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS

    def check(result, *values):
        if result != ok:
            raise RuntimeError(f"NVRTC: {nvrtc.nvrtcGetErrorString(result)[1].decode()}")
        return values[0] if len(values) == 1 else values

    prog = check(*nvrtc.nvrtcCreateProgram(req.source.encode(), popts.name.encode(), 0, [], []))
    try:
        for name in req.name_expressions:
            check(*nvrtc.nvrtcAddNameExpression(prog, name.encode()))
        flags = popts.as_bytes("nvrtc")
        result, = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
        if result != ok:
            size = check(*nvrtc.nvrtcGetProgramLogSize(prog))
            log = b" " * size
            check(*nvrtc.nvrtcGetProgramLog(prog, log))
            text = f"{result.name}, compilation log:\n\n{log.rstrip(bytes(1)).decode()}"
            raise _compile_error(text, req, popts, dump)
        size = check(*nvrtc.nvrtcGetPTXSize(prog))
        ptx = b" " * size
        check(*nvrtc.nvrtcGetPTX(prog, ptx))
        mapping = {n: check(*nvrtc.nvrtcGetLoweredName(prog, n.encode()))
                   for n in req.name_expressions}
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return cuda_core().ObjectCode.from_ptx(ptx.rstrip(bytes(1)), symbol_mapping=mapping)


_compile_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_in_flight: dict[Request, object] = {}  # request -> Future of a compile started before keying


def _executor():
    global _pool
    with _pool_guard:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cupy-rawcode-nvrtc")
        return _pool


_pool = None
_pool_guard = threading.Lock()


def _speculate(req: Request, ctx, dump: bool):
    """On a likely miss (no manifest knows this source), start NVRTC now, so that scanning
    headers for the key overlaps the compile (NVRTC releases the GIL). One per request."""
    with _locks_guard:
        fut = _in_flight.get(req)
        if fut is None:
            fut = _in_flight[req] = _executor().submit(_nvrtc_compile, req, ctx, dump)
        return fut


def _worth_overlapping(req: Request) -> bool:
    """A source that includes nothing keys in well under a millisecond: handing its compile to
    another thread would cost more (GIL hand-offs) than the overlap saves."""
    return not req.is_ptx and ("#" in req.source and "include" in req.source
                               or bool(req.options.pre_includes))


def compile_request(req: Request, *, store: Layered | None = None, dump: bool | None = None) -> Result:
    """Key the request, return the stored code on a hit, else compile once and store it.

    A missing header is reported by the resolver (with its include chain), never by NVRTC: a
    compile started early is abandoned when resolution fails or the store has the entry."""
    from .manifest import lookup
    dump = config.dump_source() if dump is None else dump
    t0 = time.perf_counter()
    ctx = context(req)
    known = None if req.is_ptx else lookup(req.source, ctx, req.pre_includes)
    early = None
    if known is None and _worth_overlapping(req) and config.overlap():
        early = _speculate(req, ctx, dump)
    try:
        key, closure, count, ctx = compute_key(req, ctx, known)
    except BaseException:
        _forget(req, early)
        raise
    t1 = time.perf_counter()
    store = store if store is not None else default_store()
    with _locks_guard:
        lock = _compile_locks.setdefault(key, threading.Lock())
    with lock:  # threads racing on one key compile once
        found = store.get(key, lambda data: decode(key, data))
        if found is not None:
            _forget(req, early)
            store.record(True)
            (code, meta), layer = found
            return Result(code, dict(meta.get("symbols", {})), req.target, key, True, layer,
                          count, t1 - t0, 0.0)
        try:
            obj = early.result() if early is not None else _nvrtc_compile(req, ctx, dump)
        finally:
            _forget(req, early)
        t2 = time.perf_counter()
        symbols = {k: v.decode() for k, v in (obj.symbol_mapping or {}).items()}
        names = sorted({h.logical for h in closure.headers}) if closure is not None else []
        meta = {"target": req.target, "arch": req.arch, "symbols": symbols, "created": time.time(),
                "nvrtc": ctx.toolchain.nvrtc_version_str, "closure": names}
        code = bytes(obj.code)
        if not code:  # never cache nothing as a kernel
            raise CompileError(f"NVRTC returned no {req.target} code", [], req.source)
        store.record(False)
        store.put(key, encode(key, code, meta))
        return Result(code, symbols, req.target, key, False, None, count, t1 - t0, t2 - t1, obj)


def _forget(req: Request, early) -> None:
    if early is not None:
        with _locks_guard:
            if _in_flight.get(req) is early:
                del _in_flight[req]


def _from_bytes(ObjectCode, target: str, code: bytes, mapping: dict):
    make = {"cubin": ObjectCode.from_cubin, "ptx": ObjectCode.from_ptx,
            "ltoir": ObjectCode.from_ltoir}[target]
    return make(code, symbol_mapping=mapping)


def compile(source: str, *, arch, options=(), name_expressions=(), target: str = "cubin",
            source_dir: str | None = None, cache_dir: str | os.PathLike | None = None,
            dump: bool | None = None):
    """Compile CUDA C++ (or link PTX) to a ``cuda.core.ObjectCode`` through the cache.

    ``cache_dir`` overrides CUPY_RAWCODE_CACHE_DIR; ``dump`` overrides CUPY_RAWCODE_DUMP_SOURCE
    (write the source and options of a failing compile to a file named in the error)."""
    req = make_request(source, arch=arch, options=options, name_expressions=name_expressions,
                       target=target, source_dir=source_dir)
    store = default_store(os.fspath(cache_dir)) if cache_dir is not None else None
    return compile_request(req, store=store, dump=dump).object_code
