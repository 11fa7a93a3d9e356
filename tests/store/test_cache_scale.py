"""The cache at scale: size bound and LRU eviction, the cache/prebuild/bundle commands, the
Redis store, and fault tolerance (concurrent compiles, corruptions, write errors, Redis dying)."""

import errno
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from conftest import ROOT, corpus, free_port

from cupy_rawcode import cli
from cupy_rawcode.cli.commands import _human
from cupy_rawcode.ground.errors import EntryError
from cupy_rawcode.key.request import make_request
from cupy_rawcode.orchestrator.compiling import compile_request
from cupy_rawcode.store import Levels, make_store
from cupy_rawcode.store.bundle import BundleStore, write_bundle
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import decode, encode
from cupy_rawcode.store.remote import RemoteLevelWarning

SMALL = 'extern "C" __global__ void k(int* a) {{ a[0] = {value}; }}\n'


def entry(key: str, size: int = 1000) -> bytes:
    return encode(key, os.urandom(size), {"arch": "sm_90", "target": "cubin"})


def key_of(i: int) -> str:
    return f"{i:064x}"


# ------------------------------------------------------------------ size bound


def test_size_bound_evicts_least_recently_used(tmp_path):
    store = DirectoryStore(tmp_path, max_bytes=10_000)
    for i in range(8):  # ~1.1 kB each: all fit
        store.put(key_of(i), entry(key_of(i)))
        os.utime(store.path(key_of(i)), (1000 + i, 1000 + i))
    assert store.get(key_of(0)) is not None  # a hit marks entry 0 as just used
    for i in range(8, 12):
        store.put(key_of(i), entry(key_of(i)))
    kept = {e.key for e in store.entries()}
    assert sum(e.size for e in store.entries()) <= 10_000
    assert key_of(0) in kept and key_of(11) in kept
    assert key_of(1) not in kept and key_of(2) not in kept  # the oldest unused went first


def test_eviction_skips_an_entry_another_process_is_reading(tmp_path):
    store = DirectoryStore(tmp_path, max_bytes=None)
    for i in range(4):
        store.put(key_of(i), entry(key_of(i)))
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH)\n"
            "print('locked', flush=True); sys.stdin.read()",
            str(store.path(key_of(2))),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().strip() == "locked"
        assert store.prune(1).removed == {"entries": 3}
        assert [e.key for e in store.entries()] == [key_of(2)]
    finally:
        reader.communicate("")
    assert store.prune(1).removed == {"entries": 1} and store.entries() == []


@pytest.mark.parametrize(
    "value,expected", [("2G", 2 << 30), ("500M", 500 << 20), ("123", 123), (None, 1 << 30)]
)
def test_size_bound_from_the_environment(monkeypatch, tmp_path, value, expected):
    if value is None:
        monkeypatch.delenv("CUPY_RAWCODE_CACHE_MAX_SIZE", raising=False)
    else:
        monkeypatch.setenv("CUPY_RAWCODE_CACHE_MAX_SIZE", value)
    assert DirectoryStore(tmp_path).max_bytes == expected


def test_a_bad_size_bound_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_MAX_SIZE", "lots")
    with pytest.raises(ValueError, match="CUPY_RAWCODE_CACHE_MAX_SIZE='lots' is not a size"):
        DirectoryStore(tmp_path)


def test_stale_temp_files_are_cleaned_fresh_ones_kept(tmp_path):
    store = DirectoryStore(tmp_path)
    store.put(key_of(1), entry(key_of(1)))
    shard = store.path(key_of(1)).parent
    # named as fsutil.atomic_write names them: only the layout's names are removed (layout.py)
    old, new = shard / f".{key_of(1)}.old_1234.tmp", shard / f".{key_of(1)}.new_1234.tmp"
    old.write_bytes(b"partial")
    new.write_bytes(b"partial")
    os.utime(old, (1, 1))
    store.entries()
    assert not old.exists() and new.exists()


