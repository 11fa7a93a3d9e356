"""What a failed NVRTC compile's errors point at, in a sentence the user can act on: a declaration
stub's name used (stub_hints, from the stubs' table in toolkit/shimdata.py), a name CCCL 3
removed (removed_name_hints), a Thrust algorithm called with an execution policy, CUB's
device-wide algorithms included, or CuPy's float16 used with only its declaration. Pure
functions of the log (read through nvrtclog.py) and the source; compiler/nvrtc.py hands their
answer to errors.compile_message, which appends it to a CompileError's message."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from ..ground.nvrtclog import (
    diagnostics,
    error_texts,
    errors_inside,
    incomplete_types,
    names_in,
    required_standard,
    undefined_identifiers,
)
from ..ground.regular import read_bytes
from ..toolkit.jitify_classes import JITIFY_DECLS
from ..toolkit.shimdata import STUBS


def _stub_by_name() -> dict[str, str]:
    out: dict[str, str] = {}
    for header, stub in STUBS.items():
        for name in stub.names:
            qualified = (
                name[2:] if name.startswith("::") else name if "::" in name else "std::" + name
            )
            out.setdefault(qualified, header)
    return out


# CCCL's own headers: a stub's name in an error there is the library's use of it, not the kernel's
LIBRARY_DIRS = ("cub", "thrust", "libcudacxx")


def stub_hints(log: str) -> str:
    """For an NVRTC log: one line per stub header whose names its errors use (the first such
    name of each error line: ``std::stack<int, std::deque<int>>`` is <stack>'s), saying that
    the header has no device implementation and what to use instead ('' when none). Errors
    inside CCCL's headers do not count (LIBRARY_DIRS)."""
    table = _stub_by_name()
    found: list[str] = []
    for names in _error_names(log, LIBRARY_DIRS):
        for name in names:
            header = table.get(name)
            if header:
                if header not in found:
                    found.append(header)
                break
    return "\n".join(f"<{h}> has no device implementation: {STUBS[h].advice}" for h in found)


# a member of a stub's class called in device code (jitify=True declares the classes, as Jitify
# did, and defines no member): ptxas (nvJitLink with -rdc) names the function, mangled; its
# scope is std::<class> (St<length><name>) or one of std's abbreviations (Sb, Ss, Si, So, Sd)
_UNRESOLVED = re.compile(r"(?:Unresolved extern function|Undefined reference to) '(_Z\w+)'")
_MEMBER_OF = re.compile(r"_ZN[rVKRO]*(?:S([bsiod])|St(\d+))")
_ABBREVIATED = {"b": "string", "s": "string", "i": "istream", "o": "ostream", "d": "istream"}


def _class_headers() -> dict[str, str]:
    """The classes jitify=True declares whole -> their stub header."""
    return {n: header for header in JITIFY_DECLS for n in STUBS[header].names}


def unresolved_stub_hints(log: str) -> str:
    """One line per stub header whose class members ptxas or nvJitLink found called and
    undefined (a function of the kernel's own, whatever its arguments, is none)."""
    found: list[str] = []
    classes = _class_headers()
    for mangled in _UNRESOLVED.findall(log):
        m = _MEMBER_OF.match(mangled)
        if m is None:
            continue
        if m.group(1):
            header = _ABBREVIATED[m.group(1)]
        else:
            header = classes.get(mangled[m.end() : m.end() + int(m.group(2))], "")
        if header and header not in found:
            found.append(header)
    return "\n".join(
        f"<{h}> has no device implementation (under jitify=True its classes are declared, as "
        f"Jitify's were, but no member has code): {STUBS[h].advice}"
        for h in found
    )


# Names that code written for CCCL 2 (CuPy 13 and earlier, Jitify-era code) uses and CCCL 3
# removed (std's two by C++17, the standard CCCL 3 needs): name -> (what removed it, what
# replaces it). NVRTC only says 'namespace "cub" has no member "Max"'.
_CCCL3, _CXX17 = "CCCL 3", "C++17, which CCCL 3 needs"
_FUNCTIONAL = "<cuda/std/functional>"
_NO_BASE = "no base class (declare argument_type, result_type, ... where code reads them)"
REMOVED: dict[str, tuple[str, str]] = {
    "cub::Sum": (_CCCL3, f"cuda::std::plus<>{{}} from {_FUNCTIONAL}"),
    "cub::Difference": (_CCCL3, f"cuda::std::minus<>{{}} from {_FUNCTIONAL}"),
    "cub::Division": (_CCCL3, f"cuda::std::divides<>{{}} from {_FUNCTIONAL}"),
    "cub::Equality": (_CCCL3, f"cuda::std::equal_to<>{{}} from {_FUNCTIONAL}"),
    "cub::Inequality": (_CCCL3, f"cuda::std::not_equal_to<>{{}} from {_FUNCTIONAL}"),
    "cub::Max": (_CCCL3, "cuda::maximum<>{} from <cuda/functional>"),
    "cub::Min": (_CCCL3, "cuda::minimum<>{} from <cuda/functional>"),
    "cub::FpLimits": (_CCCL3, "cuda::std::numeric_limits<T> from <cuda/std/limits>"),
    "thrust::identity": (_CCCL3, f"cuda::std::identity{{}} from {_FUNCTIONAL}"),
    "thrust::unary_function": (_CCCL3, _NO_BASE),
    "thrust::binary_function": (_CCCL3, _NO_BASE),
    "std::unary_function": (_CXX17, _NO_BASE),
    "std::binary_function": (_CXX17, _NO_BASE),
}


def _error_names(log: str, outside: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """The names each error text of NVRTC's log uses (``outside``: as error_texts), a list per
    text, in log order."""
    for text in error_texts(log, outside):
        yield names_in(text)


def removed_name_hints(log: str) -> str:
    """One line per name of REMOVED that NVRTC's errors say does not exist, naming its
    replacement ('' when none)."""
    found = {name: None for names in _error_names(log) for name in names if name in REMOVED}
    return "\n".join(
        f"{name} was removed in {REMOVED[name][0]}: use {REMOVED[name][1]}" for name in found
    )


# thrust::sort(thrust::seq, ...) and friends: their dispatch
# (thrust/detail/execute_with_allocator.h, pointer.h, the system backends) declares explicitly
# __host__ functions, which NVRTC refuses whatever the flags, and specializes
# std::iterator_traits, which is cuda::std's under the shims.
THRUST_ALGORITHMS = (
    "Thrust algorithms taking an execution policy (thrust::sort, thrust::reduce, "
    "thrust::lower_bound, ... with thrust::seq or thrust::device) cannot be compiled by NVRTC "
    "with this CCCL: in device code use CUB's block and warp algorithms (<cub/block/...>) or "
    "the cuda::std algorithms (<algorithm>, <numeric>)"
)
_POLICY = re.compile(
    r"\bthrust\s*::\s*(seq|device|host|par|par_nosync|cuda\s*::\s*par\w*)\b"
    r"|#\s*include\s*[<\"]thrust/(execution_policy|sort|reduce|binary_search|"
    r"scan|transform_reduce|transform_scan|merge|unique|partition|"
    r"set_operations|extrema|inner_product|adjacent_difference|gather|scatter|"
    r"remove|replace|copy|fill|for_each|count|find|sequence|tabulate)\.h"
)


def thrust_algorithm_hint(log: str, source: str) -> str:
    """THRUST_ALGORITHMS when the source calls a Thrust algorithm (an execution policy, or an
    algorithm header) and NVRTC's errors are inside Thrust's own headers, else ''."""
    if _POLICY.search(source) and errors_inside(log, "thrust"):
        return THRUST_ALGORITHMS
    return ""


# <cub/cub.cuh> (which includes them all) and <cub/device/...>: host code (launches, temporary
# storage, cudaGetDevice) that CCCL 3 no longer keeps out of an NVRTC compile
CUB_DEVICE = (
    "CUB's device-wide algorithms (<cub/device/...>, and <cub/cub.cuh>, which includes them "
    "all) are host code that NVRTC cannot compile with this CCCL: include the block and warp "
    "headers the kernel uses (<cub/block/block_reduce.cuh>, <cub/warp/warp_reduce.cuh>, ...)"
)
_CUB_DEVICE = re.compile(r'#\s*include\s*[<"]cub/(cub\.cuh|device/)')


def cub_device_hint(log: str, source: str) -> str:
    """CUB_DEVICE when the source includes CUB's device-wide headers and NVRTC's errors are
    inside CUB's or Thrust's own headers, else ''."""
    if _CUB_DEVICE.search(source) and (errors_inside(log, "cub") or errors_inside(log, "thrust")):
        return CUB_DEVICE
    return ""


# CuPy 14's <cupy/carray.cuh> declares float16 and bfloat16 and no longer defines them, nor
# includes <cuda_fp16.h> for half (CuPy 13's did): code written for CuPy 13 names a type NVRTC
# then calls incomplete, or undefined
CUPY_HALF = {"float16": "cupy/float16.cuh", "bfloat16": "cupy/bfloat16.cuh"}
HALF = (
    "half is defined by <cuda_fp16.h>, which <cupy/float16.cuh> includes, unless CUDA_NO_HALF is "
    "defined (then name it __half)"
)


def cupy_half_hints(log: str) -> str:
    """One line per CuPy half type NVRTC's errors call incomplete, naming the header that
    defines it, and one for an undefined ``half`` ('' when none)."""
    found = {
        word: None
        for spelled in incomplete_types(log)
        for word in re.findall(r"\w+", spelled)
        if word in CUPY_HALF
    }
    lines = [
        f"{t} is declared by <cupy/carray.cuh> and defined by <{CUPY_HALF[t]}>: include "
        f"<{CUPY_HALF[t]}>"
        for t in found
    ]
    if "half" in undefined_identifiers(log):
        lines.append(HALF)
    return "\n".join(lines)


# what to do when a header refused the asked C++ standard (CUPY_RAWCODE_RAISE_STD=0)
STANDARD = (
    "these headers need C++{std} or later: pass -std=c++{std}, or leave "
    "CUPY_RAWCODE_RAISE_STD unset so that cupy-rawcode compiles at the lowest standard they "
    "accept"
)


def standard_hint(log: str) -> str:
    """STANDARD for the standard NVRTC's log says the headers require, '' when it says none."""
    std = required_standard(log)
    return "" if std is None else STANDARD.format(std=std)


# the version a CUDA toolkit's include directory declares (cuda_runtime_api.h, cuda.h)
_TOOLKIT_VERSION = re.compile(rb"#define[ \t]+(?:CUDART_VERSION|CUDA_VERSION)[ \t]+(\d+)")


def toolkit_hint(log: str, include_dirs: tuple[str, ...], nvrtc: tuple[int, int]) -> str:
    """For errors inside an -I directory holding a CUDA toolkit's headers of another release
    than NVRTC's (newer, or another major: Jitify-era code passes -I/usr/local/cuda/include),
    a line saying so; '' otherwise."""
    failing = {d.file for d in diagnostics(log) if d.is_error}
    for directory in include_dirs:
        prefix = directory.rstrip("/") + "/"
        if not any(f.startswith(prefix) for f in failing):
            continue
        for name in ("cuda_runtime_api.h", "cuda.h"):
            try:
                m = _TOOLKIT_VERSION.search(read_bytes(prefix + name))
            except OSError:
                continue
            if m is None:
                continue
            number = int(m.group(1))
            major, minor = number // 1000, number % 1000 // 10
            if (major, minor) > nvrtc or major != nvrtc[0]:
                why = (
                    "CUDA's headers need an NVRTC at least as new"
                    if (major, minor) > nvrtc
                    else "CUDA's headers and NVRTC are of different major releases"
                )
                return (
                    f"{directory} (an -I directory) holds CUDA {major}.{minor}'s headers, but "
                    f"NVRTC is {nvrtc[0]}.{nvrtc[1]}: {why}; leave that -I out (cupy-rawcode "
                    f"finds the headers of NVRTC's release itself) or compile with NVRTC "
                    f"{major}.{minor}"
                )
            break
    return ""


_CCCL_PARTS = ("/cuda/", "/cub/", "/thrust/", "/nv/")


def mixed_cccl_hint(log: str, include_dirs: tuple[str, ...]) -> str:
    """For errors inside CCCL's headers while an -I directory holds a CCCL of its own (a CUDA
    12 toolkit's include/, a CCCL checkout): the package's CCCL comes first, as CuPy's does,
    and only headers it lacks are read from there, so the two may be mixed; a line saying so,
    and how to compile with that one; '' otherwise."""
    failing = [d.file for d in diagnostics(log) if d.is_error]
    if not any(part in f for f in failing for part in _CCCL_PARTS):
        return ""
    for directory in include_dirs:
        if os.path.isfile(os.path.join(directory, "cuda", "std", "version")):
            return (
                f"{directory} (an -I directory) holds a CCCL of its own: cupy-rawcode's CCCL "
                "comes first, as CuPy's does, and a header only that one has is read from "
                f"{directory}, so two CCCLs may be mixed; to compile with the one in "
                f"{directory}: CUPY_RAWCODE_HEADER_SOURCES=cccl={directory}"
            )
    return ""


def compile_hints(
    log: str,
    source: str,
    include_dirs: tuple[str, ...] = (),
    nvrtc: tuple[int, int] | None = None,
) -> str:
    """Every hint for a failed compile, one per line ('' when none applies); ``include_dirs``
    (the -I directories) and ``nvrtc`` (its version) for the toolkit hint."""
    hints = (
        stub_hints(log),
        unresolved_stub_hints(log),
        removed_name_hints(log),
        thrust_algorithm_hint(log, source),
        cub_device_hint(log, source),
        cupy_half_hints(log),
        standard_hint(log),
        toolkit_hint(log, include_dirs, nvrtc) if nvrtc else "",
        mixed_cccl_hint(log, include_dirs),
    )
    return "\n".join(h for h in hints if h)
