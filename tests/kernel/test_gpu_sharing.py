"""On the GPU: objects of the same inputs share one module per device, as CuPy's memo shares it
(``__device__`` state, get_global pointers, function attributes), compile() keeps it, and
cupyx.scipy.ndimage's generic filters take our RawKernel. Each case runs with CuPy's classes
too, which must give the same answer; results are checked against NumPy on random inputs."""

import numpy as np
import pytest

import cupy_rawcode
from cupy_rawcode.kernel import loading

pytestmark = pytest.mark.gpu

STATE = (
    "__device__ int state;\n"
    'extern "C" __global__ void set(int v) { state = v; }\n'
    'extern "C" __global__ void get(int* out) { out[0] = state; }\n'
)
BIG = 100 * 1024  # dynamic shared memory over the default 48 KiB: needs the attribute
SHARED = (
    'extern "C" __global__ void fill(float* out, int n) {\n'
    "  extern __shared__ float s[];\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)i;\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];\n"
    "}\n"
)
WHICH = ["cupy_rawcode", "cupy"]


@pytest.fixture(autouse=True)
def _own_modules(monkeypatch):
    """Each test starts with no module loaded by the drop-ins (CuPy's memo keeps its own)."""
    monkeypatch.setattr(loading, "_shared", {})


def _ns(which):
    import cupy

    return cupy_rawcode if which == "cupy_rawcode" else cupy


def _src(which, tag):
    """A source of this test and side (CuPy's memo outlives a test)."""
    return STATE + f"// {which} {tag}\n"


def _read(get_kernel) -> int:
    import cupy as cp

    out = cp.zeros(1, cp.int32)
    get_kernel((1,), (1,), (out,))
    return int(out.get()[0])


@pytest.mark.parametrize("which", WHICH)
def test_two_kernels_of_the_same_code_share_device_state(which):
    ns, src = _ns(which), _src(which, "two kernels")
    ns.RawKernel(src, "set")((1,), (1,), (np.int32(42),))
    assert _read(ns.RawKernel(src, "get")) == 42


@pytest.mark.parametrize("which", WHICH)
def test_a_get_global_write_is_seen_by_a_kernel_of_the_same_code(which):
    import cupy as cp

    ns, src = _ns(which), _src(which, "get_global")
    m = ns.RawModule(code=src)
    cp.ndarray((1,), cp.int32, m.get_global("state"))[...] = 7
    assert _read(ns.RawKernel(src, "get")) == 7
    assert _read(m.get_function("get")) == 7


@pytest.mark.parametrize("which", WHICH)
def test_compile_keeps_the_module_its_kernels_and_globals(which):
    import cupy as cp

    ns, src = _ns(which), _src(which, "compile")
    m = ns.RawModule(code=src)
    set_, get = m.get_function("set"), m.get_function("get")
    ptr = m.get_global("state")
    m.compile()
    cp.ndarray((1,), cp.int32, ptr)[...] = 11  # a pointer obtained before compile()
    assert _read(get) == 11
    set_.compile()  # a get_function kernel: its module and siblings stay as they are
    set_((1,), (1,), (np.int32(5),))
    assert _read(get) == 5 and _read(ns.RawKernel(src, "get")) == 5


@pytest.mark.parametrize("which", WHICH)
def test_a_pickled_and_a_copied_kernel_share_the_state(which):
    import copy
    import pickle

    ns, src = _ns(which), _src(which, "copies")
    k = ns.RawKernel(src, "set")
    k((1,), (1,), (np.int32(9),))
    copy.copy(k)((1,), (1,), (np.int32(13),))
    assert _read(copy.copy(ns.RawKernel(src, "get"))) == 13
    pickle.loads(pickle.dumps(k))((1,), (1,), (np.int32(21),))
    assert _read(pickle.loads(pickle.dumps(ns.RawKernel(src, "get")))) == 21


@pytest.mark.parametrize("which", WHICH)
def test_max_dynamic_shared_size_survives_compile_and_is_shared(which):
    import cupy as cp

    ns = _ns(which)
    src = SHARED + f"// {which}\n"
    k = ns.RawKernel(src, "fill")
    default = k.max_dynamic_shared_size_bytes
    assert default < BIG
    k.max_dynamic_shared_size_bytes = BIG
    k.compile()
    assert k.max_dynamic_shared_size_bytes == BIG
    other = ns.RawKernel(src, "fill")  # the same function of the same module
    assert other.max_dynamic_shared_size_bytes == BIG
    n = BIG // 4
    out = cp.zeros(n, cp.float32)
    other((1,), (256,), (out, np.int32(n)), shared_mem=BIG)
    np.testing.assert_array_equal(out.get(), np.arange(n, dtype=np.float32)[::-1])


LINE_SUM = (
    'extern "C" __global__ void line_sum(double* in, ptrdiff_t n_in, double* out, '
    "ptrdiff_t n_out) { for (ptrdiff_t i = 0; i < n_out; ++i) "
    "out[i] = in[i] + 2 * in[i + 1] - in[i + 2]; }\n"
)
WINDOW_MAX = (
    'extern "C" __global__ void window_max(double* x, int n, double* y) {'
    " double m = x[0]; for (int i = 1; i < n; ++i) m = x[i] > m ? x[i] : m; y[0] = m; }\n"
)


@pytest.mark.parametrize("which", WHICH)
@pytest.mark.parametrize("axis", [0, 1])
def test_generic_filter1d_takes_our_kernel(which, axis):
    import cupy as cp
    import cupyx.scipy.ndimage as ndi

    x = np.random.default_rng(7 + axis).standard_normal((37, 53))
    k = _ns(which).RawKernel(LINE_SUM, "line_sum")
    got = ndi.generic_filter1d(cp.asarray(x), k, 3, axis=axis).get()
    pad = [(0, 0), (0, 0)]
    pad[axis] = (1, 1)
    p = np.pad(x, pad, mode="symmetric")  # ndimage's 'reflect'
    n = x.shape[axis]
    taps = [np.take(p, range(i, i + n), axis=axis) for i in range(3)]
    np.testing.assert_allclose(got, taps[0] + 2 * taps[1] - taps[2], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("which", WHICH)
def test_generic_filter_takes_our_kernel(which):
    import cupy as cp
    import cupyx.scipy.ndimage as ndi

    x = np.random.default_rng(3).standard_normal((29, 31))
    k = _ns(which).RawKernel(WINDOW_MAX, "window_max")
    got = ndi.generic_filter(cp.asarray(x), k, size=3).get()
    p = np.pad(x, 1, mode="symmetric")
    want = np.lib.stride_tricks.sliding_window_view(p, (3, 3)).max(axis=(2, 3))
    np.testing.assert_allclose(got, want, rtol=0, atol=0)
