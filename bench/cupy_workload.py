"""A real CuPy workload served by install(scope="all"): CuPy's own tests, run as another
project's tests are, side by side in one run (GPU).

    python bench/cupy_workload.py --tests DIR [--out DIR] [--name NAME] [-- pytest args]

DIR holds test files of CuPy's own suite and a conftest.py that sets cupy-rawcode up from the
environment (RAWCODE_ALL, RAWCODE_RECORD, RAWCODE_WARMUP) and writes the process's NVRTC compiles
and the store's hits and misses to RAWCODE_REPORT. Each scenario is a fresh process timed from
outside:

  cupy-cold   CuPy alone, empty kernel cache
  ours-cold   install(scope="all"), empty caches; records the workload (record())
  prebuild    cupy-rawcode prebuild --manifest <record>, then bundle export --prebuilt
  warmup      install(scope="all"), empty caches, warmup(<record>) first

then, --repeats times, interleaved (host noise is large):

  cupy-warm   CuPy alone, its cache filled by cupy-cold
  bundle      install(scope="all"), empty caches, the bundle as a read-only layer
  ours-warm   install(scope="all"), the cache warmup filled
  per call    every CuPy call of the record replayed in one fresh process, through CuPy's warm
              cache and through ours (the median per-call time of each)

Ratios are of the medians over the repeats.

Targets (reported, never asserted): bundle: 0 NVRTC compiles and wall <= 1.1x cupy-warm;
warmup: wall <= 0.25x cupy-cold; per call: ours <= CuPy's own warm path.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAWCODE_", "CUPY_RAWCODE_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def pytest_run(tests: str, args: list[str], work: str, name: str, **env) -> dict:
    """One scenario: a fresh pytest process over the workload, timed from outside."""
    report = os.path.join(work, f"{name}.json")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests, *args]
    t0 = time.perf_counter()
    out = subprocess.run(
        cmd, env=_env(RAWCODE_REPORT=report, **env), capture_output=True, text=True, cwd=work
    )
    wall = time.perf_counter() - t0
    result = {"scenario": name, "wall_s": round(wall, 3), "returncode": out.returncode}
    tail = [ln for ln in out.stdout.splitlines() if ln.strip()][-1:] or [""]
    result["pytest"] = tail[0]
    if os.path.exists(report):
        result.update(json.load(open(report)))
    print(f"{name:10s} {wall:8.2f} s  {result.get('pytest')}  {result.get('nvrtc_compiles')} "
          f"NVRTC compiles, store {result.get('store_counts')}", flush=True)  # fmt: skip
    return result


def prebuild(record: str, work: str, arch: str) -> dict:
    env = _env(CUPY_RAWCODE_CACHE_DIR=os.path.join(work, "build"))
    cli = [sys.executable, "-m", "cupy_rawcode.cli"]
    t0 = time.perf_counter()
    a = subprocess.run(
        cli + ["prebuild", "--manifest", record, "--arch", arch], env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    t1 = time.perf_counter()
    bundle = os.path.join(work, "app.bundle")
    b = subprocess.run(
        cli + ["bundle", "export", bundle, "--prebuilt"], env=env, capture_output=True, text=True
    )
    print(f"prebuild   {t1 - t0:8.2f} s  {a.stdout.strip().splitlines()[-1:]}", flush=True)
    return {
        "scenario": "prebuild",
        "wall_s": round(t1 - t0, 3),
        "returncode": a.returncode or b.returncode,
        "summary": a.stdout.strip().splitlines()[-1:],
        "stderr": (a.stderr + b.stderr)[-2000:] if a.returncode or b.returncode else "",
        "bundle_bytes": os.path.getsize(bundle) if os.path.exists(bundle) else 0,
    }


CALLS = r"""
import json, sys, time, statistics
import cupy
from cupy.cuda import compiler
from cupy._core import core
from cupy_rawcode.hook import recording, compiles as cupy_compiles
mode, path = sys.argv[1], sys.argv[2]
if mode == "ours":
    import cupy_rawcode
    cupy_rawcode.install(scope="all")
arch = str(compiler._get_arch())
times = []
for e in recording.read(path):
    if e["kind"] != "cupy" or e["jitify"]:
        continue
    opts = tuple(e["options"])
    if e["cupy_options"]:
        opts = core.assemble_cupy_compiler_options(opts)
    extra = core._get_header_source() if e["extra_source"] == "cupy" else e.get("extra_source_text")
    names = e["name_expressions"]
    t0 = time.perf_counter()
    compiler._compile_module_with_cache(e["source"], opts, arch=arch, extra_source=extra,
        enable_cooperative_groups=e["cooperative"], name_expressions=names)
    times.append(time.perf_counter() - t0)
