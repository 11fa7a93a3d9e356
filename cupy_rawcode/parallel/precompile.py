"""warmup(): compile many kernels ahead of their first launches, at once, in worker processes,
so that those launches are cache hits. (The module is not named warmup: importing it would then
replace the package's ``warmup`` function by the module.)

An application that defines 20-40 kernels compiles each at its first launch, one after another
(NVRTC does one compile at a time per process). warmup() hands every kernel the cache does not
hold to a pool of worker processes (pool.py), which compile exactly what a first launch would
(orchestrator.flow.compile_for) and put it in the program's store (set_store's or the
environment's: stores.py) and the warm index.

Failures are not cached: the first launch of a kernel that failed compiles it again in-process
and raises exactly the error it would have raised without warmup().
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import warnings
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from ..ground.config import check_workers
from ..ground.errors import (
    RawcodeTimeoutError,
    RawcodeTypeError,
    RawcodeValueError,
    RawcodeWarning,
)
from ..hook import compiles as cupy_compiles
from ..kernel import RawKernel, RawModule, building
from ..kernel.building import _arch_target, _compute_capability, _device_target
from ..key import index_id, index_lookup
from ..store import default_store
from ..store.entry import decode
from ..store.transfer import PullSummary
from . import fetch, pool, sizing
from .prebuild import Job, ManifestError, record_jobs, task_for
from .task import Outcome, Task


@dataclass
class Item:
    """One kernel for one architecture: ``kernel`` as given, a ``label`` for messages, the
    ``arch`` asked for ('cc90' for the current device's), the cache ``key`` and compile
    ``seconds`` when a worker ran it, or its ``error``."""

    kernel: object
    label: str
    arch: str
    key: str | None = None
    seconds: float = 0.0
    error: str | None = None


@dataclass
class Summary:
    """What warmup() did: kernels ``compiled`` now, ``cached`` before (nothing to do),
    ``failed`` (with their errors) and ``lost``: compiled, but the store kept nothing (every
    level read-only, a full disk: their first launches compile again); the ``workers`` started,
    the wall ``seconds``, and the pool's ``memory`` (pool.Memory: peak resident bytes)."""

    compiled: list[Item] = field(default_factory=list)
    cached: list[Item] = field(default_factory=list)
    failed: list[Item] = field(default_factory=list)
    lost: list[Item] = field(default_factory=list)
    workers: int = 0
    seconds: float = 0.0
    memory: pool.Memory = field(default_factory=pool.Memory)
    pulled: list[PullSummary] = field(default_factory=list)  # a pull per record (remote levels)

    @property
    def ok(self) -> bool:
        """Whether every kernel is in the store now: none failed, none was lost."""
        return not self.failed and not self.lost

    def __str__(self) -> str:
        peak = self.memory.peak
        mem = f", peak {peak / (1 << 20):.0f} MiB" if peak else ""
        fetched = sum(sum(p.fetched.values()) for p in self.pulled)
        got = f" ({fetched} fetched from remote levels)" if self.pulled else ""
        lost = f" ({len(self.lost)} compiled, but not stored)" if self.lost else ""
        lines = [
            f"warmup: {len(self.compiled)} compiled, {len(self.cached)} already cached{got}, "
            f"{len(self.failed)} failed{lost} ({self.workers} workers, {self.seconds:.2f} s{mem})"
        ]
        for it in self.failed:
            lines.append(f"  {it.label} ({it.arch}): " + (it.error or "").replace("\n", "\n    "))
        return "\n".join(lines)


class Warmup:
    """A background warmup(): ``done()`` says whether it has finished, ``wait()`` returns its
    Summary (raising what it raised). A first launch of a kernel it is still compiling waits
    for that compile instead of starting a second one."""

    def __init__(self, run):
        self._summary: Summary | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._main, args=(run,), daemon=True, name="cupy-rawcode-warmup"
        )
        self._thread.start()

    def _main(self, run) -> None:
        try:
            self._summary = run()
        except BaseException as e:
            self._error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> Summary:
        """The Summary once every compile has ended; TimeoutError after ``timeout`` seconds."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RawcodeTimeoutError(f"warmup() still running after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._summary is not None  # set by the thread before it ends without error
        return self._summary

    def __repr__(self) -> str:
        return f"<cupy_rawcode.Warmup {'done' if self.done() else 'running'}>"


def _builds(kernels) -> list[tuple[Any, str, Any]]:
    """(kernel as given, label, kernel.building._Build) for each argument; a tuple is
    (source[, options[, name_expressions]]) and becomes a RawModule."""
    out: list[tuple[Any, str, Any]] = []
    for i, k in enumerate(kernels):
        if isinstance(k, RawKernel):
            out.append((k, k.name, k._build))
        elif isinstance(k, RawModule):
            b = k._build
            out.append((k, f"RawModule({b.path})" if b.path else f"RawModule #{i}", b))
        elif isinstance(k, tuple):
            if not 1 <= len(k) <= 3 or not isinstance(k[0], str):
                raise RawcodeTypeError(
                    f"warmup() argument {i}: a tuple is (source, options, "
                    f"name_expressions) with source a str, not {k!r:.80}"
                )
            m = RawModule(
                code=k[0],
                options=k[1] if len(k) > 1 else (),
                name_expressions=k[2] if len(k) > 2 else None,
            )
            out.append((k, f"kernels[{i}]", m._build))
        else:
            raise RawcodeTypeError(
                f"warmup() argument {i}: expected a RawKernel, a RawModule or a "
                f"(source, options, name_expressions) tuple, not "
                f"{type(k).__name__}"
            )
    return out


def _archs(arch) -> list[tuple[str, int | None]]:
    """[(label, compute capability or None)]: the current device's when ``arch`` is None, else
    each explicit architecture (normalized, so a bad one fails here, naming it)."""
    if arch is None:
        cc = _compute_capability()
        return [(f"cc{cc}", cc)]
    archs = [arch] if isinstance(arch, str) else list(arch)
    if not archs or not all(isinstance(a, str) for a in archs):
        raise RawcodeValueError(
            f"arch={arch!r}: give an architecture such as 'sm_90', a list of them, "
            "or None for the current device's"
        )
    return [(_arch_target(a)[0], None) for a in archs]


def _in_cache(plan_id: str) -> bool:
    """Whether the warm index knows these inputs and the store holds a valid entry for them."""
    found = index_lookup(plan_id)
    if found is None:
        return False
    key = found["key"]
    return default_store().find(key, lambda data: decode(key, data)) is not None


def plan(kernels, arch=None) -> tuple[list[Item], list[Item], list[tuple[Item, Task]]]:
    """(cached, failed, [(item, task)]): what warmup() has to compile. A kernel already compiled
    in this process or found through the warm index is cached; one whose source cannot be read
    has failed; the rest become worker tasks, one per distinct (inputs, arch)."""
    cached, failed, todo, seen = [], [], [], set()
    archs = _archs(arch)
    for k, label, b in _builds(kernels):
        for arch_label, cc in archs:
            item = Item(k, label, arch_label)
            if b.is_file or (cc in b.device_arch if cc is not None else arch_label in b.compiled):
                cached.append(item)  # a compiled file, or compiled in this process already
                continue
            try:
                source, where = b.source()
            except (OSError, ValueError, TypeError) as e:  # unreadable, or bad input (checks)
                item.error = f"{type(e).__name__}: {e}"
                failed.append(item)
                continue
            args = b.compile_options
            names = b.name_expressions or ()
            pid = index_id(source, args, arch_label, names, where)
            if pid in seen or _in_cache(pid):
                cached.append(item)
                continue
            seen.add(pid)
            target = None if cc is not None else _arch_target(arch_label)[1]
            todo.append(
                (
                    item,
                    Task(
                        source,
                        args,
                        None if cc is not None else arch_label,
                        target,
                        cc,
                        names,
                        where,
                        pid,
                        b.source_name,
                        b.jitify,
                    ),
                )
            )
    return cached, failed, todo


def _record_archs(arch) -> list[str]:
    """The architectures a record is planned for: the current device's when ``arch`` is None."""
    return [_device_target(None)[0]] if arch is None else [a for a, _ in _archs(arch)]


