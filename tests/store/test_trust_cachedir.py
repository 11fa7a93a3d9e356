"""A cache that never hangs on a file and never reaches outside itself (issue 27, items 3 and 4).

Strange files (a FIFO, a link to /dev/zero, a link to a valid file elsewhere, a directory, an
oversize file) stand in for every kind of cache file: each is a miss with one warning, never a
hang (children run under a timeout and a memory limit). Foreign directories (a kind directory
replaced by a link, CUPY_RAWCODE_CACHE_DIR at a directory of user files with layout-like names,
CUPY_RAWCODE_CACHE_DIR=/) are left untouched: nothing there is read, written or removed, and the
cache commands exit 2 with a message naming the directory."""

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT

ENTRY_LIMIT = 256 << 20  # regular.py's limits, written out: the tests also ran before them
RECORD_LIMIT = 8 << 20
SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
SMALL = 'extern "C" __global__ void k(int* a) { a[0] = 42; }\n'
TIMEOUT = 120  # seconds: a hang is a failure, never a stuck test run

# a child that uses every kind of cache file: the warm index, the toolchain record, a manifest,
# an entry, the miss counter, the size ledger (a tiny bound), then `cache stats` (the counts)
_USE = r"""
import sys
from cupy_rawcode import cli
from cupy_rawcode.kernel import RawKernel

code = RawKernel(sys.argv[1], "k")._build.device_code(90)
print("CODE", len(code.data), flush=True)
sys.exit(cli.main(["cache", "stats"]))
"""


