"""Typed launch never binds a wrong value: declarations read exactly (conditionals, scopes,
template defaults, parameter names, C's arithmetic for defaults) or refused with the reason."""

import warnings

import numpy
import pytest

from cupy_rawcode.ground.errors import RawcodeOverflowError, RawcodeTypeError
from cupy_rawcode.headers.options import parse_options
from cupy_rawcode.launch.bind import bind
from cupy_rawcode.launch.signature import SignatureError, parse_signature


def _sig(src, entry="k", options=()):
    return parse_signature(src, entry, parse_options(tuple(options)).macros)


def _bound(src, args, options=(), entry="k", kwargs=None):
    return bind(_sig(src, entry, options), args, kwargs or {})


# source, options, args -> (dtype, value) of the last bound argument
READ_EXACTLY = [
    (  # F1: #ifdef honours -D
        "#ifdef USE_DOUBLE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
        'extern "C" __global__ void k(real a) {}',
        ("-DUSE_DOUBLE",),
        (2.5,),
        ("float64", 2.5),
    ),
    (  # F1: a source #define under #ifndef does not override -D
        '#ifndef BLOCK\n#define BLOCK 256\n#endif\nextern "C" __global__ void k(int n = BLOCK) {}',
        ("-DBLOCK=512",),
        (),
        ("int32", 512),
    ),
    (  # F1: #if 1
        "#if 1\ntypedef double real2;\n#else\ntypedef float real2;\n#endif\n"
        'extern "C" __global__ void k(real2 a) {}',
        (),
        (1.0,),
        ("float64", 1.0),
    ),
    (  # F3: '>' inside parentheses in a template default
        "template<typename T, bool Wide = (sizeof(T) > 4), typename U = float>\n"
        "__global__ void k(double* out, T a, U b) {}",
        (),
        (None, 1, 2.5),
        ("float32", 2.5),
    ),
    (  # F4: a parameter named like a typedef keeps its name and type
        'typedef float scale;\nextern "C" __global__ void k(double* out, float scale) {}',
        (),
        (None, 2.5),
        ("float32", 2.5),
    ),
    (  # F4
        'typedef short idx;\nextern "C" __global__ void k(int* out, int idx) {}',
        (),
        (None, 100000),
        ("int32", 100000),
    ),
]


@pytest.mark.parametrize("src,options,args,want", READ_EXACTLY)
def test_declarations_are_read_exactly(src, options, args, want):
    entry = "k<int>" if src.startswith("template") else "k"
    v = _bound(src, args, options, entry)[-1]
    assert (v.dtype.name, v.item()) == want


# source, options -> a part of the SignatureError's message
REFUSED = [
    (  # F1: #undef and a second #define
        "#define T float\n__global__ void kf(T a) {}\n#undef T\n#define T double\n"
        'extern "C" __global__ void k(T a) {}',
        (),
        "'T'",
    ),
    (  # F1: -D and an unguarded #define
        '#define BLOCK 256\nextern "C" __global__ void k(int n = BLOCK) {}',
        ("-DBLOCK=512",),
        "'BLOCK' is defined more than once",
    ),
    (  # F1: a condition that cannot be evaluated here
        "#ifdef __CUDA_ARCH__\ntypedef double real;\n#endif\n"
        'extern "C" __global__ void k(real a) {}',
        (),
        "'real' is declared under #if/#ifdef",
    ),
    (  # F1: a macro defined under such a condition
        '#if __CUDACC_VER_MAJOR__ > 11\n#define BLOCK 256\n#endif\nextern "C" __global__ void k(int n = BLOCK) {}',
        (),
        "'BLOCK' is defined under #if/#ifdef",
    ),
    (  # F1: parameters under such a condition
        'extern "C" __global__ void k(float* x\n#ifdef __CUDA_ARCH__\n, int n\n#endif\n) {}',
        (),
        "under #if/#ifdef",
    ),
    (  # F2: two namespaces
        "namespace s { typedef float real; }\nnamespace d { typedef double real; }\n"
        'extern "C" __global__ void k(real a) {}',
        (),
        "the alias 'real' is defined more than once",
    ),
    (  # F2: a struct member typedef
        "typedef float real;\nstruct Acc { typedef double real; };\n"
        'extern "C" __global__ void k(real a) {}',
        (),
        "the alias 'real' is defined more than once",
    ),
    (  # F2: a typedef in a function body
        "typedef double real;\n__device__ void f() { typedef float real; }\n"
        'extern "C" __global__ void k(real a) {}',
        (),
        "the alias 'real' is defined more than once",
    ),
    (  # F2: enums of the same name
        "namespace a { enum Mode : long long { X }; }\nnamespace b { enum Mode : char { Y }; }\n"
        'extern "C" __global__ void k(a::Mode m) {}',
        (),
        "'Mode' is defined more than once",
    ),
    (  # F7: an enum that C++ would widen past int
        'enum Big { NEG = -1, HUGE = 1LL << 40 };\nextern "C" __global__ void k(Big b) {}',
        (),
        "outside int",
    ),
    (  # F5: signed overflow in a default
        'extern "C" __global__ void k(int n = 2147483647 + 1) {}',
        (),
        "overflows",
    ),
    (  # F5: a non-null pointer default
        'extern "C" __global__ void k(float* p = 1) {}',
        (),
        "not a null pointer",
    ),
    (  # F10: a default too long to evaluate
        'extern "C" __global__ void k(int a = ' + " + ".join(["1"] * 1000) + ") {}",
        (),
        "longer than",
    ),
]


