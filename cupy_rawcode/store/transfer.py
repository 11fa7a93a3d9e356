"""Bulk transfer between the local cache and the remote levels, keyed by entry keys: ``pull``
fetches every key the local store lacks from the remote levels in order (bulk per level, what
one level lacks asked of the next), ``push`` sends local entries to every writable remote level.

Every entry is validated (entry.decode) before it is written anywhere: a damaged entry in a bulk
answer is a miss, never bytes on disk. A level that fails mid-transfer warns once per process
(remote.warn_failed) and is left for the rest of the transfer; the others go on. ``pull_into``
and ``push_from`` take the layered store a compile uses (make_store) and pick the disk level and
the remote ones from it.

An entry may name its closure record (key/portable.py) in its metadata (CLOSURE_RECORD): a pull
or a push of entries takes the records they name along with them (``PullSummary.records``,
``PushSummary.records``), so that a new process keys them without resolving headers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ground.errors import RawcodeValueError
from .base import Store, uncounted
from .entry import CLOSURE_RECORD, decode

CHUNK = 128  # keys asked of a level in one bulk call (also how often progress is told)
LOCAL = ("memory", "disk")  # level names that are no source of a pull nor target of a push

Progress = Callable[[int, int], None]  # (done, total): keys settled so far, keys asked


@dataclass
class PullSummary:
    """What a pull did: keys asked (distinct), already held locally, fetched from each level
    and stored (by location, in look-up order), missing everywhere (damaged copies count as
    missing), damaged copies seen, bytes written locally, seconds taken, levels that failed,
    the closure records the entries name that were fetched along with them (counted apart),
    and the entries and records fetched that the destination did not store (a full or
    read-only disk: never counted as fetched)."""

    asked: int = 0
    local: int = 0
    fetched: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    damaged: int = 0
    bytes: int = 0
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)
    records: int = 0
    not_stored: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for JSON."""
        return dict(self.__dict__)


@dataclass
class PushSummary:
    """What a push did: keys asked (distinct, valid locally), entries sent to each level and
    entries it already held (by location), levels skipped as read-only, levels that failed,
    local entries missing or damaged (not sent), bytes sent, seconds taken, and the closure
    records the entries name that were sent along with them (to any level, counted apart)."""

    asked: int = 0
    sent: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    read_only: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unreadable: int = 0
    bytes: int = 0
    seconds: float = 0.0
    records: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for JSON."""
        return dict(self.__dict__)


def _meta(key: str, data: bytes) -> dict | None:
    """The metadata of the entry of ``key`` in ``data``, or None: no valid entry of ``key``."""
    try:
        return decode(key, data)[1]
    except ValueError:
        return None


def _record_of(key: str, meta: dict) -> str | None:
    """The key of the closure record an entry's metadata names (CLOSURE_RECORD), or None."""
    name = meta.get(CLOSURE_RECORD)
    if not isinstance(name, str) or len(name) != 64 or name == key:
        return None
    return name if all(c in "0123456789abcdef" for c in name) else None


def named_record(key: str, data: bytes) -> str | None:
    """The key of the closure record the entry of ``key`` names, or None: it names none, or the
    bytes are no valid entry of ``key``."""
    meta = _meta(key, data)
    return None if meta is None else _record_of(key, meta)


def named_in(metas: dict[str, dict], skip: set[str] | frozenset) -> list[str]:
    """The closure records the entries of ``metas`` (key -> metadata) name, each once, in
    order, but those in ``skip`` (keys transferred already)."""
    names = (_record_of(key, meta) for key, meta in metas.items())
    return [n for n in dict.fromkeys(names) if n is not None and n not in skip]


def records_named(
    entries: Iterable[tuple[str, bytes]], skip: set[str] | frozenset = frozenset()
) -> list[str]:
    """The closure records the ``(key, bytes)`` entries name, each once, in order, but those in
    ``skip``."""
    metas = {key: meta for key, data in entries if (meta := _meta(key, data)) is not None}
    return named_in(metas, skip)


def _chunks(keys: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(keys), CHUNK):
        yield list(keys[start : start + CHUNK])


def _failed(level: Store, error: BaseException, names: list[str]) -> None:
    """A level that raised: one warning per process and level, and it is left out."""
    from .remote import url_of, warn_failed

    warn_failed(level.name, level.location, error, url=url_of(level))
    names.append(level.location)


