"""Compile, fail and log as CuPy's RawKernel/RawModule do (no GPU needed: compiles for sm_90).

The same behaviour on the GPU, side by side with CuPy itself, is tests/kernel/test_gpu_compat.py."""

import io
import os
import pickle
import subprocess
import sys

import pytest

import cupy_rawcode
from cupy_rawcode.ground import errors
from cupy_rawcode.headers.closure import MissingHeaderError
from cupy_rawcode.headers.options import parse_options, with_cupy_defaults
from cupy_rawcode.hook import install as hook
from cupy_rawcode.kernel import loading
from cupy_rawcode.orchestrator import jitify as jitify_compat

ARCH = "sm_90"
UNUSED = 'extern "C" __global__ void k(float* x) { int unused = 3; x[threadIdx.x] = 1.0f; }\n'
WARNING = 'warning #177-D: variable "unused" was declared but never referenced'

try:
    import cupy.cuda.compiler as cupy_compiler
except Exception:
    cupy_compiler = None
needs_cupy = pytest.mark.skipif(cupy_compiler is None, reason="CuPy is not installed")


# ---------------------------------------------------------------- part 1: CuPy's options

UNANNOTATED = {
    "helper function": "float twice(float v) { return 2 * v; }\n"
    'extern "C" __global__ void k(float* x) { x[0] = twice(x[0]); }\n',
    "functor": "struct Twice { float operator()(float v) const { return 2 * v; } };\n"
    'extern "C" __global__ void k(float* x) { x[0] = Twice()(x[0]); }\n',
    "constructor": "struct P { float v; P(float a) : v(a * 2) {} };\n"
    'extern "C" __global__ void k(float* x) { x[0] = P(x[0]).v; }\n',
    "lambda": 'extern "C" __global__ void k(float* x) {\n'
    "  auto twice = [](float v) { return 2 * v; };\n  x[0] = twice(x[0]);\n}\n",
}


@pytest.mark.parametrize("what", sorted(UNANNOTATED))
def test_unannotated_code_is_device_code_as_in_cupy(what):
    obj = cupy_rawcode.compile(UNANNOTATED[what], arch=ARCH)
    assert len(obj.code) > 0


@pytest.mark.parametrize("entry", ["compile", "RawKernel", "RawModule", "cli"])
def test_every_entry_point_compiles_with_the_same_options(entry, tmp_path):
    src = UNANNOTATED["helper function"]
    if entry == "compile":
        assert cupy_rawcode.compile(src, arch=ARCH).code
    elif entry == "RawKernel":
        cupy_rawcode.RawKernel(src, "k").compile(arch=ARCH)
    elif entry == "RawModule":
        cupy_rawcode.RawModule(code=src).compile(arch=ARCH)
    else:
        from cupy_rawcode.cli import main

        f = tmp_path / "k.cu"
        f.write_text(src)
        assert main(["compile", str(f), "--arch", ARCH]) == 0


