"""Toolchain discovery: the NVRTC version and the system header roots, in one written policy.

Search policy (README "Header search order"): the system roots come after the user's `-I` and
`-isystem` directories, in this order:

0. ``cupy``   - CuPy's own device headers (``<cupy>/_core/include``: ``cupy/complex.cuh``, ...),
   which CuPy puts on every compile's include path; absent when CuPy is not installed;
1. ``cccl``   - CCCL (cub, thrust, libcudacxx) from the first *source* that has it;
2. ``cuda``   - CUDA runtime headers (``cuda_fp16.h``, ``mma.h``, ...) from the first source
   that has them;
3. ``curand``, ``crt`` - cuRAND's device API and the compiler's ``crt/`` headers, each from the
   first source that has it, unless an earlier root already holds it (cudaheaders.py);
4. ``shim``   - this package's ``include/`` (C++ standard header shims), always last.

Sources are tried in the order ``cupy,wheel,nvrtc,toolkit`` unless the ``header_sources``
argument or ``CUPY_RAWCODE_HEADER_SOURCES`` says otherwise. An entry is a source name (``cupy``:
CuPy's bundled CCCL, first so that kernels compile with the CCCL CuPy compiles its own kernels
with, and because CCCL 2.8 (the CUDA 12 wheel) declares a ``__host__`` conversion in
``thrust/complex.h`` that NVRTC refuses; ``wheel``: the pip NVIDIA header wheels via
cuda.pathfinder; ``nvrtc``: the CUDA + CCCL headers NVRTC >= 13.3 bundles, extracted once per
NVRTC version into the cache directory; ``toolkit``: ``CUDA_HOME``/``CUDA_PATH``/
``/usr/local/cuda``) or an explicit directory ``KIND=/path`` (``cccl=``, ``cuda=``, ``curand=``,
``crt=``). Sources are asked lazily, in order, until every kind is found. Only one CCCL is ever
used: mixing two is broken.
"""

import functools
import os
import re
from pathlib import Path
from typing import NamedTuple

from ..ground import config
from ..ground.cudaimport import cuda_module
from ..ground.errors import RawcodeRuntimeError, RawcodeValueError
from ..ground.regular import read_bytes
from ..ground.sources import HEADER_ROOT_KINDS, parse_header_sources
from ..store.layout import cache_location, claim
from .cudaheaders import LIBRARY_ROOTS, WHEEL_INCLUDE_DIRS, offered

DEFAULT_SOURCES = ("cupy", "wheel", "nvrtc", "toolkit")
ROOT_KINDS = HEADER_ROOT_KINDS  # system roots before the shims, in search order
BUNDLED_MIN = (13, 3)  # the first NVRTC that bundles headers (nvrtcInstallBundledHeaders)


class SearchDir(NamedTuple):
    """One directory of the include search list: ``tag`` names it in keys (str), ``path`` (str),
    ``origin`` says where it came from (wheel, cupy, toolkit, explicit, user, package)."""

    tag: str
    path: str
    origin: str


class Toolchain(NamedTuple):
    """What compiles: ``nvrtc_version`` (major, minor), ``system_dirs`` (SearchDirs),
    ``cccl_version`` (str or None), ``sources`` (the header sources asked), ``supported_archs``
    (SM numbers NVRTC can emit code for), ``nvrtc_library`` (the shared library in use, or None)
    ``from_record`` (read from record.py's record, not discovered) and ``stamps``: the
    record's (path, size, mtime_ns, inode) of every file that decides it, () when unrecorded."""

    nvrtc_version: tuple[int, int]
    system_dirs: tuple[SearchDir, ...]
    cccl_version: str | None
    sources: tuple[str, ...]
    supported_archs: tuple[int, ...] = ()
    nvrtc_library: str | None = None
    from_record: bool = False
    stamps: tuple = ()

    @property
    def nvrtc_version_str(self) -> str:
        return "%d.%d" % self.nvrtc_version


