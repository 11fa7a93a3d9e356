"""On the GPU: the same kernels and calls through CuPy's own RawKernel/RawModule and through
cupy-rawcode, compared result for result, exception for exception and log for log (issue 16).

Every test runs CuPy without Jitify as the reference, then one of our two routes (the ``route``
fixture): "swap" (``cupy_rawcode.RawKernel``/``RawModule``) or "install"
(``cupy_rawcode.install()``, then ``cupy.RawKernel/RawModule(..., jitify=True)``). Under
"install" CuPy's own Jitify is made to fail at once, so a compile that install() did not route
fails in a second instead of running for many minutes. Results are checked against NumPy on
random inputs; messages are compared by fragment and by NVRTC's log lines with file names taken
out (CuPy names its source after a temporary file, we after the kernel).
"""

import io
import json
import logging
import pickle
import re
import subprocess
import sys
import uuid

import numpy as np
import pytest
from conftest import ROOT, corpus

import cupy_rawcode
from cupy_rawcode.hook import install as hook
from cupy_rawcode.orchestrator import compiling as program

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.filterwarnings("ignore:jitify=True is deprecated:DeprecationWarning"),
]

N = 1000
RNG = np.random.default_rng(16)


def compiler():
    import cupy.cuda.compiler

    return cupy.cuda.compiler


def _refuse_cupy_jitify(*args, **kwargs):
    raise AssertionError("CuPy's own Jitify ran: install() did not route this compile")


@pytest.fixture(params=["swap", "install"])
def route(request, monkeypatch):
    """Our route under test; "install" holds install() for the test and always undoes it."""
    if request.param == "swap":
        yield "swap"
        return
    monkeypatch.setattr(compiler(), "_jitify_prep", _refuse_cupy_jitify)
    cupy_rawcode.install()
    try:
        yield "install"
    finally:
        cupy_rawcode.uninstall()
    assert not hook.installed()


def _namespace(route, kw):
    """cupy_rawcode for "swap"; cupy for "cupy", and for "install" with jitify=True."""
    import cupy

    if route == "install":
        assert hook.installed()
        kw["jitify"] = True
    return cupy_rawcode if route == "swap" else cupy


def kernel(route, code, name, options=(), **kw):
    """A RawKernel through CuPy ("cupy"), our class ("swap") or CuPy's jitify=True ("install")."""
    return _namespace(route, kw).RawKernel(code, name, tuple(options), **kw)


def module(route, code, options=(), **kw):
    """A RawModule through the same three routes as kernel()."""
    return _namespace(route, kw).RawModule(code=code, options=tuple(options), **kw)


def elementwise(expr: str, prelude: str = "") -> str:
    """An extern "C" kernel k(x, y, n) computing y[i] = expr."""
    return (
        prelude + '\nextern "C" __global__ void k(const float* x, float* y, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"  if (i < n) y[i] = {expr};\n}}\n"
    )