def test_opting_out_compiles_with_the_options_as_given(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_CUPY_OPTIONS", "0")
    with pytest.raises(errors.CompileError, match="twice"):
        cupy_rawcode.compile(UNANNOTATED["helper function"], arch=ARCH)
    assert cupy_rawcode.compile(
        UNANNOTATED["helper function"], arch=ARCH, options=("-default-device",)
    ).code


@pytest.mark.parametrize(
    "cupy_options, options, flushed, warned",
    [
        ("1", (), True, False),
        ("1", ("-ftz=false",), True, True),  # CuPy's -ftz=true comes last: NVRTC keeps it
        ("1", ("--ftz", "false"), True, True),
        ("0", ("-ftz=false",), False, False),  # the options as given
    ],
)
def test_ftz_is_cupys_whatever_the_options(monkeypatch, cupy_options, options, flushed, warned):
    """CuPy appends -ftz=true after a kernel's options, so its kernels flush subnormals even
    with -ftz=false (NVRTC warns that one was followed by the other); so do ours."""
    monkeypatch.setenv("CUPY_RAWCODE_CUPY_OPTIONS", cupy_options)
    src = 'extern "C" __global__ void k(float* x) { x[0] = x[1] * x[2]; }'
    log = io.StringIO()
    r = cupy_rawcode.compile(src, arch="compute_90", target="ptx", options=options, log_stream=log)
    assert ("mul.ftz.f32" in r.code.decode()) == flushed
    assert ('"--ftz(-ftz)=false" followed by "--ftz(-ftz)=true"' in log.getvalue()) == warned


@pytest.mark.parametrize(
    "options, default_device, passthrough",
    [
        ((), True, ("-ftz=true",)),
        # CuPy appends -ftz=true after the options: NVRTC keeps the last, and warns
        (("-ftz=false",), True, ("-ftz=false", "-ftz=true")),
        (("--ftz=true",), True, ("--ftz=true", "-ftz=true")),
        (("-default-device", "-DX"), True, ("-ftz=true",)),  # given twice: passed once
        (("-use_fast_math",), True, ("-use_fast_math", "-ftz=true")),
    ],
)
def test_cupy_defaults(options, default_device, passthrough):
    opts = with_cupy_defaults(parse_options(options))
    assert (opts.default_device, opts.passthrough) == (default_device, passthrough)


@pytest.mark.parametrize(
    "value, options, passthrough",
    [
        ("1", (), ("-ftz=true", "--device-debug", "--generate-line-info")),
        (" 1", (), ("-ftz=true", "--device-debug", "--generate-line-info")),  # int(' 1') == 1
        ("1", ("--device-debug",), ("--device-debug", "-ftz=true", "--generate-line-info")),
        ("0", (), ("-ftz=true",)),
        ("true", (), ("-ftz=true",)),  # CuPy reads an integer: anything else is off
        ("", (), ("-ftz=true",)),
    ],
)
def test_cupy_compile_with_debug_adds_what_cupy_adds(monkeypatch, value, options, passthrough):
    """CUPY_CUDA_COMPILE_WITH_DEBUG=1: CuPy compiles every kernel with --device-debug
    --generate-line-info; so do ours, unless the CuPy defaults are off."""
    monkeypatch.setenv("CUPY_CUDA_COMPILE_WITH_DEBUG", value)
    assert with_cupy_defaults(parse_options(options)).passthrough == passthrough
    monkeypatch.setenv("CUPY_RAWCODE_CUPY_OPTIONS", "0")
    assert with_cupy_defaults(parse_options(options)).passthrough == options


def test_a_debug_compile_has_its_own_key_and_index_entry(monkeypatch):
    """Set after a warm RawKernel compile of the same source, the debug flag misses both the
    index and the key (a debug cubin is never served for an optimized one, nor the reverse)."""
    plain = cupy_rawcode.cache_key(UNUSED, arch=ARCH)
    code = cupy_rawcode.RawKernel(UNUSED, "k")._build.device_code(90).data
    assert b".debug_info" not in code
    monkeypatch.setenv("CUPY_CUDA_COMPILE_WITH_DEBUG", "1")
    assert cupy_rawcode.cache_key(UNUSED, arch=ARCH) != plain
    assert b".debug_info" in cupy_rawcode.RawKernel(UNUSED, "k")._build.device_code(90).data
    monkeypatch.delenv("CUPY_CUDA_COMPILE_WITH_DEBUG")
    assert cupy_rawcode.RawKernel(UNUSED, "k")._build.device_code(90).data == code


def test_key_differs_when_cupy_defaults_are_off(monkeypatch):
    on = cupy_rawcode.cache_key(UNUSED, arch=ARCH)
    monkeypatch.setenv("CUPY_RAWCODE_CUPY_OPTIONS", "0")
    assert cupy_rawcode.cache_key(UNUSED, arch=ARCH) != on


@needs_cupy
def test_cupy_headers_are_a_root_of_their_own():
    src = (
        "#include <cupy/complex.cuh>\n"
        'extern "C" __global__ void k(complex<float>* x) { x[0] = x[0] * x[0]; }\n'
    )
    closure = cupy_rawcode.resolve(src)
    assert any(h.logical == "cupy:cupy/complex.cuh" for h in closure.headers)
    assert cupy_rawcode.compile(src, arch=ARCH).code


def test_a_missing_cupy_header_says_it_comes_with_cupy():
    with pytest.raises(MissingHeaderError, match="headers come with CuPy"):
        cupy_rawcode.resolve("#include <cupy/no_such_header.cuh>\n").raise_for_missing()


# ---------------------------------------------------------------- part 2: exceptions

FAILURES = {  # source, options, what NVRTC (and so CuPy) says
    "syntax error": (
        'extern "C" __global__ void k(float* x) { x[0] = ; }\n',
        (),
        "error: expected an expression",
    ),
    "#error": (
        '#error boom here\nextern "C" __global__ void k() {}\n',
        (),
        "#error directive: boom here",
    ),
    "missing header": (
        '#include "nothere.h"\nextern "C" __global__ void k() {}\n',
        (),
        'cannot open source file "nothere.h"',
    ),
    "bad option": (
        'extern "C" __global__ void k() {}\n',
        ("--no-such-flag",),
        "unrecognized option --no-such-flag",
    ),
    "device launch without -dc": (
        'extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2; }\n'
        'extern "C" __global__ void parent(float* x) { child<<<1, 32>>>(x); }\n',
        (),
        "device-side kernel launch could not be processed",
    ),
}


def _failure(what: str):
    src, options, _ = FAILURES[what]
    with pytest.raises(Exception) as e:
        cupy_rawcode.compile(src, arch=ARCH, options=options)
    return e.value


@pytest.mark.parametrize("what", sorted(FAILURES))
def test_failures_raise_cupys_compile_exception_with_nvrtcs_words(what):
    e = _failure(what)
    base = cupy_compiler.CompileException if cupy_compiler else errors.CompileException
    assert isinstance(e, base) and isinstance(e, cupy_rawcode.CompileError)
    assert isinstance(e, RuntimeError)  # what cupy_rawcode raised before: still caught
    assert FAILURES[what][2] in str(e)
    assert e.source == FAILURES[what][0] and e.backend == "nvrtc"
    assert "--device-as-default-execution-space" in e.options
    assert "/dev/null" not in str(e) and "precompiled" not in str(e)


def test_a_missing_header_is_also_our_missing_header_error_with_its_chain(tree):
    root = tree({"inc/a.h": '#include "b.h"\n'})
    src = '#include "a.h"\nextern "C" __global__ void k() {}\n'
    with pytest.raises(MissingHeaderError) as e:
        cupy_rawcode.compile(src, arch=ARCH, options=(f"-I{root}/inc",))
    assert isinstance(e.value, cupy_rawcode.CompileError)
    assert 'cannot open source file "b.h"' in str(e.value)
    assert "included from user0:a.h:1" in str(e.value) and "included from <source>:1" in str(
        e.value
    )
    assert [m.name for m in e.value.missing] == ["b.h"]


def test_dump_writes_the_source_as_cupy_does():
    e = _failure("syntax error")
    f = io.StringIO()
    e.dump(f)
    lines = f.getvalue().splitlines()
    assert lines[0].startswith("NVRTC compilation error: ") and "expected an expression" in lines[0]
    assert f"Name: {e.name}" in lines and "CUDA source:" in lines
    assert "Options: " + " ".join(e.options) in lines
    assert '1 extern "C" __global__ void k(float* x) { x[0] = ; }' in lines


def test_cupy_dump_variable_dumps_to_stderr(monkeypatch, capfd):
    monkeypatch.setenv("CUPY_DUMP_CUDA_SOURCE_ON_ERROR", "1")
    e = _failure("#error")
    err = capfd.readouterr().err
    assert err.startswith("NVRTC compilation error: ") and f"Name: {e.name}" in err
    monkeypatch.setenv("CUPY_DUMP_CUDA_SOURCE_ON_ERROR", "0")
    _failure("#error")
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("what", ["syntax error", "missing header"])
def test_errors_pickle_as_cupys_do(what):
    e = _failure(what)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and str(back) == str(e)
    # and what CuPy's do not have: NVRTC's log alone, the missing headers (a worker's error)
    assert back.log == e.log and back.dump_path == e.dump_path
    assert (what == "syntax error") == (back.log != str(back))  # the log alone, no source lines
    assert getattr(back, "missing", ()) == getattr(e, "missing", ())
    assert (what == "missing header") == bool(getattr(back, "missing", ()))


def test_jitify_errors_are_also_jitify_exceptions():
    e = errors.as_jitify(_failure("syntax error"))
    jitify = cupy_compiler.JitifyException if cupy_compiler else errors.JitifyException
    assert isinstance(e, jitify) and isinstance(e, cupy_rawcode.CompileError)
    assert "expected an expression" in str(e)


# ---------------------------------------------------------------- part 3: log_stream


def test_an_empty_log_leaves_pythons_shared_bytes_alone():
    # NVRTC writes its log into the buffer it is given: b" " * 1 is CPython's shared b" ", and
    # an empty (one NUL byte) log written there turned every b" " of the process into b"\0"
    cupy_rawcode.compile('extern "C" __global__ void k() {}\n// quiet\n', arch=ARCH)
    space = bytes([32])
    assert b" " == space and b" " * 1 == space and space.decode() == " "


def test_log_stream_gets_nvrtcs_warning_on_a_compile_and_on_a_hit():
    logs = []
    for _ in range(2):  # a compile, then a memory hit
        f = io.StringIO()
        cupy_rawcode.compile(UNUSED, arch=ARCH, log_stream=f)
        logs.append(f.getvalue())
    assert WARNING in logs[0] and logs[1] == logs[0]
    assert "cupy-rawcode:" not in logs[0]  # our own report goes to the logger


_REPLAY = r"""
import io, sys
import cupy_rawcode
f = io.StringIO()
cupy_rawcode.RawKernel(sys.argv[1], "k").compile(log_stream=f, arch="sm_90")
sys.stdout.write(f.getvalue())
"""


def test_a_new_process_hitting_the_cache_replays_the_log():
    runs = [
        subprocess.run(
            [sys.executable, "-c", _REPLAY, UNUSED],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ),
        ).stdout
        for _ in range(2)
    ]
    assert WARNING in runs[0] and runs[1] == runs[0]


