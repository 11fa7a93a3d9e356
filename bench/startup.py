"""Startup-time benchmark: cold, warm, Nth kernel in a process, and import time, side by side.

    python bench/startup.py --compile-only     # here, no GPU: compile and cache only
    python bench/startup.py                    # on the GPU machine: launches, CuPy, Jitify too

Every measurement runs in a fresh process. Compile modes are timed from the call to the compiled
bytes, with imports and header-root discovery done before (reported apart as "import");
launch modes are timed from ``RawKernel(...)`` to the finished launch with cupy and
cupy_rawcode imported, so lazy imports and discovery count. Each scenario is repeated --runs
times and reported as median and min-max. Cold runs append a unique comment to the source so that no cache (ours,
CuPy's, NVRTC's) can answer. Targets are reported as pass/miss, never asserted.
Writes bench/results/startup-<kind>.{json,md,png}.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / "corpus"
CUB = ["block_reduce.cu", "block_scan.cu", "radix_sort.cu", "warp_reduce.cu"]
SCENARIOS = ("cold", "jitify", "warm", "inproc", "nth", "import", "process", "many", "pch")
WORKERS = (1, 2, 4, 8, 16)

# One child program per measurement; it prints one JSON line. Imports are outside the timing.
CHILD = r"""
import json, os, sys, time
mode, path, arch = sys.argv[1], sys.argv[2], sys.argv[3]
src = open(path).read() + os.environ.get("BENCH_NONCE", "")
out = {}
if mode in ("floor", "rawcode-compile", "nth", "inproc"):
    # Not timed, the same for every mode: imports and finding the header roots (the floor
    # needs the same include paths). Reported separately under "import" and "setup".
    t0 = time.perf_counter()
    import cuda.core, concurrent.futures, cupy_rawcode.orchestrator.compiling, cupy_rawcode.headers.closure
    import cupy_rawcode.key.manifest, cupy_rawcode.store.directory, cupy_rawcode.store.memory
    import cupy_rawcode.compiler.nvrtc, cupy_rawcode.compiler.strip, cupy_rawcode.ground.fsutil  # a miss's modules
    from cupy_rawcode.toolkit.record import toolchain
    toolchain()
    out["setup"] = time.perf_counter() - t0
if mode == "import":
    t0 = time.perf_counter(); import cupy; t1 = time.perf_counter()
    import cupy_rawcode; t2 = time.perf_counter()
    import cuda.core; t3 = time.perf_counter()
    import concurrent.futures, cupy_rawcode.orchestrator.compiling, cupy_rawcode.headers.closure, cupy_rawcode.key.manifest
    import cupy_rawcode.store.directory, cupy_rawcode.store.memory, cupy_rawcode.kernel
    out = {"cupy": t1 - t0, "cupy_rawcode": t2 - t1, "cuda_core": t3 - t2,
           "first_use": time.perf_counter() - t3}
elif mode == "floor":
    from cuda.core import Program, ProgramOptions
    from cupy_rawcode.toolkit.record import toolchain
    dirs = [d.path for d in toolchain().system_dirs if d.tag != "shim"]
    if "#include <type_traits>" in src or "#include <limits>" in src:
        dirs.append(str(toolchain().system_dirs[-1].path))  # std headers need the shims
    opts = ProgramOptions(arch=arch, std="c++17", include_path=dirs)
    t0 = time.perf_counter(); Program(src, "c++", opts).compile("cubin")
    out["seconds"] = time.perf_counter() - t0
elif mode == "rawcode-compile":
    import cupy_rawcode
    from cupy_rawcode.orchestrator import compiling as program
    from cupy_rawcode.key.request import make_request
    t0 = time.perf_counter()
    r = program.compile_request(make_request(src, arch=arch))
    out.update(seconds=time.perf_counter() - t0, hit=r.hit, key_s=r.key_seconds)
elif mode == "inproc":
    # Cold compiles of unique sources, alternating bare NVRTC and cupy-rawcode in one process
    # after one untimed warm-up of each: the per-kernel cost without first-call costs.
    from cuda.core import Program, ProgramOptions
    from cupy_rawcode.orchestrator import compiling as program
    from cupy_rawcode.key.request import make_request
    dirs = [d.path for d in toolchain().system_dirs]
    floor, ours = [], []
    for i in range(6):
        t0 = time.perf_counter()
        Program(src + "//f%d" % i, "c++", ProgramOptions(arch=arch, std="c++17", include_path=dirs)).compile("cubin")
        t1 = time.perf_counter()
        program.compile_request(make_request(src + "//r%d" % i, arch=arch))
        t2 = time.perf_counter()
        if i:
            floor.append(t1 - t0); ours.append(t2 - t1)
    import statistics
    out.update(seconds=statistics.median(ours) / statistics.median(floor),
               floor=statistics.median(floor), ours=statistics.median(ours))
elif mode == "nth":
    import cupy_rawcode
    n = int(sys.argv[4]); times = []
    for i in range(n):
        s = src.replace("BlockReduce<float, 128>", "BlockReduce<float, %d>" % (128 + 32 * i))
        s = s.replace("kern", "kern%d" % i)
        t0 = time.perf_counter(); cupy_rawcode.compile(s, arch=arch); times.append(time.perf_counter() - t0)
    out.update(seconds=times[-1], all=times)