def _answered(level: Store, chunk: list[str]) -> dict[str, bytes]:
    """What ``level.get_many(chunk)`` holds of the keys asked, and nothing else: a level (a
    ``module:Class`` one is anyone's code) that answers a key it was not asked for, such as a
    path outside the cache, never gets it written anywhere."""
    asked = set(chunk)
    return {key: data for key, data in level.get_many(chunk).items() if key in asked}


def held_entries(store: Store, keys: Sequence[str], metas: dict | None = None) -> dict[str, bytes]:
    """The valid entries of ``keys`` that ``store`` holds (a damaged one is not held); their
    metadata go to ``metas`` when given (each entry is decoded once)."""
    held: dict[str, bytes] = {}
    for chunk in _chunks(keys):
        for key, data in _answered(store, chunk).items():
            meta = _meta(key, data)
            if meta is not None:
                held[key] = data
                if metas is not None:
                    metas[key] = meta
    return held


def stored(store: Store, items: Mapping[str, bytes]) -> set[str]:
    """The keys of ``items`` that ``store`` holds now at their size (Store.sizes, else read
    back, uncounted): a write that a full or read-only disk dropped is never counted as done."""
    sizes = store.sizes(items)
    if sizes is None:
        with uncounted():
            sizes = {key: len(data) for key, data in store.get_many(items).items()}
    return {key for key, data in items.items() if sizes.get(key) == len(data)}


def pull(
    keys: Iterable[str],
    sources: Iterable[Store],
    destination: Store,
    progress: Progress | None = None,
    records: bool = True,
) -> PullSummary:
    """Fetch every one of ``keys`` that ``destination`` (the local disk store) does not hold
    valid from ``sources`` in order, and write it there, with the closure records the entries
    name (``records``); only what the destination then holds counts as fetched (``stored``),
    the rest is ``not_stored``. ``progress(done, total)`` is called with non-decreasing
    counts, the last time with ``done == total``."""
    start = time.monotonic()
    wanted = list(dict.fromkeys(keys))
    summary = PullSummary(asked=len(wanted))
    total = len(wanted)
    metas: dict[str, dict] = {}
    held = held_entries(destination, wanted, metas)
    asked = set(wanted)
    named = named_in(metas, asked) if records else []
    remaining = [key for key in wanted if key not in held]
    summary.local = done = total - len(remaining)
    if progress:
        progress(done, total)
    for level in sources:
        summary.fetched.setdefault(level.location, 0)
        if not remaining:
            continue
        lacking: list[str] = []
        for chunk in _chunks(remaining):
            got: dict[str, bytes] = {}
            if level.location not in summary.failed and level.up():
                try:
                    got = _answered(level, chunk)
                except Exception as e:
                    _failed(level, e, summary.failed)
                if not level.up() and level.location not in summary.failed:
                    # one that handles its own failures (Redis) warned, and rests now
                    summary.failed.append(level.location)
            metas = {k: m for k, data in got.items() if (m := _meta(k, data)) is not None}
            good = {key: got[key] for key in metas}
            if records:
                named += named_in(metas, asked)
            summary.damaged += len(got) - len(good)
            kept: set[str] = set()
            if good:
                destination.put_many(good)
                kept = stored(destination, good)
            summary.fetched[level.location] += len(kept)
            summary.not_stored += len(good) - len(kept)
            summary.bytes += sum(len(good[key]) for key in kept)
            lacking += [key for key in chunk if key not in good]
            done += len(good)
            if progress and good:
                progress(done, total)
        remaining = lacking
    summary.missing = len(remaining)
    if named:  # the closure records the entries name: those the destination lacks
        more = pull(named, sources, destination, records=False)
        summary.records = sum(more.fetched.values())
        summary.not_stored += more.not_stored
    if progress:
        progress(total, total)
    summary.seconds = time.monotonic() - start
    return summary


def _all_keys(source: Store) -> list[str]:
    """Every key ``source`` holds: a directory store lists its entries."""
    entries = getattr(source, "entries", None)
    if entries is None:
        raise RawcodeValueError(f"cannot list the entries of {source!r}: name the keys to push")
    return sorted(info.key for info in entries())