@pytest.mark.parametrize("src,options,message", REFUSED)
def test_unsafe_declarations_are_refused(src, options, message):
    with pytest.raises(SignatureError, match=message.replace("(", r"\(")):
        _sig(src, "k", options)


# declaration -> the value C++ gives its default
DEFAULTS = [
    ("int n = -7 % 3", "int32", -1),
    ("long long n = -1u", "int64", 4294967295),
    ("long long m = ~0u", "int64", 4294967295),
    ("double d = 5u - 6u", "float64", 4294967295.0),
    ("unsigned n = -1", "uint32", 4294967295),
    ("unsigned long long n = -1ULL", "uint64", 2**64 - 1),
    ("int n = 2.5", "int32", 2),
    ("int n = -2.5", "int32", -2),
    ("bool b = 2", "bool", True),
    ("long long n = 1 << 31u", "int64", None),  # signed 1 << 31 overflows int: refused
]


@pytest.mark.parametrize("decl,dtype,value", DEFAULTS)
def test_defaults_follow_c(decl, dtype, value):
    src = 'extern "C" __global__ void k(' + decl + ") {}"
    if value is None:
        with pytest.raises(SignatureError):
            _sig(src)
        return
    v = _bound(src, ())[0]
    assert (v.dtype.name, v.item()) == (dtype, value)


@pytest.mark.parametrize("decl", ["float* p = 0", "const double* __restrict__ q = 0"])
def test_null_pointer_defaults(decl):
    v = _bound('extern "C" __global__ void k(' + decl + ") {}", ())[0]
    assert v == 0 and isinstance(v, numpy.uint64)


# type, value -> error class and message part (F8, F9)
SCALARS = [
    ("__nv_bfloat16", 2.5, RawcodeTypeError, "pass a NumPy/CuPy scalar"),
    ("half2", 1.0, RawcodeTypeError, "pass a NumPy/CuPy scalar"),
    ("float2", 1, RawcodeTypeError, "pass a NumPy/CuPy scalar"),
    ("float2", numpy.float32(1), RawcodeTypeError, "8 bytes"),
    ("complex<float>", 1e300 + 0j, RawcodeOverflowError, "out of range"),
]


@pytest.mark.parametrize("ctype,value,error,message", SCALARS)
def test_unconvertible_scalars_are_refused(ctype, value, error, message):
    src = 'extern "C" __global__ void k(' + ctype + " a) {}"
    with pytest.raises(error, match=message) as info:
        _bound(src, (value,))
    assert "'a'" in str(info.value)


def test_texture_and_surface_objects_pass_their_handle():
    cls = type("TextureObject", (), {"__module__": "cupy.cuda.texture", "ptr": 42})
    src = 'extern "C" __global__ void k(cudaTextureObject_t t, cudaSurfaceObject_t s) {}'
    out = _bound(src, (cls(), cls()))
    assert out == (numpy.uint64(42), numpy.uint64(42))


def test_bind_errors_name_the_parameter():
    class CAIOnly:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False)}

    class TorchLike(CAIOnly):
        dtype, shape = object(), (4,)
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (0, False)}

    src = 'extern "C" __global__ void k(float* x, int n) {}'
    with pytest.raises(RawcodeTypeError, match="'n'"):
        _bound(src, (None, CAIOnly()))
    with pytest.raises(RawcodeTypeError, match="'x'.*float64"):
        _bound(src, (TorchLike(), 1))


def test_a_huge_unterminated_declaration_is_linear():
    import time

    start = time.perf_counter()
    with pytest.raises(SignatureError):
        _sig("using a = " * 20000 + "\ntypedef " * 20000 + "\nenum E " * 20000)
    assert time.perf_counter() - start < 2.0


def test_other_unreadable_kernels_leave_this_one_readable():
    src = (
        "template<typename T> __global__ void t(T* x) {}\n"
        "template __global__ void t<float>(float*);\n"
        "template<> __global__ void t<double>(double* x) {}\n"
        'typedef struct Foo Foo;\nextern "C" __global__ void k(float* x, int n) {}'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert str(_sig(src)) == "k(float* x, int n)"
