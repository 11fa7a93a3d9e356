"""``cache pull``/``cache push`` and warmup's pull, on a CPU: a record of three compiles (two of
our kernels, one of CuPy's, for an explicit arch) is keyed without compiling (parallel/keys.py)
to exactly the keys a prebuild stores; machine A prebuilds into its cache and a team's level (a
directory store of the test's, given as ``module:Class``), machine B (another cache directory)
pulls the record's entries and then compiles nothing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

cupy = pytest.importorskip("cupy")

import cupy_rawcode  # noqa: E402
from cupy_rawcode.cli import main  # noqa: E402
from cupy_rawcode.cli import transfer as transfer_cli  # noqa: E402
from cupy_rawcode.ground.errors import RawcodeWarning  # noqa: E402
from cupy_rawcode.hook import install as hook  # noqa: E402
from cupy_rawcode.parallel import keys as record_keys  # noqa: E402
from cupy_rawcode.parallel import prebuild  # noqa: E402
from cupy_rawcode.store import Store, default_store  # noqa: E402
from cupy_rawcode.store.directory import DirectoryStore  # noqa: E402

ARCH = "sm_90"
TEAM = "test_cache_pull:TeamCache"  # the remote level, as CUPY_RAWCODE_REMOTE names it
RAW = [
    ('#include "scale.cuh"\nextern "C" __global__ void k0(float* x) { x[0] *= SCALE; }\n', "k0"),
    ('extern "C" __global__ void k1(float* x) { x[0] += 1.0f; }\n', "k1"),
]
CUPY_SOURCE = 'extern "C" __global__ void c0(float* x) { x[threadIdx.x] = 2.0f; }\n'

RECORDER = textwrap.dedent(
    """
    import sys; sys.path.insert(0, {tests!r})
    import cupy_rawcode
    from test_cache_pull import RAW, compile_all
    cupy_rawcode.record({path!r})
    compile_all({inc!r})
    """
)


class Unreachable(Store):
    """A remote level whose every call fails, as a server that went away."""

    name = "unreachable"

    def get(self, key: str) -> bytes | None:
        raise ConnectionError("the server went away")

    def get_many(self, keys):
        raise ConnectionError("the server went away")

    def put(self, key: str, data: bytes) -> None:
        raise ConnectionError("the server went away")

    def delete(self, key: str) -> None:
        raise ConnectionError("the server went away")

    def clear(self) -> int:
        raise ConnectionError("the server went away")

    def __len__(self) -> int:
        return 0

    @property
    def location(self) -> str:
        return "unreachable://server"


class TeamCache(DirectoryStore):
    """The team's cache in these tests: a directory (TEAM_CACHE) that is neither this machine's
    disk level nor a bundle, so transfers see it as a remote level."""

    name = "team"

    def __init__(self) -> None:
        super().__init__(Path(os.environ["TEAM_CACHE"]))


def compile_all(inc: str) -> None:
    """The application: two of our kernels and one of CuPy's, compiled for ARCH."""
    from cupy._core import core
    from cupy.cuda import compiler

    from cupy_rawcode.hook import compiles

    for source, name in RAW:
        cupy_rawcode.RawKernel(source, name, (f"-I{inc}",)).compile(arch=ARCH)
    with compiles.unloaded(compiler):
        compiler._compile_module_with_cache(
            CUPY_SOURCE,
            core.assemble_cupy_compiler_options(()),
            arch=ARCH.partition("_")[2],
            extra_source=core._get_header_source(),
        )


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """(record, the directory it and its headers lie in), recorded by another process."""
    base = tmp_path_factory.mktemp("app")
    inc = base / "inc"
    inc.mkdir()
    (inc / "scale.cuh").write_text("#define SCALE 3.0f\n")
    rec = base / "app.rec"
    script = RECORDER.format(tests=os.path.dirname(__file__), path=str(rec), inc=str(inc))
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(base / "recording-cache")}
    env.pop("CUPY_RAWCODE_REMOTE", None)
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert len(rec.read_text().splitlines()) == 3
    return rec, base


@pytest.fixture
def team(tmp_path, monkeypatch):
    """The team's level, configured: CUPY_RAWCODE_REMOTE names it."""
    monkeypatch.setenv("TEAM_CACHE", str(tmp_path / "team"))
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", TEAM)
    return tmp_path / "team"


def machine(monkeypatch, tmp_path, name: str) -> Path:
    """Switch this process to machine ``name``'s own cache directory."""
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / name))
    return tmp_path / name


def held(directory: Path) -> set[str]:
    root = directory / "entries"
    return {p.name for p in root.glob("*/*")} if root.is_dir() else set()


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def run_prebuild(rec: Path, base: Path) -> list[prebuild.Outcome]:
    jobs = prebuild.record_jobs(str(rec), [ARCH], [str(base)])
    outcomes = prebuild.prebuild(jobs, workers=1, stream=io.StringIO())
    assert not prebuild.failed(outcomes)
    return outcomes


def pull_args(rec: Path, base: Path, *more: str) -> list[str]:
    return ["cache", "pull", "--manifest", str(rec), "--root", str(base), "--arch", ARCH, *more]


