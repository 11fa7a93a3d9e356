"""Our RawKernel is a ``cupy.RawKernel`` (a subclass of CuPy's own), so CuPy's isinstance checks
take it (cupyx.scipy.ndimage's generic filters), while everything CuPy's class defines is ours;
the fields CuPy has read-only are read-only. Without a GPU."""

import pickle

import numpy as np
import pytest

import cupy_rawcode

cupy = pytest.importorskip("cupy")
raw = pytest.importorskip("cupy._core.raw")

SRC = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'
LINE = (
    'extern "C" __global__ void line(double* in, ptrdiff_t n_in, double* out, ptrdiff_t n_out)'
    "{ for (ptrdiff_t i = 0; i < n_out; ++i) out[i] = in[i] + in[i + 1] + in[i + 2]; }\n"
)
# members of CuPy's class that ours may leave as CuPy's: documentation and Cython's own pickle
# helpers, which pickle never calls (ours defines __reduce_ex__)
CUPYS_OWN = {"__doc__", "__reduce_cython__", "__setstate_cython__"}


def test_our_kernel_is_a_cupy_raw_kernel():
    k = cupy_rawcode.RawKernel(SRC, "k")
    assert isinstance(k, cupy.RawKernel) and isinstance(k, raw.RawKernel)
    assert not isinstance(cupy_rawcode.RawModule(code=SRC), cupy.RawKernel)


def test_every_member_of_cupys_class_is_ours():
    left = set(vars(raw.RawKernel)) - set(vars(cupy_rawcode.RawKernel)) - CUPYS_OWN
    assert left == set()
    assert cupy_rawcode.RawKernel.__reduce_ex__ is not raw.RawKernel.__reduce_ex__


def test_ndimage_takes_our_kernel():
    """cupyx.scipy.ndimage checks isinstance(f, cupy.RawKernel), then reads name, code and
    options; the launch itself needs a GPU (test_gpu_sharing.py)."""
    from cupyx.scipy.ndimage import _filters_generic

    k = cupy_rawcode.RawKernel(LINE, "line", options=("-DX=1",))
    assert _filters_generic._get_sub_kernel(k) is k
    assert (k.name, k.code, k.options) == ("line", LINE, ("-DX=1",))
    import cupyx.scipy.ndimage as ndi

    try:
        ndi.generic_filter1d(np.zeros(8), k, 3)  # past the type check, then it needs a device
    except Exception as e:
        assert "bad function type" not in str(e)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickling_is_ours_on_every_protocol(protocol):
    k = cupy_rawcode.RawKernel(SRC, "k", options=("-DX=1",))
    k.check_pointers = False
    data = pickle.dumps(k, protocol=protocol)
    assert b"cupy_rawcode" in data
    back = pickle.loads(data)
    assert type(back) is cupy_rawcode.RawKernel
    assert (back.code, back.name, back.options, back.check_pointers) == (
        SRC,
        "k",
        ("-DX=1",),
        False,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.RawKernel(SRC, "k", (), "nvcc"),
        lambda m: m.RawKernel(SRC, "k", backend="nvcc"),
        lambda m: m.RawModule(code=SRC, backend="nvcc"),
    ],
)
def test_backend_nvcc_is_cupys_own_object(make):
    made = make(cupy_rawcode)
    assert type(made) is type(make(cupy)) and type(made).__module__ == "cupy._core.raw"


# (object, attribute): read-only in CuPy's classes, and in ours
READ_ONLY = [
    *[
        ("RawKernel", a)
        for a in ("code", "name", "options", "backend", "enable_cooperative_groups", "file_path")
    ],
    ("RawKernel", "__name__"),
    ("RawKernel", "not_an_attribute"),
    *[
        ("RawModule", a)
        for a in (
            "code",
            "options",
            "backend",
            "enable_cooperative_groups",
            "file_path",
            "name_expressions",
            "not_an_attribute",
        )
    ],
]


def _made(namespace, what):
    if what == "RawKernel":
        return namespace.RawKernel(SRC, "k")
    return namespace.RawModule(code=SRC)


@pytest.mark.parametrize("what, attribute", READ_ONLY)
def test_fields_are_read_only_as_in_cupy(what, attribute):
    for namespace in (cupy, cupy_rawcode):
        obj = _made(namespace, what)
        before = getattr(obj, attribute, None)
        with pytest.raises(AttributeError):
            setattr(obj, attribute, "x")
        assert getattr(obj, attribute, None) == before


@pytest.mark.parametrize(
    "what, attribute", [("RawKernel", "jitify"), ("RawKernel", "translate_cucomplex")]
)
def test_our_own_fields_are_read_only_too(what, attribute):
    with pytest.raises(AttributeError):
        setattr(_made(cupy_rawcode, what), attribute, True)


def test_check_pointers_stays_settable():
    k = cupy_rawcode.RawKernel(SRC, "k")
    k.check_pointers = False
    assert k.check_pointers is False


def test_fields_read_as_cupys():
    ours, theirs = cupy_rawcode.RawKernel(SRC, "k"), cupy.RawKernel(SRC, "k")
    fields = ("code", "name", "options", "backend", "enable_cooperative_groups", "file_path")
    assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
    assert ours.__name__ == theirs.__name__ == "k"
    ours, theirs = cupy_rawcode.RawModule(code=SRC), cupy.RawModule(code=SRC)
    fields = ("code", "options", "backend", "enable_cooperative_groups", "file_path")
    assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
