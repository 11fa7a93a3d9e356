"""install(scope="all") under CUPY_CACHE_SAVE_CUDA_SOURCE: CuPy alone writes each compile's
``.cu`` beside its cubin in its own cache directory (profilers and debuggers read it there);
such a call is left to CuPy, as CUPY_CACHE_IN_MEMORY=1 is, so the source is saved where CuPy
saves it, and cupy-rawcode writes nothing in CuPy's directory otherwise. Before the fix the
source was saved nowhere (Capture kept the payload alone)."""

import os

import pytest

cupy = pytest.importorskip("cupy")
from cupy.cuda import _compiler_cache, compiler  # noqa: E402
from test_cupy_all import ELEMENTWISE, cupy_compile  # noqa: E402

from cupy_rawcode.hook import compiles as cupy_compiles  # noqa: E402
from cupy_rawcode.hook import install as hook  # noqa: E402
from cupy_rawcode.store import default_store  # noqa: E402

# CUPY_CACHE_SAVE_CUDA_SOURCE as CuPy's disk backend reads it: any non-empty value saves
SETTINGS = {
    "unset": (None, False),
    "1": ("1", True),
    "0 (CuPy: non-empty, so saved)": ("0", True),
    "empty": ("", False),
}


@pytest.fixture
def cupy_cache(tmp_path, monkeypatch):
    """Make CuPy's disk backend in tmp_path/cupy-cache with the variable as given, then install
    scope="all" in front of it; CuPy's own backend is given back after."""
    own = compiler._kernel_cache_backend
    directory = tmp_path / "cupy-cache"

    def make(value):
        if value is None:
            monkeypatch.delenv("CUPY_CACHE_SAVE_CUDA_SOURCE", raising=False)
        else:
            monkeypatch.setenv("CUPY_CACHE_SAVE_CUDA_SOURCE", value)
        compiler._set_kernel_cache_backend(_compiler_cache.DiskKernelCacheBackend(str(directory)))
        hook.install("all")
        return directory

    yield make
    hook.uninstall()
    compiler._set_kernel_cache_backend(own)


@pytest.mark.parametrize("value, saved", SETTINGS.values(), ids=SETTINGS.keys())
def test_save_cuda_source_leaves_the_call_to_cupy(cupy_cache, value, saved):
    directory = cupy_cache(value)
    source = ELEMENTWISE + f"\n// {value!r}\n"  # a key of its own for each row
    cupy_compile(source)
    suffixes = sorted(name.split(".", 1)[1] for name in os.listdir(directory))
    disk = default_store().level("disk")
    if saved:  # CuPy's: cubin and source in CuPy's directory, nothing in ours
        assert suffixes == ["cubin", "cubin.cu"]
        with open(directory / next(n for n in os.listdir(directory) if n.endswith(".cu"))) as f:
            assert "cupy_add_one" in f.read()
        assert len(disk) == 0
    else:  # ours: the store keeps the payload, CuPy's directory stays empty
        assert suffixes == []
        assert len(disk) >= 1


def test_servable_reads_the_backend_cupy_had(cupy_cache):
    cupy_cache("1")
    call = cupy_compiles.Call("x", (), "90", None, None, False, False)
    assert not cupy_compiles.servable(call, compiler)
    compiler._kernel_cache_backend.previous._save_cuda_source = False
    assert cupy_compiles.servable(call, compiler)
