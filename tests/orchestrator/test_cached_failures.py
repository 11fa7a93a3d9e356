"""Compiles that never happen twice: a compile error is kept under the kernel's key (as JSON,
orchestrator/failures.py) and raised again, in this process or a new one, without NVRTC; never
served when anything keyed differs, when a header changed during the compile, or when failures
are off. On a CPU: NVRTC needs no GPU, and CuPy's compiles run for an explicit arch with the
module never loaded (as test_cupy_all.py does)."""

import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

import cupy_rawcode
from cupy_rawcode import cli
from cupy_rawcode.orchestrator import compiling as program
from cupy_rawcode.orchestrator import failures
from cupy_rawcode.store import default_store
from cupy_rawcode.store.entry import decode, encode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BAD = 'extern "C" __global__ void k(float* x) { x[0] = undefined_thing; }\n'
GOOD = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'


def failing(source=BAD, **kw):
    """The exception compile() raises (and what reached log_stream)."""
    stream = io.StringIO()
    kw.setdefault("arch", "sm_90")
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.compile(source, log_stream=stream, **kw)
    return e.value, stream.getvalue()


def same(a, b) -> bool:
    """The same exception, as a user sees it."""
    return (type(a), str(a), a.get_message(), a.log, a.name, tuple(a.options), a.source) == (
        type(b),
        str(b),
        b.get_message(),
        b.log,
        b.name,
        tuple(b.options),
        b.source,
    )


def entries() -> list[tuple[str, dict, bytes]]:
    """(key, metadata, code) of every entry in the test's cache directory."""
    disk = default_store().level("disk")
    found = []
    for path in sorted((disk.root / "entries").rglob("*")):
        if path.is_file():
            code, meta = decode(path.stem, path.read_bytes())
            found.append((path.stem, meta, code))
    return found


def test_a_compile_error_is_raised_again_without_nvrtc(compiles):
    first, log1 = failing()
    assert len(compiles) == 1 and "undefined_thing" in first.log
    again, log2 = failing()
    assert len(compiles) == 1, "the second identical request compiled"
    assert same(first, again) and log1 == log2 == ""  # as CuPy: nothing to log_stream on failure
    [(key, meta, code)] = entries()
    record = json.loads(code)  # data, never a pickle
    assert meta["target"] == failures.FAILED and record["kind"] == "compile-error"
    assert record["class"] == "CompileError" and record["log"] == first.log


_CHILD = r"""
import json, sys
import cupy_rawcode
from cupy_rawcode.orchestrator import compiling as program
calls = []
real = program._nvrtc_compile
program._nvrtc_compile = lambda *a: calls.append(1) or real(*a)
try:
    cupy_rawcode.compile(sys.argv[1], arch="sm_90")
except cupy_rawcode.CompileError as e:
    print(json.dumps({"class": type(e).__name__, "message": str(e), "log": e.log,
                      "compiles": len(calls)}))
"""


def test_a_new_process_raises_it_without_nvrtc(tmp_path, compiles):
    first, _ = failing()
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, BAD], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got == {"class": "CompileError", "message": str(first), "log": first.log, "compiles": 0}


def test_opting_out_keeps_nothing_and_serves_nothing(monkeypatch, compiles):
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_FAILURES", "0")
    failing()
    failing()
    assert len(compiles) == 2 and entries() == []
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_FAILURES", "1")
    failing()  # kept now
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_FAILURES", "0")
    failing()  # held, but not served
    assert len(compiles) == 4


@pytest.mark.parametrize(
    "change",
    [
        {"options": ("-DX=1",)},
        {"arch": "sm_80"},
        {"source": BAD + "// another text\n"},
        {"name_expressions": ("k",)},
    ],
    ids=["option", "arch", "source", "name expression"],
)
def test_a_request_that_differs_in_anything_keyed_compiles(compiles, change):
    failing()
    kw = dict(change)
    failing(kw.pop("source", BAD), **kw)
    assert len(compiles) == 2


def test_editing_a_header_makes_it_a_miss(tmp_path, compiles):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "h.h").write_text("#define VALUE undefined_one\n")
    src = '#include "h.h"\nextern "C" __global__ void k(float* x) { x[0] = VALUE; }\n'
    opts = (f"-I{inc}",)
    first, _ = failing(src, options=opts)
    n = len(compiles)  # 2 where the header is too new for the early compile to be trusted
    failing(src, options=opts)
    assert len(compiles) == n and "undefined_one" in first.log
    (inc / "h.h").write_text("#define VALUE undefined_two\n")
    second, _ = failing(src, options=opts)
    assert len(compiles) > n and "undefined_two" in second.log