def shim_dir() -> Path:
    """The package's ``include/`` (installed inside the package, or at the repo root)."""
    package = Path(__file__).resolve().parents[1]  # cupy_rawcode/ (this file is in toolkit/)
    installed = package / "include"
    return installed if installed.is_dir() else package.parent / "include"


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor), asking the library cuda.bindings loads."""
    nvrtc = cuda_module("cuda.bindings.nvrtc")

    err, major, minor = nvrtc.nvrtcVersion()
    if int(err) != 0:
        raise RawcodeRuntimeError(f"nvrtcVersion failed: {err}")
    return int(major), int(minor)


@functools.cache
def _query_archs() -> tuple[int, ...]:
    nvrtc = cuda_module("cuda.bindings.nvrtc")

    err, archs = nvrtc.nvrtcGetSupportedArchs()
    if int(err) != 0:
        raise RawcodeRuntimeError(f"nvrtcGetSupportedArchs failed: {err}")
    return tuple(sorted(int(a) for a in archs))


def choose_arch(
    compute_capability: int, supported: tuple[int, ...], ptx: bool = False
) -> tuple[str, str]:
    """(arch, target) for a device: a cubin for its own SM when NVRTC knows it, else PTX for
    the newest architecture NVRTC has, which the driver JIT-compiles for the device; ``ptx``
    (CuPy's CUPY_COMPILE_WITH_PTX=1): PTX for the device's own, or that newest one."""
    if ptx:
        return f"compute_{min(compute_capability, max(supported))}", "ptx"
    if compute_capability <= max(supported):
        return f"sm_{compute_capability}", "cubin"
    return f"compute_{max(supported)}", "ptx"


def parse_sources(spec: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """Validate a search policy: source names or ``KIND=DIR`` entries (``cccl=DIR``, ...); None
    is CUPY_RAWCODE_HEADER_SOURCES, else the default."""
    if spec is None:
        return config.header_sources() or DEFAULT_SOURCES
    return parse_header_sources("header_sources", spec)


def _pathfinder_dir(libname: str) -> str | None:
    try:
        pf = cuda_module("cuda.pathfinder")

        located = pf.locate_nvidia_header_directory(libname)
    except Exception:
        return None
    if located is None or located.found_via not in ("site-packages", "conda"):
        return None
    return located.abs_path


def _cupy_cccl_dirs() -> list[str]:
    import importlib.util

    spec = importlib.util.find_spec("cupy")
    if spec is None or not spec.submodule_search_locations:
        return []
    base = Path(list(spec.submodule_search_locations)[0]) / "_core" / "include" / "cupy" / "_cccl"
    dirs = [base / "libcudacxx", base / "cub", base / "thrust"]
    return [str(d) for d in dirs if d.is_dir()] if (base / "cub").is_dir() else []


def bundled_headers_dir(cache: Path) -> Path:
    """Where NVRTC's bundled headers are extracted in the cache directory ``cache``: one
    directory per NVRTC version."""
    return cache / "nvrtc-headers" / ("%d.%d" % nvrtc_version())


def _nvrtc_bundled_dirs() -> dict[str, list[str]]:
    """NVRTC >= 13.3's own CUDA + CCCL headers, extracted on first use (NVRTC serializes
    concurrent extractions with a file lock and skips an existing install)."""
    if nvrtc_version() < BUNDLED_MIN:
        return {}
    nvrtc = cuda_module("cuda.bindings.nvrtc")

    install = getattr(nvrtc, "nvrtcInstallBundledHeaders", None)
    if install is None:  # cuda-bindings older than the NVRTC it loads
        return {}
    cache = cache_location().path
    target = bundled_headers_dir(cache)
    try:
        if not claim(cache):  # not a cache (layout.py): headers not extracted
            return {}
    except OSError:
        return {}
    if not (target / "cccl" / "cub").is_dir():
        flag = getattr(nvrtc, "NVRTC_INSTALL_HEADERS_SKIP_IF_EXISTS", 0)
        try:
            err = install(str(target).encode(), int(flag))
            err = err[0] if isinstance(err, tuple) else err
        except Exception:
            return {}
        if int(err) != 0 or not (target / "cccl" / "cub").is_dir():
            return {}
    return {"cccl": [str(target / "cccl")], **offered([str(target)]), "cuda": [str(target)]}


def toolkit_home() -> Path | None:
    for value in (config.cuda_home(), config.cuda_path()):
        if value and Path(value, "include").is_dir():
            return Path(value)
    default = Path("/usr/local/cuda")
    return default if (default / "include").is_dir() else None


def _wheel_dirs() -> dict[str, list[str]]:
    """The CCCL and CUDA header directories of the pip NVIDIA wheels: pathfinder's, then the
    wheel layouts it may not know (cudaheaders.WHEEL_INCLUDE_DIRS)."""
    found = [_pathfinder_dir(name) for _, name, _ in LIBRARY_ROOTS.values()]
    found += [os.path.join(site, rel) for site in config.site_dirs() for rel in WHEEL_INCLUDE_DIRS]
    cccl = _pathfinder_dir("cccl")
    return {"cccl": [cccl] if cccl else [], **offered([d for d in found if d])}


def source_dirs(source: str) -> dict[str, list[str]]:
    """The header directories one source offers, by root kind (absent or empty when none)."""
    if "=" in source:
        kind, _, path = source.partition("=")
        if not Path(path).is_dir():
            raise RawcodeValueError(f"header source {source!r}: {path} is not a directory")
        return {kind: [str(Path(path).resolve())]}
    if source == "wheel":
        return _wheel_dirs()
    if source == "cupy":
        return {"cccl": _cupy_cccl_dirs(), "cuda": []}
    if source == "nvrtc":
        return _nvrtc_bundled_dirs()
    if source == "toolkit":
        home = toolkit_home()
        if home is None:
            return {}
        inc = home / "include"
        cccl = inc / "cccl" if (inc / "cccl" / "cub").is_dir() else inc
        return {
            "cccl": [str(cccl)] if (cccl / "cub").is_dir() else [],
            **offered([str(inc)]),
            "cuda": [str(inc)],
        }
    raise RawcodeValueError(f"unknown header source {source!r}")


def cupy_include_dir() -> str | None:
    """CuPy's ``_core/include`` (its own device headers), found without importing CuPy."""
    import importlib.util

    spec = importlib.util.find_spec("cupy")
    if spec is None or not spec.submodule_search_locations:
        return None
    inc = Path(list(spec.submodule_search_locations)[0]) / "_core" / "include"
    return str(inc) if (inc / "cupy").is_dir() else None


