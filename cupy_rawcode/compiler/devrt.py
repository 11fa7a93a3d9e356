"""Relocatable device code (``-dc``): link NVRTC's relocatable output with the device runtime
(``libcudadevrt.a``) through nvJitLink, so a kernel that launches kernels (dynamic parallelism)
loads and runs, as ``cupy.RawKernel(code, name, options=('-dc',))`` does. The key reads
``key.LINK_RULES``; linking happens only on a miss (nvrtc.compile_program).

Which NVRTC output ``link`` takes (measured with NVRTC 12.9 + nvJitLink 12.9, CPU only, for
``bench/corpus/block_reduce.cu`` plus a kernel launching it, sm_90): NVRTC with ``-dc`` and
target cubin gives a relocatable ELF (``ET_REL``, with undefined ``__cudaCDP2LaunchDeviceV2``
and ``__cudaCDP2GetParameterBufferV2``) that nvJitLink takes as CUBIN input; linked with
``libcudadevrt.a`` it becomes a loadable cubin (``ET_EXEC``) in 4-24 ms. PTX for the virtual
arch (``compute_90``) links too but nvJitLink then runs ptxas (20-25 ms), and LTO-IR
(``-dc -dlto``, target ``ltoir``; nvJitLink needs ``-lto``) 41-44 ms. All three gave the same
276,552-byte cubin holding 885 data objects (stripping the ``-dc`` PTX removed only 65). The
path to use is ``kind="cubin"``: NVRTC's own cubin compile with the user's options as given (so
``-maxrregcount``, ``-Xptxas``, ``-G``, ``-lineinfo`` act in NVRTC's ptxas exactly as under
CuPy), no driver needed (cuda.core's PTX output asks the driver), and the cheapest link.
With ``-dlto`` NVRTC emits LTO-IR only (its cubin is empty): compile to ``ltoir`` and link
``kind="ltoir"``. On the H100 host (NVRTC 13.0, nvJitLink 13.0, ``libcudadevrt.a`` of the
``nvidia/cu13`` wheel) all three kinds linked to a cubin whose parent kernel launched the child
and gave exactly what ``cupy.RawKernel(..., options=('-dc',))`` gave. nvJitLink 12.9 also
linked the CUDA 13.0 toolkit's ``libcudadevrt.a`` here; the wheels come first in the search.
A virtual target (``compute_XX``, a device newer than NVRTC) cannot be linked to a cubin here:
``link`` says so.

Without ``-dc`` a device-side launch fails in NVRTC ("device-side kernel launch could not be
processed as the required runtime APIs are not declared"), which stays a compile error. The
link step's rules have a version in the key (``key.LINK_RULES``); whether a compile links
follows from its options (``headers.options.wants_rdc``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from ..ground import config
from ..ground.cudaimport import cuda_module
from ..ground.errors import RawcodeError, RawcodeValueError
from ..toolkit.discovery import toolkit_home
from .signals import guarded
from .strip import error_log, nvjitlink

LIBRARY = "libcudadevrt.a"
WHEEL_LAYOUTS = ("nvidia/cu13/lib", "nvidia/cuda_runtime/lib")  # CUDA 13 / CUDA 12 runtime wheels
TOOLKIT_LAYOUTS = ("lib64", "lib")
KINDS = ("cubin", "ptx", "ltoir")


class LinkError(RawcodeError, RuntimeError):
    """Relocatable device code could not be linked with the device runtime: what is missing
    (and what to install), or nvJitLink's own error log."""


def search(dirs: Iterable[str]) -> str | None:
    """The first ``libcudadevrt.a`` (a regular file) in ``dirs``, taken in order, or None."""
    for d in dirs:
        path = os.path.join(d, LIBRARY)
        if os.path.isfile(path):
            return path
    return None


def candidate_dirs() -> Iterator[str]:
    """Where ``libcudadevrt.a`` is looked for, in order, lazily (later sources are only asked
    when the earlier ones lack it):

    1. the CUDA wheels: cuda.pathfinder's answer when it finds the library in site-packages or
       a conda environment, then ``nvidia/cu13/lib`` and ``nvidia/cuda_runtime/lib`` under each
       site-packages directory on sys.path;
    2. the toolkit (``CUDA_HOME``, ``CUDA_PATH``, ``/usr/local/cuda``, as toolchain.toolkit_home
       picks it): ``lib64/`` then ``lib/``;
    3. CuPy's ``cupy.cuda.get_cuda_path()`` (``lib64/`` then ``lib/``) when CuPy is installed.
    """
    yield from _pathfinder_dirs()
    for site in config.site_dirs():
        for layout in WHEEL_LAYOUTS:
            yield os.path.join(site, layout)
    home = toolkit_home()
    if home is not None:
        for sub in TOOLKIT_LAYOUTS:
            yield os.path.join(str(home), sub)
    yield from _cupy_dirs()


def find_cudadevrt() -> str | None:
    """The path of the ``libcudadevrt.a`` to link with, or None (search order: candidate_dirs)."""
    return search(candidate_dirs())


