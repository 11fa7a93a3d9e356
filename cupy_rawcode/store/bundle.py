"""Bundles: many cache entries in one read-only file an application can ship.

Layout: magic, 8-byte little-endian index length, JSON index {"entries": {key: [offset,
length]}}, then the entries' bytes back to back. Each entry is the self-validating bytes of
entry.py, so a damaged bundle can only cause misses; an unreadable index makes the whole
bundle empty, and a truncated one (entries the index places beyond the end of the file) or an
index entry that is no span (a damaged length, say) loses those entries, with one warning
naming the bundle; ``bundle info`` lists them as BROKEN.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..ground import ENTRY_LIMIT, json_data, open_regular  # a FIFO would block a read
from ..ground.errors import RawcodeError
from ..ground.fsutil import atomic_write
from ..ground.log import warn
from ..ground.regular import read_at
from .base import tally
from .readonly import RefusingStore

MAGIC = b"CUPY-RAWCODE-BUNDLE-1\n"
INDEX_LIMIT = 64 << 20  # a bundle's JSON index (about 100 bytes per entry)


class BundleError(RawcodeError, ValueError):
    """A bundle that cannot be read: not one, an unreadable index, or not a regular file."""


def write_bundle(path: str | os.PathLike, entries: Iterable[tuple[str, bytes]]) -> int:
    """Write ``(key, entry bytes)`` pairs to ``path`` atomically; returns the entry count."""
    index, blobs, offset = {}, [], 0
    for key, data in entries:
        if key in index:
            continue
        index[key] = [offset, len(data)]
        blobs.append(data)
        offset += len(data)
    head = json.dumps({"entries": index}, sort_keys=True).encode()
    atomic_write(
        Path(path), b"".join([MAGIC, len(head).to_bytes(8, "little"), head, *blobs]), mode=0o644
    )
    return len(index)


class Index:
    """A bundle's index: ``entries`` (key -> (absolute offset, length)) that the file holds, its
    ``size``, the keys ``cut`` off: placed beyond its end (a truncated bundle), and the ``bad``
    ones: key -> why its span is none (not two ints >= 0, or a length over ENTRY_LIMIT). A
    plain slotted class, as in every store module (a hit with bundles configured imports it)."""

    __slots__ = ("bad", "cut", "entries", "size")

    def __init__(
        self,
        entries: dict[str, tuple[int, int]],
        size: int,
        cut: list[str],
        bad: dict[str, str] | None = None,
    ):
        self.entries, self.size, self.cut = entries, size, cut
        self.bad = {} if bad is None else bad


def span_problem(span: object) -> str | None:
    """Why an index value is no entry's span (None when it is one): two ints >= 0, the length
    within ENTRY_LIMIT, as write_bundle writes them; damage makes it anything else."""
    if not (isinstance(span, list) and len(span) == 2 and all(type(v) is int for v in span)):
        return f"bad span {json.dumps(span)[:60]} in the index"
    if min(span) < 0:
        return f"bad span {span} in the index (negative)"
    if span[1] > ENTRY_LIMIT:
        return f"length {span[1]} in the index is over the limit of {ENTRY_LIMIT} bytes"
    return None


def read_index(path: str | os.PathLike) -> Index:
    """The bundle's Index; raises BundleError when unreadable, not a regular file (a link to
    one is followed: a bundle is the user's file) or its index is larger than INDEX_LIMIT."""
    try:
        fd, st = open_regular(os.fspath(path))
        try:
            size = st.st_size
            head = read_at(fd, 0, len(MAGIC) + 8)
            if not head.startswith(MAGIC) or len(head) < len(MAGIC) + 8:
                raise BundleError("not a cupy-rawcode bundle")
            hlen = int.from_bytes(head[len(MAGIC) :], "little")
            if hlen > size:
                raise BundleError("index length beyond the end of the file")
            if hlen > INDEX_LIMIT:
                raise BundleError(f"index larger than {INDEX_LIMIT} bytes")
            raw = json_data(read_at(fd, len(head), hlen))
        finally:
            os.close(fd)
    except OSError as e:
        raise BundleError(e.strerror or str(e)) from None
    if raw is None:
        raise BundleError("unreadable index (not JSON, or nested too deeply)")
    base = len(MAGIC) + 8 + hlen
    index, cut, bad = {}, [], {}
    entries = raw.get("entries") if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        raise BundleError("index has no entries")
    for key, span in entries.items():
        problem = span_problem(span)
        if problem is not None:
            bad[key] = problem
        elif base + span[0] + span[1] > size:
            cut.append(key)
        else:
            index[key] = (base + span[0], span[1])
    return Index(index, size, sorted(cut), dict(sorted(bad.items())))


def damage(index: Index) -> str | None:
    """Words for every entry the index names that cannot be read (None when there is none):
    how many lie beyond the bundle's end (truncated), and how many index entries are no span."""
    total = len(index.entries) + len(index.cut) + len(index.bad)
    words = []
    if index.cut:
        words.append(
            f"truncated: {len(index.cut)} of {total} entries lie beyond its end (byte {index.size})"
        )
    if index.bad:
        words.append(f"{len(index.bad)} of {total} index entries malformed (no valid span)")
    return "; ".join(words) or None


class BundleStore(RefusingStore):
    """A read-only store over one bundle file; the index is read on first use (or given: the
    ``entries`` of an Index already read). Written only by ``write_bundle``."""

    on_disk = True

    def __init__(self, path: str | os.PathLike, entries: dict | None = None):
        self.path = os.fspath(path)
        self.name = f"bundle:{os.path.basename(self.path)}"
        self._index: dict | None = entries
        self.tally = tally(self.name)  # this process's reads (counters.py)

    def _entries(self) -> dict:
        if self._index is None:
            try:
                found = read_index(self.path)
            except BundleError as e:
                warn("cupy-rawcode: ignoring the bundle %s (%s)", self.path, e)
                self._index = {}
            else:
                self._index = found.entries
                damaged = damage(found)
                if damaged:
                    warn("cupy-rawcode: the bundle %s: %s; those are misses", self.path, damaged)
        return self._index

    def keys(self) -> list[str]:
        return sorted(self._entries())

    def get(self, key: str) -> bytes | None:
        data = self._read(key)
        if data is None:
            self.tally["misses"] += 1
        else:
            self.tally["hits"] += 1
            self.tally["bytes_read"] += len(data)
        return data

    def _read(self, key: str) -> bytes | None:
        span = self._entries().get(key)
        if span is None:
            return None
        try:
            fd, _ = open_regular(self.path)  # replaced by a FIFO since its index was read
            try:
                data = read_at(fd, span[0], span[1])
            finally:
                os.close(fd)
        except OSError:
            return None
        return data if len(data) == span[1] else None

    @property
    def location(self) -> str:
        return self.path

    def __len__(self) -> int:
        return len(self._entries())

    def close(self) -> None:
        """Forget the index: the next use reads the file again (it may have been rebuilt)."""
        self._index = None