elif mode in ("rawcode-launch", "cupy-launch", "jitify-launch"):
    import numpy as np, cupy as cp
    x = cp.asarray(np.random.default_rng(0).standard_normal(4096).astype(np.float32))
    y = cp.zeros(4096, dtype=cp.float32); n = np.int32(4096)
    cp.cuda.Device().synchronize()
    if mode == "rawcode-launch":
        import cupy_rawcode
        # from the attribute access on: it imports kernel/, as a user's first RawKernel does
        t0 = time.perf_counter(); k = cupy_rawcode.RawKernel(src, "kern")
        from cupy_rawcode.kernel.building import _compute_capability
        k._build.device_code(_compute_capability())  # the code bytes: all that is ours
        out["to_code"] = time.perf_counter() - t0
        k.kernel                                    # + cuModuleLoadData through CuPy
    else:
        import warnings; warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        k = cp.RawKernel(src, "kern", jitify=(mode == "jitify-launch")); k.kernel
    t1 = time.perf_counter()
    k((32,), (128,), (x, y, n)); cp.cuda.Device().synchronize()
    out.update(seconds=time.perf_counter() - t0, before_launch=t1 - t0)
print(json.dumps(out))
"""


# Import to launch as a user sees it: the whole process, timed from outside by the parent.
# Inside, perf_counter stamps split it (interpreter start is the rest of the outside time).
PROCESS_CHILD = r"""
import time; t0 = time.perf_counter()
import json, os, sys
mode, path, split = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
src = open(path).read() + os.environ.get("BENCH_NONCE", "")
ph = {}
import numpy as np, cupy as cp; ph["import cupy"] = time.perf_counter()
x = cp.asarray(np.random.default_rng(0).standard_normal(4096).astype(np.float32))
y = cp.zeros(4096, dtype=cp.float32); n = np.int32(4096)
ph["CUDA context + arrays"] = time.perf_counter()
if mode == "rawcode":
    import cupy_rawcode; ph["import cupy_rawcode"] = time.perf_counter()
    k = cupy_rawcode.RawKernel(src, "kern")
    if split:  # cold only: the discovery a first launch does anyway, timed apart
        from cupy_rawcode.toolkit.record import toolchain
        toolchain(); ph["toolchain discovery"] = time.perf_counter()
        from cupy_rawcode.kernel.building import _compute_capability
        k._build.device_code(_compute_capability()); ph["key + compile"] = time.perf_counter()
    k.kernel
else:
    k = cp.RawKernel(src, "kern"); k.kernel
ph["compile + load" if mode != "rawcode" or not split else "module load"] = time.perf_counter()
k((32,), (128,), (x, y, n)); cp.cuda.Device().synchronize()
ph["launch + sync"] = time.perf_counter()
stamps, last, out = sorted(ph.items(), key=lambda kv: kv[1]), t0, {}
for name, t in stamps:
    out[name], last = t - last, t
print(json.dumps({"inside": time.perf_counter() - t0, "phases": out}))
"""

# Many kernels defined, then launched (or compiled for --arch without a GPU), cold.
MANY_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[4], "bench"))
from many_kernels import kernels
mode, workers, arch = sys.argv[1], sys.argv[2], sys.argv[3]
launch = arch == "device"
nonce = os.environ.get("BENCH_NONCE", "")
import numpy as np
out = {}
def swap_used():
    try:
        info = dict(l.split(":", 1) for l in open("/proc/meminfo"))
        return (int(info["SwapTotal"].split()[0]) - int(info["SwapFree"].split()[0])) * 1024
    except Exception:
        return None
if launch:
    import cupy as cp
    x = cp.asarray(np.random.default_rng(0).standard_normal(4096).astype(np.float32))
    y = cp.zeros(4096, dtype=cp.float32); n = np.int32(4096)
    cp.cuda.Device().synchronize()
swap0 = swap_used()
t0 = time.perf_counter()
if mode == "cupy":
    ks = [(name, cp.RawKernel(src + nonce, "kern"), th) for name, src, th in kernels()]
else:
    import cupy_rawcode
    ks = [(name, cupy_rawcode.RawKernel(src + nonce, "kern"), th) for name, src, th in kernels()]
    if mode == "warmup":
        w = None if workers == "default" else int(workers)
        s = cupy_rawcode.warmup(*[k for _, k, _ in ks], workers=w,
                                arch=None if launch else arch)
        out.update(warmup_s=s.seconds, workers=s.workers, compiled=len(s.compiled),
                   failed=[f"{i.label}: {i.error[:200]}" for i in s.failed],
                   peak_rss=s.memory.peak, worker_peak_rss=s.memory.worker_peak)
t1 = time.perf_counter()
failed = []
for name, k, th in ks:
    try:
        if launch:
            grid = (4096 + 511) // 512 if name.startswith("radix") else (4096 + th - 1) // th
            k((grid,), (th,), (x, y, n)); cp.cuda.Device().synchronize()
        else:
            k.compile(arch=arch)
    except Exception as e:
        failed.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
out.update(seconds=time.perf_counter() - t0, launches_s=time.perf_counter() - t1,
           launch_failed=failed, swap_growth=(None if swap0 is None else swap_used() - swap0))
print(json.dumps(out))
"""