_KEYER = r"""
import sys
from cupy_rawcode.key.request import cache_key
first, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(first, first + n):
    cache_key('extern "C" __global__ void k(int* a) { a[0] = %d; }' % i, arch="sm_90")
"""


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_keying_many_sources_keeps_the_whole_cache_under_the_bound(tmp_path, capsys, monkeypatch):
    """Three processes key 600 distinct sources (a manifest each, ~0.3 kB) under a 40 KiB bound:
    manifests, index entries and toolchain records count and are evicted like entries, and
    `cache stats` counts every file."""
    cache = tmp_path / "c"
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(cache), "CUPY_RAWCODE_CACHE_MAX_SIZE": "40K"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _KEYER, str(i * 200), "200"], env=env, stderr=subprocess.PIPE
        )
        for i in range(3)
    ]
    for p in procs:
        assert p.wait(300) == 0, p.stderr.read().decode()[-2000:]
        p.stderr.close()
    files = _files(cache)
    on_disk = sum(p.stat().st_size for p in files)
    manifests = [p for p in files if p.parts[-3] == "manifests"]
    assert on_disk <= 40 * 1024
    assert 10 < len(manifests) < 600  # most were evicted: 600 would be ~170 kB
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(cache))
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_MAX_SIZE", "40K")
    rc, out, _ = run_cli(capsys, "cache", "stats")
    assert rc == 0
    for kind in ("entries", "manifests", "index", "toolchain"):
        n = sum(1 for p in files if kind in p.relative_to(cache).parts[:1])
        assert f"\n{kind:<9s} {n} (" in out
    assert f"size      {_human(on_disk)} in all (bound 40.0 KiB)" in out


# an old file of each kind the cache writes, where that kind's writer puts it
OLD_FILES = {
    "entries": "entries/ab/ab" + "0" * 62,
    "manifests": "manifests/cd/cd" + "0" * 62 + ".json",
    "index": "index/ef/ef" + "0" * 62 + ".json",
    "toolchain": "toolchain/" + "0" * 32 + ".json",
}


@pytest.mark.parametrize("kind", sorted(OLD_FILES))
def test_the_least_recently_used_file_of_every_kind_is_evicted_first(tmp_path, kind):
    from cupy_rawcode.store.sizebound import publish

    store = DirectoryStore(tmp_path, max_bytes=10_000)
    old = tmp_path / OLD_FILES[kind]
    publish(tmp_path, old, b"x" * 3000)  # counted as its writer counts it
    os.utime(old, (1000, 1000))
    for i in range(7):  # ~1.1 kB each: the last ones pass the bound
        store.put(key_of(i), entry(key_of(i)))
    assert not old.exists()
    assert sum(p.stat().st_size for p in _files(tmp_path)) <= 10_000
    assert {e.key for e in store.entries()} >= {key_of(5), key_of(6)}  # the newest stay


def _old(path: Path) -> Path:
    os.utime(path, (1000, 1000))
    return path


def _read_entry(tmp_path):
    store = DirectoryStore(tmp_path / "c")
    store.put(key_of(1), entry(key_of(1)))
    path = _old(store.path(key_of(1)))
    store.get(key_of(1))
    return path


def _read_manifest(tmp_path):
    from cupy_rawcode.key import manifest
    from cupy_rawcode.key.request import cache_key

    manifest._memo.clear()  # a manifest this process knows is not written again
    cache_key(SMALL.format(value=1), arch="sm_90")
    (path,) = _files(Path(os.environ["CUPY_RAWCODE_CACHE_DIR"]) / "manifests")
    _old(path)
    manifest._memo.clear()
    cache_key(SMALL.format(value=1), arch="sm_90")
    return path


