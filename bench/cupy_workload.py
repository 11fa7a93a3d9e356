"""A real CuPy workload served by install(scope="all"): CuPy's own tests, run as another
project's tests are, side by side in one run (GPU).

    python bench/cupy_workload.py --tests DIR [--out DIR] [--name NAME] [--repeats N]
                                  [--profile] [-- pytest args]

DIR holds test files of CuPy's own suite (they import cupy and cupy.testing only). They run from
a copy of DIR in a work directory, beside bench/workload_conftest.py as conftest.py, which sets
cupy-rawcode up from the environment and reports the process's NVRTC compiles (CuPy's and ours,
and how many failed with a compile error) and the store's hits and misses per level. Each
scenario is a fresh process timed from outside:

  cupy-cold      CuPy alone, empty kernel cache
  ours-cold      install(scope="all"), empty caches, a shared remote level (a second cache
                 directory, bench/workload_shared.py) beside the local one: "machine A";
                 records the workload (record())
  prebuild       cupy-rawcode prebuild --manifest <record>, then bundle export --prebuilt
  warmup         install(scope="all"), empty caches, warmup(<record>) first
  profile        (--profile) the bundle scenario once under cProfile: the top functions go to
                 <out>/<name>-profile.txt, the raw profile to <out>/<name>-bundle.prof

then, --repeats times, interleaved (host noise is large):

  cupy-warm      CuPy alone, its cache filled by cupy-cold
  bundle         install(scope="all"), empty caches, the bundle as a read-only layer
  ours-warm      install(scope="all"), the cache warmup filled (the warmup scenario's run, then
                 every repeat, go over it again: a compile error cached by one run is no NVRTC
                 compile in the next)
  shared-pull    "machine B": empty caches, the shared level configured; cupy-rawcode cache
                 pull --manifest <record> (timed apart), then the workload (skipped, with the
                 reason, where this cupy-rawcode has no `cache pull`)
  shared-nopull  machine B without the pull: empty local caches, the shared level configured
  per call       every CuPy call of the record replayed in one fresh process, through CuPy's
                 warm cache and through ours (the median per-call time of each)

Ratios are of the medians over the repeats. Targets (printed, never asserted): 0 NVRTC compiles
in bundle, shared-pull and shared-nopull, and in ours-warm from its second run; walls:
bundle <= 1.0x, shared-pull <= 1.1x, shared-nopull <= 1.3x cupy-warm; warmup <= 0.25x
cupy-cold; per call: ours <= CuPy's own warm path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_runs as runs_of  # beside this script


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tests", required=True, help="a directory of CuPy test files")
    ap.add_argument("--out", default=os.path.join(runs_of.ROOT, "bench", "results"))
    ap.add_argument("--name", default="cupy-workload")
    ap.add_argument("--repeats", type=int, default=3, help="warm comparisons, interleaved")
    ap.add_argument("--profile", action="store_true", help="the bundle scenario under cProfile")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.tests):
        ap.error(f"--tests {a.tests}: not a directory")
    if a.repeats < 1:
        ap.error("--repeats: at least 1")
    return a


def main(argv=None) -> int:
    a = parse(argv)
    import cupy

    cc = cupy.cuda.Device().compute_capability
    work = tempfile.mkdtemp(prefix="cupy-workload-")
    tests = runs_of.work_copy(os.path.abspath(a.tests), work)
    os.makedirs(a.out, exist_ok=True)
    d = lambda name: os.path.join(work, name)  # noqa: E731
    record = d("app.rec")
    # the shared level: a directory under another name than "disk" (workload_shared.py)
    shared = {"CUPY_RAWCODE_REMOTE": runs_of.SHARED, "RAWCODE_SHARED_DIR": d("shared")}
    t = (tests, a.pytest_args, work)
    run = runs_of.pytest_run
    no_pull = runs_of.pull_missing()
    if no_pull:
        print(f"shared-pull skipped: {no_pull}", flush=True)
    result: dict = {"versions": runs_of.versions(), "workload": sorted(os.listdir(a.tests))}
    result.update(pytest_args=a.pytest_args, shared_pull_skipped=no_pull)
    runs: list[dict] = []
    calls: list[dict] = []

    def save() -> None:  # after every scenario: a run cut short keeps what it measured
        result.update(runs=runs, per_call=calls)
        with open(os.path.join(a.out, a.name + ".json"), "w") as f:
            json.dump(result, f, indent=1)

    def step(r: dict) -> None:
        runs.append(r)
        save()

    step(run(*t, "cupy-cold", CUPY_CACHE_DIR=d("c1")))
    step(
        run(
            *t, "ours-cold", CUPY_CACHE_DIR=d("c2"), CUPY_RAWCODE_CACHE_DIR=d("r1"),
            RAWCODE_ALL=1, RAWCODE_RECORD=record, **shared,
        )
    )  # fmt: skip
    step(runs_of.prebuild(record, work, f"sm_{cc}"))
    step(
        run(
            *t, "warmup", CUPY_CACHE_DIR=d("c4"), CUPY_RAWCODE_CACHE_DIR=d("r3"), RAWCODE_ALL=1,
            RAWCODE_WARMUP=record,
        )
    )  # fmt: skip
    if a.profile:
        prof = os.path.join(a.out, a.name + "-bundle.prof")
        p = run(
            *t, "profile", profile=prof, CUPY_CACHE_DIR=d("cp"), CUPY_RAWCODE_CACHE_DIR=d("rp"),
            CUPY_RAWCODE_BUNDLES=d("app.bundle"), RAWCODE_ALL=1,
        )  # fmt: skip
        result["profile"] = {k: p.get(k) for k in ("wall_s", "pytest", "nvrtc_compiles")}
        if os.path.exists(prof):
            with open(os.path.join(a.out, a.name + "-profile.txt"), "w") as f:
                f.write(runs_of.profile_text(prof))
        save()
    for r in range(a.repeats):  # the warm comparisons, interleaved: host noise is large
        step(run(*t, "cupy-warm", CUPY_CACHE_DIR=d("c1")))
        step(
            run(
                *t, "bundle", CUPY_CACHE_DIR=d(f"c3-{r}"), CUPY_RAWCODE_CACHE_DIR=d(f"r2-{r}"),
                CUPY_RAWCODE_BUNDLES=d("app.bundle"), RAWCODE_ALL=1,
            )
        )  # fmt: skip
        step(
            run(
                *t, "ours-warm", CUPY_CACHE_DIR=d("c4"), CUPY_RAWCODE_CACHE_DIR=d("r3"),
                RAWCODE_ALL=1,
            )
        )  # fmt: skip
        machine_b = {**shared, "RAWCODE_ALL": 1}
        if not no_pull:
            local = {"CUPY_RAWCODE_CACHE_DIR": d(f"r5-{r}"), **machine_b}
            step(runs_of.pull(record, "cache-pull", **local))
            step(run(*t, "shared-pull", CUPY_CACHE_DIR=d(f"c5-{r}"), **local))
        step(
            run(
                *t, "shared-nopull", CUPY_CACHE_DIR=d(f"c6-{r}"),
                CUPY_RAWCODE_CACHE_DIR=d(f"r6-{r}"), **machine_b,
            )
        )  # fmt: skip
        calls.append(runs_of.per_call(record, work, "cupy", CUPY_CACHE_DIR=d("c1")))
        calls.append(
            runs_of.per_call(
                record, work, "ours", CUPY_CACHE_DIR=d("c7"), CUPY_RAWCODE_CACHE_DIR=d("r3")
            )
        )
        save()
    result["record_entries"], result["record_cupy_entries"] = record_sizes(record)
    # the workload's entries as machine A stored them (compression ratio), and the cache every
    # ours-warm run read (the compile time its hits saved)
    result["cache_stats"] = {
        "ours-cold (machine A)": runs_of.cache_stats(d("r1")),
        "ours-warm": runs_of.cache_stats(d("r3")),
    }
    result["targets"] = targets(runs, calls)
    save()
    for k, v in [*result["targets"].items(), *result["cache_stats"].items()]:
        print(f"{k}: {v}")
    print(json.dumps(calls))
    return 0


def record_sizes(record: str) -> tuple[int, int]:
    if not os.path.exists(record):
        return 0, 0
    with open(record) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    return len(entries), sum(e["kind"] == "cupy" for e in entries)


def targets(runs: list[dict], calls: list[dict]) -> dict:
    """What the bench is for, from the runs: NVRTC compiles and wall ratios (never asserted)."""

    def of(name: str) -> list[dict]:
        return [r for r in runs if r["scenario"] == name]

    def wall(name: str) -> float | None:
        walls = [r["wall_s"] for r in of(name)]
        return statistics.median(walls) if walls else None

    def ratio(name: str, base: str) -> float | None:
        w, b = wall(name), wall(base)
        return None if w is None or not b else round(w / b, 4)

    def compiles(name: str) -> list:
        return [(r.get("nvrtc_compiles"), r.get("nvrtc_failed")) for r in of(name)]

    scenarios = dict.fromkeys(r["scenario"] for r in runs if "nvrtc_compiles" in r)
    out: dict = {
        "NVRTC compiles (all, failed) per run, by scenario": {s: compiles(s) for s in scenarios},
        "bundle NVRTC compiles, every run (target 0)": compiles("bundle"),
        "warmup, then ours-warm run after run, on one cache: NVRTC compiles (target 0 after "
        "warmup's run: failures cached)": compiles("warmup") + compiles("ours-warm"),
        "ours-warm, what its last run still compiled": (
            of("ours-warm")[-1].get("nvrtc_kinds") if of("ours-warm") else None
        ),
        "cupy-warm, what its last run compiled": (
            of("cupy-warm")[-1].get("nvrtc_kinds") if of("cupy-warm") else None
        ),
        "shared-pull NVRTC compiles (target 0)": compiles("shared-pull"),
        "shared-nopull NVRTC compiles (target 0)": compiles("shared-nopull"),
        "bundle / cupy-warm wall, medians (target <= 1.0)": ratio("bundle", "cupy-warm"),
        "shared-pull / cupy-warm wall, medians (target <= 1.1)": ratio("shared-pull", "cupy-warm"),
        "cache pull wall s, median": wall("cache-pull"),
        "shared-nopull / cupy-warm wall, medians (target <= 1.3)": ratio(
            "shared-nopull", "cupy-warm"
        ),
        "warmup / cupy-cold wall (target <= 0.25)": ratio("warmup", "cupy-cold"),
        "ours-warm / cupy-warm wall, medians": ratio("ours-warm", "cupy-warm"),
    }
    modes = {
        m: [c["median_ms"] for c in calls if c.get("mode") == m and "median_ms" in c]
        for m in ("ours", "cupy")
    }
    if any("error" in c for c in calls):
        out["per call replays that failed (see per_call)"] = sum("error" in c for c in calls)
    if all(modes.values()):
        ours, cupy = statistics.median(modes["ours"]), statistics.median(modes["cupy"])
        out["per call, ours / CuPy warm, medians (target <= 1.0)"] = round(ours / cupy, 4)
        out["per call, hook overhead ms (ours - CuPy)"] = round(ours - cupy, 4)
    return out


if __name__ == "__main__":
    sys.exit(main())
