"""A compile nobody waits for any more never keeps the process alive, and no input is read
from a file that can block (a FIFO as a header or as the source): the process reports the
error and exits. Child processes under a timeout; no GPU needed.

Where the old code waited (a ThreadPoolExecutor's worker joined at exit, a read on a FIFO),
the wait never ends here: the speculative compile hangs forever (conftest.hung_nvrtc), or NVRTC
itself blocks on the FIFO. The gap between the first output and the exit is measured, and held
to the issue's bound of a second; compile times are never asserted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from cupy_rawcode import cli

TIMEOUT = 60  # seconds: far beyond a normal run (well under one); a hang never ends


def run_timed(argv: list[str], cwd, env=None, python=("-m", "cupy_rawcode.cli")):
    """(exit status, stdout and stderr together, seconds from the first line of output to the
    exit) of ``python -m cupy_rawcode.cli ARGV``; fails the test when it does not exit."""
    proc = subprocess.Popen(
        [sys.executable, *python, *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[tuple[float, str]] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic(), line))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        proc.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join(5)
        pytest.fail(
            f"still running after {TIMEOUT} s; its output:\n" + "".join(t for _, t in lines)
        )
    exited = time.monotonic()
    reader.join(5)
    assert lines, "no output"
    return proc.returncode, "".join(t for _, t in lines), exited - lines[0][0]


@pytest.fixture
def fifo_tree(tmp_path):
    """main.cu including "fifo.h", a FIFO in inc/ (found through -I)."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    (tmp_path / "inc").mkdir()
    os.mkfifo(tmp_path / "inc" / "fifo.h")
    (tmp_path / "main.cu").write_text(
        '#include "fifo.h"\nextern "C" __global__ void k(int* a) { a[0] = 1; }\n'
    )
    return tmp_path


@pytest.mark.parametrize("subcommand", ["compile", "deps", "key"])
def test_a_fifo_header_is_refused_with_its_chain_and_the_process_exits(fifo_tree, subcommand):
    argv = [subcommand, "main.cu", "-I", "inc"] + (["--arch", "sm_90"] * (subcommand != "deps"))
    rc, out, gap = run_timed(argv, fifo_tree)
    fifo = str(fifo_tree / "inc" / "fifo.h")
    assert rc == cli.EXIT_ERROR, out
    assert f"cannot read {fifo} (a FIFO (named pipe), not a regular file)" in out
    assert "included from main.cu:1" in out
    assert gap < 1.0, f"exited {gap:.2f} s after its error:\n{out}"


RAWMODULE = """
import sys
from cupy_rawcode import RawModule
try:
    RawModule(path="inc/fifo.h.cu").compile(arch="sm_90")
except OSError as e:
    sys.exit(f"OSError: {e}")
"""


@pytest.mark.parametrize(
    "python,argv,said",
    [
        (("-m", "cupy_rawcode.cli"), ["compile", "inc/fifo.h", "--arch", "sm_90"], "inc/fifo.h"),
        (("-m", "cupy_rawcode.cli"), ["prebuild", "inc/fifo.h", "--arch", "sm_90"], "fifo.h"),
        (("-m", "cupy_rawcode.cli"), ["bundle", "info", "inc/fifo.h"], "inc/fifo.h"),
        (("-c", RAWMODULE), [], "'inc/fifo.h.cu'"),
    ],
)
def test_a_fifo_named_as_the_source_is_refused(fifo_tree, python, argv, said):
    """The CLI's FILE, prebuild's PATHS, a bundle, RawModule(path=...)."""
    os.mkfifo(fifo_tree / "inc" / "fifo.h.cu")
    rc, out, gap = run_timed(argv, fifo_tree, python=python)
    assert rc == (1 if python[0] == "-c" else cli.EXIT_ERROR), out
    assert said in out and "a FIFO (named pipe), not a regular file" in out, out
    assert gap < 1.0, f"exited {gap:.2f} s after its error:\n{out}"


KERNEL = '#include "user.h"\nextern "C" __global__ void k(int* a) { a[0] = V; }\n'


@pytest.mark.parametrize(
    "case,status,said",
    [
        ("missing header", cli.EXIT_MISSING_HEADER, 'cannot open source file "absent.h"'),
        ("hit without a manifest", cli.EXIT_OK, "hit (disk)"),
    ],
)
def test_exit_never_waits_for_a_compile_started_early(tmp_path, hung_nvrtc, case, status, said):
    """The compile started before keying (overlap) hangs forever; the error, or the stored
    entry, answers first, and the process exits without waiting for it."""
    env, marks = hung_nvrtc
    (tmp_path / "user.h").write_text("#define V 7\n")
    (tmp_path / "k.cu").write_text(KERNEL)
    if case == "missing header":
        (tmp_path / "user.h").write_text('#include "absent.h"\n#define V 7\n')
    else:  # a stored entry, and no manifest: a likely miss, so the compile starts early
        assert cli.main(["compile", str(tmp_path / "k.cu"), "--arch", "sm_90"]) == cli.EXIT_OK
        cache = tmp_path / "cache"
        assert cache == type(cache)(os.environ["CUPY_RAWCODE_CACHE_DIR"])
        for d in ("manifests", "index"):
            shutil.rmtree(cache / d, ignore_errors=True)
    rc, out, gap = run_timed(["compile", "k.cu", "--arch", "sm_90"], tmp_path, env)
    assert os.listdir(marks), "no compile started early: the case tests nothing"
    assert rc == status and said in out, out
    assert gap < 1.0, f"exited {gap:.2f} s after its first output:\n{out}"
