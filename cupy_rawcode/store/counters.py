"""The counts a cache directory keeps in ``stats/counts`` (a JSON object, rewritten under the
ledger's lock): the hit and miss counters' folded total (the counter files ``stats/hits``,
``stats/misses``: one byte per event, appended by ``append``, are folded into it once one
grows past FOLD_BYTES, at each prune; ``read_counts`` gives what was folded), and ``levels``:
each level's hits, misses, errors, timeouts, writes and bytes (``tally``, ``read_levels``)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from ..ground import RECORD_LIMIT, json_data, read_cache_file, refused
from ..ground.fsutil import atomic_write, make_private_dirs
from ..ground.regular import open_own
from .base import FIELDS, _tallies, tally
from .layout import claim, owned, real_dir
from .ledger import locked

__all__ = ["FIELDS", "keep_tallies", "merge_levels", "read_levels", "tally", "zero_tallies"]

FOLD_BYTES = 4096  # a counter file larger than this is folded into stats/counts


def _fold_counters(root: Path) -> None:
    """Move the hit and miss counters' bytes into stats/counts once they grow (best effort: an
    append racing with the move may be lost)."""
    stats = root / "stats"
    for name in ("hits", "misses"):
        path, moved = stats / name, stats / f".{name}.fold"
        try:
            if not os.path.lexists(moved):
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or st.st_size <= FOLD_BYTES:
                    continue
                os.rename(path, moved)
            st = os.lstat(moved)
            n = st.st_size if stat.S_ISREG(st.st_mode) else 0
            _update(root, lambda counts, name=name, n=n: {**counts, name: _count(counts, name) + n})
            os.unlink(moved)
        except (OSError, ValueError):
            continue


def _count(counts: dict, name: str) -> int:
    """A folded count of stats/counts (0 when missing or not a whole number)."""
    n = counts.get(name, 0)
    return n if type(n) is int and n >= 0 else 0


def _read(root: Path) -> dict:
    """The object kept in stats/counts ({} when missing, damaged or no JSON object: json_data)."""
    data = json_data(read_cache_file(root / "stats" / "counts", RECORD_LIMIT))
    return data if isinstance(data, dict) else {}


def read_counts(root: Path) -> dict:
    """The folded hit and miss counts ({} when none were folded)."""
    data = _read(root)
    return {k: _count(data, k) for k in ("hits", "misses") if k in data}


# ---------------------------------------------------------------- per-level counts
#
# Each level of the store (memory, disk, each bundle, each remote) counts what it did in this
# process in a ``tally`` (base.py: small enough for the warm-hit path's imports). They are
# added to ``levels`` in stats/counts (``keep_tallies``) when the process exits and when the
# counts are read, so ``cache stats`` shows every process's counts. A count is best effort, as
# the hit counter is: threads racing on one level may lose an increment, and a killed process
# loses what it had not written.

LOCAL = ("memory", "disk", "bundle")  # level names (before a ":" or " (read-only)") kept here


def zero_tallies() -> None:
    """Start this process's tallies again from 0 (``cache stats -z``)."""
    for t in list(_tallies.values()):
        for field in t:
            dict.__setitem__(t, field, 0)  # bookkeeping: even when uncounted


def counts_of(value) -> dict[str, int]:
    """One level's counts with every field of FIELDS, from a mapping of them (a Levels' counts
    are one); a field missing or not a whole number counts 0."""
    out = {}
    for field in FIELDS:
        n = value.get(field, 0) if isinstance(value, dict) else 0
        out[field] = n if type(n) is int and n >= 0 else 0
    return out


def _by_name(mapping) -> list:
    """(level name, counts) pairs from a mapping of them, or from ``Levels.stats()``'s plain
    data (``{"levels": [{"level": name, "hits": ...}, ...]}``: two levels of one name add up)."""
    rows = mapping.get("levels") if isinstance(mapping, dict) else None
    if isinstance(rows, list):
        return [(r["level"], r) for r in rows if isinstance(r, dict) and "level" in r]
    return list((mapping or {}).items())


