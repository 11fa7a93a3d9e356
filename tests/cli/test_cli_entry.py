"""Small things of the command (review H, item 6), each failing before its fix:
``python -m cupy_rawcode`` runs the command as the script does (it was "No module named
cupy_rawcode.__main__"); a compile error's source excerpt shows each line once when errors share
a line or sit close together (the excerpt was printed once per error); ``bundle export
--prebuilt`` names a prebuilt.keys that is no regular file (it said "no prebuild recorded")."""

import os
import subprocess
import sys

import pytest

import cupy_rawcode
from cupy_rawcode import __version__, cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cupy_rawcode.__file__)))  # the package's


def _python(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


MODULE_RUNS = {
    "--version": (["--version"], 0, f"cupy-rawcode {__version__}"),
    "exit status of a missing file": (["bundle", "info", "no-such.bundle"], 4, "no-such.bundle"),
    "a usage error": (["no-such-command"], 2, "no-such-command"),
}


@pytest.mark.parametrize("argv, rc, words", MODULE_RUNS.values(), ids=MODULE_RUNS.keys())
def test_python_m_cupy_rawcode_runs_the_command(tmp_path, argv, rc, words):
    ran = _python("-m", "cupy_rawcode", *argv, cwd=tmp_path)
    assert ran.returncode == rc, ran.stderr
    assert words in ran.stdout + ran.stderr and "Traceback" not in ran.stderr
    # the package itself never imports its __main__ (only -m runs it)
    probe = (
        "import sys, cupy_rawcode, cupy_rawcode.cli; print('cupy_rawcode.__main__' in sys.modules)"
    )
    assert _python("-c", probe).stdout.strip() == "False"


BAD = "this is not C++;"  # two errors on its line: '"this" may only be used ...', 'expected ;'
EXCERPTS = {
    "two errors on one line": ([2], [2]),
    "errors on adjacent lines": ([2, 3], [2, 3]),
    "excerpts that overlap": ([2, 5], [2, 5]),
    "errors two lines apart": ([2, 4], [2, 4]),
}


@pytest.mark.parametrize("bad_lines, marked", EXCERPTS.values(), ids=EXCERPTS.keys())
def test_a_compile_error_shows_each_source_line_once(capsys, tmp_path, bad_lines, marked):
    lines = ["// kernel"] + [f"int v{i} = {i};" for i in range(2, 9)]
    for n in bad_lines:
        lines[n - 1] = f'extern "C" __global__ void k{n}(float* x) {{ {BAD} }}'
    path = tmp_path / "bad.cu"
    path.write_text("\n".join(lines) + "\n")
    rc = cli.main(["compile", str(path), "--arch", "sm_90"])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_COMPILE
    excerpt = err.split("\nsource:\n", 1)[1].split("\n\noptions:", 1)[0]
    numbers = [int(x.split("|")[0].strip(" >")) for x in excerpt.splitlines() if "|" in x]
    assert len(numbers) == len(set(numbers)), excerpt  # each line once
    assert numbers == sorted(numbers)
    shown = [int(x.split("|")[0].strip(" >")) for x in excerpt.splitlines() if x.startswith(">")]
    assert shown == marked


PREBUILT_KEYS = {
    "a FIFO": (lambda p: os.mkfifo(p), "a FIFO (named pipe)"),
    "a directory": (lambda p: os.mkdir(p), "a directory"),
    "a symbolic link": (lambda p: os.symlink("/dev/null", p), "a symbolic link"),
}


@pytest.mark.parametrize("make, words", PREBUILT_KEYS.values(), ids=PREBUILT_KEYS.keys())
def test_bundle_export_prebuilt_names_a_prebuilt_keys_that_is_no_file(
    capsys, tmp_path, make, words
):
    from cupy_rawcode.store import maintenance
    from cupy_rawcode.store.layout import claim

    root = maintenance.disk().root
    root.mkdir(parents=True)
    assert claim(root)
    make(root / "prebuilt.keys")
    rc = cli.main(["bundle", "export", "--prebuilt", str(tmp_path / "out.bundle")])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR
    assert f"prebuilt.keys is {words}, not a regular file" in err
    assert "no prebuild recorded" not in err
    assert not (tmp_path / "out.bundle").exists()