def _read_index(tmp_path):
    from cupy_rawcode import key
    from cupy_rawcode.kernel import RawKernel

    RawKernel(SMALL.format(value=2), "k")._build.device_code(90)
    (path,) = _files(Path(os.environ["CUPY_RAWCODE_CACHE_DIR"]) / "index")
    _old(path)
    key._index_memo.clear()
    RawKernel(SMALL.format(value=2), "k")._build.device_code(90)
    return path


def _read_toolchain(tmp_path):
    from cupy_rawcode.toolkit import record

    tc = record.toolchain()
    record.save(tc)
    path = _old(record.record_path(tc.sources))
    assert record.load(tc.sources) is not None
    return path


MARKED_BY = {
    "a store read": _read_entry,
    "a manifest lookup": _read_manifest,
    "an index lookup": _read_index,
    "a toolchain record load": _read_toolchain,
}


@pytest.mark.parametrize("read", sorted(MARKED_BY))
def test_reading_a_cache_file_marks_it_used(tmp_path, read):
    path = MARKED_BY[read](tmp_path)
    assert path.stat().st_mtime > time.time() - 600  # not the old time: used just now


def test_hit_and_miss_counters_are_folded_when_they_grow(tmp_path):
    store = DirectoryStore(tmp_path)
    for _ in range(5000):
        store.record(True)
    store.record(False)
    store.prune(1 << 30)
    assert not (tmp_path / "stats" / "hits").exists()  # its 5000 bytes became one number
    assert store.counts() == (5000, 1)
    store.record(True)
    assert store.counts() == (5001, 1)


# ------------------------------------------------------------------ CLI