def launch(k, x):
    """Run k(x, y, n) over x with 128-thread blocks; y on the host."""
    import cupy

    y = cupy.zeros(len(x), dtype=x.dtype)
    k(((len(x) + 127) // 128,), (128,), (cupy.asarray(x), y, np.int32(len(x))))
    return y.get()


def normal(n):
    return RNG.standard_normal(n).astype(np.float32)


def with_subnormals(n):
    """Half normal values, half float32 subnormals (|v| < 1.18e-38), shuffled."""
    tiny = (RNG.uniform(-1, 1, n) * 1e-39).astype(np.float32)
    return np.where(RNG.random(n) < 0.5, normal(n), tiny)


TINY = np.finfo(np.float32).tiny

# (prelude, expression, inputs, NumPy's answer, atol): each needs one of CuPy's default options
DEVICE_CODE = {
    "unannotated_helper": (
        "float twice(float v) { return 2 * v; }",
        "twice(x[i]) + 1.0f",
        normal,
        lambda x: 2 * x + 1,
        1e-6,
    ),
    "functor": (
        "struct Affine {\n  float a, b;\n  Affine(float a_, float b_) : a(a_), b(b_) {}\n"
        "  float operator()(float v) const { return a * v + b; }\n};",
        "Affine(3.0f, -1.0f)(x[i])",
        normal,
        lambda x: 3 * x - 1,
        1e-6,
    ),
    "lambda": (
        "",
        "[](float v) { return v * v - 0.5f; }(x[i])",
        normal,
        lambda x: x * x - 0.5,
        1e-6,
    ),
    "cupy_complex_cuh": (
        "#include <cupy/complex.cuh>",
        "abs(complex<float>(x[i], 1.0f) * complex<float>(x[i], 1.0f))",
        normal,
        lambda x: x * x + 1,
        1e-6,
    ),  # |(x + i)^2| = x^2 + 1
    # -ftz=true: a subnormal input is flushed, so x * 1.5 is exactly zero; atol 0 tells 0 apart
    "ftz": (
        "",
        "x[i] * 1.5f",
        with_subnormals,
        lambda x: np.where(np.abs(x) < TINY, np.float32(0), x * np.float32(1.5)),
        0.0,
    ),
}


@pytest.mark.parametrize("case", list(DEVICE_CODE))
def test_cupys_default_options_apply(route, case):
    prelude, expr, inputs, want, atol = DEVICE_CODE[case]
    code, x = elementwise(expr, prelude), inputs(N)
    ref, got = launch(kernel("cupy", code, "k"), x), launch(kernel(route, code, "k"), x)
    np.testing.assert_allclose(ref, want(x), rtol=1e-5, atol=atol)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=atol)


DP = (
    'extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }\n'
    'extern "C" __global__ void parent(float* x) { if (threadIdx.x == 0) child<<<1, 32>>>(x); }\n'
)

# (code, kernel name, options, fragment of NVRTC's message, whether NVRTC compiles the same
# source for CuPy and us, so that CuPy's log lines must all be in our message)
FAILURES = {
    "syntax": (
        'extern "C" __global__ void k(float* x) { x[0] = ; }',
        "k",
        (),
        "error: expected an expression",
        True,
    ),
    "error_directive": (
        '#error boom here\nextern "C" __global__ void k() {}',
        "k",
        (),
        "#error directive: boom here",
        True,
    ),
    "missing_header": (
        '#include "nothere.h"\nextern "C" __global__ void k() {}',
        "k",
        (),
        'cannot open source file "nothere.h"',
        False,
    ),
    "bad_option": (
        'extern "C" __global__ void k() {}',
        "k",
        ("--no-such-flag",),
        "unrecognized option --no-such-flag",
        False,
    ),
    "device_launch_without_dc": (
        DP,
        "parent",
        (),
        "device-side kernel launch could not be processed",
        True,
    ),
}

_DUMP = re.compile(
    r"NVRTC compilation error: (.*?)\n-----\nName: ([^\n]*)\nOptions: ([^\n]*)\n"
    r"CUDA source:\n(.*)-----\n\Z",
    re.S,
)


def nvrtc_lines(log: str) -> list[str]:
    """NVRTC's log lines without file names and line numbers (CuPy's file is a temporary path,
    ours is named after the kernel; under install() CuPy prepends one line to the source)."""
    text = re.sub(r"\S+\(\d+\): ", "<source>: ", log)
    text = re.sub(r'compilation of "[^"]*"', "compilation of <source>", text)
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def dumped(e) -> str:
    f = io.StringIO()
    e.dump(f)
    return f.getvalue()


def cupy_dump(message: str, source: str, name: str, options: str) -> str:
    """What CuPy's own CompileException.dump writes for these fields: the format ours must keep."""
    return dumped(compiler().CompileException(message, source, name, (options,)))


@pytest.mark.parametrize("case", list(FAILURES))
def test_compile_failures_raise_log_and_dump_as_cupy_does(route, case, monkeypatch, capfd):
    code, name, options, fragment, same_source = FAILURES[case]
    c = compiler()
    monkeypatch.setenv("CUPY_DUMP_CUDA_SOURCE_ON_ERROR", "1")
    with pytest.raises(c.CompileException) as ref:
        kernel("cupy", code, name, options).compile()
    ref_err = capfd.readouterr().err
    with pytest.raises(c.CompileException) as got:
        kernel(route, code, name, options).compile()
    err, e = capfd.readouterr().err, got.value
    assert fragment in str(ref.value)
    assert fragment in str(e), str(e)
    if route == "install":
        assert isinstance(e, c.JitifyException)
    if same_source:
        ours = "\n".join(nvrtc_lines(str(e)))
        missing = [line for line in nvrtc_lines(str(ref.value)) if line not in ours]
        assert not missing, f"CuPy's log lines missing from ours: {missing}\nours: {e}"
    assert dumped(ref.value) in ref_err  # the reference: CuPy dumps to stderr what .dump writes
    dump = dumped(e)
    assert dump in err, f"CUPY_DUMP_CUDA_SOURCE_ON_ERROR=1 did not dump to stderr:\n{err}"
    parts = _DUMP.match(dump)
    assert parts is not None, f"not CuPy's dump format:\n{dump}"
    message, dump_name, dump_options, source = parts.groups()
    assert message == str(e) and dump_name.strip()
    assert all(o in dump_options.split() for o in options)
    if route == "swap":
        assert dump == cupy_dump(str(e), code, dump_name, dump_options)
    else:  # CuPy's jitify=True path puts its workaround header first: the user's code ends it
        code_lines = [line.rstrip() for line in code.split("\n")]
        lines = [re.sub(r"^\d+ ", "", line) for line in source.split("\n")[:-1]]
        assert lines[-len(code_lines) :] == code_lines


LOG_CODE = (
    "#include <cuda_fp16.h>\n"
    'extern "C" __global__ void k(float* x) { int unused = 3; x[threadIdx.x] = 1.0f; }\n'
)
UNUSED = 'warning #177-D: variable "unused" was declared but never referenced'


def fresh(code: str) -> str:
    """A source no cache has seen: CuPy writes its log only when it compiles."""
    return code + f"// {uuid.uuid4().hex}\n"


@pytest.mark.parametrize("what", ["RawKernel", "RawModule"])
def test_log_stream_gets_nvrtcs_warnings(route, what, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "1")  # our PCH on: its messages must still stay out
    code, logs = fresh(LOG_CODE), {}
    for r in ("cupy", route):
        made = kernel(r, code, "k") if what == "RawKernel" else module(r, code)
        logs[r] = io.StringIO()
        made.compile(log_stream=logs[r])
    assert UNUSED in logs["cupy"].getvalue()
    assert UNUSED in logs[route].getvalue(), logs[route].getvalue()
    assert "precompiled header" not in logs[route].getvalue().lower()


_LOG_CHILD = r"""
import io, json, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import cupy, cupy.cuda.compiler
import cupy_rawcode
from cupy_rawcode.orchestrator import compiling as program
calls = []
real = program._nvrtc_compile
program._nvrtc_compile = lambda *a: (calls.append(1), real(*a))[1]
code, route = open(sys.argv[1]).read(), sys.argv[2]
if route == "install":
    def refuse(*a, **k):
        raise AssertionError("CuPy's own Jitify ran")
    cupy.cuda.compiler._jitify_prep = refuse
    cupy_rawcode.install()
    k = cupy.RawKernel(code, "k", jitify=True)
else:
    k = cupy_rawcode.RawKernel(code, "k")
log = io.StringIO()
k.compile(log_stream=log)
print(json.dumps({"compiles": len(calls), "log": log.getvalue()}))
"""


@pytest.mark.parametrize("where", ["same_process", "new_process"])
def test_our_log_is_replayed_on_a_cache_hit(route, where, monkeypatch, tmp_path):
    """CuPy writes nothing on a hit; ours replays the compile's log, from the cache directory
    that conftest put in the environment (so a child process shares it)."""
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "1")
    code, first = fresh(LOG_CODE), io.StringIO()
    kernel(route, code, "k").compile(log_stream=first)
    assert UNUSED in first.getvalue()
    if where == "same_process":
        calls, real = [], program._nvrtc_compile
        monkeypatch.setattr(program, "_nvrtc_compile", lambda *a: (calls.append(1), real(*a))[1])
        again = io.StringIO()
        kernel(route, code, "k").compile(log_stream=again)  # a new object: no in-object state
        compiles, log = len(calls), again.getvalue()
    else:
        src = tmp_path / "k.cu"
        src.write_text(code)
        p = subprocess.run(
            [sys.executable, "-c", _LOG_CHILD, str(src), route],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads(p.stdout.strip().splitlines()[-1])
        compiles, log = out["compiles"], out["log"]
    assert compiles == 0, "expected a cache hit"
    assert UNUSED in log, log
    assert "precompiled header" not in log.lower()


@pytest.mark.parametrize("option", ["-dc", "-rdc=true"])
def test_dynamic_parallelism_with_relocatable_device_code(route, option):
    import cupy

    x = normal(32)
    got = {}
    for r in ("cupy", route):
        xs = cupy.asarray(x)
        kernel(r, DP, "parent", (option,))((1,), (32,), (xs,))
        got[r] = xs.get()
    np.testing.assert_array_equal(got["cupy"], 2 * x)
    np.testing.assert_array_equal(got[route], got["cupy"])


RESOURCES = r"""
__constant__ float coef[16];
extern "C" __global__ void k(const float* x, float* y, int n) {
  __shared__ float tile[256];
  float buf[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int j = 0; j < 32; ++j) buf[j] = v * coef[j % 16] + j;
  tile[threadIdx.x] = buf[(unsigned)(fabsf(v) * 7.0f) % 32];
  __syncthreads();
  if (i < n) y[i] = tile[(threadIdx.x + 1) % 256];
}
"""
CUB = r"""
#include <cub/block/block_reduce.cuh>
__constant__ float bias[8];
extern "C" __global__ void k(const float* x, float* y, int n) {
  using BR = cub::BlockReduce<float, 128>;
  __shared__ typename BR::TempStorage tmp;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = BR(tmp).Sum(i < n ? x[i] : 0.0f);
  if (threadIdx.x == 0) y[blockIdx.x] = s + bias[blockIdx.x % 8];
}
"""
USER_CONST_BYTES = {"no_headers": 16 * 4, "cub": 8 * 4}
EXACT = (
    "max_threads_per_block",
    "shared_size_bytes",
    "local_size_bytes",
    "ptx_version",
    "binary_version",
    "cache_mode_ca",
    "max_dynamic_shared_size_bytes",
    "preferred_shared_memory_carveout",
)


@pytest.mark.parametrize("case", ["no_headers", "cub"])
def test_attributes_equal_cupys(route, case, monkeypatch):
    # CuPy's bundled CCCL for us too, so both compile the same headers (install() gets CuPy's
    # -I list anyway); the cuda root (cuda_fp16.h, ...) from the wheels or the toolkit
    monkeypatch.setenv("CUPY_RAWCODE_HEADER_SOURCES", "cupy,wheel,toolkit")
    code = RESOURCES if case == "no_headers" else CUB
    # CuPy's jitify=True path compiles its workaround header first: the reference compiles the
    # same source, so that both sides compile what NVRTC receives through install()
    ref_code = ("#include <cupy/cuda_workaround.h>\n" + code) if route == "install" else code
    ref, got = kernel("cupy", ref_code, "k").attributes, kernel(route, code, "k").attributes
    assert ref["shared_size_bytes"] > 0 and ref["const_size_bytes"] > 0  # never 0 == 0
    assert {a: got[a] for a in EXACT} == {a: ref[a] for a in EXACT}
    if route == "swap" and case == "no_headers":  # no header: NVRTC makes our cubin as CuPy's
        assert (got["num_regs"], got["const_size_bytes"]) == (
            ref["num_regs"],
            ref["const_size_bytes"],
        )
    else:
        # With headers our cubin is linked by nvJitLink from stripped PTX (install() adds CuPy's
        # workaround header): nvJitLink's ptxas may be another 13.x release than NVRTC's own,
        # which moves register allocation by a few registers; stripping only ever removes
        # library constants, never the user's.
        assert abs(got["num_regs"] - ref["num_regs"]) <= 4, (got, ref)
        assert USER_CONST_BYTES[case] <= got["const_size_bytes"] <= ref["const_size_bytes"]


REVERSE = r"""
extern "C" __global__ void k(const float* x, float* y, int n) {
  extern __shared__ float buf[];
  for (int j = threadIdx.x; j < n; j += blockDim.x) buf[j] = x[j];
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) y[j] = buf[n - 1 - j];
}
"""


def test_max_dynamic_shared_size_bytes_is_settable(route):
    import cupy

    n = 16384  # 64 KiB of floats: more than the 48 KiB a launch gets without the attribute
    x = normal(n)
    for r in ("cupy", route):
        k = kernel(r, REVERSE, "k")
        k.max_dynamic_shared_size_bytes = n * 4
        assert k.max_dynamic_shared_size_bytes == n * 4
        y = cupy.zeros(n, dtype=cupy.float32)
        k((1,), (256,), (cupy.asarray(x), y, np.int32(n)), shared_mem=n * 4)
        np.testing.assert_array_equal(y.get(), x[::-1], err_msg=r)


def test_get_function_of_a_missing_name_raises_cupys_driver_error(route):
    from cupy_backends.cuda.api.driver import CUDADriverError

    code, x, errors = elementwise("x[i] - 1.0f"), normal(N), {}
    for r in ("cupy", route):
        m = module(r, code)
        np.testing.assert_allclose(launch(m.get_function("k"), x), x - 1, rtol=1e-6)
        with pytest.raises(CUDADriverError) as info:
            m.get_function("nope")
        errors[r] = info.value
    assert "named symbol not found" in str(errors["cupy"])
    assert (type(errors[route]), str(errors[route])) == (type(errors["cupy"]), str(errors["cupy"]))


TEMPLATE = r"""
template <typename T> __global__ void f(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * (T)3 + (T)0.25;
}
"""


def test_name_expressions_give_cupys_kernels(route):
    names = ["f<float>", "f<double>"]
    mods = {r: module(r, TEMPLATE, name_expressions=names) for r in ("cupy", route)}
    for ne, dtype in zip(names, (np.float32, np.float64), strict=True):
        x = RNG.standard_normal(N).astype(dtype)
        ks = {r: m.get_function(ne) for r, m in mods.items()}
        assert ks[route].name == ks["cupy"].name  # NVRTC's lowered name
        ref, got = launch(ks["cupy"], x), launch(ks[route], x)
        np.testing.assert_allclose(ref, 3 * x + 0.25, rtol=1e-6, atol=1e-6, err_msg=ne)
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6, err_msg=ne)


