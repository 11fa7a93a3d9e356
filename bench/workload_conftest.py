"""The conftest.py bench/cupy_workload.py puts beside CuPy's test files in its work copy: sets
cupy-rawcode up from the environment and reports what the process compiled.

  RAWCODE_ALL=1         install(scope="all"): CuPy's compiles served by our store
  RAWCODE_RECORD=PATH   record(PATH): every compile appended to the record
  RAWCODE_WARMUP=PATH   warmup(PATH) before the first test (its summary goes to the report)
  RAWCODE_REPORT=PATH   at the end, a JSON: NVRTC compiles (CuPy's and ours, how many failed,
                        and what they were), the store's counts per level, pytest's exit status
  RAWCODE_SEED=N        the seed of ``random`` before the tests are collected (default 0):
                        CuPy's ``testing.for_dtypes_combination`` shuffles its dtype pairs with
                        the unseeded ``random`` (unless CUPY_TEST_FULL_COMBINATION=1), so that
                        every run would test, and compile, another subset (test_floating.py:
                        some 22 kernels no earlier run compiled, for CuPy's cache and ours)

Bundles and remote levels come from cupy-rawcode's own variables (CUPY_RAWCODE_BUNDLES,
CUPY_RAWCODE_REMOTE). NVRTC compiles are counted where they are made: CuPy's through
``cupy_backends.cuda.libs.nvrtc.compileProgram`` (cupy/cuda/compiler.py calls it by module
attribute), ours through ``cuda.bindings.nvrtc.nvrtcCompileProgram`` (compiler/nvrtc.py), wrapped
when that module is first imported so that a process that never compiles never imports it.
With no RAWCODE_* variable set, only the counting is put in place (no GPU needed).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import json
import os
import random
import re
import sys
import threading

random.seed(int(os.environ.get("RAWCODE_SEED", "0")))  # the same workload every run (docstring)

EVENTS_KEPT = 200  # compiles described in the report (all are counted)
_KERNEL = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\([^)]*\)\s+)?(\w+)")

_counts = {"cupy": 0, "cupy_failed": 0, "ours": 0, "ours_failed": 0}
_events: list[dict] = []
_sources: dict[int, str] = {}  # a program's handle -> its source, until compiled
_state: dict = {"warmup": None}
_lock = threading.Lock()  # our compiles may run on another thread (an early compile)


def _describe(by: str, source: str | None, ok: bool, error: str | None) -> None:
    """Count one compile and keep what it was (kernel name, source digest, first error line)."""
    text = source or ""
    kernel = _KERNEL.search(text)
    event = {
        "by": by,
        "ok": ok,
        "kernel": kernel.group(1) if kernel else None,
        "source": hashlib.sha256(text.encode(errors="replace")).hexdigest()[:12],
        "error": error,
    }
    with _lock:
        _counts[by] += 1
        _counts[by + "_failed"] += not ok
        if len(_events) < EVENTS_KEPT:
            _events.append(event)


def _first_error(log) -> str | None:
    text = log.decode(errors="replace") if isinstance(log, (bytes, bytearray)) else str(log)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    picked = [ln for ln in lines if "error" in ln.lower()] or lines
    return picked[0][:300] if picked else None


def _handle(prog) -> int:
    try:
        return int(prog)
    except (TypeError, ValueError):
        return id(prog)


def count_cupy(nvrtc) -> None:
    """Wrap CuPy's NVRTC module: createProgram keeps the source, compileProgram counts."""
    create, compile_program = nvrtc.createProgram, nvrtc.compileProgram

    def create_program(src, name, *args, **kwargs):
        prog = create(src, name, *args, **kwargs)
        _sources[_handle(prog)] = src.decode(errors="replace") if isinstance(src, bytes) else src
        return prog

    def counted(prog, options, *args, **kwargs):
        source = _sources.pop(_handle(prog), None)
        try:
            result = compile_program(prog, options, *args, **kwargs)
        except Exception as e:
            try:
                error = _first_error(nvrtc.getProgramLog(prog))
            except Exception:
                error = None
            _describe("cupy", source, False, error or f"{type(e).__name__}: {e}"[:300])
            raise
        _describe("cupy", source, True, None)
        return result

    nvrtc.createProgram, nvrtc.compileProgram = create_program, counted


