"""warmup() and its worker-process pool (pool.py) without a GPU: later compiles are hits, in this
process and a new one; failures are reported (and cached, as any compile error is); a background
warmup and a racing first compile share one compile; workers are counted, checked, and end with
the program."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import CORPUS, ROOT

import cupy_rawcode
from cupy_rawcode.ground import config
from cupy_rawcode.kernel import building
from cupy_rawcode.parallel import sizing
from cupy_rawcode.parallel.precompile import Summary
from cupy_rawcode.store import layout

ARCH = "sm_80"


def tiny(i: int) -> str:
    return f'extern "C" __global__ void k{i}(float* x) {{ x[threadIdx.x] *= {i + 2}.0f; }}\n'


BAD = 'extern "C" __global__ void bad(float* x) { x[0] = not_declared_anywhere; }\n'


def entries() -> list[str]:
    root = layout.cache_dir() / "entries"
    return sorted(p.name for p in root.glob("*/*")) if root.is_dir() else []


def labels(items) -> list[str]:
    return sorted(it.label for it in items)


def test_four_kernels_two_workers_are_hits_here_and_in_a_new_process(compiles):
    ks = [cupy_rawcode.RawKernel(tiny(i), f"k{i}") for i in range(4)]
    s = cupy_rawcode.warmup(*ks, arch=ARCH, workers=2)
    assert isinstance(s, Summary) and s.ok and s.workers == 2
    assert labels(s.compiled) == ["k0", "k1", "k2", "k3"] and s.cached == []
    assert compiles == []  # the workers compiled, not this process
    assert len(entries()) == 4
    for k in ks:
        k.compile(arch=ARCH)
    assert compiles == []  # every compile here was a cache hit
    script = textwrap.dedent(f"""
        import io, logging, cupy_rawcode
        from cupy_rawcode.orchestrator import compiling as program
        program._nvrtc_compile = lambda *a: (_ for _ in ()).throw(AssertionError("compiled"))
        log = io.StringIO()
        logging.basicConfig(stream=log, level=logging.INFO, format="%(message)s")
        for i in range(4):
            src = 'extern "C" __global__ void k%d(float* x) {{ x[threadIdx.x] *= %d.0f; }}\\n' % (i, i + 2)
            cupy_rawcode.RawKernel(src, "k%d" % i).compile(arch="{ARCH}")
        print("\\n".join(line.split()[1] for line in log.getvalue().splitlines()))
    """)
    p = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["hit"] * 4
    again = cupy_rawcode.warmup(*ks, arch=ARCH, workers=2)
    assert labels(again.cached) == ["k0", "k1", "k2", "k3"] and again.workers == 0


def test_a_failing_kernel_is_reported_and_the_others_land(compiles):
    good = [cupy_rawcode.RawKernel(tiny(i), f"k{i}") for i in range(3)]
    bad = cupy_rawcode.RawKernel(BAD, "bad")
    s = cupy_rawcode.warmup(good[0], bad, *good[1:], arch=ARCH, workers=2)
    assert not s.ok
    assert labels(s.compiled) == ["k0", "k1", "k2"]
    assert [it.label for it in s.failed] == ["bad"] and s.failed[0].kernel is bad
    assert "CompileError" in s.failed[0].error and "not_declared_anywhere" in s.failed[0].error
    assert "bad (sm_80)" in str(s) and "1 failed" in str(s)
    assert len(entries()) == 4  # the failure is cached too (test_cached_failures.py)
    with pytest.raises(cupy_rawcode.CompileError, match="not_declared_anywhere"):
        bad.compile(arch=ARCH)  # raises what it raises alone, from the cache
    assert compiles == []


@pytest.mark.parametrize("options", [("-O3", 3), None, ("-std=c++99",)])
def test_options_construction_took_fail_that_kernel_alone(compiles, options):
    """Construction takes what CuPy's takes (options checked at the first compile): warmup
    reports such a kernel failed, with the check's words, and compiles the others."""
    good = cupy_rawcode.RawKernel(tiny(7), "k7")
    bad = cupy_rawcode.RawKernel(tiny(8), "k8", options)
    s = cupy_rawcode.warmup(good, bad, arch=ARCH, workers=1)
    assert labels(s.compiled) == ["k7"] and [it.kernel for it in s.failed] == [bad]


def test_background_warmup_and_a_racing_compile_compile_once(compiles):
    k = cupy_rawcode.RawKernel(tiny(7), "k7")
    handle = cupy_rawcode.warmup(k, arch=ARCH, workers=1, background=True)
    assert not handle.done()  # a worker process is still starting
    k.compile(arch=ARCH)  # waits for the worker's compile, then hits
    s = handle.wait()
    assert handle.done()
    assert labels(s.compiled) == ["k7"]
    assert compiles == []
    assert len(entries()) == 1
    assert building.pending == {}


