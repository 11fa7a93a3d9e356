"""Resolver bench (issue 2): fast closure cold in a new process, warm key, exact mode.

Reported, never asserted. Writes bench/results/resolve.json and prints a table.
Targets: fast closure of block_reduce cold <= 50 ms; warm key (new process, manifest) <= 5 ms;
exact mode <= 1 s.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "corpus" / "block_reduce.cu"
RUNS = 7

CHILD = r"""
import json, sys, time
from cupy_rawcode.toolkit import discovery as toolchain
from cupy_rawcode.key import request
from cupy_rawcode.headers.resolver import resolve as resolve_any
from cupy_rawcode.headers.search import make_context
from cupy_rawcode.headers.fast import resolve_fast
src = open(sys.argv[1]).read()
mode = sys.argv[2]
ctx = make_context(())                         # toolchain discovery, not timed
t = time.perf_counter()
if mode == "fast":
    n = len(resolve_fast(src, ctx).headers)
elif mode == "key":
    request.cache_key(src, arch="sm_90"); n = 0
else:
    n = len(resolve_any(src, exact=True, arch="sm_90").headers)
print(json.dumps({"seconds": time.perf_counter() - t, "headers": n}))
"""


def run(mode: str, env: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(SRC), mode],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return json.loads(out)


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": cache}
        run("key", env)  # writes the manifest
        rows = {}
        for mode, target in (("fast", 0.050), ("key", 0.005), ("exact", 1.0)):
            samples = [run(mode, env) for _ in range(RUNS)]
            secs = [s["seconds"] for s in samples]
            med = statistics.median(secs)
            rows[mode] = {
                "median_s": med,
                "min_s": min(secs),
                "max_s": max(secs),
                "headers": samples[0]["headers"],
                "target_s": target,
                "pass": med <= target,
            }
    from cupy_rawcode.toolkit.record import toolchain

    tc = toolchain()
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "nvrtc": tc.nvrtc_version_str,
        "cccl": tc.cccl_version,
        "kernel": SRC.name,
        "runs": RUNS,
        "results": rows,
    }
    names = {
        "fast": "fast closure, new process",
        "key": "warm key, new process (manifest)",
        "exact": "exact closure, new process",
    }
    print(f"{'scenario':36s} {'median':>9s} {'min-max':>17s} {'target':>8s}  result")
    for mode, r in rows.items():
        print(
            f"{names[mode]:36s} {r['median_s'] * 1e3:8.1f}ms {r['min_s'] * 1e3:7.1f}-{r['max_s'] * 1e3:7.1f}ms "
            f"{r['target_s'] * 1e3:7.0f}ms  {'pass' if r['pass'] else 'MISS'}"
        )
    out = HERE / "results" / "resolve.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
