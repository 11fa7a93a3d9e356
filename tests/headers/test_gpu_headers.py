"""On the GPU: Thrust, cuRAND, WMMA and bf16 device code compiled through the default header
policy, each result checked against NumPy (or exact integer arithmetic) on random inputs."""

import numpy as np
import pytest

import cupy_rawcode

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(20261122)
# Thrust's unannotated helpers need -default-device, which every compile now passes by default
# as CuPy does (issue 16): the kernels here pass no option for it.
DEFAULT_DEVICE = ()

COMPLEX = r"""
#include <thrust/complex.h>
extern "C" __global__ void cmath(const double* z, const double* w, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  thrust::complex<double> a(z[2 * i], z[2 * i + 1]), b(w[2 * i], w[2 * i + 1]);
  thrust::complex<double> r[6] = {a * b + a / b - b, thrust::exp(a), thrust::log(a),
                                  thrust::pow(a, b), thrust::sin(a), thrust::sqrt(a)};
  for (int k = 0; k < 6; ++k) { out[14 * i + 2 * k] = r[k].real(); out[14 * i + 2 * k + 1] = r[k].imag(); }
  out[14 * i + 12] = thrust::abs(a);
  out[14 * i + 13] = thrust::arg(a);
}
"""


def test_thrust_complex_math():
    import cupy as cp

    n = 1000
    z = RNG.standard_normal(n) + 1j * RNG.standard_normal(n)
    w = 0.5 * RNG.standard_normal(n) + 0.5j * RNG.standard_normal(n)
    out = cp.zeros(14 * n, dtype=cp.float64)
    k = cupy_rawcode.RawKernel(COMPLEX, "cmath", options=DEFAULT_DEVICE)
    k(
        ((n + 127) // 128,),
        (128,),
        (cp.asarray(z.view(np.float64)), cp.asarray(w.view(np.float64)), out, np.int32(n)),
    )
    got = out.get().reshape(n, 14)
    c = got[:, :12].view(np.complex128)
    want = np.stack([z * w + z / w - w, np.exp(z), np.log(z), z**w, np.sin(z), np.sqrt(z)], axis=1)
    np.testing.assert_allclose(c, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[:, 12], np.abs(z), rtol=1e-12)
    np.testing.assert_allclose(got[:, 13], np.angle(z), rtol=1e-12, atol=1e-15)


RANDOM = r"""
#include <thrust/random.h>
extern "C" __global__ void engine(const unsigned* seed, const unsigned long long* skip,
                                  unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  thrust::default_random_engine e(seed[i]);
  e.discard(skip[i]);
  out[2 * i] = e();
  out[2 * i + 1] = e();
}
"""


def _minstd_rand(seed: int, skip: int, count: int) -> list:
    """thrust::default_random_engine is minstd_rand: x <- 48271 x mod (2^31 - 1), seeded with
    seed mod m (1 when that is 0)."""
    m, a = 2**31 - 1, 48271
    x = seed % m or 1
    x = x * pow(a, skip, m) % m
    out = []
    for _ in range(count):
        x = x * a % m
        out.append(x)
    return out


def test_thrust_default_random_engine_with_discard():
    import cupy as cp

    n = 512
    seed = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    skip = RNG.integers(0, 10**9, n, dtype=np.uint64)
    out = cp.zeros(2 * n, dtype=cp.uint32)
    k = cupy_rawcode.RawKernel(RANDOM, "engine", options=DEFAULT_DEVICE)
    k(((n + 127) // 128,), (128,), (cp.asarray(seed), cp.asarray(skip), out, np.int32(n)))
    want = [
        v for s, d in zip(seed.tolist(), skip.tolist(), strict=True) for v in _minstd_rand(s, d, 2)
    ]
    assert out.get().tolist() == want


CURAND = r"""
#include <curand_kernel.h>
extern "C" __global__ void uniform(unsigned long long seed, float* out, int per_thread, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  curandState s;
  curand_init(seed, i, 0, &s);
  for (int j = 0; j < per_thread; ++j) out[i * per_thread + j] = curand_uniform(&s);
}
"""


def test_curand_uniform_statistics():
    import cupy as cp

    n, per = 4096, 64
    out = cp.zeros(n * per, dtype=cp.float32)
    k = cupy_rawcode.RawKernel(CURAND, "uniform")
    seed = int(RNG.integers(1, 2**63))
    k(((n + 127) // 128,), (128,), (np.uint64(seed), out, np.int32(per), np.int32(n)))
    u = out.get().astype(np.float64)
    assert u.min() > 0.0 and u.max() <= 1.0  # curand_uniform's range is (0, 1]
    size = u.size  # 262144 draws: standard errors 5.6e-4 (mean) and 1.6e-4 (variance)
    assert abs(u.mean() - 0.5) < 6 * np.sqrt(1 / 12 / size)
    assert abs(u.var() - 1 / 12) < 6 * np.sqrt(1 / 180 / size)
    hist = np.histogram(u, bins=16, range=(0, 1))[0]
    expected = size / 16
    assert ((hist - expected) ** 2 / expected).sum() < 60  # chi-square, 15 dof: p < 1e-6 to fail
    threads = u.reshape(n, per)
    assert len({row.tobytes() for row in threads}) == n  # each subsequence is its own
    # another seed, another stream
    k(((n + 127) // 128,), (128,), (np.uint64(seed + 1), out, np.int32(per), np.int32(n)))
    assert not np.array_equal(out.get(), u.astype(np.float32))


WMMA = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
extern "C" __global__ void gemm16(const __half* a, const __half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
"""


def test_wmma_16x16x16_product():
    import cupy as cp

    a = RNG.standard_normal((16, 16)).astype(np.float16)
    b = RNG.standard_normal((16, 16)).astype(np.float16)
    c = cp.zeros((16, 16), dtype=cp.float32)
    k = cupy_rawcode.RawKernel(WMMA, "gemm16")
    # b is read column-major: pass its transpose's row-major bytes
    k((1,), (32,), (cp.asarray(a), cp.asarray(np.ascontiguousarray(b.T)), c))
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.get(), want, rtol=1e-3, atol=1e-3)


BF16 = r"""
#include <cuda_bf16.h>
extern "C" __global__ void axpb(const __nv_bfloat16* x, const __nv_bfloat16* y, __nv_bfloat16* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __hadd(__hmul(x[i], y[i]), __float2bfloat16(1.0f));
}
"""


def _to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (as __float2bfloat16 and the bf16 ops)."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def _from_bf16_bits(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def test_bf16_arithmetic():
    # Whether __hmul then __hadd round twice or contract to one bf16 FMA is NVRTC's choice
    # (-fmad=true by default; on the H100 they contract): CuPy compiling the same kernel is the
    # exact reference, and NumPy in float64 bounds both within one bf16 rounding.
    import cupy as cp

    n = 4096
    xb = _to_bf16_bits(RNG.uniform(-4, 4, n).astype(np.float32))
    yb = _to_bf16_bits(RNG.uniform(-4, 4, n).astype(np.float32))
    args = (cp.asarray(xb), cp.asarray(yb))
    grid, block = ((n + 255) // 256,), (256,)
    out, ref = cp.zeros(n, dtype=cp.uint16), cp.zeros(n, dtype=cp.uint16)
    cupy_rawcode.RawKernel(BF16, "axpb")(grid, block, args + (out, np.int32(n)))
    cp.RawKernel(BF16, "axpb")(grid, block, args + (ref, np.int32(n)))
    np.testing.assert_array_equal(out.get(), ref.get())
    x, y = _from_bf16_bits(xb).astype(np.float64), _from_bf16_bits(yb).astype(np.float64)
    np.testing.assert_allclose(_from_bf16_bits(out.get()), x * y + 1, rtol=2.0**-7, atol=2.0**-9)
