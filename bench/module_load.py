"""Where a warm first launch spends its time, split into what is ours and what is the driver's.

For each corpus kernel: compile it once through cupy-rawcode (a temporary cache), then in new
processes (``--runs`` each, medians) time
- ``ours``: ``RawKernel(...)`` up to the code bytes (imports of the hit path included);
- ``load``: CuPy's ``Module.load`` of those bytes plus ``get_function`` (cuModuleLoadData),
  under ``CUDA_MODULE_LOADING=LAZY`` and ``EAGER``;
- the cubin's size and its number of data symbols (device globals the driver places at load).

    python bench/module_load.py [--runs 7] [--out bench/results/module-load.json]   # needs a GPU
"""

from __future__ import annotations

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
sys.path.insert(0, str(ROOT))
from cupy_rawcode.compiler.strip import data_symbols  # noqa: E402

CHILD = r"""
import json, sys, time
import cupy as cp
cp.zeros(1); cp.cuda.Device().synchronize()
mode, path = sys.argv[1], sys.argv[2]
out = {}
if mode == "ours":
    import cupy_rawcode
    src = open(path).read()
    t0 = time.perf_counter()
    k = cupy_rawcode.RawKernel(src, "kern")  # imports kernel/, as a user's first RawKernel does
    from cupy_rawcode.kernel.building import _compute_capability
    code = k._build.device_code(_compute_capability())
    out["seconds"] = time.perf_counter() - t0
    open(sys.argv[3], "wb").write(code.data)
else:
    from cupy.cuda.function import Module
    data = open(path, "rb").read()
    t0 = time.perf_counter()
    m = Module(); m.load(data); f = m.get_function("kern")
    out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def child(args: list[str], env: dict) -> float:
    p = subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return json.loads(p.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", default=str(HERE / "results" / "module-load.json"))
    args = ap.parse_args()
    import compileall

    compileall.compile_dir(str(ROOT / "cupy_rawcode"), quiet=1)  # as pip install does
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": tmp, "PYTHONPATH": str(ROOT)}
        for kernel in sorted((HERE / "corpus").glob("*.cu")):
            cubin = Path(tmp) / (kernel.stem + ".cubin")
            child(["ours", str(kernel), str(cubin)], env)  # fill the cache
            series = {"ours": [], "load-lazy": [], "load-eager": []}
            for _ in range(args.runs):  # interleaved
                series["ours"].append(child(["ours", str(kernel), str(cubin)], env))
                for mode in ("lazy", "eager"):
                    e = {**env, "CUDA_MODULE_LOADING": mode.upper()}
                    series[f"load-{mode}"].append(child(["load", str(cubin)], e))
            data = cubin.read_bytes()
            row = {
                "kernel": kernel.name,
                "cubin_bytes": len(data),
                "data_symbols": len(data_symbols(data)),
                **{k: statistics.median(v) for k, v in series.items()},
                "values": series,
            }
            rows.append(row)
            print(
                f"{kernel.name:16s} {len(data):7d} B {row['data_symbols']:4d} symbols  "
                f"ours {row['ours'] * 1e3:5.1f} ms  load lazy {row['load-lazy'] * 1e3:5.1f} "
                f"eager {row['load-eager'] * 1e3:5.1f} ms",
                flush=True,
            )
    Path(args.out).write_text(json.dumps({"runs": args.runs, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
