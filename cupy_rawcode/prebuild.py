"""Prebuild: compile many kernels for many architectures into the cache, in parallel processes.

Inputs are CUDA files (compiled with the command's options) or JSON manifests naming kernels:

    [{"file": "kernels/scan.cu", "options": ["-DN=4"], "name_expressions": ["scan<float>"],
      "arch": ["sm_90"]},
     {"code": "extern \\"C\\" __global__ void k() {}", "name": "inline-k"}]

``file`` is relative to the manifest; ``arch`` (optional) replaces the command's list. A failing
kernel is reported and the rest go on.
"""
from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    label: str
    source: str
    source_dir: str | None
    arch: str
    options: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()
    source_name: str | None = None  # the file's name in source_dir (what diagnostics call it)


@dataclass
class Outcome:
    job: Job
    key: str | None = None
    hit: bool = False
    seconds: float = 0.0
    error: str | None = None


class ManifestError(ValueError):
    pass


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None


def _strings(value, what: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"{where}: {what} must be a list of strings")
    return tuple(value)


def jobs_for(paths: list[str], archs: list[str], options: tuple[str, ...]) -> list[Job]:
    """Expand files and manifests into one job per (kernel, arch)."""
    jobs: list[Job] = []
    for path in paths:
        if path.endswith(".json"):
            jobs += _manifest_jobs(path, archs, options)
        else:
            src = _read(path)
            where = os.path.dirname(os.path.abspath(path))
            jobs += [Job(path, src, where, a, options, (), os.path.basename(path)) for a in archs]
    return jobs


def _manifest_jobs(path: str, archs: list[str], options: tuple[str, ...]) -> list[Job]:
    try:
        items = json.loads(_read(path))
    except ValueError as e:
        raise ManifestError(f"{path}: not JSON ({e})") from None
    if not isinstance(items, list):
        raise ManifestError(f"{path}: a manifest is a list of kernels")
    base = os.path.dirname(os.path.abspath(path))
    jobs = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]"
        if not isinstance(item, dict) or ("file" in item) == ("code" in item):
            raise ManifestError(f"{where}: give exactly one of 'file' and 'code'")
        unknown = set(item) - {"file", "code", "name", "options", "name_expressions", "arch"}
        if unknown:
            raise ManifestError(f"{where}: unknown field(s) {sorted(unknown)}")
        if "file" in item:
            fpath = os.path.join(base, item["file"])
            try:
                src = _read(fpath)
            except ManifestError as e:
                raise ManifestError(f"{where}: {e}") from None
            sdir, label = os.path.dirname(fpath), item.get("name", item["file"])
            fname = os.path.basename(fpath)
        else:
            src, sdir, label = item["code"], None, item.get("name", f"{path}[{i}]")
            fname = None
        item_archs = _strings(item.get("arch"), "arch", where) or tuple(archs)
        opts = options + _strings(item.get("options"), "options", where)
        names = _strings(item.get("name_expressions"), "name_expressions", where)
        jobs += [Job(label, src, sdir, a, opts, names, fname) for a in item_archs]
    return jobs


def run_job(job: Job) -> Outcome:
    """Compile one job through the default store (runs in a worker process)."""
    from .program import compile_request
    from .request import make_request
    t0 = time.perf_counter()
    try:
        req = make_request(job.source, arch=job.arch, options=job.options,
                           name_expressions=job.name_expressions, source_dir=job.source_dir,
                           source_name=job.source_name)
        result = compile_request(req)
        return Outcome(job, result.key, result.hit, time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - reported per kernel; the others go on
        return Outcome(job, error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)


def _progress(done: int, total: int, o: Outcome, stream) -> None:
    width = 24
    filled = width * done // max(total, 1)
    state = "FAILED" if o.error else ("hit" if o.hit else "compiled")
    line = (f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
            f"{o.job.label} {o.job.arch} {state} ({o.seconds:.2f} s)")
    if stream.isatty():
        stream.write(line.ljust(100)[:120])
        if done == total:
            stream.write("\n")
    else:
        stream.write(line[1:] + "\n")
    stream.flush()


def prebuild(jobs: list[Job], workers: int = 1, stream=None) -> list[Outcome]:
    """Run every job (in ``workers`` processes when > 1), showing progress on ``stream``."""
    stream = sys.stderr if stream is None else stream
    if workers <= 1 or len(jobs) <= 1:
        outcomes = []
        for job in jobs:
            outcomes.append(run_job(job))
            _progress(len(outcomes), len(jobs), outcomes[-1], stream)
        return outcomes
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")  # no inherited CUDA state or locks
    results: list[Outcome | None] = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(run_job, job): i for i, job in enumerate(jobs)}
        for done, fut in enumerate(as_completed(futures), 1):
            results[futures[fut]] = o = fut.result()
            _progress(done, len(jobs), o, stream)
    return results
