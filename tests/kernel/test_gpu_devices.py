"""On two GPUs or more: one drop-in object compiles once per architecture and loads once per
device; launches, globals and attributes on each device are that device's, from threads too, as
with CuPy's own classes. Every result is checked against NumPy on random inputs."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from conftest import ROOT, gpu_count

import cupy_rawcode
from cupy_rawcode.kernel import loading

pytestmark = pytest.mark.gpu

N = 3000
SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
# a CUB kernel, two instantiations and a global each device holds its own copy of
BIASED_SUM = r"""
#include <cub/block/block_reduce.cuh>
__device__ float bias[1];
template <typename T> __global__ void block_sum(const T* x, T* out) {
  using Reduce = cub::BlockReduce<T, 128>;
  __shared__ typename Reduce::TempStorage tmp;
  T v = Reduce(tmp).Sum(x[blockIdx.x * 128 + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = v + (T)bias[0];
}
"""
SUMS = (("block_sum<float>", np.float32), ("block_sum<double>", np.float64))


@pytest.fixture(autouse=True)
def _own_modules(monkeypatch):
    """Each test loads its own modules: the drop-ins share one per inputs for the process, as
    CuPy's memo does, and the counts below are of one test's loads."""
    monkeypatch.setattr(loading, "_shared", {})


@pytest.fixture(autouse=True)
def _two_gpus():
    if gpu_count() < 2:
        pytest.skip("needs two CUDA GPUs")


@pytest.fixture
def loads(monkeypatch):
    """The modules the drop-ins load in this process, one item each."""
    calls = []
    real = loading._load_module
    monkeypatch.setattr(loading, "_load_module", lambda *a: (calls.append(1), real(*a))[1])
    return calls


def _archs() -> int:
    import cupy as cp

    return len({cp.cuda.Device(d).compute_capability for d in range(2)})


def _classes(which: str):
    import cupy

    return (cupy_rawcode, cupy)[which == "cupy"]


def _saxpy_on(kernel, dev: int, rng) -> None:
    import cupy as cp

    with cp.cuda.Device(dev):
        x = rng.standard_normal(N).astype(np.float32)
        y = rng.standard_normal(N).astype(np.float32)
        a = np.float32(rng.standard_normal())
        gy = cp.asarray(y)
        kernel(((N + 127) // 128,), (128,), (a, cp.asarray(x), gy, np.int32(N)))
        assert gy.device.id == dev
        np.testing.assert_allclose(gy.get(), a * x + y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which", ["cupy_rawcode", "cupy"])
def test_one_kernel_launches_on_each_device(which, compiles, loads):
    import cupy as cp

    k = _classes(which).RawKernel(SAXPY, "saxpy")
    rng = np.random.default_rng(11)
    for dev in (0, 1, 0, 1):
        _saxpy_on(k, dev, rng)
    with cp.cuda.Device(0):
        first = k.kernel
    with cp.cuda.Device(1):
        second = k.kernel
    assert first is not second  # a Function per device
    if which == "cupy_rawcode":
        assert (len(compiles), len(loads)) == (_archs(), 2)


@pytest.mark.parametrize("which", ["cupy_rawcode", "cupy"])
def test_threads_on_both_devices_race_on_a_first_launch(which, compiles, loads):
    import cupy as cp

    k = _classes(which).RawKernel(SAXPY + "\n// threads\n", "saxpy")
    barrier, errors = threading.Barrier(16), []

    def launch(i: int) -> None:
        try:
            with cp.cuda.Device(i % 2):
                barrier.wait()
                _saxpy_on(k, i % 2, np.random.default_rng(i))
                cp.cuda.Device().synchronize()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    if which == "cupy_rawcode":
        assert (len(compiles), len(loads)) == (_archs(), 2)


def test_a_module_global_is_each_devices_own(compiles, loads):
    """get_global on device 1 is device 1's copy: writing it leaves device 0's launches alone."""
    import cupy as cp

    m = cupy_rawcode.RawModule(code=BIASED_SUM, name_expressions=[n for n, _ in SUMS])
    biases = {0: 1.5, 1: -2.25}
    for dev, bias in biases.items():
        with cp.cuda.Device(dev):
            ptr = m.get_global("bias")
            assert ptr.device_id == dev
            cp.ndarray((1,), cp.float32, ptr)[...] = bias
    rng = np.random.default_rng(5)
    for dev, bias in biases.items():
        with cp.cuda.Device(dev):
            for name, dtype in SUMS:
                x = rng.standard_normal(128 * 8).astype(dtype)
                out = cp.empty(8, dtype)
                m.get_function(name)((8,), (128,), (cp.asarray(x), out))
                want = x.astype(np.float64).reshape(8, 128).sum(axis=1) + bias
                np.testing.assert_allclose(out.get(), want, rtol=1e-4, atol=1e-4)
    assert (len(compiles), len(loads)) == (_archs(), 2)


def test_attributes_and_settings_are_read_on_the_current_device():
    """A setting made on device 1 is device 1's, as CuPy's Function attributes are."""
    import cupy as cp

    ours = cupy_rawcode.RawKernel(SAXPY, "saxpy")
    theirs = cp.RawKernel(SAXPY, "saxpy")
    for dev in (0, 1):
        with cp.cuda.Device(dev):
            assert ours.attributes == theirs.attributes
    for k in (ours, theirs):
        with cp.cuda.Device(1):
            k.max_dynamic_shared_size_bytes = 65536
        with cp.cuda.Device(0):
            unset = k.max_dynamic_shared_size_bytes
        with cp.cuda.Device(1):
            assert k.max_dynamic_shared_size_bytes == 65536
        assert unset != 65536


def test_cupys_own_kernels_on_both_devices_under_install_all(tmp_path):
    """install(scope="all"): CuPy's kernels on device 1 as on device 0, one compile per kernel
    and architecture, the second device served from the store."""
    script = textwrap.dedent(
        """
        import numpy as np
        import cupy
        from cupy.cuda import compiler
        import cupy_rawcode

        cupy_rawcode.install(scope="all")
        compiles = []
        real = compiler.nvrtc.compileProgram
        compiler.nvrtc.compileProgram = lambda *a: compiles.append(1) or real(*a)
        rng = np.random.default_rng(3)
        axpy = cupy.ElementwiseKernel("T a, T x, T y", "T z", "z = a * x + y", "devices_axpy")
        counts = []
        for dev in (0, 1):
            with cupy.cuda.Device(dev):
                x = rng.standard_normal(5000).astype(np.float32)
                y = rng.standard_normal(5000).astype(np.float32)
                gx, gy = cupy.asarray(x), cupy.asarray(y)
                np.testing.assert_allclose(axpy(np.float32(1.5), gx, gy).get(), 1.5 * x + y,
                                           rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(float(gx.sum()), float(x.astype(np.float64).sum()),
                                           rtol=1e-3, atol=1e-2)
                assert gx.device.id == dev
            counts.append(len(compiles))
        archs = len({cupy.cuda.Device(d).compute_capability for d in (0, 1)})
        print("COMPILES", counts[0], counts[1], archs)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPY_CACHE_DIR": str(tmp_path / "cupy")}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stdout + out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("COMPILES")][-1]
    first, both, archs = map(int, line.split()[1:])
    assert first > 0
    if archs == 1:
        assert both == first  # device 1: the same keys, served from the store