def unmatched(level: Store, held: Mapping[str, bytes], verify: bool = False) -> dict[str, bytes]:
    """The entries of ``held`` (valid here) to send to ``level``: all where it cannot tell sizes
    cheaply (Store.sizes: None), else those it lacks or holds at another size. ``verify``: those
    it holds at the same size are read back too, and sent when damaged (other bytes that are no
    valid entry of the key, as a flipped bit or another key's entry of that length); without
    it a push reads no entry (a damaged copy is a miss that the next compile of it replaces)."""
    sizes = level.sizes(held)
    if sizes is None:
        return dict(held)
    if not verify:
        return {key: data for key, data in held.items() if sizes.get(key) != len(data)}
    same = [key for key, data in held.items() if sizes.get(key) == len(data)]
    with uncounted():
        there = level.get_many(same) if same else {}
    return {key: data for key, data in held.items() if not _matches(key, data, there.get(key))}


def _matches(key: str, here: bytes, there: bytes | None) -> bool:
    """Whether ``there`` (a level's copy) serves as well as ``here``: the same bytes, or another
    valid entry of ``key`` (another machine's compile of it)."""
    return there is not None and (there == here or _meta(key, there) is not None)


def push(
    keys: Iterable[str] | None,
    source: Store,
    destinations: Iterable[Store],
    progress: Progress | None = None,
    records: bool = True,
    verify: bool = False,
) -> PushSummary:
    """Send the valid entries of ``keys`` (None: every entry of ``source``, a directory store)
    from ``source`` to every writable level of ``destinations``; a read-only level is never
    written, and an entry a level already holds at its size is not sent again (``verify``:
    read back, and a damaged copy replaced: ``unmatched``); the closure records the entries
    name go too (``records``). ``progress(done, total)`` counts keys, as pull's does."""
    start = time.monotonic()
    wanted = list(dict.fromkeys(_all_keys(source) if keys is None else keys))
    summary = PushSummary()
    targets = []
    for level in destinations:
        if level.read_only:
            summary.read_only.append(level.location)
        else:
            targets.append(level)
            summary.sent[level.location] = summary.present[level.location] = 0
    total = len(wanted)
    named: list[str] = []
    asked = set(wanted)
    for n, chunk in enumerate(_chunks(wanted)):
        metas: dict[str, dict] = {}
        held = held_entries(source, chunk, metas)
        if records:
            named += named_in(metas, asked)
        summary.unreadable += len(chunk) - len(held)
        summary.asked += len(held)
        for level in targets:
            if level.location in summary.failed or not level.up() or not held:
                continue
            try:
                send = unmatched(level, held, verify)
                level.put_many(send)
            except Exception as e:
                _failed(level, e, summary.failed)
                continue
            if not level.up():  # one that handles its own failures (Redis) warned, and rests
                summary.failed.append(level.location)
                continue
            summary.present[level.location] += len(held) - len(send)
            summary.sent[level.location] += len(send)
            summary.bytes += sum(map(len, send.values()))
        if progress:
            progress(min(total, (n + 1) * CHUNK), total)
    if named:
        done = push(list(dict.fromkeys(named)), source, targets, records=False, verify=verify)
        summary.records = sum(done.sent.values())
    if progress and not wanted:
        progress(0, 0)
    summary.seconds = time.monotonic() - start
    return summary


def split_levels(store: Any) -> tuple[Store, list[Store]]:
    """(the disk level, the remote levels) of the layered store a compile uses (make_store's
    Levels): the levels after the disk that are neither memory, disk nor a bundle."""
    levels = list(getattr(store, "levels", [store]))
    disk = next((level for level in levels if level.name == "disk"), None)
    if disk is None:
        raise RawcodeValueError(f"{store!r} has no disk level to pull into or push from")
    remote = [
        level for level in levels if level.name not in LOCAL and not level.name.startswith("bundle")
    ]
    return disk, remote


def pull_into(store: Any, keys: Iterable[str], progress: Progress | None = None) -> PullSummary:
    """``pull`` into the disk level of ``store`` (make_store's Levels) from its remote levels."""
    disk, remote = split_levels(store)
    return pull(keys, remote, disk, progress)


def push_from(
    store: Any,
    keys: Iterable[str] | None = None,
    progress: Progress | None = None,
    verify: bool = False,
) -> PushSummary:
    """``push`` from the disk level of ``store`` (make_store's Levels) to its remote levels
    (``verify``: reading back what they hold at the same size, as ``unmatched``)."""
    disk, remote = split_levels(store)
    return push(keys, disk, remote, progress, verify=verify)