def device_jobs(path: str, arch=None, roots: Sequence[str] = ()) -> list[Job]:
    """The jobs of a record (prebuild.record_jobs), one per entry and arch (the current
    device's when ``arch`` is None: ours for our kernels, CuPy's for CuPy's)."""
    jobs = record_jobs(path, _record_archs(arch), roots)
    if arch is None and any(job.cupy is not None for job in jobs):
        from cupy.cuda import compiler

        cupy_arch = f"sm_{compiler._get_arch()}"
        jobs = [dataclasses.replace(j, arch=cupy_arch) if j.cupy is not None else j for j in jobs]
    return jobs


def read_records(paths: list[str], arch, roots: Sequence[str]) -> dict[str, list[Job] | Item]:
    """Each record's jobs (device_jobs), read once for the pull and the plan alike, or the
    failed Item saying why it could not be read; its paths stay inside its directory or
    ``roots`` (confine.py)."""
    read: dict[str, list[Job] | Item] = {}
    for path in paths:
        try:
            read[path] = device_jobs(path, arch, roots)
        except (OSError, ManifestError) as e:
            where = ",".join(_record_archs(arch))
            read[path] = Item(path, path, where, error=f"{type(e).__name__}: {e}")
    return read


def record_plan(
    path: str, jobs: list[Job] | Item, ready: Set[Job] = frozenset()
) -> tuple[list[Item], list[Item], list[tuple[Item, Any]]]:
    """plan() for a record's jobs (read_records): (cached, failed, [(item, task)]), one item per
    entry and arch (the current device's when none was given: ours for our kernels, CuPy's
    for CuPy's). ``ready``: jobs known to be in the local cache (a pull's), cached without
    asking the store."""
    if isinstance(jobs, Item):  # the record could not be read
        return [], [jobs], []
    cached, todo = [], []
    for job in jobs:
        if job in ready:
            cached.append(Item(path, job.label, job.arch))
            continue
        if job.cupy is not None:
            if cupy_compiles.cached(cupy_compiles.call_for(job)):
                cached.append(Item(path, job.label, job.arch))
                continue
        todo.append((Item(path, job.label, job.arch), task_for(job)))
    return cached, [], todo