def count_ours(nvrtc) -> None:
    """Wrap cuda.bindings' NVRTC module (cupy-rawcode's compiles) the same way."""
    create, compile_program = nvrtc.nvrtcCreateProgram, nvrtc.nvrtcCompileProgram
    success = nvrtc.nvrtcResult.NVRTC_SUCCESS

    def create_program(src, *args, **kwargs):
        out = create(src, *args, **kwargs)
        if out and out[0] == success:
            text = src.decode(errors="replace") if isinstance(src, bytes) else str(src)
            _sources[_handle(out[1])] = text
        return out

    def counted(prog, *args, **kwargs):
        out = compile_program(prog, *args, **kwargs)
        ok = out[0] == success
        _describe("ours", _sources.pop(_handle(prog), None), ok, None if ok else _log(prog, out))
        return out

    def _log(prog, out) -> str:
        try:
            raw = bytearray(nvrtc.nvrtcGetProgramLogSize(prog)[1])
            nvrtc.nvrtcGetProgramLog(prog, raw)
            return _first_error(raw.rstrip(b"\0")) or str(out[0])
        except Exception:
            return str(out[0])

    nvrtc.nvrtcCreateProgram, nvrtc.nvrtcCompileProgram = create_program, counted


class _Patched(importlib.abc.Loader):
    """A module's own loader, then ``then(module)``."""

    def __init__(self, inner, then):
        self.inner, self.then = inner, then

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        self.then(module)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``then(module)`` once ``name`` is imported, whoever imports it."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Patched(spec.loader, self.then)
        return spec


def after_import(name: str, then) -> None:
    """``then(module)`` now if ``name`` is imported, else right after its import."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))


def setup() -> None:
    """Count NVRTC compiles; then record, install and warm up as the environment asks."""
    try:
        from cupy_backends.cuda.libs import nvrtc
    except Exception as e:  # no CuPy NVRTC library here: CuPy cannot compile at all
        print(f"workload_conftest: CuPy's NVRTC not counted ({e})", file=sys.stderr)
    else:
        count_cupy(nvrtc)
    after_import("cuda.bindings.nvrtc", count_ours)
    env = os.environ
    if not any(env.get(v) for v in ("RAWCODE_ALL", "RAWCODE_RECORD", "RAWCODE_WARMUP")):
        return
    import cupy_rawcode

    if env.get("RAWCODE_RECORD"):
        cupy_rawcode.record(env["RAWCODE_RECORD"])
    if env.get("RAWCODE_ALL"):
        cupy_rawcode.install(scope="all")
    if env.get("RAWCODE_WARMUP"):
        s = cupy_rawcode.warmup(env["RAWCODE_WARMUP"])
        _state["warmup"] = {
            "seconds": s.seconds,
            "compiled": len(s.compiled),
            "cached": len(s.cached),
            "failed": len(s.failed),
            "workers": s.workers,
        }


def store_stats() -> list[dict] | None:
    """This process's counts per level of the store CuPy's compiles went through (None when
    cupy-rawcode was not used)."""
    if "cupy_rawcode.store" not in sys.modules:
        return None
    from cupy_rawcode.store import default_store

    return default_store().stats()["levels"]


def report(exitstatus) -> dict:
    levels = store_stats()
    return {
        "nvrtc_compiles": _counts["cupy"] + _counts["ours"],
        "nvrtc_failed": _counts["cupy_failed"] + _counts["ours_failed"],
        "nvrtc_by": dict(_counts),
        "nvrtc_events": _events,
        "store_counts": None
        if levels is None
        else {f"{i}:{r['level']}": [r["hits"], r["misses"]] for i, r in enumerate(levels)},
        "store_levels": levels,
        "warmup": _state["warmup"],
        "exitstatus": int(exitstatus),
    }


def pytest_configure(config) -> None:
    setup()


def pytest_sessionfinish(session, exitstatus) -> None:
    path = os.environ.get("RAWCODE_REPORT")
    if not path:
        return
    with open(path, "w") as f:
        json.dump(report(exitstatus), f)