def run_cli(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cache_commands(capsys, tmp_path):
    src = tmp_path / "a.cu"
    src.write_text(corpus("plain.cu"))
    assert run_cli(capsys, "compile", str(src), "--arch", "sm_80")[0] == 0
    assert run_cli(capsys, "compile", str(src), "--arch", "sm_80")[0] == 0
    rc, out, _ = run_cli(capsys, "cache", "stats")
    assert rc == 0 and "entries   1" in out and "hits      1" in out and "misses    1" in out
    assert os.environ["CUPY_RAWCODE_CACHE_DIR"] in out
    rc, out, _ = run_cli(capsys, "cache", "list", "-l")
    assert rc == 0 and "sm_80 cubin" in out and len(out.splitlines()) == 1
    assert re.search(r"nvrtc \d+\.\d+ [1-9]\d* headers", out)  # the count the entry records
    rc, out, _ = run_cli(capsys, "cache", "prune", "--max-size", "1")
    assert rc == 0 and re.match(r"removed \d+ files \(1 entries, 1 manifests[,;]", out)
    rc, out, _ = run_cli(capsys, "cache", "clear")
    assert rc == 0 and "entries   0" in run_cli(capsys, "cache", "stats")[1]
    assert "hits      not recorded" in run_cli(capsys, "cache", "stats")[1]
    rc, _, err = run_cli(capsys, "cache", "prune", "--max-size", "lots")
    assert rc == 2 and "--max-size='lots' is not a size" in err


def test_prebuild_reports_failures_and_goes_on(capsys, tmp_path):
    (tmp_path / "good.cu").write_text(SMALL.format(value=1))
    (tmp_path / "bad.cu").write_text("#include <no_such_header.h>\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "v.h").write_text("#define V 7\n")
    (tmp_path / "m.json").write_text(
        json.dumps(
            [
                {"file": "good.cu", "options": ["-DEXTRA=1"], "arch": ["sm_75"]},
                {
                    "code": '#include <v.h>\nextern "C" __global__ void k(int* a) { a[0] = V; }',
                    "name": "inline",
                    "options": ["-I" + str(tmp_path / "inc")],
                },
                {
                    "code": "template <int N> __global__ void t(int* a) { a[0] = N; }",
                    "name_expressions": ["t<3>"],
                    "name": "tmpl",
                },
            ]
        )
    )
    rc, out, err = run_cli(
        capsys,
        "prebuild",
        str(tmp_path / "good.cu"),
        str(tmp_path / "bad.cu"),
        str(tmp_path / "m.json"),
        "--arch",
        "sm_80,sm_90",
        "-j",
        "2",
    )
    assert rc == 1
    assert "7 of 9 succeeded (7 compiled, 0 already cached), 2 failed" in out
    assert err.count("bad.cu (sm_") == 2 and "no_such_header.h" in err
    assert "9/9" in err  # progress
    assert len(DirectoryStore(Path(os.environ["CUPY_RAWCODE_CACHE_DIR"])).entries()) == 7
    rc, out, _ = run_cli(
        capsys, "prebuild", str(tmp_path / "good.cu"), "--arch", "sm_80", "-j", "1"
    )
    assert rc == 0 and "(0 compiled, 1 already cached)" in out


@pytest.mark.parametrize(
    "manifest,message",
    [
        ('{"file": "x.cu"}', "a manifest is a list"),
        ('[{"file": "x.cu", "code": "y"}]', "exactly one of 'file' and 'code'"),
        ('[{"code": "y", "flags": 1}]', "unknown field"),
        ('[{"code": "y", "options": "-DX"}]', "options must be a list of strings"),
        ('[{"file": "missing.cu"}]', "cannot read"),
        ("[", "not JSON"),
    ],
)
def test_bad_manifests_say_what_and_where(capsys, tmp_path, manifest, message):
    (tmp_path / "m.json").write_text(manifest)
    rc, _, err = run_cli(capsys, "prebuild", str(tmp_path / "m.json"), "--arch", "sm_80")
    assert rc == 2 and message in err and "m.json" in err


def test_bundle_ships_prebuilt_kernels_to_an_empty_cache(capsys, tmp_path, monkeypatch):
    src = tmp_path / "k.cu"
    src.write_text(corpus("warp_reduce.cu"))
    assert run_cli(capsys, "prebuild", str(src), "--arch", "sm_90", "-j", "1")[0] == 0
    other = tmp_path / "other.cu"
    other.write_text(SMALL.format(value=5))
    assert run_cli(capsys, "compile", str(other), "--arch", "sm_90")[0] == 0
    bundle = tmp_path / "app.bundle"
    rc, out, _ = run_cli(capsys, "bundle", "export", str(bundle), "--prebuilt")
    assert rc == 0 and "wrote 1 entries" in out
    rc, out, _ = run_cli(capsys, "bundle", "info", str(bundle))
    assert rc == 0 and "1 entries" in out and "0 broken" in out
    # a fresh machine: empty cache, the bundle on CUPY_RAWCODE_BUNDLES, no compile allowed
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / "fresh"))
    monkeypatch.setenv(
        "CUPY_RAWCODE_BUNDLES", str(tmp_path / "absent.bundle") + os.pathsep + str(bundle)
    )
    from cupy_rawcode.orchestrator import compiling as program

    monkeypatch.setattr(program, "_nvrtc_compile", lambda *a: pytest.fail("compiled"))
    monkeypatch.setattr(program, "_speculate", lambda *a: None)
    req = make_request(src.read_text(), arch="sm_90", source_dir=str(tmp_path))
    r = compile_request(req)
    assert r.hit and r.hit_layer == "bundle:app.bundle"
    assert compile_request(req).hit_layer == "memory"
    # copied to memory, not to the cache directory: a bundle is read as fast as the disk
    # (store/base.py: on_disk), and a copy per hit cost a new process's first run of a workload
    assert len(DirectoryStore(tmp_path / "fresh").entries()) == 0


# ------------------------------------------------------------------ Redis


@pytest.fixture
def fresh_redis_warning(monkeypatch):
    from cupy_rawcode.ground import log

    monkeypatch.setattr(log, "_said", set())  # every warn-once speaks again


def machine(tmp_path, name, url, **kw):
    """A store as one machine of a cluster sees it: its own disk, the shared Redis."""
    return make_store(tmp_path / name, redis_url=url, bundles=(), **kw)