# A series of compiles in one process under a PCH mode: total and the last kernel's time.
PCH_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[3], "bench"))
from many_kernels import kernels, shared_prefix
series, arch = sys.argv[1], sys.argv[2]
nonce = os.environ.get("BENCH_NONCE", "")
import cupy_rawcode
from cupy_rawcode.toolkit.record import toolchain
toolchain()
todo = kernels() if series == "distinct" else shared_prefix(12)
times = []
for name, src, _ in todo:
    t = time.perf_counter(); cupy_rawcode.compile(src + nonce, arch=arch)
    times.append(time.perf_counter() - t)
print(json.dumps({"seconds": sum(times), "last": times[-1], "all": times}))
"""


def run_script(script: str, args: list[str], env: dict, timeout: float = 600):
    """Run a child script; (its JSON or {"error": ...}, wall seconds timed from outside)."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"> {timeout:.0f} s"}, time.perf_counter() - t0
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}, wall
    return json.loads(p.stdout.strip().splitlines()[-1]), wall


def child(mode: str, kernel: str, arch: str, env: dict, *extra: str, timeout: float = 600):
    """Run one measurement in a new process: its JSON, or None after `timeout` seconds."""
    try:
        p = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(CORPUS / kernel), arch, *extra],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def stats(values: list[float]) -> dict:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": len(values),
        "values": values,
    }


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="cupy-rawcode-bench-"))
        self.rows: list[dict] = []

    def env(self, cache: str, **extra) -> dict:
        e = {
            **os.environ,
            "CUPY_RAWCODE_CACHE_DIR": str(self.tmp / cache),
            "CUPY_CACHE_DIR": str(self.tmp / (cache + "-cupy")),
            "PYTHONPATH": str(ROOT),
        }
        e.pop("BENCH_NONCE", None)
        return {**e, **extra}

    def measure(self, scenario, mode, kernel, cache, *extra, **kw):
        """Time `runs` new processes; `also` = {scenario: key} adds rows from the same runs."""
        return self.side_by_side(
            [dict(scenario=scenario, mode=mode, kernel=kernel, cache=cache, extra=extra, **kw)]
        )[0]

    def side_by_side(self, specs: list[dict]) -> list[dict]:
        """Run several series round-robin (run i of each, then run i+1 of each), so that drift
        on a shared machine hits every mode alike; a series stops at its first failure."""
        runs = max(s.get("runs") or self.args.runs for s in specs)
        state = [
            {"values": [], "errors": [], "more": {k: [] for k in (s.get("also") or {})}}
            for s in specs
        ]
        for i in range(runs):
            for spec, st in zip(specs, state, strict=True):
                if st["errors"] or i >= (spec.get("runs") or self.args.runs):
                    continue
                fresh = spec.get("fresh", True)
                cache = spec["cache"]
                env = self.env(f"{cache}-{i}" if fresh else cache, **(spec.get("env_extra") or {}))
                if fresh:
                    env["BENCH_NONCE"] = f"\n// bench run {uuid.uuid4().hex}\n"
                timeout = spec.get("timeout", 600)
                out = child(
                    spec["mode"],
                    spec["kernel"],
                    self.args.arch,
                    env,
                    *spec.get("extra", ()),
                    timeout=timeout,
                )
                if out is None:
                    st["errors"].append(f"> {timeout:.0f} s")
                elif "error" in out:
                    st["errors"].append(out["error"])
                else:
                    st["values"].append(out[spec.get("key", "seconds")])
                    for s, k in (spec.get("also") or {}).items():
                        st["more"][s].append(out[k])
        rows = []
        for spec, st in zip(specs, state, strict=True):
            mode, kernel = spec["mode"], spec["kernel"]
            for s, vals in st["more"].items():
                if vals:
                    self.rows.append(
                        {
                            "scenario": s,
                            "mode": mode,
                            "kernel": kernel,
                            **stats(vals),
                            "error": None,
                        }
                    )
            values, errors = st["values"], st["errors"]
            row = {
                "scenario": spec["scenario"],
                "mode": mode,
                "kernel": kernel,
                **(stats(values) if values else {}),
                "error": errors[0] if errors else None,
            }
            self.rows.append(row)
            rows.append(row)
            shown = f"{row['median']:.4f} s" if values else row["error"]
            print(f"  {spec['scenario']:7s} {mode:16s} {kernel:16s} {shown}", flush=True)
        return rows

    def warm(self, scenario, kernel, modes: list[tuple[str, str, dict | None]]):
        """Populate one cache per mode (not timed), then time new processes that hit them,
        the modes side by side. ``modes``: (mode, cache, also)."""
        for mode, cache, _ in modes:
            child(mode, kernel, self.args.arch, self.env(cache))
        return self.side_by_side(
            [
                dict(scenario=scenario, mode=m, kernel=kernel, cache=c, fresh=False, also=also)
                for m, c, also in modes
            ]
        )

    def process(self, kernel: str, cold_runs: int, warm_runs: int) -> None:
        """Import to launch in a whole new process, cupy-rawcode and CuPy interleaved: cold
        (fresh cache directories, so no toolchain record either, and a unique source), then
        warm (caches filled once, untimed)."""
        path = str(CORPUS / kernel)
        for phase, runs in (("cold", cold_runs), ("warm", warm_runs)):
            walls = {"rawcode": [], "cupy": []}
            phases = {"rawcode": [], "cupy": []}
            errors = {}
            if phase == "warm":
                for mode in walls:
                    run_script(PROCESS_CHILD, [mode, path, "0"], self.env(f"pw-{mode}-{kernel}"))
            for i in range(runs):
                for mode in walls:
                    if mode in errors:
                        continue
                    if phase == "cold":
                        env = self.env(f"pc-{mode}-{kernel}-{i}")
                        env["BENCH_NONCE"] = f"\n// bench run {uuid.uuid4().hex}\n"
                    else:
                        env = self.env(f"pw-{mode}-{kernel}")
                    split = "1" if phase == "cold" and mode == "rawcode" else "0"
                    out, wall = run_script(PROCESS_CHILD, [mode, path, split], env)
                    if "error" in out:
                        errors[mode] = out["error"]
                        continue
                    walls[mode].append(wall)
                    phases[mode].append(
                        {"interpreter + exit": wall - out["inside"], **out["phases"]}
                    )
            for mode in walls:
                row = {
                    "scenario": f"process-{phase}",
                    "mode": f"{mode}-process",
                    "kernel": kernel,
                    **(stats(walls[mode]) if walls[mode] else {}),
                    "error": errors.get(mode),
                }
                if phases[mode]:
                    names = list(phases[mode][0])
                    row["phases"] = {
                        n: statistics.median(p.get(n, 0.0) for p in phases[mode]) for n in names
                    }
                self.rows.append(row)
                shown = f"{row['median']:.3f} s" if walls[mode] else row["error"]
                print(f"  process-{phase} {mode:8s} {kernel:16s} {shown}", flush=True)

    def many(self, modes: list[tuple[str, str]], runs: int, arch: str) -> None:
        """The 20 kernels of many_kernels.py, defined then launched, cold, one new process per
        measurement; the modes interleaved run by run."""
        state = {m: {"values": [], "detail": None, "error": None} for m in modes}
        for i in range(runs):
            for mode, workers in modes:
                st = state[(mode, workers)]
                if st["error"]:
                    continue
                env = self.env(f"many-{mode}-{workers}-{i}")
                env["BENCH_NONCE"] = f"\n// bench run {uuid.uuid4().hex}\n"
                out, wall = run_script(
                    MANY_CHILD, [mode, workers, arch, str(ROOT)], env, timeout=300
                )
                if "error" in out:
                    st["error"] = out["error"]
                    continue
                st["values"].append(out["seconds"])
                st["detail"] = st["detail"] or {**out, "process_wall": wall}
        for (mode, workers), st in state.items():
            name = mode if mode != "warmup" else f"warmup-{workers}"
            row = {
                "scenario": "many",
                "mode": name,
                "kernel": "20 kernels",
                **(stats(st["values"]) if st["values"] else {}),
                "error": st["error"],
                "detail": st["detail"],
            }
            self.rows.append(row)
            shown = f"{row['median']:.2f} s" if st["values"] else row["error"]
            print(f"  many {name:16s} {shown}", flush=True)

    def pch(self, runs: int, arch: str) -> None:
        """Series of compiles in one process, PCH auto against off, interleaved: the 20
        distinct kernels, and 12 kernels sharing their header prefix."""
        for series in ("distinct", "shared"):
            vals = {m: {"seconds": [], "last": []} for m in ("auto", "0")}
            errors = {}
            for i in range(runs):
                for mode in vals:
                    env = self.env(f"pch-{series}-{mode}-{i}", CUPY_RAWCODE_PCH=mode)
                    env["BENCH_NONCE"] = f"\n// bench run {uuid.uuid4().hex}\n"
                    out, _ = run_script(PCH_CHILD, [series, arch, str(ROOT)], env)
                    if "error" in out:
                        errors[mode] = out["error"]
                        continue
                    vals[mode]["seconds"].append(out["seconds"])
                    vals[mode]["last"].append(out["last"])
                    vals[mode].setdefault("each", out["all"])  # the first run's, per kernel
            for mode, v in vals.items():
                for key, scen in (("seconds", f"pch-{series}"), ("last", f"pch-{series}-last")):
                    row = {
                        "scenario": scen,
                        "mode": f"pch-{mode}",
                        "kernel": series,
                        **(stats(v[key]) if v[key] else {}),
                        "error": errors.get(mode),
                    }
                    if key == "seconds" and "each" in v:
                        row["each"] = v["each"]
                    self.rows.append(row)
                    shown = f"{row['median']:.2f} s" if v[key] else row["error"]
                    print(f"  {scen:18s} pch={mode:4s} {shown}", flush=True)