def _roots(root) -> list[str]:
    """warmup's ``root``: None, one directory or a list of them, as strings."""
    if root is None:
        return []
    return [os.fspath(r) for r in ([root] if isinstance(root, (str, os.PathLike)) else root)]


def warmup(*kernels, arch=None, workers: int | None = None, background: bool = False, root=None):
    """Compile every kernel the cache does not hold, in worker processes, so that first launches
    are cache hits. ``kernels``: RawKernel/RawModule objects, (source, options,
    name_expressions) tuples, or paths of records (recording.py: every compile an application
    made, CuPy's own included); ``arch``: 'sm_90' (or a list) instead of the current device's;
    ``workers``: processes (default CUPY_RAWCODE_WORKERS, else cores and memory at ~400 MB per
    compile). Returns a Summary (compiled, already cached, failed with errors), or with
    ``background=True`` a Warmup handle at once (``wait()``, ``done()``). ``root``: a directory
    (or a list) that records may name paths in beside their own (confine.py). With remote
    levels configured (CUPY_RAWCODE_REMOTE), the entries a record needs are first pulled from
    them into the local cache (``cache pull``; Summary.pulled), and only the rest compiled.

    A failing kernel never stops the others. Failures are not cached: its first launch compiles
    it again and raises the same error it would have raised alone."""
    if workers is not None:
        check_workers("workers", workers)
    t0 = time.perf_counter()
    records = [os.fspath(k) for k in kernels if isinstance(k, (str, os.PathLike))]
    cached, failed, todo = plan([k for k in kernels if not isinstance(k, (str, os.PathLike))], arch)
    events = {}
    for _, task in todo:
        events[task.index_id] = building.pending.setdefault(task.index_id, threading.Event())

    def run() -> Summary:
        nonlocal cached, failed, todo
        summary = Summary()
        try:
            read = read_records(records, arch, _roots(root))
            pulled = _pull_first(read)
            summary.pulled = [p.summary for p in pulled]
            ready = set().union(*(p.ready() for p in pulled))
            for path, jobs in read.items():  # planned after the pull: what it fetched is cached
                more = record_plan(path, jobs, ready)
                cached, failed, todo = cached + more[0], failed + more[1], todo + more[2]
            summary.cached, summary.failed = cached, failed
            if todo:
                summary.workers = sizing.resolve_workers(workers, len(todo))

                def landed(i: int, out: Outcome) -> None:
                    item, task = todo[i]
                    item.key, item.seconds, item.error = out.key, out.seconds, out.error
                    (
                        summary.failed
                        if out.error
                        else summary.cached
                        if out.hit
                        else summary.compiled
                        if out.stored
                        else summary.lost
                    ).append(item)
                    _release(task.index_id, events)

                pool.run([t for _, t in todo], summary.workers, landed, summary.memory)
        finally:
            for pid in list(events):
                _release(pid, events)
        summary.seconds = time.perf_counter() - t0
        return summary

    if background:
        return Warmup(run)
    return run()


def _pull_first(read: dict[str, list[Job] | Item]) -> list[fetch.Pulled]:
    """Fetch every entry the records' jobs (read_records) need from the remote levels into the
    local cache before planning their compiles (fetch.py), when the store has remote levels:
    what the team's cache holds is fetched, not compiled. A record that could not be read is
    left to record_plan to report; a pull that fails warns and the compiles go on."""
    if not read:
        return []
    store = default_store()
    if not fetch.remote_levels(store):
        return []
    pulled = []
    for path, jobs in read.items():
        if isinstance(jobs, Item):
            continue  # record_plan reports it
        try:
            pulled.append(fetch.pull_jobs(jobs, store))
        except Exception as e:  # a remote level never fails a compile, nor warmup
            warnings.warn(
                f"cupy-rawcode: warmup could not pull {path} from the remote levels "
                f"({type(e).__name__}: {e}); compiling what the cache lacks",
                RawcodeWarning,
                stacklevel=3,
            )
    return pulled


def _release(plan_id: str | None, events: dict) -> None:
    """The compile of ``plan_id`` has ended: wake launches waiting for it."""
    event = events.pop(plan_id, None)
    if event is not None:
        event.set()
        if building.pending.get(plan_id) is event:
            del building.pending[plan_id]
