"""``jitify=True`` on the drop-in classes means what it means under install(), and
``backend='nvcc'`` hands the object to CuPy (no GPU needed: compiles for sm_90)."""

import dataclasses
import pickle
import warnings

import pytest

import cupy_rawcode
from cupy_rawcode.ground import errors
from cupy_rawcode.headers.closure import MissingHeaderError
from cupy_rawcode.headers.standard import StandardRaisedWarning
from cupy_rawcode.hook import install as hook
from cupy_rawcode.kernel import loading
from cupy_rawcode.orchestrator import jitify as jitify_compat

ARCH = "sm_90"

try:
    import cupy
    import cupy.cuda.compiler as cupy_compiler
except Exception:
    cupy = cupy_compiler = None
needs_cupy = pytest.mark.skipif(cupy is None, reason="CuPy is not installed")

HEADERS = {
    "inc/uses_missing.h": '#pragma once\n#include "never_there.h"\n'
    "inline float helper(float v) { return v + 1; }\n",
    "inc/needs_missing.h": '#pragma once\n#include "never_there.h"\n'
    "inline float helper(float v) { return from_missing(v); }\n",
}
USES = (
    '#include "uses_missing.h"\nextern "C" __global__ void k(float* x) { x[0] = helper(x[0]); }\n'
)
NEEDS = (
    '#include "needs_missing.h"\nextern "C" __global__ void k(float* x) { x[0] = helper(x[0]); }\n'
)
OWN_MISSING = '#include "never_there.h"\nextern "C" __global__ void k() {}\n'
FAILS = '#error "precision not supported"\nextern "C" __global__ void k() {}\n'


def _install_route(monkeypatch, src, options):
    """install()'s compile of a jitify=True call, without loading the module (no GPU)."""
    monkeypatch.setattr(loading, "_load_module", lambda code: code)
    return hook._compile_for_cupy(src, options, "90", None, None)


ROUTES = {
    "install()": _install_route,
    "RawKernel(jitify=True)": lambda mp, src, options: cupy_rawcode.RawKernel(
        src, "k", options=options, jitify=True
    ).compile(arch=ARCH),
    "RawModule(jitify=True)": lambda mp, src, options: cupy_rawcode.RawModule(
        code=src, options=options, jitify=True
    ).compile(arch=ARCH),
}


def _jitify_exception():
    return cupy_compiler.JitifyException if cupy_compiler else errors.JitifyException


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_unused_missing_include_in_a_header_is_dropped_with_one_warning(monkeypatch, tree, route):
    root = tree(HEADERS)
    with pytest.warns(jitify_compat.DroppedIncludeWarning) as w:
        ROUTES[route](monkeypatch, USES, (f"-I{root}/inc",))
    assert len(w) == 1 and '"never_there.h"' in str(w[0].message)
    assert "uses_missing.h:2" in str(w[0].message)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_dropped_include_named_first_when_nvrtc_then_fails(monkeypatch, tree, route):
    root = tree(HEADERS)
    with pytest.warns(jitify_compat.DroppedIncludeWarning), pytest.raises(Exception) as e:
        ROUTES[route](monkeypatch, NEEDS, (f"-I{root}/inc",))
    assert isinstance(e.value, _jitify_exception()) and isinstance(e.value, errors.CompileError)
    text = str(e.value)
    assert text.startswith("cupy-rawcode dropped include(s)")
    assert text.index('"never_there.h"') < text.index('identifier "from_missing" is undefined')


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize(
    "src, expected, raised",
    [
        (FAILS, "precision not supported", errors.CompileError),
        (OWN_MISSING, 'cannot open source file "never_there.h"', MissingHeaderError),
    ],
    ids=["compile error", "missing include of the source"],
)
def test_errors_are_jitify_exceptions_too(monkeypatch, route, src, expected, raised):
    with pytest.raises(Exception) as e:
        ROUTES[route](monkeypatch, src, ())
    assert isinstance(e.value, _jitify_exception()) and isinstance(e.value, raised)
    assert isinstance(e.value, errors.CompileError) and expected in str(e.value)


@pytest.mark.parametrize("cls", ["RawKernel", "RawModule"])
@pytest.mark.parametrize(
    "src, raised",
    [(FAILS, errors.CompileError), (USES, MissingHeaderError)],
    ids=["compile error", "missing include in a header"],
)
def test_without_jitify_the_classes_keep_the_plain_error(tree, cls, src, raised):
    root = tree(HEADERS)
    options = (f"-I{root}/inc",)
    obj = (
        cupy_rawcode.RawKernel(src, "k", options=options)
        if cls == "RawKernel"
        else cupy_rawcode.RawModule(code=src, options=options)
    )
    with pytest.raises(raised) as e:
        obj.compile(arch=ARCH)
    assert not isinstance(e.value, _jitify_exception())


