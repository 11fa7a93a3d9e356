"""Typed launch, CPU side: parsing declarations into signatures, and binding arguments."""

import enum
import warnings

import numpy
import pytest

from cupy_rawcode.headers.options import parse_options
from cupy_rawcode.launch.bind import bind, header_reader
from cupy_rawcode.launch.cexpr import evaluate
from cupy_rawcode.launch.signature import NO_DEFAULT, SignatureError, parse_signature

PRELUDE = r"""
#define REAL float
#define SQR(x) ((x) * (x))
typedef unsigned int uint;
using idx_t = long long;
typedef float* fptr;
enum Mode { ADD, MUL };
enum class Small : unsigned char { X = 1 };
struct Params { float a; int b; };
"""

# declaration -> (entry, [(name, text, base, pointer, dtype, default)])
DECLARATIONS = [
    (
        'extern "C" __global__ void k(const float* x, float* y, int n) {}',
        "k",
        [
            ("x", "const float*", "float", 1, "float32", NO_DEFAULT),
            ("y", "float*", "float", 1, "float32", NO_DEFAULT),
            ("n", "int", "int", 0, "int32", NO_DEFAULT),
        ],
    ),
    (
        'extern "C" __global__ void k(const float* __restrict__ x, double* __restrict__ y) {}',
        "k",
        [
            ("x", "const float* __restrict__", "float", 1, "float32", NO_DEFAULT),
            ("y", "double* __restrict__", "double", 1, "float64", NO_DEFAULT),
        ],
    ),
    (
        'extern "C" __global__ void k(float const * const x, volatile int* f) {}',
        "k",
        [
            ("x", "float const* const", "float", 1, "float32", NO_DEFAULT),
            ("f", "volatile int*", "int", 1, "int32", NO_DEFAULT),
        ],
    ),
    (
        'extern "C" __global__ void k(unsigned u, unsigned long long v, long int l, '
        "short s, unsigned char c, signed char sc, bool b, size_t z) {}",
        "k",
        [
            ("u", "unsigned", "unsigned int", 0, "uint32", NO_DEFAULT),
            ("v", "unsigned long long", "unsigned long long", 0, "uint64", NO_DEFAULT),
            ("l", "long int", "long", 0, "int64", NO_DEFAULT),
            ("s", "short", "short", 0, "int16", NO_DEFAULT),
            ("c", "unsigned char", "unsigned char", 0, "uint8", NO_DEFAULT),
            ("sc", "signed char", "signed char", 0, "int8", NO_DEFAULT),
            ("b", "bool", "bool", 0, "bool", NO_DEFAULT),
            ("z", "size_t", "size_t", 0, "uint64", NO_DEFAULT),
        ],
    ),
    (
        'extern "C" __global__ void k(REAL a, uint m, idx_t q, fptr p, Mode md, Small sm) {}',
        "k",
        [
            ("a", "float", "float", 0, "float32", NO_DEFAULT),
            ("m", "unsigned int", "unsigned int", 0, "uint32", NO_DEFAULT),
            ("q", "long long", "long long", 0, "int64", NO_DEFAULT),
            ("p", "float*", "float", 1, "float32", NO_DEFAULT),
            ("md", "Mode", "Mode", 0, "int32", NO_DEFAULT),
            ("sm", "Small", "Small", 0, "uint8", NO_DEFAULT),
        ],
    ),
    (
        'extern "C" __global__ void k(const Params& p, Params v, Params* pp) {}',
        "k",
        [
            ("p", "const Params&", "Params", 0, None, NO_DEFAULT),
            ("v", "Params", "Params", 0, None, NO_DEFAULT),
            ("pp", "Params*", "Params", 1, None, NO_DEFAULT),
        ],
    ),
    (
        'extern "C" __global__ void k(std::int32_t a, cuda::std::uint64_t b, ::int8_t c, '
        "__half h, float x[], thrust::complex<float> z) {}",
        "k",
        [
            ("a", "std::int32_t", "int32_t", 0, "int32", NO_DEFAULT),
            ("b", "cuda::std::uint64_t", "uint64_t", 0, "uint64", NO_DEFAULT),
            ("c", "::int8_t", "int8_t", 0, "int8", NO_DEFAULT),
            ("h", "__half", "__half", 0, "float16", NO_DEFAULT),
            ("x", "float", "float", 1, "float32", NO_DEFAULT),
            ("z", "thrust::complex<float>", "complex<float>", 0, "complex64", NO_DEFAULT),
        ],
    ),
    (
        'extern "C" __global__ void k(float* y, int n = 128, float s = 0.5f, bool on = true, '
        "unsigned m = 0x10u, double d = -1.0 / 4, int q = 7 / -2, long long big = 1ll << 40, "
        "int c = SQR(3), float* opt = nullptr) {}",
        "k",
        [
            ("y", "float*", "float", 1, "float32", NO_DEFAULT),
            ("n", "int", "int", 0, "int32", 128),
            ("s", "float", "float", 0, "float32", 0.5),
            ("on", "bool", "bool", 0, "bool", True),
            ("m", "unsigned", "unsigned int", 0, "uint32", 16),
            ("d", "double", "double", 0, "float64", -0.25),
            ("q", "int", "int", 0, "int32", -3),
            ("big", "long long", "long long", 0, "int64", 1 << 40),
            ("c", "int", "int", 0, "int32", 9),
            ("opt", "float*", "float", 1, "float32", None),
        ],
    ),
    # unnamed parameters, launch bounds, extern "C" block, a forward declaration's defaults
    (
        'extern "C" { __global__ void __launch_bounds__(256, 2) k(float*, int); }\n'
        'extern "C" __global__ void k(float* y, int n = 4) {}',
        "k",
        [("y", "float*", "float", 1, "float32", NO_DEFAULT), ("n", "int", "int", 0, "int32", 4)],
    ),
    (
        "template <typename T, int N = 4>\n__global__ void k(const T* x, T* y, int n = N * 2, "
        "T s = 1) {}",
        "k<double>",
        [
            ("x", "const double*", "double", 1, "float64", NO_DEFAULT),
            ("y", "double*", "double", 1, "float64", NO_DEFAULT),
            ("n", "int", "int", 0, "int32", 8),
            ("s", "double", "double", 0, "float64", 1),
        ],
    ),
    (
        "namespace ns { template <class T, unsigned B>\n__global__ void k(T* y, T v = B) {} }",
        "ns::k<unsigned short, 300>",
        [
            ("y", "unsigned short*", "unsigned short", 1, "uint16", NO_DEFAULT),
            ("v", "unsigned short", "unsigned short", 0, "uint16", 300),
        ],
    ),
    (
        "template <typename P>\n__global__ void k(P p) {}",
        "k<float*>",
        [("p", "float*", "float", 1, "float32", NO_DEFAULT)],
    ),
    ('extern "C" __global__ void k(void) {}', "k", []),
    (
        'enum E { P = 2, Q, R = Q * 4 };\nextern "C" __global__ void k(E e = R, Mode m = Mode::MUL, '
        "Small s = Small::X) {}",
        "k",
        [
            ("e", "E", "E", 0, "int32", 12),
            ("m", "Mode", "Mode", 0, "int32", 1),
            ("s", "Small", "Small", 0, "uint8", 1),
        ],
    ),
]