def test_background_failure_then_the_launch_raises_as_alone(compiles):
    bad = cupy_rawcode.RawKernel(BAD, "bad")
    handle = cupy_rawcode.warmup(bad, arch=ARCH, workers=1, background=True)
    with pytest.raises(cupy_rawcode.CompileError, match="not_declared_anywhere"):
        bad.compile(arch=ARCH)
    assert [it.label for it in handle.wait().failed] == ["bad"]
    assert compiles == []  # the worker's failure, cached, raised here without compiling


def test_tuples_modules_and_what_is_already_compiled(compiles, tmp_path):
    module = cupy_rawcode.RawModule(
        code="template <int N> __global__ void f(float* x) { x[threadIdx.x] *= N; }\n",
        name_expressions=["f<3>"],
    )
    k = cupy_rawcode.RawKernel(tiny(1), "k1")
    k.compile(arch=ARCH)  # compiled in this process: nothing to do
    compiles.clear()
    cubin = tmp_path / "x.cubin"
    cubin.write_bytes(b"\0")
    s = cupy_rawcode.warmup(
        k,
        module,
        (tiny(2), ("-DX=1",)),
        (tiny(3),),
        cupy_rawcode.RawModule(path=str(cubin)),
        arch=ARCH,
        workers=2,
    )
    assert labels(s.compiled) == ["RawModule #1", "kernels[2]", "kernels[3]"]
    assert labels(s.cached) == ["RawModule(%s)" % cubin, "k1"]
    module.compile(arch=ARCH)
    assert compiles == []


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((object(),), TypeError, "argument 0: expected a RawKernel"),
        (((1, 2),), TypeError, "argument 0: a tuple is"),
        (((tiny(0), (), (), "x"),), TypeError, "a tuple is"),
    ],
)
def test_bad_kernels(args, error, message):
    with pytest.raises(error, match=message):
        cupy_rawcode.warmup(*args, arch=ARCH)


@pytest.mark.parametrize("workers", [0, -1, "x", 1.5, True, "2"])
def test_bad_workers_is_a_clear_value_error(workers):
    with pytest.raises(ValueError, match=r"^workers=.*(whole number|at least one)"):
        cupy_rawcode.warmup((tiny(0),), arch=ARCH, workers=workers)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("3", 3),
        (" 16 ", 16),
        ("0", ValueError),
        ("-2", ValueError),
        ("many", ValueError),
        ("2.5", ValueError),
    ],
)
def test_workers_variable(monkeypatch, value, expected):
    monkeypatch.setenv("CUPY_RAWCODE_WORKERS", value)
    if expected is ValueError:
        with pytest.raises(ValueError, match="CUPY_RAWCODE_WORKERS"):
            config.workers()
    else:
        assert config.workers() == expected
        assert sizing.default_workers(100) == expected
        assert sizing.default_workers(2) == min(expected, 2)


@pytest.mark.parametrize(
    "arch, message", [("gpu90", "gpu90"), ([], "arch=\\[\\]"), ([1], "arch=\\[1\\]")]
)
def test_bad_arch(arch, message):
    with pytest.raises(ValueError, match=message):
        cupy_rawcode.warmup((tiny(0),), arch=arch)


GiB = 1 << 30


@pytest.mark.parametrize(
    "cores, available, tasks, expected",
    [
        (16, 128 * GiB, 20, 16),  # cores bound
        (16, 128 * GiB, 4, 4),  # no more workers than tasks
        (16, 2 * GiB, 20, 5),  # memory bound: 400 MB a compile
        (16, 100 << 20, 20, 1),  # never fewer than one
        (2, None, 20, 2),  # memory unknown: cores
        (1, 64 * GiB, 0, 1),
    ],
)
def test_workers_for(cores, available, tasks, expected):
    assert sizing.workers_for(cores, available, tasks) == expected


