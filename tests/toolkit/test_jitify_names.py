"""``jitify=True`` sees the names Jitify's own headers made visible outside ``std``
(toolkit/jitify_names.py): for each header, a kernel of ours that uses them unqualified compiles
under jitify=True and fails without it with CuPy's CompileException; a program's own global
declaration of such a name is the one its code sees; std::numeric_limits stays specializable.
Compiles for sm_90 (no GPU); the last test launches on a GPU."""

import warnings

import pytest

import cupy_rawcode
from cupy_rawcode.ground import errors
from cupy_rawcode.hook import install as hook
from cupy_rawcode.kernel import loading
from cupy_rawcode.toolkit import jitify_names

ARCH = "sm_90"

try:
    from cupy.cuda.compiler import CompileException, JitifyException
except Exception:  # no CuPy: the stand-ins the errors derive from
    CompileException, JitifyException = errors._cupy_classes()

pytestmark = pytest.mark.filterwarnings(
    "ignore::cupy_rawcode.headers.standard.StandardRaisedWarning"
)

# header -> a kernel body that uses every name the header's block makes global, unqualified
USES = {
    "type_traits": """
template <class T, enable_if_t<is_integral<T>::value && !is_same<T, bool>::value>* = nullptr>
__device__ T twice(T v) { return 2 * v; }
static_assert(is_floating_point<float>::value && is_signed<int>::value, "");
static_assert(is_unsigned<unsigned>::value && is_array<int[2]>::value, "");
static_assert(is_function<int(int)>::value && true_type::value && !false_type::value, "");
static_assert(is_same<remove_reference<int&>::type, remove_reference_t<int&&>>::value, "");
static_assert(is_same<remove_extent<int[3]>::type, remove_extent_t<int[]>>::value, "");
static_assert(is_same<remove_const<const int>::type, remove_const_t<const int>>::value, "");
static_assert(is_same<remove_volatile<volatile int>::type, remove_volatile_t<int>>::value, "");
static_assert(is_same<remove_cv<const int>::type, remove_cv_t<const volatile int>>::value, "");
static_assert(is_same<conditional<true, int, char>::type, conditional_t<true, int, char>>::value, "");
static_assert(is_same<add_pointer<int>::type, add_pointer_t<int>>::value, "");
static_assert(is_same<decay<const int&>::type, decay_t<int[2]>>::value == false, "");
typedef enable_if<true, int>::type from_enable_if;
typedef result_of<int (*(float))(float)>::type from_result_of;
""",
    "limits": 'static_assert(numeric_limits<int>::max() == 2147483647, "");\n',
    "iterator": """
static_assert(sizeof(iterator_traits<int*>::value_type) == 4, "");
__device__ void tags(input_iterator_tag, output_iterator_tag, forward_iterator_tag,
                     bidirectional_iterator_tag, random_access_iterator_tag) {}
""",
    "utility": "__device__ pair<int, float> both() { return make_pair(1, 2.0f); }\n",
    "cstddef": '__device__ nullptr_t none; static_assert(alignof(max_align_t) >= 8, "");\n'
    "__device__ byte one;\n",
    "cstdlib": '__device__ nullptr_t none; static_assert(alignof(max_align_t) >= 8, "");\n'
    "__device__ byte one;\n",
    "cstring": "__device__ int same(const char* a) { return strcmp(a, a); }\n"
    "__device__ char* copy(char* d, const char* s) { return strcpy(d, s); }\n"
    "typedef decltype(&strerror) strerror_type;\n",
    "cstdio": "typedef decltype(&fflush) fflush_type; typedef decltype(&fprintf) fprintf_type;\n"
    "__device__ FILE* stream; __device__ nullptr_t none;\n"
    'static_assert(alignof(max_align_t) >= 8, ""); __device__ byte one;\n',
    "ctime": '__device__ tm when; static_assert(CLOCKS_PER_SEC == 1000000, "");\n',
    "cmath": "__device__ double pi() { return M_PI; }\n",
}
C_NAMES = {c: cxx for c, cxx in (("stddef.h", "cstddef"), ("stdlib.h", "cstdlib"),
           ("stdio.h", "cstdio"), ("string.h", "cstring"), ("memory.h", "cstring"),
           ("time.h", "ctime"), ("math.h", "cmath"))}  # fmt: skip
KERNEL = 'extern "C" __global__ void k(int* x) { x[0] = 1; }\n'


def _source(header: str) -> str:
    return f"#include <{header}>\n{USES[C_NAMES.get(header, header)]}{KERNEL}"


def _compile(src: str, jitify: bool, options=()):
    return cupy_rawcode.RawModule(code=src, options=options, jitify=jitify).compile(arch=ARCH)


