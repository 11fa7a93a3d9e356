"""The store keys a record needs, computed without compiling: the key each of its jobs (one per
entry and arch, prebuild.record_jobs) would look up when compiled, by the same path a compile
takes (orchestrator.flow.request + key.request.compute_key for our kernels, hook.compiles.key_of
for CuPy's), so that ``cache pull`` fetches exactly what the compiles and launches will ask for.

An entry whose key cannot be computed (a header that matches no file here) is reported beside
the keys, never fatal: its compile would fail or miss anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..ground.errors import MissingHeaderError
from ..key.request import compute_key
from ..orchestrator import flow
from ..orchestrator.compiling import store_dir
from ..store import default_store
from ..store.layout import using_cache_dir
from .prebuild import Job, record_jobs, task_for
from .task import request_of


@dataclass
class Unkeyed:
    """A job whose key could not be computed: its label, arch and why."""

    label: str
    arch: str
    error: str


@dataclass
class RecordKeys:
    """The distinct keys of a record's jobs, in job order, the key of each job keyed (``of``)
    and the jobs left unkeyed."""

    keys: list[str] = field(default_factory=list)
    unkeyed: list[Unkeyed] = field(default_factory=list)
    of: dict[Job, str] = field(default_factory=dict)


def key_of_job(job: Job) -> str:
    """The store key the compile of ``job`` looks up (as parallel/task.run_task compiles it);
    MissingHeaderError when a header matches no file, after the retry a compile makes for a
    header that moved (compiler/relocated.py)."""
    if job.cupy is not None:
        from ..hook import compiles

        return compiles.key_of(compiles.call_for(job))
    req = request_of(task_for(job))
    with using_cache_dir(store_dir(default_store())):
        return flow.moved_answered(req, lambda r: compute_key(r).key)


def keys_of_jobs(jobs: Iterable[Job]) -> RecordKeys:
    """The keys of ``jobs`` (distinct, in order), and those that could not be keyed."""
    found = RecordKeys()
    seen: set[str] = set()
    for job in jobs:
        try:
            key = key_of_job(job)
        except (MissingHeaderError, OSError, ValueError) as e:
            found.unkeyed.append(Unkeyed(job.label, job.arch, f"{type(e).__name__}: {e}"))
            continue
        found.of[job] = key
        if key not in seen:
            seen.add(key)
            found.keys.append(key)
    return found


def record_keys(path: str, archs: Sequence[str], roots: Sequence[str] = ()) -> RecordKeys:
    """The keys of every entry of the record at ``path`` for each of ``archs``, with the entries
    that could not be keyed; a record that cannot be read raises (ManifestError, OSError)."""
    return keys_of_jobs(record_jobs(path, list(archs), roots))


def keys_of_record(path: str, archs: Sequence[str], roots: Sequence[str] = ()) -> list[str]:
    """The store key of every entry the record at ``path`` needs for each of ``archs``,
    computed without compiling (record_keys: the entries that cannot be keyed are left out)."""
    return record_keys(path, archs, roots).keys
