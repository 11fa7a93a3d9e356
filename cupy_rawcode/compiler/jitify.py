"""``jitify=True`` as Jitify compiled it, on the drop-in classes and under install() (hook.py).

What Jitify did that a plain compile does not: an include in a header that matches no file is
dropped with one warning (Jitify commented it out and compiled on), and errors are also
``JitifyException``. CuPy's ``-DCUPY_USE_JITIFY`` keys such compiles apart.
"""

from __future__ import annotations

from ..ground.errors import RawcodeWarning


class DroppedIncludeWarning(RawcodeWarning, UserWarning):
    """A ``jitify=True`` compile dropped an include that matched no file, as Jitify did."""


# What CuPy's jitify=True adds to the options (compiler.py): no effect on the code, but it keys
# Jitify compiles apart from the others, in CuPy's cache and in ours alike.
JITIFY_MACRO = "-DCUPY_USE_JITIFY"
JITIFY_PREINCLUDE = "--pre-include=jitify_preinclude.h"  # as CuPy's Jitify compiled
# CuPy's jitify=True puts this line first in the source; its using-declarations bring a few
# cuda::std names into std, which then cannot be specialized there (toolkit/specializable.py).
_CUPY_WORKAROUND = "#include <cupy/cuda_workaround.h>\n"
_OWN_WORKAROUND = "#include <cupy_rawcode/jitify_workaround.h>\n"


def jitify_source(source: str) -> str:
    """The source a jitify=True compile runs: CuPy's workaround line answered by our shims
    (the same std names through a using-directive), on the same line."""
    if source.startswith(_CUPY_WORKAROUND):
        return _OWN_WORKAROUND + source[len(_CUPY_WORKAROUND) :]
    return source


def jitify_options(options: tuple[str, ...]) -> tuple[str, ...]:
    """The options a jitify=True compile runs with: as given, plus CuPy's marker and the header
    CuPy's Jitify pre-included into every compile (``__host__``, ``try`` and ``catch`` defined
    away: include/jitify_preinclude.h)."""
    added = tuple(o for o in (JITIFY_MACRO, JITIFY_PREINCLUDE) if o not in options)
    return options + added


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
    """program.compile_for as Jitify compiled: errors are JitifyException too, and an include in
    a header that matches no file is dropped with one warning (_dropping). ``options``
    as a tuple (jitify_options adds CuPy's marker); (request, result) as compile_for."""
    from ..ground import errors
    from ..headers.options import parse_options
    from .program import compile_for

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
    from ..ground.fsutil import process_header_dir

    stub = "// cupy-rawcode: an include that matched no file (jitify=True leniency)\n"
    return process_header_dir(dict.fromkeys(names, stub), "cupy-rawcode-dropped-")