def test_our_report_goes_to_the_cupy_rawcode_logger(caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="cupy_rawcode"):
        cupy_rawcode.RawKernel(UNUSED, "k").compile(arch=ARCH)
    assert any(
        r.getMessage().startswith("cupy-rawcode: compiled sm_90 cubin key ") for r in caplog.records
    )


# ---------------------------------------------------------------- part 4: PCH, program names


@pytest.mark.parametrize("what", ["syntax error", "#error"])
def test_failing_compiles_under_pch_say_the_same_with_no_pch_text(monkeypatch, what):
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "1")
    src, _, words = FAILURES[what]
    src = "#include <cuda/std/type_traits>\n" + src  # a prefix a PCH can cover
    messages = []
    for _ in range(2):
        with pytest.raises(cupy_rawcode.CompileError) as e:
            cupy_rawcode.compile(src, arch=ARCH)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and words in messages[0]
    assert "precompiled" not in messages[0].lower() and "pch" not in messages[0].lower()


def test_logs_under_pch_have_no_pch_text(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "1")
    for n in range(2):
        f = io.StringIO()
        src = f"#include <cuda/std/type_traits>\n// {n}\n" + UNUSED
        cupy_rawcode.compile(src, arch=ARCH, log_stream=f)
        assert WARNING in f.getvalue() and "precompiled" not in f.getvalue().lower()