JITIFY_OPTIONS = ("-DCUPY_USE_JITIFY", "--pre-include=jitify_preinclude.h")


def test_jitify_compiles_are_keyed_apart_and_preinclude_as_in_cupy():
    """CuPy's Jitify adds -DCUPY_USE_JITIFY and pre-includes jitify_preinclude.h: a different
    key, and the warm index keeps the two apart."""
    src = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'
    plain = cupy_rawcode.RawKernel(src, "k")._build
    jit = cupy_rawcode.RawKernel(src, "k", jitify=True)._build
    assert plain.compile_options == () and jit.compile_options == JITIFY_OPTIONS
    assert cupy_rawcode.cache_key(src, arch=ARCH) != cupy_rawcode.cache_key(
        src, arch=ARCH, options=jit.compile_options
    )
    given = cupy_rawcode.RawKernel(src, "k", options=JITIFY_OPTIONS, jitify=True)
    assert given._build.compile_options == JITIFY_OPTIONS  # not added twice


JITIFY_ONLY = {
    "an explicitly __host__ function": "__host__ float twice(float v) { return 2 * v; }\n"
    'extern "C" __global__ void k(float* x) { x[0] = twice(x[0]); }\n',
    "try and catch": 'extern "C" __global__ void k(float* x) {\n'
    "  try { x[0] = 1.0f; } catch (...) { x[0] = 2.0f; }\n}\n",
    "THRUST_STATIC_ASSERT": "#define CHECK THRUST_STATIC_ASSERT(sizeof(int) == 4)\n"
    'CHECK;\nextern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n',
}


@pytest.mark.parametrize("what", sorted(JITIFY_ONLY))
def test_what_jitify_preincluded_compiles_with_jitify_only(what):
    """CuPy's Jitify pre-included a header defining __host__, try and catch away: code written
    for it compiles with jitify=True, and without it NVRTC's error stays."""
    src = JITIFY_ONLY[what]
    cupy_rawcode.RawKernel(src, "k", jitify=True).compile(arch=ARCH)
    with pytest.raises(errors.CompileError):
        cupy_rawcode.RawKernel(src, "k").compile(arch=ARCH)


@pytest.mark.parametrize("jitify", [True, None])
def test_pickles_keep_the_jitify_flag(jitify):
    k = cupy_rawcode.RawKernel(USES, "k", jitify=jitify)
    m = cupy_rawcode.RawModule(code=USES, jitify=jitify)
    for obj in (k, m):
        again = pickle.loads(pickle.dumps(obj))
        assert again.jitify == jitify and again._build.jitify == bool(jitify)


def test_jitify_refuses_compiled_files_as_cupy_does(tmp_path):
    path = tmp_path / "k.cubin"
    path.write_bytes(b"\x7fELF")
    with pytest.raises(ValueError, match="Jitify does not support precompiled objects"):
        cupy_rawcode.RawModule(path=str(path), jitify=True)


def test_warmup_tasks_carry_the_jitify_flag():
    from cupy_rawcode.parallel import task as tasks

    task = tasks.Task("src", ("-DCUPY_USE_JITIFY",), "sm_90", jitify=True)
    assert tasks.Task.from_json(task.to_json()) == task


def test_warmup_worker_compiles_as_jitify(tree):
    """A warmup worker drops the missing include as the launch would (run in-process here)."""
    from cupy_rawcode.parallel import task as tasks

    root = tree(HEADERS)
    base = tasks.Task(USES, (f"-I{root}/inc", "-DCUPY_USE_JITIFY"), "sm_90", "cubin")
    assert tasks.run_task(base).error.startswith("MissingHeaderCompileError")
    with pytest.warns(jitify_compat.DroppedIncludeWarning):
        done = tasks.run_task(dataclasses.replace(base, jitify=True))
    assert done.error is None and done.key


SPECIALIZED = r"""#include <limits>
struct Fixed { int v; };
namespace std {
template <> class numeric_limits<Fixed> {
 public:
  static constexpr bool is_specialized = true;
  __device__ static constexpr Fixed max() { return Fixed{1000}; }
};
}
extern "C" __global__ void k(int* o) {
  o[0] = std::numeric_limits<Fixed>::max().v + std::numeric_limits<int>::digits;
  o[1] = std::is_same<std::tuple<int>, std::tuple<int>>::value + std::make_pair(1, 2).second;
}
"""