def _limit_memory() -> None:
    """A child that reads /dev/zero fails at 3 GiB instead of taking the shared machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (3 << 30, 3 << 30))


def _env(cache: Path, **more: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPY_RAWCODE_CACHE_DIR": str(cache)}
    env.pop("CUPY_RAWCODE_BUNDLES", None)
    return {**env, **more}


def _run(args: list, env: dict, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run a child; a hang (TimeoutExpired) fails the test with what it said so far."""
    try:
        return subprocess.run(
            [sys.executable, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung for {timeout} s: {e.stderr!r}")


def _use(cache: Path, **more: str) -> subprocess.CompletedProcess:
    return _run(["-c", _USE, SMALL], _env(cache, **more))


def _start_users(env: dict, n: int) -> list[subprocess.Popen]:
    """``n`` children using the cache at once (each compiles SMALL), not waited for."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", _USE, SMALL],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_limit_memory,
        )
        for _ in range(n)
    ]


def _cli(cache: Path, *argv: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return _run(["-m", "cupy_rawcode.cli", *argv], _env(cache), timeout)


def _one(pattern: str, cache: Path, kind: str) -> Path:
    (path,) = sorted(cache.glob(pattern)) or [None]
    assert path is not None, f"no {kind} in {sorted(cache.rglob('*'))}"
    return path


# kind -> where its file is, relative to the cache (a glob), and its size limit
KINDS = {
    "entry": ("entries/*/*", ENTRY_LIMIT),
    "manifest": ("manifests/*/*.json", RECORD_LIMIT),
    "index entry": ("index/*/*.json", RECORD_LIMIT),
    "toolchain record": ("toolchain/*.json", RECORD_LIMIT),
    "folded counts": ("stats/counts", RECORD_LIMIT),
    "miss counter": ("stats/misses", None),
    "size ledger": ("stats/size", None),
}


def _fifo(path: Path, elsewhere: Path, limit) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path, elsewhere: Path, limit) -> None:
    path.symlink_to("/dev/zero")


def _link_elsewhere(path: Path, elsewhere: Path, limit) -> None:
    target = elsewhere / path.name  # a valid file of the same kind, outside the cache
    target.write_bytes(path.read_bytes() if path.exists() else b"0 0.000\n")
    os.utime(target, (1000, 1000))
    path.unlink(missing_ok=True)
    path.symlink_to(target)


def _directory(path: Path, elsewhere: Path, limit) -> None:
    path.mkdir()
    (path / "junk").write_bytes(b"x")


def _oversize(path: Path, elsewhere: Path, limit) -> None:
    with open(path, "wb") as f:
        f.truncate(limit + 1)  # sparse: a read would take limit + 1 bytes of memory


STRANGE = {
    "fifo": (_fifo, "a FIFO (named pipe)"),
    "link to /dev/zero": (_dev_zero, "a symbolic link"),
    "link to a valid file elsewhere": (_link_elsewhere, "a symbolic link"),
    "directory": (_directory, "a directory"),
    "oversize file": (_oversize, "larger than"),
}


def _populated(tmp_path) -> Path:
    """A cache that has every kind of file (a first child compiled into it)."""
    cache = tmp_path / "cache"
    first = _use(cache)
    assert first.returncode == 0, first.stderr
    (cache / "stats" / "counts").write_text('{"hits": 1, "misses": 1}')
    return cache


@pytest.mark.parametrize("strange", sorted(STRANGE))
def test_a_strange_file_in_place_of_each_cache_file_is_a_miss_with_one_warning(tmp_path, strange):
    cache = _populated(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    make, words = STRANGE[strange]
    replaced = {}
    for kind, (pattern, limit) in KINDS.items():
        if limit is None and make is _oversize:
            continue  # appended to or read 48 bytes at a time: no limit to pass
        path = _one(pattern, cache, kind)
        if make is not _link_elsewhere:  # which copies the file first
            path.unlink()
        make(path, elsewhere, limit)
        replaced[kind] = path
    outside = {p: (p.read_bytes(), p.stat().st_mtime) for p in elsewhere.iterdir()}
    done = _use(cache)
    assert done.returncode == 0, done.stderr
    assert "CODE " in done.stdout
    for kind, path in replaced.items():
        lines = [ln for ln in done.stderr.splitlines() if str(path) in ln]
        assert len(lines) == 1, (kind, done.stderr)
        assert words in lines[0] and "ignoring" in lines[0], (kind, lines[0])
    assert {p: (p.read_bytes(), p.stat().st_mtime) for p in outside} == outside


def test_processes_meeting_a_fifo_entry_all_finish(tmp_path):
    cache = _populated(tmp_path)
    for pattern in ("entries/*/*", "index/*/*.json"):
        path = _one(pattern, cache, pattern)
        path.unlink()
        os.mkfifo(path)
    env = _env(cache)
    procs = _start_users(env, 3)
    try:
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail("a process hung on a FIFO in the cache")
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert all("CODE " in o for o, _ in outs)


# ------------------------------------------------------------------ bundles (the user's files)


def _bundle(tmp_path) -> tuple[Path, str]:
    from cupy_rawcode.store.bundle import write_bundle
    from cupy_rawcode.store.entry import encode

    key = "ab" * 32
    path = tmp_path / "b.bundle"
    write_bundle(path, [(key, encode(key, b"code", {"arch": "sm_90", "target": "cubin"}))])
    return path, key


def test_a_bundle_replaced_by_a_fifo_after_its_index_is_a_miss_not_a_hang(tmp_path):
    from cupy_rawcode.store.bundle import BundleStore

    real, key = _bundle(tmp_path)
    link = tmp_path / "link.bundle"
    link.symlink_to(real)  # a bundle the user names may be a link: it is their file
    store = BundleStore(link)
    assert store.get(key) is not None
    real.unlink()
    os.mkfifo(real)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(store.get(key)), daemon=True)
    reader.start()
    reader.join(30)
    if reader.is_alive():
        with open(real, "wb"):  # a writer lets the blocked reader go, and the test end
            pass
        pytest.fail("reading a bundle that became a FIFO hung")
    assert got == [None]


def test_a_bundle_entry_beyond_the_entry_limit_is_never_read(tmp_path):
    from cupy_rawcode.store.bundle import MAGIC, BundleStore

    path = tmp_path / "big.bundle"
    head = json.dumps({"entries": {"cd" * 32: [0, ENTRY_LIMIT + 1]}}).encode()
    with open(path, "wb") as f:
        f.write(MAGIC + len(head).to_bytes(8, "little") + head)
        f.truncate(len(MAGIC) + 8 + len(head) + ENTRY_LIMIT + 1)  # sparse
    assert BundleStore(path).keys() == []


# ------------------------------------------------------------------ the cache's own directory


def _snapshot(root: Path) -> dict:
    """Every path under ``root`` (links not followed): its kind, bytes and mtime."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(d, name)
            st = p.lstat()
            data = p.read_bytes() if p.is_file() and not p.is_symlink() else None
            out[str(p)] = (st.st_mode, data, st.st_mtime_ns)
    return out


def _user_files(root: Path) -> None:
    """A directory of the user's, with names the cache's layout could have written."""
    files = {
        "index/ab/file": "notes",
        f"index/ab/{'ab' * 32}.json": '{"mine": true}',
        f"entries/cd/{'cd' * 32}": "data",
        "manifests/x.json": "{}",
        f"toolchain/{'e' * 32}.json": "{}",
        "stats/mine/list.txt": "mine",
        "stats/hits": "....",
        "prebuilt.keys": "mine\n",
        "report.txt": "a document",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        os.utime(p, (1000, 1000))


def test_a_directory_of_user_files_is_refused_and_left_untouched(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    _user_files(mine)
    before = _snapshot(mine)
    done = _run(["-c", _USE, SMALL], _env(mine, CUPY_RAWCODE_CACHE_MAX_SIZE="1K"))
    assert "CODE " in done.stdout, done.stderr  # compiled, uncached
    warnings = [ln for ln in done.stderr.splitlines() if "compiling without the cache" in ln]
    assert len(warnings) == 1 and str(mine) in warnings[0], done.stderr
    assert "CUPY_RAWCODE_CACHE_DIR" in warnings[0]
    assert done.returncode == 2  # its `cache stats`
    for argv in (["stats"], ["stats", "-z"], ["clear"], ["prune", "--max-size", "1"], ["list"]):
        r = _cli(mine, "cache", *argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert str(mine) in r.stderr and "CUPY_RAWCODE_CACHE_DIR" in r.stderr
    r = _cli(mine, "bundle", "export", str(tmp_path / "out.bundle"), "--prebuilt")
    assert r.returncode == 2 and "not a cupy-rawcode cache" in r.stderr
    from cupy_rawcode.store import maintenance

    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(mine))
    assert "not recorded" in maintenance.record_prebuilt(["ab" * 32])
    assert _snapshot(mine) == before


@pytest.mark.parametrize("action", [["stats"], ["clear"], ["prune", "--max-size", "1"]])
def test_the_cache_commands_refuse_the_root_directory_without_walking_it(tmp_path, action):
    r = _cli(Path("/"), "cache", *action, timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "/ is not a cupy-rawcode cache directory" in r.stderr
    assert "CUPY_RAWCODE_CACHE_DIR" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("kind", ["entries", "index", "manifests", "stats"])
def test_a_kind_directory_replaced_by_a_link_is_neither_walked_nor_deleted_through(tmp_path, kind):
    cache = _populated(tmp_path)
    outside = tmp_path / "outside"
    shutil.copytree(cache / kind, outside)  # files with exactly the cache's names
    for p in outside.rglob("*"):
        os.utime(p, (1000, 1000), follow_symlinks=False)
    shutil.rmtree(cache / kind)
    (cache / kind).symlink_to(outside)
    before = _snapshot(outside)
    done = _use(cache, CUPY_RAWCODE_CACHE_MAX_SIZE="1K")  # every write would evict
    commands = [
        _cli(cache, "cache", *argv) for argv in (["prune", "--max-size", "1"], ["clear"], ["stats"])
    ]
    assert _snapshot(outside) == before
    assert (cache / kind).is_symlink()
    assert "CODE " in done.stdout, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "compiling without the cache" in ln]
    assert len(lines) == 1 and f"{cache / kind} is a symbolic link" in lines[0], done.stderr
    for r in commands:
        assert r.returncode == 2, (r.args, r.stdout, r.stderr)
        assert str(cache / kind) in r.stderr and "symbolic link" in r.stderr


def test_a_new_or_empty_directory_is_claimed_with_a_cachedir_tag(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for cache in (tmp_path / "new" / "cache", empty):
        done = _use(cache)
        assert done.returncode == 0, done.stderr
        tag = (cache / "CACHEDIR.TAG").read_bytes()
        assert tag.startswith(SIGNATURE + b"\n") and b"cupy-rawcode" in tag
        assert list((cache / "entries").glob("*/*"))  # and it is used as a cache
        again = _use(cache)
        assert "not a cupy-rawcode cache" not in again.stderr


def test_processes_claiming_one_new_directory_together_all_use_it(tmp_path):
    cache = tmp_path / "c"
    env = _env(cache)
    procs = _start_users(env, 4)
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert not any("not a cupy-rawcode cache" in e for _, e in outs)
    assert (cache / "CACHEDIR.TAG").is_file()


def test_prune_max_size_0_means_no_bound_as_the_environment_does(tmp_path):
    from cupy_rawcode.store.directory import DirectoryStore

    cache = _populated(tmp_path)
    entries = sorted(cache.glob("entries/*/*"))
    r = _cli(cache, "cache", "prune", "--max-size", "0")
    assert r.returncode == 0 and "means no bound" in r.stdout, r.stdout
    assert sorted(cache.glob("entries/*/*")) == entries
    assert DirectoryStore(cache).prune(0).removed == {}
    assert sorted(cache.glob("entries/*/*")) == entries


def test_prune_removes_only_names_the_layout_writes(tmp_path):
    cache = _populated(tmp_path)
    strays = [cache / "entries" / "ab" / "notes.txt", cache / "index" / "zz" / ("ab" * 32)]
    for p in strays:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("mine")
    r = _cli(cache, "cache", "prune", "--max-size", "1")
    assert r.returncode == 0, r.stderr
    assert not list(cache.glob(f"entries/*/{'[0-9a-f]' * 64}"))  # the cache's went
    assert all(p.read_text() == "mine" for p in strays)
    r = _cli(cache, "cache", "clear")
    assert r.returncode == 0, r.stderr
    assert all(p.read_text() == "mine" for p in strays)


def test_a_cache_removed_while_a_process_runs_is_claimed_again(tmp_path):
    from cupy_rawcode.store.directory import DirectoryStore
    from cupy_rawcode.store.entry import encode

    cache = tmp_path / "c"
    store = DirectoryStore(cache, max_bytes=0)  # no bound: no recount thread writing meanwhile
    key = "ab" * 32
    store.put(key, encode(key, b"code", {}))
    shutil.rmtree(cache)  # rm -rf by the user, this process going on
    store.put(key, encode(key, b"code", {}))
    assert (cache / "CACHEDIR.TAG").read_bytes().startswith(SIGNATURE)
    assert store.get(key) is not None


@pytest.mark.parametrize("extra", [None, "report.txt", "entries/ab/notes.txt"])
def test_an_unmarked_cache_of_an_earlier_release_is_adopted_a_foreign_file_refuses_it(
    tmp_path, extra
):
    cache = _populated(tmp_path)
    (cache / "CACHEDIR.TAG").unlink()  # what a release before the tag left behind
    if extra:
        (cache / extra).parent.mkdir(parents=True, exist_ok=True)
        (cache / extra).write_text("mine")
    entries = sorted(cache.glob("entries/*/*"))
    again = _use(cache)
    assert "CODE " in again.stdout, again.stderr
    if extra is None:
        assert again.returncode == 0 and "not a cupy-rawcode cache" not in again.stderr
        assert (cache / "CACHEDIR.TAG").read_bytes().startswith(SIGNATURE)
        assert sorted(cache.glob("entries/*/*")) == entries  # a hit: nothing compiled again
    else:
        assert "not a cupy-rawcode cache" in again.stderr and again.returncode == 2
        assert not (cache / "CACHEDIR.TAG").exists() and (cache / extra).read_text() == "mine"


@pytest.mark.parametrize("tool", ["ccache", "cargo"])
def test_another_tools_tagged_cache_is_not_adopted(tmp_path, tool):
    """ccache and cargo write the same standard tag: theirs names them, and their directory is
    not ours (refused, left as it is), even where it holds only names our layout writes."""
    cache = tmp_path / tool
    (cache / "stats").mkdir(parents=True)
    tag = SIGNATURE + f"\n# This file is a cache directory tag created by {tool}.\n".encode()
    (cache / "CACHEDIR.TAG").write_bytes(tag)
    (cache / "stats" / "theirs").write_text("mine")
    again = _use(cache)
    assert "not a cupy-rawcode cache" in again.stderr and again.returncode == 2
    assert (cache / "CACHEDIR.TAG").read_bytes() == tag
    assert sorted(p.name for p in cache.rglob("*")) == ["CACHEDIR.TAG", "stats", "theirs"]


# ------------------------------------------------------------------ JSON nested too deep

DEEP = b"[" * 5000 + b"]" * 5000  # 10 KB: json recurses once per level


def test_json_nested_deeper_than_json_reads_in_each_record_is_a_miss_not_a_crash(tmp_path):
    cache = _populated(tmp_path)
    replaced = [
        _one(KINDS[kind][0], cache, kind)
        for kind in ("manifest", "index entry", "toolchain record", "folded counts")
    ]
    for path in replaced:
        path.write_bytes(DEEP)
    done = _use(cache)  # a compile, then `cache stats`
    assert done.returncode == 0, done.stderr
    assert "CODE " in done.stdout
    assert done.stderr == ""  # no RecursionError, no traceback at exit, no warning
    for path in replaced:  # each written again, whole
        assert isinstance(json.loads(path.read_bytes()), dict), path


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link(path: Path) -> None:
    path.symlink_to(path.parent.parent / "elsewhere.tag")


def _directory(path: Path) -> None:
    path.mkdir()


def _theirs(path: Path) -> None:
    path.write_bytes(SIGNATURE + b"\n# created by ccache.\n")


# what stands at the marker -> what the refusal says of it (never "has no" when something does)
MARKER_STATES = [
    (None, "has no CACHEDIR.TAG"),
    (_fifo, "its CACHEDIR.TAG is no regular file"),
    (_link, "its CACHEDIR.TAG is no regular file"),
    (_directory, "its CACHEDIR.TAG is no regular file"),
    (_theirs, "its CACHEDIR.TAG is not cupy-rawcode's"),
]


@pytest.mark.parametrize("make, said", MARKER_STATES)
def test_a_refused_directory_says_what_stands_at_its_marker(tmp_path, make, said):
    """A directory refused as foreign names what is at its CACHEDIR.TAG: a FIFO, a link or
    another tool's tag there is not "missing"; the marker and the user's file stay as they are."""
    (tmp_path / "elsewhere.tag").write_text("not the cache's")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "notes.txt").write_text("mine")
    if make is not None:
        make(cache / "CACHEDIR.TAG")
    again = _use(cache)
    assert again.returncode == 2 and "not a cupy-rawcode cache" in again.stderr
    assert said in again.stderr, again.stderr
    assert (cache / "notes.txt").read_text() == "mine"
    assert (tmp_path / "elsewhere.tag").read_text() == "not the cache's"
