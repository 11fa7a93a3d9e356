"""A cache entry is served only for the text it was compiled from: a header that changes while a
kernel compiles stores nothing, and every stamp change (ctime included) makes the manifest and
the warm index miss."""

import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import cupy_rawcode
from cupy_rawcode.key import index_lookup
from cupy_rawcode.key.request import make_request
from cupy_rawcode.orchestrator import compiling as program
from cupy_rawcode.orchestrator.compiling import compile_request
from cupy_rawcode.orchestrator.flow import compile_for, request

KERNEL = '#include "hv.h"\nextern "C" __global__ void k(int* p) { *p = VAL; }\n'
OLD, NEW = "#define VAL 1111111\n", "#define VAL 2222222\n"  # the same size


def _replace(path: Path, text: str) -> None:
    """Save ``text`` as an editor does: a temp file renamed over the old one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _compile(root: Path, **kw):
    req = make_request(KERNEL, arch="sm_80", target="ptx", source_dir=str(root), source_name="k.cu")
    return compile_request(req, **kw)


def _value(result) -> str:
    """Which VAL the PTX holds."""
    ptx = result.code.decode()
    assert ("1111111" in ptx) != ("2222222" in ptx), ptx
    return "1111111" if "1111111" in ptx else "2222222"


def _cache_files(kind: str) -> list[Path]:
    root = Path(os.environ["CUPY_RAWCODE_CACHE_DIR"]) / kind
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def _race(monkeypatch, header: Path, when: str) -> None:
    """Replace ``header`` by NEW once, at a fixed point of the next compile: 'after_key' (the
    key has read OLD, NVRTC then reads NEW) or 'before_key' (an early NVRTC compile reads OLD,
    then the key reads NEW)."""
    keyed, replaced, done = threading.Event(), threading.Event(), []
    real_key, real_nvrtc = program.compute_key, program._nvrtc_compile

    def key_hook(*args, **kw):
        if when == "before_key":
            assert replaced.wait(30)
        out = real_key(*args, **kw)
        keyed.set()
        return out

    def nvrtc_hook(req, ctx, dump):
        if done:
            return real_nvrtc(req, ctx, dump)
        done.append(1)
        if when == "after_key":
            assert keyed.wait(30)
            _replace(header, NEW)
            return real_nvrtc(req, ctx, dump)
        out = real_nvrtc(req, ctx, dump)
        time.sleep(0.02)  # past the file system clock's tick
        _replace(header, NEW)
        replaced.set()
        return out

    monkeypatch.setattr(program, "compute_key", key_hook)
    monkeypatch.setattr(program, "_nvrtc_compile", nvrtc_hook)


# served only for the text compiled: (where the header changes, CUPY_RAWCODE_OVERLAP)
RACES = [("after_key", "0"), ("after_key", "1"), ("before_key", "1")]


@pytest.mark.parametrize("when, overlap", RACES, ids=[f"{w}-overlap{o}" for w, o in RACES])
def test_served_only_for_the_text_compiled(when, overlap, tree, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", overlap)
    root = tree({"hv.h": OLD})
    header = root / "hv.h"
    time.sleep(0.05)  # the header is older than the request
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        _race(mp, header, when)
        warnings.simplefilter("always")
        first = _compile(root)
    assert not first.hit
    changed = [w for w in caught if issubclass(w.category, cupy_rawcode.HeaderChangedWarning)]
    if when == "after_key":  # compiled from NEW, keyed on OLD: returned, never stored
        assert _value(first) == "2222222"
        assert len(changed) == 1 and "hv.h" in str(changed[0].message)
        assert _cache_files("entries") == [] and _cache_files("manifests") == []
    else:  # the early result read OLD: recompiled from NEW, which the key saw
        assert _value(first) == "2222222"
    # every later compile gets the code of the text it asks for
    now_new = _compile(root)
    assert _value(now_new) == "2222222"
    _replace(header, OLD)
    again_old = _compile(root)
    assert _value(again_old) == "1111111" and not again_old.hit


def _compile_for(root, iid):
    req = request(KERNEL, arch="sm_80", target="ptx", source_dir=str(root), source_name="k.cu")
    return compile_for(req, index_id=iid)


def test_a_changed_header_writes_no_warm_index_record(tree, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")
    root = tree({"hv.h": OLD})
    _race(monkeypatch, root / "hv.h", "after_key")
    with pytest.warns(program.HeaderChangedWarning, match="hv.h"):
        _, result = _compile_for(root, "a" * 64)
    assert _value(result) == "2222222"
    assert index_lookup("a" * 64) is None and _cache_files("index") == []


CLI_KERNEL = """#include <cub/block/block_reduce.cuh>
#include "hv.h"
extern "C" __global__ void k(int* p) {
  using R = cub::BlockReduce<int, 128>;
  __shared__ typename R::TempStorage t;
  int v = R(t).Sum(p[threadIdx.x]);
  if (threadIdx.x == 0) p[0] = v + VAL;
}
"""


def _cli(root: Path, env: dict) -> subprocess.Popen:
    argv = [sys.executable, "-m", "cupy_rawcode.cli", "compile", str(root / "k.cu")]
    argv += ["--arch", "sm_80", "--target", "ptx", "--output", str(root / "k.ptx")]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_header_saved_by_another_process_mid_compile(overlap, tree):
    """The issue's reproduction: the header is saved while a CUB kernel compiles in another
    process; the old text compiled again afterwards gives the old value."""
    root = tree({"k.cu": CLI_KERNEL, "hv.h": OLD})
    env = dict(os.environ, CUPY_RAWCODE_OVERLAP=overlap)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(program.__file__).parents[2])] + sys.path)
    manifests = Path(env["CUPY_RAWCODE_CACHE_DIR"]) / "manifests"
    proc = _cli(root, env)
    deadline = time.monotonic() + 60
    while not any(manifests.rglob("*.json")) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    _replace(root / "hv.h", NEW)  # keyed on OLD by now; NVRTC is still in CUB
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    _replace(root / "hv.h", OLD)
    proc = _cli(root, env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "1111111" in (root / "k.ptx").read_text(), out


@pytest.mark.parametrize("pch", ["auto", "1"])
def test_an_edited_header_never_comes_from_a_precompiled_header(pch, tree, monkeypatch):
    """NVRTC reuses a precompiled header made from a header's old text: each edit of the header
    between compiles of one process gives the code of the new text."""
    from cupy_rawcode.compiler import nvrtc

    monkeypatch.setenv("CUPY_RAWCODE_PCH", pch)
    monkeypatch.setattr(nvrtc, "_pch", nvrtc._Pch())
    root = tree({"hv.h": OLD})
    for text in [OLD, NEW, OLD.replace("1", "3"), NEW.replace("2", "4")]:
        _replace(root / "hv.h", text)
        value = text.split()[-1]
        assert value in _compile(root).code.decode()


def _in_place(path: Path, text: str, truncate: bool) -> None:
    """Rewrite ``path`` in place (same inode) with a same-sized text, and set its atime and
    mtime back: only the ctime tells."""
    st = os.stat(path)
    time.sleep(0.02)  # past the file system clock's tick
    if truncate:
        path.write_text(text)
    else:
        with open(path, "r+") as f:
            f.write(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = os.stat(path)
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)


# stamp changes that must miss: (how the header changes, ...)
IN_PLACE = [("overwritten", False), ("truncated-and-rewritten", True)]


@pytest.mark.parametrize("how, truncate", IN_PLACE, ids=[c[0] for c in IN_PLACE])
def test_an_in_place_rewrite_with_mtime_restored_misses(how, truncate, tree):
    root = tree({"hv.h": OLD})
    iid = "b" * 64
    _, first = _compile_for(root, iid)
    assert _value(first) == "1111111" and index_lookup(iid) is not None
    _in_place(root / "hv.h", NEW, truncate)
    assert index_lookup(iid) is None  # the warm index sees the change
    again = _compile(root)  # the manifest sees it: keyed on the new text
    assert _value(again) == "2222222" and not again.hit


def test_a_manifest_of_the_previous_schema_is_a_miss(tree):
    """Records written before stamps held the ctime are misses, not errors."""
    import json

    from cupy_rawcode.ground.stamps import take
    from cupy_rawcode.key import manifest
    from cupy_rawcode.key.request import context

    root = tree({"hv.h": OLD})
    req = make_request(KERNEL, arch="sm_80", target="ptx", source_dir=str(root), source_name="k.cu")
    ctx = context(req)
    _compile(root)
    path = manifest._path(manifest.manifest_id(req.source, ctx, req.pre_includes))
    data = json.loads(path.read_bytes())
    st = os.stat(root / "hv.h")
    data["schema"] = "cupy-rawcode-manifest-8"
    data["stamps"] = take([(str(root / "hv.h"), st.st_size, st.st_mtime_ns, st.st_ino)])[0]
    path.write_text(json.dumps(data))
    manifest._memo.clear()
    assert manifest.lookup(req.source, ctx, req.pre_includes) is None
    assert _value(_compile(root)) == "1111111"


def test_a_header_changed_while_cupy_compiles_stores_nothing(tree, monkeypatch):
    """install(scope="all"): CuPy reads the headers itself while it compiles; a header that
    changed since the key read it stores nothing, and the next key reads it again."""
    pytest.importorskip("cupy")
    from cupy._core import core
    from cupy.cuda import compiler

    from cupy_rawcode.hook import compiles as cupy_compiles
    from cupy_rawcode.hook import install as hook

    root = tree({"hv.h": OLD})
    options = core.assemble_cupy_compiler_options((f"-I{root}",))
    real, done = cupy_compiles.capture, []

    def racing(*args):
        if not done:
            done.append(_replace(root / "hv.h", NEW))
        return real(*args)

    def cupy_compile():
        with cupy_compiles.unloaded(compiler):
            compiler._compile_module_with_cache(
                KERNEL, options, arch="80", extra_source=core._get_header_source()
            )

    monkeypatch.setattr(cupy_compiles, "capture", racing)
    hook.install("all")
    try:
        with pytest.warns(cupy_rawcode.HeaderChangedWarning, match="hv.h"):
            cupy_compile()
        assert _cache_files("entries") == [] and _cache_files("manifests") == []
        cupy_compile()  # keyed on the text CuPy compiles now: stored
        assert len(_cache_files("entries")) == 1
    finally:
        hook.uninstall()
        hook.record(None)


START = 1_800_000_000_123_456_789  # a request's start, ns
# (ctime of the file, whether it may have changed since START): the file system's clock lags
LAGS = [
    (START + 1, True),
    (START - 5_000_000, True),  # within a tick of the coarse clock
    (START - 50_000_000, False),
    (1_800_000_000_000_000_000, True),  # whole seconds: a file system that keeps seconds
    (1_799_999_997_000_000_000, False),
]


@pytest.mark.parametrize("ctime, changed", LAGS)
def test_a_file_changed_since_the_request_started_allows_for_the_clock(ctime, changed, tmp_path):
    from cupy_rawcode.ground.stamps import absent, changed_since, take

    path = str(tmp_path / "x.h")
    part = take([(path, 1, 2, 3, ctime), absent(str(tmp_path / "none.h"))])
    assert (changed_since(part, START) == path) is changed
