"""Every compile CuPy makes, through cupy-rawcode's key and store (``install(scope="all")``).

CuPy compiles exactly as it always does: its options, its headers, its NVRTC, its cubin. Only
where the bytes come from changes. ``compile_module`` stands in for
``cupy.cuda.compiler._compile_module_with_cache`` (hook.py installs it): it keys the call
(``key_of``, by key/cupy.py: the source, CuPy's options with include directories as tags,
the contents of every header NVRTC can read through them, CuPy's NVRTC version, the arch and
CuPy's own version),
and the orchestrator (orchestrator/payloads.py) looks the key up in the store (memory, disk,
bundles, Redis); on a hit the stored payload is loaded as CuPy loads an entry of its own cache,
by the classes' loader (kernel/loading.py). On a miss CuPy's own function runs, with
CuPy's cache backend answered for this thread by ``Capture``: CuPy compiles, "saves" its
payload, and the payload goes to our store instead of CuPy's directory.

Passed to CuPy untouched: nvcc, LTO IR, ``CUPY_CACHE_IN_MEMORY=1`` (CuPy then keeps nothing on
disk, and neither do we), ``CUPY_CACHE_SAVE_CUDA_SOURCE`` as CuPy's cache backend read it (CuPy
then writes each ``.cu`` beside its cubin in its own directory, for profilers and debuggers:
ours never writes there), a source whose headers are missing (CuPy raises its own error), and
every call while CuPy has no cache backend to answer (CuPy < 14.1).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import types
from typing import TYPE_CHECKING, Any, NamedTuple

from ..ground import config, deferred
from ..ground.errors import ResolveError, UnreadableHeaderError

# the store, the key and the loader: a served or compiled call's, never the reading of a call
# (call_from), which every wrapped CuPy compile does whatever the scope
loading = deferred("cupy_rawcode.kernel.loading")
cupy_key = deferred("cupy_rawcode.key.cupy")
payloads = deferred("cupy_rawcode.orchestrator.payloads")
if TYPE_CHECKING:
    from ..orchestrator.payloads import Failing

_local = threading.local()  # .payloads: a list while this thread's miss is being captured
_fixed: dict[tuple[str, bool], list[tuple[str, str]]] = {}  # (debug, ptx) -> CuPy's fields


class Call(NamedTuple):
    """One call of CuPy's compile function, as keyed and recorded: ``arch`` is CuPy's ('90'),
    None for the current device's (resolved by compile_module, when a device is needed)."""

    source: str
    options: tuple[str, ...]
    arch: str | None
    extra_source: str | None
    name_expressions: tuple[str, ...] | None
    jitify: bool
    cooperative: bool


def call_from(arguments: dict) -> Call | None:
    """The Call for CuPy's bound arguments; None for what stays CuPy's alone (nvcc, LTO IR,
    HIP)."""
    if arguments.get("backend", "nvrtc") != "nvrtc" or arguments.get("to_ltoir"):
        return None
    from cupy.cuda import runtime

    if runtime.is_hip:
        return None
    arch = arguments.get("arch")
    names = arguments.get("name_expressions")
    return Call(
        arguments["source"],
        tuple(arguments.get("options") or ()),
        None if arch is None else str(arch),
        arguments.get("extra_source"),
        tuple(names) if names else None,
        bool(arguments.get("jitify")),
        bool(arguments.get("enable_cooperative_groups")),
    )


def servable(call: Call, compiler) -> bool:
    """Whether the store can serve this call: not Jitify's (the orchestrator compiles those),
    not with CUPY_CACHE_IN_MEMORY=1 (CuPy keeps nothing then, and neither do we), not while
    CuPy's cache saves each source beside its cubin (saves_source), and a CuPy whose cache
    backend Capture can answer (CuPy >= 14.1)."""
    in_memory = os.environ.get("CUPY_CACHE_IN_MEMORY", "") not in ("", "0")
    backend = compiler._kernel_cache_backend
    if call.jitify or in_memory or not isinstance(backend, Capture):
        return False
    return not saves_source(backend.previous)


