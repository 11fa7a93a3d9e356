"""``jitify=True`` as Jitify compiled it, on the drop-in classes and under install(): what flow.py
does differently for it.

What Jitify did that a plain compile does not: an include in a header that matches no file is
dropped with one warning (Jitify commented it out and compiled on), and errors are also
``JitifyException``. CuPy's ``-DCUPY_USE_JITIFY`` keys such compiles apart.
"""

from __future__ import annotations

import warnings

from ..ground.errors import RawcodeWarning
from ..ground.fsutil import process_header_dir


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


def dropped_message(missing) -> str:
    """One line per dropped include: its name as written and its include chain."""
    return "\n".join(
        f"  #include {spelled(m)} (from {' -> '.join(map(str, m.chain))})" for m in missing
    )


def spelled(m) -> str:
    return f"<{m.name}>" if m.angled else f'"{m.name}"'


def dropping(missing) -> str | None:
    """Jitify's leniency: the includes in headers that match no file (``missing``), answered by
    empty headers in a directory searched after the user's (returned), after one warning naming
    them. A missing include in the source itself is the user's own mistake: None."""
    missing = tuple(missing)
    if not missing or any(_by_source(m) for m in missing):
        return None
    warnings.warn(
        "cupy-rawcode: dropped include(s) that match no file, as Jitify did:\n"
        + dropped_message(missing),
        DroppedIncludeWarning,
        stacklevel=8,
    )
    return _stub_dir(m.name for m in missing)


def annotate(e: BaseException, missing: tuple) -> None:
    """A compile that failed after the includes of ``missing`` were dropped: its message
    (NVRTC's) names the dropped includes first."""
    if hasattr(e, "_msg"):
        e._msg = (
            "cupy-rawcode dropped include(s) that match no file, as Jitify did:\n"
            f"{dropped_message(missing)}\nand then NVRTC failed:\n{e._msg}"
        )


def _by_source(missing) -> bool:
    """Whether the source itself includes it (the chain's one step names the source, whatever
    name it has; a pre-include's step is "<pre-include>")."""
    return len(missing.chain) == 1 and missing.chain[0].file != "<pre-include>"


def _stub_dir(names) -> str:
    """A directory of empty headers under the given names, for this process. Each is empty for
    an include in a header only: the source's own include of the same name (``__INCLUDE_LEVEL__``
    1, NVRTC's as GCC's) still fails, as NVRTC says it, since Jitify dropped the header's."""
    return process_header_dir({n: _stub(n) for n in names}, "cupy-rawcode-dropped-")


def _stub(name: str) -> str:
    return (
        "// cupy-rawcode: an include that matched no file (jitify=True leniency)\n"
        "#if __INCLUDE_LEVEL__ <= 1\n"
        f'#error cannot open source file "{name}" (included by the source itself)\n'
        "#endif\n"
    )