# ---------------------------------------------------------------- keys


def test_the_keys_of_a_record_are_those_a_prebuild_stores(app):
    rec, base = app
    keys = record_keys.keys_of_record(str(rec), [ARCH], [str(base)])
    assert len(keys) == 3
    outcomes = run_prebuild(rec, base)
    assert set(keys) == {o.key for o in outcomes}
    store = default_store()
    assert all(store.level("disk").get(k) is not None for k in keys)
    two = record_keys.keys_of_record(str(rec), [ARCH, "sm_80"], [str(base)])
    assert two[:1] == keys[:1] and len(two) == 6  # one key per entry and arch


def test_an_edited_header_changes_its_entrys_key_and_a_missing_one_is_reported(tmp_path, app):
    rec, base = app
    import shutil

    shutil.copytree(base, tmp_path / "app")
    rec, base = tmp_path / "app" / rec.name, tmp_path / "app"
    before = record_keys.keys_of_record(str(rec), [ARCH], [str(base)])
    (base / "inc" / "scale.cuh").write_text("#define SCALE 4.0f\n")
    after = record_keys.keys_of_record(str(rec), [ARCH], [str(base)])
    assert before[0] != after[0] and before[1:] == after[1:]  # only k0 includes it
    (base / "inc" / "scale.cuh").unlink()
    found = record_keys.record_keys(str(rec), [ARCH], [str(base)])
    assert found.keys == before[1:]
    [unkeyed] = found.unkeyed
    assert unkeyed.arch == ARCH and "scale.cuh" in unkeyed.error


# ---------------------------------------------------------------- pull


def test_machine_b_pulls_what_machine_a_prebuilt_then_compiles_nothing(
    app, team, tmp_path, monkeypatch, capsys, compiles
):
    rec, base = app
    machine(monkeypatch, tmp_path, "a")
    keys = {o.key for o in run_prebuild(rec, base)}
    assert held(team) == keys  # a compile writes to every writable level
    b = machine(monkeypatch, tmp_path, "b")
    status, out, err = cli(capsys, *pull_args(rec, base))
    assert status == 0, err
    assert "3 entries asked, 0 already local" in out
    assert f"fetched from {TeamCache().location}: 3" in out and "missing everywhere: 0" in out
    assert "entries/s" in out
    assert "[########################] 3/3 entries settled" in err  # not a tty: one line a step
    assert held(b) == keys
    monkeypatch.delenv("CUPY_RAWCODE_REMOTE")  # B alone now: its own cache answers
    compiles.clear()
    hook.install("all")
    try:
        compile_all(str(base / "inc"))
    finally:
        hook.uninstall()
    assert compiles == []
    assert default_store().level("disk").counts() == (3, 0)  # 3 hits, no miss
    status, out, _ = cli(capsys, *pull_args(rec, base, "--json"))
    assert status == 2 and out == ""  # no remote level now


def test_pull_json_and_a_second_pull_fetches_nothing(app, team, tmp_path, monkeypatch, capsys):
    rec, base = app
    machine(monkeypatch, tmp_path, "a")
    run_prebuild(rec, base)
    machine(monkeypatch, tmp_path, "b")
    for local, fetched in ((0, 3), (3, 0)):
        status, out, err = cli(capsys, *pull_args(rec, base, "--json"))
        assert status == 0, err
        found = json.loads(out)
        assert (found["asked"], found["local"], found["missing"]) == (3, local, 0)
        assert found["fetched"] == {TeamCache().location: fetched} and found["failed"] == []
        assert found["bytes"] > 0 if fetched else found["bytes"] == 0
        assert {"damaged", "seconds", "entries_per_second"} <= set(found)


def test_entries_no_level_holds_are_missing_not_an_error(app, team, tmp_path, monkeypatch, capsys):
    rec, base = app
    status, out, err = cli(capsys, *pull_args(rec, base, "--json"))
    assert status == 0, err
    assert json.loads(out)["missing"] == 3


def test_a_failing_level_warns_and_the_next_one_answers(app, team, tmp_path, monkeypatch, capsys):
    rec, base = app
    machine(monkeypatch, tmp_path, "a")
    keys = {o.key for o in run_prebuild(rec, base)}
    b = machine(monkeypatch, tmp_path, "b")
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", f"test_cache_pull:Unreachable {TEAM}")
    with pytest.warns(RawcodeWarning, match="went away"):
        status, out, err = cli(capsys, *pull_args(rec, base, "--json"))
    assert status == 0, err
    found = json.loads(out)
    assert found["failed"] == ["unreachable://server"]
    assert found["fetched"] == {"unreachable://server": 0, TeamCache().location: 3}
    assert "warning: the remote level unreachable://server failed during the pull" in err
    assert held(b) == keys


