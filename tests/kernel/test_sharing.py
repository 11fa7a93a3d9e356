"""Module sharing as CuPy's ``_get_raw_module`` memo does it, without a GPU: every RawKernel and
RawModule of the same inputs shares one loaded module per device (so its ``__device__`` state and
its functions' attributes), compile() keeps what is loaded, and a kernel made again on every call
finds the module without keying or reading the store. The device layer is a fake: the current
device, its compute capability and the module loader (the code itself is compiled by NVRTC)."""

import copy
import io
import pickle
import threading
from types import SimpleNamespace

import pytest

import cupy_rawcode
import cupy_rawcode.kernel
from cupy_rawcode.kernel import building, loading

cupy = pytest.importorskip("cupy")  # the drop-ins ask CuPy for the current device

SRC = (
    "__device__ int state;\n"
    'extern "C" __global__ void set(int v) { state = v; }\n'
    'extern "C" __global__ void get(int* out) { out[0] = state; }\n'
)
WARNS = 'extern "C" __global__ void w(float* x) { int unused = 3; x[0] = 1.0f; }\n'
UNUSED = 'variable "unused" was declared but never referenced'


class FakeModule:
    """What CuPy's Module answers, with the code it was loaded from."""

    def __init__(self, code):
        self.code = code
        self.mapping = dict(code.symbols) if code is not None and code.symbols else None

    def get_function(self, name):
        return SimpleNamespace(module=self, name=name)


@pytest.fixture
def device(monkeypatch):
    """A fake GPU: device ``device.dev`` (of compute capability 90); ``device.loads`` holds
    each module loaded. The process's table of modules starts empty."""
    state = SimpleNamespace(dev=0, loads=[])
    monkeypatch.setattr(loading, "_shared", {}, raising=False)
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: state.dev)
    monkeypatch.setattr(building, "_compute_capability", lambda: 90)
    monkeypatch.setattr(cupy_rawcode.kernel, "_compute_capability", lambda: 90)

    def load(code):
        state.loads.append(code)
        return FakeModule(code)

    def load_file(path):
        state.loads.append(path)
        return FakeModule(None)

    monkeypatch.setattr(loading, "_load_module", load)
    monkeypatch.setattr(loading, "_load_file", load_file)
    return state


def module_of(obj):
    return loading.device_module(obj._build)


def _pickled(make):
    return lambda: pickle.loads(pickle.dumps(make()))


K = cupy_rawcode.RawKernel
M = cupy_rawcode.RawModule
# (first object, second object, whether they share one module: CuPy's memo key decides)
PAIRS = {
    "two kernels, other names": (lambda: K(SRC, "set"), lambda: K(SRC, "get"), True),
    "kernel and module": (lambda: K(SRC, "set"), lambda: M(code=SRC), True),
    "two modules": (lambda: M(code=SRC), lambda: M(code=SRC), True),
    "equal options": (
        lambda: K(SRC, "set", options=("-DX=1",)),
        lambda: K(SRC, "get", options=["-DX=1"]),
        True,
    ),
    "a pickled kernel": (lambda: K(SRC, "set"), _pickled(lambda: K(SRC, "get")), True),
    "a pickled module": (lambda: M(code=SRC), _pickled(lambda: M(code=SRC)), True),
    "other options": (lambda: K(SRC, "set"), lambda: K(SRC, "set", options=("-DX=1",)), False),
    "other source": (lambda: K(SRC, "set"), lambda: K(SRC + "\n", "set"), False),
    "translate_cucomplex": (
        lambda: K(SRC, "set"),
        lambda: K(SRC, "set", translate_cucomplex=True),
        False,
    ),
    "cooperative": (
        lambda: K(SRC, "set"),
        lambda: K(SRC, "set", enable_cooperative_groups=True),
        False,
    ),
    "jitify": (lambda: K(SRC, "set"), lambda: K(SRC, "set", jitify=True), False),
    "name expressions": (
        lambda: M(code=SRC),
        lambda: M(code=SRC, name_expressions=["set"]),
        False,
    ),
}


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_objects_of_the_same_inputs_share_one_module_per_device(case, device):
    first, second, shared = PAIRS[case]
    a, b = first(), second()
    assert (module_of(a) is module_of(b)) == shared
    assert len(device.loads) == (1 if shared else 2)
    device.dev = 1  # another device: a module of its own, shared again
    assert (module_of(a) is module_of(b)) == shared
    assert len(device.loads) == (2 if shared else 4)