@pytest.mark.parametrize(
    "log, expected",
    [
        ("a.cu(1): warning: x\n\x00", "a.cu(1): warning: x\n"),
        (
            "using precompiled header file /tmp/x.pch\na.cu(1): warning: x\n",
            "a.cu(1): warning: x\n",
        ),
        ("precompiled header file ... command line options do not match\n", ""),
        ("\x00", ""),
    ],
)
def test_clean_log(log, expected):
    from cupy_rawcode.ground.nvrtclog import clean_log

    assert clean_log(log) == expected


def test_diagnostics_name_the_users_file(tmp_path):
    f = tmp_path / "my_kernel.cu"
    f.write_text(FAILURES["syntax error"][0])
    with pytest.raises(cupy_rawcode.CompileError) as e:
        cupy_rawcode.RawModule(path=str(f)).compile(arch=ARCH)
    assert e.value.name == str(f) and f"{f}(1): error: expected an expression" in str(e.value)


def test_a_source_string_has_a_stable_name_derived_from_the_source():
    names = {_failure("syntax error").name for _ in range(2)}
    assert len(names) == 1
    name = names.pop()
    assert name.startswith("<source>/kernel-") and name.endswith(".cu")


# ---------------------------------------------------------------- part 5: -dc


@pytest.mark.parametrize("option", ["-dc", "-rdc=true", "--relocatable-device-code=true"])
def test_relocatable_code_compiles_and_links_with_the_device_runtime(option):
    src = FAILURES["device launch without -dc"][0]
    obj = cupy_rawcode.compile(src, arch=ARCH, options=(option,))
    assert obj.code[:4] == b"\x7fELF" and b"parent" in obj.code and b"child" in obj.code
    assert cupy_rawcode.cache_key(src, arch=ARCH, options=(option,)) != cupy_rawcode.cache_key(
        src, arch=ARCH, options=(option, "-rdc=false")
    )