@pytest.mark.parametrize(
    "decl,entry,expected", DECLARATIONS, ids=[f"{i}" for i in range(len(DECLARATIONS))]
)
def test_declaration_table(decl, entry, expected):
    sig = parse_signature(PRELUDE + decl, entry)
    got = [
        (p.name or p.type.text, p.type.text, p.type.base, p.type.pointer, p.type.dtype, p.default)
        for p in sig.params
    ]
    want = [(n, t, b, ptr, d, df) for n, t, b, ptr, d, df in expected]
    # unnamed parameters take their names from the other declaration
    assert got == want


# declaration -> a fragment of the reason it degrades to positional-only
UNPARSEABLE = [
    ('extern "C" __global__ void k(void (*f)(int)) {}', "k", "unusual declarator"),
    ('extern "C" __global__ void k(int SQR(a)) {}', "k", "unusual declarator"),
    ('extern "C" __global__ void k(int n = sizeof(float)) {}', "k", "cannot evaluate"),
    (
        'extern "C" __global__ void k(int a) {}\nextern "C" __global__ void k(int a, int b) {}',
        "k",
        "overloaded",
    ),
    ("template <typename T>\n__global__ void k(T* y) {}", "k", "give its arguments"),
    ("template <typename... T>\n__global__ void k(T... y) {}", "k<int>", "variadic"),
    ('extern "C" __global__ void k(long double x) {}', "k", "cannot read the type"),
    ('extern "C" __global__ void k(int a) {}', "other", "no __global__ function named 'other'"),
    ('extern "C" __global__ void k(int a, int a) {}', "k", "repeats a parameter name"),
]


@pytest.mark.parametrize("decl,entry,reason", UNPARSEABLE, ids=[r for _, _, r in UNPARSEABLE])
def test_unparseable_declarations_say_why(decl, entry, reason):
    with pytest.raises(SignatureError, match=reason):
        parse_signature(PRELUDE + decl, entry)


