"""File stamps: the (size, mtime_ns, inode, ctime_ns) of each file an answer kept on disk depended
on, and the check that they all still hold. A file that must not exist is stamped with Nones.
The ctime is what a rewrite in place cannot hide: ``os.utime`` sets the mtime back, never the
ctime (the kernel sets it on every change, as ccache relies on too).

A stamps record keeps the paths grouped by directory, ``{"dirs": [[directory, [name, ...]], ...],
"digest": hex}``, and one SHA-256 of every file's stamp in order: parsing it costs little (no
number per file), and checking it is one ``fstatat`` per file, relative to its directory, then
one digest.

Stamps are taken here, when a compile reads the files; they are checked, and the records that
hold them read (``StampedRecord``, ``check_stamps``), by the ground package itself, which a warm
hit loads anyway: this module is off a warm hit's path.
"""

from __future__ import annotations

import os

from . import ABSENT, WIDTH, stamps_digest, stamps_now

_TICK_NS = 10_000_000  # how far a file's time may lag the real time (Linux's coarse clock: 1-10 ms)
_SECONDS_TICK_NS = 2_000_000_000  # on a file system that keeps whole (FAT: even) seconds


def values_of(st: os.stat_result, path: str = "") -> tuple[int, int, int, int]:
    """The stamp values of a stat result (size, mtime_ns, inode, ctime_ns); of a directory's own
    entry (``path`` ending ``/.``: a directory the header search skipped, or an ``-I`` read
    through a link) its inode alone, as ground.stamps_now checks it: what matters is that it is
    still that directory, not what it holds (an editor's swap file there is no change)."""
    if path.endswith("/."):
        return (0, 0, st.st_ino, 0)
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def absent(path: str) -> tuple:
    """The stamp of a file that must not exist."""
    return (path,) + (None,) * WIDTH


def stamp(path: str) -> tuple:
    """(path, size, mtime_ns, inode, ctime_ns) now, or ``absent(path)`` when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return absent(path)
    return (path, *values_of(st, path))


def take(file_ids) -> tuple[dict, list]:
    """(record, flat stamps) of (path, size, mtime_ns, inode, ctime_ns) tuples taken when the
    files were read: the record to store, and the values that ``merge`` combines with others."""
    names: dict[str, list] = {}
    values: dict[str, list] = {}
    for path, *vals in file_ids:
        head, name = os.path.split(path)
        names.setdefault(head, []).append(name)
        values.setdefault(head, []).extend(ABSENT if vals[0] is None else vals)
    dirs = [[d, n] for d, n in names.items()]
    flat = [v for d in names for v in values[d]]
    return {"dirs": dirs, "digest": stamps_digest(flat)}, flat


def merge(parts) -> dict:
    """One record of several (record, flat stamps) parts, checked as one."""
    dirs, flat = [], []
    for rec, values in parts:
        dirs += rec["dirs"]
        flat += values
    return {"dirs": dirs, "digest": stamps_digest(flat)}


def _paths(rec: dict) -> list[str]:
    """The recorded files' paths, in record order."""
    return [os.path.join(d, n) for d, names in rec["dirs"] for n in names]


def first_changed(part: tuple) -> str | None:
    """The first file of a (record, flat stamps) part whose stamp differs now from the one taken,
    else None: what a compile checks after NVRTC read the files (ccache's check)."""
    rec, taken = part
    now = stamps_now(rec["dirs"])
    for i, path in enumerate(_paths(rec)):
        if now[i * WIDTH : (i + 1) * WIDTH] != list(taken[i * WIDTH : (i + 1) * WIDTH]):
            return path
    return None


def may_lag(ctime_ns: int) -> int:
    """How far a file's ctime may lag the real time of its change: two seconds where the file
    system keeps whole seconds, else a tick of the kernel's coarse clock."""
    return _SECONDS_TICK_NS if ctime_ns % 1_000_000_000 == 0 else _TICK_NS


def changed_since(part: tuple, since_ns: int) -> str | None:
    """The first file of a (record, flat stamps) part that may have changed at or after
    ``since_ns`` (wall clock, ns) by its ctime, the clock's granularity allowed for; else None.
    A compile that read the files before they were stamped cannot tell which text it read (a
    directory's own entry, ``dir/.``, keeps no ctime: values_of)."""
    rec, taken = part
    for i, path in enumerate(_paths(rec)):
        ctime = taken[i * WIDTH + WIDTH - 1]
        if ctime >= 0 and ctime >= since_ns - may_lag(ctime):
            return path
    return None


def entries(rec: dict, values: list) -> tuple:
    """The (path, size, mtime_ns, inode, ctime_ns) tuples of a record and its flat stamps (as
    ``check`` or ``take`` gives them), ``absent`` for a file stamped missing: what ``take``
    was given, in the record's order (grouped by directory)."""
    out = []
    for i, path in enumerate(_paths(rec)):
        vals = tuple(values[i * WIDTH : (i + 1) * WIDTH])
        out.append(absent(path) if vals == ABSENT else (path, *vals))
    return tuple(out)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cupy_rawcode/

# the package's folders whose code never changes the key a kernel's inputs compile under:
# where entries are kept (store), how a kernel is launched (launch), CuPy's own compiles (hook:
# keyed by key/cupy.py, never through the warm index) and the commands (cli). Not stamped: a
# warm hit checks a third fewer files.
UNKEYED = ("cli", "hook", "launch", "store")


def package_stamps() -> list:
    """The stamps (``stamp``) of this package's directories and modules, every subpackage but
    UNKEYED's included: the code that computes keys (the warm index holds them,
    key/__init__.py)."""
    paths = []
    for d, subdirs, files in os.walk(_PACKAGE):
        keyed = [s for s in subdirs if d != _PACKAGE or s not in UNKEYED]
        subdirs[:] = sorted(s for s in keyed if os.path.isfile(os.path.join(d, s, "__init__.py")))
        paths.append(d)  # a module added or removed changes its directory
        paths += [os.path.join(d, n) for n in sorted(files) if n.endswith(".py")]
    return [stamp(p) for p in paths]
