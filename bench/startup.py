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
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / "corpus"
CUB = ["block_reduce.cu", "block_scan.cu", "radix_sort.cu", "warp_reduce.cu"]
SCENARIOS = ("cold", "jitify", "warm", "inproc", "nth", "import")

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
    import cuda.core, concurrent.futures, cupy_rawcode.program, cupy_rawcode.closure
    import cupy_rawcode.manifest, cupy_rawcode.store.directory, cupy_rawcode.store.memory
    import cupy_rawcode.nvrtc, cupy_rawcode.strip, cupy_rawcode.fsutil  # a miss's modules
    from cupy_rawcode.toolchain import toolchain
    toolchain()
    out["setup"] = time.perf_counter() - t0
if mode == "import":
    t0 = time.perf_counter(); import cupy; t1 = time.perf_counter()
    import cupy_rawcode; t2 = time.perf_counter()
    import cuda.core; t3 = time.perf_counter()
    import concurrent.futures, cupy_rawcode.program, cupy_rawcode.closure, cupy_rawcode.manifest
    import cupy_rawcode.store.directory, cupy_rawcode.store.memory, cupy_rawcode.kernel
    out = {"cupy": t1 - t0, "cupy_rawcode": t2 - t1, "cuda_core": t3 - t2,
           "first_use": time.perf_counter() - t3}
elif mode == "floor":
    from cuda.core import Program, ProgramOptions
    from cupy_rawcode.toolchain import toolchain
    dirs = [d.path for d in toolchain().system_dirs if d.tag != "shim"]
    if "#include <type_traits>" in src or "#include <limits>" in src:
        dirs.append(str(toolchain().system_dirs[-1].path))  # std headers need the shims
    opts = ProgramOptions(arch=arch, std="c++17", include_path=dirs)
    t0 = time.perf_counter(); Program(src, "c++", opts).compile("cubin")
    out["seconds"] = time.perf_counter() - t0
elif mode == "rawcode-compile":
    import cupy_rawcode
    from cupy_rawcode import program
    from cupy_rawcode.request import make_request
    t0 = time.perf_counter()
    r = program.compile_request(make_request(src, arch=arch))
    out.update(seconds=time.perf_counter() - t0, hit=r.hit, key_s=r.key_seconds)
elif mode == "inproc":
    # Cold compiles of unique sources, alternating bare NVRTC and cupy-rawcode in one process
    # after one untimed warm-up of each: the per-kernel cost without first-call costs.
    from cuda.core import Program, ProgramOptions
    from cupy_rawcode import program
    from cupy_rawcode.request import make_request
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
        # from the attribute access on: it imports kernel.py, as a user's first RawKernel does
        t0 = time.perf_counter(); k = cupy_rawcode.RawKernel(src, "kern")
        from cupy_rawcode.kernel import _compute_capability
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