def test_copies_and_get_function_kernels_share_the_module(device):
    m = M(code=SRC)
    k = m.get_function("set")
    twin = copy.copy(K(SRC, "get"))
    assert k.kernel.module is twin.kernel.module is module_of(m)
    assert len(device.loads) == 1


def test_compile_keeps_what_is_loaded(device):
    """compile() reloads nothing (CuPy's memo answers it): kernels and globals obtained
    before stay valid, for the module, its kernels and their siblings."""
    m = M(code=SRC)
    set_, get = m.get_function("set"), m.get_function("get")
    mod, fn = module_of(m), set_.kernel
    other = K(SRC, "get")
    other_fn = other.kernel
    m.compile()
    set_.compile()
    other.compile()
    assert module_of(m) is mod and set_.kernel is fn and other.kernel is other_fn
    assert get.kernel.module is mod
    assert len(device.loads) == 1


def test_compile_with_a_log_stream_replays_the_log_without_reloading(device):
    k = K(WARNS, "w")
    first = io.StringIO()
    k.compile(log_stream=first)
    assert UNUSED in first.getvalue()
    for obj in (k, K(WARNS, "w"), M(code=WARNS)):  # the same object, and new ones
        log = io.StringIO()
        obj.compile(log_stream=log)
        assert log.getvalue() == first.getvalue()
    assert len(device.loads) == 1


def test_a_kernel_made_on_every_call_neither_keys_nor_reads_the_store(device, monkeypatch):
    """The common ``RawKernel(code, name)(...)`` inside a hot function: once the module is
    loaded, a new object's first launch finds it (no source read, index id or store read; the
    stamps of the headers its index entry holds are checked: none here)."""
    assert K(SRC, "set").kernel is not None
    calls = []
    for where, name in (
        (building._Build, "source"),
        (building._Build, "device_code"),
        (building.keys, "index_id"),
        (building.keys, "index_lookup"),
        (building, "default_store"),
    ):
        real = getattr(where, name)
        monkeypatch.setattr(
            where, name, lambda *a, _n=name, _r=real, **k: (calls.append(_n), _r(*a, **k))[1]
        )
    for _ in range(3):
        assert K(SRC, "set").kernel.module is K(SRC, "get").kernel.module
    assert calls == [] and len(device.loads) == 1


# what CuPy's memo would answer stale, and ours does not: a new object after a change


def test_a_header_edited_since_gives_a_new_object_a_new_module(device, tmp_path):
    """An edit in a header between two objects of the same source: the second compiles and
    loads the new code (CuPy's memo serves the first module); the first keeps its module."""
    (tmp_path / "v.h").write_text("#define V 1\n")
    src = '#include "v.h"\nextern "C" __global__ void k(int* o) { o[0] = V; }\n'
    opts = (f"-I{tmp_path}",)
    first = K(src, "k", opts)
    a = first.kernel.module
    assert K(src, "k", opts).kernel.module is a  # nothing changed: shared
    (tmp_path / "v.h").write_text("#define V 2 /* edited */\n")
    second = K(src, "k", opts)
    assert second.kernel.module is not a and len(device.loads) == 2
    assert second.kernel.module.code.data != a.code.data
    assert first.kernel.module is a  # an object keeps the module it launches from


