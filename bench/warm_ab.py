"""Warm first launch of several source trees side by side on one machine (same lease, runs
interleaved), to compare code versions where leases differ by more than the change.

Each tree holds ``cupy_rawcode/`` and ``include/`` of one version, e.g.
``git archive <rev> cupy_rawcode include | tar -x -C trees/<rev>``. For each kernel every tree gets
its own cache, filled by two runs; then --rounds new processes per tree, interleaved, time
``RawKernel(...)`` to before the launch ('pre', the issue's window) and to the launch done.

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
import cupy_rawcode
assert cupy_rawcode.__file__.startswith(sys.argv[2]), cupy_rawcode.__file__
t0 = time.perf_counter(); k = cupy_rawcode.RawKernel(src, "kern"); k.kernel
t1 = time.perf_counter()
k((32,), (128,), (x, y, n)); cp.cuda.Device().synchronize()
print(json.dumps({"pre": (t1 - t0) * 1e3, "total": (time.perf_counter() - t0) * 1e3}))
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
                med = {k: round(statistics.median(r[k] for r in rows[t]), 2) for k in rows[t][0]}
                q1, _, q3 = statistics.quantiles([r["pre"] for r in rows[t]], n=4)
                spread = f"(pre quartiles {q1:.2f}-{q3:.2f})"
                print(kernel, os.path.basename(t), json.dumps(med), "ms", spread, flush=True)


if __name__ == "__main__":
    main()