def saves_source(backend) -> bool:
    """Whether CuPy's cache backend writes each compile's ``.cu`` beside its cubin: its disk
    backend under CUPY_CACHE_SAVE_CUDA_SOURCE (any non-empty value, read when CuPy made it).
    Such a compile stays CuPy's, which writes both where it always does (profilers and
    debuggers find the source there); ours would keep the cubin alone, in its own store."""
    return bool(getattr(backend, "_save_cuda_source", False))


def _cupy_fields(call: Call) -> list[tuple[str, str]]:
    """What CuPy itself brings to the compile (key/cupy.py: its version, payload format, NVRTC,
    debug flag, PTX instead of cubin), read from CuPy once per setting, and the call's own
    fields."""
    from cupy.cuda import compiler  # loaded: CuPy is the caller

    # CUPY_COMPILE_WITH_PTX, as CuPy read it at its import: PTX payloads, keyed apart by CuPy too
    setting = (os.environ.get("CUPY_CUDA_COMPILE_WITH_DEBUG", ""), bool(compiler._use_ptx))
    fixed = _fixed.get(setting)
    if fixed is None:
        import cupy

        fixed = _fixed[setting] = cupy_key.cupy_fields(
            cupy.__version__,
            str(getattr(compiler, "_cache_payload_version", 0)),
            ".".join(map(str, compiler._get_nvrtc_version())),
            compiler._get_bool_env_variable("CUPY_CUDA_COMPILE_WITH_DEBUG", False),
            setting[1],
        )
    return fixed + [
        ("cooperative", "1" if call.cooperative else "0"),
        ("extra_source", cupy_key.extra_digest(call.extra_source)),
    ]


def changed_header(call: Call) -> str | None:
    """A header of the call's closure that changed since its key was computed (key/cupy.py)."""
    return cupy_key.changed_header(call.source, call.options)


def key_of(call: Call) -> str:
    """The key of a call (key/cupy.cupy_key): raises MissingHeaderError when a header is
    missing, a RawcodeValueError for options the key cannot read (cupy_key.readable)."""
    names = call.name_expressions or ()
    return cupy_key.cupy_key(call.source, call.options, str(call.arch), names, _cupy_fields(call))


def load(call: Call, payload: bytes):
    """A CuPy Module from a stored payload, exactly as CuPy loads an entry of its own cache
    (for name expressions: the mangled names recorded at compile time), by the classes' loader
    (kernel/loading.py); None when the payload is not one CuPy can use."""
    from cupy.cuda import compiler

    module = compiler.function.Module  # as CuPy's compile makes it (unloaded() replaces it)
    if not call.name_expressions:
        return loading.load_bytes(payload, None, module)
    decoded = compiler._decode_cache_payload(payload, len(call.name_expressions))
    if decoded is None:
        return None
    mangled, cubin = decoded
    mapping = dict(zip(sorted(call.name_expressions), mangled, strict=True))
    return loading.load_bytes(cubin, mapping, module)


def _served_key(call: Call) -> str | None:
    """The call's key, or None where CuPy compiles it itself, uncached: an option our parser
    refuses (NVRTC takes it or refuses it), a header missing (CuPy's own error, in CuPy's
    words), or one the key cannot scan (a Latin-1 comment). A header NVRTC would block on (a
    FIFO) stays our error."""
    if not cupy_key.readable(call.options):
        return None
    try:
        return key_of(call)
    except ResolveError as e:
        if isinstance(e, UnreadableHeaderError):
            raise
        return None


def cached(call: Call) -> bool:
    """Whether the store holds this call's payload."""
    key = _served_key(call)
    return key is not None and payloads.stored(key) is not None


