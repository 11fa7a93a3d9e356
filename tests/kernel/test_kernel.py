"""RawKernel/RawModule without a GPU: laziness, validation, compile for an arch, pickling."""

import json
import os
import pickle
import subprocess
import sys
import threading

import pytest
from conftest import ROOT

import cupy_rawcode
from cupy_rawcode.kernel.cucomplex import translate_cucomplex
from cupy_rawcode.toolkit.discovery import choose_arch

try:
    import cupy
except ImportError:  # the CuPy columns are skipped
    cupy = None

SCALE = r'extern "C" __global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }'
TEMPLATE = (
    "#include <cub/warp/warp_reduce.cuh>\n"
    "template <typename T> __global__ void twice(T* x) { x[threadIdx.x] *= 2; }\n"
)


def test_constructing_never_compiles(compiles):
    cupy_rawcode.RawKernel(SCALE, "scale")
    cupy_rawcode.RawModule(code=TEMPLATE, name_expressions=["twice<float>"])
    assert compiles == []


# refused at construction, as CuPy's typed arguments and its own checks refuse them there
# (cupy: whether CuPy 14.2 raises the same class at construction; False: ours only, listed)
CONSTRUCTION_ERRORS = [
    (lambda m: m.RawKernel(SCALE, "scale", options="-DX"), TypeError, "tuple of str", True),
    (lambda m: m.RawKernel(b"x", "scale"), TypeError, "code must be str", True),
    (lambda m: m.RawKernel(SCALE, 1), TypeError, "name must be str", True),
    (lambda m: m.RawKernel(SCALE, "scale", (), 1), TypeError, "backend must be str", True),
    (lambda m: m.RawModule(), TypeError, "Exactly one of", True),
    (lambda m: m.RawModule(code="x", path="y.cubin"), TypeError, "Exactly one of", True),
    (lambda m: m.RawModule(code=b"x"), TypeError, "code must be str", True),
    (
        lambda m: m.RawModule(path="k.cubin", name_expressions=["f<int>"]),
        ValueError,
        "need CUDA C\\+\\+",
        True,
    ),
    (lambda m: m.RawModule(path="k.cubin", jitify=True), ValueError, "precompiled", True),
    (
        lambda m: m.RawModule(code=SCALE, name_expressions=["f"], backend="nvrt"),
        ValueError,
        "only nvrtc supports",
        True,
    ),
    (lambda m: m.RawModule(code=SCALE, jitify=True, backend="nvrt"), ValueError, "NVRTC", True),
    (lambda m: m.RawModule(code=SCALE, name_expressions=5), TypeError, "not iterable", True),
    (lambda m: m.RawModule(code=SCALE, name_expressions="f"), TypeError, "split into", False),
]


@pytest.mark.parametrize("make, exc, message, cupy_too", CONSTRUCTION_ERRORS)
def test_wrong_argument_types_fail_at_construction_as_in_cupy(make, exc, message, cupy_too):
    with pytest.raises(exc, match=message):
        make(cupy_rawcode)
    if cupy_too and cupy is not None:
        with pytest.raises(exc):
            make(cupy)


