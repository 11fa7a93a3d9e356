"""Route CuPy's own ``jitify=True`` compiles through cupy-rawcode (a migration aid).

``install()`` wraps ``cupy.cuda.compiler._compile_module_with_cache``, the one Python-level
function every CuPy 13/14 RawKernel/RawModule compile passes through. Calls with
``jitify=True`` (NVRTC, not LTO) are compiled by cupy-rawcode's resolver, shim headers and
cache; every other call goes to CuPy unchanged. ``uninstall()`` restores CuPy's function.

What Jitify did that the drop-in classes do not: an include that matches no file is dropped with
one warning (Jitify commented it out and compiled on), and errors are also ``JitifyException``.
"""

from __future__ import annotations

import functools
import inspect
import threading

_lock = threading.Lock()
_MARK = "_cupy_rawcode_original"
_NEEDED = ("source", "options", "jitify")  # the parameters the hook reads


class DroppedIncludeWarning(UserWarning):
    """A ``jitify=True`` compile dropped an include that matched no file, as Jitify did."""


def _compiler():
    import cupy.cuda.compiler as compiler

    return compiler


def installed() -> bool:
    """Whether CuPy's jitify=True path currently goes through cupy-rawcode."""
    return hasattr(_compiler()._compile_module_with_cache, _MARK)


def _hook_point(compiler):
    """CuPy's compile function and its signature; RuntimeError naming the CuPy version when
    this CuPy has no such function (install() never silently does nothing)."""
    original = getattr(compiler, "_compile_module_with_cache", None)
    params = inspect.signature(original).parameters if callable(original) else {}
    if not callable(original) or not all(p in params for p in _NEEDED):
        import cupy

        raise RuntimeError(
            f"cupy_rawcode.install(): CuPy {cupy.__version__} has no "
            f"cupy.cuda.compiler._compile_module_with_cache({', '.join(_NEEDED)}, ...) to route "
            "jitify=True compiles through (supported: CuPy 13 and 14); use "
            "cupy_rawcode.RawKernel / RawModule instead"
        )
    return original, inspect.signature(original)


def install() -> None:
    """Make ``cupy.RawKernel/RawModule(..., jitify=True)`` use cupy-rawcode. Idempotent."""
    with _lock:
        compiler = _compiler()
        original, signature = _hook_point(compiler)
        if hasattr(original, _MARK):
            return

        @functools.wraps(original)
        def compile_module_with_cache(*args, **kwargs):
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            a = call.arguments
            if not a.get("jitify") or a.get("backend", "nvrtc") != "nvrtc" or a.get("to_ltoir"):
                return original(*args, **kwargs)
            return _compile_for_cupy(
                a["source"],
                tuple(a.get("options") or ()),
                a.get("arch"),
                a.get("name_expressions"),
                a.get("log_stream"),
            )

        setattr(compile_module_with_cache, _MARK, original)
        compiler._compile_module_with_cache = compile_module_with_cache


def uninstall() -> None:
    """Give CuPy its own ``jitify=True`` path back. Does nothing when not installed."""
    with _lock:
        compiler = _compiler()
        original = getattr(compiler._compile_module_with_cache, _MARK, None)
        if original is not None:
            compiler._compile_module_with_cache = original


# What CuPy's jitify=True adds to the options (compiler.py): no effect on the code, but it keys
# Jitify compiles apart from the others, in CuPy's cache and in ours alike.
JITIFY_MACRO = "-DCUPY_USE_JITIFY"
# CuPy's jitify=True puts this line first in the source; its using-declarations bring a few
# cuda::std names into std, which then cannot be specialized there (toolkit/specializable.py).
_CUPY_WORKAROUND = "#include <cupy/cuda_workaround.h>\n"
_OWN_WORKAROUND = "#include <cupy_rawcode/jitify_workaround.h>\n"


def jitify_options(options: tuple[str, ...]) -> tuple[str, ...]:
    """The options a jitify=True compile runs with: as given, plus CuPy's marker."""
    return options if JITIFY_MACRO in options else options + (JITIFY_MACRO,)


