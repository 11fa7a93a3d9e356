"""Where a warm first launch spends its time, by phase, without a profiler's overhead.

For each kernel: fill a temporary cache, then in new processes (--runs each, medians) time the
imports of the hit path, then ``RawKernel(...).kernel`` with wrappers around its phases: the
warm index (its id, its lookup and within it the ``stat`` of every stamped file), the store,
CuPy's module load, and the garbage collections that fall in the window.

    python bench/warm_phases.py [--runs 7] [KERNEL.cu ...]      # needs a GPU
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import gc, json, sys, time
import numpy as np, cupy as cp  # the same prelude as bench/startup.py's child: the same heap
x = cp.asarray(np.random.default_rng(0).standard_normal(4096).astype(np.float32))
cp.cuda.Device().synchronize()
src = open(sys.argv[1]).read()
gcs = []  # garbage collections in the window: their cost grows with what CuPy and NumPy hold
gc.callbacks.append(lambda phase, info: gcs.append((info["generation"], time.perf_counter())))
t0 = time.perf_counter()
import cupy_rawcode
# what a warm hit imports (tests/key/test_index.py pins that it is no more than this): the warm
# index is key/__init__.py (key/index.py before the layout moved it)
from cupy_rawcode import ground, kernel, key, store
from cupy_rawcode.ground import config
from cupy_rawcode.kernel import building, loading
from cupy_rawcode.store import directory, entry, layout
t_imp = time.perf_counter() - t0
T = {}
def wrap(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[label] = T.get(label, 0) + time.perf_counter() - t
    setattr(obj, name, w)
wrap(key, "index_id", "index id")
wrap(key, "index_lookup", "index lookup (with stats)")
wrap(ground, "check_stamps", "stamp checks")
wrap(ground.StampedRecord, "load", "record load (with stamps)")
wrap(layout, "owned", "cache owned check")
wrap(config, "validate", "config validation") if hasattr(config, "validate") else None
wrap(store.Levels, "fetch", "store read")
wrap(loading, "_load_module", "module load")
t1 = time.perf_counter()
k = cupy_rawcode.RawKernel(src, "kern"); k.kernel
T["after imports"] = time.perf_counter() - t1
T["imports"] = t_imp
pairs = list(zip(gcs[0::2], gcs[1::2]))  # (start, stop) of each collection
T["garbage collection"] = sum(b[1] - a[1] for a, b in pairs)
T["of it in the imports"] = sum(b[1] - a[1] for a, b in pairs if a[1] < t0 + t_imp)
print(json.dumps(T))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("kernels", nargs="*", default=["plain.cu", "radix_sort.cu"])
    args = ap.parse_args()
    import compileall

    compileall.compile_dir(str(ROOT / "cupy_rawcode"), quiet=1)  # as pip install does
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "CUPY_RAWCODE_CACHE_DIR": tmp,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        for name in args.kernels:
            path = str(HERE / "corpus" / name)
            subprocess.run(
                [sys.executable, "-c", CHILD, path], env=env, check=True, capture_output=True
            )  # fill the cache
            rows = [
                json.loads(
                    subprocess.run(
                        [sys.executable, "-c", CHILD, path],
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    .stdout.strip()
                    .splitlines()[-1]
                )
                for _ in range(args.runs)
            ]
            medians = {k: statistics.median(r.get(k, 0.0) for r in rows) * 1e3 for k in rows[0]}
            print(name, "  ".join(f"{k} {v:.2f} ms" for k, v in medians.items()), flush=True)


if __name__ == "__main__":
    main()