@needs_cupy
@pytest.mark.parametrize("std", [(), ("--std=c++11",)])
def test_install_source_with_cupys_workaround_line_can_specialize(monkeypatch, std):
    """CuPy's jitify=True puts #include <cupy/cuda_workaround.h> first; its using-declaration of
    numeric_limits would forbid the specialization. Our shims answer that line instead, and
    what it gave (tuple, pair, type traits) is still there."""
    src = "#include <cupy/cuda_workaround.h>\n" + SPECIALIZED.replace("#include <limits>\n", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StandardRaisedWarning)  # C++11 is raised to C++17
        code = _install_route(monkeypatch, src, std)
    assert code.kind == "cubin" and code.data


# ---------------------------------------------------------------- backend='nvcc'


@needs_cupy
@pytest.mark.parametrize(
    "make",
    [
        lambda: cupy_rawcode.RawKernel(USES, "k", (), "nvcc"),
        lambda: cupy_rawcode.RawKernel(USES, "k", backend="nvcc", enable_cooperative_groups=True),
        lambda: cupy_rawcode.RawModule(code=USES, backend="nvcc", options=("-DN=1",)),
    ],
    ids=["RawKernel positional", "RawKernel keyword", "RawModule"],
)
def test_nvcc_backend_gives_cupys_own_object(make):
    obj = make()
    assert type(obj) in (cupy.RawKernel, cupy.RawModule) and obj.backend == "nvcc"
    assert obj.code == USES


@needs_cupy
def test_nvcc_backend_object_is_cupys_in_every_attribute():
    ours = cupy_rawcode.RawKernel(USES, "k", ("-DN=1",), "nvcc", enable_cooperative_groups=True)
    theirs = cupy.RawKernel(USES, "k", ("-DN=1",), "nvcc", enable_cooperative_groups=True)
    assert ours.__getstate__() == theirs.__getstate__()


@pytest.mark.parametrize("backend", ["nvrtcc", "hiprtc", ""])
def test_other_backends_are_refused_naming_what_is_accepted(backend):
    for make in (
        lambda: cupy_rawcode.RawKernel(USES, "k", backend=backend),
        lambda: cupy_rawcode.RawModule(code=USES, backend=backend),
    ):
        made = make()  # constructs, as CuPy's does: refused at the first compile
        with pytest.raises(ValueError, match=r"'nvrtc'.*'nvcc'"):
            made.compile(arch="sm_90")


@needs_cupy
def test_nvcc_backend_reaches_cupys_class_when_the_classes_are_swapped(monkeypatch):
    """A user who swapped cupy.RawKernel for ours still gets CuPy's class for nvcc."""
    monkeypatch.setattr(cupy, "RawKernel", cupy_rawcode.RawKernel)
    monkeypatch.setattr(cupy, "RawModule", cupy_rawcode.RawModule)
    k = cupy_rawcode.RawKernel(USES, "k", backend="nvcc")
    m = cupy_rawcode.RawModule(code=USES, backend="nvcc")
    assert type(k).__module__ == type(m).__module__ == "cupy._core.raw"


@pytest.mark.parametrize("jitify", [True, None])
def test_cupy_12_cub_path_is_answered_by_cccls_cub_with_one_warning(jitify):
    """Code written for CuPy <= 12 included CuPy's own CUB copy, gone since CuPy 13."""
    from cupy_rawcode.compiler.relocated import RelocatedIncludeWarning

    src = (
        "#include <cupy/cub/cub/block/block_load.cuh>\n"
        'extern "C" __global__ void k(float* x) {\n'
        "  float v[2]; cub::LoadDirectBlocked(threadIdx.x, x, v); x[0] = v[1];\n}\n"
    )
    with pytest.warns(RelocatedIncludeWarning, match="as <cub/block/block_load.cuh>") as w:
        cupy_rawcode.RawKernel(src, "k", jitify=jitify).compile(arch=ARCH)
    assert len(w) == 1


def test_a_moved_header_missing_at_its_new_place_too_is_named_with_both():
    src = '#include <cupy/cub/cub/no_such.cuh>\nextern "C" __global__ void k() {}\n'
    with pytest.warns(Warning), pytest.raises(MissingHeaderError) as e:
        cupy_rawcode.RawKernel(src, "k").compile(arch=ARCH)
    text = str(e.value)
    assert 'cannot open source file "cub/no_such.cuh"' in text
    assert "included from isys0:cupy/cub/cub/no_such.cuh" in text
