"""The command line as a tool: --version, one exit status per kind of failure (EXIT_CODES, the
same in --help and the README), unknown flags refused on every subcommand, zeroing the hit and
miss counts, Ctrl-C in prebuild (one line, status 130, workers stopped), include chains that
name the file, and one header count across deps, key, compile and the logger. No GPU."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cupy_rawcode import __version__, cli

README = Path(__file__).resolve().parents[2] / "README.md"
KERNEL = 'extern "C" __global__ void k(int* a) { a[0] = 1; }\n'


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def files(tmp_path):
    """Small inputs, one per failure: {name without its extension: path}."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "mid.h").write_text('#include "absent.h"\n#define V 7\n')
    (tmp_path / "inc" / "user.h").write_text("#define V 7\n")
    texts = {
        "ok.cu": KERNEL,
        "syntax.cu": 'extern "C" __global__ void k(int* a) { a[0] = undefined_name; }\n',
        "missing.cu": '#include "absent.h"\n' + KERNEL,
        "chain.cu": "// two lines\n#include <mid.h>\n" + KERNEL,
        "user.cu": '#include <user.h>\nextern "C" __global__ void k(int* a) { a[0] = V; }\n',
    }
    out = {}
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
        out[name.split(".")[0]] = tmp_path / name
    (tmp_path / "latin1.cu").write_bytes(b"// caf\xe9\n" + KERNEL.encode())
    out["latin1"] = tmp_path / "latin1.cu"
    (tmp_path / "broken.bundle").write_bytes(b"not a bundle")
    out["broken"] = tmp_path / "broken.bundle"
    out["absent"] = tmp_path / "absent.cu"
    out["inc"] = tmp_path / "inc"
    return out


def test_exit_codes_are_distinct_and_the_readme_lists_them_all():
    codes = [code for code, _ in cli.EXIT_CODES]
    assert len(set(codes)) == len(codes)
    assert {cli.EXIT_OK, cli.EXIT_COMPILE, cli.EXIT_USAGE} <= set(codes)
    assert {cli.EXIT_MISSING_HEADER, cli.EXIT_ERROR, cli.EXIT_INTERRUPTED} <= set(codes)
    section = README.read_text(encoding="utf-8").split("\n## Command line\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    listed = [int(c) for c in re.findall(r"^\| `(\d+)` \|", section, re.M)]
    assert listed == codes


def test_help_lists_the_exit_codes(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == cli.EXIT_OK
    for code, what in cli.EXIT_CODES:
        assert re.search(rf"^ *{code}  {re.escape(what.split()[0])}", out, re.M), (code, out)


def test_version(capsys):
    rc, out, _ = run(capsys, "--version")
    assert rc == cli.EXIT_OK and out.strip() == f"cupy-rawcode {__version__}"


@pytest.mark.parametrize(
    "argv,status,said",
    [
        (["deps", "{ok}"], cli.EXIT_OK, "ok.cu: 1 headers (fast mode)"),
        (["compile", "{syntax}", "--arch", "sm_90"], cli.EXIT_COMPILE, "undefined_name"),
        (["compile", "{ok}"], cli.EXIT_USAGE, "the following arguments are required: --arch"),
        (["frobnicate"], cli.EXIT_USAGE, "invalid choice: 'frobnicate'"),
        (["compile", "{ok}", "--arch", "sm_9x"], cli.EXIT_USAGE, "sm_9x"),
        (["compile", "{latin1}", "--arch", "sm_90"], cli.EXIT_USAGE, "latin1.cu:1:7: not UTF-8"),
        (["compile", "{missing}", "--arch", "sm_90"], cli.EXIT_MISSING_HEADER, '"absent.h"'),
        (["deps", "{missing}"], cli.EXIT_MISSING_HEADER, '"absent.h"'),
        (["deps", "{missing}", "--exact"], cli.EXIT_MISSING_HEADER, '"absent.h"'),
        (["key", "{missing}", "--arch", "sm_90"], cli.EXIT_MISSING_HEADER, '"absent.h"'),
        (["compile", "{absent}", "--arch", "sm_90"], cli.EXIT_ERROR, "No such file"),
        (["deps", "{inc}"], cli.EXIT_ERROR, "a directory, not a regular file"),
        (["bundle", "info", "{broken}"], cli.EXIT_ERROR, "broken.bundle"),
    ],
)
def test_each_failure_has_its_exit_status(capsys, files, argv, status, said):
    rc, out, err = run(capsys, *(a.format(**files) for a in argv))
    assert rc == status, (out, err)
    assert said in (out if status == cli.EXIT_OK else err)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["deps", "{ok}"],
        ["key", "{ok}", "--arch", "sm_90"],
        ["env"],
        ["compile", "{ok}", "--arch", "sm_90"],
        ["cache", "stats"],
        ["prebuild", "{ok}", "--arch", "sm_90"],
        ["bundle", "info", "{broken}"],
    ],
)
@pytest.mark.parametrize("flag", ["--frobnicate", "-x", "--wyh"])
def test_unknown_flags_are_refused_on_every_subcommand(capsys, files, argv, flag):
    """Flags go to NVRTC only on the subcommands that take its options, and only the ones it
    accepts; every other subcommand refuses them. Nothing is compiled."""
    rc, out, err = run(capsys, *(a.format(**files) for a in argv), flag)
    assert rc == cli.EXIT_USAGE, (out, err)
    assert flag in err and f"cupy-rawcode {argv[0]}: error:" in err
    assert out == ""


