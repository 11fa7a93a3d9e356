"""Warm first launch of several source trees side by side on one machine (same lease, runs
interleaved), to compare code versions where leases differ by more than the change.

Each tree holds ``cupy_rawcode/`` and ``include/`` of one version, e.g.
``git archive <rev> cupy_rawcode include | tar -x -C trees/<rev>``. For each kernel every tree gets
its own cache, filled by two runs; then --rounds new processes per tree, interleaved, time
``RawKernel(...)`` to before the launch ('pre', the issue's window) and to the launch done.

Python's cyclic garbage collector runs when the count of new container objects crosses its
thresholds, so a collection (a generation-1 one costs 1 ms on the CPU VM) falls inside the
window or just after it depending on a few hundred allocations before it, in the tree or in the
program. Each run reports the collections inside the window ('gc': generation and ms), and 'work'
is 'pre' less the time they took: the tree's own work, wherever the collector's turn falls.

    python bench/warm_ab.py [--rounds 9] --trees trees/a trees/b -- KERNEL.cu ...   # needs a GPU
"""

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
import numpy as np, cupy as cp
x = cp.asarray(np.random.default_rng(0).standard_normal(4096).astype(np.float32))
y = cp.zeros(4096, dtype=cp.float32); n = np.int32(4096)
cp.cuda.Device().synchronize()
src = open(sys.argv[1]).read()
import gc
import cupy_rawcode
assert cupy_rawcode.__file__.startswith(sys.argv[2]), cupy_rawcode.__file__
runs = []  # [generation, start, end] of each collection from t0 on
def seen(phase, info):
    if phase == "start": runs.append([info["generation"], time.perf_counter(), None])
    elif runs: runs[-1][2] = time.perf_counter()
gc.callbacks.append(seen)
t0 = time.perf_counter(); k = cupy_rawcode.RawKernel(src, "kern"); k.kernel
t1 = time.perf_counter()
gc.callbacks.remove(seen)
k((32,), (128,), (x, y, n)); cp.cuda.Device().synchronize()
inside = [(g, (e - s) * 1e3) for g, s, e in runs if e is not None and e <= t1]
print(json.dumps({"pre": (t1 - t0) * 1e3, "total": (time.perf_counter() - t0) * 1e3,
                  "work": (t1 - t0) * 1e3 - sum(ms for _, ms in inside),
                  "gc": [[g, round(ms, 3)] for g, ms in inside]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--trees", nargs="+", required=True)
    ap.add_argument("kernels", nargs="+")
    args = ap.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees]
    for t in trees:
        compileall.compile_dir(os.path.join(t, "cupy_rawcode"), quiet=1)  # as pip install does
    base = os.environ.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:  # also the children's cwd: no checkout on the path
        for kernel in args.kernels:
            path = str(HERE / "corpus" / kernel)
            envs = {
                t: {
                    **os.environ,
                    "CUPY_RAWCODE_CACHE_DIR": os.path.join(tmp, str(i)),
                    "PYTHONPATH": t + os.pathsep + base,
                }
                for i, t in enumerate(trees)
            }

            def run(t, path=path, envs=envs):
                p = subprocess.run(
                    [sys.executable, "-c", CHILD, path, t],
                    env=envs[t],
                    cwd=tmp,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                return json.loads(p.stdout.strip().splitlines()[-1])

            for t in trees:
                for _ in range(2):  # compile, then write what a warm process reads
                    run(t)
            rows = {t: [] for t in trees}
            for _ in range(args.rounds):
                for t in trees:
                    rows[t].append(run(t))
            for t in trees:
                print(kernel, os.path.basename(t), summary(rows[t]), flush=True)


def summary(rows: list[dict]) -> str:
    """Medians and quartiles of 'pre' and 'work', and the collections inside the window."""
    out = []
    for name in ("pre", "work", "total"):
        values = [r[name] for r in rows]
        q1, med, q3 = statistics.quantiles(values, n=4)
        out.append(f"{name} {statistics.median(values):.2f} ({q1:.2f}-{q3:.2f})")
    older = [ms for r in rows for g, ms in r["gc"] if g > 0]
    young = sum(1 for r in rows for g, _ in r["gc"] if g == 0)
    out.append(f"gc: {young / len(rows):.1f} young/run, older in {len(older)}/{len(rows)} runs")
    if older:
        out[-1] += f" ({statistics.median(older):.2f} ms each)"
    return " ms; ".join(out[:3]) + " ms; " + out[3]


if __name__ == "__main__":
    main()
