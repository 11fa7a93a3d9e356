"""``cupy-rawcode cache pull`` and ``cache push``: entries between the local cache and the remote
levels (CUPY_RAWCODE_REMOTE, CUPY_RAWCODE_REDIS_URL), in bulk, with a progress bar on stderr
and a summary on stdout (``--json``: the summary as one object).

``pull --manifest app.rec`` fetches every entry the record needs (keyed without compiling,
parallel/keys.py) that the local cache lacks; ``push`` sends the record's entries, or every
local entry without ``--manifest``, what a level lacks or holds at another size (``--verify``:
what it holds at the same size is read back too, and a damaged copy replaced); either takes
along the closure records the entries name (key/portable.py), counted apart. Entries no level
holds are no error, and a level that fails is a warning: the exit status is 0 for both. An
entry pulled that the cache did not store (a full or read-only disk) is no success: named in
the summary, exit status 1, as prebuild's kernel compiled but not stored. No remote level at
all is a usage error (2).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..ground import config
from ..store import default_store, transfer
from ..store.layout import refusal
from .codes import EXIT_COMPILE, EXIT_OK, UsageError

_ACTIONS = ("pull", "push")
_OWN_FLAGS = (("--manifest", "manifest"), ("--arch", "arch"), ("--root", "root"))
_OTHER_FLAGS = (("--zero", "zero"), ("--long", "long"), ("--max-size", "max_size"))
_SHOWN = 5  # unkeyed record entries named one by one


def cache_transfer(args) -> int | None:
    """Run ``cache pull``/``cache push`` (their exit status); None for the other actions, after
    refusing the flags that go with pull and push alone."""
    if args.action != "push" and args.verify:
        raise UsageError(f"--verify goes with 'cache push', not 'cache {args.action}'")
    if args.action not in _ACTIONS:
        for flag, name in _OWN_FLAGS:
            if getattr(args, name, None):
                raise UsageError(
                    f"{flag} goes with 'cache pull' or 'cache push', not 'cache {args.action}'"
                )
        return None
    for flag, name in _OTHER_FLAGS:
        if getattr(args, name, None) not in (None, False):
            raise UsageError(f"{flag} does not go with 'cache {args.action}'")
    store = default_store()
    _check_remote(store, args.action)
    root = getattr(transfer.split_levels(store)[0], "root", None)
    why = None if root is None else refusal(root)  # a directory that is no cache of ours
    if why is not None:
        raise UsageError(why)
    keys = _keys(args)
    if args.action == "pull":
        if keys is None:
            raise UsageError(
                "cache pull needs --manifest RECORD: the record whose entries to fetch "
                "(cupy_rawcode.record, CUPY_RAWCODE_RECORD)"
            )
        return _pull(store, keys, args.json)
    return _push(store, keys, args.json, args.verify)


def _check_remote(store: Any, action: str) -> None:
    """A usage error when no remote level is configured; nothing when one is (a level that is
    configured but could not be opened has warned already, and counts as failed)."""
    from ..parallel.fetch import remote_levels

    if remote_levels(store) or config.remote() or config.redis_url():
        return
    raise UsageError(
        f"cache {action}: no remote level is configured: set CUPY_RAWCODE_REMOTE to the "
        "team's cache, e.g. CUPY_RAWCODE_REMOTE='s3://bucket/prefix' (or "
        'CUPY_RAWCODE_REDIS_URL); see "Sharing a cache" in the README'
    )


def _keys(args) -> list[str] | None:
    """The keys of the --manifest records (None without one), warning on stderr about the
    entries that could not be keyed."""
    if not args.manifest:
        return None
    from ..parallel.keys import keys_of_jobs
    from ..parallel.precompile import device_jobs

    arch = None
    if args.arch is not None:
        from ..parallel.prebuild import archs_of

        arch = archs_of(args.arch)
    roots = args.root or ()
    keys: list[str] = []
    for path in args.manifest:
        try:
            jobs = device_jobs(path, arch, roots)
        except (ImportError, RuntimeError) as e:  # no CuPy, or no GPU to take the arch from
            raise UsageError(f"{path}: give --arch (no current device: {e})") from None
        found = keys_of_jobs(jobs)
        keys += found.keys
        _warn_unkeyed(path, found.unkeyed)
    return list(dict.fromkeys(keys))


def _warn_unkeyed(path: str, unkeyed: list) -> None:
    if not unkeyed:
        return
    _say(
        f"warning: {len(unkeyed)} entries of {path} could not be keyed (they are not "
        "transferred; their compiles will report why):"
    )
    for u in unkeyed[:_SHOWN]:
        first = u.error.splitlines()[0] if u.error else ""
        _say(f"  {u.label} {u.arch}: {first}")
    if len(unkeyed) > _SHOWN:
        _say(f"  ... and {len(unkeyed) - _SHOWN} more")


def _say(line: str) -> None:
    sys.stderr.write(f"cupy-rawcode: {line}\n")
    sys.stderr.flush()


class Bar:
    """Progress on a stream, as prebuild shows it: a bar redrawn in place on a terminal, else
    one line per step told (once per chunk of keys); a step equal to the last is not shown."""

    width = 24

    def __init__(self, verb: str, stream=None):
        self.verb, self.stream = verb, stream or sys.stderr
        self.last: tuple[int, int] | None = None

    def __call__(self, done: int, total: int) -> None:
        if (done, total) == self.last:
            return
        self.last = (done, total)
        filled = self.width * done // max(total, 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {self.verb}"
        if self.stream.isatty():
            self.stream.write(f"\r{line}".ljust(80))
            if done == total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def _pull(store: Any, keys: list[str], as_json: bool) -> int:
    summary = transfer.pull_into(store, keys, Bar("entries settled"))
    got = sum(summary.fetched.values())
    if not as_json:
        print(f"pull: {summary.asked} entries asked, {summary.local} already local")
        for where, n in summary.fetched.items():
            print(f"  fetched from {where}: {n}")
        print(f"  missing everywhere: {summary.missing} (damaged copies seen: {summary.damaged})")
        if summary.records:
            print(f"  closure records fetched with them: {summary.records}")
    status = _summed(summary, "pull", f"{got} fetched", got, as_json)
    if summary.not_stored:
        _say(
            f"error: {summary.not_stored} entries fetched were not stored in the cache "
            "(a full or read-only cache?); they will be compiled at first use"
        )
        return EXIT_COMPILE
    return status


def _push(store: Any, keys: list[str] | None, as_json: bool, verify: bool) -> int:
    summary = transfer.push_from(store, keys, Bar("entries pushed"), verify)
    sent = sum(summary.sent.values())
    if not as_json:
        print(f"push: {summary.asked} local entries, {summary.unreadable} missing or damaged")
        for where, n in summary.sent.items():
            print(f"  sent to {where}: {n} ({summary.present[where]} already there)")
        for where in summary.read_only:
            print(f"  {where}: read-only, not written")
        if summary.records:
            print(f"  closure records sent with them: {summary.records}")
    return _summed(summary, "push", f"{sent} sent", summary.asked, as_json)


def _summed(summary: Any, action: str, moved: str, count: int, as_json: bool) -> int:
    """End a pull or push: its summary as one JSON object (with ``count`` entries a second as
    its rate), or the totals line below the text the caller printed; then its failed levels."""
    rate = _rate(count, summary.seconds)
    if as_json:
        print(json.dumps(summary.as_dict() | {"entries_per_second": rate}, indent=2))
    else:
        print(f"  {moved}, {_mb(summary.bytes)} in {summary.seconds:.2f} s ({rate} entries/s)")
    _warn_failed(summary.failed, action)
    return EXIT_OK


def _warn_failed(failed: list[str], action: str) -> None:
    for where in failed:
        _say(f"warning: the remote level {where} failed during the {action} and was left out")
