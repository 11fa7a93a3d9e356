"""The CUDA headers beyond CCCL: the header roots that hold them and the wheel that ships each.

A kernel may include the runtime's device headers (``<cuda_bf16.h>``, ``<mma.h>``,
``<cooperative_groups.h>``, ...), cuRAND's device API (``<curand_kernel.h>``) and the compiler's
``crt/`` headers that ``<mma.h>`` includes. A CUDA toolkit's ``include/`` has them all; a
pip-only install has them in separate NVIDIA wheels (one directory per wheel for CUDA 12, a
shared ``nvidia/cu13/include`` for CUDA 13). Each root kind below is found in the first header
source that has its probe header (toolchain.py asks the sources in policy order), so the search
list is ``cccl``, ``cuda``, ``curand``, ``crt`` (each only when not already a root), ``shim``.

Pure tables and functions, for discovery (discovery.py) and the missing-header message
(closure.py).
"""

from __future__ import annotations

import os

# root kind -> (probe header, cuda.pathfinder's name for it, its wheel by CUDA major)
LIBRARY_ROOTS: dict[str, tuple[str, str, dict[int, str]]] = {
    "cuda": (
        "cuda_runtime.h",
        "cudart",
        {12: "nvidia-cuda-runtime-cu12", 13: "nvidia-cuda-runtime"},
    ),
    "curand": ("curand_kernel.h", "curand", {12: "nvidia-curand-cu12", 13: "nvidia-curand"}),
    "crt": ("crt/mma.h", "nvcc", {12: "nvidia-cuda-nvcc-cu12", 13: "nvidia-cuda-crt"}),
}
CCCL_WHEELS = {12: "nvidia-cuda-cccl-cu12", 13: "nvidia-cuda-cccl"}
# Wheel include directories under site-packages, for wheels cuda.pathfinder may not name
# (CUDA 13's crt headers): checked after the directories pathfinder gives.
WHEEL_INCLUDE_DIRS = (
    "nvidia/cu13/include",
    "nvidia/cuda_runtime/include",
    "nvidia/curand/include",
    "nvidia/cuda_nvcc/include",
    "nvidia/cuda_crt/include",
)

# The runtime wheel's device headers a kernel includes by name (besides cuda_*.h, sm_*.h and
# cooperative_groups/...): what root_kind_of() answers "cuda" for.
_RUNTIME = frozenset(
    (
        "mma.h cuComplex.h vector_types.h vector_functions.h vector_functions.hpp math_constants.h "
        "device_types.h device_functions.h device_launch_parameters.h device_atomic_functions.h "
        "device_double_functions.h driver_types.h builtin_types.h host_defines.h "
        "surface_functions.h texture_fetch_functions.h surface_types.h texture_types.h "
        "channel_descriptor.h library_types.h math_functions.h common_functions.h "
        "cooperative_groups.h"
    ).split()
)


# The CUDA headers the README's table lists: header -> (root kind, what it is)
TABLE: dict[str, tuple[str, str]] = {
    "curand_kernel.h": ("curand", "cuRAND's device API (curand_init, curand_uniform, ...)"),
    "mma.h": ("cuda", "WMMA (nvcuda::wmma); includes crt/mma.h"),
    "crt/mma.h": ("crt", "WMMA's implementation, included by <mma.h>"),
    "cuda_fp16.h": ("cuda", "__half"),
    "cuda_bf16.h": ("cuda", "__nv_bfloat16"),
    "cuda_fp8.h": ("cuda", "__nv_fp8_e4m3, __nv_fp8_e5m2"),
    "cuda_pipeline.h": ("cuda", "__pipeline_memcpy_async, ..."),
    "cooperative_groups.h": ("cuda", "cooperative groups"),
    "cooperative_groups/*.h": ("cuda", "reduce, scan, memcpy_async, ..."),
    "cuComplex.h": ("cuda", "cuFloatComplex, cuDoubleComplex"),
}


def markdown() -> str:
    """The README's table of CUDA headers: the root that holds each and the wheel that ships it."""
    rows = [
        "| CUDA header | root | pip wheel (CUDA 12 / CUDA 13) | what |",
        "| --- | --- | --- | --- |",
    ]
    for header, (kind, what) in TABLE.items():
        wheels = LIBRARY_ROOTS[kind][2]
        rows.append(f"| `<{header}>` | `{kind}` | `{wheels[12]}` / `{wheels[13]}` | {what} |")
    return "\n".join(rows) + "\n"


def root_kind_of(header: str) -> str | None:
    """The root kind that ships ``header`` as included (``curand_kernel.h`` -> ``curand``,
    ``crt/mma.h`` -> ``crt``, ``cub/cub.cuh`` -> ``cccl``), or None for one we do not know."""
    name = header.replace("\\", "/").lstrip("/")
    if name.startswith("crt/"):
        return "crt"
    if name.startswith("curand"):
        return "curand"
    if name.split("/", 1)[0] in ("cub", "thrust", "cuda", "nv") and "/" in name:
        return "cccl"
    if (
        name in _RUNTIME or name.startswith(("cuda_", "sm_", "cooperative_groups/"))
    ) and "/" not in name.removeprefix("cooperative_groups/"):
        return "cuda"
    return None


def wheel_for(header: str) -> str | None:
    """Which NVIDIA wheel provides ``header``, as a phrase naming the CUDA 12 and 13 wheels
    (None when the header is not one an NVIDIA wheel ships)."""
    kind = root_kind_of(header)
    if kind is None:
        return None
    wheels = CCCL_WHEELS if kind == "cccl" else LIBRARY_ROOTS[kind][2]
    return f"{wheels[12]} (CUDA 12) or {wheels[13]} (CUDA 13)"


_PROBES = {"cccl": "cuda/std/version", **{k: v[0] for k, v in LIBRARY_ROOTS.items()}}


def missing_hint(header: str, searched: tuple[str, ...] = ()) -> str:
    """The line a missing-header error adds when an NVIDIA wheel ships the header ('' if none):
    install the wheel; or, where a directory searched holds that library already, the header
    is none of that release's (a newer one's, say)."""
    wheel = wheel_for(header)
    if wheel is None:
        return ""
    kind = root_kind_of(header) or ""
    held = [d for d in searched if os.path.isfile(os.path.join(d, _PROBES.get(kind, "-")))]
    if held:
        return (
            f"<{header}> is no header of the {kind} headers in {held[0]}: it may be another "
            "release's; to use another CCCL, name its directory: "
            "CUPY_RAWCODE_HEADER_SOURCES=cccl=DIR"
            if kind == "cccl"
            else f"<{header}> is no header of the {kind} headers in {held[0]}: it may be "
            "another release's (point CUDA_HOME at the CUDA toolkit it comes with)"
        )
    return (
        f"<{header}> is in the {wheel} wheel: pip install it (the cupy-rawcode[cu12] / "
        "[cu13] extras do), or point CUDA_HOME at a CUDA toolkit"
    )


def offered(include_dirs: list[str]) -> dict[str, list[str]]:
    """For each library root kind, the first of ``include_dirs`` holding its probe header (the
    kinds none holds are left out)."""
    out: dict[str, list[str]] = {}
    for kind, (probe, _, _) in LIBRARY_ROOTS.items():
        for d in include_dirs:
            if d and os.path.isfile(os.path.join(d, probe)):
                out[kind] = [d]
                break
    return out
