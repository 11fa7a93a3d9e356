"""The runs bench/cupy_workload.py times, each a fresh process: the workload under pytest (also
under cProfile), prebuild + bundle export, ``cache pull``, CuPy's calls replayed one by one."""

from __future__ import annotations

import collections
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFTEST = os.path.join(ROOT, "bench", "workload_conftest.py")
CLI = [sys.executable, "-m", "cupy_rawcode.cli"]
SHARED = "bench.workload_shared:SharedDirectory"  # CUPY_RAWCODE_REMOTE of both machines


def env_for(**extra) -> dict:
    """This environment without any RAWCODE_/CUPY_RAWCODE_ variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAWCODE_", "CUPY_RAWCODE_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def work_copy(tests: str, work: str) -> str:
    """A copy of the test directory with our conftest.py in it (the directory is never written)."""
    dest = os.path.join(work, "tests")
    shutil.copytree(tests, dest, ignore=shutil.ignore_patterns("conftest.py", "__pycache__"))
    shutil.copyfile(CONFTEST, os.path.join(dest, "conftest.py"))
    return dest


def pytest_run(
    tests: str, args: list[str], work: str, name: str, profile: str | None = None, **env
) -> dict:
    """One scenario: a fresh pytest process over the workload, timed from outside (under
    cProfile into ``profile`` when given)."""
    report = os.path.join(work, f"{name}.json")
    head = [sys.executable] + (["-m", "cProfile", "-o", profile] if profile else [])
    cmd = head + ["-m", "pytest", "-q", "-p", "no:cacheprovider", tests, *args]
    t0 = time.perf_counter()
    out = subprocess.run(
        cmd, env=env_for(RAWCODE_REPORT=report, **env), capture_output=True, text=True, cwd=work
    )
    wall = time.perf_counter() - t0
    result = {"scenario": name, "wall_s": round(wall, 3), "returncode": out.returncode}
    tail = [ln for ln in out.stdout.splitlines() if ln.strip()][-1:] or [""]
    result["pytest"] = tail[0]
    if os.path.exists(report):
        with open(report) as f:
            result.update(json.load(f))
        events = result.pop("nvrtc_events", None) or []  # kept short: kinds, and failures
        result["nvrtc_kinds"] = compile_kinds(events)
        result["nvrtc_failures"] = [e for e in events if not e["ok"]][:40]
    else:
        result["stderr"] = (out.stdout + out.stderr)[-2000:]
    print(f"{name:13s} {wall:8.2f} s  {result.get('pytest')}  {result.get('nvrtc_compiles')} "
          f"NVRTC compiles ({result.get('nvrtc_failed')} failed), store "
          f"{result.get('store_counts')}", flush=True)  # fmt: skip
    return result


def prebuild(record: str, work: str, arch: str) -> dict:
    """prebuild --manifest <record> into a build cache, then bundle export --prebuilt."""
    env = env_for(CUPY_RAWCODE_CACHE_DIR=os.path.join(work, "build"))
    t0 = time.perf_counter()
    a = subprocess.run(
        CLI + ["prebuild", "--manifest", record, "--arch", arch], env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    t1 = time.perf_counter()
    bundle = os.path.join(work, "app.bundle")
    b = subprocess.run(
        CLI + ["bundle", "export", bundle, "--prebuilt"], env=env, capture_output=True, text=True
    )
    print(f"prebuild      {t1 - t0:8.2f} s  {a.stdout.strip().splitlines()[-1:]}", flush=True)
    return {
        "scenario": "prebuild",
        "wall_s": round(t1 - t0, 3),
        "returncode": a.returncode or b.returncode,
        "summary": a.stdout.strip().splitlines()[-1:],
        "stderr": (a.stderr + b.stderr)[-2000:] if a.returncode or b.returncode else "",
        "bundle_bytes": os.path.getsize(bundle) if os.path.exists(bundle) else 0,
    }


def cache_stats(cache_dir: str) -> dict:
    """What ``cache stats --json`` says of a cache directory: its entries stored and
    uncompressed (the compression ratio of the workload's entries), hits, misses and the
    compile time they saved; {"error": ...} when the command fails."""
    out = subprocess.run(
        CLI + ["cache", "stats", "--json"], env=env_for(CUPY_RAWCODE_CACHE_DIR=cache_dir),
        capture_output=True, text=True,
    )  # fmt: skip
    try:
        got = json.loads(out.stdout)
    except ValueError:
        return {"error": (out.stderr or out.stdout).strip()[-500:]}
    keep = ("entries", "hits", "misses", "compile_seconds_saved")
    return {k: got.get(k) for k in keep}


def pull_missing() -> str | None:
    """Why ``cupy-rawcode cache pull`` cannot be run here, or None when it can."""
    out = subprocess.run(
        CLI + ["cache", "pull", "--help"], env=env_for(), capture_output=True, text=True
    )
    if out.returncode == 0 and "--manifest" in out.stdout:
        return None
    said = (out.stderr or out.stdout).strip().splitlines()[-1:] or [f"exit {out.returncode}"]
    return f"`cupy-rawcode cache pull --help` failed: {said[0]}"


def pull(record: str, name: str, **env) -> dict:
    """``cache pull --manifest <record>``: the shared level's entries into a local cache."""
    t0 = time.perf_counter()
    out = subprocess.run(
        CLI + ["cache", "pull", "--manifest", record], env=env_for(**env), capture_output=True,
        text=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    said = out.stdout.strip().splitlines()[-1:]
    print(f"{name:13s} {wall:8.2f} s  {said}", flush=True)
    return {
        "scenario": name,
        "wall_s": round(wall, 3),
        "returncode": out.returncode,
        "summary": said,
        "stderr": out.stderr[-2000:] if out.returncode else "",
    }


CALLS = r"""
import json, sys, time, statistics
import cupy
from cupy.cuda import compiler
from cupy._core import core
from cupy_rawcode.hook import recording
mode, path = sys.argv[1], sys.argv[2]
if mode == "ours":
    import cupy_rawcode
    cupy_rawcode.install(scope="all")
arch = str(compiler._get_arch())
times = []
for e in recording.read(path):
    if e["kind"] != "cupy" or e["jitify"]:
        continue
    opts = tuple(e["options"])
    if e["cupy_options"]:
        opts = core.assemble_cupy_compiler_options(opts)
    extra = core._get_header_source() if e["extra_source"] == "cupy" else e.get("extra_source_text")
    names = e["name_expressions"]
    t0 = time.perf_counter()
    try:
        compiler._compile_module_with_cache(e["source"], opts, arch=arch, extra_source=extra,
            enable_cooperative_groups=e["cooperative"], name_expressions=names)
    except compiler.CompileException:
        continue  # a compile error (CuPy rejects the combination): not a served call
    times.append(time.perf_counter() - t0)
print(json.dumps({"calls": len(times), "median_ms": statistics.median(times) * 1e3,
                  "total_ms": sum(times) * 1e3}))
"""


def per_call(record: str, work: str, mode: str, **env) -> dict:
    """Every CuPy call of the record, replayed in a fresh process against a warm cache."""
    out = subprocess.run(
        [sys.executable, "-c", CALLS, mode, record], env=env_for(**env), capture_output=True,
        text=True, cwd=work,
    )  # fmt: skip
    if out.returncode:
        return {"mode": mode, "error": out.stderr[-2000:]}
    return {"mode": mode, **json.loads(out.stdout.strip().splitlines()[-1])}


def profile_text(prof: str, top: int = 40) -> str:
    """The top functions of a cProfile file: by cumulative time, by own time, and ours alone."""
    import io
    import pstats

    buf = io.StringIO()
    buf.write(
        "==== per hit: the hook's functions, cumulative (cProfile's overhead included) ====\n"
    )
    buf.write(hit_splits(prof) + "\n")
    for title, key, *only in (
        ("cumulative time", "cumulative"),
        ("own time", "tottime"),
        ("cupy_rawcode's functions, cumulative time", "cumulative", "cupy_rawcode"),
    ):
        buf.write(f"==== by {title} ====\n")
        stats = pstats.Stats(prof, stream=buf).strip_dirs() if not only else pstats.Stats(
            prof, stream=buf
        )  # fmt: skip
        stats.sort_stats(key).print_stats(*only, top)
    return buf.getvalue()


# where a hit's time goes (issue 30 part 6): the hook, the key, the store, the load; CuPy's own
SPLITS = (
    ("cupy_rawcode/hook/install.py", "compile_module_with_cache"),
    ("cupy_rawcode/hook/compiles.py", "call_from"),
    ("cupy_rawcode/hook/compiles.py", "servable"),
    ("cupy_rawcode/hook/compiles.py", "compile_module"),
    ("cupy_rawcode/hook/compiles.py", "key_of"),
    ("cupy_rawcode/key/cupy.py", "cupy_key"),
    ("cupy_rawcode/orchestrator/payloads.py", "stored"),
    ("cupy_rawcode/store/base.py", "fetch"),
    ("cupy_rawcode/store/base.py", "put"),
    ("cupy_rawcode/hook/compiles.py", "load"),
    ("cupy_rawcode/orchestrator/payloads.py", "save"),
    ("cupy/cuda/compiler.py", "_compile_module_with_cache"),
    ("cupy/cuda/compiler.py", "compile_using_nvrtc"),
)


def hit_splits(prof: str) -> str:
    """The cumulative time of each function of SPLITS: calls, seconds, milliseconds a call."""
    import pstats

    stats = pstats.Stats(prof).stats
    lines = [f"{'function':62s} {'calls':>7s} {'cum s':>8s} {'ms/call':>8s}"]
    for path, name in SPLITS:
        for (file, line, func), (_, calls, _, cum, _) in stats.items():
            if func == name and file.replace(os.sep, "/").endswith(path):
                where = f"{path}:{line}({name})"
                lines.append(f"{where:62s} {calls:7d} {cum:8.3f} {cum / calls * 1e3:8.3f}")
    return "\n".join(lines) + "\n"


def _error_kind(error: str | None) -> str:
    """A compile error's first line without its file and line number, to group by."""
    return re.sub(r"^.*?\(\d+\): ", "", error or "?")


def compile_kinds(events: list[dict], top: int = 6) -> dict:
    """What a run's NVRTC compiles were: failed ones by error, successful ones by kernel."""
    failed = collections.Counter(_error_kind(e["error"]) for e in events if not e["ok"])
    built = collections.Counter(f"{e['by']}:{e['kernel']}" for e in events if e["ok"])
    return {
        "failed, by error": dict(failed.most_common(top)),
        "succeeded, by kernel": dict(built.most_common(top)),
    }


def versions() -> dict:
    import cupy

    import cupy_rawcode

    return {
        "cupy": cupy.__version__,
        "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
        "cupy_rawcode": cupy_rawcode.__version__,
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "python": sys.version.split()[0],
        "date": datetime.date.today().isoformat(),
    }