def test_a_cu_path_is_shared_by_file_and_text(device, tmp_path, monkeypatch):
    """RawModule(path="k.cu"): a relative path in another directory, or the file edited, is
    another module (the path string alone answered with the first file's)."""
    for d, v in (("a", 1), ("b", 2)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "k.cu").write_text(
            f'extern "C" __global__ void k(int* o) {{ o[0] = {v}; }}\n'
        )
    monkeypatch.chdir(tmp_path / "a")
    a = module_of(M(path="k.cu"))
    assert module_of(M(path="k.cu")) is a
    monkeypatch.chdir(tmp_path / "b")
    b = module_of(M(path="k.cu"))
    assert b is not a and b.code.data != a.code.data
    (tmp_path / "b" / "k.cu").write_text('extern "C" __global__ void k(int* o) { o[0] = 3; }\n')
    assert module_of(M(path="k.cu")) is not b


def test_a_relative_include_directory_after_a_chdir_is_another_module(
    device, tmp_path, monkeypatch
):
    src = '#include "v.h"\nextern "C" __global__ void k(int* o) { o[0] = V; }\n'
    for d, v in (("a", 1), ("b", 2)):
        (tmp_path / d / "inc").mkdir(parents=True)
        (tmp_path / d / "inc" / "v.h").write_text(f"#define V {v}\n")
    monkeypatch.chdir(tmp_path / "a")
    a = K(src, "k", ("-Iinc",)).kernel.module
    monkeypatch.chdir(tmp_path / "b")
    b = K(src, "k", ("-Iinc",)).kernel.module
    assert b is not a and b.code.data != a.code.data


def test_a_kernel_that_found_the_module_pickles_its_bytes(device, monkeypatch):
    """A second object launched from the module another loaded still carries the compiled
    bytes in its pickle: unpickled, it loads without compiling."""
    assert K(SRC, "set").kernel is not None
    again = K(SRC, "get")
    assert again.kernel is not None
    back = pickle.loads(pickle.dumps(again))
    assert back._build.compiled and back._build.compiled == again._build.compiled


def test_distinct_objects_racing_on_a_first_launch_load_once(device, compiles):
    src = SRC + "// race\n"
    barrier, got, errors = threading.Barrier(16), [], []

    def launch(i):
        try:
            k = K(src, ("set", "get")[i % 2])
            barrier.wait()
            got.append(k.kernel.module)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len({id(m) for m in got}) == 1
    assert len(device.loads) == 1 and len(compiles) == 1


def test_bad_input_fails_at_launch_before_anything_loads(device, compiles):
    k = K(SRC, "set", options=("-D",))  # constructs, as CuPy's does
    with pytest.raises(ValueError, match="'-D' needs a value"):
        _ = k.kernel
    with pytest.raises(ValueError, match="backend='nvrt'"):
        M(code=SRC, backend="nvrt").get_function("set")
    with pytest.raises(ValueError, match="backend='nvrt'"):
        _ = M(code=SRC, backend="nvrt").module
    assert device.loads == [] and compiles == []


def test_a_compiled_file_ignores_options_and_is_nvccs_as_in_cupy(device, tmp_path):
    path = str(tmp_path / "k.cubin")
    m = M(path=path, options=("-DX=1",), translate_cucomplex=True)
    k = m.get_function("set")
    got = (m.options, m.translate_cucomplex, m.backend, k.backend, k.options, k.file_path)
    assert got == ((), False, "nvcc", "nvcc", (), path)
    assert device.loads == [path]
    assert module_of(M(path=path)) is module_of(m)  # shared, as CuPy's memo shares it
    back = pickle.loads(pickle.dumps(k))
    assert (back.backend, back.kernel.module) == ("nvcc", module_of(m))
    for compiled in (m, k):  # compiled already: not read as a source
        with pytest.raises(ValueError, match="is already compiled"):
            compiled.compile(arch="sm_90")
    if cupy is not None:
        theirs = cupy.RawModule(path=path, options=("-DX=1",), translate_cucomplex=True)
        assert (theirs.options, theirs.backend) == ((), "nvcc")


def test_a_cu_path_keeps_its_options_and_nvrtc():
    m = M(path="k.cu", options=("-DX=1",))
    assert (m.options, m.backend) == (("-DX=1",), "nvrtc")
