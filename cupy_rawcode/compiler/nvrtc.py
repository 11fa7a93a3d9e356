"""Invoke NVRTC on a miss, through its own API (cuda.bindings.nvrtc: importing cuda.core would
cost 50-100 ms of a cold start): our options, NVRTC's automatic precompiled headers, NVRTC's log,
and compile errors that show the failing lines. Not imported on a cache hit."""

import os
import re
import threading
from typing import NamedTuple

from ..ground import config, deferred, errors
from ..ground.cudaimport import cuda_module
from ..ground.errors import RawcodeRuntimeError
from ..ground.nvrtclog import (
    clean_log,  # NVRTC's log is read in nvrtclog.py
    option_refusal,
)
from ..ground.stamps import first_changed, take
from ..headers.options import file_options, wants_lto, wants_rdc
from ..headers.search import closure_stamps, find
from ..key import LINK_RULES
from ..key.request import Request, context
from . import ptx_input
from .signals import guarded

fast = deferred("cupy_rawcode.headers.fast")  # a PCH's header prefix only
strip = deferred("cupy_rawcode.compiler.strip")  # post-processing: a cubin or PTX to strip
devrt = deferred("cupy_rawcode.compiler.devrt")  # a relocatable (-rdc) compile only
hints = deferred("cupy_rawcode.compiler.hints")  # a failed compile only


def __getattr__(name: str):
    if name == "CompileError":  # errors.py builds it on first use (it imports CuPy)
        return errors.CompileError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cuda_core():
    """The cuda.core module (imported under ground/cudaimport.py's lock: a compile started on
    another thread and a cache hit on this one would race)."""
    return cuda_module("cuda.core")


def include_prefix(source: str) -> str:
    """The leading block of directive, comment and blank lines: what a PCH can cover."""
    lines = []
    for line in source.splitlines():
        if not re.match(r"\s*(#.*|//.*)?$", line):
            break
        lines.append(line.strip())
    return "\n".join(ln for ln in lines if ln)


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
    NVRTC does not check a PCH against the headers it was made from (measured with 12.9: an
    edited header, size and mtime changed, still compiled to the old code). So a PCH is made from
    the header stamps taken just before (stamps.py), in a directory of its own, and reused only
    while they all hold; else a new one is made in a new directory.
    Files go to a private temp directory removed at exit."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = None  # signature of the previous compile
        self.run = 0  # compiles in a row with that signature
        self.live = None  # signature of the PCH NVRTC holds now
        self.used = 0  # compiles that reused it
        self.charged = False  # its waste already raised ``need``
        self.need = 2
        self.dir: str | None = None
        self.stamps: tuple | None = None  # the live PCH's files as stamps.take gave them
        self.made = 0  # PCHs made: the live one's directory is its number

    def wanted(self, req: Request, nvrtc_version: tuple[int, int], ctx=None) -> bool:
        mode = config.pch_mode()
        if mode == "never" or nvrtc_version < (12, 8) or req.is_ptx:
            return False
        prefix = include_prefix(req.source)
        signature = (prefix, req.options, req.arch, req.source_dir)
        with self.lock:
            self.run = self.run + 1 if signature == self.last else 1
            self.last = signature
            if signature == self.live and self._stale():
                self.live = None  # its headers changed: never reused again
            if mode != "always" and "include" not in prefix:
                return False  # nothing to precompile
            was = self.live
            use = True if mode == "always" else self._decide(signature)
            if use and signature != was:  # a new PCH: its files stamped before NVRTC reads them
                self.live, self.used, self.charged = signature, 0, False
                return self._made_from(req, ctx)
            return use

    def _stale(self) -> bool:
        """Whether a file the live PCH was made from changed since (or could not be stamped)."""
        return self.stamps is None or first_changed(self.stamps) is not None

    def _made_from(self, req: Request, ctx) -> bool:
        """Stamp the files of a new PCH (its header prefix's closure) and give it a directory of
        its own; False (no PCH) when they cannot be stamped."""
        self.stamps = prefix_stamps(req, ctx)
        if self.stamps is None:
            self.live = None
            return False
        self.made += 1
        if self.dir is not None:  # the previous PCH's files: never read again
            import shutil

            shutil.rmtree(os.path.join(self.dir, str(self.made - 1)), True)
        return True

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
            path = os.path.join(self.dir, str(self.made))
            os.makedirs(path, exist_ok=True)
            return path


