"""Where a warm launch spends its time: fill a cache, then profile ``RawKernel(...)`` up to the
loaded function in a new process (cProfile, top entries by cumulative time).

    python bench/profile_warm.py [KERNEL.cu]       # needs a GPU
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import cProfile, pstats, sys, time
import cupy as cp
cp.zeros(1); cp.cuda.Device().synchronize()
import cupy_rawcode
src = open(sys.argv[1]).read()
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
k = cupy_rawcode.RawKernel(src, "kern"); k.kernel
prof.disable()
print(f"RawKernel(...).kernel: {(time.perf_counter() - t0) * 1e3:.1f} ms (profiled)")
if sys.argv[2] == "1":
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
"""


def main() -> None:
    import compileall

    compileall.compile_dir(str(HERE.parent / "cupy_rawcode"), quiet=1)  # as pip install does
    kernel = Path(sys.argv[1] if len(sys.argv) > 1 else HERE / "corpus" / "block_reduce.cu")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": cache}
        for show in ("0", "0", "1"):  # fill the cache, one warm run, then the profiled one
            subprocess.run([sys.executable, "-c", CHILD, str(kernel), show], env=env, check=True)


if __name__ == "__main__":
    main()
