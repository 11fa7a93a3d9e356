"""Configuration never breaks a process (issue 27, items 9-12): a bad CUPY_RAWCODE_* value under
the .pth hook is one line and the process goes on; a record that cannot be written warns once
and never fails a compile; everything a compile writes follows the cache directory it was
given; cupy_rawcode.compile() is recorded and replayed. No GPU."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from conftest import ROOT

TIMEOUT = 120  # seconds for a child process: far beyond a start of Python (well under one)

# -- item 9: the .pth hook ---------------------------------------------------------------------

# the repository's cupy_rawcode.pth, processed by site as at the start of every interpreter
HOOKED = (
    "import site, sys; site.addpackage(sys.argv[1], 'cupy_rawcode.pth', set()); "
    "print('ALIVE', flush=True)"
)

HOOK_BAD = [
    # (environment, the variable the line must name, the bad value it must show)
    ({"CUPY_RAWCODE_INSTALL": "everything"}, "CUPY_RAWCODE_INSTALL", "everything"),
    ({"CUPY_RAWCODE_INSTALL": "all", "CUPY_RAWCODE_OVERLAP": "maybe"}, "OVERLAP", "maybe"),
    (
        {"CUPY_RAWCODE_RECORD": "{tmp}/r.jsonl", "CUPY_RAWCODE_CACHE_MAX_SIZE": "lots"},
        "MAX",
        "lots",
    ),
    ({"CUPY_RAWCODE_RECORD": "{tmp}/r.jsonl", "CUPY_RAWCODE_WORKERS": "0"}, "WORKERS", "0"),
    ({"CUPY_RAWCODE_INSTALL": "jitify", "CUPY_RAWCODE_PCH": "sometimes"}, "PCH", "sometimes"),
    ({"CUPY_RAWCODE_INSTALL": "all", "CUPY_RAWCODE_OVERLAPP": "1"}, "OVERLAPP", None),
    (
        {"CUPY_RAWCODE_RECORD": "{tmp}/r.jsonl", "CUPY_RAWCODE_REDIS_URL": "http://h"},
        "URL",
        "http://h",
    ),
    ({"CUPY_RAWCODE_RECORD": "{tmp}/r", "CUPY_RAWCODE_HEADER_SOURCES": "pip"}, "SOURCES", "pip"),
    ({"CUPY_RAWCODE_INSTALL": "all", "CUPY_RAWCODE_MEMORY_ENTRIES": "-1"}, "ENTRIES", "-1"),
    ({"CUPY_RAWCODE_INSTALL": "all", "CUPY_RAWCODE_REDIS_TIMEOUT": "nan"}, "TIMEOUT", "nan"),
]


def hooked_python(env: dict, tmp_path) -> subprocess.CompletedProcess:
    """A Python process that runs the .pth hook under ``env`` (``{tmp}`` filled in) and then
    prints ALIVE."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CUPY_RAWCODE_")}
    base.update({k: v.format(tmp=tmp_path) for k, v in env.items()})
    base["CUPY_RAWCODE_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run(
        [sys.executable, "-S", "-c", HOOKED, str(ROOT)],
        env=base,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.mark.parametrize(("env", "names", "value"), HOOK_BAD, ids=[str(e) for e, *_ in HOOK_BAD])
def test_a_bad_variable_under_the_hook_is_one_line_and_the_process_goes_on(
    tmp_path, env, names, value
):
    done = hooked_python(env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ALIVE\n", done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert names in lines[0] and "CUPY_RAWCODE_" in lines[0], lines[0]
    if value is not None:
        assert value in lines[0], lines[0]
    assert "hook is off" in lines[0], lines[0]


def test_good_variables_under_the_hook_print_nothing(tmp_path):
    env = {"CUPY_RAWCODE_INSTALL": "all", "CUPY_RAWCODE_RECORD": "{tmp}/r.jsonl"}
    done = hooked_python(env, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ALIVE\n", "")


# -- item 10: a record that cannot be written --------------------------------------------------

RECORDING = """\
import cupy_rawcode
from cupy_rawcode import autoinstall
autoinstall.start()  # as the .pth line does
for name in ("a", "b"):
    kernel = cupy_rawcode.RawKernel(
        'extern "C" __global__ void %s(int* x) { x[0] = 1; }' % name, name
    )
    kernel.compile(arch="sm_90")
print("COMPILED", flush=True)
"""

UNWRITABLE = {
    "a missing directory": "{tmp}/absent/record.jsonl",
    "a directory": "{tmp}",
    "a full disk": "/dev/full",
}


@pytest.mark.parametrize("record", UNWRITABLE.values(), ids=list(UNWRITABLE))
def test_a_record_that_cannot_be_written_warns_once_and_every_compile_succeeds(tmp_path, record):
    if record.startswith("/dev/") and not os.path.exists(record):
        pytest.skip(f"no {record} here")
    record = record.format(tmp=tmp_path)
    env = dict(os.environ, CUPY_RAWCODE_RECORD=record)
    done = subprocess.run(
        [sys.executable, "-c", RECORDING],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "COMPILED\n", done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    warned = [line for line in done.stderr.splitlines() if "cannot write the record" in line]
    assert len(warned) == 1, done.stderr
    assert f"CUPY_RAWCODE_RECORD={record}" in warned[0], warned[0]
    assert "RecordWarning" in warned[0] and "compiles go on" in warned[0], warned[0]


def test_an_entry_that_cannot_be_made_warns_and_the_compile_goes_on(tmp_path):
    from cupy_rawcode.hook import recording

    def broken(base: str) -> dict:
        raise KeyError("cooperative")

    rec = recording.Recorder(tmp_path / "r.jsonl", "record()")
    with pytest.warns(recording.RecordWarning, match="record\\(\\) of .*r.jsonl"):
        rec.note(broken)
        rec.note(broken)  # once
    assert not (tmp_path / "r.jsonl").exists()


# -- item 11: everything a compile writes follows its cache directory ---------------------------

ELSEWHERE = """\
import sys, cupy_rawcode
source = '#include "v.h"\\nextern "C" __global__ void k(int* x) {{ x[0] = V; }}\\n'
{compile}
print("COMPILED", flush=True)
"""

GIVEN_DIR = {
    "compile(cache_dir=)": "cupy_rawcode.compile("
    "source, arch='sm_90', source_dir=sys.argv[1], cache_dir=sys.argv[2])",
    "set_store(make_store())": "cupy_rawcode.set_store(cupy_rawcode.make_store(sys.argv[2])); "
    "cupy_rawcode.RawModule(code=source, options=('-I' + sys.argv[1],)).compile(arch='sm_90')",
}


def files_under(root) -> list[str]:
    """Every file under ``root``, relative to it."""
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, names in os.walk(root) for f in names
    )


@pytest.mark.parametrize("how", GIVEN_DIR.values(), ids=list(GIVEN_DIR))
def test_a_compile_given_a_cache_directory_writes_nothing_to_the_environments(tmp_path, how):
    env_dir, given = tmp_path / "A", tmp_path / "B"
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "v.h").write_text("#define V 7\n")
    env = dict(os.environ, CUPY_RAWCODE_CACHE_DIR=str(env_dir))
    done = subprocess.run(
        [sys.executable, "-c", ELSEWHERE.format(compile=how), str(tmp_path / "inc"), str(given)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert files_under(env_dir) == [], "written to CUPY_RAWCODE_CACHE_DIR"
    kinds = {f.split(os.sep)[0] for f in files_under(given)}
    assert {"entries", "manifests", "toolchain"} <= kinds, kinds


def test_the_cache_directory_given_holds_only_inside_the_block(tmp_path):
    from cupy_rawcode.store import layout

    before = layout.cache_dir()
    with layout.using_cache_dir(tmp_path / "B"):
        assert layout.cache_dir() == tmp_path / "B"
        with layout.using_cache_dir(None):
            assert layout.cache_dir() == tmp_path / "B"
    assert layout.cache_dir() == before


# -- item 12: compile() is recorded and replayed ------------------------------------------------

RECORDED = '#include "w.h"\nextern "C" __global__ void k(int* x) { x[0] = W; }\n'


@pytest.mark.parametrize("target", ["cubin", "ptx"])
def test_compile_is_recorded_and_prebuild_rebuilds_it_for_a_later_hit(
    tmp_path, monkeypatch, target
):
    import cupy_rawcode
    from cupy_rawcode.hook import recording
    from cupy_rawcode.orchestrator import compiling as program
    from cupy_rawcode.parallel import prebuild

    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "w.h").write_text("#define W 3\n")
    rec = tmp_path / "record.jsonl"
    recording.start(rec)
    try:
        cupy_rawcode.compile(
            RECORDED, arch="sm_90", options=("-DX=1",), target=target,
            source_dir=str(inc), cache_dir=tmp_path / "first",
        )  # fmt: skip
    finally:
        recording.stop()
    (entry,) = recording.read(rec)
    assert entry["kind"] == "raw" and entry["source"] == RECORDED
    assert entry["options"] == ("-DX=1",) and entry["source_dir"] == str(inc)
    assert entry.get("target", "cubin") == target

    jobs = prebuild.record_jobs(str(rec), ["sm_90"])
    (outcome,) = prebuild.prebuild(jobs, workers=1, stream=io.StringIO())
    assert outcome.error is None and not outcome.hit, outcome.error

    def no_nvrtc(*args):
        raise AssertionError("compiled again: prebuild did not rebuild the recorded compile")

    monkeypatch.setattr(program, "_nvrtc_compile", no_nvrtc)
    code = cupy_rawcode.compile(
        RECORDED, arch="sm_90", options=("-DX=1",), target=target, source_dir=str(inc)
    )
    assert code is not None


def test_every_compile_is_recorded_once(tmp_path):
    import cupy_rawcode
    from cupy_rawcode.hook import recording

    rec = tmp_path / "record.jsonl"
    sources = [f'extern "C" __global__ void k(int* x) {{ x[0] = {n}; }}\n' for n in (1, 2, 1)]
    recording.start(rec)
    try:
        for source in sources:
            cupy_rawcode.compile(source, arch="sm_90", target="ptx")
    finally:
        recording.stop()
    assert [e["source"] for e in recording.read(rec)] == sources[:2]


CLI_BAD = [
    # (variable, value, what the error line must say), each through `cupy-rawcode cache stats`
    ("CUPY_RAWCODE_CACHE_MAX_SIZE", "1" + "0" * 400, "too large"),
    ("CUPY_RAWCODE_CACHE_DIR", "~no-such-user-here/x", "names no home"),
]


@pytest.mark.parametrize(("name", "value", "why"), CLI_BAD, ids=[c[0] for c in CLI_BAD])
def test_a_strange_value_is_an_error_naming_its_variable_never_a_traceback(
    tmp_path, name, value, why
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUPY_RAWCODE_")}
    env.update(CUPY_RAWCODE_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    env[name] = value
    done = subprocess.run(
        [sys.executable, "-m", "cupy_rawcode", "cache", "stats"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert name in done.stderr and why in done.stderr, done.stderr


def test_a_max_size_past_a_floats_range_is_named():
    from cupy_rawcode.ground import config

    with pytest.raises(ValueError, match="--max-size=.*too large"):
        config.parse_size("--max-size", "9" * 400)