def prefix_stamps(req: Request, ctx=None) -> tuple | None:
    """The stamps (stamps.take part) of every file a PCH of ``req``'s header prefix reads, taken
    now: its fast-mode closure, with the pre-includes; None when it cannot be resolved, or
    holds a computed include the scan cannot expand (a file NVRTC reads could not be stamped)."""
    ctx = ctx if ctx is not None else context(req)
    try:
        closure = fast.resolve_fast(include_prefix(req.source), ctx, req.pre_includes)
    except (OSError, ValueError):
        return None
    if closure.unresolved:
        return None
    return take(closure_stamps(closure, ctx, also=closure.probed))


_pch = _Pch()


def nvrtc_flags(req: Request, ctx, pch: bool = False) -> list[str]:
    """The options NVRTC receives for ``req``: the arch, the search list, the forced
    pre-includes, the standard, the macros, CuPy's defaults, PCH and the options passed
    through as they are."""
    o = req.options
    # a device's arch after an -arch option, as CuPy appends it (NVRTC keeps the last, and warns)
    flags = [f"-arch={o.arch}"] if o.arch is not None and o.arch != req.arch else []
    flags.append(f"-arch={req.arch}")
    flags += [f"--define-macro={d}" for d in o.defines]
    flags += [f"--undefine-macro={u}" for u in o.undefines]
    flags += [f"--include-path={d.path}" for d in ctx.dirs]
    flags += [f"--pre-include={forced_path(p, ctx)}" for p in req.pre_includes]
    flags += [f"--pre-include={p}" for p in o.pre_includes]
    flags += [f"--std={o.std}"]
    if o.default_device:
        flags.append("--device-as-default-execution-space")
    if pch:
        flags += ["--pch", f"--pch-dir={_pch.directory()}", "--pch-messages=false"]
    return flags + list(o.passthrough)


def forced_path(name: str, ctx) -> str:
    """The path of a forced pre-include (the shims' workaround.h) as the resolver finds it, in
    the search list (headers/fast.py): NVRTC, handed a relative name, would look in the working
    directory first, where another file of that name may stand."""
    found = find(name, angled=True, includer=None, source_dir=None, dirs=ctx.dirs)
    return name if found is None else found.path


def _dump(req: Request, options: list[str]) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(prefix="cupy-rawcode-", suffix=".cu")
    with os.fdopen(fd, "w") as f:
        f.write(f"// options: {' '.join(options)}\n{req.source}")
    return path


def refused_option(options: tuple[str, ...]) -> str | None:
    """NVRTC's words for the first of ``options`` it does not accept ("unrecognized option
    --x"), found by compiling an empty program (an unknown option fails at once, before any
    work; 10-20 ms otherwise); None when it accepts them all or cannot be asked. An option
    naming a file NVRTC writes (-time=F, --create-pch=F) is NVRTC's own spelling and is left
    out: the empty compile would write that file."""
    options = tuple(o for o in options if o not in file_options(options))
    if not options:
        return None
    try:
        nvrtc = cuda_module("cuda.bindings.nvrtc")
    except ImportError:
        return None
    raw = guarded(_option_log, nvrtc, options)
    if raw is None:
        return None
    return option_refusal(raw.decode(errors="replace")) or "an option NVRTC does not accept"


