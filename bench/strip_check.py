"""Stripped cubins against NVRTC's own, per CUB corpus kernel: SASS instruction count, resource usage
(cuobjdump) and time per launch on 2^24 floats (50 launches, twice each, interleaved).

    python bench/strip_check.py        # needs a GPU and cuobjdump on PATH
"""

import os
import subprocess
import tempfile

import cupy as cp
import numpy as np
from cupy.cuda.function import Module

from cupy_rawcode.orchestrator.flow import compile as rc

res = {}
for k in ["block_reduce", "warp_reduce", "block_scan", "radix_sort"]:
    src = open(f"bench/corpus/{k}.cu").read()
    cub = {}
    for mode in ("1", "0"):
        os.environ["CUPY_RAWCODE_STRIP"] = mode
        cub[mode] = bytes(rc(src, arch="sm_90", cache_dir=tempfile.mkdtemp()).code)
        open(f"/tmp/{k}.{mode}.cubin", "wb").write(cub[mode])
    sass = {
        m: subprocess.run(
            ["cuobjdump", "-sass", f"/tmp/{k}.{m}.cubin"], capture_output=True, text=True
        ).stdout
        for m in cub
    }
    ins = {
        m: [
            ln.split("*/", 1)[1].strip().rstrip(" ;")
            for ln in s.splitlines()
            if ln.strip().startswith("/*") and "*/" in ln and ln.split("*/", 1)[1].strip()
        ]
        for m, s in sass.items()
    }
    ru = {
        m: [
            ln.strip()
            for ln in subprocess.run(
                ["cuobjdump", "--dump-resource-usage", f"/tmp/{k}.{m}.cubin"],
                capture_output=True,
                text=True,
            ).stdout.splitlines()
            if "REG" in ln
        ]
        for m in cub
    }
    print(
        k, "instructions stripped/nvrtc", len(ins["1"]), len(ins["0"]), ru["1"], ru["0"], flush=True
    )
    if k == "block_reduce":
        import difflib

        print("\n".join(list(difflib.unified_diff(ins["0"], ins["1"], lineterm="", n=1))[:60]))
    # runtime
    n = 1 << 24
    x = cp.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    y = cp.zeros(n, dtype=cp.float32)
    threads = 128
    grid = (n + 511) // 512 if k == "radix_sort" else (n + threads - 1) // threads
    for m in ("1", "0", "1", "0"):
        mod = Module()
        mod.load(cub[m])
        f = mod.get_function("kern")
        f((grid,), (threads,), (x, y, np.int32(n)))
        cp.cuda.Device().synchronize()
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        for _ in range(50):
            f((grid,), (threads,), (x, y, np.int32(n)))
        e.record()
        e.synchronize()
        res.setdefault((k, m), []).append(cp.cuda.get_elapsed_time(s, e) / 50)
    print(
        k, {m: [round(t, 4) for t in res[(k, m)]] for m in ("1", "0")}, "ms per launch", flush=True
    )
