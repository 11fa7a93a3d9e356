"""The floor of a warm hit's cost with the package's present modules, no GPU needed: what the
hit (import, ``RawKernel(...)``, ``device_code``) would cost if the modules it imports held only
what it runs. Traces one hit, writes a copy of the package where those modules lose every
function the hit never called (launch-time ones included: a lower bound) and every docstring,
then times new processes of a base version, this checkout and that copy, interleaved; medians.

    python bench/hit_floor.py [--runs 21] [--kernel plain.cu] BASE_REF

A gap between the copy and BASE_REF is what the number of modules, their classes and the hit's
work cost, which no trimming of unused code can take back.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

TRACE = r"""
import json, sys
import numpy, cupy  # noqa: F401
called = set()
def seen(frame, event, arg):
    if event == "call" and "cupy_rawcode" in frame.f_code.co_filename:
        c = frame.f_code
        called.add((c.co_filename, c.co_firstlineno, c.co_name))
sys.setprofile(seen)
import cupy_rawcode
cupy_rawcode.RawKernel(open(sys.argv[1]).read(), "kern")._build.device_code(90)
sys.setprofile(None)
files = [m.__file__ for n, m in sys.modules.items() if n.split(".")[0] == "cupy_rawcode"]
print(json.dumps({"called": sorted(called), "files": files}))
"""

HIT = r"""
import gc, json, sys, time
import numpy, cupy  # noqa: F401
before = [g["collections"] for g in gc.get_stats()]
t0 = time.perf_counter()
import cupy_rawcode
k = cupy_rawcode.RawKernel(open(sys.argv[1]).read(), "kern")
k._build.device_code(90)
t = time.perf_counter() - t0
print(json.dumps([t, [g["collections"] - b for g, b in zip(gc.get_stats(), before)]]))
"""


def _is_doc(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def trimmed(text: str, path: str, called: set, imported: set) -> str:
    """``text`` without its docstrings and the functions the hit never called (kept: a name read
    at module level, in a called function or imported by another module; a decorated one;
    a method another class declares abstract)."""
    tree = ast.parse(text)
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    ran = [f for f in funcs if (path, f.lineno, f.name) in called]
    keep = set(imported) | {"__getattr__", "get", "put", "delete", "clear", "__len__", "location"}
    for top in tree.body:
        if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            keep |= {n.id for n in ast.walk(top) if isinstance(n, ast.Name)}
    for f in ran:
        keep |= {n.id for n in ast.walk(f) if isinstance(n, ast.Name)}
        keep |= {n.attr for n in ast.walk(f) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        new = []
        for i, stmt in enumerate(body):
            if (
                i == 0
                and _is_doc(stmt)
                and isinstance(
                    node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
                )
            ):
                continue
            if (
                isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not stmt.decorator_list
                and (path, stmt.lineno, stmt.name) not in called
                and stmt.name not in keep
            ):
                continue
            new.append(stmt)
        node.body = new or [ast.Pass()]
    return ast.unparse(ast.fix_missing_locations(tree))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--kernel", default="plain.cu")
    ap.add_argument("base")
    args = ap.parse_args()
    kernel = str(HERE / "corpus" / args.kernel)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base " + args.base: os.path.join(tmp, "base"), "now": str(ROOT)}
        os.makedirs(trees["base " + args.base])
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.base], capture_output=True, check=True
        )
        subprocess.run(
            ["tar", "-x", "-C", trees["base " + args.base]], input=archive.stdout, check=True
        )

        def child(code: str, tree: str, cache: str) -> str:
            env = {**os.environ, "PYTHONPATH": tree, "CUPY_RAWCODE_CACHE_DIR": cache}
            return subprocess.run(
                [sys.executable, "-c", code, kernel],
                env=env,
                cwd=tmp,
                capture_output=True,
                text=True,
                check=True,
            ).stdout

        caches = {}
        for i, (label, tree) in enumerate(trees.items()):
            compileall.compile_dir(os.path.join(tree, "cupy_rawcode"), quiet=1)
            caches[label] = os.path.join(tmp, f"cache{i}")
            child(HIT, tree, caches[label])  # fill: a miss
        trace = json.loads(child(TRACE, str(ROOT), caches["now"]).strip().splitlines()[-1])
        called = {tuple(c) for c in trace["called"]}
        floor = os.path.join(tmp, "floor")
        shutil.copytree(ROOT / "cupy_rawcode", Path(floor) / "cupy_rawcode")
        imported: set[str] = set()
        for f in trace["files"]:
            for n in ast.walk(ast.parse(Path(f).read_text())):
                if isinstance(n, ast.ImportFrom):
                    imported |= {a.name for a in n.names}
        for f in trace["files"]:
            rel = os.path.relpath(f, ROOT)
            Path(floor, rel).write_text(trimmed(Path(f).read_text(), f, called, imported))
        compileall.compile_dir(os.path.join(floor, "cupy_rawcode"), quiet=1)
        # the index stamps this checkout's modules, which the copy leaves unchanged: a hit there
        caches["floor"] = os.path.join(tmp, "cache-floor")
        shutil.copytree(caches["now"], caches["floor"])
        trees["floor"] = floor
        times: dict[str, list[float]] = {label: [] for label in trees}
        gcs: dict[str, list] = {}
        for _ in range(args.runs):
            for label, tree in trees.items():
                seconds, collections = json.loads(child(HIT, tree, caches[label]))
                times[label].append(seconds)
                gcs.setdefault(label, collections)
        print(f"{args.kernel}: import + RawKernel(...) + the hit, new processes, {args.runs} each")
        for label in trees:
            t = sorted(times[label])
            print(
                f"  {label:22s} median {statistics.median(t) * 1e3:.2f} ms (min {t[0] * 1e3:.2f});"
                f" collections per generation {gcs[label]}"
            )


if __name__ == "__main__":
    main()
