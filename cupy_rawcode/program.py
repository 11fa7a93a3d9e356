"""Compile: request -> key -> store -> (on a miss) cuda.core Program -> ObjectCode."""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import threading
import time
from dataclasses import dataclass

from . import config
from .request import Request, compute_key, make_request
from .store import Layered
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


@dataclass
class Result:
    object_code: object
    key: str
    hit: bool
    hit_layer: str | None
    header_count: int
    key_seconds: float
    compile_seconds: float


@functools.lru_cache(maxsize=8)
def _store_for(cache_dir: str) -> Layered:
    from .store.directory import DirectoryStore
    from .store.memory import MemoryStore
    return Layered([MemoryStore(config.memory_cache_entries()), DirectoryStore(cache_dir)])


def default_store() -> Layered:
    """Memory LRU in front of the cache directory (read from the environment at call time)."""
    return _store_for(str(config.cache_dir()))


def _program_options(req: Request, ctx):
    from cuda.core import ProgramOptions

    @dataclasses.dataclass
    class _Options(ProgramOptions):  # NVRTC options cuda.core has no field for pass through
        passthrough: tuple = ()

        def as_bytes(self, backend, *args, **kwargs):
            return list(super().as_bytes(backend, *args, **kwargs)) + [o.encode() for o in self.passthrough]

    o = req.options
    return _Options(
        name=os.path.join(req.source_dir, "kernel.cu") if req.source_dir else _NO_DIR,
        arch=req.arch, std=o.std, include_path=[d.path for d in ctx.dirs] or None,
        pre_include=list(req.pre_includes + o.pre_includes) or None,
        define_macro=o.defines or None, undefine_macro=o.undefines or None,
        device_as_default_execution_space=o.default_device or None, passthrough=o.passthrough)


def _dump(req: Request, options: list[str]) -> str:
    import tempfile
    fd, path = tempfile.mkstemp(prefix="cupy-rawcode-", suffix=".cu")
    with os.fdopen(fd, "w") as f:
        f.write(f"// options: {' '.join(options)}\n{req.source}")
    return path


def _nvrtc_compile(req: Request, ctx, dump: bool):
    from cuda.core import Program
    popts = _program_options(req, ctx)
    flags = [b.decode() for b in popts.as_bytes("nvrtc")]
    prog = Program(req.source, "c++", popts)
    try:
        return prog.compile(req.target, name_expressions=req.name_expressions or ())
    except Exception as e:
        log = str(e)
        if "NVRTC_ERROR" not in log and "error" not in log:
            raise
        raise CompileError(log, flags, req.source, _dump(req, flags) if dump else None) from None
    finally:
        prog.close()


_compile_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def compile_request(req: Request, *, store: Layered | None = None, dump: bool | None = None) -> Result:
    """Key the request, return the stored code on a hit, else compile once and store it."""
    from cuda.core import ObjectCode
    t0 = time.perf_counter()
    key, closure, count, ctx = compute_key(req)
    t1 = time.perf_counter()
    store = store if store is not None else default_store()
    with _locks_guard:
        lock = _compile_locks.setdefault(key, threading.Lock())
    with lock:  # threads racing on one key compile once
        found = store.get(key, lambda data: decode(key, data))
        if found is not None:
            (code, meta), layer = found
            mapping = {k: v.encode() for k, v in meta.get("symbols", {}).items()}
            obj = _from_bytes(ObjectCode, req.target, code, mapping)
            return Result(obj, key, True, layer, count, t1 - t0, 0.0)
        obj = _nvrtc_compile(req, ctx, config.dump_source() if dump is None else dump)
        t2 = time.perf_counter()
        symbols = {k: v.decode() for k, v in (obj.symbol_mapping or {}).items()}
        names = sorted({h.logical for h in closure.headers}) if closure is not None else []
        meta = {"target": req.target, "arch": req.arch, "symbols": symbols, "created": time.time(),
                "nvrtc": ctx.toolchain.nvrtc_version_str, "closure": names}
        store.put(key, encode(key, bytes(obj.code), meta))
        return Result(obj, key, False, None, count, t1 - t0, t2 - t1)


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
    store = _store_for(os.fspath(cache_dir)) if cache_dir is not None else None
    return compile_request(req, store=store, dump=dump).object_code
