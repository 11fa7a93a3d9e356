"""NVRTC's predefined macros: what a device compile for one arch, C++ standard and NVRTC version
sees defined before the first line (facts.md), plus the execution-space keywords its built-in
cuda_runtime.h defines. Exact mode (exact.py) starts every walk from these, so its ``#if``
conditions evaluate as NVRTC's do."""

from __future__ import annotations

from .options import arch_number

STD_CPLUSPLUS = {
    "c++03": "199711L",
    "c++11": "201103L",
    "c++14": "201402L",
    "c++17": "201703L",
    "c++20": "202002L",
}


# the first NVRTC without ``__has_include_next``: 12.9 and 13.0 define it; 13.5 neither defines it
# nor reads ``__has_include_next(<h>)`` in an #if ("function call is not allowed in a constant
# expression"); 13.1-13.4 unmeasured. Keys see every probe either way (fast mode: a superset).
NO_INCLUDE_NEXT_PROBE = (13, 5)


def probe_operators(nvrtc_version: tuple[int, int]) -> tuple[str, ...]:
    """The ``__has_include`` operators this NVRTC defines (``defined`` is true for them)."""
    if tuple(nvrtc_version) >= NO_INCLUDE_NEXT_PROBE:
        return ("__has_include",)
    return ("__has_include", "__has_include_next")


def nvrtc_macros(arch: str, std: str, nvrtc_version: tuple[int, int]) -> dict[str, str]:
    """The macros NVRTC predefines for a device compile (facts.md), plus the execution-space
    keywords its built-in cuda_runtime.h defines."""
    major, minor = nvrtc_version
    sm = arch_number(arch) * 10
    macros = {
        "__CUDACC__": "1",
        "__CUDACC_RTC__": "1",
        "__CUDA_ARCH__": str(sm),
        "__CUDA_ARCH_LIST__": str(sm),
        "__CUDACC_VER_MAJOR__": str(major),
        "__CUDACC_VER_MINOR__": str(minor),
        "__CUDACC_VER_BUILD__": "0",
        "__CUDA_API_VER_MAJOR__": str(major),
        "__CUDA_API_VER_MINOR__": str(minor),
        "CUDART_VERSION": str(major * 1000 + minor * 10),
        "__cplusplus": STD_CPLUSPLUS[std],
        "__LP64__": "1",
        "__EDG__": "1",
        "__STDC_HOSTED__": "1",
        "__NVCC_DIAG_PRAGMA_SUPPORT__": "1",
        "__CUDACC_DEVICE_ATOMIC_BUILTINS__": "1",
        "__NV_BUILTIN_INITIALIZER_LIST": "1",  # NVRTC 12.9 and 13.5 define it (CCCL 3.5 needs it)
        "__CHAR_BIT__": "8",
        "__SIZEOF_INT__": "4",
        "__SIZEOF_LONG__": "8",
        "__SIZEOF_POINTER__": "8",
        "__SIZEOF_LONG_LONG__": "8",
    }
    for kw in (
        "__host__",
        "__device__",
        "__global__",
        "__shared__",
        "__constant__",
        "__managed__",
        "__forceinline__",
        "__noinline__",
    ):
        macros[kw] = f"__attribute__(({kw.strip('_')}))"
    if std in ("c++17", "c++20"):
        macros.update(
            {
                "__cpp_if_constexpr": "201606L",
                "__cpp_inline_variables": "201606L",
                "__cpp_fold_expressions": "201603L",
                "__cpp_deduction_guides": "201703L",
                "__cpp_nontype_template_auto": "201606L",
                "__cpp_structured_bindings": "201606L",
                "__cpp_noexcept_function_type": "201510L",
                "__cpp_aligned_new": "201606L",
            }
        )
    if std != "c++03":
        macros.update(
            {
                "__cpp_constexpr": "201603L" if std in ("c++17", "c++20") else "201304L",
                "__cpp_variable_templates": "201304L",
                "__cpp_decltype_auto": "201304L",
                "__cpp_generic_lambdas": "201304L",
                "__cpp_rvalue_references": "200610L",
                "__cpp_variadic_templates": "200704L",
                "__cpp_alias_templates": "200704L",
                "__cpp_static_assert": "201411L",
                "__cpp_lambdas": "200907L",
            }
        )
    return macros