def test_default_workers_fit_this_machine(monkeypatch):
    monkeypatch.delenv("CUPY_RAWCODE_WORKERS", raising=False)
    n = sizing.default_workers(1000)
    assert 1 <= n <= sizing.usable_cores()
    room = sizing.available_memory()
    if room is not None:
        assert n <= max(1, room // sizing.PER_COMPILE_BYTES)


def test_a_script_without_main_guard_runs_its_top_level_once(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(f"""
        import cupy_rawcode
        with open({str(marker)!r}, "a") as f:
            f.write("top level\\n")
        srcs = [{tiny(0)!r}, {tiny(1)!r}, {tiny(2)!r}]
        s = cupy_rawcode.warmup(*[(s,) for s in srcs], arch="{ARCH}", workers=3)
        print(len(s.compiled), s.workers)
    """)
    )
    p = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["3", "3"]
    assert marker.read_text() == "top level\n"


def slow_source() -> str:
    """A radix sort kernel instantiated 56 times: about 7 s of compiling on the CI host."""
    src = (CORPUS / "radix_sort.cu").read_text()
    for a, b in [
        ('extern "C" __global__ void kern(', "template <int B, int I> __global__ void kern("),
        ("BlockRadixSort<float, 128, 4>", "BlockRadixSort<float, B, I>"),
        ("float items[4]", "float items[I]"),
        ("j < 4", "j < I"),
        ("threadIdx.x * 4", "threadIdx.x * I"),
    ]:
        assert a in src
        src = src.replace(a, b)
    return src + "".join(
        f"template __global__ void kern<{b}, {i}>(const float*, float*, int);\n"
        for b in (32, 64, 96, 128, 160, 192, 256)
        for i in range(1, 9)
    )


_DYING = textwrap.dedent("""
    import os, signal, sys, time
    import cupy_rawcode
    from cupy_rawcode.parallel import pool
    src = open(sys.argv[2]).read()
    h = cupy_rawcode.warmup(*[(src + "// variant %d\\n" % i,) for i in range(2)], arch="sm_80",
                            workers=2, background=True)
    while len(pool._live) < 2:
        time.sleep(0.01)
    print(" ".join(str(p.pid) for p in pool._live), flush=True)
    time.sleep(0.5)  # the workers are compiling now: seconds of work left
    if sys.argv[1] == "raise":
        raise RuntimeError("the application failed")
    if sys.argv[1] == "exit":
        os._exit(3)  # no atexit handlers, no clean-up
    os.kill(os.getpid(), signal.SIGKILL)
""")


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.split()[:2] == ["State:", "Z"] for line in f)
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize("how", ["raise", "exit", "kill"])
def test_workers_end_with_the_program(how, tmp_path):
    """Each worker has seconds of compiling left when the program ends; it must end at once
    (an exception runs atexit; os._exit and SIGKILL close the workers' stdin)."""
    src = tmp_path / "slow.cu"
    src.write_text(slow_source())
    p = subprocess.Popen(
        [sys.executable, "-c", _DYING, how, str(src)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out, err = p.communicate(timeout=120)
    pids = [int(x) for x in out.split()]
    assert len(pids) == 2, err
    assert p.returncode != 0
    if how == "raise":
        assert "the application failed" in err
    deadline = time.monotonic() + 3
    while not all(_ended(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [pid for pid in pids if not _ended(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert alive == [], f"workers outlived the program ({how})"


# -- on the GPU: the current device's arch, launches checked against NumPy ---------------------

GPU_KERNELS = ["block_reduce.cu", "plain.cu", "std_traits.cu", "warp_reduce.cu"]


def _check_launch(k, name):
    import cupy as cp
    import numpy as np
    from test_gpu import run_corpus_kernel

    got, want = run_corpus_kernel(k, name, cp)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_gpu_warmup_then_first_launches_are_hits_and_match_numpy(compiles):
    nonce = f"\n// warmup {time.time_ns()}\n"  # fresh for CuPy's and NVRTC's caches too
    ks = {n: cupy_rawcode.RawKernel((CORPUS / n).read_text() + nonce, "kern") for n in GPU_KERNELS}
    s = cupy_rawcode.warmup(*ks.values(), workers=2)
    assert s.ok and len(s.compiled) == len(GPU_KERNELS), str(s)
    assert compiles == []
    for n, k in ks.items():
        _check_launch(k, n)
    assert compiles == []  # every first launch found the workers' code


@pytest.mark.gpu
def test_gpu_background_warmup_and_racing_launches_compile_once(compiles):
    nonce = f"\n// background {time.time_ns()}\n"
    ks = {n: cupy_rawcode.RawKernel((CORPUS / n).read_text() + nonce, "kern") for n in GPU_KERNELS}
    handle = cupy_rawcode.warmup(*ks.values(), workers=2, background=True)
    for n, k in ks.items():  # launches race the workers: each waits for its own compile
        _check_launch(k, n)
    s = handle.wait()
    assert len(s.compiled) == len(GPU_KERNELS), str(s)
    assert compiles == []
