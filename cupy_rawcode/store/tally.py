"""Each store level's counts in this process (``tally``): a plain dict per level name, kept
here, on the warm-hit path's imports, and written out by counters.py."""

FIELDS = (
    "hits",
    "misses",
    "errors",
    "timeouts",
    "writes",
    "bytes_read",
    "bytes_written",
    "saved_ms",  # the compile time its hits saved: each entry's compile_seconds (wrappers.py)
)

_tallies: dict[str, dict[str, int]] = {}  # level name -> its counts, not written yet


def tally(name: str) -> dict[str, int]:
    """The counts of the level ``name`` in this process (one dict per name, shared by every
    store of that name): a store adds to its FIELDS, e.g. ``tally("redis")["timeouts"] += 1``."""
    found = _tallies.get(name)
    if found is None:
        found = _tallies.setdefault(name, dict.fromkeys(FIELDS, 0))
    return found
