"""Where a header path is chosen: the include search rules of nvcc/NVRTC, as pure functions.

- ``#include "x"``: the including file's own directory first (the main source's own directory is
  the directory of the program name: none unless a ``source_dir`` is given, as in CuPy), then the
  search list;
- ``#include <x>``: the search list only;
- ``#include_next``: the search list after the entry where the current file was found;
- search list: the CCCL roots (tag cccl), ``-I`` (tags user0..), ``-isystem`` (isys0..),
  then the other system roots of toolchain.py (cupy, cuda, curand, crt, shim): CuPy's order.
"""

import errno
import os
import stat
from typing import NamedTuple

from ..ground.stamps import absent, stamp, values_of
from ..toolkit.discovery import SearchDir, Toolchain
from ..toolkit.record import toolchain
from .options import Options, parse_options
from .paths import has_dotdot, joined, physical


class Found:
    """Where a header was found. (A slotted class, not a NamedTuple: a field named ``index``
    would shadow tuple.index.)"""

    __slots__ = ("index", "path", "rel", "tag")

    def __init__(self, path: str, index: int, tag: str, rel: str):
        self.path = path  # normalized absolute path
        self.index = index  # search-list index where found, or -1 for "the includer's directory"
        self.tag = tag  # root tag of the logical name
        self.rel = rel  # path relative to that root

    def __repr__(self) -> str:
        return f"Found({self.path!r}, {self.index}, {self.tag!r}, {self.rel!r})"

    @property
    def logical(self) -> str:
        return f"{self.tag}:{self.rel}"


def search_list(opts: Options, tc: Toolchain) -> tuple[SearchDir, ...]:
    """The full ordered search list, CuPy's: the CCCL roots, user -I, -isystem, then the other
    system roots. CuPy puts its CCCL's ``-I`` before the user's options, so a ``-I`` holding
    another CCCL (a CUDA 12 toolkit's ``include/``) is never mixed with it."""
    user = [SearchDir(f"user{i}", d, "user") for i, d in enumerate(opts.include_dirs)]
    isys = [SearchDir(f"isys{i}", d, "user") for i, d in enumerate(opts.isystem_dirs)]
    cccl = [d for d in tc.system_dirs if d.tag == "cccl"]
    rest = [d for d in tc.system_dirs if d.tag != "cccl"]
    return tuple(cccl + user + isys + rest)


class Context(NamedTuple):
    """Everything that decides where a header is found: options, toolchain, search list and the
    main source's own directory. Cheap to make: no header is read."""

    opts: Options
    toolchain: Toolchain
    dirs: tuple[SearchDir, ...]
    source_dir: str | None


def make_context(options=(), *, source_dir: str | None = None, header_sources=None) -> Context:
    opts = options if isinstance(options, Options) else parse_options(options)
    tc = toolchain(header_sources)
    sd = os.path.abspath(source_dir) if source_dir else None
    return Context(opts, tc, search_list(opts, tc), sd)


FILE, NOTHING, OTHER = 1, 0, 2  # what the memo says a path is: a file, nothing, anything else


def _is_file(path: str, memo: dict[str, int]) -> bool:
    """Whether ``path`` exists and is no directory (the search skips directories, as gcc's
    does). A FIFO or device counts as found: reading it is refused (regular.py) with the
    include chain, which says more than "not found". ``memo`` keeps what each path is: FILE,
    NOTHING (no such path: a file that appears there changes the answer, fast.py stamps it
    absent) or OTHER (a directory, a path that cannot be read)."""
    hit = memo.get(path)
    if hit is None:
        try:
            hit = OTHER if stat.S_ISDIR(os.stat(path).st_mode) else FILE
        except (FileNotFoundError, NotADirectoryError):
            hit = NOTHING
        except (OSError, ValueError):
            hit = OTHER
        memo[path] = hit
    return hit == FILE


def find(
    name: str,
    *,
    angled: bool,
    includer: Found | None,
    source_dir: str | None,
    dirs: tuple[SearchDir, ...],
    next_after: int | None = None,
    memo: dict[str, int] | None = None,
    own_dir: bool = True,
) -> Found | None:
    """Resolve one include the way NVRTC does; None when no file matches.

    ``includer`` is the file holding the directive (None for the main source);
    ``next_after`` is set for ``#include_next`` to the index where the includer was found;
    ``own_dir`` False (NVRTC's ``-no-source-include``) skips the includer's own directory.
    A header a ``..`` past a symbolic link reaches (paths.py) does not lie where its root and
    name say: it is named by its absolute path (tag "abs").
    """
    memo = {} if memo is None else memo
    if os.path.isabs(name):
        path = physical(name)
        return Found(path, -1, "abs", path.lstrip("/")) if _is_file(path, memo) else None
    start = 0
    if next_after is not None:
        start = next_after + 1 if next_after >= 0 else 0
    elif not angled and own_dir:
        own = None
        if includer is not None:
            own = os.path.dirname(includer.path)
            root_tag, root_rel_dir = includer.tag, os.path.dirname(includer.rel)
        elif source_dir is not None:
            own, root_tag, root_rel_dir = source_dir, "src", ""
        if own is not None:
            path = joined(own, name)
            if _is_file(path, memo):
                rel = os.path.normpath(os.path.join(root_rel_dir, name))
                return _named(path, -1, own, name, root_tag, rel)  # include_next: restarts
    for i in range(start, len(dirs)):
        path = joined(dirs[i].path, name)
        if _is_file(path, memo):
            return _named(path, i, dirs[i].path, name, dirs[i].tag, os.path.normpath(name))
    return None


