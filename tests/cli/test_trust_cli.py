"""Issue 27, items 5, 7 and 8 and the ccache options: what records, manifests, a full disk and a
truncated bundle make the CLI do. Each table row failed before its fix (a traceback, a file read
outside the record's directory, a silent exit 0, argparse's "SUBCOMMAND is required")."""

import json
import os
import subprocess
import sys

import pytest

from cupy_rawcode import cli
from cupy_rawcode.cli.parser import ccache_hint
from cupy_rawcode.hook import recording
from cupy_rawcode.store.memory import MemoryStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }'
SECRET = "int SECRET_LINE_4711 = oops oops;"  # what must never appear in a message


def run_cli(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def record_line(**fields) -> str:
    entry = {"schema": 1, "kind": "raw", "source": KERNEL, "options": [], **fields}
    return json.dumps(entry)


# ------------------------------------------------------------------ item 8: one schema

BAD_RECORD_LINES = {
    "cupy entry without cooperative": (
        record_line(kind="cupy"),
        "app.rec:2: cooperative is missing",
    ),
    "options as a string": (
        record_line(options="-DX=1"),
        "app.rec:2: options must be a list of strings, got str",
    ),
    "name_expressions as a string": (
        record_line(name_expressions="k<float>"),
        "app.rec:2: name_expressions must be a list of strings or null, got str",
    ),
    "an option that is a number": (
        record_line(options=["-DX", 5]),
        "app.rec:2: options must be a list of strings, got list containing int",
    ),
    "source missing": (
        json.dumps({"schema": 1, "kind": "raw", "options": []}),
        "app.rec:2: source is missing",
    ),
    "unknown kind": (record_line(kind="jit"), 'app.rec:2: kind must be "cupy" or "raw", got "jit"'),
    "a list, not an object": ("[1, 2]", "app.rec:2: expected a JSON object, got list"),
    "source_name with a directory": (
        record_line(source_name="../k.cu"),
        "app.rec:2: source_name must be a file name (no directory), got str",
    ),
    "nested 100,000 levels": ("[" * 100_000 + "]" * 100_000, "app.rec:2: nested deeper than"),
    "not UTF-8": ('{"schema": 1, "x": "\udcff"}', "app.rec:2: not UTF-8 text"),
}


@pytest.mark.parametrize("line, message", BAD_RECORD_LINES.values(), ids=BAD_RECORD_LINES.keys())
def test_a_bad_record_line_is_one_message_and_exit_2(capsys, tmp_path, line, message):
    rec = tmp_path / "app.rec"
    rec.write_bytes(
        record_line().encode() + b"\n" + line.encode("utf-8", "surrogateescape") + b"\n"
    )
    rc, _, err = run_cli(capsys, "prebuild", "--manifest", rec, "--arch", "sm_90", "-j", "1")
    assert (rc, "Traceback" in err) == (cli.EXIT_USAGE, False), err
    assert message in err


BAD_MANIFESTS = {
    "file is a number": ('[{"file": 5}]', "m.json[0]: file must be a string, got int"),
    "arch as a string": (
        '[{"code": "x", "arch": "sm_90"}]',
        "m.json[0]: arch must be a list of strings, got str",
    ),
    "name_expressions as a string": (
        '[{"code": "x", "name_expressions": "k"}]',
        "m.json[0]: name_expressions must be a list of strings, got str",
    ),
    "an entry that is a string": ('["k.cu"]', "m.json[0]: expected a JSON object, got str"),
    "nested 100,000 levels": ("[" * 100_000 + "]" * 100_000, "m.json: nested deeper than 32"),
}


@pytest.mark.parametrize("text, message", BAD_MANIFESTS.values(), ids=BAD_MANIFESTS.keys())
def test_a_bad_manifest_is_one_message_and_exit_2(capsys, tmp_path, text, message):
    (tmp_path / "m.json").write_text(text)
    rc, _, err = run_cli(capsys, "prebuild", tmp_path / "m.json", "--arch", "sm_90", "-j", "1")
    assert (rc, "Traceback" in err) == (cli.EXIT_USAGE, False), err
    assert message in err


def test_depth_ignores_brackets_inside_strings():
    from cupy_rawcode.ground import schema

    assert schema.depth('[{"a": "[[[[{{{{"}]') == 2
    assert schema.depth(r'["\"[[[", []]') == 2


def test_a_bad_record_line_through_the_command_line_exits_2(tmp_path):
    """End to end: a new process, the installed entry point's module."""
    rec = tmp_path / "app.rec"
    rec.write_text(record_line(kind="cupy") + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "cupy_rawcode.cli", "prebuild", "--manifest", str(rec)]
        + ["--arch", "sm_90"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 2 and "app.rec:1: cooperative is missing" in out.stderr
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------------ item 5: paths stay inside


@pytest.fixture
def layout(tmp_path):
    """tmp/app/ (where records and manifests lie), tmp/inc/x.h beside it, tmp/secret.h."""
    (tmp_path / "app").mkdir()
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "x.h").write_text("#define X 1\n")
    (tmp_path / "secret.h").write_text(SECRET + "\n")
    return tmp_path


ESCAPING_RECORDS = {
    "-I{record}/..": record_line(
        source='#include "secret.h"\n' + KERNEL, options=["-I{record}/.."]
    ),
    "-I {record}/.. as two items": record_line(
        source='#include "secret.h"\n' + KERNEL, options=["-I", "{record}/.."]
    ),
    "absolute --pre-include": record_line(options=["--pre-include={tmp}/secret.h"]),
    "absolute -include": record_line(options=["-include", "{tmp}/secret.h"]),
    "relative -isystem": record_line(
        source='#include "secret.h"\n' + KERNEL, options=["-isystem.."]
    ),
    "pre-include name climbing out": record_line(options=["--pre-include=../secret.h"]),
    "source_dir above the record": record_line(
        source='#include "secret.h"\n' + KERNEL, source_dir="{record}/.."
    ),
}


@pytest.mark.parametrize("line", ESCAPING_RECORDS.values(), ids=ESCAPING_RECORDS.keys())
def test_a_record_naming_a_path_outside_is_refused_without_its_contents(capsys, layout, line):
    rec = layout / "app" / "app.rec"
    rec.write_text(line.replace("{tmp}", str(layout)) + "\n")
    rc, _, err = run_cli(capsys, "prebuild", "--manifest", rec, "--arch", "sm_90", "-j", "1")
    assert rc == cli.EXIT_USAGE and "app.rec:1:" in err, err
    assert "SECRET_LINE" not in err and "--root" in err


ESCAPING_MANIFESTS = {
    "file above the manifest": [{"file": "../secret.h"}],
    "absolute file": [{"file": "{tmp}/secret.h"}],
    "-I above the manifest": [{"code": '#include "secret.h"\n' + KERNEL, "options": ["-I.."]}],
}


@pytest.mark.parametrize("items", ESCAPING_MANIFESTS.values(), ids=ESCAPING_MANIFESTS.keys())
def test_a_manifest_naming_a_path_outside_is_refused_without_its_contents(capsys, layout, items):
    manifest = layout / "app" / "m.json"
    manifest.write_text(json.dumps(items).replace("{tmp}", str(layout)))
    rc, _, err = run_cli(capsys, "prebuild", manifest, "--arch", "sm_90", "-j", "1")
    assert rc == cli.EXIT_USAGE and "m.json[0]:" in err, err
    assert "SECRET_LINE" not in err and "--root" in err


def test_a_root_allows_a_directory_beside_the_record(layout):
    rec = layout / "app" / "app.rec"
    rec.write_text(record_line(options=["-I{record}/../inc", f"-I{layout}/inc"]) + "\n")
    with pytest.raises(ValueError, match="--root"):
        recording.read(rec)
    [entry] = recording.read(rec, [layout / "inc"])
    assert entry["options"] == (f"-I{layout}/inc", f"-I{layout}/inc")


def test_paths_inside_the_record_directory_need_no_root(layout):
    (layout / "app" / "inc").mkdir()
    rec = layout / "app" / "app.rec"
    lines = [
        record_line(options=["-I{record}/inc", "-Iinc", "--pre-include=cuda_fp16.h"]),
        record_line(source_dir="{record}", source_name="k.cu"),
    ]
    rec.write_text("\n".join(lines) + "\n")
    first, second = recording.read(rec)
    inc = str(layout / "app" / "inc")
    assert first["options"] == (f"-I{inc}", f"-I{inc}", "--pre-include=cuda_fp16.h")
    assert second["source_dir"] == str(layout / "app")


def test_a_symbolic_link_out_of_the_record_directory_is_refused(layout):
    from cupy_rawcode.ground import confine

    os.symlink(layout / "inc", layout / "app" / "link")
    rec = layout / "app" / "app.rec"
    rec.write_text(record_line(options=["-I{record}/link"]) + "\n")
    with pytest.raises(confine.EscapeError, match="leads to .*inc"):
        recording.read(rec)


CONFINE_CASES = {
    # value, root given, allowed
    "inside": ("sub/dir", False, True),
    "the directory itself": (".", False, True),
    "climbing out": ("../x", False, False),
    "a sibling sharing a prefix": ("../app2", False, False),
    "absolute without a root": ("/usr/include", False, False),
    "absolute under the root": ("{tmp}/inc", True, True),
    "{record} form climbing out": ("{record}/../../etc", False, False),
}


@pytest.mark.parametrize("value, rooted, allowed", CONFINE_CASES.values(), ids=CONFINE_CASES.keys())
def test_the_confinement_rule(tmp_path, value, rooted, allowed):
    from cupy_rawcode.ground import confine

    base = tmp_path / "app"
    base.mkdir()
    roots = [str(tmp_path / "inc")] if rooted else []
    value = value.replace("{tmp}", str(tmp_path))
    if allowed:
        assert confine.confine(value, str(base), roots, "x", "w").startswith(str(tmp_path))
    else:
        with pytest.raises(confine.EscapeError):
            confine.confine(value, str(base), roots, "x", "w")


def test_prebuild_of_a_manifest_reading_a_file_outside_end_to_end(layout):
    """End to end, real NVRTC when allowed: refused without --root, compiled with it."""
    manifest = layout / "app" / "m.json"
    manifest.write_text(json.dumps([{"file": "../k.cu", "options": ["-I../inc"]}]))
    (layout / "k.cu").write_text('#include "x.h"\n' + KERNEL)
    cmd = [sys.executable, "-m", "cupy_rawcode.cli", "prebuild", str(manifest), "--arch", "sm_90"]
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "allow it with --root DIR" in out.stderr, out.stderr
    out = subprocess.run(cmd + ["--root", str(layout)], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "1 of 1 succeeded" in out.stdout, out.stderr


def test_warmup_takes_a_root_for_a_record(layout):
    import cupy_rawcode

    rec = layout / "app" / "app.rec"
    rec.write_text(record_line(options=["-I{record}/../inc"]) + "\n")
    refused = cupy_rawcode.warmup(str(rec), arch="sm_90", workers=1)
    assert not refused.ok and "--root" in str(refused)
    allowed = cupy_rawcode.warmup(str(rec), arch="sm_90", workers=1, root=layout)
    assert allowed.ok, str(allowed)


# ------------------------------------------------------------------ item 7: no silent success


class FullDisk(MemoryStore):
    """A lasting layer whose writes vanish, as DirectoryStore's do on a full disk (it warns)."""

    name = "disk"
    lasting = True

    def put(self, key, data):
        pass


@pytest.fixture
def full_disk():
    from cupy_rawcode.store import Levels, set_store

    set_store(Levels([MemoryStore(16), FullDisk()]))
    yield
    set_store(None)


def test_prebuild_on_a_full_disk_fails_and_says_not_stored(capsys, tmp_path, full_disk):
    for name in ("a", "b"):
        (tmp_path / f"{name}.cu").write_text(KERNEL.replace("k(", f"{name}("))
    rc, out, err = run_cli(
        capsys, "prebuild", tmp_path / "a.cu", tmp_path / "b.cu", "--arch", "sm_90", "-j", "1"
    )
    assert rc == cli.EXIT_COMPILE, out + err
    assert "0 of 2 succeeded" in out and "(2 compiled, but not stored)" in out
    assert err.count("compiled, but not stored in") == 2 and "a.cu (sm_90)" in err


def test_the_summary_counts_what_was_not_stored():
    from cupy_rawcode.cli.commands import _prebuild_summary

    assert _prebuild_summary(3, 1, 0, 1) == (
        "prebuild: 2 of 3 succeeded (1 compiled, 1 already cached), 1 failed"
    )
    assert _prebuild_summary(3, 0, 2, 1).endswith(
        "1 of 3 succeeded (0 compiled, 1 already cached), 0 failed (2 compiled, but not stored)"
    )


def test_prebuild_on_a_full_disk_end_to_end(tmp_path):
    """A real compile in a new process whose os.replace fails with ENOSPC: exit 1."""
    (tmp_path / "k.cu").write_text(KERNEL)
    script = (
        "import errno, os, sys\n"
        "def full(*a, **k): raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "os.replace = full\n"
        "from cupy_rawcode.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, "prebuild", str(tmp_path / "k.cu"), "--arch", "sm_90"]
        + ["-j", "1"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "c")},
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "0 of 1 succeeded" in out.stdout and "not stored" in out.stdout
    assert "No space left on device" in out.stderr


def _bundle(tmp_path, n=2):
    from cupy_rawcode.store.bundle import write_bundle
    from cupy_rawcode.store.entry import encode

    keys = [f"{i:02d}" * 32 for i in range(n)]
    path = tmp_path / "app.bundle"
    write_bundle(path, [(k, encode(k, b"x" * 500, {"arch": "sm_90"})) for k in keys])
    return path, keys


def test_bundle_info_on_a_truncated_bundle_names_it_broken(capsys, tmp_path):
    path, keys = _bundle(tmp_path)
    path.write_bytes(path.read_bytes()[:-200])  # the last entry cut off
    rc, out, err = run_cli(capsys, "bundle", "info", path)
    assert rc == cli.EXIT_ERROR
    assert f"{keys[-1]}  BROKEN" in out and "2 entries" in out and "1 broken" in out
    assert "app.bundle: truncated: 1 of 2 entries" in err


def test_bundle_info_on_a_bundle_cut_after_its_index(capsys, tmp_path):
    from cupy_rawcode.store.bundle import MAGIC

    path, keys = _bundle(tmp_path)
    data = path.read_bytes()
    head = len(MAGIC) + 8 + int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
    path.write_bytes(data[:head])
    rc, out, err = run_cli(capsys, "bundle", "info", path)
    assert rc == cli.EXIT_ERROR and "2 entries" in out and "2 broken" in out
    assert "truncated: 2 of 2" in err


def test_a_truncated_bundle_layer_warns_once_naming_it(tmp_path, caplog):
    from cupy_rawcode.store.bundle import BundleStore

    path, keys = _bundle(tmp_path)
    path.write_bytes(path.read_bytes()[:-200])
    store = BundleStore(path)
    assert store.get(keys[0]) is not None and store.get(keys[1]) is None
    assert store.get(keys[1]) is None
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert len(warnings) == 1 and str(path) in warnings[0]


def test_bundle_info_on_a_truncated_bundle_end_to_end(tmp_path):
    path, keys = _bundle(tmp_path)
    path.write_bytes(path.read_bytes()[:-200])
    out = subprocess.run(
        [sys.executable, "-m", "cupy_rawcode.cli", "bundle", "info", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 4 and "app.bundle: truncated" in out.stderr


# ------------------------------------------------------------------ ccache's options

CCACHE = {  # what a ccache or sccache user types -> the command the hint names
    "-s": (["-s"], "cache stats"),
    "--show-stats": (["--show-stats"], "cache stats"),
    "-z": (["-z"], "cache stats -z"),
    "--zero-stats": (["--zero-stats"], "cache stats -z"),
    "-M 5G": (["-M", "5G"], "cache prune --max-size 5G"),
    "-M5G": (["-M5G"], "cache prune --max-size 5G"),
    "--max-size=5G": (["--max-size=5G"], "cache prune --max-size 5G"),
    "--show-config": (["--show-config"], "env"),
    "-C": (["-C"], "cache clear"),
    "--clear": (["--clear"], "cache clear"),
    "cache -s": (["cache", "-s"], "cache stats"),
}


@pytest.mark.parametrize("argv, ours", CCACHE.values(), ids=CCACHE.keys())
def test_a_ccache_option_gets_a_hint_and_exit_2(capsys, argv, ours):
    rc, _, err = run_cli(capsys, *argv)
    assert rc == cli.EXIT_USAGE
    assert f"(a ccache option); did you mean `cupy-rawcode {ours}`?" in err
    assert "required" not in err  # not argparse's "SUBCOMMAND is required"


def test_the_hint_leaves_our_own_command_lines_alone():
    for argv in (
        ["cache", "stats", "-z"],
        ["cache", "prune", "--max-size", "1G"],
        ["cache", "list", "-l"],
        ["compile", "k.cu", "--arch", "sm_90", "-DM=1"],
        ["--version"],
    ):
        assert ccache_hint(argv) is None, argv
    assert "--max-size SIZE`" in ccache_hint(["-M"])


def test_a_ccache_option_end_to_end():
    out = subprocess.run(
        [sys.executable, "-m", "cupy_rawcode.cli", "-s"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 2 and "did you mean `cupy-rawcode cache stats`?" in out.stderr
