// cupy-rawcode: what CuPy's jitify=True first line, #include <cupy/cuda_workaround.h>, becomes
// (cupy_rawcode/jitify_compat.py). The same std names through the shims' using-directive, so a
// program can still specialize std::numeric_limits for its own types.
#pragma once
#include <type_traits>
#include <limits>
#include <utility>
#include <tuple>