# constructed, as CuPy constructs them (a module that makes a kernel it never launches works),
# and refused at the first compile or launch, before NVRTC runs
NUL_SOURCE = 'extern "C" __global__ void scale() {}\n// \0\n'
COMPILE_ERRORS = [
    (lambda m: m.RawKernel(SCALE, "scale", backend="hiprtc"), ValueError, "backend='hiprtc'"),
    (lambda m: m.RawKernel(SCALE, "scale", backend=None), ValueError, "backend=None"),
    (lambda m: m.RawKernel(SCALE, "scale", options=("-D",)), ValueError, "'-D' needs a value"),
    (lambda m: m.RawKernel(SCALE, "scale", options=("-std=c++99",)), ValueError, "c\\+\\+99"),
    (lambda m: m.RawKernel(SCALE, "scale", options=("-x", "cu")), ValueError, "'cu' does not"),
    (lambda m: m.RawKernel(SCALE, "scale", options=(1,)), TypeError, "tuple of str"),
    (lambda m: m.RawKernel(SCALE, "scale", options=([1],)), TypeError, "tuple of str"),
    (lambda m: m.RawKernel(SCALE, "scale", options=None), TypeError, "tuple of str"),
    (lambda m: m.RawKernel(None, "scale"), TypeError, "code must be str, not NoneType"),
    (lambda m: m.RawKernel(SCALE, None), TypeError, "name must be str, not NoneType"),
    (lambda m: m.RawKernel(NUL_SOURCE, "scale"), ValueError, "<source>:2:4: NUL"),
    (lambda m: m.RawKernel(SCALE, "sc\0ale"), ValueError, "kernel name 'sc"),
    (lambda m: m.RawKernel(SCALE, "scale", options=("-DX=\0",)), ValueError, "options\\[0\\]"),
    (lambda m: m.RawModule(code=SCALE, options=("-D",)), ValueError, "'-D' needs a value"),
    (lambda m: m.RawModule(code=SCALE, backend="nvrt"), ValueError, "backend='nvrt'"),
    (lambda m: m.RawModule(code=SCALE, name_expressions=[1]), ValueError, "name expression 1"),
    (lambda m: m.RawModule(code=SCALE, name_expressions=["f<\0>"]), ValueError, "NUL"),
    (lambda m: m.RawModule(code=NUL_SOURCE), ValueError, "<source>:2:4: NUL"),
]


@pytest.mark.parametrize("make, exc, message", COMPILE_ERRORS)
def test_bad_values_construct_and_fail_at_compile_before_nvrtc(make, exc, message, compiles):
    made = make(cupy_rawcode)  # constructs, as CuPy's does
    if cupy is not None:
        make(cupy)
    with pytest.raises(exc, match=message):
        made.compile(arch="sm_90")
    with pytest.raises(exc, match=message):  # and again: nothing was kept
        made.compile(arch="sm_90")
    assert compiles == []


def test_jitify_flag_gives_the_same_code_under_a_key_of_its_own(compiles):
    """jitify=True adds CuPy's -DCUPY_USE_JITIFY (test_jitify_flag.py has the rest): the code
    of a kernel that does not test it is the same, compiled once per flag."""
    a = cupy_rawcode.RawKernel(SCALE, "scale", jitify=True)
    b = cupy_rawcode.RawKernel(SCALE, "scale")
    a.compile(arch="sm_90")
    b.compile(arch="sm_90")
    assert a._build.compiled["sm_90"].symbols == b._build.compiled["sm_90"].symbols
    assert len(compiles) == 2


@pytest.mark.parametrize(
    "cc, supported, expected",
    [
        (90, (75, 80, 90, 120), ("sm_90", "cubin")),
        (86, (75, 80, 90), ("sm_86", "cubin")),
        (120, (75, 80, 90), ("compute_90", "ptx")),  # newer GPU than NVRTC: PTX, driver JITs it
        (121, (75, 80, 90, 120, 121), ("sm_121", "cubin")),
    ],
)
def test_arch_for_device(cc, supported, expected):
    assert choose_arch(cc, supported) == expected


def test_translate_cucomplex_rewrites_only_the_include():
    src = "#include <cuComplex.h>\n  #  include < cuComplex.h >\n#include <cuda/std/complex>\nx\n"
    out = translate_cucomplex(src).splitlines()
    assert out[:4] == [
        "#include <cupy/complex.cuh>",
        "#include <cupy/carray.cuh>",
        "#include <cupy/atomics.cuh>",
        "#include <cupy/math_constants.h>",
    ]
    assert out[4].startswith("#include <cupy/cuComplex_bridge.h>")
    assert out[5].startswith("#include <cupy/cuComplex_bridge.h>")
    assert out[6:] == ["#include <cuda/std/complex>", "x"]


def test_translate_cucomplex_compiles():
    pytest.importorskip("cupy", reason="translate_cucomplex uses CuPy's own headers")
    src = (
        '#include <cuComplex.h>\nextern "C" __global__ void z(cuDoubleComplex* a) '
        "{ a[0] = cuCmul(a[0], make_cuDoubleComplex(1.0, 2.0)); }\n"
    )
    k = cupy_rawcode.RawKernel(src, "z", translate_cucomplex=True)
    k.compile(arch="sm_80")
    assert k._build.compiled["sm_80"].data[:4] == b"\x7fELF"


