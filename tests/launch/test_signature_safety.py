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


def _read(src, files=None, options=(), entry="k", complete=True):
    """parse_signature with user headers ``files`` (name -> text) read in place."""

    def include(name, angled, includer):
        return (name, files[name]) if files and name in files else None

    macros = parse_options(tuple(options)).macros
    return parse_signature(src, entry, macros, include=include, complete=complete)


_CFG = "#ifdef USE_DOUBLE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
_K = 'extern "C" __global__ void k(real a) {}'


def _if(cond):
    return f"#if {cond}\ntypedef double real;\n#else\ntypedef float real;\n#endif\n{_K}"


# source, user headers, options, args -> (dtype, value) of the last argument, or None: refused
NVRTC_READS = {
    "define_before_include": (
        f'#define USE_DOUBLE\n#include "cfg.h"\n{_K}',
        {"cfg.h": _CFG},
        (),
        (1.5,),
        ("float64", 1.5),
    ),
    "include_order": (
        f'#include "a.h"\n#include "b.h"\n{_K}',
        {
            "a.h": '#include "a1.h"\n',
            "a1.h": "#define PREC_DOUBLE\n",
            "b.h": "#ifdef PREC_DOUBLE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n",
        },
        (),
        (1.5,),
        ("float64", 1.5),
    ),
    "dead_include_not_read": (
        f'#ifdef WANT\n#include "dbl.h"\n#endif\n#include "b.h"\n{_K}',
        {
            "dbl.h": "#define PREC_DOUBLE\n",
            "b.h": "#ifdef PREC_DOUBLE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n",
        },
        (),
        (1.5,),
        ("float32", 1.5),
    ),
    "unread_include_is_uncertain": (f"#include <pre.h>\n{_CFG}{_K}", {}, (), (1.5,), None),
    "underscore_guard_after_system_header": (
        f'#include <cuda_fp16.h>\n#include "my.h"\n{_K}',
        {"my.h": "#ifndef _MY_H_\n#define _MY_H_\ntypedef float real;\n#endif\n"},
        (),
        (1.5,),
        ("float32", 1.5),
    ),
    "user_names_not_external": (
        "#ifndef EPS\n#define EPS 1e-5f\n#endif\n#ifndef M_TILE\n#define M_TILE 8\n#endif\n"
        'extern "C" __global__ void k(float e = EPS, int m = M_TILE) {}',
        {},
        (),
        (),
        ("int32", 8),
    ),
    "bitand_below_equality": (
        "#define FLAGS 4\n" + _if("FLAGS & 4 == 4"),
        {},
        (),
        (1.5,),
        ("float32", 1.5),
    ),
    "no_chained_comparison": (_if("3 > 2 > 1"), {}, (), (1.5,), ("float32", 1.5)),
    "equality_below_relational": (_if("1 < 2 == 1"), {}, (), (1.5,), ("float64", 1.5)),
    "and_gives_one": (_if("(1 && 2) == 1"), {}, (), (1.5,), ("float64", 1.5)),
    "or_gives_one": (_if("(0 || 5) == 1"), {}, (), (1.5,), ("float64", 1.5)),
    "unsigned_comparison": (_if("-1 < 18446744073709551615u"), {}, (), (1.5,), ("float32", 1.5)),
    "signed_overflow_refused": (_if("(1 << 63) > 0"), {}, (), (1.5,), None),
    "hex_suffix_ternary": (
        _if("0x10 == 16 && 2L > 1u && (3 ? 1 : 0) && 'a' == 97 && -7 / 2 == -3"),
        {},
        (),
        (1.5,),
        ("float64", 1.5),
    ),
    "function_like_D": (
        _CFG.replace("USE_DOUBLE", "SCALE") + _K,
        {},
        ("-DSCALE(x)=((x)*2)",),
        (1.5,),
        ("float64", 1.5),
    ),
    "enum_vs_constexpr": (
        "namespace d { enum S { BLOCK = 128 }; }\nconstexpr int BLOCK = 256;\n"
        'extern "C" __global__ void k(int n = BLOCK) {}',
        {},
        (),
        (),
        None,
    ),
    "enum_class_unqualified": (
        "enum class Color { Red, Green, Blue };\nconst int Blue = 7;\n"
        'extern "C" __global__ void k(int c = Blue) {}',
        {},
        (),
        (),
        None,
    ),
    "enum_class_qualified": (
        "enum class A { X, Y };\nenum class B { Y, X };\n"
        'extern "C" __global__ void k(int c = (int)0, A a = A::Y) {}'.replace(
            "int c = (int)0, ", ""
        ),
        {},
        (),
        (),
        ("int32", 1),
    ),
    "struct_local_size_t": (
        'struct S { typedef int size_t; };\nextern "C" __global__ void k(size_t n) {}',
        {},
        (),
        (1,),
        None,
    ),
    "typedef_two_declarators": (
        'typedef float real, *preal;\nextern "C" __global__ void k(preal p, real a) {}',
        {},
        (),
        (None, 1.5),
        ("float32", 1.5),
    ),
    "int_to_float_rounds_once": (
        'extern "C" __global__ void k(float f = 1152921573326323713ULL) {}',
        {},
        (),
        (),
        ("float32", float(2**60 + 2**37)),
    ),
    "non_ascii_char_refused": (
        "extern \"C\" __global__ void k(int n = 'é') {}",
        {},
        (),
        (),
        None,
    ),
    "elifdef": (
        "#ifdef A\ntypedef int real;\n#elifdef B\ntypedef double real;\n#else\n"
        f"typedef float real;\n#endif\n{_K}",
        {},
        ("-DB",),
        (1.5,),
        ("float64", 1.5),
    ),
}


