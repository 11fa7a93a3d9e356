"""Relocatable device code on a GPU: the cubin devrt.link makes from NVRTC's -dc output loads,
the parent kernel launches the child from the device, and the result matches NumPy and
cupy.RawKernel(..., options=('-dc',)) on the same random data."""

import numpy as np
import pytest
from test_devrt import PARENT, nvrtc_compile

from cupy_rawcode.compiler.devrt import link
from cupy_rawcode.toolkit.discovery import nvrtc_version
from cupy_rawcode.toolkit.record import supported_archs

pytestmark = pytest.mark.gpu

N = 10_007  # not a multiple of the child's 32-thread blocks: its bounds check matters


@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def cc(cupy) -> int:
    cc = int(cupy.cuda.Device().compute_capability)
    if cc > max(supported_archs()):
        pytest.skip(f"NVRTC {nvrtc_version()} has no sm_{cc}: -dc needs a real architecture")
    return cc


@pytest.fixture
def host():
    return np.random.default_rng(1234).standard_normal(N).astype(np.float32)


def run_parent(cupy, function, host: np.ndarray) -> np.ndarray:
    x = cupy.asarray(host)
    function((1,), (1,), (x, np.int32(N)))
    cupy.cuda.Device().synchronize()
    return x.get()


@pytest.mark.parametrize(
    "kind, options",
    [
        ("cubin", ("-dc",)),
        ("cubin", ("--relocatable-device-code=true",)),
        ("ptx", ("-dc",)),
        ("ltoir", ("-dc", "-dlto")),
    ],
)
def test_linked_parent_launches_the_child(cupy, cc, host, kind, options):
    arch = f"sm_{cc}"
    code = nvrtc_compile(PARENT, kind, options, f"compute_{cc}" if kind == "ptx" else arch)
    module = cupy.cuda.function.Module()
    module.load(link(code, kind, arch, nvrtc_version()))
    got = run_parent(cupy, module.get_function("parent"), host)
    assert np.any(host != 0)
    np.testing.assert_array_equal(got, host * np.float32(2))  # doubling a float is exact


def test_same_result_as_cupy_rawkernel_with_dc(cupy, cc, host):
    arch = f"sm_{cc}"
    module = cupy.cuda.function.Module()
    module.load(
        link(nvrtc_compile(PARENT, "cubin", ("-dc",), arch), "cubin", arch, nvrtc_version())
    )
    ours = run_parent(cupy, module.get_function("parent"), host)
    theirs = run_parent(cupy, cupy.RawKernel(PARENT, "parent", options=("-dc",)), host)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(theirs, host * np.float32(2))


def test_rawkernel_with_dc_runs_once_wired(cupy, cc, host):
    """cupy_rawcode.RawKernel with -dc: passes once nvrtc.compile_program links -dc output."""
    import cupy_rawcode

    got = run_parent(cupy, cupy_rawcode.RawKernel(PARENT, "parent", options=("-dc",)), host)
    np.testing.assert_array_equal(got, host * np.float32(2))


@pytest.mark.parametrize(
    "options",
    [("-rdc", "true"), ("--relocatable-device-code", "true"), ("-dc", "--dlink-time-opt")],
)
def test_rawkernel_with_rdc_or_lto_spelled_otherwise_launches_the_child(cupy, cc, host, options):
    """The value apart (NVRTC takes it so) and -dlto's long spelling: linked as -rdc=true and
    -dc -dlto are."""
    import cupy_rawcode

    got = run_parent(cupy, cupy_rawcode.RawKernel(PARENT, "parent", options=options), host)
    np.testing.assert_array_equal(got, host * np.float32(2))
