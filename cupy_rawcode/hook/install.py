"""CuPy's compile function, wrapped: what ``install()`` routes through cupy-rawcode, and what
``record()`` sees.

Every compile CuPy 13/14 makes (RawKernel, RawModule, ElementwiseKernel, ReductionKernel,
ufuncs, reductions, ``cupyx.jit``) calls ``cupy.cuda.compiler._compile_module_with_cache``, one
Python-level function. The wrapper put there routes each call by what is switched on:
- ``jitify``: ``jitify=True`` calls are compiled by cupy-rawcode (jitify_compat.py);
- ``all``: every other NVRTC call is served by cupy-rawcode's store, CuPy compiling on a miss
  (cupy_compiles.py);
- recording: every call is written to the record (recording.py), whoever compiles it.
``uninstall()`` switches routing off; the wrapper goes when nothing is left for it to do.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading

from ..ground import deferred
from ..ground.errors import RawcodeRuntimeError, RawcodeValueError

# imported when first used: install() without scope 'all', and observe(), need none of them
cupy_compiles = deferred("cupy_rawcode.hook.compiles")  # scope "all": CuPy's compiles served
recording = deferred("cupy_rawcode.hook.recording")
jitify = deferred("cupy_rawcode.orchestrator.jitify")  # a jitify=True compile routed here
flow = deferred("cupy_rawcode.orchestrator.flow")
options_module = deferred("cupy_rawcode.headers.options")
building = deferred("cupy_rawcode.kernel.building")
loading = deferred("cupy_rawcode.kernel.loading")

SCOPES = ("jitify", "all")
_lock = threading.Lock()
_MARK = "_cupy_rawcode_original"
_NEEDED = ("source", "options", "jitify")  # the parameters the wrapper reads
_routes = {"jitify": False, "all": False}


def _compiler():
    import cupy.cuda.compiler as compiler

    return compiler


def installed(scope: str = "jitify") -> bool:
    """Whether CuPy's compiles of ``scope`` currently go through cupy-rawcode."""
    return _routes.get(scope, False) and hasattr(_compiler()._compile_module_with_cache, _MARK)


def _hook_point(compiler):
    """CuPy's compile function and its signature; RuntimeError naming the CuPy version when
    this CuPy has no such function (install() never silently does nothing)."""
    original = getattr(compiler, "_compile_module_with_cache", None)
    params = inspect.signature(original).parameters if callable(original) else {}
    if not callable(original) or not all(p in params for p in _NEEDED):
        import cupy

        raise RawcodeRuntimeError(
            f"cupy_rawcode.install(): CuPy {cupy.__version__} has no "
            f"cupy.cuda.compiler._compile_module_with_cache({', '.join(_NEEDED)}, ...) to route "
            "compiles through (supported: CuPy 13 and 14); use cupy_rawcode.RawKernel / "
            "RawModule instead"
        )
    return original, inspect.signature(original)


def _wrap(compiler) -> None:
    """Put the wrapper in place once (under _lock)."""
    original, signature = _hook_point(compiler)
    if hasattr(original, _MARK):
        return

    names = list(signature.parameters)
    defaults = {n: p.default for n, p in signature.parameters.items() if p.default is not p.empty}

    @functools.wraps(original)
    def compile_module_with_cache(*args, **kwargs):
        given = names[: len(args)]
        if 1 <= len(args) <= 2 and kwargs.keys() <= defaults.keys() - set(given):  # CuPy's way
            a = {**defaults, **dict(zip(given, args, strict=True)), **kwargs}
        else:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
        call = cupy_compiles.call_from(a)
        if call is not None and recording.recording():
            recording.note_cupy(call)
        if call is not None and call.jitify and _routes["jitify"]:
            return _compile_for_cupy(
                a["source"], call.options, a.get("arch"), a.get("name_expressions"),
                a.get("log_stream"),
            )  # fmt: skip
        if call is not None and _routes["all"] and cupy_compiles.servable(call, compiler):
            return cupy_compiles.compile_module(original, args, kwargs, call)
        return original(*args, **kwargs)

    setattr(compile_module_with_cache, _MARK, original)
    compiler._compile_module_with_cache = compile_module_with_cache


def _compile_for_cupy(source: str, options: tuple[str, ...], arch, name_expressions, log_stream):
    """Compile what CuPy assembled (its -I list, std, jitify flag) and load it; errors are
    JitifyException as well, as CuPy's jitify=True raises. CuPy's workaround line is answered
    by our shims (the same names in std, through a using-directive), on the same line."""
    source = jitify.jitify_source(source)
    opts = options_module.parse_options(options)
    # CuPy's arch argument, else the current device's, after the options as CuPy appends it
    cc = options_module.arch_number(building._arch_target(arch)[0]) if arch is not None else None
    target_arch, target = building._device_target(opts.arch, cc)
    names = tuple(name_expressions or ())
    req = flow.request(
        source, arch=target_arch, options=jitify.jitify_options(options), name_expressions=names,
        target=target, device=True,
    )  # fmt: skip
    code = building.build(req, log_stream=log_stream, jitify=True)
    return loading._load_module(code)


def install(scope: str = "jitify") -> None:
    """Route CuPy's compiles through cupy-rawcode: ``"jitify"`` (the default) its
    ``jitify=True`` compiles; ``"all"`` those and every other NVRTC compile CuPy makes, served
    by the store with CuPy's own options, headers and cubins. Idempotent."""
    if scope not in SCOPES:
        raise RawcodeValueError(f"install(scope={scope!r}): expected one of {SCOPES}")
    with _lock:
        compiler = _compiler()
        if scope == "all":
            if not cupy_compiles.supported(compiler):
                import cupy

                raise RawcodeRuntimeError(
                    f"cupy_rawcode.install(scope='all'): CuPy {cupy.__version__} has no kernel "
                    "cache backend to answer (CuPy >= 14.1 has); install() alone still routes "
                    "jitify=True compiles"
                )
        _wrap(compiler)
        _routes["jitify"] = True
        if scope == "all":
            cupy_compiles.attach(compiler)
            _routes["all"] = True


def observe() -> None:
    """Put the wrapper in place without routing anything (recording.py sees CuPy's compiles)."""
    with _lock:
        _wrap(_compiler())


def uninstall() -> None:
    """Give CuPy its compiles back. The wrapper stays only while a record is being written."""
    with _lock:
        compiler = _compiler()
        _routes["jitify"] = _routes["all"] = False
        cupy_compiles.detach(compiler)
    release_if_idle()


def release_if_idle() -> None:
    """Take the wrapper away when nothing is routed and nothing recorded."""
    with _lock:
        compiler = _compiler()
        original = getattr(compiler._compile_module_with_cache, _MARK, None)
        if original is not None and not any(_routes.values()) and not recording.recording():
            compiler._compile_module_with_cache = original


def record(path) -> None:
    """Append every compile this process makes from now on to the record ``path``
    (recording.py): our RawKernel/RawModule builds, and CuPy's own compiles, seen through the
    wrapper put in place here when CuPy is installed. ``None`` stops."""
    if path is None:
        recording.stop()
        if "cupy.cuda.compiler" in sys.modules:
            release_if_idle()
        return
    recording.start(path)
    try:
        import cupy  # noqa: F401
    except Exception:
        return  # no CuPy: only our own kernels compile
    observe()
