"""Every compile CuPy makes, through cupy-rawcode's key and store (``install(scope="all")``).

CuPy compiles exactly as it always does: its options, its headers, its NVRTC, its cubin. Only
where the bytes come from changes. ``compile_module`` stands in for
``cupy.cuda.compiler._compile_module_with_cache`` (hook.py installs it): it keys the call
(``key_of``: the source, CuPy's options with include directories as tags, the contents of every
header NVRTC can read through them, CuPy's NVRTC version, the arch and CuPy's own version),
looks the key up in the store (memory, disk, bundles, Redis), and on a hit loads the stored
payload as CuPy loads an entry of its own cache. On a miss CuPy's own function runs, with
CuPy's cache backend answered for this thread by ``Capture``: CuPy compiles, "saves" its
payload, and the payload goes to our store instead of CuPy's directory.

Passed to CuPy untouched: nvcc, LTO IR, ``CUPY_CACHE_IN_MEMORY=1`` (CuPy then keeps nothing on
disk, and neither do we), a source whose headers are missing (CuPy raises its own error), and
every call while CuPy has no cache backend to answer (CuPy < 14.1).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from typing import Any, NamedTuple

from ..ground.errors import RawcodeRuntimeError

KEY_KIND = "cupy-compile-1"  # change when the fields below change
_DIRECTIVE = re.compile(r"^[ \t]*#(?:.*\\\n)*.*", re.M)
_local = threading.local()  # .payloads: a list while this thread's miss is being captured
_digests: dict[int, tuple[str, str]] = {}  # id(extra_source) -> (the str, its SHA-256)
_contexts: dict[tuple[str, ...], tuple[Any, Any]] = {}  # options -> (Options, Context)
# (directives, options) -> (closure digest, its files' stamps as stamps.take gave them)
_closures: dict[tuple[str, tuple[str, ...]], tuple[str, tuple]] = {}
_fixed: dict[str, list[tuple[str, str]]] = {}  # CUPY_CUDA_COMPILE_WITH_DEBUG -> CuPy's fields


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
    """Whether the store can serve this call: not Jitify's (jitify_compat.py compiles those),
    not with CUPY_CACHE_IN_MEMORY=1 (CuPy keeps nothing then, and neither do we), and a CuPy
    whose cache backend Capture can answer (CuPy >= 14.1)."""
    import os

    in_memory = os.environ.get("CUPY_CACHE_IN_MEMORY", "") not in ("", "0")
    return not call.jitify and not in_memory and isinstance(compiler._kernel_cache_backend, Capture)


def _extra_digest(extra: str | None) -> str:
    """SHA-256 of CuPy's header text (one 170 kB string, the same object every call)."""
    if extra is None:
        return ""
    memo = _digests.get(id(extra))
    if memo is not None and memo[0] is extra:
        return memo[1]
    digest = hashlib.sha256(extra.encode("utf-8", "surrogatepass")).hexdigest()
    _digests[id(extra)] = (extra, digest)
    return digest


def _cupy_fields(call: Call) -> list[tuple[str, str]]:
    """What CuPy itself brings to the compile: its version, payload format, NVRTC, debug flag."""
    import os

    debug = os.environ.get("CUPY_CUDA_COMPILE_WITH_DEBUG", "")
    fixed = _fixed.get(debug)
    if fixed is None:
        import cupy
        from cupy.cuda import compiler

        on = compiler._get_bool_env_variable("CUPY_CUDA_COMPILE_WITH_DEBUG", False)
        fixed = _fixed[debug] = [
            ("kind", KEY_KIND),
            ("cupy", cupy.__version__),
            ("cupy_payload", str(getattr(compiler, "_cache_payload_version", 0))),
            ("cupy_nvrtc", ".".join(map(str, compiler._get_nvrtc_version()))),
            ("cupy_debug", "1" if on else "0"),
        ]
    return fixed + [
        ("cooperative", "1" if call.cooperative else "0"),
        ("extra_source", _extra_digest(call.extra_source)),
    ]


def directives(source: str) -> str:
    """The source's preprocessor lines (with their continuations): all that decides its header
    closure in fast mode, which reads every branch (CuPy's kernels differ in their code and
    share their includes)."""
    return "\n".join(m.group(0) for m in _DIRECTIVE.finditer(source))


def _context(options: tuple[str, ...]):
    """(Options, search context) of CuPy's options: its own -I and -isystem directories only,
    no root of ours (CuPy does not search them). Memoized per options."""
    found = _contexts.get(options)
    if found is None:
        from ..headers.options import parse_options
        from ..headers.search import make_context

        opts = parse_options(options)
        ctx = make_context(opts)
        ctx = ctx._replace(dirs=tuple(d for d in ctx.dirs if d.origin == "user"))
        found = _contexts[options] = (opts, ctx)
    return found


def _closure(source: str, options: tuple[str, ...]) -> tuple[Any, str]:
    """(Options, the closure digest) for a source: its directive lines resolved in fast mode,
    once per process for each set of directives and options (a manifest, checked by stat,
    answers in a new process). Within a process, headers are read once, as CuPy reads them."""
    opts, ctx = _context(options)
    skeleton = directives(source)
    memo = (skeleton, options)
    known = _closures.get(memo)
    if known is None:
        from ..key.manifest import closure_digests

        facts, _ = closure_digests(skeleton, ctx)
        known = _closures[memo] = (facts.digest, facts.stamps)
    return opts, known[0]