def choose_system_dirs(
    sources: tuple[str, ...], offered, shim: str, cupy: str | None = None
) -> tuple[SearchDir, ...]:
    """Pure policy: CuPy's include directory (when given), then for each kind of ROOT_KINDS in
    order the first source offering it (a directory already a root is not added twice: CUDA 13
    wheels share one), then the shims. ``offered(source)`` (or a dict) gives a source's
    directories; it is asked only as needed."""
    ask = offered if callable(offered) else (lambda s: offered.get(s, {}))
    out: list[SearchDir] = [SearchDir("cupy", cupy, "cupy")] if cupy else []
    for kind in ROOT_KINDS:
        for source in sources:
            dirs = ask(source).get(kind) or []
            if dirs:
                origin = "explicit" if "=" in source else source
                taken = {d.path for d in out}
                out.extend(SearchDir(kind, d, origin) for d in dirs if d not in taken)
                break
    out.append(SearchDir("shim", shim, "package"))
    return tuple(out)


def cccl_version(dirs: tuple[SearchDir, ...]) -> str | None:
    """CCCL's version (e.g. '2.8.2') read from cuda/std/__cccl/version.h."""
    for d in dirs:
        if d.tag != "cccl":
            continue
        header = Path(d.path, "cuda", "std", "__cccl", "version.h")
        if header.is_file():
            m = re.search(rb"#\s*define\s+CCCL_VERSION\s+(\d+)", read_bytes(str(header)))
            if m:
                v = int(m.group(1))
                return f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}"
    return None


def nvrtc_library() -> str | None:
    """The path of the NVRTC library cuda.bindings loaded (None when it cannot be told)."""
    try:
        pf = cuda_module("cuda.pathfinder")

        return pf.load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:
        return None


def discover(sources: tuple[str, ...]) -> Toolchain:
    """Ask NVRTC and the header sources (imports cuda.pathfinder, loads NVRTC: ~60 ms)."""
    dirs = choose_system_dirs(
        sources, functools.lru_cache(maxsize=None)(source_dirs), str(shim_dir()), cupy_include_dir()
    )
    return Toolchain(
        nvrtc_version(), dirs, cccl_version(dirs), sources, _query_archs(), nvrtc_library()
    )
