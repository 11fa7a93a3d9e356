"""Cache maintenance behind ``cupy-rawcode cache``, ``prebuild`` and ``bundle``: the cache
directory they work on, the bound a prune trims to, the keys prebuild records, and the entries
a bundle exports. What the commands print is cli/commands.py's."""

from __future__ import annotations

import os

from ..ground import RECORD_LIMIT, config, read_cache_file
from ..ground.errors import EntryError, RawcodeValueError
from ..ground.regular import open_own
from .directory import DirectoryStore
from .entry import decode
from .layout import cache_location, claim, foreign_message


def disk():
    """The configured cache directory's store."""
    return DirectoryStore(cache_location().path)


def prune_bound(disk, max_size: str | None) -> int | None:
    """The size a prune trims to: ``--max-size`` (its 0 means no bound), else the configured
    bound; None for no bound."""
    return disk.max_bytes if max_size is None else config.parse_size("--max-size", max_size) or None


def record_prebuilt(keys: list[str]) -> str | None:
    """Append to <cache>/prebuilt.keys, which ``bundle export --prebuilt`` reads: only in a
    directory the cache claims (store/layout.py), never through a link or into a FIFO. Returns
    why nothing was recorded, or None."""
    root = disk().root
    try:
        if not claim(root):
            return f"prebuilt keys not recorded: {foreign_message(root)}"
        fd = open_own(root / "prebuilt.keys", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a", encoding="ascii") as f:
            f.write("".join(k + "\n" for k in keys))
    except OSError as e:
        return f"cannot record prebuilt keys ({e})"
    return None


def prebuilt_keys(root) -> list[str]:
    """The keys prebuild recorded in ``root``, each once, in order; ValueError when none was."""
    raw = read_cache_file(root / "prebuilt.keys", 32 * RECORD_LIMIT)
    try:
        wanted = (raw or b"").decode("ascii").split()
    except UnicodeDecodeError:
        raw = None
    if raw is None:
        raise RawcodeValueError(
            f"no prebuild recorded in {root}; run cupy-rawcode prebuild first, or export everything"
        ) from None
    return list(dict.fromkeys(wanted))


def exportable(disk, keys: list[str]) -> tuple[list[tuple[str, bytes]], int, dict[str, dict]]:
    """(the (key, bytes) of ``keys`` a bundle ships, how many were missing or broken, and each
    shipped entry's metadata: read once, as its check decoded it)."""
    entries, skipped, metas = [], 0, {}
    for key in keys:
        data = disk.get(key)
        try:
            metas[key] = decode(key, data or b"")[1]
        except EntryError:
            skipped += 1  # missing (evicted) or broken: never shipped
            continue
        entries.append((key, data))
    return entries, skipped, metas
