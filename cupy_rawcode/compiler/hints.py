"""What a failed NVRTC compile's errors point at, in a sentence the user can act on: a declaration
stub's name used (shims.stub_hints), or a Thrust algorithm called with an execution policy.
Pure functions of the log (read through nvrtclog.py) and the source; compiler/nvrtc.py hands
their answer to errors.compile_message, which appends it to a CompileError's message."""

from __future__ import annotations

import re

from ..ground.nvrtclog import errors_inside, required_standard
from ..toolkit.shims import stub_hints

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


def standard_hint(log: str) -> str:
    """What to do when a header refused the asked C++ standard (CUPY_RAWCODE_RAISE_STD=0)."""
    std = required_standard(log)
    if std is None:
        return ""
    return (
        f"these headers need C++{std} or later: pass -std=c++{std}, or leave "
        "CUPY_RAWCODE_RAISE_STD unset so that cupy-rawcode compiles at the lowest standard "
        "they accept"
    )


def compile_hints(log: str, source: str) -> str:
    """Every hint for a failed compile, one per line ('' when none applies)."""
    hints = (stub_hints(log), thrust_algorithm_hint(log, source), standard_hint(log))
    return "\n".join(h for h in hints if h)
