"""resolve(): the header closure of a source, found in fast mode (fast.py: every include in every
branch, a superset for the cache key) or exact mode (exact.py: conditions evaluated like
NVRTC)."""

from __future__ import annotations

from ..ground import deferred
from ..ground.inputs import check_source
from .closure import MAIN, Closure
from .fast import resolve_fast
from .search import make_context

exact_mode = deferred("cupy_rawcode.headers.exact")  # pcpp: imported only for exact mode


def resolve(
    source: str,
    options=(),
    *,
    exact: bool = False,
    arch: str | None = None,
    source_dir: str | None = None,
    header_sources=None,
    pre_includes: tuple[str, ...] = (),
    source_name: str | None = None,
) -> Closure:
    """The header closure of ``source`` under ``options`` (see module docstring);
    ``source_name`` (the file's name) names the source in include chains, else "<source>".

    Exact mode raises MissingHeaderError for a live include that matches nothing; fast mode
    records misses in ``Closure.missing`` (``raise_for_missing`` raises for unconditional ones).
    """
    check_source(source, source_name or MAIN)  # a NUL or lone surrogate: BadInputError, line:col
    ctx = make_context(options, source_dir=source_dir, header_sources=header_sources)
    if exact:
        return exact_mode.resolve_exact(
            source, ctx, arch=arch, pre_includes=pre_includes, main_name=source_name or MAIN
        )
    return resolve_fast(source, ctx, pre_includes=pre_includes, main_name=source_name or MAIN)