def test_a_header_changed_during_the_compile_keeps_nothing(tmp_path, monkeypatch):
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "h.h"
    header.write_text("#define VALUE undefined_one\n")
    src = '#include "h.h"\nextern "C" __global__ void k(float* x) { x[0] = VALUE; }\n'
    calls = []
    real = program._nvrtc_compile

    def editing(*a):
        calls.append(1)
        header.write_text("#define VALUE undefined_two  \n")  # another size: a new stamp
        return real(*a)

    monkeypatch.setattr(program, "_nvrtc_compile", editing)
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")  # NVRTC starts after the key read the header
    failing(src, options=(f"-I{inc}",))
    assert entries() == []  # not kept: NVRTC may have read another text than the key
    failing(src, options=(f"-I{inc}",))
    assert len(calls) == 2


def test_a_missing_header_is_never_kept():
    src = '#include "never_there.h"\n' + BAD
    with pytest.raises(cupy_rawcode.MissingHeaderError):
        cupy_rawcode.compile(src, arch="sm_90")
    assert entries() == []  # (NVRTC may have started early, and been abandoned)


@pytest.mark.parametrize(
    "code",
    [b"not json", b"[]", b'{"kind": "compile-error", "class": "CompileError"}', b"\xff\xfe"],
    ids=["not json", "a list", "no message", "not text"],
)
def test_a_record_that_does_not_read_back_is_a_miss(compiles, code):
    first, _ = failing()
    [(key, meta, _)] = entries()
    default_store().put(key, encode(key, code, meta))
    again, _ = failing()
    assert len(compiles) == 2 and same(first, again)


def test_a_log_over_the_bound_is_not_kept(monkeypatch, compiles):
    monkeypatch.setattr(failures, "MAX_LOG", 10)
    failing()
    failing()
    assert len(compiles) == 2 and entries() == []


def test_a_failure_served_is_no_hit_of_a_kernel(compiles):
    disk = default_store().level("disk")
    failing()
    failing()
    disk.flush_counts()
    assert (disk.counts() or (0, 0)) == (0, 0)
    cupy_rawcode.compile(GOOD, arch="sm_90")
    cupy_rawcode.compile(GOOD, arch="sm_90")
    disk.flush_counts()
    assert disk.counts() == (1, 1)


def test_the_drop_in_classes_raise_it_again_without_nvrtc(compiles):
    errors = []
    for _ in range(2):
        with pytest.raises(cupy_rawcode.CompileError) as e:
            cupy_rawcode.RawKernel(BAD, "k").compile(arch="sm_90")
        errors.append(e.value)
    assert len(compiles) == 1 and same(*errors)


def test_cache_list_and_a_bundle_carry_the_failure(tmp_path, capsys, compiles):
    first, _ = failing()
    cupy_rawcode.compile(GOOD, arch="sm_90")
    assert cli.main(["cache", "list", "-l"]) == 0
    listing = capsys.readouterr().out
    assert "sm_90 compile-error" in listing and "sm_90 cubin" in listing
    bundle = tmp_path / "b.bundle"
    assert cli.main(["bundle", "export", str(bundle)]) == 0
    assert "wrote 2 entries" in capsys.readouterr().out
    env = dict(os.environ)
    env["CUPY_RAWCODE_CACHE_DIR"] = str(tmp_path / "elsewhere")
    env["CUPY_RAWCODE_BUNDLES"] = str(bundle)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, BAD], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["compiles"] == 0  # the bundle answered the failure too
    assert cli.main(["cache", "prune", "--max-size", "1"]) == 0  # a failure prunes like any entry


# -- CuPy's own compiles under install(scope="all") --------------------------------------------

CUPY_GOOD = 'extern "C" __global__ void triple(float* x) { x[threadIdx.x] *= 3.0f; }\n'
CUPY_BAD = textwrap.dedent(
    """
    extern "C" __global__ void cupy_bad(const float* x, float* y) {
      y[0] = copysign_of_nothing(x[0]);
    }
    """
)