def test_module_name_expressions_compile_to_mangled_names():
    m = cupy_rawcode.RawModule(code=TEMPLATE, name_expressions=["twice<float>", "twice<int>"])
    m.compile(arch="sm_90")
    symbols = m._build.compiled["sm_90"].symbols
    assert set(symbols) == {"twice<float>", "twice<int>"}
    assert symbols["twice<float>"] != symbols["twice<int>"]
    assert all(s.startswith("_Z") for s in symbols.values())


def test_cu_path_compiles_with_options_and_its_own_directory(tmp_path):
    (tmp_path / "local.h").write_text("#define FACTOR VALUE\n")
    cu = tmp_path / "k.cu"
    cu.write_text('#include "local.h"\nextern "C" __global__ void f(float* x) { x[0] = FACTOR; }\n')
    m = cupy_rawcode.RawModule(path=cu, options=("-DVALUE=3.0f",))
    m.compile(arch="sm_90")
    assert m._build.compiled["sm_90"].kind == "cubin"
    with pytest.raises(cupy_rawcode.CompileError, match="VALUE"):
        cupy_rawcode.RawModule(path=cu).compile(arch="sm_90")  # without the -D it fails


def test_threads_racing_compile_once(compiles):
    k = cupy_rawcode.RawKernel(TEMPLATE + 'extern "C" __global__ void g() {}', "g")
    barrier = threading.Barrier(16)
    errors = []

    def run():
        try:
            barrier.wait()
            k.compile(arch="sm_90")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(compiles) == 1


_CHILD = r"""
import json, pickle, sys
from cupy_rawcode.orchestrator import compiling as program
calls = []
orig = program._nvrtc_compile
program._nvrtc_compile = lambda *a: (calls.append(1), orig(*a))[1]
obj = pickle.load(open(sys.argv[1], "rb"))
code = obj._build.code_for("sm_90", "cubin")
print(json.dumps({"compiles": len(calls), "size": len(code.data), "symbols": code.symbols,
                  "type": type(obj).__name__}))
"""


@pytest.mark.parametrize(
    "make",
    [
        lambda: cupy_rawcode.RawKernel(SCALE, "scale"),
        lambda: cupy_rawcode.RawModule(code=TEMPLATE, name_expressions=["twice<float>"]),
    ],
)
def test_pickle_carries_compiled_bytes_to_another_process(make, tmp_path):
    obj = make()
    obj.compile(arch="sm_90")
    path = tmp_path / "obj.pkl"
    path.write_bytes(pickle.dumps(obj))
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "empty-cache")}
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    want = obj._build.compiled["sm_90"]
    assert out == {
        "compiles": 0,
        "size": len(want.data),
        "symbols": want.symbols,
        "type": type(obj).__name__,
    }


def test_pickle_without_compiled_bytes_compiles_after_unpickling(compiles):
    k = pickle.loads(pickle.dumps(cupy_rawcode.RawKernel(SCALE, "scale", options=("-DX=1",))))
    assert (k.code, k.name, k.options) == (SCALE, "scale", ("-DX=1",))
    k.compile(arch="sm_80")
    assert len(compiles) == 1


def test_pickle_from_another_version_is_refused():
    k = cupy_rawcode.RawKernel(SCALE, "scale")
    state = k.__getstate__()
    state["version"] = 999
    with pytest.raises(pickle.UnpicklingError, match="another cupy_rawcode version"):
        k.__setstate__(state)


def test_object_code_pickles_as_bytes_and_mapping():
    obj = cupy_rawcode.compile(TEMPLATE, arch="sm_90", name_expressions=["twice<int>"])
    back = pickle.loads(pickle.dumps(obj))
    assert bytes(back.code) == bytes(obj.code)
    assert back.symbol_mapping == obj.symbol_mapping


def test_compile_takes_a_cache_dir_argument(tmp_path):
    cupy_rawcode.compile(SCALE, arch="sm_90", cache_dir=tmp_path / "mine")
    entries = list((tmp_path / "mine").rglob("entries/*/*"))
    assert len(entries) == 1
    assert oct((tmp_path / "mine").stat().st_mode & 0o777) == "0o700"