def compile_module(original, args: tuple, kwargs: dict, call: Call):
    """CuPy's compile function for one call, through the orchestrator (payloads.serve): served
    by the store when it holds the key, else CuPy compiles and its payload is stored."""
    if call.arch is None:  # CuPy's own choice: the current device's
        from cupy.cuda import compiler

        call = call._replace(arch=str(compiler._get_arch()))
    key = _served_key(call)
    if key is None:
        return original(*args, **kwargs)
    return payloads.serve(
        key,
        str(call.arch),
        lambda payload: load(call, payload),
        lambda: capture(original, args, kwargs),
        lambda: changed_header(call),
        _failing(call),
        lambda: cupy_key.closure_record(call.source, call.options),
    )


def _failing(call: Call) -> Failing:
    """How the orchestrator keeps and rebuilds CuPy's compile errors for ``call``."""
    return payloads.Failing(lambda e: failure_fields(call, e), lambda r: failure(call, r))


_COMPILATION = 6  # NVRTC_ERROR_COMPILATION: NVRTC read the text and refused it


def failure_fields(call: Call, e: BaseException) -> dict | None:
    """What rebuilds the CompileException CuPy raised compiling ``call`` (its constructor's
    arguments; the source only where it is not the call's), None for any other exception
    (CuPy's Jitify, nvcc or a driver error) and for one that is no verdict on the text: CuPy
    makes every NVRTC error a CompileException (out of memory, an internal error), raised while
    handling the NVRTCError whose status says which."""
    from cupy.cuda import compiler
    from cupy_backends.cuda.libs.nvrtc import NVRTCError

    if type(e) is not compiler.CompileException:
        return None
    cause = e.__context__
    if not isinstance(cause, NVRTCError) or getattr(cause, "status", None) != _COMPILATION:
        return None
    ce: Any = e  # CuPy's class is untyped
    msg, source = ce._msg, ce.source
    if not all(isinstance(v, str) for v in (msg, source, ce.name, ce.backend, *ce.options)):
        return None
    if not msg.strip():
        return None
    return {
        "message": msg,
        "log": msg,  # CuPy's message is NVRTC's log
        "source": None if source == call.source else source,
        "name": ce.name,
        "options": list(ce.options),
        "backend": ce.backend,
    }


def failure(call: Call, record: dict):
    """CuPy's CompileException again from its record (payloads.Failing), dumped to stderr as
    CuPy's compile dumps it under CUPY_DUMP_CUDA_SOURCE_ON_ERROR=1; None for a record that
    does not give one."""
    from cupy.cuda import compiler

    source = call.source if record.get("source") is None else record["source"]
    options = record.get("options")
    fields = (source, record.get("name"), record.get("backend"))
    if not isinstance(options, list) or not all(isinstance(v, str) for v in (*fields, *options)):
        return None
    e = compiler.CompileException(
        record["message"], source, record["name"], tuple(options), record["backend"]
    )
    if config.cupy_dump_on_error():
        e.dump(sys.stderr)
    return e


def capture(original, args: tuple, kwargs: dict) -> tuple[Any, bytes | None]:
    """Run CuPy's compile with its cache answered by Capture for this thread: (CuPy's result,
    the payload it saved, or None when it saved none)."""
    payloads: list[bytes] = []
    _local.payloads = payloads
    try:
        result = original(*args, **kwargs)
    finally:
        _local.payloads = None
    return result, (payloads[-1] if payloads else None)


class Capture:
    """CuPy's kernel cache backend while installed: for a thread whose miss is being captured,
    ``load`` finds nothing and ``save`` keeps the payload; every other call goes to the backend
    CuPy had (so compiles not routed here keep CuPy's own cache)."""

    def __init__(self, previous):
        self.previous = previous

    def load(self, name: str) -> bytes | None:
        if getattr(_local, "payloads", None) is not None:
            return None
        return self.previous.load(name)

    def save(self, name: str, cubin: bytes, source: str) -> None:
        payloads = getattr(_local, "payloads", None)
        if payloads is not None:
            payloads.append(bytes(cubin))
        else:
            self.previous.save(name, cubin, source)


