"""One compile as the worker pool carries it: a ``Task`` (what to compile, for which arch or
device, as a first launch would) and its ``Outcome`` (key, hit, seconds, error, peak memory),
both sent as JSON lines between parent and worker, never pickle; and ``run_task``, which
compiles one task through the default store, in a worker (worker.py) or in-process (prebuild
-j1), turning any failure into the outcome's error text so that one kernel never stops the
others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..headers.options import parse_options
from ..hook.compiles import call_for, compile_ahead
from ..key.request import Request
from ..orchestrator import flow
from ..store import default_store


@dataclass(frozen=True)
class Task:
    """One compile, as a first launch would do it. Either ``arch`` (with ``target``, default
    from the arch) or ``device`` (a compute capability: the worker chooses arch and target as a
    launch on that device does). ``options`` as the kernel holds them; ``index_id``: record the
    key in the warm index under this id; ``source_name``: the .cu file's name, for messages;
    ``jitify``: compile as Jitify did (orchestrator/jitify.py); ``cupy``: a compile
    CuPy makes, compiled by CuPy into the store (hook/compiles.compile_ahead), as
    (extra_source: "cupy" for CuPy's header text or the text itself, cooperative)."""

    source: str
    options: tuple[str, ...] = ()
    arch: str | None = None
    target: str | None = None
    device: int | None = None
    name_expressions: tuple[str, ...] = ()
    source_dir: str | None = None
    index_id: str | None = None
    source_name: str | None = None
    jitify: bool = False
    cupy: tuple | None = None

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "options": list(self.options),
            "arch": self.arch,
            "target": self.target,
            "device": self.device,
            "name_expressions": list(self.name_expressions),
            "source_dir": self.source_dir,
            "index_id": self.index_id,
            "source_name": self.source_name,
            "jitify": self.jitify,
            "cupy": list(self.cupy) if self.cupy is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict) -> Task:
        return cls(
            d["source"],
            tuple(d["options"]),
            d["arch"],
            d["target"],
            d["device"],
            tuple(d["name_expressions"]),
            d["source_dir"],
            d["index_id"],
            d.get("source_name"),
            bool(d.get("jitify")),
            tuple(d["cupy"]) if d.get("cupy") is not None else None,
        )


@dataclass
class Outcome:
    """What one task gave: the cache ``key`` and whether the cache already held it (``hit``),
    the arch and target compiled, the seconds it took, or the ``error`` text. ``max_rss``: the
    worker's peak resident memory (bytes) after this task, when known. ``stored``: False when a
    compile's entry did not reach a lasting layer of the store (a full or read-only disk)."""

    key: str | None = None
    hit: bool = False
    arch: str | None = None
    target: str | None = None
    seconds: float = 0.0
    error: str | None = None
    max_rss: int | None = None
    stored: bool = True

    @classmethod
    def from_json(cls, d: dict) -> Outcome:
        return cls(
            d.get("key"),
            bool(d.get("hit")),
            d.get("arch"),
            d.get("target"),
            float(d.get("seconds", 0.0)),
            d.get("error"),
            d.get("max_rss"),
            bool(d.get("stored", True)),
        )


def request_of(task: Task) -> Request:
    """The compile request of ``task`` (one of ours, not CuPy's), its arch and target chosen
    as a first launch would: what ``run_task`` compiles and ``cache pull`` keys (keys.py)."""
    if task.device is not None:
        arch, target = flow.device_target(parse_options(task.options).arch, task.device)
    else:
        assert task.arch is not None  # a task names a device or an arch
        arch, target = task.arch, task.target or flow.arch_target(task.arch)[1]
    return flow.request(
        task.source,
        arch=arch,
        options=task.options,
        name_expressions=task.name_expressions,
        target=target,
        source_dir=task.source_dir,
        source_name=task.source_name,
        device=True,  # a device's arch, or the one warmup/prebuild names for a device
    )


def run_task(task: Task) -> Outcome:
    """Compile one task through the default store (in a worker, or in-process for prebuild -j1).
    Any failure becomes the outcome's error text: one kernel never stops the others."""
    t0 = time.perf_counter()
    if task.cupy is not None:
        return _run_cupy(task, t0)
    try:
        req = request_of(task)
        req, result = flow.compile_for(req, index_id=task.index_id, jitify_mode=task.jitify)
        seconds = time.perf_counter() - t0
        return Outcome(result.key, result.hit, req.arch, req.target, seconds, stored=_kept(result))
    except Exception as e:
        return Outcome(error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)


def _kept(result) -> bool:
    """Whether a compile's entry is in the store to stay (a hit was there already)."""
    return result.hit or _kept_key(result.key)


def _kept_key(key: str) -> bool:
    return default_store().kept(key)


def _run_cupy(task: Task, t0: float) -> Outcome:
    """A compile CuPy makes, compiled by CuPy into the store for task.arch (no GPU needed)."""
    try:
        assert task.arch is not None and task.cupy is not None  # record jobs name an arch
        key, hit = compile_ahead(call_for(task))
        seconds = time.perf_counter() - t0
        return Outcome(key, hit, task.arch, "cubin", seconds, stored=hit or _kept_key(key))
    except Exception as e:
        return Outcome(error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)