def _pathfinder_dirs() -> list[str]:
    try:
        pf = cuda_module("cuda.pathfinder")

        located = pf.locate_static_lib("cudadevrt")  # cuda-pathfinder >= 1.9
    except Exception:
        return []
    if located.found_via not in ("site-packages", "conda"):
        return []  # CUDA_HOME/CUDA_PATH: asked in the toolkit's turn
    return [os.path.dirname(located.abs_path)]


def _cupy_dirs() -> list[str]:
    import importlib.util

    if importlib.util.find_spec("cupy") is None:
        return []
    try:
        from cupy.cuda import get_cuda_path

        root = get_cuda_path()
    except Exception:
        return []
    return [os.path.join(root, sub) for sub in TOOLKIT_LAYOUTS] if root else []


def install_hint(
    nvrtc_version: tuple[int, int], nvjitlink_missing: bool, cudadevrt_missing: bool
) -> str:
    """What to install for NVRTC ``major.minor``: the cupy-rawcode extra, or the wheels that hold
    nvJitLink and ``libcudadevrt.a``, or a toolkit through CUDA_HOME."""
    major, minor = nvrtc_version
    suffix = f"-cu{major}" if major <= 12 else ""
    wheels = []
    if nvjitlink_missing:
        wheels.append(f"'nvidia-nvjitlink{suffix}=={major}.{minor}.*'")
    if cudadevrt_missing:
        wheels.append(f"'nvidia-cuda-runtime{suffix}=={major}.*'")
    hint = (
        f"install cupy-rawcode's extra (pip install 'cupy-rawcode[cu{major}]') or "
        f"pip install {' '.join(wheels)}"
    )
    if cudadevrt_missing:
        hint += f", or set CUDA_HOME to a CUDA {major} toolkit (it has lib64/{LIBRARY})"
    return hint


def link(code: bytes, kind: str, arch: str, nvrtc_version: tuple[int, int]) -> bytes:
    """The cubin of NVRTC's relocatable output ``code`` (``kind``: "cubin", "ptx" or "ltoir")
    linked with ``libcudadevrt.a`` for ``arch`` (sm_XX) by nvJitLink of NVRTC's CUDA release.
    Raises LinkError naming what to install when nvJitLink or the library is missing, or with
    nvJitLink's error log when the link fails."""
    if kind not in KINDS:
        raise RawcodeValueError(f"kind={kind!r}: expected one of {KINDS}")
    if not arch.startswith("sm_"):
        raise LinkError(
            f"relocatable device code (-dc) is linked into a cubin for a real "
            f"architecture, but arch={arch} is virtual (NVRTC "
            f"{nvrtc_version[0]}.{nvrtc_version[1]} may not know the device: a newer "
            f"NVRTC compiles for it)"
        )
    if not code:
        raise LinkError(
            f"NVRTC produced no {kind} to link (with -dlto NVRTC emits LTO-IR only: "
            f"compile to 'ltoir')"
        )
    version = (nvrtc_version[0], nvrtc_version[1])
    mod = nvjitlink.get()
    lib = find_cudadevrt()
    bad_linker = mod is None or nvjitlink.version != version
    if bad_linker or lib is None:
        problems = []
        if bad_linker:
            problems.append(
                "nvJitLink is not available"
                if mod is None
                else f"nvJitLink is {nvjitlink.release()}, not NVRTC's {version[0]}.{version[1]}"
            )
        if lib is None:
            problems.append(
                f"{LIBRARY} (the device runtime) is in no CUDA wheel, toolkit or CuPy install"
            )
        raise LinkError(
            f"relocatable device code (-dc) needs nvJitLink {version[0]}.{version[1]} "
            f"and {LIBRARY}: {'; '.join(problems)}; "
            f"{install_hint(version, bad_linker, lib is None)}"
        )
    return guarded(_nvjitlink_link, mod, code, kind, arch, lib)


def _nvjitlink_link(mod, code: bytes, kind: str, arch: str, lib: str) -> bytes:
    """One nvJitLink link from creation to destruction, on the calling thread (link runs it
    through signals.guarded: nvJitLink's handle must not change threads)."""
    input_type = {
        "cubin": mod.InputType.CUBIN,
        "ptx": mod.InputType.PTX,
        "ltoir": mod.InputType.LTOIR,
    }[kind]
    options = [f"-arch={arch}"] + (["-lto"] if kind == "ltoir" else [])
    handle = mod.create(len(options), options)
    try:
        mod.add_data(handle, input_type, code, len(code), f"kernel.{kind}")
        mod.add_file(handle, mod.InputType.LIBRARY, lib)
        mod.complete(handle)
        out = bytearray(mod.get_linked_cubin_size(handle))
        mod.get_linked_cubin(handle, out)
        return bytes(out)
    except Exception as e:
        log = error_log(mod, handle)
        raise LinkError(
            f"nvJitLink could not link the relocatable device code (-dc, {kind}) for "
            f"{arch} with {lib}: {e}" + (f"\n{log}" if log else "")
        ) from None
    finally:
        mod.destroy(handle)
