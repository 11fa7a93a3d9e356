"""Prebuild: compile many kernels for many architectures into the cache, in parallel processes.

Inputs are CUDA files (compiled with the command's options) or JSON manifests naming kernels:

    [{"file": "kernels/scan.cu", "options": ["-DN=4"], "name_expressions": ["scan<float>"],
      "arch": ["sm_90"]},
     {"code": "extern \\"C\\" __global__ void k() {}", "name": "inline-k"}]

``file`` and the paths of ``options`` are relative to the manifest and stay inside its directory
or a ``--root`` (confine.py); ``arch`` (optional) replaces the command's list. A record
(recording.py: what a process compiled, CuPy's own compiles included; ``--manifest``) gives one job
per entry and arch. A failing kernel is reported and the rest go on.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ..ground.confine import confine, confine_options
from ..ground.errors import RawcodeError, RawcodeRuntimeError, RawcodeValueError
from ..ground.regular import read_text
from ..ground.schema import loads, manifest_entry
from ..hook import recording
from ..orchestrator.jitify import jitify_options, jitify_source
from . import pool, sizing
from .task import Task, run_task


@dataclass(frozen=True)
class Job:
    label: str
    source: str
    source_dir: str | None
    arch: str
    options: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()
    source_name: str | None = None  # the file's name in source_dir (what diagnostics call it)
    jitify: bool = False  # compiled as Jitify did (orchestrator/jitify.py)
    cupy: tuple | None = None  # a compile CuPy makes: (extra_source marker, cooperative)
    target: str = "cubin"  # a recorded compile() call's own target


@dataclass
class Outcome:
    job: Job
    key: str | None = None
    hit: bool = False
    seconds: float = 0.0
    error: str | None = None
    stored: bool = True  # False: compiled, but the store kept nothing (a full disk)


class ManifestError(RawcodeError, ValueError):
    """A prebuild manifest that cannot be read or used: the message names where and why."""


def _read(path: str) -> str:
    """A source or manifest file's text, with universal newlines as ``open`` gives it; never
    reads a FIFO, which would block (regular.py). OSError propagates; bytes that are not UTF-8
    are a ManifestError. A NUL is left to the compile, which fails that kernel alone."""
    try:
        return read_text(path)
    except UnicodeDecodeError as e:
        raise ManifestError(f"{path}: cannot read (not UTF-8 text: {e})") from None


def jobs_for(
    paths: list[str], archs: list[str], options: tuple[str, ...], roots: Sequence[str] = ()
) -> list[Job]:
    """Expand files and manifests into one job per (kernel, arch); what a manifest names stays
    inside its directory or ``roots`` (confine.py)."""
    jobs: list[Job] = []
    for path in paths:
        if path.endswith(".json"):
            jobs += _manifest_jobs(path, archs, options, roots)
        else:
            src = _read(path)
            where = os.path.dirname(os.path.abspath(path))
            jobs += [Job(path, src, where, a, options, (), os.path.basename(path)) for a in archs]
    return jobs


def _manifest_jobs(
    path: str, archs: list[str], options: tuple[str, ...], roots: Sequence[str]
) -> list[Job]:
    items = loads(_read(path), path)  # SchemaError (a ManifestError's ValueError) for bad JSON
    if not isinstance(items, list):
        raise ManifestError(f"{path}: a manifest is a list of kernels")
    base = os.path.dirname(os.path.abspath(path))
    jobs = []
    for i, raw in enumerate(items):
        where = f"{path}[{i}]"
        item = manifest_entry(raw, where)
        if "file" in item:
            what = f"file {item['file']!r}"
            fpath = confine(item["file"], base, roots, what, where, record=False)
            try:
                src = _read(fpath)
            except OSError as e:
                raise ManifestError(f"{where}: {fpath}: cannot read ({e.strerror or e})") from None
            sdir, label = os.path.dirname(fpath), item.get("name", item["file"])
            fname = os.path.basename(fpath)
        else:
            src, sdir, label = item["code"], None, item.get("name", f"{path}[{i}]")
            fname = None
        item_archs = tuple(item.get("arch") or archs)
        opts = options + confine_options(
            item.get("options") or (), base, roots, where, record=False
        )
        names = tuple(item.get("name_expressions") or ())
        jobs += [Job(str(label), src, sdir, a, opts, names, fname) for a in item_archs]
    return jobs


def record_jobs(path: str, archs: list[str], roots: Sequence[str] = ()) -> list[Job]:
    """One job per entry of a record (recording.py) and arch. A "cupy" entry is compiled as CuPy
    compiles it (its options assembled by this machine's CuPy), a jitify one as install()
    compiles it, a "raw" one as our RawKernel/RawModule do. Its paths stay inside the record's
    directory or ``roots`` (confine.py)."""
    try:
        entries = recording.read(path, roots)
    except ValueError as err:
        raise ManifestError(str(err)) from None
    jobs = []
    for i, e in enumerate(entries):
        label = f"{os.path.basename(path)}:{i + 1}"
        names = tuple(e.get("name_expressions") or ())
        if e["kind"] == "raw":
            base = Job(label, e["source"], e.get("source_dir"), "", tuple(e["options"]), names)
            base = _replace(
                base,
                source_name=e.get("source_name"),
                jitify=bool(e.get("jitify")),
                target=e.get("target", "cubin"),
            )
        else:
            base = _cupy_job(label, e, names)
        jobs += [_replace(base, arch=a) for a in archs]
    return jobs


def _cupy_job(label: str, e: dict, names: tuple[str, ...]) -> Job:
    from cupy._core import core

    options = tuple(e["options"])
    if e.get("cupy_options"):
        options = tuple(core.assemble_cupy_compiler_options(options))
    if e.get("jitify"):  # as install() compiles a jitify=True call
        return Job(
            label, jitify_source(e["source"]), None, "", jitify_options(options), names,
            jitify=True,
        )  # fmt: skip
    extra = e.get("extra_source") or e.get("extra_source_text")
    return Job(label, e["source"], None, "", options, names, cupy=(extra, bool(e["cooperative"])))


def _replace(job: Job, **changes) -> Job:
    import dataclasses

    return dataclasses.replace(job, **changes)


def task_for(job: Job):
    """The pool task of a job (pool.py: the same worker processes warmup() uses)."""
    return Task(
        job.source,
        job.options,
        job.arch,
        job.target,
        None,
        job.name_expressions,
        job.source_dir,
        None,
        job.source_name,
        job.jitify,
        job.cupy,
    )


def run_job(job: Job) -> Outcome:
    """Compile one job through the default store, in this process."""
    return _outcome(job, run_task(task_for(job)))


def _outcome(job: Job, o) -> Outcome:
    return Outcome(job, o.key, o.hit, o.seconds, o.error, o.stored)


def archs_of(arch: str) -> list[str]:
    """The architectures of a comma-separated ``--arch``; ValueError when it names none."""
    archs = [a.strip() for a in arch.split(",") if a.strip()]
    if not archs:
        raise RawcodeValueError("--arch needs at least one architecture, e.g. sm_80,sm_90")
    return archs


def plan_jobs(
    paths: list[str],
    archs: list[str],
    options: tuple[str, ...],
    records: Sequence[str] | None,
    roots: Sequence[str] | None,
) -> list[Job]:
    """The jobs of CUDA files, JSON manifests and records, for every arch; ValueError for none."""
    roots = roots or ()
    jobs = jobs_for(paths, archs, options, roots)
    for rec in records or ():
        jobs += record_jobs(rec, archs, roots)
    if not jobs:
        raise RawcodeValueError(
            "prebuild: nothing to compile (give files, JSON manifests or --manifest)"
        )
    return jobs


def failed(outcomes: list[Outcome]) -> list[Outcome]:
    """The jobs that failed."""
    return [o for o in outcomes if o.error]


def lost(outcomes: list[Outcome]) -> list[Outcome]:
    """The jobs compiled but not stored (a full or read-only cache): not a success either."""
    return [o for o in outcomes if not o.error and not o.stored]


def stored_keys(outcomes: list[Outcome]) -> list[str]:
    """The keys of what the cache now holds, as ``bundle export --prebuilt`` ships them."""
    return [o.key for o in outcomes if o.key and o.stored]


def _progress(done: int, total: int, o: Outcome, stream) -> None:
    width = 24
    filled = width * done // max(total, 1)
    state = "FAILED" if o.error else ("hit" if o.hit else "compiled")
    if not o.error and not o.stored:
        state = "compiled, NOT STORED"
    line = (
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
        f"{o.job.label} {o.job.arch} {state} ({o.seconds:.2f} s)"
    )
    if stream.isatty():
        stream.write(line.ljust(100)[:120])
        if done == total:
            stream.write("\n")
    else:
        stream.write(line[1:] + "\n")
    stream.flush()


def prebuild(jobs: list[Job], workers: int | None = None, stream=None) -> list[Outcome]:
    """Run every job, showing progress on ``stream``: in this process for one worker or one
    job, else in worker processes (pool.py; ``workers`` None: CUPY_RAWCODE_WORKERS, else what
    the machine can take)."""
    stream = sys.stderr if stream is None else stream
    workers = sizing.resolve_workers(workers, len(jobs))
    if workers <= 1 or len(jobs) <= 1:
        outcomes = []
        for job in jobs:
            outcomes.append(run_job(job))
            _progress(len(outcomes), len(jobs), outcomes[-1], stream)
        return outcomes
    results: list[Outcome | None] = [None] * len(jobs)
    lock = threading.Lock()
    done = [0]

    def landed(i: int, o) -> None:
        with lock:
            out = results[i] = _outcome(jobs[i], o)
            done[0] += 1
            _progress(done[0], len(jobs), out, stream)

    pool.run([task_for(j) for j in jobs], workers, landed)
    done_all = [r for r in results if r is not None]
    if len(done_all) != len(jobs):  # pool.run calls landed once per task before it returns
        raise RawcodeRuntimeError(
            f"prebuild: {len(jobs) - len(done_all)} jobs ended without a result"
        )
    return done_all
