"""The C++ standard header shims in ``include/``: what backs each one (the table only).

NVRTC has no ``<type_traits>``, ``<limits>``, ``<cstdint>``... . Each shim includes the
libcudacxx header behind it (``<cuda/std/X>``) and makes its names visible as ``std::X``
(``cupy_rawcode/std_alias.h``: ``namespace std { using namespace cuda::std; }``). C headers also
keep their global names (``int32_t``, ``INT_MAX``, ``FLT_MAX``). Headers with no device
meaning (``<iostream>``, ``<vector>``, ``<string>``, ...) are declaration stubs, as Jitify's
were: library headers that include them parse (thrust's random engines include ``<iostream>``),
and a kernel that uses one of their names fails at NVRTC with a hint
(``compiler/hints.stub_hints``) saying what to use instead.

Math names reach std:: through using-directives, never a using-declaration of a global
function: a direct ``std::abs`` would hide ``cuda::std::abs(complex)`` when a kernel includes
both ``<cmath>`` and ``<complex>``.

This table is the single source: ``toolkit/shims.py`` renders it into ``include/`` and the
README's list; a test checks both are up to date.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shim:
    backing: tuple[str, ...]  # libcudacxx headers (relative to cuda/std/), all required
    optional: tuple[str, ...] = ()  # included when this CCCL has them
    extra: str = ""  # C++ after the includes (global names, macros)
    note: str = ""


_MATH = (
    "sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 expm1 log "
    "log10 log2 log1p logb ilogb pow sqrt cbrt hypot erf erfc tgamma lgamma ceil floor trunc "
    "round lround llround rint lrint llrint nearbyint fmod remainder remquo copysign "
    "nextafter fdim fmax fmin fma frexp ldexp modf scalbn scalbln fabs isnan isinf isfinite "
    "signbit"
).split()
# libcudacxx's <cuda/std/cmath> lacks some C math names (erf, exp2, ... vary by CCCL version).
# These forwarders to NVRTC's built-in ::f are templates, so a cuda::std overload (a plain
# function) always wins where one exists, and the forwarder answers where none does.
_MATH_EXTRA = (
    "namespace cupy_rawcode_math {\n#define CUPY_RAWCODE_FORWARD(f) "
    "template <class T, class... A, class = typename ::cuda::std::enable_if<"
    "::cuda::std::is_floating_point<T>::value>::type> __host__ __device__ inline auto "
    "f(T x, A... a) -> decltype(::f(x, a...)) { return ::f(x, a...); }\n"
    + "".join(f"CUPY_RAWCODE_FORWARD({n})\n" for n in _MATH)
    + "#undef CUPY_RAWCODE_FORWARD\n}  // namespace cupy_rawcode_math\n"
    "namespace std { using namespace cupy_rawcode_math; }\n"
)

_FLOAT_MACROS = {  # IEEE-754 binary32/binary64: the values <cfloat> must give
    "FLT_RADIX": "2",
    "FLT_MANT_DIG": "24",
    "DBL_MANT_DIG": "53",
    "FLT_DIG": "6",
    "DBL_DIG": "15",
    "FLT_MIN_EXP": "(-125)",
    "DBL_MIN_EXP": "(-1021)",
    "FLT_MAX_EXP": "128",
    "DBL_MAX_EXP": "1024",
    "FLT_MIN_10_EXP": "(-37)",
    "DBL_MIN_10_EXP": "(-307)",
    "FLT_MAX_10_EXP": "38",
    "DBL_MAX_10_EXP": "308",
    "FLT_MAX": "3.40282347e+38F",
    "DBL_MAX": "1.7976931348623157e+308",
    "FLT_MIN": "1.17549435e-38F",
    "DBL_MIN": "2.2250738585072014e-308",
    "FLT_EPSILON": "1.19209290e-07F",
    "DBL_EPSILON": "2.2204460492503131e-16",
    "FLT_TRUE_MIN": "1.40129846e-45F",
    "DBL_TRUE_MIN": "4.9406564584124654e-324",
    "DECIMAL_DIG": "17",
    "FLT_EVAL_METHOD": "0",
}
_FLOAT_EXTRA = "".join(f"#ifndef {k}\n#define {k} {v}\n#endif\n" for k, v in _FLOAT_MACROS.items())
_ALGORITHMS = (
    "min max clamp minmax min_element max_element minmax_element copy copy_n copy_if "
    "fill fill_n find find_if find_if_not for_each count count_if equal all_of any_of "
    "none_of lower_bound upper_bound binary_search equal_range reverse transform "
    "swap_ranges iter_swap replace remove unique rotate partition is_sorted "
    "mismatch search generate"
).split()
_CSTDIO_EXTRA = "namespace std { using ::printf; }\n"
_CTIME_EXTRA = "namespace std { using ::clock; using ::clock_t; }\n"
_CSTRING_EXTRA = "namespace std { using ::memcpy; using ::memset; }\n"

# headers whose shim is libcudacxx's header of the same name and nothing more
_SAME_NAME = (
    "type_traits limits utility tuple array complex functional iterator initializer_list "
    "numeric bit span optional variant ratio atomic chrono bitset concepts expected mdspan "
    "source_location barrier latch semaphore cstdint cstddef climits cassert cstdlib"
).split()

SUPPORTED: dict[str, Shim] = {
    **{name: Shim((name,)) for name in _SAME_NAME},
    "memory": Shim(("memory",), note="addressof, pointer_traits, ...; no owning pointers"),
    "new": Shim((), ("__new/launder.h",), note="placement new is built in"),
    "algorithm": Shim(
        (),
        tuple(f"__algorithm/{a}.h" for a in _ALGORITHMS),
        note="the non-allocating algorithms libcudacxx has (min, max, clamp, ...)",
    ),
    "numbers": Shim(("numbers",), note="CCCL >= 3.1"),
    "string_view": Shim(("string_view",), note="CCCL >= 3.1"),
    "cfloat": Shim(("cfloat",), extra=_FLOAT_EXTRA),
    "cmath": Shim(("cmath",), extra=_MATH_EXTRA, note="gaps filled from NVRTC's built-in math"),
    "cstring": Shim((), ("cstring",), extra=_CSTRING_EXTRA),
    "cstdio": Shim((), extra=_CSTDIO_EXTRA, note="printf only (device printf is built in)"),
    "ctime": Shim(("ctime",), extra=_CTIME_EXTRA, note="clock"),
    "cstdarg": Shim(
        (),
        extra="namespace std { using ::va_list; }\n",
        note="va_list and the va_ macros NVRTC predefines",
    ),
}

# C headers are the C++ shim under their C name: <math.h> is <cmath>, and so on.
C_HEADERS: dict[str, str] = {
    "stdint.h": "cstdint",
    "stddef.h": "cstddef",
    "limits.h": "climits",
    "float.h": "cfloat",
    "math.h": "cmath",
    "assert.h": "cassert",
    "stdlib.h": "cstdlib",
    "string.h": "cstring",
    "memory.h": "cstring",
    "stdio.h": "cstdio",
    "time.h": "ctime",
    "stdarg.h": "cstdarg",
}


@dataclass(frozen=True)
class Stub:
    """A header with no device meaning: declarations only, so that library headers including it
    parse (thrust's random engines include <iostream>); a kernel that uses a name fails at
    NVRTC and the error gets ``advice`` (see hints)."""

    advice: str  # what to use instead: "use ..."
    decls: str = ""  # C++ declarations in namespace std
    names: tuple[str, ...] = ()  # names whose use in an NVRTC error points at this header:
    #                                 std:: unless qualified ("abi::x"), "::x" for a global name
    includes: tuple[str, ...] = ()  # other headers a real one makes reachable
    global_decls: str = ""  # C++ declarations outside namespace std


_STREAM_ADVICE = "use printf, which NVRTC has built in"
_CONTAINER_ADVICE = (
    "use cuda::std::array, or cuda::std::span over a CuPy array passed to the kernel"
)
_THROW_ADVICE = "device code cannot throw: use assert (<cassert>) or return an error code"
_STREAM_CLASSES = ("ios", "streambuf", "istream", "ostream", "iostream")
_STRING_CLASSES = ("stringbuf", "istringstream", "ostringstream", "stringstream")
_FILE_CLASSES = ("filebuf", "ifstream", "ofstream", "fstream")
STDEXCEPT_CLASSES = (
    "logic_error",
    "domain_error",
    "invalid_argument",
    "length_error",
    "out_of_range",
    "runtime_error",
    "range_error",
    "overflow_error",
    "underflow_error",
)
_IOSFWD = (
    "class ios_base;\n"
    + "".join(
        f"template <class C, class T = char_traits<C>> class basic_{c};\n"
        for c in _STREAM_CLASSES + _FILE_CLASSES
    )
    + "".join(
        f"template <class C, class T = char_traits<C>, class A = allocator<C>> class basic_{c};\n"
        for c in _STRING_CLASSES
    )
    + "".join(
        f"typedef basic_{c}<char> {c}; typedef basic_{c}<wchar_t> w{c};\n"
        for c in _STREAM_CLASSES + _STRING_CLASSES + _FILE_CLASSES
    )
    + "template <class State> class fpos;\ntypedef long long streamoff;\n"
    "typedef ptrdiff_t streamsize;\n"
)


def _basic(*names: str) -> tuple[str, ...]:
    return tuple(n for c in names for n in (c, "w" + c, "basic_" + c))


# Which stream header a name's use points at (each name in one place: the header a user includes
# for it).
_STREAM_NAMES = {
    "iosfwd": ("fpos", "streamoff", "streamsize"),
    "ios": _basic("ios")
    + (
        "ios_base",
        "hex",
        "dec",
        "oct",
        "fixed",
        "scientific",
        "boolalpha",
        "showpoint",
        "left",
        "right",
    ),
    "streambuf": _basic("streambuf"),
    "istream": _basic("istream", "iostream") + ("ws",),
    "ostream": _basic("ostream") + ("endl", "ends", "flush"),
    "iostream": ("cout", "cerr", "clog", "cin", "wcout", "wcerr", "wclog", "wcin"),
    "sstream": _basic(*_STRING_CLASSES),
    "fstream": _basic(*_FILE_CLASSES),
    "iomanip": (
        "setw",
        "setprecision",
        "setfill",
        "setbase",
        "setiosflags",
        "resetiosflags",
        "put_money",
        "get_money",
        "put_time",
        "get_time",
        "quoted",
    ),
}
_SEQUENCES = ("vector", "deque", "list", "forward_list")


_ASSOC = (
    "template <class K, class V, class C = less<K>, "
    "class A = allocator<pair<const K, V>>> class {};\n"
)
_SET = "template <class K, class C = less<K>, class A = allocator<K>> class {};\n"
_UASSOC = (
    "template <class K, class V, class H = hash<K>, class E = equal_to<K>, "
    "class A = allocator<pair<const K, V>>> class {};\n"
)
_USET = (
    "template <class K, class H = hash<K>, class E = equal_to<K>, "
    "class A = allocator<K>> class {};\n"
)
_ORDER = ("functional", "utility")  # a real <map> makes less<>, pair<> and hash<> reachable

STUBS: dict[str, Stub] = {
    "iosfwd": Stub(_STREAM_ADVICE, _IOSFWD, _STREAM_NAMES["iosfwd"], ("string",)),
    **{
        h: Stub(_STREAM_ADVICE, names=names, includes=("iosfwd",))
        for h, names in _STREAM_NAMES.items()
        if h != "iosfwd"
    },
    "string": Stub(
        "use const char* or cuda::std::string_view (<string_view>, CCCL >= 3.1)",
        "template <class C, class T = char_traits<C>, class A = allocator<C>> class basic_string;\n"
        "typedef basic_string<char> string; typedef basic_string<wchar_t> wstring;\n"
        "typedef basic_string<char16_t> u16string; typedef basic_string<char32_t> u32string;\n",
        (
            "basic_string",
            "string",
            "wstring",
            "u16string",
            "u32string",
            "to_string",
            "stoi",
            "stol",
            "stof",
            "stod",
        ),
    ),
    **{
        h: Stub(_CONTAINER_ADVICE, f"template <class T, class A = allocator<T>> class {h};\n", (h,))
        for h in _SEQUENCES
    },
    "map": Stub(
        _CONTAINER_ADVICE,
        _ASSOC.format("map") + _ASSOC.format("multimap"),
        ("map", "multimap"),
        _ORDER,
    ),
    "set": Stub(
        _CONTAINER_ADVICE, _SET.format("set") + _SET.format("multiset"), ("set", "multiset"), _ORDER
    ),
    "unordered_map": Stub(
        _CONTAINER_ADVICE,
        _UASSOC.format("unordered_map") + _UASSOC.format("unordered_multimap"),
        ("unordered_map", "unordered_multimap"),
        _ORDER,
    ),
    "unordered_set": Stub(
        _CONTAINER_ADVICE,
        _USET.format("unordered_set") + _USET.format("unordered_multiset"),
        ("unordered_set", "unordered_multiset"),
        _ORDER,
    ),
    "stack": Stub(
        _CONTAINER_ADVICE,
        "template <class T, class S = deque<T>> class stack;\n",
        ("stack",),
        ("deque",),
    ),
    "queue": Stub(
        _CONTAINER_ADVICE,
        "template <class T, class S = deque<T>> class queue;\n"
        "template <class T, class S = vector<T>, class C = less<T>> "
        "class priority_queue;\n",
        ("queue", "priority_queue"),
        ("deque", "vector", "functional"),
    ),
    "exception": Stub(
        _THROW_ADVICE,
        "class exception; class bad_exception; class exception_ptr;\n",
        (
            "exception",
            "bad_exception",
            "exception_ptr",
            "current_exception",
            "rethrow_exception",
            "make_exception_ptr",
            "terminate",
        ),
    ),
    "stdexcept": Stub(
        _THROW_ADVICE,
        "".join(f"class {c};\n" for c in STDEXCEPT_CLASSES),
        STDEXCEPT_CLASSES,
        ("exception",),
    ),
    "typeinfo": Stub(
        "device code has no RTTI: use a template parameter or an enum tag",
        # std::type_info itself is reserved by NVRTC's front end: not redeclared
        "class bad_cast; class bad_typeid;\n",
        ("::type_info", "type_info", "bad_cast", "bad_typeid"),
    ),
    "mutex": Stub(
        "use cuda::std::atomic (<atomic>) or cuda::binary_semaphore (<semaphore>)",
        "class mutex; class recursive_mutex; class timed_mutex; "
        "class recursive_timed_mutex;\ntemplate <class M> class lock_guard; "
        "template <class M> class unique_lock;\n",
        (
            "mutex",
            "recursive_mutex",
            "timed_mutex",
            "recursive_timed_mutex",
            "lock_guard",
            "unique_lock",
            "scoped_lock",
            "call_once",
            "once_flag",
        ),
    ),
    "thread": Stub(
        "a kernel's threads are its own: use __syncthreads or cooperative_groups",
        "class thread;\n",
        ("thread", "this_thread"),
    ),
    "condition_variable": Stub(
        "use cuda::std::atomic wait/notify (<atomic>) or <barrier>",
        "class condition_variable;\n",
        ("condition_variable",),
    ),
    "future": Stub(
        "device code cannot launch host tasks",
        "template <class T> class future; template <class T> class promise;\n",
        ("future", "promise", "async", "packaged_task"),
    ),
    "regex": Stub(
        "match by hand or on the host",
        "template <class C> class regex_traits;\n"
        "template <class C, class T = regex_traits<C>> class basic_regex;\n"
        "typedef basic_regex<char> regex;\n",
        ("regex", "basic_regex", "regex_match", "regex_search", "smatch", "cmatch"),
        ("string",),
    ),
    "locale": Stub("device code has no locales", "class locale;\n", ("locale",), ("string",)),
    "filesystem": Stub(
        "device code has no file system",
        "namespace filesystem { class path; }\n",
        ("filesystem",),
        ("string",),
    ),
    "random": Stub(
        "use thrust::random (<thrust/random.h>) or cuRAND's device API "
        "(#include <curand_kernel.h>)",
        "class random_device;\ntemplate <class T = int> class uniform_int_distribution;\n"
        "template <class T = double> class uniform_real_distribution;\n"
        "template <class T = double> class normal_distribution;\n",
        (
            "random_device",
            "uniform_int_distribution",
            "uniform_real_distribution",
            "normal_distribution",
            "mt19937",
            "mt19937_64",
            "default_random_engine",
            "minstd_rand",
            "bernoulli_distribution",
        ),
    ),
    "sys/time.h": Stub(
        "use clock64() (or the %globaltimer register through inline PTX)",
        names=("::gettimeofday", "::settimeofday"),
        global_decls="struct timeval { long tv_sec; long tv_usec; };\n"
        "struct timezone { int tz_minuteswest; int tz_dsttime; };\n",
    ),
    "cxxabi.h": Stub(
        "device code has no C++ ABI runtime (no demangling)",
        names=("abi::__cxa_demangle",),
        global_decls="namespace abi {}\n",
    ),
}
