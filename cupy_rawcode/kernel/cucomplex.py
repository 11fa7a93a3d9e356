"""CuPy's translate_cucomplex: a source's cuComplex.h include becomes CuPy's complex<T> bridge."""

from __future__ import annotations

import re

_CUCOMPLEX_INCLUDE = r"\s*#\s*include\s*<\s*cuComplex\.h\s*>"  # compiled on first use
_CUPY_HEADERS = (
    "cupy/complex.cuh",
    "cupy/carray.cuh",
    "cupy/atomics.cuh",
    "cupy/math_constants.h",
)  # what CuPy prepends when translate_cucomplex=True


def translate_cucomplex(source: str) -> str:
    """CuPy's translate_cucomplex: cuComplex.h becomes CuPy's bridge to its complex<T>."""
    lines = [
        (
            "#include <cupy/cuComplex_bridge.h>  // translate_cucomplex\n"
            if re.match(_CUCOMPLEX_INCLUDE, line)
            else line
        )
        for line in source.splitlines(keepends=True)
    ]
    return "".join(f"#include <{h}>\n" for h in _CUPY_HEADERS) + "".join(lines)
