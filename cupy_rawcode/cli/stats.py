"""What ``cupy-rawcode cache stats`` shows, as one JSON-able object (``collect``, printed by
``--json``: its keys are the stable schema SCHEMA) and as lines for people (``lines``): the
directory's files by kind, its entries stored and uncompressed, the hit and miss counts, and
each level's counts grouped local and remote, as ccache's ``-s`` groups its storages."""

from __future__ import annotations

from ..ground import deferred

counters = deferred("cupy_rawcode.store.counters")  # the counts: stats only
usage = deferred("cupy_rawcode.store.usage")  # scanning the directory: stats only

SCHEMA = 1  # raised when a key changes meaning or goes; new keys may be added within one

_LEVEL_WORDS = (  # (field, how the human output names it)
    ("hits", "hits"),
    ("misses", "misses"),
    ("errors", "errors"),
    ("timeouts", "timeouts"),
    ("writes", "writes"),
)


def collect(disk, *levels) -> dict:
    """The statistics of the cache directory ``disk`` (a DirectoryStore): the per-level counts
    every process kept there, merged with ``levels`` (counters.merge_levels: mappings of level
    name -> counts, or ``Levels.stats()``): counts kept nowhere else, such as a remote level's
    in a process whose stores do not tally (a store's own ``tally`` is kept already)."""
    found = usage.scan(disk.root)
    counts = disk.counts()  # writes this process's tallies first
    stored, plain, unread = usage.entry_sizes(found.files)
    by_kind = found.by_kind()
    merged = counters.merge_levels(counters.read_levels(disk.root), *levels)
    hits, misses = counts if counts is not None else (None, None)
    looked = (hits or 0) + (misses or 0)
    totals = {f: sum(c[f] for c in merged.values()) for f in counters.FIELDS}
    return {
        "schema": SCHEMA,
        "location": str(disk.root),
        "bound_bytes": disk.max_bytes or None,
        "size_bytes": found.total,
        "files": {kind: {"count": n, "bytes": size} for kind, (n, size) in by_kind.items()},
        "entries": {
            "count": by_kind.get("entries", (0, 0))[0],
            "stored_bytes": stored,
            "uncompressed_bytes": plain,
            "ratio": round(plain / stored, 3) if stored else None,
            "unreadable": unread,
        },
        "hits": hits,
        "misses": misses,
        "hit_rate": round(hits / looked, 4) if hits is not None and looked else None,
        # the compile time of every kernel served, as its entry recorded it (0 for an entry
        # written before entries recorded it)
        "compile_seconds_saved": round(totals["saved_ms"] / 1000, 3),
        "levels": counters.grouped(merged),
        "totals": totals,
        "unreadable_files": [usage.described(path, e) for path, e in found.errors],
    }


def human(n: float) -> str:
    """Bytes as B, KiB, MiB or GiB."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"


def lines(stats: dict) -> list[str]:
    """``collect``'s statistics as ``cache stats`` prints them."""
    out = [f"location  {stats['location']}"]
    for kind, row in stats["files"].items():
        out.append(f"{kind:<9s} {row['count']} ({human(row['bytes'])})")
    bound = stats["bound_bytes"]
    limit = f"bound {human(bound)}" if bound else "no bound"
    out.append(f"size      {human(stats['size_bytes'])} in all ({limit})")
    e = stats["entries"]
    if e["count"]:
        ratio = f"{e['ratio']:.2f}x" if e["ratio"] else "-"
        out.append(
            f"stored    {human(e['stored_bytes'])} of entries, "
            f"{human(e['uncompressed_bytes'])} uncompressed ({ratio})"
        )
    if stats["hits"] is None:
        out.append("hits      not recorded")
    else:
        rate = f" ({100 * stats['hit_rate']:.0f}% hits)" if stats["hit_rate"] is not None else ""
        out.append(f"hits      {stats['hits']}\nmisses    {stats['misses']}{rate}")
    if stats["compile_seconds_saved"]:
        out.append(f"saved     {stats['compile_seconds_saved']:.1f} s of compiling")
    for group in ("local", "remote"):
        levels = stats["levels"][group]
        if levels:
            out.append(f"{group} storage:")
            out.extend(_level_line(name, c) for name, c in levels.items())
    return out


def _level_line(name: str, c: dict) -> str:
    """One level's counts on one line: the nonzero ones, and its bytes read and written."""
    words = [f"{c[f]} {w}" for f, w in _LEVEL_WORDS if c[f] or f in ("hits", "misses")]
    words.append(f"read {human(c['bytes_read'])}, written {human(c['bytes_written'])}")
    return f"  {name:<18s} " + ", ".join(words)