def values_of(rows, scenario, mode, kernel) -> list[float] | None:
    for r in rows:
        if (r["scenario"], r["mode"], r["kernel"]) == (scenario, mode, kernel) and "values" in r:
            return r["values"]
    return None


def median_of(rows, scenario, mode, kernel):
    for r in rows:
        if (r["scenario"], r["mode"], r["kernel"]) == (scenario, mode, kernel) and "median" in r:
            return r["median"]
    return None


def targets(rows, compile_only: bool) -> list[dict]:
    out = []

    def ratio(name, num, den, limit, why=""):
        if num is None or den is None:
            out.append({"target": name, "value": None, "limit": limit, "status": "not measured"})
            return
        v = num / den
        out.append(
            {
                "target": name,
                "value": v,
                "limit": limit,
                "status": "pass" if v <= limit else f"miss by {v / limit - 1:.0%}",
                "why": why,
            }
        )

    for k in CUB + ["plain.cu"]:
        # runs were interleaved: the median of the per-run ratios resists drift on the host
        # better than the ratio of the medians, which is shown beside it
        ours, floor = (values_of(rows, "cold", m, k) for m in ("rawcode-compile", "floor"))
        name = f"cold {k}: cupy-rawcode / bare NVRTC (median of paired runs)"
        if ours and floor and len(ours) == len(floor):
            v = statistics.median(a / b for a, b in zip(ours, floor, strict=True))
            out.append(
                {
                    "target": name,
                    "value": v,
                    "limit": 1.05,
                    "status": ("pass" if v <= 1.05 else f"miss by {v / 1.05 - 1:.0%}")
                    + f" (ratio of medians {statistics.median(ours) / statistics.median(floor):.3f})",
                }
            )
        else:
            ratio(
                name,
                median_of(rows, "cold", "rawcode-compile", k),
                median_of(rows, "cold", "floor", k),
                1.05,
            )
    for k in ("plain.cu", "block_reduce.cu"):
        v = median_of(rows, "inproc", "inproc", k)
        if v is not None:
            out.append(
                {
                    "target": f"cold {k} in a warmed-up process: cupy-rawcode / bare NVRTC",
                    "value": v,
                    "limit": 1.05,
                    "status": "pass" if v <= 1.05 else f"miss by {v / 1.05 - 1:.0%}",
                }
            )
    ratio(
        "Nth distinct CUB kernel (PCH) / bare NVRTC",
        median_of(rows, "nth", "nth", "block_reduce.cu"),
        median_of(rows, "cold", "floor", "block_reduce.cu"),
        0.5,
    )
    for phase in ("cold", "warm"):
        for k in sorted({r["kernel"] for r in rows if r["scenario"] == f"process-{phase}"}):
            ours = values_of(rows, f"process-{phase}", "rawcode-process", k)
            cupy = values_of(rows, f"process-{phase}", "cupy-process", k)
            name = f"whole process {phase} {k}: cupy-rawcode / CuPy (median of paired runs)"
            if ours and cupy and len(ours) == len(cupy):
                v = statistics.median(a / b for a, b in zip(ours, cupy, strict=True))
                out.append(
                    {
                        "target": name,
                        "value": v,
                        "limit": 1.05,
                        "status": ("pass" if v <= 1.05 else f"miss by {v / 1.05 - 1:.0%}")
                        + f" ({statistics.median(ours):.3f} s against {statistics.median(cupy):.3f} s)",
                    }
                )
            elif ours or cupy:
                err = [
                    r["error"]
                    for r in rows
                    if r["scenario"] == f"process-{phase}" and r["kernel"] == k and r.get("error")
                ]
                out.append(
                    {
                        "target": name,
                        "value": None,
                        "limit": 1.05,
                        "status": "not compared: " + "; ".join(err)[:200],
                    }
                )
    if any(r["scenario"] == "many" for r in rows):
        seq = median_of(rows, "many", "cupy", "20 kernels")
        for mode in sorted(
            {r["mode"] for r in rows if r["scenario"] == "many" and r["mode"].startswith("warmup")}
        ):
            ratio(
                f"20 kernels cold, {mode} / CuPy sequential",
                median_of(rows, "many", mode, "20 kernels"),
                seq,
                0.2,
            )
        ratio(
            "20 kernels cold, cupy-rawcode sequential / CuPy sequential",
            median_of(rows, "many", "rawcode", "20 kernels"),
            seq,
            1.05,
        )
    for series, scen, limit in (
        ("distinct", "pch-distinct", 1.0),
        ("shared", "pch-shared", None),
        ("shared", "pch-shared-last", 0.2),
    ):
        auto = median_of(rows, scen, "pch-auto", series)
        off = median_of(rows, scen, "pch-0", series)
        what = {
            "pch-distinct": "20 distinct kernels, series",
            "pch-shared": "12 kernels sharing a prefix, series",
            "pch-shared-last": "12 kernels sharing a prefix, the last one",
        }[scen]
        if limit is None:
            if auto is not None and off:
                out.append(
                    {
                        "target": f"PCH auto / off: {what}",
                        "value": auto / off,
                        "limit": "reported",
                        "status": "reported",
                    }
                )
        elif auto is not None or off is not None:
            ratio(f"PCH auto / off: {what}", auto, off, limit)
    imp = median_of(rows, "import", "import", "plain.cu")
    out.append(
        {
            "target": "import cupy_rawcode adds (s)",
            "value": imp,
            "limit": 0.030,
            "status": "not measured" if imp is None else ("pass" if imp <= 0.030 else "miss"),
        }
    )
    if not compile_only:
        for k in CUB:
            ratio(
                f"warm {k}: cupy-rawcode / CuPy",
                median_of(rows, "warm", "rawcode-launch", k),
                median_of(rows, "warm", "cupy-launch", k),
                0.8,
            )
        for k in sorted({r["kernel"] for r in rows if r["scenario"] == "warm-pre"}):
            pre = median_of(rows, "warm-pre", "rawcode-launch", k)
            code = median_of(rows, "warm-to-code", "rawcode-launch", k)
            if pre is None or code is None:
                continue
            ok = "pass" if pre <= 0.005 else f"miss by {(pre - 0.005) * 1e3:.2f} ms"
            out.append(
                {
                    "target": f"warm {k}: before the launch itself (s)",
                    "value": pre,
                    "limit": 0.005,
                    "status": f"{ok}, {pre * 1e3:.2f} ms (ours to the code bytes "
                    f"{code * 1e3:.1f} ms "
                    f"{'pass' if code <= 0.005 else 'miss'}; CuPy's module load "
                    f"{(pre - code) * 1e3:.1f} ms)",
                }
            )
        for k in ("plain.cu", "block_reduce.cu"):
            j = [
                r
                for r in rows
                if r["scenario"] == "cold" and r["mode"] == "jitify-launch" and r["kernel"] == k
            ]
            raw = median_of(rows, "cold", "rawcode-launch", k)
            if j and raw:
                jt = j[0].get("median")
                text = f">= {j[0]['error'].strip('> s')} s" if jt is None else f"{jt:.2f} s"
                lower = float(j[0]["error"].strip("> s")) if jt is None else jt
                out.append(
                    {
                        "target": f"cold {k}: CuPy jitify=True / cupy-rawcode",
                        "value": lower / raw,
                        "limit": 100,
                        "status": f"{'>= ' if jt is None else ''}{lower / raw:.0f}x "
                        f"(jitify {text}, cupy-rawcode {raw:.2f} s)",
                    }
                )
    return out