def merge_levels(*mappings) -> dict[str, dict[str, int]]:
    """Level name -> counts (every FIELDS), summed over ``mappings``: each a mapping of level
    name -> counts (a dict) or ``Levels.stats()``'s plain data."""
    out: dict[str, dict[str, int]] = {}
    for mapping in mappings:
        for name, value in _by_name(mapping):
            row = out.setdefault(str(name), dict.fromkeys(FIELDS, 0))
            for field, n in counts_of(value).items():
                row[field] += n
    return out


def _base(name: str) -> str:
    return name.partition(" (")[0].partition(":")[0]


def is_local(name: str) -> bool:
    """Whether a level lives on this machine (memory, the directory, a bundle), else remote."""
    return _base(name) in LOCAL


def grouped(levels: dict) -> dict[str, dict]:
    """{"local": ..., "remote": ...}: the levels (name -> counts) by where they live, as
    ccache's ``-s`` groups its storages: local in look-up order (memory, disk, bundles by
    name), remote in the order given."""
    out: dict[str, dict] = {"local": {}, "remote": {}}
    local = sorted((n for n in levels if is_local(n)), key=lambda n: (LOCAL.index(_base(n)), n))
    for name in local:
        out["local"][name] = levels[name]
    for name, counts in levels.items():
        if not is_local(name):
            out["remote"][name] = counts
    return out


def read_levels(root: Path) -> dict[str, dict[str, int]]:
    """The per-level counts kept in ``root`` (every process's, since they were last zeroed)."""
    levels = _read(root).get("levels")
    if not isinstance(levels, dict):
        return {}
    return merge_levels({k: v for k, v in levels.items() if isinstance(v, dict)})


def keep_tallies(root: Path) -> None:
    """Add this process's tallies to the per-level counts in ``root``/stats/counts and start
    them again from 0 (best effort: a read-only cache keeps nothing)."""
    pending = {name: dict(t) for name, t in list(_tallies.items()) if any(t.values())}
    if not pending:
        return
    for name, t in pending.items():  # taken: counted again from 0 here
        row = _tallies[name]
        for field, n in t.items():
            dict.__setitem__(row, field, row[field] - n)  # bookkeeping: even when uncounted
    try:
        _update(root, lambda counts: {**counts, "levels": merge_levels(read_levels(root), pending)})
    except OSError as e:  # a ledger (its lock) that is a link, a FIFO, a directory: one warning
        refused(e.filename or root / "stats" / "size", e)
    except ValueError:
        pass


def _update(root: Path, change) -> None:
    """Rewrite stats/counts as ``change(its object)`` under the ledger's lock (ledger.py), so
    that processes adding their counts at once lose none of them."""
    with locked(root):
        atomic_write(root / "stats" / "counts", json.dumps(change(_read(root))).encode())


def append(root: Path, name: str, n: int) -> None:
    """Add ``n`` events to the counter file ``name`` (hits, misses) of the cache at ``root``
    (best effort: a read-only cache, or a directory that is not a cache (layout.py), counts
    nothing; a counter that is no regular file neither)."""
    try:
        if not claim(root):
            return
    except OSError:
        return
    path = root / "stats" / name
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    try:
        fd = open_own(path, flags)
    except FileNotFoundError:
        try:
            make_private_dirs(path.parent)
            if not real_dir(path.parent):
                return
            fd = open_own(path, flags)
        except OSError:
            return
    except OSError as e:
        refused(path, e)  # a link or a FIFO: one warning
        return
    try:
        os.write(fd, b"." * n)
    except OSError:
        pass
    finally:
        os.close(fd)


def keep(root: Path) -> None:
    """Write every level's tallies into ``root`` (best effort; only into a cache: layout.py)."""
    try:
        if not owned(root):
            return
    except OSError:
        return
    keep_tallies(root)
