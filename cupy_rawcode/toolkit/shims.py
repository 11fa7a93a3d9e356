"""The C++ standard header shims in ``include/``: what backs each one.

NVRTC has no ``<type_traits>``, ``<limits>``, ``<cstdint>``... . Each shim includes the
libcudacxx header behind it (``<cuda/std/X>``) and makes its names visible as ``std::X``
(``cupy_rawcode/std_alias.h``: ``namespace std { using namespace cuda::std; }``). C headers also
keep their global names (``int32_t``, ``INT_MAX``, ``FLT_MAX``). Headers with no device
meaning (``<iostream>``, ``<vector>``, ``<string>``, ...) are declaration stubs, as Jitify's
were: library headers that include them parse (thrust's random engines include ``<iostream>``),
and a kernel that uses one of their names fails at NVRTC with a hint (``stub_hints``) saying
what to use instead.

Math names reach std:: through using-directives, never a using-declaration of a global
function: a direct ``std::abs`` would hide ``cuda::std::abs(complex)`` when a kernel includes
both ``<cmath>`` and ``<complex>``.

This table is the single source: ``python -m cupy_rawcode.toolkit.shims --write`` renders
``include/`` and ``--markdown`` the README's list; a test checks both are up to date.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ..ground.nvrtclog import error_texts, names_in
from . import jitify_names, specializable

ALIAS = "cupy_rawcode/std_alias.h"


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

SUPPORTED: dict[str, Shim] = {
    "type_traits": Shim(("type_traits",)),
    "limits": Shim(("limits",)),
    "utility": Shim(("utility",)),
    "tuple": Shim(("tuple",)),
    "array": Shim(("array",)),
    "complex": Shim(("complex",)),
    "functional": Shim(("functional",)),
    "iterator": Shim(("iterator",)),
    "initializer_list": Shim(("initializer_list",)),
    "numeric": Shim(("numeric",)),
    "memory": Shim(("memory",), note="addressof, pointer_traits, ...; no owning pointers"),
    "new": Shim((), ("__new/launder.h",), note="placement new is built in"),
    "algorithm": Shim(
        (),
        tuple(f"__algorithm/{a}.h" for a in _ALGORITHMS),
        note="the non-allocating algorithms libcudacxx has (min, max, clamp, ...)",
    ),
    "bit": Shim(("bit",)),
    "span": Shim(("span",)),
    "optional": Shim(("optional",)),
    "variant": Shim(("variant",)),
    "ratio": Shim(("ratio",)),
    "atomic": Shim(("atomic",)),
    "chrono": Shim(("chrono",)),
    "bitset": Shim(("bitset",)),
    "concepts": Shim(("concepts",)),
    "expected": Shim(("expected",)),
    "mdspan": Shim(("mdspan",)),
    "source_location": Shim(("source_location",)),
    "barrier": Shim(("barrier",)),
    "latch": Shim(("latch",)),
    "semaphore": Shim(("semaphore",)),
    "numbers": Shim(("numbers",), note="CCCL >= 3.1"),
    "string_view": Shim(("string_view",), note="CCCL >= 3.1"),
    "cstdint": Shim(("cstdint",)),
    "cstddef": Shim(("cstddef",)),
    "climits": Shim(("climits",)),
    "cfloat": Shim(("cfloat",), extra=_FLOAT_EXTRA),
    "cmath": Shim(("cmath",), extra=_MATH_EXTRA, note="gaps filled from NVRTC's built-in math"),
    "cassert": Shim(("cassert",)),
    "cstdlib": Shim(("cstdlib",)),
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
        "".join(
            f"class {c};\n"
            for c in (
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
        ),
        (
            "logic_error",
            "domain_error",
            "invalid_argument",
            "length_error",
            "out_of_range",
            "runtime_error",
            "range_error",
            "overflow_error",
            "underflow_error",
        ),
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

# What a stub reaches before its own declarations: the std:: integer types a real <iostream> or
# <vector> makes reachable, and char_traits/allocator from libcudacxx (its <cuda/std/__fwd/string.h>
# declares both in every CCCL we know; an older one gets declarations of our own).
STUB_BASE = "cupy_rawcode/stub_base.h"
STUB_BASE_TEXT = """\
// cupy-rawcode: what every declaration stub reaches first. Generated by cupy_rawcode/shims.py.
#pragma once
#ifndef CUPY_RAWCODE_STUB_BASE_H
#define CUPY_RAWCODE_STUB_BASE_H
#include <cstddef>
#include <cstdint>
#if __has_include(<cuda/std/__fwd/string.h>)
#include <cuda/std/__fwd/string.h>
#else
namespace std { template <class C> struct char_traits; template <class T> class allocator; }
#endif
#include <cupy_rawcode/std_alias.h>
#endif
"""


def _stub_by_name() -> dict[str, str]:
    out: dict[str, str] = {}
    for header, stub in STUBS.items():
        for name in stub.names:
            qualified = (
                name[2:] if name.startswith("::") else name if "::" in name else "std::" + name
            )
            out.setdefault(qualified, header)
    return out


def stub_hints(log: str) -> str:
    """For an NVRTC log: one line per stub header whose names its errors use (the first such
    name of each error line: ``std::stack<int, std::deque<int>>`` is <stack>'s), saying that
    the header has no device implementation and what to use instead ('' when none)."""
    table = _stub_by_name()
    found: list[str] = []
    for text in error_texts(log):
        for name in names_in(text):
            header = table.get(name)
            if header:
                if header not in found:
                    found.append(header)
                break
    return "\n".join(f"<{h}> has no device implementation: {STUBS[h].advice}" for h in found)


def _guard(name: str) -> str:
    return "CUPY_RAWCODE_SHIM_" + "".join(c if c.isalnum() else "_" for c in name.upper())


def render(name: str) -> str:
    """The text of ``include/<name>``."""
    guard = _guard(name)
    if name in STUBS:
        stub = STUBS[name]
        lines = [
            f"// cupy-rawcode declaration stub for <{name}>: it declares, it does not "
            "implement. Generated by cupy_rawcode/shims.py.",
            f"// <{name}> has no device implementation: {stub.advice}",
            "#pragma once",
            f"#ifndef {guard}",
            f"#define {guard}",
            f"#include <{STUB_BASE}>",
        ]
        lines += [f"#include <{h}>" for h in stub.includes]
        text = "\n".join(lines) + "\n"
        if stub.decls:
            text += "namespace std {\n" + stub.decls + "}  // namespace std\n"
        return text + stub.global_decls + f"#endif  // {guard}\n"
    if name in C_HEADERS:
        return (
            f"// cupy-rawcode shim for <{name}>: the same as <{C_HEADERS[name]}>. Generated by "
            f'cupy_rawcode/shims.py.\n#pragma once\n#include "{C_HEADERS[name]}"\n'
        )
    shim = SUPPORTED[name]
    lines = [
        f"// cupy-rawcode shim for <{name}>. Generated by cupy_rawcode/shims.py.",
        "#pragma once",
        f"#ifndef {guard}",
        f"#define {guard}",
    ]
    for h in shim.backing:
        lines += [
            f"#if __has_include(<cuda/std/{h}>)",
            f"#include <cuda/std/{h}>",
            "#else",
            f'#error "cupy-rawcode: <{name}> needs <cuda/std/{h}>, which this CCCL does not have"',
            "#endif",
        ]
    for h in shim.optional:
        lines += [f"#if __has_include(<cuda/std/{h}>)", f"#include <cuda/std/{h}>", "#endif"]
    lines.append(f"#include <{ALIAS}>")
    lines += [f"#include <{h}>" for h in specializable.for_shim(name)]
    text = "\n".join(lines) + "\n" + shim.extra + jitify_names.block(name)
    return text + f"#endif  // {guard}\n"


ALIAS_TEXT = """\
// cupy-rawcode: std:: names for libcudacxx's cuda::std::. Generated by cupy_rawcode/shims.py.
#pragma once
#ifndef CUPY_RAWCODE_STD_ALIAS_H
#define CUPY_RAWCODE_STD_ALIAS_H
namespace cuda { namespace std {} }
namespace std { using namespace cuda::std; }
#endif
"""


JITIFY_WORKAROUND = "cupy_rawcode/jitify_workaround.h"
JITIFY_WORKAROUND_TEXT = """\
// cupy-rawcode: what CuPy's jitify=True first line, #include <cupy/cuda_workaround.h>, becomes
// (cupy_rawcode/jitify_compat.py). The same std names through the shims' using-directive, so a
// program can still specialize std::numeric_limits for its own types.
#pragma once
#include <type_traits>
#include <limits>
#include <utility>
#include <tuple>
"""


JITIFY_PREINCLUDE = "jitify_preinclude.h"  # the name Jitify gave it: sources include it by name
JITIFY_PREINCLUDE_TEXT = """\
// cupy-rawcode: what Jitify pre-included into every jitify=True compile (CuPy's Jitify passed
// --pre-include=jitify_preinclude.h), for jitify=True here too (cupy_rawcode/jitify_compat.py):
// explicitly host functions compile as device code, try/catch parse, and Thrust's static
// assertions are skipped.
#pragma once
#ifdef __host__
#undef __host__
#endif
#define __host__
#define try
#define catch(...)
#define THRUST_STATIC_ASSERT(x)
"""


def files() -> dict[str, str]:
    """Every generated file under include/, by relative path."""
    out = {name: render(name) for name in sorted(SUPPORTED) + sorted(C_HEADERS) + sorted(STUBS)}
    out[ALIAS] = ALIAS_TEXT
    out.update(
        {specializable.header_path(n): specializable.render(n) for n in specializable.TEMPLATES}
    )
    out[STUB_BASE] = STUB_BASE_TEXT
    out[JITIFY_WORKAROUND] = JITIFY_WORKAROUND_TEXT
    out[JITIFY_PREINCLUDE] = JITIFY_PREINCLUDE_TEXT
    return out


def markdown() -> str:
    """The README's tables: what backs each standard header, then the CUDA headers' roots."""
    rows = ["| header | backed by | note |", "| --- | --- | --- |"]
    for name in sorted(SUPPORTED):
        s = SUPPORTED[name]
        backing = ", ".join(f"`cuda/std/{h}`" for h in s.backing) or (
            "libcudacxx internals" if s.optional else "NVRTC built-ins"
        )
        c_names = ", ".join(f"`<{c}>`" for c, cxx in sorted(C_HEADERS.items()) if cxx == name)
        rows.append(f"| `<{name}>`{' ' + c_names if c_names else ''} | {backing} | {s.note} |")
    for name in sorted(STUBS):
        c_names = ", ".join(f"`<{c}>`" for c, cxx in sorted(C_HEADERS.items()) if cxx == name)
        rows.append(
            f"| `<{name}>`{' ' + c_names if c_names else ''} | declaration stub | "
            f"no device implementation: {STUBS[name].advice} |"
        )
    rows.sort(key=lambda r: r.split("`")[1] if r.startswith("| `") else "")
    from .cudaheaders import markdown as cuda_markdown  # the CUDA headers: roots, not shims

    return "\n".join(rows) + "\n\n" + cuda_markdown()


def write(root: Path) -> None:
    for rel, text in files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


if __name__ == "__main__":  # pragma: no cover - developer tool
    if "--write" in sys.argv:
        write(Path(__file__).resolve().parents[2] / "include")
    if "--markdown" in sys.argv:
        sys.stdout.write(markdown())
