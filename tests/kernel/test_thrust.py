"""Thrust in device code under the default header policy: thrust::complex, thrust::random,
tuple/pair, functional objects and fancy iterators compile (CuPy's bundled CCCL); Thrust
algorithms taking an execution policy fail with the one-sentence hint."""

import pytest

import cupy_rawcode
from cupy_rawcode.compiler.hints import THRUST_ALGORITHMS, thrust_algorithm_hint
from cupy_rawcode.toolkit.record import toolchain

# Thrust's unannotated helpers need -default-device, which every compile now passes by default
# as CuPy does (issue 16): the kernels here pass no option for it.
DEFAULT_DEVICE = ()

KERNELS = {
    "complex": (
        "thrust/complex.h",
        """
        thrust::complex<double> z(p[0], p[1]), w(p[2], p[3]);
        z = thrust::exp(z) + thrust::log(z) * thrust::pow(z, w) - thrust::sin(z) / thrust::sqrt(w);
        thrust::complex<float> f(p[4], p[5]); f = f * f + thrust::conj(f) - 1.0f;
        p[6] = (float)(thrust::abs(z) + thrust::arg(z)) + thrust::norm(f) + f.imag();""",
    ),
    "random": (
        "thrust/random.h",
        """
        thrust::default_random_engine e(q[0]); e.discard(q[1]); q[2] = e();
        thrust::minstd_rand0 m(q[3]); thrust::ranlux24 r; thrust::taus88 t(q[4]);
        thrust::uniform_int_distribution<int> d(0, 10); q[5] = d(e) + m() % 7 + r() % 5 + t() % 3;
        thrust::uniform_real_distribution<float> u(-1.f, 1.f); thrust::normal_distribution<double> n(0., 1.);
        p[0] = u(e) + (float)n(m);""",
    ),
    "tuple_pair": (
        "thrust/tuple.h",
        """
        thrust::tuple<int, float, double> t = thrust::make_tuple(1, 2.0f, 3.0); int a; float b; double c;
        thrust::tie(a, b, c) = t; thrust::pair<int, float> pr = thrust::make_pair(q[0], p[0]);
        p[1] = thrust::get<1>(t) + a + b + (float)c + pr.second + pr.first
               + (float)thrust::tuple_size<decltype(t)>::value;""",
    ),
    "functional": (
        "thrust/functional.h",
        """
        q[0] = thrust::plus<int>()(1, 2) + thrust::multiplies<int>()(3, 4) + thrust::maximum<int>()(q[1], 5)
               + thrust::minimum<int>()(q[2], 6) + thrust::negate<int>()(q[3]) + thrust::less<int>()(1, 2);""",
    ),
    "iterators": (
        "thrust/iterator/zip_iterator.h",
        """
        thrust::counting_iterator<int> c(q[0]);
        auto sq = thrust::make_transform_iterator(c, thrust::negate<int>());
        auto z = thrust::make_zip_iterator(thrust::make_tuple(c, thrust::make_constant_iterator(7)));
        auto perm = thrust::make_permutation_iterator(p, c);
        q[1] = sq[2] + thrust::get<0>(z[1]) + thrust::get<1>(z[3]) + (int)perm[1];""",
    ),
}
_EXTRA_INCLUDES = {
    "tuple_pair": ("thrust/pair.h",),
    "iterators": (
        "thrust/iterator/counting_iterator.h",
        "thrust/iterator/transform_iterator.h",
        "thrust/iterator/constant_iterator.h",
        "thrust/iterator/permutation_iterator.h",
        "thrust/functional.h",
    ),
}


def _source(name):
    header, body = KERNELS[name]
    includes = (header,) + _EXTRA_INCLUDES.get(name, ())
    return (
        "".join(f"#include <{h}>\n" for h in includes)
        + f'extern "C" __global__ void k(float* p, unsigned* q) {{{body}\n}}\n'
    )


def _cupy_cccl():
    return any(d.tag == "cccl" and d.origin == "cupy" for d in toolchain().system_dirs)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_thrust_device_code_compiles_under_the_default_policy(name):
    if not _cupy_cccl():
        pytest.skip(
            "CuPy with a bundled CCCL is not installed: the default policy uses another CCCL"
        )
    cupy_rawcode.compile(_source(name), arch="sm_90", options=DEFAULT_DEVICE)


def test_the_default_policy_uses_cupys_cccl_when_cupy_has_one():
    import importlib.util

    from cupy_rawcode.toolkit.discovery import DEFAULT_SOURCES, source_dirs

    assert DEFAULT_SOURCES[0] == "cupy"
    if importlib.util.find_spec("cupy") is None or not source_dirs("cupy").get("cccl"):
        pytest.skip("CuPy with a bundled CCCL is not installed")
    cccl = [d for d in toolchain().system_dirs if d.tag == "cccl"]
    assert cccl and {d.origin for d in cccl} == {"cupy"}


ALGORITHM = """#include <thrust/sort.h>
#include <thrust/reduce.h>
#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>
extern "C" __global__ void k(int* p, int n) {
  thrust::sort(thrust::seq, p, p + n);
  p[n] = thrust::reduce(thrust::seq, p, p + n);
  p[n + 1] = (int)(thrust::lower_bound(thrust::seq, p, p + n, 5) - p);
}
"""


def test_thrust_algorithms_with_a_policy_fail_with_one_sentence():
    """facts.md: explicitly __host__ functions in Thrust's dispatch, which NVRTC refuses."""
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.compile(ALGORITHM, arch="sm_90", options=DEFAULT_DEVICE)
    assert str(e.value).count(THRUST_ALGORITHMS) == 1


_THRUST_LOG = (
    "/x/thrust/thrust/detail/execute_with_allocator.h(43): error: A function explicitly "
    "marked as a __host__ function is not allowed in JIT mode\n"
)


@pytest.mark.parametrize(
    "log, source, hinted",
    [
        (_THRUST_LOG, "thrust::sort(thrust::seq, p, p + n);", True),
        (_THRUST_LOG, "#include <thrust/reduce.h>\n", True),
        (_THRUST_LOG, "thrust::lower_bound(thrust::device, p, p + n, 5);", True),
        (_THRUST_LOG, "thrust::complex<float> z;", False),  # Thrust, but no algorithm
        (
            'kernel.cu(3): error: identifier "x" is undefined\n',
            "thrust::sort(thrust::seq, p, p + n);",
            False,
        ),  # an algorithm, but the error is the user's
        (
            "/x/thrust/thrust/sort.h(3): warning: something\n",
            "thrust::sort(thrust::seq, p, p + n);",
            False,
        ),
    ],
)
def test_thrust_algorithm_hint(log, source, hinted):
    assert thrust_algorithm_hint(log, source) == (THRUST_ALGORITHMS if hinted else "")