def attach(compiler) -> None:
    """Put Capture in front of CuPy's cache backend (once)."""
    if not isinstance(compiler._kernel_cache_backend, Capture):
        compiler._set_kernel_cache_backend(Capture(compiler._kernel_cache_backend))


def detach(compiler) -> None:
    """Give CuPy its own cache backend back."""
    backend = getattr(compiler, "_kernel_cache_backend", None)
    if isinstance(backend, Capture):
        compiler._set_kernel_cache_backend(backend.previous)


def supported(compiler) -> bool:
    """Whether this CuPy has a cache backend to answer (CuPy >= 14.1)."""
    return hasattr(compiler, "_set_kernel_cache_backend") and hasattr(
        compiler, "_kernel_cache_backend"
    )


# -- ahead of time: prebuild and warmup from a record ----------------------------------------


def call_for(job) -> Call:
    """The Call a recorded CuPy compile makes: ``job`` is a prebuild Job or a pool Task (its
    ``source``, ``options``, ``name_expressions``, ``arch``: 'sm_90' or CuPy's '90', and
    ``cupy``: (extra source, cooperative)); an extra source "cupy" stands for CuPy's header
    text (cupy._core.core._get_header_source)."""
    extra_source, cooperative = job.cupy
    if extra_source == "cupy":
        from cupy._core import core

        extra_source = core._get_header_source()
    arch = job.arch
    cc = arch.partition("_")[2] if "_" in arch else arch
    names = tuple(job.name_expressions) or None
    return Call(job.source, tuple(job.options), cc, extra_source, names, False, bool(cooperative))


class _Unloaded:
    """A stand-in for cupy.cuda.function.Module while compiling ahead: keeps the mapping CuPy
    sets, loads nothing (no GPU or driver needed)."""

    def __init__(self):
        self.mapping = None

    def _set_mapping(self, mapping) -> None:
        self.mapping = mapping

    def load(self, data) -> None:
        pass


def _arch_option(compiler):
    """CuPy's _get_arch_for_options_for_nvrtc for an explicit arch, without its per-device memo
    (which asks the driver for the current device): the same rule, cubin up to the newest
    architecture CuPy lets its NVRTC build, PTX beyond."""

    def arch_option(arch=None):
        if not compiler._use_ptx and int(arch) <= int(compiler._get_max_compute_capability()):
            return f"-arch=sm_{arch}", "cubin"
        return f"-arch=compute_{arch}", "ptx"

    return arch_option


@contextlib.contextmanager
def unloaded(compiler):
    """CuPy's compile for an explicit arch with no device: the module is never loaded and the
    arch option is not memoized per device (a worker process, or a test on a CPU)."""
    real, arch = compiler.function, compiler._get_arch_for_options_for_nvrtc
    compiler.function = types.SimpleNamespace(Module=_Unloaded, LinkState=real.LinkState)
    compiler._get_arch_for_options_for_nvrtc = _arch_option(compiler)
    try:
        yield
    finally:
        compiler.function, compiler._get_arch_for_options_for_nvrtc = real, arch


def compile_ahead(call: Call) -> tuple[str, bool]:
    """Compile a call into the store as CuPy would at its first launch, without a GPU: (key,
    whether the store held it already)."""
    from cupy.cuda import compiler

    key = key_of(call)
    return key, payloads.ahead(
        key,
        str(call.arch),
        lambda: _captured(compiler, call),
        lambda: changed_header(call),
        _failing(call),
        lambda: cupy_key.closure_record(call.source, call.options),
    )


def _captured(compiler, call: Call) -> bytes | None:
    """The payload CuPy saves compiling ``call`` for its arch, its module never loaded."""
    attach(compiler)
    fn = compiler._compile_module_with_cache
    original = getattr(fn, "_cupy_rawcode_original", fn)
    with unloaded(compiler):
        _, payload = capture(
            original,
            (call.source, call.options),
            {
                "arch": call.arch,
                "extra_source": call.extra_source,
                "enable_cooperative_groups": call.cooperative,
                "name_expressions": list(call.name_expressions or ()) or None,
            },
        )
    return payload