@pytest.mark.parametrize(
    "argv,said",
    [
        (["deps", "{ok}", "{user}"], "unrecognized arguments: {user}"),
        (["cache", "stats", "-DX=1"], "cache takes no NVRTC options"),
        (["cache", "list", "--zero"], "--zero goes with 'cache stats'"),
        (["deps", "{ok}", "-ftz=maybe"], "-ftz"),
        (["compile", "{ok}", "--arc", "sm_90"], "--arc"),  # never an abbreviation
    ],
)
def test_arguments_a_subcommand_cannot_take_are_usage_errors(capsys, files, argv, said):
    rc, out, err = run(capsys, *(a.format(**files) for a in argv))
    assert rc == cli.EXIT_USAGE and said.format(**files) in err, err


def test_nvrtc_options_pass_where_nvrtc_options_go(capsys, files):
    rc, out, _ = run(capsys, "deps", files["user"], "-I", files["inc"], "--use_fast_math")
    assert rc == cli.EXIT_OK and "user0:user.h" in out


def test_cache_stats_zero_resets_hits_and_misses(capsys, tmp_path):
    from cupy_rawcode.store.directory import DirectoryStore

    disk = DirectoryStore(tmp_path / "cache")
    for hit in (True, True, False):
        disk.record(hit)
    rc, out, _ = run(capsys, "cache", "stats", "--zero")
    assert rc == cli.EXIT_OK
    assert "hits      2\nmisses    1 (67% hits)" in out and "hits and misses zeroed" in out
    rc, out, _ = run(capsys, "cache", "stats")
    assert "hits      0\nmisses    0\n" in out
    disk.record(False)
    assert "hits      0\nmisses    1 (0% hits)" in run(capsys, "cache", "stats", "-z")[1]


# a Ctrl-C that lands while the command's modules load, made certain: importing one raises it
INTERRUPT_IMPORT = """
import sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "cupy_rawcode.cli.commands":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
from cupy_rawcode.cli import main  # as the cupy-rawcode script does

sys.exit(main(["env"]))
"""


def test_ctrl_c_while_the_command_loads_prints_one_line_and_exits_130(tmp_path):
    """The command's modules take ~0.1 s to import: an interrupt then is the command's too (one
    line, status 130), not a traceback from the script wrapper."""
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPT_IMPORT],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == cli.EXIT_INTERRUPTED, proc.stderr
    assert proc.stderr == "cupy-rawcode: interrupted\n" and proc.stdout == ""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Popen(process_group=) is 3.11's")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_in_prebuild_prints_one_line_and_exits_130(tmp_path, hung_nvrtc, jobs):
    """SIGINT to the process group, as a terminal's Ctrl-C sends it, while every compile hangs
    (in the process itself for -j 1, in worker processes for -j 2): one line, status 130, no
    traceback, and no worker left running."""
    env, marks = hung_nvrtc
    paths = []
    for i in range(3):
        (tmp_path / f"k{i}.cu").write_text(f"#include <cuda/std/cstdint>\n{KERNEL}// {i}\n")
        paths.append(f"k{i}.cu")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cupy_rawcode.cli", "prebuild", *paths, "--arch", "sm_90"]
        + ["-j", jobs],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,  # a group of its own, for killpg as a terminal's Ctrl-C
    )
    try:
        deadline = time.monotonic() + 120
        while len(os.listdir(marks)) < int(jobs) and proc.poll() is None:
            assert time.monotonic() < deadline, "the compiles never started"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == cli.EXIT_INTERRUPTED, (out, err)
    assert err == "cupy-rawcode: interrupted\n" and out == ""
    hung = [int(p) for p in os.listdir(marks) if int(p) != proc.pid]
    assert len(hung) == (0 if jobs == "1" else 2)
    for pid in hung:  # the workers: stopped by the parent before it exited
        assert not _alive(pid), f"worker {pid} still running"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, or a process that is gone, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    "argv",
    [
        ["deps", "{chain}", "-I", "{inc}"],
        ["deps", "{chain}", "-I", "{inc}", "--exact"],
        ["key", "{chain}", "-I", "{inc}", "--arch", "sm_90"],
        ["compile", "{chain}", "-I", "{inc}", "--arch", "sm_90"],
    ],
)
def test_include_chains_name_the_file(capsys, files, argv):
    rc, _, err = run(capsys, *(a.format(**files) for a in argv))
    assert rc == cli.EXIT_MISSING_HEADER
    assert "included from user0:mid.h:1\n  included from chain.cu:2\n" in err, err
    assert "<source>" not in err


