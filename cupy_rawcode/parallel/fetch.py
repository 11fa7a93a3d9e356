"""Fetching what a record needs from the remote levels before anything compiles it: the keys of
its jobs (keys.py) pulled into the local cache at once (store/transfer.pull_into: bulk per
level, every entry validated), so that a team's cache serves the compiles a record names
instead of each first launch asking the remote levels one key at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..store import transfer
from .keys import RecordKeys, keys_of_jobs
from .prebuild import Job


@dataclass
class Pulled:
    """A pull of some jobs' entries: the transfer's summary, the keys asked (with the jobs
    that could not be keyed) and those the local cache holds valid now (``held``)."""

    summary: transfer.PullSummary
    keys: RecordKeys
    held: set[str]

    def ready(self) -> set[Job]:
        """The jobs whose entry the local cache holds now: nothing to compile for them."""
        return {job for job, key in self.keys.of.items() if key in self.held}


def remote_levels(store: Any) -> list:
    """The remote levels of the layered store ``store`` (none without a disk level)."""
    try:
        return transfer.split_levels(store)[1]
    except ValueError:
        return []


def pull_jobs(jobs: Iterable[Job], store: Any, progress: transfer.Progress | None = None) -> Pulled:
    """Pull the entries of ``jobs`` from the remote levels of ``store`` into its disk level."""
    keys = keys_of_jobs(jobs)
    summary = transfer.pull_into(store, keys.keys, progress)
    disk = transfer.split_levels(store)[0]
    held = set(keys.keys) if not summary.missing else set(transfer.held_entries(disk, keys.keys))
    return Pulled(summary, keys, held)
