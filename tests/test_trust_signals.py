"""Ctrl-C and SIGTERM during a real NVRTC compile reach Python (issue 27, item 6).

NVRTC 12.9 installs its own SIGINT/SIGTERM handlers while it compiles, and a signal then ends
the process with status 4, printing nothing, running no ``finally`` and no ``atexit``. Each
case runs a child process that starts a compile of a CUB kernel (about a second here; the
source carries a fresh tag so that no cache, NVRTC's own included, can answer it), sends the
signal 0.3 s after the child says it starts, and reads what the child printed. Every child
runs under a timeout: a test never hangs. No GPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from conftest import CORPUS

from cupy_rawcode import cli

TIMEOUT = 60  # seconds: far beyond a compile here (about one); a hang never ends
DELAY = 0.3  # seconds from the child's START line to the signal

PRELUDE = """\
import atexit, sys
atexit.register(lambda: print("ATEXIT", flush=True))
"""

API = """\
import cupy_rawcode
source = open(sys.argv[1]).read()
print("START", flush=True)
try:
    cupy_rawcode.compile(source, arch="sm_90", target="ptx")
    print("DONE", flush=True)
finally:
    print("FINALLY", flush=True)
"""

IN_A_THREAD = """\
import threading, cupy_rawcode
source = open(sys.argv[1]).read()
worker = threading.Thread(
    target=cupy_rawcode.compile, args=(source,), kwargs=dict(arch="sm_90", target="ptx"),
    daemon=True,
)
print("START", flush=True)
try:
    worker.start()
    worker.join()
    print("DONE", flush=True)
finally:
    print("FINALLY", flush=True)
"""

TERM_RAISES = """\
import signal
def stop(signum, frame):
    raise SystemExit(143)
signal.signal(signal.SIGTERM, stop)
"""


def fresh_kernel(tmp_path) -> str:
    """A CUB kernel no cache has seen: block_reduce.cu with a tag of its own."""
    path = tmp_path / "k.cu"
    tag = uuid.uuid4().hex
    path.write_text((CORPUS / "block_reduce.cu").read_text() + f"__device__ int tag_{tag};\n")
    return str(path)


def interrupted(argv: list[str], signum: int, tmp_path, env=None) -> tuple[int, str]:
    """(exit status, stdout and stderr together) of a child sent ``signum`` DELAY seconds after
    its first line (START); fails the test when it does not exit in TIMEOUT seconds."""
    env = dict(os.environ, **(env or {}))
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        time.sleep(DELAY)
        proc.send_signal(signum)
        rest, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the child was still running {TIMEOUT} s after the signal")
    return proc.returncode, first + rest


def script(tmp_path, *parts: str) -> str:
    """The child's script, made of ``parts``, written under tmp_path; returns its path."""
    path = tmp_path / "child.py"
    path.write_text("".join(textwrap.dedent(p) for p in parts))
    return str(path)


@pytest.mark.parametrize("overlap", ["1", "0"], ids=["overlap", "no-overlap"])
def test_ctrl_c_during_a_compile_raises_keyboard_interrupt(tmp_path, overlap):
    child = script(tmp_path, PRELUDE, API)
    env = {"CUPY_RAWCODE_OVERLAP": overlap}
    rc, out = interrupted([child, fresh_kernel(tmp_path)], signal.SIGINT, tmp_path, env)
    assert "DONE" not in out, "the compile ended before the signal: no test"
    assert "Traceback" in out and "KeyboardInterrupt" in out, out
    assert "FINALLY" in out and "ATEXIT" in out, out
    assert rc == -signal.SIGINT, out  # Python's own exit for an unhandled KeyboardInterrupt


def test_ctrl_c_while_another_thread_compiles_interrupts_the_main_thread(tmp_path):
    child = script(tmp_path, PRELUDE, IN_A_THREAD)
    rc, out = interrupted([child, fresh_kernel(tmp_path)], signal.SIGINT, tmp_path)
    assert "DONE" not in out, "the compile ended before the signal: no test"
    assert "KeyboardInterrupt" in out and "FINALLY" in out and "ATEXIT" in out, out
    assert rc == -signal.SIGINT, out


def test_ctrl_c_during_a_cli_compile_exits_130(tmp_path):
    argv = ["compile", fresh_kernel(tmp_path), "--arch", "sm_90", "--target", "ptx"]
    argv += ["-o", str(tmp_path / "k.ptx")]
    rc, out = interrupted(["-c", CLI, *argv], signal.SIGINT, tmp_path)
    assert rc == cli.EXIT_INTERRUPTED, out
    assert "cupy-rawcode: interrupted" in out, out
    assert "Traceback" not in out, out


# the command line as its entry point runs it, after one START line (the CLI prints nothing
# before it compiles), so that the signal lands while it compiles
CLI = (
    "import sys; from cupy_rawcode import cli; print('START', flush=True); "
    "sys.exit(cli.main(sys.argv[1:]))"
)


def test_sigterm_during_a_compile_ends_the_process_by_sigterm(tmp_path):
    child = script(tmp_path, PRELUDE, API)
    rc, out = interrupted([child, fresh_kernel(tmp_path)], signal.SIGTERM, tmp_path)
    assert "DONE" not in out, "the compile ended before the signal: no test"
    assert rc == -signal.SIGTERM, out  # Python's default for SIGTERM, not NVRTC's status 4


def test_sigterm_during_a_compile_runs_the_programs_own_handler(tmp_path):
    child = script(tmp_path, PRELUDE, TERM_RAISES, API)
    rc, out = interrupted([child, fresh_kernel(tmp_path)], signal.SIGTERM, tmp_path)
    assert "DONE" not in out, "the compile ended before the signal: no test"
    assert "FINALLY" in out and "ATEXIT" in out, out
    assert rc == 143, out