print(json.dumps({"calls": len(times), "median_ms": statistics.median(times) * 1e3,
                  "total_ms": sum(times) * 1e3}))
"""


def per_call(record: str, work: str, mode: str, **env) -> dict:
    """Every CuPy call of the record, replayed in a fresh process against a warm cache."""
    out = subprocess.run(
        [sys.executable, "-c", CALLS, mode, record], env=_env(**env), capture_output=True,
        text=True, cwd=work,
    )  # fmt: skip
    if out.returncode:
        return {"mode": mode, "error": out.stderr[-2000:]}
    return {"mode": mode, **json.loads(out.stdout.strip().splitlines()[-1])}


def versions() -> dict:
    import cupy

    import cupy_rawcode

    return {
        "cupy": cupy.__version__,
        "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
        "cupy_rawcode": cupy_rawcode.__version__,
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "python": sys.version.split()[0],
        "date": datetime.date.today().isoformat(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--name", default="cupy-workload")
    ap.add_argument("--repeats", type=int, default=3, help="warm comparisons, interleaved")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args(argv)
    tests = os.path.abspath(a.tests)
    import cupy

    cc = cupy.cuda.Device().compute_capability
    work = tempfile.mkdtemp(prefix="cupy-workload-")
    d = lambda name: os.path.join(work, name)  # noqa: E731
    record = d("app.rec")
    t = (tests, a.pytest_args, work)
    runs = [
        pytest_run(*t, "cupy-cold", CUPY_CACHE_DIR=d("c1")),
        pytest_run(
            *t, "ours-cold", CUPY_CACHE_DIR=d("c2"), CUPY_RAWCODE_CACHE_DIR=d("r1"),
            RAWCODE_ALL=1, RAWCODE_RECORD=record,
        ),
        prebuild(record, work, f"sm_{cc}"),
        pytest_run(
            *t, "warmup", CUPY_CACHE_DIR=d("c4"), CUPY_RAWCODE_CACHE_DIR=d("r3"), RAWCODE_ALL=1,
            RAWCODE_WARMUP=record,
        ),
    ]  # fmt: skip
    calls = []
    for r in range(a.repeats):  # the warm comparisons, interleaved: host noise is large
        runs += [
            pytest_run(*t, "cupy-warm", CUPY_CACHE_DIR=d("c1")),
            pytest_run(
                *t, "bundle", CUPY_CACHE_DIR=d(f"c3-{r}"), CUPY_RAWCODE_CACHE_DIR=d(f"r2-{r}"),
                CUPY_RAWCODE_BUNDLES=d("app.bundle"), RAWCODE_ALL=1,
            ),
            pytest_run(
                *t, "ours-warm", CUPY_CACHE_DIR=d("c4"), CUPY_RAWCODE_CACHE_DIR=d("r3"),
                RAWCODE_ALL=1,
            ),
        ]  # fmt: skip
        calls += [
            per_call(record, work, "cupy", CUPY_CACHE_DIR=d("c1")),
            per_call(record, work, "ours", CUPY_CACHE_DIR=d("c5"), CUPY_RAWCODE_CACHE_DIR=d("r3")),
        ]

    def wall(name: str) -> float:
        return statistics.median(r["wall_s"] for r in runs if r["scenario"] == name)

    def call_ms(mode: str) -> float:
        return statistics.median(c["median_ms"] for c in calls if c.get("mode") == mode)

    bundles = [r for r in runs if r["scenario"] == "bundle"]
    targets = {
        "bundle NVRTC compiles, every run (target 0)": [r.get("nvrtc_compiles") for r in bundles],
        "bundle / cupy-warm wall, medians (target <= 1.1)": wall("bundle") / wall("cupy-warm"),
        "warmup / cupy-cold wall (target <= 0.25)": wall("warmup") / wall("cupy-cold"),
        "ours-warm / cupy-warm wall, medians": wall("ours-warm") / wall("cupy-warm"),
    }
    if all("median_ms" in c for c in calls):
        targets["per call, ours / CuPy warm, medians (target <= 1.0)"] = call_ms("ours") / call_ms(
            "cupy"
        )
        targets["per call, hook overhead ms (ours - CuPy)"] = call_ms("ours") - call_ms("cupy")
    with open(record) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    result = {
        "versions": versions(),
        "workload": sorted(os.listdir(tests)),
        "pytest_args": a.pytest_args,
        "record_entries": len(entries),
        "record_cupy_entries": sum(e["kind"] == "cupy" for e in entries),
        "runs": runs,
        "per_call": calls,
        "targets": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in targets.items()},
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump(result, f, indent=1)
    for k, v in result["targets"].items():
        print(f"{k}: {v}")
    print(json.dumps(calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
