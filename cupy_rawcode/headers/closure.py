"""The closure of a source: every header an NVRTC compile reads, where it was found, and why.

The value types of a closure (Closure, Header, Missing, Step) and the errors of resolving one.
resolver.py finds a closure in fast mode (fast.py) or exact mode (exact.py); the include
search itself lives in search.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..ground import deferred

# the errors of resolving live with the package's other errors (errors.py: the ground layer)
from ..ground.errors import MissingHeaderError as MissingHeaderError
from ..ground.errors import ResolveError as ResolveError
from ..ground.errors import UnreadableHeaderError as UnreadableHeaderError
from ..toolkit.cudaheaders import missing_hint
from ..toolkit.discovery import SearchDir
from .moved import new_name
from .standard import NO_FLOOR, Floor

header_search = deferred("cupy_rawcode.headers.search")  # the toolchain: a message only

MAIN = "<source>"


class Step(NamedTuple):
    file: str  # logical name of the including file, or "<source>"
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class Header(NamedTuple):
    logical: str
    path: str
    root: str
    digest: str
    chain: tuple[Step, ...]  # outermost first; the last step is the #include that pulled it in

    def why(self) -> str:
        return " -> ".join(str(s) for s in self.chain)


class Missing(NamedTuple):
    name: str
    angled: bool
    chain: tuple[Step, ...]
    searched: tuple[str, ...]
    conditional: bool  # True when NVRTC may never reach it (inside #if, or a __has_include probe)

    def message(self) -> str:
        """NVRTC's words for a missing include (so messages match CuPy's), the include chain
        and the directories searched."""
        spelled = f"<{self.name}>" if self.angled else f'"{self.name}"'
        dirs = "\n".join(f"    {d}" for d in self.searched) or "    (none)"
        chain = "\n".join(f"  included from {s}" for s in reversed(self.chain))
        said = _hint(self.name, self.searched)
        hint = f"\n  ({said})" if said else ""
        what = (
            "; ".join(header_search.not_files(self.name, self.searched))
            or f"header {spelled} not found"
        )
        return f'cannot open source file "{self.name}": {what}\n{chain}\n  searched:\n{dirs}{hint}'


def _hint(name: str, searched: tuple[str, ...] = ()) -> str:
    """What to do about a missing header that comes with a known package."""
    if name.startswith("cupy/cub/"):
        rest = name.removeprefix("cupy/cub/").removeprefix("cub/")
        return (
            "CuPy 13 and later bundle CUB as <cub/...>, and CuPy 12's <cupy/cub/...> copy is "
            f"gone: write <cub/{rest}> instead"
        )
    if name.startswith("cupy/"):
        return (
            "<cupy/...> headers come with CuPy: install cupy-cuda12x or cupy-cuda13x; "
            "cupy-rawcode searches CuPy's include directory when CuPy is installed"
        )
    return missing_hint(name, searched)  # an NVIDIA wheel ships it: name the wheel


@dataclass
class Closure:
    """What a compile reads: headers in discovery order plus includes that matched nothing."""

    headers: tuple[Header, ...]
    missing: tuple[Missing, ...]
    mode: str
    search: tuple[SearchDir, ...]
    file_ids: dict[str, tuple] = field(default_factory=dict, repr=False)  # path -> FileId
    errors: tuple[str, ...] = ()  # live #error directives (exact mode)
    floor: Floor = NO_FLOOR  # the lowest C++ standard its headers accept (fast mode)
    # std templates the files specialize, and "::name" for the names of jitify=True's global
    # blocks they declare themselves (toolkit/jitify_names.py) (fast mode)
    specialized: tuple[str, ...] = ()
    scans: dict[str, Any] = field(default_factory=dict, repr=False)  # path -> FileScan (fast)
    # (fast) files a quoted include of the main source looked for in its directory, not found
    absent: tuple[str, ...] = ()
    # (fast) every path the header search looked at and found no file at: one that appears
    # there while NVRTC runs may be read in place of a keyed header (orchestrator/compiling.py)
    probed: tuple[str, ...] = ()
    # (fast) those of them in the program's own directories, which the manifest stamps absent
    watched: tuple[str, ...] = ()
    # (fast) computed includes ("file:line: #include H(x)") whose macro some file defines in a
    # way the scan cannot expand: the header NVRTC reads there is unknown, so is the key
    unresolved: tuple[str, ...] = ()
    # (fast) (directory, name, whether found there) of every relative name with a '..' looked
    # up: read past a symbolic link it may name another file elsewhere (key/portable.py)
    dotdots: tuple[tuple[str, str, bool], ...] = ()

    def digests(self) -> list[tuple[str, str]]:
        """(logical name, content digest), sorted: the closure's part of the cache key."""
        return sorted((h.logical, h.digest) for h in self.headers)

    def raise_for_missing(self) -> None:
        """MissingHeaderError for the includes NVRTC will meet that match no file; with them,
        or alone, those of moved headers (moved.py) inside an #if: answered by their new names
        before NVRTC runs, whether or not it reaches them (a compile that fails on one each time
        would cost every call)."""
        live = [m for m in self.missing if not m.conditional]
        if all(new_name(m.name) is not None for m in live):
            live += [m for m in self.missing if m.conditional and new_name(m.name) is not None]
        if live:
            raise MissingHeaderError("\n".join(m.message() for m in live), tuple(live))
