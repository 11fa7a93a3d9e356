"""install()/uninstall(): CuPy's jitify=True compiles are routed to cupy-rawcode, others are not."""

import pytest

cupy = pytest.importorskip("cupy")
import cupy.cuda.compiler as compiler  # noqa: E402

from cupy_rawcode.hook import install as hook  # noqa: E402


@pytest.fixture
def fake_cupy(monkeypatch):
    """Replace CuPy's compile function by a recorder with the same signature, then install."""
    calls = {"cupy": [], "ours": []}
    real = compiler._compile_module_with_cache

    def fake(
        source,
        options=(),
        *,
        arch=None,
        extra_source=None,
        backend="nvrtc",
        enable_cooperative_groups=False,
        name_expressions=None,
        log_stream=None,
        jitify=False,
        to_ltoir=False,
    ):
        calls["cupy"].append(source)
        return "cupy"

    fake.__signature__ = __import__("inspect").signature(real)
    monkeypatch.setattr(compiler, "_compile_module_with_cache", fake)
    monkeypatch.setattr(
        hook,
        "_compile_for_cupy",
        lambda src, opts, arch, names, log: calls["ours"].append((src, opts)) or "ours",
    )
    yield calls
    hook.uninstall()


@pytest.mark.parametrize(
    "kwargs, who",
    [
        ({"jitify": True}, "ours"),
        ({"jitify": True, "name_expressions": ("f<int>",)}, "ours"),
        ({"jitify": False}, "cupy"),
        ({}, "cupy"),
        ({"jitify": True, "backend": "nvcc"}, "cupy"),
        ({"jitify": True, "to_ltoir": True}, "cupy"),
    ],
)
def test_only_jitify_nvrtc_compiles_are_routed(fake_cupy, kwargs, who):
    hook.install()
    assert compiler._compile_module_with_cache("src", ("-DX",), **kwargs) == who
    assert len(fake_cupy[who]) == 1


def test_install_is_idempotent_and_uninstall_restores(fake_cupy):
    before = compiler._compile_module_with_cache
    hook.install()
    once = compiler._compile_module_with_cache
    hook.install()
    assert compiler._compile_module_with_cache is once and hook.installed()
    hook.uninstall()
    assert compiler._compile_module_with_cache is before and not hook.installed()
    hook.uninstall()  # harmless when not installed
    assert compiler._compile_module_with_cache is before


def test_cupy_raw_kernel_path_reaches_the_wrapper(fake_cupy):
    """CuPy's Cython compile_with_cache looks the function up on the module at call time."""
    from cupy.cuda.function import Module

    module = Module()
    hook._compile_for_cupy = lambda src, opts, *a: fake_cupy["ours"].append((src, opts)) or module
    hook.install()
    result = cupy._core.core.compile_with_cache(
        'extern "C" __global__ void f() {}', (), jitify=True
    )
    assert result is module
    src, opts = fake_cupy["ours"][0]
    assert "cupy/cuda_workaround.h" in src and any(o.startswith("--std=") for o in opts)