@pytest.fixture
def cupy_all(monkeypatch):
    """install(scope="all"), and the NVRTC programs CuPy compiles (a list)."""
    pytest.importorskip("cupy")
    from cupy.cuda import compiler

    from cupy_rawcode.hook import install as hook

    calls = []
    real = compiler._NVRTCProgram.compile
    monkeypatch.setattr(
        compiler._NVRTCProgram, "compile", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    hook.install("all")
    yield calls
    hook.uninstall()


def cupy_compile(source, options=()):
    """CuPy's compile function (ours while installed), for an sm_90 it never loads."""
    from cupy._core import core
    from cupy.cuda import compiler

    from cupy_rawcode.hook import compiles as cupy_compiles

    with cupy_compiles.unloaded(compiler):
        return compiler._compile_module_with_cache(
            source,
            core.assemble_cupy_compiler_options(tuple(options)),
            arch="90",
            extra_source=core._get_header_source(),
        )


def cupy_failing(source=CUPY_BAD, options=()):
    """The CompileException CuPy's compile function (ours while installed) raises."""
    from cupy.cuda import compiler

    with pytest.raises(compiler.CompileException) as e:
        cupy_compile(source, options)
    return e.value


def cupys(e) -> tuple:
    return (type(e), str(e), e.get_message(), e.source, e.name, tuple(e.options), e.backend)


def test_cupys_compile_error_is_raised_again_without_nvrtc(cupy_all):
    from cupy.cuda import compiler

    first = cupy_failing()
    compiled = len(cupy_all)
    assert compiled >= 1 and "copysign_of_nothing" in str(first)
    again = cupy_failing()
    assert len(cupy_all) == compiled, "CuPy compiled the failing source again"
    assert type(again) is compiler.CompileException  # CuPy's class, not ours
    assert cupys(again) == cupys(first)
    [(_, meta, code)] = entries()
    assert meta["target"] == failures.FAILED and json.loads(code)["class"] == "CompileException"


def test_cupys_failure_is_dumped_again_as_cupy_dumps_it(cupy_all, monkeypatch, capfd):
    monkeypatch.setenv("CUPY_DUMP_CUDA_SOURCE_ON_ERROR", "1")
    cupy_failing()
    first = capfd.readouterr().err
    cupy_failing()
    assert capfd.readouterr().err == first and "copysign_of_nothing" in first


def test_cupys_failure_differs_by_option_and_opts_out(cupy_all, monkeypatch):
    cupy_failing()
    n = len(cupy_all)
    cupy_failing(options=("-DX=1",))
    assert len(cupy_all) > n  # another key: compiled
    n = len(cupy_all)
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_FAILURES", "0")
    cupy_failing()
    assert len(cupy_all) > n  # held, but not served


def test_cupys_failure_compiled_ahead_is_kept_and_raised_again(cupy_all):
    from cupy._core import core
    from cupy.cuda import compiler

    from cupy_rawcode.hook import compiles as cupy_compiles
    from cupy_rawcode.parallel.task import Task

    options = core.assemble_cupy_compiler_options(())
    call = cupy_compiles.call_for(Task(CUPY_BAD, options, "sm_90", cupy=("cupy", False)))
    raised, compiled = [], []
    for _ in range(2):
        with pytest.raises(compiler.CompileException) as e:
            cupy_compiles.compile_ahead(call)
        raised.append(e.value)
        compiled.append(len(cupy_all))
    assert compiled[0] >= 1 and cupys(raised[0]) == cupys(raised[1])
    assert compiled[1] == compiled[0]  # the second raised from the store
    first = cupy_failing()  # a launch of the same call: served the same failure
    assert len(cupy_all) == compiled[0] and cupys(first) == cupys(raised[0])


@pytest.mark.parametrize(
    "status", [1, 11, 7], ids=["out-of-memory", "internal-error", "builtin-operation-failure"]
)
def test_cupys_failure_that_is_no_verdict_on_the_text_is_not_kept(cupy_all, monkeypatch, status):
    """CuPy makes every NVRTC error a CompileException: only NVRTC's verdict on the text
    (NVRTC_ERROR_COMPILATION) is kept; out of memory or an internal error compiles again."""
    from cupy.cuda import compiler

    real = compiler._NVRTCProgram.compile

    def failing(self, options=(), *a, **k):  # as CuPy raises it: handling NVRTC's error
        try:
            raise compiler.nvrtc.NVRTCError(status)
        except compiler.nvrtc.NVRTCError:
            raise compiler.CompileException("a log", self.src, self.name, options, "nvrtc")  # noqa: B904

    monkeypatch.setattr(compiler._NVRTCProgram, "compile", failing)
    with pytest.raises(compiler.CompileException):
        cupy_compile(CUPY_GOOD)
    monkeypatch.setattr(compiler._NVRTCProgram, "compile", real)
    cupy_compile(CUPY_GOOD)  # compiled: nothing was kept
    assert failures.FAILED not in [meta["target"] for _, meta, _ in entries()]
