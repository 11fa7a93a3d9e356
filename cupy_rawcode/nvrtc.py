"""Invoke NVRTC on a miss: cuda.core's Program with our options, NVRTC's automatic precompiled
headers, PTX without a driver, and compile errors that show the failing lines. Not imported on a
cache hit."""
import functools
import io
import os
import re
import threading

from . import config
from .request import Request
from .store import warn

PCH_WORDS = ("precompiled header", "pch file", "initial sequence of preprocessing directives",
             "command line options do not match")  # NVRTC's PCH messages: never shown


def __getattr__(name: str):
    if name == "CompileError":  # errors.py builds it on first use (it imports CuPy)
        from . import errors
        return errors.CompileError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def clean_log(log: str) -> str:
    """NVRTC's log without its trailing NUL and without any precompiled-header message."""
    log = log.replace("\x00", "")
    if any(w in log.lower() for w in PCH_WORDS):
        log = "".join(line for line in log.splitlines(keepends=True)
                      if not any(w in line.lower() for w in PCH_WORDS))
    return log if log.strip() else ""


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
    """NVRTC's automatic precompiled headers (NVRTC >= 12.8), asked for only where they pay.

    What NVRTC does (measured, facts.md): a PCH lives in the process that made it, and only the
    latest one: a ``--pch`` compile whose header prefix differs replaces it. Creating one makes
    that compile ~40-60 % slower; reusing it makes a CUB compile up to 10x faster; a compile
    without ``--pch`` leaves it in place. So 'auto' (the default):
    - reuses the live PCH whenever a compile has its prefix and options (free);
    - creates one only when the same prefix and options come ``need`` times in a row (2 at
      first: the second of a series creates, the third on reuse), and only for a prefix that
      includes something;
    - backs off when a PCH it created was never reused before being replaced (runs of pairs,
      say): ``need`` grows by one for each such waste, and falls back to 2 after a reuse, so a
      series of distinct kernels loses at most one creation per run length it shows.
    Files go to a private temp directory removed at exit. If cuda.core fails on a PCH compile,
    PCH is turned off for the process with one log line."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = None     # signature of the previous compile
        self.run = 0         # compiles in a row with that signature
        self.live = None     # signature of the PCH NVRTC holds now
        self.used = 0        # compiles that reused it
        self.charged = False  # its waste already raised ``need``
        self.need = 2
        self.broken = False
        self.dir: str | None = None

    def wanted(self, req: Request, nvrtc_version: tuple[int, int]) -> bool:
        mode = config.pch_mode()
        if self.broken or mode == "never" or nvrtc_version < (12, 8) or req.is_ptx:
            return False
        if mode == "always":
            return True
        prefix = include_prefix(req.source)
        signature = (prefix, req.options, req.arch, req.source_dir)
        with self.lock:
            self.run = self.run + 1 if signature == self.last else 1
            self.last = signature
            if "include" not in prefix:
                return False  # nothing to precompile
            return self._decide(signature)

    def _decide(self, signature) -> bool:
        if signature == self.live:
            self.used += 1
            self.need = 2
            return True
        if self.run < self.need:
            return False
        if self.live is not None and not self.used and not self.charged:
            self.charged = True  # the live PCH was never reused: ask for longer runs
            self.need += 1
            if self.run < self.need:
                return False
        self.live, self.used, self.charged = signature, 0, False
        return True

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
        name=req.program_name,
        arch=req.arch, std=o.std, include_path=[d.path for d in ctx.dirs] or None,
        pre_include=list(req.pre_includes + o.pre_includes) or None,
        define_macro=o.defines or None, undefine_macro=o.undefines or None,
        device_as_default_execution_space=o.default_device or None,
        pch=True if pch else None, pch_dir=_pch.directory() if pch else None,
        pch_messages=False if pch else None, **extra)


def program_flags(req: Request, ctx) -> list[str]:
    """The options NVRTC receives for ``req`` (without PCH), as strings: what errors show."""
    return [b.decode() for b in _program_options(req, ctx).as_bytes("nvrtc")]


def _dump(req: Request, options: list[str]) -> str:
    import tempfile
    fd, path = tempfile.mkstemp(prefix="cupy-rawcode-", suffix=".cu")
    with os.fdopen(fd, "w") as f:
        f.write(f"// options: {' '.join(options)}\n{req.source}")
    return path


class Compiled:
    """What NVRTC made: ``obj`` (cuda.core ObjectCode), ``made`` (how: a dict for the entry's
    metadata, ``stripped`` and ``assembler`` where they apply) and ``log`` (NVRTC's log, warnings
    included, without PCH messages: stored with the entry and replayed on every hit)."""
    __slots__ = ("obj", "made", "log")

    def __init__(self, obj, made: dict, log: str):
        self.obj, self.made, self.log = obj, made, log


def compile_program(req: Request, ctx, dump: bool) -> Compiled:
    """NVRTC through cuda.core (or directly, for PTX where no driver loads), with the
    unreferenced library globals stripped where strip.py applies.

    A cubin that may have such globals (the source includes headers) is made in two steps:
    NVRTC to PTX for the virtual arch (skipping NVRTC's own ptxas run on the unstripped PTX),
    then nvJitLink on the stripped PTX. Where nvJitLink cannot, NVRTC makes the cubin itself."""
    from . import devrt, strip
    if req.target == "cubin" and not req.is_ptx and devrt.wants_rdc(req.options.passthrough):
        return _relocatable(req, ctx, dump)
    if not strip.wanted(req.options.passthrough, req.target, req.is_ptx):
        obj, log = _nvrtc(req, ctx, dump)
        return Compiled(obj, {}, log)
    if req.target == "ptx":
        obj, log = _nvrtc(req, ctx, dump)
        obj, made = _stripped_ptx(obj)
        return Compiled(obj, made, log)
    version = ctx.toolchain.nvrtc_version
    may_have_globals = "include" in req.source or bool(req.options.pre_includes)
    if may_have_globals and strip.nvjitlink.usable(version) is not False:
        strip.nvjitlink.prefetch()  # loads while NVRTC compiles (150 ms on a cold host)
        virtual = virtual_arch(req.arch)
        try:
            obj, log = _nvrtc(req._replace(arch=virtual, target="ptx"), ctx, dump)
        except Exception as e:  # say why the options show a virtual arch
            if not hasattr(e, "dump_path"):
                raise
            raise _compile_error(e.log, req, e.options, e.dump_path,
                                 note=f"NVRTC compiled PTX for {virtual}: the first step of a "
                                      f"cubin for {req.arch}, see CUPY_RAWCODE_STRIP") from None
        ptx, removed, mapping = _strip_object(obj)
        cubin = strip.assemble(ptx, req.arch, version)
        if cubin is not None:
            made = {"stripped": removed, "assembler": "nvJitLink %d.%d" % strip.nvjitlink.version}
            return Compiled(cuda_core().ObjectCode.from_cubin(cubin, symbol_mapping=mapping),
                            made, log)
    obj, log = _nvrtc(req, ctx, dump)
    return Compiled(obj, {"stripped": 0}, log)


def _relocatable(req: Request, ctx, dump: bool) -> Compiled:
    """-dc / -rdc=true, as CuPy does it: NVRTC's relocatable cubin (LTO-IR with -dlto) linked
    with the device runtime through nvJitLink (devrt.py), so kernels can launch kernels."""
    from . import devrt
    kind = "ltoir" if "-dlto" in req.options.passthrough else "cubin"
    obj, log = _nvrtc(req._replace(target=kind), ctx, dump)
    try:
        cubin = devrt.link(bytes(obj.code), kind, req.arch, ctx.toolchain.nvrtc_version)
    except devrt.LinkError as e:
        raise _compile_error(str(e), req, program_flags(req, ctx), dump=dump) from None
    return Compiled(cuda_core().ObjectCode.from_cubin(cubin, symbol_mapping=obj.symbol_mapping),
                    {"linked": devrt.LINK_RULES}, log)


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


def _nvrtc(req: Request, ctx, dump: bool, pch: bool | None = None):
    """One NVRTC compile of ``req`` as asked: (ObjectCode, NVRTC's log), or CompileError.
    A compile that used a precompiled header and failed is done again without one, so a PCH
    never changes whether a compile succeeds or what its error says."""
    if pch is None:
        pch = _pch.wanted(req, ctx.toolchain.nvrtc_version)
    popts = _program_options(req, ctx, pch)
    if req.target == "ptx" and not req.is_ptx and not _driver_loadable():
        return _ptx_without_driver(req, ctx, popts, dump, pch)
    prog = cuda_core().Program(req.source, "ptx" if req.is_ptx else "c++", popts)
    logs = io.StringIO()
    try:
        obj = prog.compile(req.target, name_expressions=req.name_expressions or (), logs=logs)
        return obj, clean_log(logs.getvalue())
    except TypeError as e:
        if not pch:
            raise
        _pch.disable(e)  # cuda.core 1.2.2: "Expected str, got PCHStatusType" on some compiles
        return _nvrtc(req, ctx, dump, False)
    except Exception as e:
        text = str(e)
        if "NVRTC_ERROR" not in text and "error" not in text:
            raise
        if pch:
            return _nvrtc(req, ctx, dump, False)
        raise _compile_error(_nvrtc_log(text), req, _flags(popts), dump=dump) from None
    finally:
        prog.close()


def _nvrtc_log(text: str) -> str:
    """NVRTC's log out of cuda.core's exception text ("6: NVRTC_ERROR_COMPILATION, compilation
    log:\n\n<log>"); the text itself when it holds no log (a bad option, for one)."""
    head, sep, log = text.partition("compilation log:")
    return clean_log(log.lstrip("\n") if sep else text) or clean_log(text) or text


def _flags(popts) -> list[str]:
    return [b.decode() for b in popts.as_bytes("nvrtc")]


def _compile_error(log: str, req: Request, flags: list[str], dump_path: str | None = None, *,
                   dump: bool = False, note: str | None = None):
    """errors.CompileError for NVRTC's ``log``, naming the program as NVRTC did."""
    from . import errors
    if dump and dump_path is None:
        dump_path = _dump(req, flags)
    msg = errors.compile_message(log, req.program_name, req.source, flags, dump_path=dump_path,
                                 note=note)
    return errors.CompileError(msg, req.source, req.program_name, flags, log=log,
                               dump_path=dump_path)


@functools.lru_cache(maxsize=1)
def _driver_loadable() -> bool:
    """Whether the CUDA driver library loads (False on build and CI hosts without a GPU)."""
    try:
        from cuda.bindings import driver
        driver.cuDriverGetVersion()
        return True
    except Exception:  # cuda.pathfinder's DynamicLibNotFoundError, or a driver that fails
        return False


def _ptx_without_driver(req: Request, ctx, popts, dump: bool, pch: bool):
    """C++ to PTX through NVRTC directly: (ObjectCode, NVRTC's log). cuda.core 1.2 asks the
    driver whether it could load the PTX it just made and raises where there is no driver;
    NVRTC itself needs none."""
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
        log = b" " * check(*nvrtc.nvrtcGetProgramLogSize(prog))
        check(*nvrtc.nvrtcGetProgramLog(prog, log))
        log = clean_log(log.decode(errors="replace"))
        if result != ok:
            if pch:
                return _nvrtc(req, ctx, dump, False)
            raise _compile_error(log or result.name, req, _flags(popts), dump=dump)
        size = check(*nvrtc.nvrtcGetPTXSize(prog))
        ptx = b" " * size
        check(*nvrtc.nvrtcGetPTX(prog, ptx))
        mapping = {n: check(*nvrtc.nvrtcGetLoweredName(prog, n.encode()))
                   for n in req.name_expressions}
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return cuda_core().ObjectCode.from_ptx(ptx.rstrip(bytes(1)), symbol_mapping=mapping), log