def test_one_header_count_for_deps_key_compile_and_the_log(capsys, caplog, files):
    """The source's own header, the one it includes and the pre-included workaround header:
    deps, key --verbose, compile (miss and hit) and the logger say the same number."""
    from cupy_rawcode.kernel import build
    from cupy_rawcode.orchestrator.flow import request

    src, inc = files["user"], files["inc"]
    rc, out, _ = run(capsys, "deps", src, "-I", inc)
    counts = {"deps": int(re.search(r": (\d+) headers \(fast mode\)", out).group(1))}
    listed = [line for line in out.splitlines() if line.startswith("  ")]
    assert counts["deps"] == len(listed) and any("workaround.h" in h for h in listed)
    rc, out, _ = run(capsys, "key", src, "-I", inc, "--arch", "sm_90", "--verbose")
    counts["key"] = int(re.search(r": (\d+) headers$", out, re.M).group(1))
    for run_ in ("miss", "hit"):
        rc, out, _ = run(capsys, "compile", src, "-I", inc, "--arch", "sm_90")
        assert rc == cli.EXIT_OK and f": {run_} " in out
        counts[f"compile {run_}"] = int(re.search(r"headers +(\d+)", out).group(1))
    with caplog.at_level(logging.INFO, logger="cupy_rawcode"):
        opts, where = ("-I", str(inc)), str(src.parent)
        build(
            request(
                src.read_text(), arch="sm_90", options=opts, source_dir=where, source_name=src.name
            )
        )
    counts["log"] = int(re.search(r"\((\d+) headers", caplog.text).group(1))
    assert len(set(counts.values())) == 1, counts


@pytest.mark.parametrize("option", ["-time=t.csv", "--create-pch=k.pch", "--use-pch=k.pch"])
def test_prebuild_with_an_option_that_names_a_file_nvrtc_writes_is_a_usage_error(
    capsys, tmp_path, option
):
    """Nothing compiled with one is stored: prebuild says so, instead of 'full or read-only?'."""
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k() {}\n')
    named = tmp_path / option.partition("=")[2]
    option = option.replace("=", f"={tmp_path}/")
    code, _, err = run(capsys, "prebuild", str(tmp_path / "k.cu"), "--arch", "sm_90", option)
    assert code == 2 and option in err and "nothing to prebuild" in err
    assert not named.exists()  # not written by the check of the options either


# where CuPy 12's CUB include stands -> deps lists the closure with CCCL's CUB, as compile builds
MOVED_INCLUDE = "#include <cupy/cub/cub/block/block_load.cuh>\n"
MOVED_PLACES = {
    "outside any #if": MOVED_INCLUDE,
    "a HIP/CUDA split": "#ifdef __HIPCC__\n#include <hipcub/hipcub.hpp>\n#else\n"
    + MOVED_INCLUDE
    + "#endif\n",
}


@pytest.mark.parametrize("place", sorted(MOVED_PLACES))
def test_deps_answers_a_moved_header_as_a_compile_does(capsys, tmp_path, place):
    path = tmp_path / "k.cu"
    path.write_text(MOVED_PLACES[place] + "__global__ void k() {}\n")
    with pytest.warns(UserWarning, match="cupy/cub"):
        rc, out, err = run(capsys, "deps", str(path))
    assert rc == cli.EXIT_OK, err
    assert "cub/block/block_load.cuh" in out and "(fast mode)" in out
