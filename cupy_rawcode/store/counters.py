"""The hit and miss counters' folded total, ``stats/counts``: the counter files (``stats/hits``,
``stats/misses``: one byte per event, appended by directory.py) are folded into it once one
grows past FOLD_BYTES, at each prune, and ``read_counts`` gives what was folded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

FOLD_BYTES = 4096  # a counter file larger than this is folded into stats/counts


def _fold_counters(root: Path) -> None:
    """Move the hit and miss counters' bytes into stats/counts once they grow (best effort: an
    append racing with the move may be lost)."""
    import json

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
            counts = read_counts(root)
            counts[name] = counts.get(name, 0) + n
            from ..ground.fsutil import atomic_write

            atomic_write(stats / "counts", json.dumps(counts).encode())
            os.unlink(moved)
        except (OSError, ValueError):
            continue


def read_counts(root: Path) -> dict:
    """The folded hit and miss counts ({} when none were folded)."""
    import json

    from ..ground.regular import RECORD_LIMIT, read_cache_file

    raw = read_cache_file(root / "stats" / "counts", RECORD_LIMIT)
    try:
        data = json.loads(raw if raw is not None else b"{}")
        return {k: int(data[k]) for k in ("hits", "misses") if k in data}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