# ---------------------------------------------------------------- part 6: install() leniency

DROPPING = {
    "inc/uses_missing.h": '#pragma once\n#include "never_there.h"\n'
    "inline float helper(float v) { return v + 1; }\n",
    "inc/needs_missing.h": '#pragma once\n#include "never_there.h"\n'
    "inline float helper(float v) { return from_missing(v); }\n",
}


def _jitify_compile(monkeypatch, src: str, root):
    """install()'s compile of a jitify=True call, without loading the module (no GPU)."""
    monkeypatch.setattr(loading, "_load_module", lambda code: code)
    return hook._compile_for_cupy(src, (f"-I{root}/inc", "-DCUPY_USE_JITIFY"), "90", None, None)


def test_install_drops_an_unused_missing_include_with_one_warning(monkeypatch, tree):
    root = tree(DROPPING)
    src = (
        '#include "uses_missing.h"\n'
        'extern "C" __global__ void k(float* x) { x[0] = helper(x[0]); }\n'
    )
    with pytest.warns(jitify_compat.DroppedIncludeWarning) as w:
        code = _jitify_compile(monkeypatch, src, root)
    assert code.kind == "cubin" and code.data
    assert len(w) == 1 and '"never_there.h"' in str(w[0].message)
    assert "<source>:1 -> user0:uses_missing.h:2" in str(w[0].message)
    with pytest.raises(MissingHeaderError):  # the drop-in classes keep the clear error
        cupy_rawcode.RawKernel(src, "k", options=(f"-I{root}/inc",)).compile(arch=ARCH)


def test_install_names_the_dropped_include_first_when_nvrtc_then_fails(monkeypatch, tree):
    root = tree(DROPPING)
    src = (
        '#include "needs_missing.h"\n'
        'extern "C" __global__ void k(float* x) { x[0] = helper(x[0]); }\n'
    )
    with pytest.warns(jitify_compat.DroppedIncludeWarning), pytest.raises(Exception) as e:
        _jitify_compile(monkeypatch, src, root)
    jitify = cupy_compiler.JitifyException if cupy_compiler else errors.JitifyException
    assert isinstance(e.value, jitify) and isinstance(e.value, cupy_rawcode.CompileError)
    text = str(e.value)
    assert text.startswith("cupy-rawcode dropped include(s)")
    assert text.index('"never_there.h"') < text.index('identifier "from_missing" is undefined')


def test_install_keeps_a_missing_include_of_the_source_itself_an_error(monkeypatch, tree):
    root = tree(DROPPING)
    src = '#include "never_there.h"\nextern "C" __global__ void k() {}\n'
    with pytest.raises(MissingHeaderError) as e:
        _jitify_compile(monkeypatch, src, root)
    jitify = cupy_compiler.JitifyException if cupy_compiler else errors.JitifyException
    assert isinstance(e.value, jitify) and 'cannot open source file "never_there.h"' in str(e.value)


@needs_cupy
def test_install_fails_loudly_when_cupy_has_no_hook_point(monkeypatch):
    monkeypatch.delattr(cupy_compiler, "_compile_module_with_cache")
    with pytest.raises(
        RuntimeError,
        match=r"CuPy \d+\.\d+.* has no cupy\.cuda\.compiler\."
        r"_compile_module_with_cache",
    ):
        cupy_rawcode.install()