def test_redis_shares_entries_between_machines(tmp_path, redis_server):
    src = SMALL.format(value=11)
    a, b = (
        machine(tmp_path, "a", redis_server.url),
        machine(tmp_path, "b", redis_server.url, redis_ttl=3600),
    )
    r1 = compile_request(make_request(src, arch="sm_90"), store=a)
    assert not r1.hit
    stored = redis_server.client.get("cupy-rawcode:entry:" + r1.key)
    assert decode(r1.key, stored)[0] == r1.code  # bytes + JSON metadata, checksummed
    assert redis_server.client.ttl("cupy-rawcode:entry:" + r1.key) == -1  # no TTL by default
    r2 = compile_request(make_request(src, arch="sm_90"), store=b)
    assert r2.hit and r2.hit_layer == "redis" and r2.code == r1.code
    assert b.level("disk").get(r1.key) is not None  # read through into the local cache
    r3 = compile_request(make_request(SMALL.format(value=12), arch="sm_90"), store=b)
    assert 0 < redis_server.client.ttl("cupy-rawcode:entry:" + r3.key) <= 3600


def test_redis_down_warns_once_and_compiles_locally(tmp_path, caplog, fresh_redis_warning):
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    store = machine(tmp_path, "a", url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for v in range(3):
            r = compile_request(make_request(SMALL.format(value=v), arch="sm_90"), store=store)
            assert not r.hit and r.code
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert len(said) == 1 and "redis store" in said[0] and "compiles go on" in said[0]


def test_slow_redis_times_out_and_local_work_goes_on(
    tmp_path, redis_server, caplog, fresh_redis_warning
):
    store = machine(tmp_path, "a", redis_server.url, redis_timeout=0.2)
    redis_server.client.execute_command("CLIENT", "PAUSE", "3000")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = compile_request(make_request(SMALL.format(value=21), arch="sm_90"), store=store)
        r2 = compile_request(make_request(SMALL.format(value=22), arch="sm_90"), store=store)
    assert r.code and r2.code and time.perf_counter() - t0 < 2.5  # one timeout, then backoff
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert len(said) == 1 and "timed out" in said[0]


def test_redis_killed_during_200_calls_every_call_returns_the_right_bytes(
    tmp_path, redis_server, fresh_redis_warning
):
    kernels = [SMALL.format(value=v) for v in range(6)]
    reference = {}
    ref_store = make_store(tmp_path / "ref", redis_url="", bundles=())
    for src in kernels:
        reference[src] = compile_request(make_request(src, arch="sm_80"), store=ref_store).code
    machines = [machine(tmp_path, f"m{i}", redis_server.url) for i in range(4)]
    rng = random.Random(7)
    layers = set()
    for call in range(200):
        if call == 100:
            redis_server.kill()
        src, store = rng.choice(kernels), rng.choice(machines)
        if rng.random() < 0.3:  # a machine that lost its local cache
            store.level("memory")._data.clear()
            shutil.rmtree(store.level("disk").root, ignore_errors=True)
        r = compile_request(make_request(src, arch="sm_80"), store=store)
        assert r.code == reference[src], f"call {call}"
        layers.add(r.hit_layer)
    assert "redis" in layers and None in layers  # both paths were exercised


# ------------------------------------------------------------------ fault tolerance


def _compile_child(cache_dir: str, q) -> None:
    os.environ["CUPY_RAWCODE_CACHE_DIR"] = cache_dir
    from cupy_rawcode.key.request import make_request as mr
    from cupy_rawcode.orchestrator.compiling import compile_request as cr

    r = cr(mr((ROOT / "bench" / "corpus" / "plain.cu").read_text(), arch="sm_90"))
    q.put((r.key, r.code))


def test_sixteen_processes_compiling_one_kernel_make_one_valid_entry(tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_compile_child, args=(str(tmp_path / "c"), q)) for _ in range(16)]
    for p in procs:
        p.start()
    results = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len({k for k, _ in results}) == 1
    store = DirectoryStore(tmp_path / "c", max_bytes=None)
    entries = store.entries()
    assert len(entries) == 1 and entries[0].key == results[0][0]
    code, _ = decode(entries[0].key, store.get(entries[0].key))
    assert all(c == code for _, c in results)
    leftovers = [p for p in (tmp_path / "c").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def corrupt(data: bytes, rng: random.Random, foreign: bytes) -> bytes:
    """One random damage: truncation, bit flips, wrong length, a foreign file, or empty."""
    kind = rng.randrange(6)
    if kind == 0:
        return data[: rng.randrange(len(data))]
    if kind == 1:
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:  # wrong length: bytes added or removed in the middle
        i = rng.randrange(len(data))
        return data[:i] + os.urandom(rng.randint(1, 64)) + data[i + rng.randint(0, 64) :]
    if kind == 3:
        return foreign  # another key's valid entry
    if kind == 4:
        return os.urandom(rng.randint(1, 2000))
    return b""


def test_a_thousand_corruptions_never_crash_or_return_wrong_code(tmp_path, redis_server):
    rng = random.Random(2026)
    keys = [key_of(i) for i in range(4)]
    good = {k: entry(k, 500) for k in keys}
    codes = {k: decode(k, good[k])[0] for k in keys}
    disk = DirectoryStore(tmp_path / "disk", max_bytes=None)
    from cupy_rawcode.store.redis import RedisStore

    red = RedisStore(redis_server.url)
    outcomes = {"miss": 0, "intact": 0}
    for trial in range(1000):
        k = rng.choice(keys)
        foreign = good[keys[(keys.index(k) + 1) % len(keys)]]
        bad = corrupt(good[k], rng, foreign)
        where = trial % 3
        if where == 0:
            disk.path(k).parent.mkdir(parents=True, exist_ok=True)
            disk.path(k).write_bytes(bad)
            layers = [disk]
        elif where == 1:
            bundle = tmp_path / f"b{trial % 7}.bundle"
            write_bundle(bundle, [(x, good[x] if x != k else bad) for x in keys])
            raw = bytearray(bundle.read_bytes())
            if rng.random() < 0.3:  # damage the bundle file itself, index included
                for _ in range(rng.randint(1, 4)):
                    raw[rng.randrange(len(raw))] ^= 0xFF
                bundle.write_bytes(bytes(raw))
            layers = [BundleStore(bundle)]
        else:
            red.put(k, bad)
            layers = [red]
        found = Levels(layers).find(k, lambda d, k=k: decode(k, d))
        if found is None:
            outcomes["miss"] += 1
        else:
            (code, meta), _ = found
            assert code == codes[k] and meta["key"] == k, f"trial {trial}: wrong code returned"
            outcomes["intact"] += 1
    assert outcomes["miss"] > 500  # almost every damage is detected as a miss


def test_corrupted_entries_recompile_to_the_right_code(tmp_path):
    store = make_store(tmp_path / "c", redis_url="", bundles=())
    req = make_request(corpus("plain.cu"), arch="sm_90")
    first = compile_request(req, store=store)
    disk = store.level("disk")
    rng = random.Random(1)
    for _ in range(5):
        store.level("memory")._data.clear()
        disk.path(first.key).write_bytes(corrupt(disk.get(first.key), rng, b"x"))
        r = compile_request(req, store=store)
        assert r.code == first.code
        decode(first.key, disk.get(first.key))  # replaced by a valid entry


def test_a_write_error_mid_publish_leaves_no_partial_entry(tmp_path, monkeypatch, caplog):
    from cupy_rawcode.ground import fsutil, log

    monkeypatch.setattr(log, "_said", set())  # the cache-not-writable warning speaks again
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fsutil.os, "fdopen", lambda fd, mode: FullDisk(real_fdopen(fd, mode)))
    store = make_store(tmp_path / "c", redis_url="", bundles=())
    with caplog.at_level("WARNING", logger="cupy_rawcode"):
        r = compile_request(make_request(SMALL.format(value=3), arch="sm_90"), store=store)
    assert r.code and not r.hit
    assert "No space left on device" in caplog.text
    files = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert [p for p in files if "entries" in p.parts] == []  # no entry, no temp file
    monkeypatch.setattr(fsutil.os, "fdopen", real_fdopen)
    fresh = make_store(tmp_path / "c", redis_url="", bundles=())
    assert not compile_request(
        make_request(SMALL.format(value=3), arch="sm_90"), store=fresh
    ).hit  # nothing partial was ever read