def _compile_for_cupy(source: str, options: tuple[str, ...], arch, name_expressions, log_stream):
    """Compile what CuPy assembled (its -I list, std, jitify flag) and load it; errors are
    JitifyException as well, as CuPy's jitify=True raises. CuPy's workaround line is answered
    by our shims (the same names in std, through a using-directive), on the same line."""
    from .headers.options import parse_options
    from .kernel import _arch_target, _device_target, _load_module, build

    if source.startswith(_CUPY_WORKAROUND):
        source = _OWN_WORKAROUND + source[len(_CUPY_WORKAROUND) :]
    opts = parse_options(options)
    # an -arch option wins; else CuPy's arch argument; else the current device
    target_arch, target = (
        _arch_target(arch) if arch is not None and opts.arch is None else _device_target(opts.arch)
    )
    names = tuple(name_expressions or ())
    code = build(
        source, jitify_options(options), target_arch, target, names, None, log_stream, jitify=True
    )
    return _load_module(code)


def compile_as_jitify(
    source: str,
    options: tuple[str, ...],
    arch: str,
    target: str,
    names: tuple[str, ...],
    source_dir: str | None,
    index_id: str | None = None,
    source_name: str | None = None,
):
    """kernel.compile_for as Jitify compiled: errors are JitifyException too, and an include in
    a header that matches no file is dropped with one warning (_dropping). ``options``
    as a tuple (jitify_options adds CuPy's marker); (request, result) as compile_for."""
    from . import errors
    from .headers.options import parse_options
    from .kernel import compile_for

    args = (arch, target, names, source_dir)
    try:
        try:
            return compile_for(source, parse_options(options), *args, index_id, source_name)
        except errors.MissingHeaderCompileError as e:
            stubs = _dropping(e)
            opts = parse_options(options + ("-isystem", stubs))
            # no warm index entry: it would name a directory that lives as long as this process
            return _annotated(e, lambda: compile_for(source, opts, *args, None, source_name))
    except errors.CompileError as e:
        raise errors.as_jitify(e) from None


def dropped_message(missing) -> str:
    """One line per dropped include: its name as written and its include chain."""
    return "\n".join(
        f"  #include {spelled(m)} (from {' -> '.join(map(str, m.chain))})" for m in missing
    )


def spelled(m) -> str:
    return f"<{m.name}>" if m.angled else f'"{m.name}"'


def _dropping(error) -> str:
    """Jitify's leniency: the includes in headers that match no file, answered by empty headers
    in a directory searched after the user's (returned), after one warning naming them. A
    missing include in the source itself is the user's own mistake: ``error`` is raised."""
    import warnings

    missing = tuple(error.missing)
    if not missing or any(_by_source(m) for m in missing):
        raise error
    warnings.warn(
        "cupy-rawcode: dropped include(s) that match no file, as Jitify did:\n"
        + dropped_message(missing),
        DroppedIncludeWarning,
        stacklevel=6,
    )
    return _stub_dir(m.name for m in missing)


def _annotated(error, compile_again):
    """compile_again(); if NVRTC still fails, its error names the dropped includes first."""
    try:
        return compile_again()
    except Exception as e:
        if not hasattr(e, "_msg"):
            raise
        e._msg = (
            "cupy-rawcode dropped include(s) that match no file, as Jitify did:\n"
            f"{dropped_message(error.missing)}\nand then NVRTC failed:\n{e._msg}"
        )
        raise


def _by_source(missing) -> bool:
    """Whether the source itself includes it (the chain's one step names the source, whatever
    name it has; a pre-include's step is "<pre-include>")."""
    return len(missing.chain) == 1 and missing.chain[0].file != "<pre-include>"


def _stub_dir(names) -> str:
    """A directory of empty headers under the given names, for this process."""
    import atexit
    import os
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="cupy-rawcode-dropped-")
    atexit.register(shutil.rmtree, d, True)
    for name in names:
        path = os.path.normpath(os.path.join(d, name))
        if not path.startswith(d + os.sep):  # an absolute or ../ name: not answerable here
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("// cupy-rawcode: an include that matched no file (jitify=True leniency)\n")
    return d
