"""Invoke NVRTC on a miss: cuda.core's Program with our options, NVRTC's automatic precompiled
headers, PTX without a driver, and compile errors that show the failing lines. Not imported on a
cache hit."""
import functools
import os
import re
import threading

from . import config
from .request import Request
from .store import warn

_NO_DIR = "/dev/null/kernel.cu"  # a program name whose directory can never exist: quoted
#                                  includes from the main source then use the -I list, as in CuPy


class CompileError(RuntimeError):
    """NVRTC rejected the source. Carries the log, the options and the lines around each error."""

    def __init__(self, log: str, options: list[str], source: str, dump_path: str | None = None,
                 note: str | None = None):
        self.log, self.options, self.source, self.dump_path = log, options, source, dump_path
        self.note = note
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
        if self.note:
            msg += f"\n({self.note})"
        from .hints import compile_hints  # e.g. a declaration stub's name used: what to use
        hints = compile_hints(self.log, self.source)
        return msg + "\n" + hints if hints else msg


_cuda_core_lock = threading.Lock()


def cuda_core():
    """The cuda.core module, imported under one lock. cuda.core 1.2 swaps its versioned
    subpackage's ``__spec__`` in during its own import, so Python lets a second thread through
    to a half-imported module ("cannot import name 'ObjectCode'"): a compile started on another
    thread (overlap) and a cache hit on this one would race."""
    with _cuda_core_lock:
        import cuda.core
    return cuda.core


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


def compile_program(req: Request, ctx, dump: bool):
    """NVRTC through cuda.core (or directly, for PTX where no driver loads): (ObjectCode, how it
    was made), with the unreferenced library globals stripped where strip.py applies. "How" is
    a dict for the entry's metadata: ``stripped`` (how many) and ``assembler`` (nvJitLink's
    version) when they apply.

    A cubin that may have such globals (the source includes headers) is made in two steps:
    NVRTC to PTX for the virtual arch (skipping NVRTC's own ptxas run on the unstripped PTX),
    then nvJitLink on the stripped PTX. Where nvJitLink cannot, NVRTC makes the cubin itself."""
    from . import strip
    if not strip.wanted(req.options.passthrough, req.target, req.is_ptx):
        return _nvrtc(req, ctx, dump), {}
    if req.target == "ptx":
        return _stripped_ptx(_nvrtc(req, ctx, dump))
    version = ctx.toolchain.nvrtc_version
    may_have_globals = "include" in req.source or bool(req.options.pre_includes)
    if may_have_globals and strip.nvjitlink.usable(version) is not False:
        strip.nvjitlink.prefetch()  # loads while NVRTC compiles (150 ms on a cold host)
        virtual = virtual_arch(req.arch)
        try:
            obj = _nvrtc(req._replace(arch=virtual, target="ptx"), ctx, dump)
        except CompileError as e:  # say why the options show a virtual arch
            raise CompileError(e.log, e.options, e.source, e.dump_path,
                               note=f"NVRTC compiled PTX for {virtual}: the first step of a cubin "
                                    f"for {req.arch}, see CUPY_RAWCODE_STRIP") from None
        ptx, removed, mapping = _strip_object(obj)
        cubin = strip.assemble(ptx, req.arch, version)
        if cubin is not None:
            made = {"stripped": removed, "assembler": "nvJitLink %d.%d" % strip.nvjitlink.version}
            return cuda_core().ObjectCode.from_cubin(cubin, symbol_mapping=mapping), made
    return _nvrtc(req, ctx, dump), {"stripped": 0}


def virtual_arch(arch: str) -> str:
    """compute_90a for sm_90a: the PTX-only target of a real architecture."""
    return "compute_" + arch.partition("_")[2] if arch.startswith("sm_") else arch


def _strip_object(obj) -> tuple[bytes, int, dict]:
    """(PTX without unreferenced library globals, how many went, symbol mapping) of an
    ObjectCode holding PTX; the lowered names of name expressions always stay."""
    from . import strip
    mapping = obj.symbol_mapping or {}
    keep = frozenset(v.decode() if isinstance(v, bytes) else v for v in mapping.values())
    text = bytes(obj.code).rstrip(bytes(1)).decode("latin-1")  # lossless, whatever comments hold
    text, removed = strip.strip(text, keep)
    return text.encode("latin-1"), removed, mapping


def _stripped_ptx(obj):
    ptx, removed, mapping = _strip_object(obj)
    if removed:
        obj = cuda_core().ObjectCode.from_ptx(ptx, symbol_mapping=mapping)
    return obj, {"stripped": removed}


def _nvrtc(req: Request, ctx, dump: bool):
    """One NVRTC compile of ``req`` as asked: an ObjectCode, or CompileError."""
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
        return _nvrtc(req, ctx, dump)
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