def changed_header(call: Call) -> str | None:
    """A file of the call's closure whose stamp differs from the one its key was computed with
    (stamps.first_changed), else None; then the closure is forgotten (here and its manifest), so
    that the next key reads the files again. CuPy read its headers itself while compiling: what
    it compiled may not be what the key covers."""
    from ..ground.stamps import first_changed

    skeleton = directives(call.source)
    known = _closures.get((skeleton, call.options))
    if known is None:
        return None
    path = first_changed(known[1])
    if path is not None:
        from ..key.manifest import discard

        del _closures[(skeleton, call.options)]
        discard(skeleton, _context(call.options)[1])
    return path


def key_of(call: Call) -> str:
    """The key of a call: the source, CuPy's options with include directories as tags, the
    closure's digest (every header NVRTC can reach through CuPy's directories, in fast mode)
    and what CuPy brings. Raises closure.MissingHeaderError when a header is missing."""
    from ..ground.digest import digest_fields
    from ..key import key_fields

    opts, digest = _closure(call.source, call.options)
    fields = key_fields(
        source=call.source,
        option_fields=opts.key_fields(),
        search_tags=[f"user{i}" for i in range(len(opts.include_dirs))]
        + [f"isys{i}" for i in range(len(opts.isystem_dirs))],
        nvrtc_version="cupy",  # CuPy's NVRTC, in the CuPy fields
        arch=f"cc{call.arch}",
        target="cubin",
        name_expressions=call.name_expressions or (),
        closure=digest,
        extra=_cupy_fields(call),
    )
    return digest_fields(fields)


def load(call: Call, payload: bytes):
    """A CuPy Module from a stored payload, exactly as CuPy loads an entry of its own cache
    (for name expressions: the mangled names recorded at compile time); None when the payload
    is not one CuPy can use."""
    from cupy.cuda import compiler

    mod = compiler.function.Module()  # as CuPy's compile makes it (unloaded() replaces it)
    if call.name_expressions:
        decoded = compiler._decode_cache_payload(payload, len(call.name_expressions))
        if decoded is None:
            return None
        mangled, cubin = decoded
        mod.load(cubin)
        mod._set_mapping(dict(zip(sorted(call.name_expressions), mangled, strict=True)))
    else:
        mod.load(payload)
    return mod


def _stored(key: str) -> bytes | None:
    from ..store import default_store

    found = default_store().fetch(key)
    if found is None or found[1].get("target") != "cupy-payload":
        return None
    return found[0]


def cached(call: Call) -> bool:
    """Whether the store holds this call's payload."""
    from ..headers.closure import MissingHeaderError

    try:
        return _stored(key_of(call)) is not None
    except MissingHeaderError:
        return False


def compile_module(original, args: tuple, kwargs: dict, call: Call):
    """CuPy's compile function for one call, served by the store when it holds the key."""
    from ..headers.closure import MissingHeaderError

    if call.arch is None:  # CuPy's own choice: the current device's
        from cupy.cuda import compiler

        call = call._replace(arch=str(compiler._get_arch()))
    try:
        key = key_of(call)
    except MissingHeaderError:
        return original(*args, **kwargs)  # CuPy's own error, in CuPy's words
    payload = _stored(key)
    if payload is not None:
        mod = load(call, payload)
        if mod is not None:
            return mod
    mod, captured = capture(original, args, kwargs)
    if captured is None:
        return mod
    changed = changed_header(call)
    if changed is None:
        save(key, call, captured)
    else:  # as compile_request does (compiler/program.py)
        import warnings

        from ..compiler.program import HeaderChangedWarning

        warnings.warn(
            f"cupy-rawcode: {changed} changed while CuPy compiled a kernel that includes it; "
            "the module is used but not cached",
            HeaderChangedWarning,
            stacklevel=3,
        )
    return mod


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


def save(key: str, call: Call, payload: bytes) -> None:
    """Store CuPy's payload under our key."""
    from ..store import default_store
    from ..store.entry import encode

    meta = {"target": "cupy-payload", "arch": str(call.arch), "created": time.time()}
    store = default_store()
    store.record(False)
    store.put(key, encode(key, payload, meta))


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


def call_for(
    source: str,
    options: tuple[str, ...],
    arch: str,
    name_expressions: tuple[str, ...],
    extra_source: str | None,
    cooperative: bool,
) -> Call:
    """The Call a recorded CuPy compile makes for ``arch`` ('sm_90' or CuPy's '90');
    ``extra_source`` "cupy" stands for CuPy's header text (cupy._core.core._get_header_source)."""
    if extra_source == "cupy":
        from cupy._core import core

        extra_source = core._get_header_source()
    cc = arch.partition("_")[2] if "_" in arch else arch
    names = tuple(name_expressions) or None
    return Call(source, tuple(options), cc, extra_source, names, False, cooperative)


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
    import types

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
    if _stored(key) is not None:
        return key, True
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
    if payload is None:
        raise RawcodeRuntimeError("CuPy compiled but saved nothing (CUPY_CACHE_IN_MEMORY=1?)")
    save(key, call, payload)
    return key, False