def test_every_header_with_a_block_has_a_kernel_using_all_its_names():
    headers = set(jitify_names.GLOBALS) | set(jitify_names.MACROS) | set(jitify_names.INCLUDES)
    assert headers == set(USES)
    for header, text in USES.items():
        missing = [n for n in jitify_names.names(header) if n not in text]
        assert not missing, (header, missing)


@pytest.mark.parametrize("header", sorted(USES) + sorted(C_NAMES))
def test_names_compile_under_jitify_and_fail_without(header):
    src = _source(header)
    _compile(src, jitify=True)
    with pytest.raises(CompileException) as e:
        _compile(src, jitify=False)
    assert not isinstance(e.value, JitifyException)  # the plain error, unchanged


def test_stdint_names_were_global_already():
    src = "#include <cstdint>\n__device__ int8_t a; __device__ uint64_t b;\n"
    src += "__device__ int_fast16_t c; __device__ uint_least32_t d; __device__ intmax_t e;\n"
    src += "__device__ uintptr_t f;\n" + KERNEL
    _compile(src, jitify=False)
    _compile(src, jitify=True)


def _install_route(monkeypatch, src, options):
    """install()'s compile of a jitify=True call, without loading the module (no GPU)."""
    monkeypatch.setattr(loading, "_load_module", lambda code: code)
    return hook._compile_for_cupy(src, options, "90", None, None)


CUDF_STYLE = """#include <cstdint>
#include <type_traits>
template <typename T> constexpr bool is_integral_v = std::is_integral<T>::value;
struct Add {
  template <typename TypeOut, typename TypeLhs, typename TypeRhs,
            enable_if_t<(is_integral_v<TypeOut>)>* = nullptr>
  __device__ static TypeOut operate(TypeLhs x, TypeRhs y) { return x + y; }
};
extern "C" __global__ void k(int64_t* out, const int32_t* a, const int16_t* b) {
  out[0] = Add::operate<int64_t>(a[0], b[0]);
}
"""


@pytest.mark.parametrize("route", ["install()", "RawKernel", "RawModule"])
def test_cudf_style_enable_if_t_with_its_own_is_integral_v(monkeypatch, route):
    """cuDF's JIT binary operations: enable_if_t unqualified (Jitify's), is_integral_v its own."""
    if route == "install()":
        _install_route(monkeypatch, CUDF_STYLE, ("-std=c++14", "-DCUPY_USE_JITIFY"))
    elif route == "RawKernel":
        cupy_rawcode.RawKernel(CUDF_STYLE, "k", options=("-std=c++14",), jitify=True).compile(
            arch=ARCH
        )
    else:
        _compile(CUDF_STYLE, jitify=True, options=("-std=c++14",))


OWN = {
    "enable_if_t": """#include <type_traits>
template <bool B, class T = void> struct my_enable_if {};
template <class T> struct my_enable_if<true, T> { typedef T type; };
template <bool B, class T = void> using enable_if_t = typename my_enable_if<B, T>::type;
template <class T, enable_if_t<is_integral<T>::value>* = nullptr> __device__ T f(T v) { return v; }
__device__ int g(int v) { return f(v); }
""",
    "int8_t": "#include <cstdint>\ntypedef signed char int8_t;\n"
    "__device__ int8_t g(int8_t v) { return v; }\n",
    "tm": "#include <ctime>\nstruct tm { int hours; };\n__device__ int g(tm t) { return t.hours; }\n",
    "strcmp": "#include <cstring>\n"
    "__device__ int strcmp(const char* a, const char* b) { return a == b ? 0 : 1; }\n"
    "__device__ int g(const char* a) { return strcmp(a, a); }\n",
    "is_same (in a header of the program)": '#include <type_traits>\n#include "own.h"\n'
    'static_assert(is_same<int, int>::yes, "");\n',
}


@pytest.mark.parametrize("name", sorted(OWN))
def test_the_programs_own_global_declaration_wins(tree, name):
    root = tree(
        {"inc/own.h": "template <class A, class B> struct is_same { enum { yes = 1 }; };\n"}
    )
    _compile(OWN[name] + KERNEL, jitify=True, options=(f"-I{root}/inc",))


def test_a_declaration_the_scan_cannot_see_makes_uses_ambiguous():
    """A name declared through a macro is not seen: its unqualified uses are ambiguous, as they
    were under Jitify before 2020 (the README says so)."""
    src = (
        "#include <type_traits>\n#define ALIAS(n) template <bool B> using n = int\n"
        "ALIAS(enable_if_t);\n__device__ enable_if_t<true> v;\n" + KERNEL
    )
    with pytest.raises(CompileException, match="ambiguous"):
        _compile(src, jitify=True)
    _compile(src, jitify=False)