def _option_log(nvrtc, options: tuple[str, ...]) -> bytearray | None:
    """NVRTC's log for an empty program compiled with ``options`` when it refuses one of them,
    else None; creation to destruction on the calling thread (signals.guarded runs it)."""
    result, prog = nvrtc.nvrtcCreateProgram(b"", b"options.cu", 0, [], [])
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return None
    try:
        encoded = [o.encode() for o in options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        if result != nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_OPTION:
            return None
        raw = bytearray(nvrtc.nvrtcGetProgramLogSize(prog)[1])
        nvrtc.nvrtcGetProgramLog(prog, raw)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return raw


class Compiled(NamedTuple):
    """What NVRTC made: ``code`` (bytes of ``target``), ``symbols`` (name expression -> lowered
    name), ``made`` (how: a dict for the entry's metadata, ``stripped`` and ``assembler`` where
    they apply) and ``log`` (NVRTC's log, warnings included, without PCH messages: stored with
    the entry and replayed on every hit)."""

    code: bytes
    symbols: dict
    made: dict
    log: str


def compile_program(req: Request, ctx, dump: bool) -> Compiled:
    """NVRTC with the unreferenced library globals stripped where strip.py applies.

    A cubin that may have such globals (the source includes headers) is made in two steps:
    NVRTC to PTX for the virtual arch (skipping NVRTC's own ptxas run on the unstripped PTX),
    then nvJitLink on the stripped PTX. nvJitLink's ptxas works on relocatable code, which can
    keep a local array in memory where NVRTC's whole-program ptxas keeps it in registers: so
    when nvJitLink's cubin uses any stack, NVRTC's own cubin is made too and nvJitLink's is
    used only if no function needs more registers or stack (strip.no_worse); where nothing was
    stripped and the PTX has local arrays, NVRTC's own at once. Where nvJitLink cannot, NVRTC
    makes the cubin itself."""
    if req.target == "cubin" and not req.is_ptx and wants_rdc(req.options.passthrough):
        return _relocatable(req, ctx, dump)
    if not strip.wanted(req.options.passthrough, req.target, req.is_ptx):
        code, symbols, log = _nvrtc(req, ctx, dump)
        return Compiled(code, symbols, {}, log)
    if req.target == "ptx":
        code, symbols, log = _nvrtc(req, ctx, dump)
        code, removed = _strip_ptx(code, symbols)
        return Compiled(code, symbols, {"stripped": removed}, log)
    version = ctx.toolchain.nvrtc_version
    may_have_globals = "include" in req.source or bool(req.options.pre_includes)
    if may_have_globals and strip.nvjitlink.usable(version) is not False:
        strip.nvjitlink.prefetch()  # loads while NVRTC compiles (150 ms on a cold host)
        virtual = virtual_arch(req.arch)
        try:
            ptx, symbols, log = _nvrtc(req._replace(arch=virtual, target="ptx"), ctx, dump)
        except Exception as e:  # say why the options show a virtual arch
            if not hasattr(e, "dump_path"):
                raise
            error = _compile_error(
                e.log,  # type: ignore[attr-defined]
                req,
                list(e.options),  # type: ignore[attr-defined]
                e.dump_path,
                note=f"NVRTC compiled PTX for {virtual}: the first step of a "
                f"cubin for {req.arch}, see CUPY_RAWCODE_STRIP",
            )
            error.nvrtc_result = getattr(e, "nvrtc_result", None)
            raise error from None
        ptx, removed = _strip_ptx(ptx, symbols)
        if not strip.worth_assembling(ptx, removed):  # NVRTC's own cubin, no PCH (its policy)
            own, _, log = _nvrtc(req, ctx, dump, False)
            return Compiled(own, symbols, {"stripped": 0}, log)
        cubin = strip.assemble(ptx, req.arch, version)
        if cubin is not None:
            made = {"stripped": removed, "assembler": "nvJitLink " + strip.nvjitlink.release()}
            if strip.uses_stack(cubin):
                # no PCH: this second compile of the same source must not count in its policy
                own, _, log = _nvrtc(req, ctx, dump, False)
                if not strip.no_worse(cubin, own):
                    return Compiled(
                        own,
                        symbols,
                        {
                            "stripped": 0,
                            "kept": "nvJitLink's cubin needed more registers or stack than NVRTC's",
                        },
                        log,
                    )
            return Compiled(cubin, symbols, made, log)
    code, symbols, log = _nvrtc(req, ctx, dump)
    return Compiled(code, symbols, {"stripped": 0}, log)


def _relocatable(req: Request, ctx, dump: bool) -> Compiled:
    """-dc / -rdc=true, as CuPy does it: NVRTC's relocatable cubin (LTO-IR with -dlto) linked
    with the device runtime through nvJitLink (devrt.py), so kernels can launch kernels."""
    kind = "ltoir" if wants_lto(req.options.passthrough) else "cubin"
    code, symbols, log = _nvrtc(req._replace(target=kind), ctx, dump)
    try:
        cubin = devrt.link(code, kind, req.arch, ctx.toolchain.nvrtc_version)
    except devrt.LinkError as e:
        raise _compile_error(str(e), req, nvrtc_flags(req, ctx), dump=dump) from None
    return Compiled(cubin, symbols, {"linked": LINK_RULES}, log)


def virtual_arch(arch: str) -> str:
    """compute_90a for sm_90a: the PTX-only target of a real architecture."""
    return "compute_" + arch.partition("_")[2] if arch.startswith("sm_") else arch


def _strip_ptx(ptx: bytes, symbols: dict) -> tuple[bytes, int]:
    """(PTX without unreferenced library globals, how many went); the lowered names of name
    expressions always stay."""
    text = ptx.decode("latin-1")  # lossless, whatever comments hold (_nvrtc dropped the NUL)
    text, removed = strip.strip(text, frozenset(symbols.values()))
    return text.encode("latin-1"), removed


def _nvrtc(req: Request, ctx, dump: bool, pch: bool | None = None) -> tuple[bytes, dict, str]:
    """One NVRTC compile of ``req`` as asked: (code, symbols, NVRTC's log), or CompileError.
    PTX input is linked (ptx_input.py); C++ goes through NVRTC's own API. A compile
    that used a precompiled header and failed is done again without one, so a PCH never
    changes whether a compile succeeds or what its error says."""
    if req.is_ptx:
        try:
            return guarded(ptx_input.link, req), {}, ""
        except Exception as e:  # the linker's own error (nvJitLink's): a CompileError, as NVRTC's
            if isinstance(e, errors.RawcodeError):
                raise
            raise _compile_error(str(e), req, list(req.options.passthrough), dump=dump) from None
    if pch is None:
        pch = _pch.wanted(req, ctx.toolchain.nvrtc_version, ctx)
    flags = nvrtc_flags(req, ctx, pch)
    failed, log, code, symbols = guarded(_program, req, flags)
    if failed is not None:
        if pch:
            return _nvrtc(req, ctx, dump, False)
        error = _compile_error(log or failed, req, flags, dump=dump)
        error.nvrtc_result = failed  # NVRTC's verdict, which a failure cache may keep
        raise error
    return (code.rstrip(bytes(1)) if req.target == "ptx" else code), symbols, log


def _program(req: Request, flags: list[str]) -> tuple[str | None, str, bytes, dict]:
    """One NVRTC program from creation to destruction, on the calling thread (signals.guarded
    runs it): (the failing result's name or None, NVRTC's log, code, symbols)."""
    nvrtc = cuda_module("cuda.bindings.nvrtc")

    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS

    def check(result, *values):
        if result != ok:
            raise RawcodeRuntimeError(f"NVRTC: {nvrtc.nvrtcGetErrorString(result)[1].decode()}")
        return values[0] if len(values) == 1 else values

    getters = {
        "ptx": (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX),
        "cubin": (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN),
        "ltoir": (nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR),
    }
    prog = check(
        *nvrtc.nvrtcCreateProgram(req.source.encode(), req.program_name.encode(), 0, [], [])
    )
    try:
        for name in req.name_expressions:
            check(*nvrtc.nvrtcAddNameExpression(prog, name.encode()))
        encoded = [f.encode() for f in flags]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        # NVRTC writes into the buffer: a bytearray, never ``b" " * n``, which for n == 1 is
        # CPython's shared one-byte object (an empty log would turn every b" " into b"\0")
        raw = bytearray(check(*nvrtc.nvrtcGetProgramLogSize(prog)))
        check(*nvrtc.nvrtcGetProgramLog(prog, raw))
        log = clean_log(raw.decode(errors="replace"))
        if result != ok:
            return result.name, log, b"", {}
        get_size, get = getters[req.target]
        buffer = bytearray(check(*get_size(prog)))
        check(*get(prog, buffer))
        symbols = {
            n: _text(check(*nvrtc.nvrtcGetLoweredName(prog, n.encode())))
            for n in req.name_expressions
        }
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return None, log, bytes(buffer), symbols


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _compile_error(
    log: str,
    req: Request,
    flags: list[str],
    dump_path: str | None = None,
    *,
    dump: bool = False,
    note: str | None = None,
):
    """errors.CompileError for NVRTC's ``log``, naming the program as NVRTC did; with hints
    (hints.py: e.g. a declaration stub's name used, what to use instead)."""
    if dump and dump_path is None:
        dump_path = _dump(req, flags)
    msg = errors.compile_message(
        log,
        req.program_name,
        req.source,
        flags,
        dump_path=dump_path,
        note=note,
        hints=hints.compile_hints(
            log, req.source, req.options.include_dirs, context(req).toolchain.nvrtc_version
        ),
    )
    return errors.CompileError(
        msg, req.source, req.program_name, flags, log=log, dump_path=dump_path
    )
