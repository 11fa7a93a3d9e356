"""Route CuPy's own ``jitify=True`` compiles through cupy-rawcode (a migration aid).

``install()`` wraps ``cupy.cuda.compiler._compile_module_with_cache``, the one Python-level
function every CuPy 13/14 RawKernel/RawModule compile passes through. Calls with
``jitify=True`` (NVRTC, not LTO) are compiled by cupy-rawcode's resolver, shim headers and
cache; every other call goes to CuPy unchanged. ``uninstall()`` restores CuPy's function.
"""
from __future__ import annotations

import functools
import inspect
import threading

_lock = threading.Lock()
_MARK = "_cupy_rawcode_original"


def _compiler():
    import cupy.cuda.compiler as compiler
    return compiler


def installed() -> bool:
    """Whether CuPy's jitify=True path currently goes through cupy-rawcode."""
    return hasattr(_compiler()._compile_module_with_cache, _MARK)


def install() -> None:
    """Make ``cupy.RawKernel/RawModule(..., jitify=True)`` use cupy-rawcode. Idempotent."""
    with _lock:
        compiler = _compiler()
        original = compiler._compile_module_with_cache
        if hasattr(original, _MARK):
            return
        signature = inspect.signature(original)

        @functools.wraps(original)
        def compile_module_with_cache(*args, **kwargs):
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            a = call.arguments
            if (not a.get("jitify") or a.get("backend", "nvrtc") != "nvrtc"
                    or a.get("to_ltoir")):
                return original(*args, **kwargs)
            return _compile_for_cupy(a["source"], tuple(a.get("options") or ()), a.get("arch"),
                                     a.get("name_expressions"), a.get("log_stream"))

        setattr(compile_module_with_cache, _MARK, original)
        compiler._compile_module_with_cache = compile_module_with_cache


def uninstall() -> None:
    """Give CuPy its own ``jitify=True`` path back. Does nothing when not installed."""
    with _lock:
        compiler = _compiler()
        original = getattr(compiler._compile_module_with_cache, _MARK, None)
        if original is not None:
            compiler._compile_module_with_cache = original


def _compile_for_cupy(source: str, options: tuple[str, ...], arch, name_expressions, log_stream):
    """Compile what CuPy assembled (its -I list, std, workaround header) and load it."""
    from .kernel import _arch_target, _device_target, _load_module, build, compile_args
    from .options import parse_options

    opts = parse_options(compile_args(options, False))
    # an -arch option wins; else CuPy's arch argument; else the current device
    target_arch, target = (_arch_target(arch) if arch is not None and opts.arch is None
                           else _device_target(opts.arch))
    return _load_module(build(source, opts, target_arch, target, tuple(name_expressions or ()),
                              None, log_stream))