def child(mode: str, kernel: str, arch: str, env: dict, *extra: str, timeout: float = 600):
    """Run one measurement in a new process: its JSON, or None after `timeout` seconds."""
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, mode, str(CORPUS / kernel), arch, *extra],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": len(values), "values": values}


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="cupy-rawcode-bench-"))
        self.rows: list[dict] = []

    def env(self, cache: str, **extra) -> dict:
        e = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(self.tmp / cache),
             "CUPY_CACHE_DIR": str(self.tmp / (cache + "-cupy")), "PYTHONPATH": str(ROOT)}
        e.pop("BENCH_NONCE", None)
        return {**e, **extra}

    def measure(self, scenario, mode, kernel, cache, *extra, **kw):
        """Time `runs` new processes; `also` = {scenario: key} adds rows from the same runs."""
        return self.side_by_side([dict(scenario=scenario, mode=mode, kernel=kernel, cache=cache,
                                       extra=extra, **kw)])[0]

    def side_by_side(self, specs: list[dict]) -> list[dict]:
        """Run several series round-robin (run i of each, then run i+1 of each), so that drift
        on a shared machine hits every mode alike; a series stops at its first failure."""
        runs = max(s.get("runs") or self.args.runs for s in specs)
        state = [{"values": [], "errors": [], "more": {k: [] for k in (s.get("also") or {})}}
                 for s in specs]
        for i in range(runs):
            for spec, st in zip(specs, state):
                if st["errors"] or i >= (spec.get("runs") or self.args.runs):
                    continue
                fresh = spec.get("fresh", True)
                cache = spec["cache"]
                env = self.env(f"{cache}-{i}" if fresh else cache, **(spec.get("env_extra") or {}))
                if fresh:
                    env["BENCH_NONCE"] = f"\n// bench run {uuid.uuid4().hex}\n"
                timeout = spec.get("timeout", 600)
                out = child(spec["mode"], spec["kernel"], self.args.arch, env,
                            *spec.get("extra", ()), timeout=timeout)
                if out is None:
                    st["errors"].append(f"> {timeout:.0f} s")
                elif "error" in out:
                    st["errors"].append(out["error"])
                else:
                    st["values"].append(out[spec.get("key", "seconds")])
                    for s, k in (spec.get("also") or {}).items():
                        st["more"][s].append(out[k])
        rows = []
        for spec, st in zip(specs, state):
            mode, kernel = spec["mode"], spec["kernel"]
            for s, vals in st["more"].items():
                if vals:
                    self.rows.append({"scenario": s, "mode": mode, "kernel": kernel,
                                      **stats(vals), "error": None})
            values, errors = st["values"], st["errors"]
            row = {"scenario": spec["scenario"], "mode": mode, "kernel": kernel,
                   **(stats(values) if values else {}), "error": errors[0] if errors else None}
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
        return self.side_by_side([dict(scenario=scenario, mode=m, kernel=kernel, cache=c,
                                       fresh=False, also=also) for m, c, also in modes])


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
        out.append({"target": name, "value": v, "limit": limit,
                    "status": "pass" if v <= limit else f"miss by {v / limit - 1:.0%}", "why": why})

    for k in CUB + ["plain.cu"]:
        # runs were interleaved: the median of the per-run ratios resists drift on the host
        # better than the ratio of the medians, which is shown beside it
        ours, floor = (values_of(rows, "cold", m, k) for m in ("rawcode-compile", "floor"))
        name = f"cold {k}: cupy-rawcode / bare NVRTC (median of paired runs)"
        if ours and floor and len(ours) == len(floor):
            v = statistics.median(a / b for a, b in zip(ours, floor))
            out.append({"target": name, "value": v, "limit": 1.05,
                        "status": ("pass" if v <= 1.05 else f"miss by {v / 1.05 - 1:.0%}") +
                        f" (ratio of medians {statistics.median(ours) / statistics.median(floor):.3f})"})
        else:
            ratio(name, median_of(rows, "cold", "rawcode-compile", k),
                  median_of(rows, "cold", "floor", k), 1.05)
    for k in ("plain.cu", "block_reduce.cu"):
        v = median_of(rows, "inproc", "inproc", k)
        if v is not None:
            out.append({"target": f"cold {k} in a warmed-up process: cupy-rawcode / bare NVRTC",
                        "value": v, "limit": 1.05, "status": "pass" if v <= 1.05 else
                        f"miss by {v / 1.05 - 1:.0%}"})
    ratio("Nth distinct CUB kernel (PCH) / bare NVRTC",
          median_of(rows, "nth", "nth", "block_reduce.cu"),
          median_of(rows, "cold", "floor", "block_reduce.cu"), 0.5)
    imp = median_of(rows, "import", "import", "plain.cu")
    out.append({"target": "import cupy_rawcode adds (s)", "value": imp, "limit": 0.030,
                "status": "not measured" if imp is None else ("pass" if imp <= 0.030 else "miss")})
    if not compile_only:
        for k in CUB:
            ratio(f"warm {k}: cupy-rawcode / CuPy", median_of(rows, "warm", "rawcode-launch", k),
                  median_of(rows, "warm", "cupy-launch", k), 0.8)
        for k in sorted({r["kernel"] for r in rows if r["scenario"] == "warm-pre"}):
            pre = median_of(rows, "warm-pre", "rawcode-launch", k)
            code = median_of(rows, "warm-to-code", "rawcode-launch", k)
            if pre is None or code is None:
                continue
            ok = "pass" if pre <= 0.005 else f"miss by {(pre - 0.005) * 1e3:.2f} ms"
            out.append({"target": f"warm {k}: before the launch itself (s)", "value": pre,
                        "limit": 0.005,
                        "status": f"{ok}, {pre * 1e3:.2f} ms (ours to the code bytes "
                                  f"{code * 1e3:.1f} ms "
                                  f"{'pass' if code <= 0.005 else 'miss'}; CuPy's module load "
                                  f"{(pre - code) * 1e3:.1f} ms)"})
        for k in ("plain.cu", "block_reduce.cu"):
            j = [r for r in rows if r["scenario"] == "cold" and r["mode"] == "jitify-launch"
                 and r["kernel"] == k]
            raw = median_of(rows, "cold", "rawcode-launch", k)
            if j and raw:
                jt = j[0].get("median")
                text = (f">= {j[0]['error'].strip('> s')} s" if jt is None else f"{jt:.2f} s")
                lower = float(j[0]["error"].strip("> s")) if jt is None else jt
                out.append({"target": f"cold {k}: CuPy jitify=True / cupy-rawcode",
                            "value": lower / raw, "limit": 100,
                            "status": f"{'>= ' if jt is None else ''}{lower / raw:.0f}x "
                                      f"(jitify {text}, cupy-rawcode {raw:.2f} s)"})
    return out