def test_a_read_only_cache_still_compiles_and_serves_hits(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    store = make_store(tmp_path / "c", redis_url="", bundles=())
    req = make_request(SMALL.format(value=4), arch="sm_90")
    compile_request(req, store=store)
    os.chmod(tmp_path / "c", 0o500)
    try:
        fresh = make_store(tmp_path / "c", redis_url="", bundles=())
        assert compile_request(req, store=fresh).hit_layer == "disk"
        other = make_request(SMALL.format(value=5), arch="sm_90")
        assert compile_request(other, store=fresh).code
    finally:
        os.chmod(tmp_path / "c", 0o700)


def test_entry_checksum_covers_metadata():
    data = encode("k" * 64, b"code", {"symbols": {"f<1>": "_Z1fILi1EEvv"}})
    i = data.index(b"_Z1f")
    bad = data[:i] + b"_Z2f" + data[i + 4 :]
    with pytest.raises(EntryError, match="checksum"):
        decode("k" * 64, bad)


def test_redis_url_without_the_client_or_with_a_bad_url_warns_and_goes_on(
    tmp_path, caplog, monkeypatch, fresh_redis_warning
):
    monkeypatch.setitem(sys.modules, "redis", None)  # as if the extra were not installed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = machine(tmp_path, "a", "redis://127.0.0.1:1/0")
        r = compile_request(make_request(SMALL.format(value=31), arch="sm_90"), store=store)
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert r.code and len(said) == 1 and "pip install 'cupy-rawcode[redis]'" in said[0]


def test_new_cache_directories_are_private(tmp_path):
    root = tmp_path / "a" / "b" / "cache"
    store = DirectoryStore(root, max_bytes=None)
    store.put(key_of(1), entry(key_of(1)))
    made = [
        tmp_path / "a",
        tmp_path / "a" / "b",
        root,
        root / "entries",
        store.path(key_of(1)).parent,
    ]
    assert [oct(d.stat().st_mode & 0o777) for d in made] == ["0o700"] * len(made)
    assert oct(store.path(key_of(1)).stat().st_mode & 0o777) == "0o600"


# ------------------------------------------------------------------ cache commands tell the truth


@pytest.fixture
def read_only(monkeypatch):
    """Make a cache directory read-only, by permissions or (where root ignores them) as a
    read-only filesystem does: every removal fails with EROFS. Gives the reason to expect."""
    made: list[Path] = []

    def make(root: Path, technique: str) -> str:
        if technique == "permissions":
            if os.geteuid() == 0:
                pytest.skip("root ignores permissions: the read-only filesystem case covers it")
            for d, _dirs, _names in os.walk(root):
                os.chmod(d, 0o500)
                made.append(Path(d))
            return "Permission denied"

        def refuse(path, *args, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system", str(path))

        for name in ("unlink", "remove", "rmdir", "rename", "replace"):
            monkeypatch.setattr(os, name, refuse)
        return "Read-only file system"

    yield make
    for d in made:
        os.chmod(d, 0o700)


@pytest.mark.parametrize("technique", ["permissions", "read-only filesystem"])
@pytest.mark.parametrize("command", [["clear"], ["prune", "--max-size", "1"]])
def test_clear_and_prune_on_a_read_only_cache_fail_naming_the_path_and_why(
    capsys, tmp_path, read_only, technique, command
):
    src = tmp_path / "k.cu"
    src.write_text(SMALL.format(value=41))
    assert run_cli(capsys, "compile", str(src), "--arch", "sm_90")[0] == 0
    root = Path(os.environ["CUPY_RAWCODE_CACHE_DIR"])
    before = sorted(_files(root))
    reason = read_only(root, technique)
    rc, out, err = run_cli(capsys, "cache", *command)
    assert rc != 0
    assert f"cannot {command[0]} {root}: {root}{os.sep}" in err and reason in err
    assert sorted(_files(root)) == before  # nothing was removed, and nothing says otherwise
    assert not re.search(r"removed [1-9]", out)


def _entry_path(tmp_path):
    store = make_store(tmp_path / "c", redis_url="", bundles=())
    return store.level("disk").path(compile_request(_request(), store=store).key)


def _manifest_path(tmp_path):
    from cupy_rawcode.key import manifest
    from cupy_rawcode.key.request import cache_key

    manifest._memo.clear()  # a manifest this process knows is not written again
    cache_key(SMALL.format(value=42), arch="sm_90")
    (path,) = _files(Path(os.environ["CUPY_RAWCODE_CACHE_DIR"]) / "manifests")
    return path


def _index_path(tmp_path):
    from cupy_rawcode.kernel import RawKernel

    RawKernel(SMALL.format(value=42), "k")._build.device_code(90)
    (path,) = _files(Path(os.environ["CUPY_RAWCODE_CACHE_DIR"]) / "index")
    return path


def _request():
    return make_request(SMALL.format(value=42), arch="sm_90")


def _use_entry(tmp_path):
    r = compile_request(_request(), store=make_store(tmp_path / "c", redis_url="", bundles=()))
    return r.hit_layer


def _use_manifest(tmp_path):
    from cupy_rawcode.key import manifest
    from cupy_rawcode.key.request import cache_key

    manifest._memo.clear()
    cache_key(SMALL.format(value=42), arch="sm_90")


def _use_index(tmp_path):
    from cupy_rawcode import key
    from cupy_rawcode.kernel import RawKernel

    key._index_memo.clear()
    RawKernel(SMALL.format(value=42), "k")._build.device_code(90)


# where a directory stands in for a cache file: (make the file, use it as a new process would)
DIRECTORY_AS = {
    "entry": (_entry_path, _use_entry),
    "manifest": (_manifest_path, _use_manifest),
    "index entry": (_index_path, _use_index),
}


@pytest.mark.parametrize("what", sorted(DIRECTORY_AS))
def test_a_directory_where_a_cache_file_belongs_is_a_miss_and_left_as_it_is(tmp_path, caplog, what):
    """The cache never removes a tree it did not write: the write there fails, as in a
    read-only cache (not stored), and each use is a miss."""
    make, use = DIRECTORY_AS[what]
    path = make(tmp_path)
    path.unlink()
    (path / "sub").mkdir(parents=True)
    (path / "sub" / "junk").write_bytes(b"x")
    with caplog.at_level("WARNING", logger="cupy_rawcode"):
        use(tmp_path)
    assert (path / "sub" / "junk").read_bytes() == b"x"  # not removed, nor written over
    said = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(said) == 1 and "a directory, not a regular file" in said[0]  # one warning
    if what == "entry":
        assert use(tmp_path) != "disk"  # not stored: a miss again


def test_cache_clear_leaves_a_directory_at_an_entry_name(capsys, tmp_path):
    path = _entry_path(tmp_path)
    path.unlink()
    (path / "sub").mkdir(parents=True)
    (path / "sub" / "junk").write_bytes(b"x")
    assert DirectoryStore(tmp_path / "c").clear() == 0
    assert (path / "sub" / "junk").read_bytes() == b"x"
