"""The imports of a warm cache hit, side by side for several versions of the package, no GPU
needed: for each version, fill a temporary cache (``RawKernel(...)._build.device_code(CC)``
compiles with NVRTC alone), list the package's modules a second process loads for the same hit,
then time importing exactly those, in that order, in new processes (CuPy and NumPy imported
first, as bench/warm_phases.py's child does), alternating versions; medians.

    python bench/hit_imports.py [--runs 21] [--kernel plain.cu] [--gc-off] REF_OR_DIR [...]

A REF is a git commit or branch (exported with ``git archive``), a DIR a checkout's root. Each
line also says how many collections the imports set off per generation (the first run's): a
process fresh from importing CuPy holds ~500 new objects, so imports that make ~1,600 more set
off a generation-1 collection (~0.5 ms on a loaded 2-core machine), and fewer do not: a step,
not a slope. ``--gc-off`` times the imports with the collector off, to tell the two apart.
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

LIST = r"""
import json, sys
import numpy, cupy  # noqa: F401
import cupy_rawcode
cupy_rawcode.RawKernel(open(sys.argv[1]).read(), "kern")._build.device_code(int(sys.argv[2]))
print(json.dumps([m for m in sys.modules if m.split(".")[0] == "cupy_rawcode"]))
"""

TIME = r"""
import gc, json, sys, time
import numpy, cupy  # noqa: F401
code = compile("\n".join("import " + m for m in json.loads(sys.argv[1])), "hit", "exec")
if sys.argv[2] == "off":
    gc.disable()
before = [g["collections"] for g in gc.get_stats()]
t0 = time.perf_counter()
exec(code, {})
t = time.perf_counter() - t0
print(t, [g["collections"] - b for g, b in zip(gc.get_stats(), before)])
"""


def tree(ref: str, tmp: str) -> str:
    """A directory holding ``ref``'s package: the directory itself, or a git export."""
    if os.path.isdir(os.path.join(ref, "cupy_rawcode")):
        return os.path.abspath(ref)
    out = os.path.join(tmp, ref.replace("/", "_"))
    os.makedirs(out)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", out], input=archive.stdout, check=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--kernel", default="plain.cu")
    ap.add_argument("--cc", type=int, default=90)
    ap.add_argument("--gc-off", action="store_true", help="time with the garbage collector off")
    ap.add_argument("versions", nargs="+")
    args = ap.parse_args()
    import compileall

    kernel = str(HERE / "corpus" / args.kernel)
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {v: tree(v, tmp) for v in args.versions}
        modules = {}
        for i, (v, d) in enumerate(dirs.items()):
            compileall.compile_dir(os.path.join(d, "cupy_rawcode"), quiet=1)  # as pip does
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join([d, os.environ.get("PYTHONPATH", "")]),
                "CUPY_RAWCODE_CACHE_DIR": os.path.join(tmp, f"cache{i}"),
            }
            for _ in range(2):  # fill the cache, then the hit
                out = subprocess.run(
                    [sys.executable, "-c", LIST, kernel, str(args.cc)],
                    env=env,
                    cwd=tmp,  # not this checkout: -c puts the working directory first
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            modules[v] = json.loads(out.strip().splitlines()[-1])
        times: dict[str, list[float]] = {v: [] for v in dirs}
        collections: dict[str, str] = {}
        for _ in range(args.runs):
            for v, d in dirs.items():
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        TIME,
                        json.dumps(modules[v]),
                        "off" if args.gc_off else "on",
                    ],
                    env={
                        **os.environ,
                        "PYTHONPATH": os.pathsep.join([d, os.environ.get("PYTHONPATH", "")]),
                    },
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                seconds, gens = out.split(maxsplit=1)
                times[v].append(float(seconds))
                collections.setdefault(v, gens.strip())
        for v in dirs:
            t = sorted(times[v])
            print(
                f"{v}: {len(modules[v])} modules, imports median {statistics.median(t) * 1e3:.2f} ms"
                f" (min {t[0] * 1e3:.2f}, {args.runs} runs; collections per generation"
                f" {collections[v]}{', collector off' if args.gc_off else ''})"
            )


if __name__ == "__main__":
    main()
