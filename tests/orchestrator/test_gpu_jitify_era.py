"""On the GPU: Jitify-era kernels (C++11 sources with CCCL headers, user specializations of std
templates) compute what NumPy computes, through the drop-in classes and through install()."""

import warnings

import numpy as np
import pytest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.filterwarnings("ignore::cupy_rawcode.headers.standard.StandardRaisedWarning"),
]

STENCIL = r"""
#include <cstdint>
#include <type_traits>
template <typename T>
__device__ T weight(int64_t k) { return std::is_same<T, double>::value ? 0.25 : 0.5f; }
extern "C" __global__ void stencil(const double* __restrict__ in, double* out, int64_t n) {
    register int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1)
        out[i] = weight<double>(i) * in[i - 1] + 0.5 * in[i] + weight<double>(i) * in[i + 1];
}
"""

LIMITS = r"""
#include <limits>
#include <functional>
struct Fixed { int v; };
namespace std {
template <> class numeric_limits<Fixed> {
 public:
  static constexpr bool is_specialized = true;
  __device__ static constexpr Fixed max() { return Fixed{1000}; }
};
template <> struct hash<Fixed> {
  __device__ size_t operator()(const Fixed& f) const { return (size_t)f.v * 2654435761u % 97u; }
};
}
extern "C" __global__ void clamp_hash(const int* in, int* clamped, int* hashed, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int m = std::numeric_limits<Fixed>::max().v;
        clamped[i] = in[i] > m ? m : in[i];
        hashed[i] = (int)std::hash<Fixed>{}(Fixed{in[i]})
                    + (std::numeric_limits<int>::max() == 2147483647);
    }
}
"""


def _stencil_ref(x):
    out = np.zeros_like(x)
    out[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
    return out


def _limits_ref(x):
    return np.minimum(x, 1000), (x.astype(np.uint64) * 2654435761 % 97).astype(np.int32) + 1


@pytest.mark.parametrize("std", ["-std=c++11", "--std=c++11", "-std=c++14"])
def test_cxx11_stencil_drop_in(std):
    import cupy

    import cupy_rawcode

    n = 10007
    x = cupy.random.rand(n)
    out = cupy.zeros(n)
    k = cupy_rawcode.RawKernel(STENCIL, "stencil", options=(std,))
    k(((n + 255) // 256,), (256,), (x, out, np.int64(n)))
    np.testing.assert_allclose(out.get(), _stencil_ref(x.get()), rtol=1e-12)


def test_cxx11_stencil_through_install_jitify():
    import cupy

    import cupy_rawcode

    n = 4099
    x = cupy.random.rand(n)
    out = cupy.zeros(n)
    cupy_rawcode.install()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            k = cupy.RawKernel(STENCIL, "stencil", options=("--std=c++11",), jitify=True)
        k(((n + 127) // 128,), (128,), (x, out, np.int64(n)))
    finally:
        cupy_rawcode.uninstall()
    np.testing.assert_allclose(out.get(), _stencil_ref(x.get()), rtol=1e-12)


@pytest.mark.parametrize("options", [(), ("-std=c++11",)])
def test_user_specializations_are_used(options):
    import cupy

    import cupy_rawcode

    n = 3000
    x = cupy.random.randint(0, 2000, n, dtype=cupy.int32)
    clamped, hashed = cupy.empty_like(x), cupy.empty_like(x)
    m = cupy_rawcode.RawModule(code=LIMITS, options=options)
    m.get_function("clamp_hash")(((n + 255) // 256,), (256,), (x, clamped, hashed, np.int32(n)))
    want_c, want_h = _limits_ref(x.get())
    np.testing.assert_array_equal(clamped.get(), want_c)
    np.testing.assert_array_equal(hashed.get(), want_h)