CUCOMPLEX = r"""
#include <cuComplex.h>
extern "C" __global__ void mul(const cuFloatComplex* a, const cuFloatComplex* b,
                               cuFloatComplex* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = cuCmulf(a[i], b[i]);
}
"""


def test_translate_cucomplex_matches_cupy(route):
    import cupy

    a, b = (
        (RNG.standard_normal(N) + 1j * RNG.standard_normal(N)).astype(np.complex64)
        for _ in range(2)
    )
    out = {}
    for r in ("cupy", route):
        c = cupy.zeros(N, dtype=cupy.complex64)
        k = kernel(r, CUCOMPLEX, "mul", translate_cucomplex=True)
        k(((N + 127) // 128,), (128,), (cupy.asarray(a), cupy.asarray(b), c, np.int32(N)))
        out[r] = c.get()
    # the real part a.re * b.re - a.im * b.im cancels: an absolute bound, a few float32 ulps
    # of products of standard normals (a wrong translation is off by O(1))
    np.testing.assert_allclose(out["cupy"], a.astype(np.complex128) * b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[route], out["cupy"], rtol=1e-6, atol=1e-5)


TABLE = elementwise("x[i] * table[i % 8]", "__constant__ float table[8];")


def test_constant_memory_set_through_get_global(route):
    import cupy

    table, x, out = normal(8), normal(N), {}
    for r in ("cupy", route):
        m = module(r, TABLE)
        cupy.ndarray((8,), cupy.float32, memptr=m.get_global("table")).set(table)
        out[r] = launch(m.get_function("k"), x)
    np.testing.assert_array_equal(out["cupy"], x * np.resize(table, N))
    np.testing.assert_array_equal(out[route], out["cupy"])


_PICKLE_CHILD = r"""
import pickle, sys
import numpy as np, cupy
k = pickle.load(open(sys.argv[1], "rb"))
x = np.load(sys.argv[2])
y = cupy.zeros(len(x), dtype=x.dtype)
k(((len(x) + 127) // 128,), (128,), (cupy.asarray(x), y, np.int32(len(x))))
np.save(sys.argv[3], y.get())
"""


def pickle_case(route, entry):
    """A plain RawKernel ("k") or a name expression's kernel from a RawModule."""
    if entry == "k":
        return kernel(route, elementwise("2.0f * x[i] + 1.0f"), "k")
    return module(route, TEMPLATE, name_expressions=[entry]).get_function(entry)


@pytest.mark.parametrize("entry", ["k", "f<double>"])
def test_pickled_kernel_launches_in_a_new_process(entry, tmp_path):
    """CuPy 14.2's RawKernel does not pickle here; its in-process launch is the reference."""
    x = normal(N) if entry == "k" else RNG.standard_normal(N)
    ref = launch(pickle_case("cupy", entry), x)
    ours = pickle_case("swap", entry)
    launch(ours, x)  # compiled and loaded here, then pickled
    paths = [tmp_path / name for name in ("k.pkl", "x.npy", "y.npy")]
    paths[0].write_bytes(pickle.dumps(ours))
    np.save(paths[1], x)
    p = subprocess.run(
        [sys.executable, "-c", _PICKLE_CHILD, *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    want = 2 * x + 1 if entry == "k" else 3 * x + 0.25
    np.testing.assert_allclose(ref, want, rtol=1e-6, atol=1e-6)  # the GPU may fuse to an FMA
    np.testing.assert_allclose(np.load(paths[2]), ref, rtol=1e-6, atol=1e-6)


def _block_sums(x, size=128):
    return np.concatenate([x, np.zeros((-len(x)) % size, x.dtype)]).reshape(-1, size).sum(axis=1)


def test_cub_with_type_traits_compiles_through_us_not_through_plain_cupy(route):
    import cupy

    code = (
        "#include <type_traits>\n"
        + corpus("block_reduce.cu")
        + 'static_assert(std::is_same<float, float>::value, "");\n'
    )
    with pytest.raises(compiler().CompileException, match='cannot open source file "type_traits"'):
        kernel("cupy", code, "kern").compile()
    x = normal(N)
    y = cupy.zeros((N + 127) // 128, dtype=cupy.float32)
    kernel(route, code, "kern")((len(y),), (128,), (cupy.asarray(x), y, np.int32(N)))
    np.testing.assert_allclose(y.get(), _block_sums(x), rtol=1e-5, atol=1e-4)


def test_an_unused_missing_header_one_level_down(route, tree, caplog, recwarn):
    """Jitify's leniency, kept under install() only: one warning names the header, the kernel
    compiles and runs. CuPy and the drop-in class fail on it as NVRTC does."""
    inc = tree(
        {
            "outer.h": '#include "never_there.h"\n'
            "__device__ inline float outer_scale() { return 3.0f; }\n"
        }
    )
    code, options = elementwise("outer_scale() * x[i]", '#include "outer.h"'), ("-I" + str(inc),)
    missing = re.escape('cannot open source file "never_there.h"')
    with pytest.raises(compiler().CompileException, match=missing):
        kernel("cupy", code, "k", options).compile()
    if route == "swap":
        with pytest.raises(compiler().CompileException, match=missing) as info:
            kernel("swap", code, "k", options).compile()
        assert "outer.h" in str(info.value)  # the include chain
        return
    caplog.set_level(logging.WARNING, logger="cupy_rawcode")
    x = normal(N)
    np.testing.assert_allclose(launch(kernel("install", code, "k", options), x), 3 * x, rtol=1e-6)
    logged = [r.getMessage() for r in caplog.records if "never_there.h" in r.getMessage()]
    warned = [str(w.message) for w in recwarn if "never_there.h" in str(w.message)]
    assert len(logged) + len(warned) == 1, (logged, warned)