def machine() -> dict:
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    sys.path.insert(0, str(ROOT))
    try:
        from cupy_rawcode.toolkit.record import toolchain

        tc = toolchain()
        info.update(
            nvrtc=tc.nvrtc_version_str, cccl=tc.cccl_version, header_sources=",".join(tc.sources)
        )
        import cuda.core

        info["cuda_core"] = cuda.core.__version__
    except Exception as e:  # pragma: no cover - reported, not fatal
        info["toolchain_error"] = str(e)
    try:
        import cupy

        info["cupy"] = cupy.__version__
        props = cupy.cuda.runtime.getDeviceProperties(0)
        info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    except Exception:
        info["gpu"] = None
    return info


def table(rows, tgts, info) -> str:
    lines = [
        f"# Startup bench ({info['date']})",
        "",
        "machine: " + ", ".join(f"{k}={v}" for k, v in info.items() if k != "date"),
        "",
        "| scenario | mode | kernel | median s | min-max s | runs |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "median" in r:
            lines.append(
                f"| {r['scenario']} | {r['mode']} | {r['kernel']} | {r['median']:.4f} | "
                f"{r['min']:.4f}-{r['max']:.4f} | {r['runs']} |"
            )
        else:
            lines.append(f"| {r['scenario']} | {r['mode']} | {r['kernel']} | {r['error']} | | |")
    procs = [r for r in rows if r.get("phases")]
    if procs:
        lines += [
            "",
            "Where a whole process's time goes (medians, seconds; interpreter + exit is "
            "the outside time less the child's own):",
            "",
        ]
        for r in procs:
            parts = ", ".join(f"{n} {v:.3f}" for n, v in r["phases"].items())
            lines.append(f"- {r['scenario']} {r['mode']} {r['kernel']}: {parts}")
    many = [r for r in rows if r["scenario"] == "many" and r.get("detail")]
    if many:
        lines += [
            "",
            "| many: mode | workers | warmup s | launches s | pool peak RSS MiB | "
            "worker peak MiB | swap growth MiB | failed |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]

        def mib(v):
            return "" if v is None else f"{v / (1 << 20):.0f}"

        for r in many:
            d = r["detail"]
            fails = d.get("failed", []) + d.get("launch_failed", [])
            lines.append(
                f"| {r['mode']} | {d.get('workers', '')} | {d['warmup_s']:.2f} | "
                if "warmup_s" in d
                else f"| {r['mode']} | | | "
            )
            lines[-1] += (
                f"{d['launches_s']:.2f} | {mib(d.get('peak_rss'))} | "
                f"{mib(d.get('worker_peak_rss'))} | {mib(d.get('swap_growth'))} | "
                f"{len(fails)}{': ' + '; '.join(fails)[:300] if fails else ''} |"
            )
    lines += ["", "| target | value | limit | status |", "| --- | --- | --- | --- |"]
    for t in tgts:
        v = "" if t["value"] is None else f"{t['value']:.3f}"
        lines.append(f"| {t['target']} | {v} | {t['limit']} | {t['status']} |")
    return "\n".join(lines) + "\n"


# the charts a reader looks at first: one panel per scenario, bars grouped by kernel, one colour
# per mode; the target drawn over cupy-rawcode's bar as a multiple of the mode it is judged by
PANELS = (
    # scenario, title, (mode, label) in bar order, target: (limit, judged against) or None
    (
        "cold",
        "cold compile, fresh process",
        (
            ("floor", "bare NVRTC (floor)"),
            ("rawcode-compile", "cupy-rawcode"),
            ("cupy-launch", "CuPy"),
        ),
        (1.05, "floor", "rawcode-compile"),
    ),
    (
        "warm",
        "warm first launch, new process",
        (("rawcode-launch", "cupy-rawcode"), ("cupy-launch", "CuPy")),
        (0.8, "cupy-launch", "rawcode-launch"),
    ),
    (
        "process-cold",
        "whole process, cold",
        (("rawcode-process", "cupy-rawcode"), ("cupy-process", "CuPy")),
        (1.05, "cupy-process", "rawcode-process"),
    ),
    (
        "process-warm",
        "whole process, warm",
        (("rawcode-process", "cupy-rawcode"), ("cupy-process", "CuPy")),
        (1.05, "cupy-process", "rawcode-process"),
    ),
    (
        "many",
        "20 distinct kernels defined then launched, cold",
        (("cupy", "CuPy"), ("rawcode", "cupy-rawcode"), ("warmup-default", "warmup()")),
        (0.2, "cupy", "warmup-default"),
    ),
)
COLOURS = {
    "bare NVRTC (floor)": "#7f7f7f",
    "cupy-rawcode": "#1f77b4",
    "warmup()": "#2ca02c",
    "CuPy": "#ff7f0e",
}


def chart(rows, info: dict, path: Path) -> None:
    """Bars grouped by kernel, one colour per mode, titled with the machine and the date."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart")
        return
    med = {(r["scenario"], r["mode"], r["kernel"]): r for r in rows if r.get("median")}
    panels = [p for p in PANELS if any(k[0] == p[0] and k[1] in dict(p[2]) for k in med)]
    if not panels:
        return
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 3.2 * len(panels)), squeeze=False)
    for ax, (scenario, title, modes, target) in zip(axes[:, 0], panels, strict=True):
        kernels = sorted({k for s, m, k in med if s == scenario and m in dict(modes)})
        width = 0.8 / len(modes)
        for m, (mode, label) in enumerate(modes):
            xs, ys, lo, hi = [], [], [], []
            for i, k in enumerate(kernels):
                r = med.get((scenario, mode, k))
                if r is None:
                    continue
                xs.append(i + (m - (len(modes) - 1) / 2) * width)
                ys.append(r["median"])
                lo.append(r["median"] - r["min"])
                hi.append(r["max"] - r["median"])
            ax.bar(xs, ys, width, yerr=[lo, hi], label=label, color=COLOURS[label], capsize=2)
        if target:
            limit, against, over = target
            ours = [mode for mode, _ in modes].index(over)
            for i, k in enumerate(kernels):
                ref = med.get((scenario, against, k))
                if ref is None:
                    continue
                x = i + (ours - (len(modes) - 1) / 2) * width
                ax.hlines(limit * ref["median"], x - width / 2, x + width / 2, colors="black")
            ax.plot([], [], color="black", label=f"target: {limit}x {dict(modes)[against]}")
        ax.set_xticks(range(len(kernels)), kernels, fontsize=8)
        ax.set_ylabel("seconds (median, min-max)")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    machine = info.get("gpu") or f"{info.get('cpu_count')}-core host, no GPU"
    fig.suptitle(
        f"cupy-rawcode startup: {machine}, NVRTC {info.get('nvrtc')}, CCCL {info.get('cccl')}, "
        f"{str(info.get('date', ''))[:10]}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def rechart(json_path: Path) -> None:
    """Draw the chart of a results JSON again (no GPU needed)."""
    data = json.loads(json_path.read_text())
    chart(data["rows"], data["machine"], json_path.with_suffix(".png"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="no GPU: compile and cache only")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nth", type=int, default=5, help="N for the Nth-kernel scenario")
    ap.add_argument("--jitify-timeout", type=float, default=60.0)
    ap.add_argument("--kernels", default=",".join(sorted(p.name for p in CORPUS.glob("*.cu"))))
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="which scenarios to run (a long suite can be split over several runs)",
    )
    ap.add_argument("--name", help="results file name part (default: cpu or gpu)")
    ap.add_argument("--process-runs", type=int, default=3, help="cold runs of the process scenario")
    ap.add_argument(
        "--many-workers",
        default=",".join(map(str, WORKERS)),
        help="worker counts for warmup() in the many scenario ('default' too)",
    )
    ap.add_argument("--many-runs", type=int, default=1)
    ap.add_argument("--pch-runs", type=int, default=1)
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="combine the rows of earlier runs (same machine) into one report; "
        "where two runs measured the same thing, the first file given wins",
    )
    ap.add_argument(
        "--rechart", nargs="+", metavar="JSON", help="only draw the charts of these results again"
    )
    args = ap.parse_args(argv)
    if args.rechart:
        for p in args.rechart:
            rechart(Path(p))
        return 0
    kind = args.name or ("cpu" if args.compile_only else "gpu")
    if args.merge:
        runs = [json.loads(Path(p).read_text()) for p in args.merge]
        rows, seen = [], set()
        for r in (r for run in runs for r in run["rows"]):  # the first file wins a duplicate
            if (r["scenario"], r["mode"], r["kernel"]) not in seen:
                seen.add((r["scenario"], r["mode"], r["kernel"]))
                rows.append(r)
        info = {**runs[0]["machine"], "merged_from": [Path(p).name for p in args.merge]}
        return report(
            rows, info, args, kind, all(run["args"].get("compile_only", False) for run in runs)
        )
    # byte-compile the package as `pip install` does: with PYTHONDONTWRITEBYTECODE set (as on
    # the bench machines) a source checkout would otherwise be recompiled in every process
    compileall.compile_dir(str(ROOT / "cupy_rawcode"), quiet=1)
    kernels = args.kernels.split(",")
    scenarios = set(args.scenarios.split(","))
    unknown = scenarios - set(SCENARIOS)
    if unknown:
        ap.error(f"unknown scenarios: {', '.join(sorted(unknown))} (known: {', '.join(SCENARIOS)})")
    b = Bench(args)
    info = machine()
    print("machine:", json.dumps(info))
    if "cold" in scenarios:
        print("cold (fresh caches, unique source per run; modes interleaved):")
        for k in kernels:
            modes = [("floor", "floor"), ("rawcode-compile", "raw")]
            if not args.compile_only:
                modes += [("rawcode-launch", "rawl"), ("cupy-launch", "cupy")]
            b.side_by_side([dict(scenario="cold", mode=m, kernel=k, cache=c) for m, c in modes])
    if "jitify" in scenarios and not args.compile_only:
        for k in [k for k in ("plain.cu", "block_reduce.cu") if k in kernels]:
            b.measure("cold", "jitify-launch", k, "jit", runs=1, timeout=args.jitify_timeout)
    if "warm" in scenarios:
        print("warm (cache hit, new process; modes interleaved):")
        for k in kernels:
            modes = [("rawcode-compile", f"warm-{k}", None)]
            if not args.compile_only:
                modes += [
                    (
                        "rawcode-launch",
                        f"warml-{k}",
                        {"warm-pre": "before_launch", "warm-to-code": "to_code"},
                    ),
                    ("cupy-launch", f"warmc-{k}", {"warm-pre-cupy": "before_launch"}),
                ]
            b.warm("warm", k, modes)
    if "inproc" in scenarios:
        print("cold, in one process (ratio cupy-rawcode / bare NVRTC, first-call costs excluded):")
        for k in ("plain.cu", "block_reduce.cu"):
            b.measure(
                "inproc",
                "inproc",
                k,
                "inproc",
                runs=max(1, args.runs // 2),
                env_extra={"CUPY_RAWCODE_PCH": "0"},
            )  # PCH would flatter the series
    if "nth" in scenarios:
        print(f"Nth distinct CUB kernel in one process (N={args.nth}):")
        b.side_by_side(
            [
                dict(
                    scenario="nth",
                    mode="nth",
                    kernel="block_reduce.cu",
                    cache="nth",
                    extra=(str(args.nth),),
                ),
                dict(
                    scenario="nth-nopch",
                    mode="nth",
                    kernel="block_reduce.cu",
                    cache="nthp",
                    extra=(str(args.nth),),
                    env_extra={"CUPY_RAWCODE_PCH": "0"},
                ),
            ]
        )
    if "process" in scenarios and not args.compile_only:
        print("whole process, import to launch, timed from outside (modes interleaved):")
        for k in kernels:
            b.process(k, args.process_runs, args.runs)
    if "many" in scenarios:
        print("20 distinct kernels, defined then launched, cold:")
        modes = [] if args.compile_only else [("cupy", "-")]
        modes += [("rawcode", "-")] + [("warmup", w) for w in args.many_workers.split(",") if w]
        b.many(modes, args.many_runs, args.arch if args.compile_only else "device")
    if "pch" in scenarios:
        print("PCH auto against off, series of compiles in one process:")
        b.pch(args.pch_runs, args.arch)
    if "import" in scenarios:
        print("import:")
        b.measure(
            "import",
            "import",
            "plain.cu",
            "imp",
            key="cupy_rawcode",
            also={
                "import-cupy": "cupy",
                "import-cuda.core": "cuda_core",
                "import-first-use": "first_use",
            },
        )
    return report(b.rows, info, args, kind, args.compile_only)


def report(rows, info, args, kind: str, compile_only: bool) -> int:
    """Targets, then the JSON, the markdown table and the chart under --out."""
    tgts = targets(rows, compile_only)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"startup-{kind}.json").write_text(
        json.dumps({"machine": info, "args": vars(args), "rows": rows, "targets": tgts}, indent=1)
    )
    text = table(rows, tgts, info)
    (out / f"startup-{kind}.md").write_text(text)
    chart(rows, info, out / f"startup-{kind}.png")
    if os.environ.get("OUT") and out.resolve() != Path(os.environ["OUT"]).resolve():
        import shutil  # the device machine's folder that comes back, when --out is another

        for ext in ("json", "md", "png"):
            if (out / f"startup-{kind}.{ext}").exists():
                shutil.copy(out / f"startup-{kind}.{ext}", os.environ["OUT"])
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
