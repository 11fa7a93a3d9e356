"""On the GPU: install(scope="all") serves CuPy's own kernels (ElementwiseKernel, ReductionKernel,
ufuncs, reductions, sorting) from the store, with CuPy's results; a record replayed by warmup()
or a bundle leaves a new process no NVRTC compile."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A small workload of CuPy's own kernels, checked against NumPy on random inputs; it prints the
# store's (hits, misses) and how many NVRTC compiles the process ran.
WORKLOAD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import cupy
    import cupy_backends.cuda.libs.nvrtc as nvrtc
    from cupy.cuda import compiler
    import cupy_rawcode
    from cupy_rawcode.store import default_store

    compiles = []
    real = compiler.nvrtc.compileProgram
    compiler.nvrtc.compileProgram = lambda *a: compiles.append(1) or real(*a)
    {setup}
    rng = np.random.default_rng({seed})
    x = rng.standard_normal(5000).astype(np.float32)
    y = rng.standard_normal(5000).astype(np.float32)
    gx, gy = cupy.asarray(x), cupy.asarray(y)
    axpy = cupy.ElementwiseKernel("T a, T x, T y", "T z", "z = a * x + y", "rawcode_axpy")
    l2 = cupy.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "rawcode_l2")
    np.testing.assert_allclose(axpy(np.float32(2.5), gx, gy).get(), 2.5 * x + y, rtol=1e-5,
                               atol=1e-6)  # the GPU fuses a * x + y
    np.testing.assert_allclose(float(l2(gx)), np.sqrt((x.astype(np.float64) ** 2).sum()),
                               rtol=1e-4)
    np.testing.assert_allclose(cupy.sin(gx).get(), np.sin(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(gx.sum()), float(x.astype(np.float64).sum()), rtol=1e-3,
                               atol=1e-2)
    np.testing.assert_array_equal(cupy.sort(gy).get(), np.sort(y))
    np.testing.assert_allclose(cupy.cumsum(gx).get(), np.cumsum(x), rtol=1e-3, atol=1e-2)
    print("COUNTS", *(default_store().level("disk").counts() or (0, 0)), len(compiles))
    """
)


def run(tmp_path, setup, seed, **env):
    script = WORKLOAD.format(setup=setup, seed=seed)
    environ = {**os.environ, "PYTHONPATH": ROOT, **env}
    out = subprocess.run(
        [sys.executable, "-c", script], env=environ, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stdout + out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("COUNTS")][-1]
    hits, misses, compiles = map(int, line.split()[1:])
    return hits, misses, compiles


def test_cupys_own_kernels_through_the_store_then_a_new_process_compiles_nothing(tmp_path):
    env = {
        "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "ours"),
        "CUPY_CACHE_DIR": str(tmp_path / "cupy"),
    }
    hits, misses, compiles = run(tmp_path, "cupy_rawcode.install(scope='all')", 1, **env)
    assert misses >= 5 and compiles >= misses  # CuPy compiled each kernel: the store kept it
    env["CUPY_CACHE_DIR"] = str(tmp_path / "cupy-empty")  # CuPy's own cache cannot answer
    hits2, misses2, compiles2 = run(tmp_path, "cupy_rawcode.install(scope='all')", 2, **env)
    assert (misses2, compiles2) == (misses, 0) and hits2 - hits >= misses


def test_record_warmup_then_the_workload_compiles_nothing(tmp_path):
    rec = tmp_path / "app.rec"
    env = {"CUPY_CACHE_DIR": str(tmp_path / "cupy"), "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "a")}
    run(tmp_path, f"cupy_rawcode.record({str(rec)!r})", 3, **env)
    assert rec.exists() and len(rec.read_text().splitlines()) >= 5
    env = {"CUPY_CACHE_DIR": str(tmp_path / "cupy2"), "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "b")}
    setup = (
        "cupy_rawcode.install(scope='all'); "
        f"s = cupy_rawcode.warmup({str(rec)!r}); assert s.ok, str(s); print(s)"
    )
    hits, misses, compiles = run(tmp_path, setup, 4, **env)
    assert compiles == 0 and hits >= 5


def test_a_bundle_from_a_record_serves_a_fresh_cache(tmp_path):
    rec = tmp_path / "app.rec"
    env = {"CUPY_CACHE_DIR": str(tmp_path / "cupy"), "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "a")}
    run(tmp_path, f"cupy_rawcode.record({str(rec)!r})", 5, **env)
    import cupy

    cc = cupy.cuda.Device().compute_capability
    build = {**os.environ, "PYTHONPATH": ROOT, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "build")}
    cli = [sys.executable, "-m", "cupy_rawcode.cli"]
    for args in (
        ["prebuild", "--manifest", str(rec), "--arch", f"sm_{cc}"],
        ["bundle", "export", str(tmp_path / "app.bundle"), "--prebuilt"],
    ):
        out = subprocess.run(cli + args, env=build, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
    env = {
        "CUPY_CACHE_DIR": str(tmp_path / "cupy3"),
        "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "fresh"),
        "CUPY_RAWCODE_BUNDLES": str(tmp_path / "app.bundle"),
    }
    hits, misses, compiles = run(tmp_path, "cupy_rawcode.install(scope='all')", 6, **env)
    assert (misses, compiles) == (0, 0) and hits >= 5