def machine() -> dict:
    info = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "host": platform.node(), "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform()}
    sys.path.insert(0, str(ROOT))
    try:
        from cupy_rawcode.toolchain import toolchain
        tc = toolchain()
        info.update(nvrtc=tc.nvrtc_version_str, cccl=tc.cccl_version,
                    header_sources=",".join(tc.sources))
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
    lines = [f"# Startup bench ({info['date']})", "",
             "machine: " + ", ".join(f"{k}={v}" for k, v in info.items() if k != "date"), "",
             "| scenario | mode | kernel | median s | min-max s | runs |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "median" in r:
            lines.append(f"| {r['scenario']} | {r['mode']} | {r['kernel']} | {r['median']:.4f} | "
                         f"{r['min']:.4f}-{r['max']:.4f} | {r['runs']} |")
        else:
            lines.append(f"| {r['scenario']} | {r['mode']} | {r['kernel']} | {r['error']} | | |")
    lines += ["", "| target | value | limit | status |", "| --- | --- | --- | --- |"]
    for t in tgts:
        v = "" if t["value"] is None else f"{t['value']:.3f}"
        lines.append(f"| {t['target']} | {v} | {t['limit']} | {t['status']} |")
    return "\n".join(lines) + "\n"


def chart(rows, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart")
        return
    cold = [r for r in rows if r["scenario"] in ("cold", "warm", "nth", "nth-nopch")
            and "median" in r]
    labels = [f"{r['scenario']} {r['mode']}\n{r['kernel']}" for r in cold]
    fig, ax = plt.subplots(figsize=(10, max(4, 0.32 * len(cold))))
    ax.barh(range(len(cold)), [r["median"] for r in cold],
            xerr=[[r["median"] - r["min"] for r in cold], [r["max"] - r["median"] for r in cold]])
    ax.set_yticks(range(len(cold)), labels, fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("seconds (median, min-max)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="no GPU: compile and cache only")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nth", type=int, default=5, help="N for the Nth-kernel scenario")
    ap.add_argument("--jitify-timeout", type=float, default=60.0)
    ap.add_argument("--kernels", default=",".join(sorted(p.name for p in CORPUS.glob("*.cu"))))
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="which scenarios to run (a long suite can be split over several runs)")
    ap.add_argument("--name", help="results file name part (default: cpu or gpu)")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="combine the rows of earlier runs (same machine) into one report; "
                         "where two runs measured the same thing, the first file given wins")
    args = ap.parse_args(argv)
    kind = args.name or ("cpu" if args.compile_only else "gpu")
    if args.merge:
        runs = [json.loads(Path(p).read_text()) for p in args.merge]
        rows, seen = [], set()
        for r in (r for run in runs for r in run["rows"]):  # the first file wins a duplicate
            if (r["scenario"], r["mode"], r["kernel"]) not in seen:
                seen.add((r["scenario"], r["mode"], r["kernel"]))
                rows.append(r)
        info = {**runs[0]["machine"], "merged_from": [Path(p).name for p in args.merge]}
        return report(rows, info, args, kind,
                      all(run["args"].get("compile_only", False) for run in runs))
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
                modes += [("rawcode-launch", f"warml-{k}", {"warm-pre": "before_launch",
                                                            "warm-to-code": "to_code"}),
                          ("cupy-launch", f"warmc-{k}", {"warm-pre-cupy": "before_launch"})]
            b.warm("warm", k, modes)
    if "inproc" in scenarios:
        print("cold, in one process (ratio cupy-rawcode / bare NVRTC, first-call costs excluded):")
        for k in ("plain.cu", "block_reduce.cu"):
            b.measure("inproc", "inproc", k, "inproc", runs=max(1, args.runs // 2),
                      env_extra={"CUPY_RAWCODE_PCH": "0"})  # PCH would flatter the series
    if "nth" in scenarios:
        print(f"Nth distinct CUB kernel in one process (N={args.nth}):")
        b.side_by_side([
            dict(scenario="nth", mode="nth", kernel="block_reduce.cu", cache="nth",
                 extra=(str(args.nth),)),
            dict(scenario="nth-nopch", mode="nth", kernel="block_reduce.cu", cache="nthp",
                 extra=(str(args.nth),), env_extra={"CUPY_RAWCODE_PCH": "0"})])
    if "import" in scenarios:
        print("import:")
        b.measure("import", "import", "plain.cu", "imp", key="cupy_rawcode",
                  also={"import-cupy": "cupy", "import-cuda.core": "cuda_core",
                        "import-first-use": "first_use"})
    return report(b.rows, info, args, kind, args.compile_only)


def report(rows, info, args, kind: str, compile_only: bool) -> int:
    """Targets, then the JSON, the markdown table and the chart under --out."""
    tgts = targets(rows, compile_only)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"startup-{kind}.json").write_text(json.dumps(
        {"machine": info, "args": vars(args), "rows": rows, "targets": tgts}, indent=1))
    text = table(rows, tgts, info)
    (out / f"startup-{kind}.md").write_text(text)
    chart(rows, out / f"startup-{kind}.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