def test_a_webdav_server_as_the_team_level(app, tmp_path, monkeypatch, capsys):
    """The same round trip through a real server on loopback (tests/store/servers.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "store"))
    try:
        import servers
    finally:
        sys.path.pop(0)
    servers._need(None, "wsgidav")
    servers._need(None, "cheroot")
    server = servers.WebDav(tmp_path / "dav")
    try:
        rec, base = app
        monkeypatch.setenv("CUPY_RAWCODE_REMOTE", server.namespace())
        machine(monkeypatch, tmp_path, "a")
        keys = {o.key for o in run_prebuild(rec, base)}
        b = machine(monkeypatch, tmp_path, "b")
        status, out, err = cli(capsys, *pull_args(rec, base, "--json"))
        assert status == 0, err
        found = json.loads(out)
        assert sum(found["fetched"].values()) == 3 and found["missing"] == 0
        assert held(b) == keys
    finally:
        server.stop()


def test_the_bar_redraws_in_place_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        bar = transfer_cli.Bar("entries settled", stream)
        for done in (0, 2, 2, 4):
            bar(done, 4)
    assert tty.getvalue().count("\r") == 3 and tty.getvalue().endswith("\n")
    assert "[############............] 2/4 entries settled" in tty.getvalue()
    assert pipe.getvalue().splitlines() == [
        "[........................] 0/4 entries settled",
        "[############............] 2/4 entries settled",
        "[########################] 4/4 entries settled",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["cache", "pull", "--manifest", "app.rec", "--arch", ARCH], "CUPY_RAWCODE_REMOTE"),
        (["cache", "push"], "CUPY_RAWCODE_REMOTE"),
        (["cache", "stats", "--manifest", "app.rec"], "--manifest goes with 'cache pull'"),
        (["cache", "list", "--arch", ARCH], "--arch goes with 'cache pull'"),
    ],
)
def test_usage_errors(capsys, monkeypatch, argv, message):
    monkeypatch.delenv("CUPY_RAWCODE_REMOTE", raising=False)
    monkeypatch.delenv("CUPY_RAWCODE_REDIS_URL", raising=False)
    status, out, err = cli(capsys, *argv)
    assert status == 2 and message in err and out == ""


def test_a_directory_that_is_no_cache_is_left_alone(app, team, tmp_path, monkeypatch, capsys):
    rec, base = app
    other = machine(monkeypatch, tmp_path, "home")
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    for argv in (pull_args(rec, base), ["cache", "push"]):
        status, out, err = cli(capsys, *argv)
        assert status == 2 and "CACHEDIR.TAG" in err and out == ""
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_pull_needs_a_manifest(team, capsys):
    status, _, err = cli(capsys, "cache", "pull")
    assert status == 2 and "needs --manifest" in err


def test_an_unreadable_record_is_a_usage_error(team, tmp_path, capsys):
    (tmp_path / "bad.rec").write_text("not a record\n")
    status, _, err = cli(capsys, *pull_args(tmp_path / "bad.rec", tmp_path))
    assert status == 2 and "bad.rec" in err


# ---------------------------------------------------------------- push


def test_push_then_pull_round_trip(app, team, tmp_path, monkeypatch, capsys):
    rec, base = app
    monkeypatch.delenv("CUPY_RAWCODE_REMOTE")  # A compiles alone, then pushes
    machine(monkeypatch, tmp_path, "a")
    keys = {o.key for o in run_prebuild(rec, base)}
    assert held(team) == set()
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", TEAM)
    status, out, err = cli(capsys, "cache", "push")  # every local entry
    assert status == 0, err
    assert f"sent to {TeamCache().location}: 3 (0 already there)" in out
    assert "3/3 entries pushed" in err
    assert held(team) == keys
    status, out, err = cli(capsys, "cache", "push", "--json", *pull_args(rec, base)[2:])
    found = json.loads(out)
    assert status == 0 and found["asked"] == 3
    where = TeamCache().location  # sent again, or found there (where the level tells sizes)
    assert found["sent"][where] + found["present"][where] == 3 and found["failed"] == []
    b = machine(monkeypatch, tmp_path, "b")
    status, out, err = cli(capsys, *pull_args(rec, base, "--json"))
    assert status == 0 and json.loads(out)["fetched"] == {TeamCache().location: 3}
    assert held(b) == keys


# ---------------------------------------------------------------- warmup


def test_warmup_of_a_record_pulls_before_it_compiles(app, team, tmp_path, monkeypatch, compiles):
    rec, base = app
    machine(monkeypatch, tmp_path, "a")
    run_prebuild(rec, base)
    b = machine(monkeypatch, tmp_path, "b")
    compiles.clear()
    summary = cupy_rawcode.warmup(rec, arch=ARCH, root=base, workers=1)
    assert summary.ok and summary.compiled == [] and summary.workers == 0, summary
    assert len(summary.cached) == 3 and compiles == []
    [pulled] = summary.pulled
    assert pulled.fetched == {TeamCache().location: 3}
    assert "3 fetched from remote levels" in str(summary)
    assert len(held(b)) == 3


def test_warmup_without_a_remote_level_pulls_nothing(app, tmp_path, monkeypatch):
    rec, base = app
    monkeypatch.delenv("CUPY_RAWCODE_REMOTE", raising=False)
    summary = cupy_rawcode.warmup(rec, arch=ARCH, root=base, workers=1)
    assert summary.ok and summary.pulled == [] and len(summary.compiled) == 3