SPECIALIZED = """#include <limits>
struct Fixed { int v; };
namespace std {
template <> class numeric_limits<Fixed> {
 public:
  static constexpr bool is_specialized = true;
  __device__ static constexpr Fixed max() { return Fixed{1000}; }
};
}
static_assert(numeric_limits<Fixed>::max().v == 1000, "");
static_assert(std::numeric_limits<Fixed>::max().v == 1000, "");
static_assert(numeric_limits<short>::max() == 32767, "");
"""


def test_a_specialization_of_std_numeric_limits_is_seen_unqualified_too():
    _compile(SPECIALIZED + KERNEL, jitify=True)


@pytest.mark.parametrize(
    "text, names",
    [
        (b"template <bool B, class T = void> using enable_if_t = int;", ("enable_if_t",)),
        (b"struct tm { int a; }; typedef signed char int8_t;", ("tm",)),
        (b"typedef struct { int a; } FILE; int fflush(FILE* f);", ("FILE", "fflush")),
        (b"enable_if_t<true>* p; x = strcmp(a, b); return strcmp(a, b);", ()),
        (b"std::pair<int, int> make_pair(int a, int b);", ("make_pair",)),
        # each kind of declaration across lines, and what is not one
        (b"typedef struct _iobuf\n{\n  int a;\n}\nFILE\n;", ("FILE",)),
        (b"enum class FILE : int { a };", ("FILE",)),
        (b"int  *\n & fflush (FILE* f);", ("fflush",)),
        (b"auto r = p-> strcmp(a, b);", ("strcmp",)),  # a superset: a call through ->
        (b"throw strcmp(a); y = (strcmp(a, b)); f(x, strcmp(a));", ()),
        (b"class FILE x; typedef int x; FILE; x = FILE;", ()),
        # a typedef longer than the bytes read before a name
        (b"typedef pair<" + b"int, " * 100 + b"int> FILE;", ("FILE",)),
    ],
)
def test_own_global_names(text, names):
    assert jitify_names.own_global_names(text) == names


def test_without_jitify_no_block_is_compiled():
    """The blocks are inside #if defined(CUPY_USE_JITIFY): a plain compile of a program that
    declares its own nullptr_t at global scope sees only its own."""
    src = "#include <cstddef>\ntypedef decltype(nullptr) nullptr_t;\n__device__ nullptr_t n;\n"
    _compile(src + KERNEL, jitify=False)
    assert jitify_names.GUARD == "CUPY_USE_JITIFY"


LAUNCHED = CUDF_STYLE.replace("#include <type_traits>", "#include <type_traits>\n#include <limits>")
LAUNCHED = LAUNCHED.replace(
    "out[0] = Add::operate<int64_t>(a[0], b[0]);",
    "out[threadIdx.x] = Add::operate<int64_t>(a[threadIdx.x], b[threadIdx.x])"
    " + (numeric_limits<int16_t>::max() - 32767);",
)


@pytest.mark.gpu
def test_launched_cudf_style_kernel_computes_the_sums():
    import cupy
    import numpy as np

    a = cupy.arange(32, dtype=cupy.int32) * 100000
    b = cupy.arange(32, dtype=cupy.int16) - 7
    out = cupy.zeros(32, dtype=cupy.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = cupy_rawcode.RawKernel(LAUNCHED, "k", options=("-std=c++14",), jitify=True)
        k((1,), (32,), (out, a, b))
    np.testing.assert_array_equal(out.get(), a.get().astype(np.int64) + b.get())


@pytest.mark.parametrize("jitify, expected", [(True, ["::FILE"]), (False, [])])
def test_own_names_are_read_only_under_jitify(jitify, expected, monkeypatch):
    """Only jitify=True's guard macro makes the closure read the program's own files for the
    names of the global blocks: without it, they change nothing NVRTC gets, and a CuPy kernel's
    closure holds some 2,000 headers (headers/fast.py)."""
    from cupy_rawcode.headers.fast import resolve_fast
    from cupy_rawcode.headers.search import make_context

    calls = []
    real = jitify_names.own_global_names
    monkeypatch.setattr(
        jitify_names, "own_global_names", lambda data: calls.append(data) or real(data)
    )
    options = ["-D" + jitify_names.GUARD] if jitify else []
    closure = resolve_fast("typedef struct { int a; } FILE;\n", make_context(options))
    assert [s for s in closure.specialized if s.startswith("::")] == expected
    assert bool(calls) == jitify
