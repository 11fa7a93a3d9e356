"""The C++ standard header shims in ``include/``: what each one is backed by, or why it is refused.

NVRTC has no ``<type_traits>``, ``<limits>``, ``<cstdint>``... . Each shim includes the
libcudacxx header behind it (``<cuda/std/X>``) and makes its names visible as ``std::X``
(``cupy_rawcode/std_alias.h``: ``namespace std { using namespace cuda::std; }``). C headers also
keep their global names (``int32_t``, ``INT_MAX``, ``FLT_MAX``). Headers with no device
meaning give an ``#error`` saying what to use instead.

Math names reach std:: through using-directives, never a using-declaration of a global
function: a direct ``std::abs`` would hide ``cuda::std::abs(complex)`` when a kernel includes
both ``<cmath>`` and ``<complex>``.

This table is the single source: ``python -m cupy_rawcode.shims --write`` renders ``include/``
and ``--markdown`` the README's list; a test checks both are up to date.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ALIAS = "cupy_rawcode/std_alias.h"


@dataclass(frozen=True)
class Shim:
    backing: tuple[str, ...]        # libcudacxx headers (relative to cuda/std/), all required
    optional: tuple[str, ...] = ()  # included when this CCCL has them
    extra: str = ""                 # C++ after the includes (global names, macros)
    note: str = ""


_MATH = ("sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 expm1 log "
         "log10 log2 log1p logb ilogb pow sqrt cbrt hypot erf erfc tgamma lgamma ceil floor trunc "
         "round lround llround rint lrint llrint nearbyint fmod remainder remquo copysign "
         "nextafter fdim fmax fmin fma frexp ldexp modf scalbn scalbln fabs isnan isinf isfinite "
         "signbit").split()
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
    "namespace std { using namespace cupy_rawcode_math; }\n")

_FLOAT_MACROS = {  # IEEE-754 binary32/binary64: the values <cfloat> must give
    "FLT_RADIX": "2", "FLT_MANT_DIG": "24", "DBL_MANT_DIG": "53", "FLT_DIG": "6",
    "DBL_DIG": "15", "FLT_MIN_EXP": "(-125)", "DBL_MIN_EXP": "(-1021)", "FLT_MAX_EXP": "128",
    "DBL_MAX_EXP": "1024", "FLT_MIN_10_EXP": "(-37)", "DBL_MIN_10_EXP": "(-307)",
    "FLT_MAX_10_EXP": "38", "DBL_MAX_10_EXP": "308", "FLT_MAX": "3.40282347e+38F",
    "DBL_MAX": "1.7976931348623157e+308", "FLT_MIN": "1.17549435e-38F",
    "DBL_MIN": "2.2250738585072014e-308", "FLT_EPSILON": "1.19209290e-07F",
    "DBL_EPSILON": "2.2204460492503131e-16", "FLT_TRUE_MIN": "1.40129846e-45F",
    "DBL_TRUE_MIN": "4.9406564584124654e-324", "DECIMAL_DIG": "17", "FLT_EVAL_METHOD": "0",
}
_FLOAT_EXTRA = "".join(f"#ifndef {k}\n#define {k} {v}\n#endif\n" for k, v in _FLOAT_MACROS.items())
_ALGORITHMS = ("min max clamp minmax min_element max_element minmax_element copy copy_n copy_if "
               "fill fill_n find find_if find_if_not for_each count count_if equal all_of any_of "
               "none_of lower_bound upper_bound binary_search equal_range reverse transform "
               "swap_ranges iter_swap replace remove unique rotate partition is_sorted "
               "mismatch search generate").split()
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
    "algorithm": Shim((), tuple(f"__algorithm/{a}.h" for a in _ALGORITHMS),
                      note="the non-allocating algorithms libcudacxx has (min, max, clamp, ...)"),
    "bit": Shim(("bit",)), "span": Shim(("span",)), "optional": Shim(("optional",)),
    "variant": Shim(("variant",)), "ratio": Shim(("ratio",)), "atomic": Shim(("atomic",)),
    "chrono": Shim(("chrono",)), "bitset": Shim(("bitset",)), "concepts": Shim(("concepts",)),
    "expected": Shim(("expected",)), "mdspan": Shim(("mdspan",)),
    "source_location": Shim(("source_location",)),
    "barrier": Shim(("barrier",)), "latch": Shim(("latch",)), "semaphore": Shim(("semaphore",)),
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
}

_STREAMS = "device code has no streams: use printf, which NVRTC has built in"
_CONTAINER = ("device code cannot allocate like the host: use cuda::std::array or "
              "cuda::std::span over a CuPy array passed to the kernel")
# C headers are the C++ shim under their C name: <math.h> is <cmath>, and so on.
C_HEADERS: dict[str, str] = {
    "stdint.h": "cstdint", "stddef.h": "cstddef", "limits.h": "climits", "float.h": "cfloat",
    "math.h": "cmath", "assert.h": "cassert", "stdlib.h": "cstdlib", "string.h": "cstring",
    "memory.h": "cstring", "stdio.h": "cstdio", "time.h": "ctime",
}

# <version> is deliberately absent: libcudacxx probes __has_include(<version>) to pick up the
# host library's feature macros, and a shim there would change every CCCL compile.
REFUSED: dict[str, str] = {
    **{h: _STREAMS for h in ("iostream", "ostream", "istream", "sstream", "fstream", "iomanip",
                             "ios", "iosfwd", "streambuf")},
    **{h: _CONTAINER for h in ("vector", "map", "set", "unordered_map", "unordered_set", "list",
                               "forward_list", "deque", "queue", "stack")},
    "string": "use const char* or cuda::std::string_view (<string_view>, CCCL >= 3.1)",
    "mutex": "use cuda::std::atomic (<atomic>) or cuda::binary_semaphore (<semaphore>)",
    "thread": "a kernel's threads are its own: use __syncthreads or cooperative_groups",
    "condition_variable": "use cuda::std::atomic wait/notify (<atomic>) or <barrier>",
    "future": "device code cannot launch host tasks",
    "stdexcept": "device code cannot throw: use assert (<cassert>) or return an error code",
    "exception": "device code cannot throw: use assert (<cassert>) or return an error code",
    "regex": "no device regex: match by hand or on the host",
    "locale": "no locales in device code",
    "filesystem": "device code has no file system",
    "random": "use cuRAND's device API: #include <curand_kernel.h>",
}


def render(name: str) -> str:
    """The text of ``include/<name>``."""
    guard = "CUPY_RAWCODE_SHIM_" + "".join(c if c.isalnum() else "_" for c in name.upper())
    if name in REFUSED:
        return (f"// cupy-rawcode: <{name}> is refused. Generated by cupy_rawcode/shims.py.\n"
                f"#error \"cupy-rawcode: <{name}> has no device meaning under NVRTC: "
                f"{REFUSED[name]}\"\n")
    if name in C_HEADERS:
        return (f"// cupy-rawcode shim for <{name}>: the same as <{C_HEADERS[name]}>. Generated by "
                f"cupy_rawcode/shims.py.\n#pragma once\n#include \"{C_HEADERS[name]}\"\n")
    shim = SUPPORTED[name]
    lines = [f"// cupy-rawcode shim for <{name}>. Generated by cupy_rawcode/shims.py.",
             "#pragma once", f"#ifndef {guard}", f"#define {guard}"]
    for h in shim.backing:
        lines += [f"#if __has_include(<cuda/std/{h}>)", f"#include <cuda/std/{h}>", "#else",
                  f"#error \"cupy-rawcode: <{name}> needs <cuda/std/{h}>, which this CCCL "
                  "does not have\"", "#endif"]
    for h in shim.optional:
        lines += [f"#if __has_include(<cuda/std/{h}>)", f"#include <cuda/std/{h}>", "#endif"]
    lines.append(f"#include <{ALIAS}>")
    text = "\n".join(lines) + "\n" + shim.extra + f"#endif  // {guard}\n"
    return text


ALIAS_TEXT = """\
// cupy-rawcode: std:: names for libcudacxx's cuda::std::. Generated by cupy_rawcode/shims.py.
#pragma once
#ifndef CUPY_RAWCODE_STD_ALIAS_H
#define CUPY_RAWCODE_STD_ALIAS_H
namespace cuda { namespace std {} }
namespace std { using namespace cuda::std; }
#endif
"""


def files() -> dict[str, str]:
    """Every generated file under include/, by relative path."""
    out = {name: render(name) for name in sorted(SUPPORTED) + sorted(C_HEADERS) + sorted(REFUSED)}
    out[ALIAS] = ALIAS_TEXT
    return out


def markdown() -> str:
    """The README's list of supported and refused headers."""
    rows = ["| header | backed by | note |", "| --- | --- | --- |"]
    for name in sorted(SUPPORTED):
        s = SUPPORTED[name]
        backing = ", ".join(f"`cuda/std/{h}`" for h in s.backing) or (
            "libcudacxx internals" if s.optional else "NVRTC built-ins")
        c_names = ", ".join(f"`<{c}>`" for c, cxx in sorted(C_HEADERS.items()) if cxx == name)
        rows.append(f"| `<{name}>`{' ' + c_names if c_names else ''} | {backing} | {s.note} |")
    rows += ["", "| refused header | use instead |", "| --- | --- |"]
    rows += [f"| `<{name}>` | {REFUSED[name]} |" for name in sorted(REFUSED)]
    return "\n".join(rows) + "\n"


def write(root: Path) -> None:
    for rel, text in files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


if __name__ == "__main__":  # pragma: no cover - developer tool
    if "--write" in sys.argv:
        write(Path(__file__).resolve().parent.parent / "include")
    if "--markdown" in sys.argv:
        sys.stdout.write(markdown())