@pytest.mark.parametrize("name", sorted(NVRTC_READS))
def test_declarations_are_read_as_nvrtc_reads_them(name):
    src, files, options, args, want = NVRTC_READS[name]
    if want is None:
        with pytest.raises(SignatureError):
            bind(_read(src, files, options), args, {})
        return
    v = bind(_read(src, files, options), args, {})[-1]
    assert (v.dtype.name, v.item()) == want


def test_pre_include_makes_names_uncertain():
    with pytest.raises(SignatureError, match="real"):
        _read(_CFG + _K, complete=False)


@pytest.mark.parametrize("ctype", ["__int128", "dim3", "int_least32_t", "char8_t"])
def test_unmapped_builtins_refuse_python_numbers(ctype):
    with pytest.raises(RawcodeTypeError, match="'a'"):
        _bound('extern "C" __global__ void k(' + ctype + " a) {}", (1,))


def test_launch_int_to_float_rounds_once():
    v = _bound('extern "C" __global__ void k(float a) {}', (2**60 + 2**36 + 1,))[-1]
    assert v == numpy.float32(2**60 + 2**37)


@pytest.mark.parametrize(
    "src",
    [
        "#if defined(\ntypedef float real;\n#endif\n" + _K,
        "#if " + "!(" * 3000 + "1" + ")" * 3000 + "\ntypedef float real;\n#endif\n" + _K,
        "extern \"C\" __global__ void k(int n = '\\N') {}",
        "#define A B B B B B B B B\n"
        + "".join(f"#define B{i} A A A A A A A A\n" for i in range(1))
        + "#define B A A A A A A A A\n"
        + 'extern "C" __global__ void k(A a) {}',
    ],
)
def test_reader_failures_are_refusals(src):
    with pytest.raises(SignatureError):
        _read(src)


def test_deep_if_nesting_is_linear():
    import time

    src = "#if 1\n" * 20000 + "typedef float real;\n" + "#endif\n" * 20000 + _K
    t = time.perf_counter()
    _read(src)
    assert time.perf_counter() - t < 2


# ordinary kernels (regress.py) that must stay readable: source, options -> signature text
ORDINARY = [
    ("#ifndef _MY_KERNEL_H_\n#define _MY_KERNEL_H_\ntypedef float real;\n#endif\n" + _K, ()),
    (
        "#ifndef __COMMON_CUH__\n#define __COMMON_CUH__\n#define BLOCK 256\n#endif\n"
        'extern "C" __global__ void k(float* x, int n = BLOCK) {}',
        (),
    ),
    (
        '#ifndef SIGMA\n#define SIGMA 2.0f\n#endif\nextern "C" __global__ void k(float s = SIGMA) {}',
        (),
    ),
    (
        '#ifndef CUBE_SIZE\n#define CUBE_SIZE 8\n#endif\nextern "C" __global__ void k(int s = CUBE_SIZE) {}',
        (),
    ),
    ("#define VER 0x0200\n#if VER >= 0x0100\ntypedef float real;\n#endif\n" + _K, ()),
    (
        "#define N 256\n#if N % 32 == 0 && N / 32 > 4 && (N > 128 ? 1 : 0)\ntypedef float real;\n#endif\n"
        + _K,
        (),
    ),
    ("#define A 1\n#if defined(A) and A\ntypedef float real;\n#endif\n" + _K, ()),
    ("#if N > 100\ntypedef float real;\n#endif\n" + _K, ("-DN=256u",)),
    (
        "#ifndef _TYPES_H\n#define _TYPES_H\nenum Mode { ADD, MUL };\n#endif\n"
        'extern "C" __global__ void k(Mode m = MUL) {}',
        (),
    ),
    (
        '#if ARCH >= 0x700\n#define T float\n#endif\nextern "C" __global__ void k(T a) {}',
        ("-DARCH=0x800",),
    ),
    ('#include <cuda_fp16.h>\nextern "C" __global__ void k(__half* x, __half a, int n) {}', ()),
    ("#pragma once\n#ifndef MYK_H\n#define MYK_H\ntypedef float real;\n#endif\n" + _K, ()),
]


@pytest.mark.parametrize("src,options", ORDINARY)
def test_ordinary_kernels_stay_readable(src, options):
    assert _read(src, options=options).params


def test_headers_read_in_place_from_disk(tmp_path):
    from cupy_rawcode.launch.bind import signature_for

    (tmp_path / "g.h").write_text(
        "#ifndef _G_H_\n#define _G_H_\n#ifdef USE_DOUBLE\ntypedef double rr;\n#else\n"
        "typedef float rr;\n#endif\n#endif\n"
    )
    (tmp_path / "p.h").write_text("#pragma once\n__global__ void g(int a) {}\n")
    src = (
        '#define USE_DOUBLE\n#include "g.h"\n#include "g.h"\n#include "p.h"\n#include "./p.h"\n'
        'extern "C" __global__ void k(rr a) {}'
    )
    assert str(signature_for(src, "k", parse_options(()), str(tmp_path))) == "k(double a)"
    (tmp_path / "c.h").write_bytes("/* (c) M\u00fcller */\n#define USE_DOUBLE\n".encode("latin-1"))
    with pytest.raises(SignatureError):  # an unreadable header: USE_DOUBLE is uncertain
        signature_for('#include "c.h"\n' + _CFG + _K, "k", parse_options(()), str(tmp_path))