def _named(path: str, index: int, directory: str, name: str, tag: str, rel: str) -> Found:
    """The Found of ``path``, reached as ``name`` in ``directory``: ``tag:rel`` where it lies
    there as spelled, else its absolute path (a ``..`` past a symbolic link led elsewhere)."""
    if has_dotdot(name) and path != os.path.normpath(os.path.join(directory, name)):
        return Found(path, index, "abs", path.lstrip("/"))
    return Found(path, index, tag, rel)


def looked_in(
    angled: bool,
    includer: Found | None,
    source_dir: str | None,
    dirs: tuple[SearchDir, ...],
    next_after: int | None = None,
    found: Found | None = None,
    own_dir: bool = True,
) -> list[tuple[str, str]]:
    """(directory, tag) of each place ``find`` looks in for a relative name, in order, up to
    and including the one that answered with ``found`` (all of them for None); the own
    directory is tagged as its includer, "src" for the main source's (or a -include's)."""
    out = []
    if next_after is None and not angled and own_dir:
        if includer is not None:
            out.append((os.path.dirname(includer.path), includer.tag))
        elif source_dir is not None:
            out.append((source_dir, "src"))
    if found is not None and found.index < 0:
        return out
    start = 0 if next_after is None or next_after < 0 else next_after + 1
    end = len(dirs) if found is None else found.index + 1
    return out + [(d.path, d.tag) for d in dirs[start:end]]


def empty_stamp(path: str) -> tuple:
    """The stamp (stamps.py) of a path the search looked at and found no file at, taken now, so
    that a file appearing there is seen: absent where nothing is; a directory's own entry,
    ``path/.``, its inode alone (the search skips it; a file put in its place changes it;
    nothing in it is read, so a file written there is no change and stamps.changed_since
    leaves it out); for what cannot be read (a symlink loop) its directory, whole (replacing
    an entry changes it); absent, which then never holds, where a file is there already."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return absent(path)
    except (OSError, ValueError):
        parent = os.path.dirname(path)
        try:
            return (parent, *values_of(os.stat(parent)))  # whole: replacing an entry changes it
        except OSError:
            return absent(path)
    if not stat.S_ISDIR(st.st_mode):
        return absent(path)
    own = os.path.join(path, ".")
    return (own, *values_of(st, own))


def not_files(name: str, searched_dirs) -> list[str]:
    """What each path an unanswered include names is, where it is there but no file ('PATH is a
    directory', 'PATH is a symlink loop'): the search skips those (as gcc's does), and "not
    found" alone would send the user looking for a file that exists."""
    paths = [physical(name)] if os.path.isabs(name) else [joined(d, name) for d in searched_dirs]
    out = []
    for path in dict.fromkeys(paths):
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except OSError as e:
            if e.errno == errno.ELOOP:
                out.append(f"{path} is a symlink loop")
            continue
        if is_dir:
            out.append(f"{path} is a directory")
    return out


def searched(
    angled: bool,
    includer: Found | None,
    source_dir: str | None,
    dirs: tuple[SearchDir, ...],
    next_after: int | None = None,
    own_dir: bool = True,
) -> list[str]:
    """The directories ``find`` looked in, for error messages."""
    return [d for d, _ in looked_in(angled, includer, source_dir, dirs, next_after, None, own_dir)]


def linked_stamps(opts: Options) -> list[tuple]:
    """The stamps of the -I directories spelled with a '..' (Options.linked_dirs): re-pointing
    a link before it moves them."""
    return [stamp(os.path.join(d, ".")) for d in opts.linked_dirs]


def closure_stamps(closure, ctx: Context, also=()) -> list[tuple]:
    """Every stamp a fast closure depends on (manifests, PCH prefixes): its headers as read,
    each path its search found empty or skipped (and ``also``: empty_stamp), and the -I
    directories read through a link."""
    ids = [(h.path, *closure.file_ids[h.path][1:]) for h in closure.headers]
    empty = dict.fromkeys((*closure.absent, *closure.watched, *also))
    return ids + [empty_stamp(p) for p in empty] + linked_stamps(ctx.opts)