def test_comments_strings_and_bodies_do_not_confuse_the_parser():
    src = r"""
    // __global__ void fake(int x);
    /* __global__ void fake2(double y); */
    __device__ int helper(int v) { const char* s = "__global__ void no(int)"; return v; }
    struct S { __device__ void f() { } };
    extern "C" __global__ void k(int n /* count */, float a) { if (n) { helper(n); } }
    """
    sig = parse_signature(src, "k")
    assert [(p.name, p.type.dtype) for p in sig.params] == [("n", "int32"), ("a", "float32")]
    with pytest.raises(SignatureError):
        parse_signature(src, "fake")


def test_command_line_defines_and_undefines():
    src = 'extern "C" __global__ void k(T a) {}'
    assert parse_signature(src, "k", [("T", "double")]).params[0].type.dtype == "float64"
    assert parse_signature(src, "k", [("T", "double"), ("T", None)]).params[0].type.dtype is None


def test_user_headers_give_macros_and_kernels(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "types.h").write_text(
        "#pragma once\n#define REAL double\ntypedef int index_t;\n"
    )
    (tmp_path / "kern.cuh").write_text(
        '#include <types.h>\nextern "C" __global__ void hk(REAL* y, index_t n) {}\n'
    )
    src = '#include "kern.cuh"\n#include <cub/cub.cuh>\n'
    opts = parse_options(("-I" + str(tmp_path / "inc"),))
    sig = parse_signature(src, "hk", (), include=header_reader(opts, str(tmp_path)))
    assert [(p.name, p.type.text, p.type.dtype) for p in sig.params] == [
        ("y", "double*", "float64"),
        ("n", "int", "int32"),
    ]


@pytest.mark.parametrize(
    "tokens,value",
    [
        (["1"], 1),
        (["-", "2"], -2),
        (["0x1F"], 31),
        (["010"], 8),
        (["1.5f"], 1.5),
        (["7", "/", "2"], 3),
        (["-", "7", "/", "2"], -3),
        (["1", "<<", "3"], 8),
        (["(", "1", "+", "2", ")", "*", "3"], 9),
        (["true"], True),
        (["'A'"], 65),
        (["1'000"], 1000),
        (["2e3"], 2000.0),
        (["~", "0"], -1),
    ],
)
def test_default_values_follow_c(tokens, value):
    assert evaluate(tokens) == value


# ------------------------------------------------------------------ binding

SIG_SRC = PRELUDE + (
    'extern "C" __global__ void k(const float* x, float* y, int n, float a = 2.0f, '
    "bool flag = false, Mode m = MUL, __half h = 1, double d = 0, unsigned u = 3, "
    "Params p = Params()) {}"
)


class FakeArray:
    """A stand-in for a cupy array (no GPU here): has a dtype and the CUDA array interface."""

    def __init__(self, dtype, shape=(4,)):
        self.dtype, self.shape = numpy.dtype(dtype), shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": self.dtype.str}


def _sig():
    src = SIG_SRC.replace(" = Params()", "")  # no default for the struct (not evaluable)
    return parse_signature(src, "k")


def test_bind_positional_keywords_and_defaults():
    x, y = FakeArray("float32"), FakeArray("float32")
    out = bind(_sig(), (x,), {"y": y, "n": 10, "u": numpy.uint8(7), "p": "opaque"})
    assert out[0] is x and out[1] is y
    assert [type(v) for v in out[2:9]] == [
        numpy.int32,
        numpy.float32,
        numpy.bool_,
        numpy.int32,
        numpy.float16,
        numpy.float64,
        numpy.uint32,
    ]
    assert out[2:9] == (10, 2.0, False, 1, 1.0, 0.0, 7)
    assert out[9] == "opaque"  # a struct is passed as given


class Color(enum.IntEnum):
    RED = 0
    BLUE = 1


@pytest.mark.parametrize(
    "kwargs,converted",
    [
        ({"n": numpy.int64(5)}, ("n", numpy.int32, 5)),
        ({"n": True}, ("n", numpy.int32, 1)),
        ({"a": 3}, ("a", numpy.float32, 3.0)),
        ({"a": numpy.float64(0.1)}, ("a", numpy.float32, numpy.float32(0.1))),
        ({"flag": 1}, ("flag", numpy.bool_, True)),
        ({"m": Color.BLUE}, ("m", numpy.int32, 1)),
        ({"h": 0.5}, ("h", numpy.float16, 0.5)),
        ({"u": 2**32 - 1}, ("u", numpy.uint32, 2**32 - 1)),
        ({"a": float("inf")}, ("a", numpy.float32, numpy.inf)),
    ],
)
def test_scalars_convert_to_the_declared_type(kwargs, converted):
    sig = _sig()
    out = bind(sig, (FakeArray("f4"), FakeArray("f4")), {"n": 1, "p": 0, **kwargs})
    name, typ, value = converted
    i = sig.names().index(name)
    assert type(out[i]) is typ and out[i] == value


# call -> (exception, message fragment naming the parameter)
BIND_ERRORS = [
    (
        (FakeArray("f4"),),
        {"p": 0},
        TypeError,
        r"missing the argument for parameter 'y' \(float\*\)",
    ),
    (
        (FakeArray("f4"), FakeArray("f4"), 1),
        {"p": 0, "nn": 2},
        TypeError,
        "unknown keyword argument 'nn'",
    ),
    (
        (FakeArray("f4"), FakeArray("f4"), 1),
        {"p": 0, "n": 2},
        TypeError,
        "multiple values for parameter 'n'",
    ),
    (
        (FakeArray("f4"), FakeArray("f4"), 2**31),
        {"p": 0},
        OverflowError,
        r"parameter 'n' \(int\): 2147483648 is out of range for int",
    ),
    (
        (FakeArray("f4"), FakeArray("f4"), -1),
        {"p": 0, "u": -1},
        OverflowError,
        r"'u' \(unsigned\): -1 is out of range",
    ),
    (
        (FakeArray("f4"), FakeArray("f4"), 2.5),
        {"p": 0},
        TypeError,
        r"'n' \(int\) expects an integer, got float 2.5",
    ),
    (
        (FakeArray("f4"), FakeArray("f4"), 1),
        {"p": 0, "a": 1e39},
        OverflowError,
        r"'a' \(float\): 1e\+39 is out of range for float",
    ),
    ((FakeArray("f4"), FakeArray("f4"), 1), {"p": 0, "flag": 2}, TypeError, "expects a bool"),
    (
        (FakeArray("f4"), 3, 1),
        {"p": 0},
        TypeError,
        r"'y' \(float\*\) is a pointer, but got the "
        "scalar int 3",
    ),
    (
        (FakeArray("f4"), FakeArray("f4"), FakeArray("i4")),
        {"p": 0},
        TypeError,
        r"'n' \(int\) is a scalar, but got an array",
    ),
    (
        (FakeArray("f8"), FakeArray("f4"), 1),
        {"p": 0},
        TypeError,
        r"'x' \(const float\*\) points to float32, but got a float64 array",
    ),
    ((numpy.zeros(3, "f4"), FakeArray("f4"), 1), {"p": 0}, TypeError, "host numpy array"),
    ((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), {}, TypeError, "takes 10 arguments but 11"),
]


@pytest.mark.parametrize(
    "args,kwargs,exc,message", BIND_ERRORS, ids=[m[:30] for *_, m in BIND_ERRORS]
)
def test_bad_arguments_name_the_parameter(args, kwargs, exc, message):
    with pytest.raises(exc, match=message):
        bind(_sig(), args, kwargs)


def test_pointer_check_can_be_turned_off():
    x64 = FakeArray("f8")
    out = bind(_sig(), (x64, FakeArray("f4"), 1), {"p": 0}, check_pointers=False)
    assert out[0] is x64


def test_void_pointers_and_opaque_pointers_take_any_array():
    sig = parse_signature(PRELUDE + 'extern "C" __global__ void k(void* a, Params* b) {}', "k")
    a, b = FakeArray("i2"), FakeArray("u1")
    assert bind(sig, (a, b), {}) == (a, b)


# ------------------------------------------------------------------ RawKernel surface


def test_rawkernel_signature_and_positional_fallback():
    from cupy_rawcode import RawKernel

    k = RawKernel(SIG_SRC.replace(" = Params()", ""), "k")
    assert str(k.signature).startswith("k(const float* x, float* y, int n, float a = 2.0f")
    bad = RawKernel('extern "C" __global__ void k(void (*f)(int)) {}', "k")
    with pytest.warns(UserWarning, match="positional arguments only"):
        assert bad.signature is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bad.signature is None  # warned once
    with pytest.raises(TypeError, match="keyword arguments need a parsed signature"):
        bad.launch((1,), (1,), f=1)


def test_signature_survives_pickling():
    import pickle

    from cupy_rawcode import RawKernel

    k = RawKernel('extern "C" __global__ void k(float* y, int n = 3) {}', "k")
    k.check_pointers = False
    k2 = pickle.loads(pickle.dumps(k))
    assert str(k2.signature) == "k(float* y, int n = 3)" and k2.check_pointers is False


def test_none_or_a_nullptr_default_is_a_null_pointer():
    sig = parse_signature('extern "C" __global__ void k(float* a, int* b = nullptr) {}', "k")
    out = bind(sig, (None,), {})
    assert [(type(v), int(v)) for v in out] == [(numpy.uint64, 0), (numpy.uint64, 0)]
