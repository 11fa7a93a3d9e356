"""The warm index (key/__init__.py) and file stamps (stamps.py): an index hit gives exactly the key the
full path computes, any change to what the key depends on is a miss, a broken index is a miss,
and a warm hit imports only the hit path's modules."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import corpus

from cupy_rawcode import ground, key
from cupy_rawcode.ground import stamps
from cupy_rawcode.kernel import RawKernel, RawModule
from cupy_rawcode.key import index_id, index_lookup, manifest
from cupy_rawcode.key.request import cache_key
from cupy_rawcode.store import layout
from cupy_rawcode.toolkit import record as toolrecord
from cupy_rawcode.toolkit.record import toolchain

CC = 90  # compiled for sm_90 without a GPU: NVRTC needs none


def _new_process():
    """What a new process does not know: the in-memory index, manifests and store layer."""
    from cupy_rawcode.store import _store_for

    key._index_memo.clear()
    manifest._memo.clear()
    _store_for.cache_clear()


def _inputs(build, cc=CC):
    source, where = build.source()
    return (source, build.options, f"cc{cc}", build.name_expressions or (), where)


def _full_key(build):
    """The key the full path computes for a RawKernel's build (request.compute_key)."""
    source, where = build.source()
    return cache_key(
        source,
        arch=f"sm_{CC}",
        options=build.options,
        name_expressions=build.name_expressions or (),
        source_dir=where,
        source_name=build.source_name,
    )


def _lookup(build, cc=CC):
    return index_lookup(index_id(*_inputs(build, cc)))


@pytest.fixture
def user_headers(tree):
    return tree(
        {
            "inc/scale.h": "#pragma once\n#define SCALE 2.0f\n",
            "inc/cuda_shift.h": "#pragma once\n#include <cuda/std/cstdint>\n#define SHIFT 1\n",
        }
    )


def _cases(root):
    inc = f"-I{root / 'inc'}"
    body = "__global__ void kern(const float* x, float* y, int n) {{ {} }}\n"
    return {
        "plain": lambda: RawKernel(corpus("plain.cu"), "kern")._build,
        "cub": lambda: RawKernel(corpus("block_reduce.cu"), "kern")._build,
        "user header and options": lambda: (
            RawKernel(
                '#include "scale.h"\n#include "cuda_shift.h"\n' + body.format("y[0] = SCALE;"),
                "kern",
                options=(inc, "-DEXTRA=3", "-std=c++17"),
            )._build
        ),
        "name expressions": lambda: (
            RawModule(
                code="template<int N> __global__ void kern(int* p) { *p = N; }\n",
                name_expressions=["kern<1>", "kern<2>"],
            )._build
        ),
        "translate_cucomplex": lambda: (
            RawKernel(
                "#include <cuComplex.h>\n" + body.format("cuComplex c = make_cuComplex(1, 2);"),
                "kern",
                translate_cucomplex=True,
            )._build
        ),
    }


@pytest.mark.parametrize(
    "case", ["plain", "cub", "user header and options", "name expressions", "translate_cucomplex"]
)
def test_an_index_hit_gives_exactly_the_full_paths_key(case, user_headers):
    build = _cases(user_headers)[case]()
    first = build.device_code(CC)
    _new_process()
    found = _lookup(build)
    assert found is not None
    assert found["key"] == _full_key(build)
    assert (found["arch"], found["target"]) == (f"sm_{CC}", "cubin")
    again = _cases(user_headers)[case]()
    assert again.device_code(CC) == first  # from the index, the same code and symbols


def _bump(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


# each case changes one thing the key (or the toolchain behind it) depends on
MISS_WHEN = {
    "a user header's content changes": lambda r, mp: (r / "inc" / "scale.h").write_text(
        "#pragma once\n#define SCALE 3.0f\n"
    ),
    "a user header is touched": lambda r, mp: _bump(r / "inc" / "scale.h"),
    "a user header is replaced, size and mtime kept": lambda r, mp: _replace_by_copy(
        r / "inc" / "scale.h"
    ),
    "a user header is removed": lambda r, mp: (r / "inc" / "scale.h").unlink(),
    "a system header in the closure is touched": lambda r, mp: _bump_system_header(mp),
    "CUPY_RAWCODE_STRIP is turned off": lambda r, mp: mp.setenv("CUPY_RAWCODE_STRIP", "0"),
    "the header search policy is set": lambda r, mp: mp.setenv(
        "CUPY_RAWCODE_HEADER_SOURCES", "wheel,toolkit"
    ),
    "CUDA_HOME is set": lambda r, mp: mp.setenv("CUDA_HOME", "/opt/elsewhere"),
    "LD_LIBRARY_PATH changes": lambda r, mp: mp.setenv("LD_LIBRARY_PATH", "/x"),
    "another Python prefix": lambda r, mp: mp.setattr(sys, "prefix", "/other/prefix"),
    "another Python executable": lambda r, mp: mp.setattr(sys, "executable", "/other/python"),
    "sys.path gains a site-packages": lambda r, mp: mp.setattr(
        sys, "path", sys.path + [str(r / "env" / "site-packages")]
    ),
    "the package's version changes": lambda r, mp: mp.setattr(key, "VERSION", "9.9.9"),
    "a package module changes": lambda r, mp: _stamp_changed(mp, "__init__.py"),
    "a subpackage module changes": lambda r, mp: _stamp_changed(mp, "headers/closure.py"),
    "a subpackage's __init__ changes": lambda r, mp: _stamp_changed(mp, "key/__init__.py"),
    "the index entry is removed": lambda r, mp: _for_each_entry(lambda p: p.unlink()),
    "the index entry is not JSON": lambda r, mp: _for_each_entry(lambda p: p.write_bytes(b"{")),
    "the index entry has another schema": lambda r, mp: _rewrite(schema="cupy-rawcode-index-0"),
    "the index entry lacks its stamps": lambda r, mp: _rewrite(drop="stamps"),
    "the key has the wrong type": lambda r, mp: _rewrite(key=12),
    "the count has the wrong type": lambda r, mp: _rewrite(count="650"),
    "the stamps are not a record": lambda r, mp: _rewrite(stamps="no"),
    "the stamps lack their digest": lambda r, mp: _rewrite_stamps(lambda st: st.pop("digest")),
    "the stamps name one file more": lambda r, mp: _rewrite_stamps(
        lambda st: st["dirs"].append(["/", ["etc"]])
    ),
    "the stamps name one file less": lambda r, mp: _rewrite_stamps(
        lambda st: st["dirs"][-1][1].pop()
    ),
    "the stamps' digest is another": lambda r, mp: _rewrite_stamps(
        lambda st: st.update(digest="0" * 64)
    ),
    "a directory name is not a string": lambda r, mp: _rewrite_stamps(
        lambda st: st["dirs"][0].__setitem__(0, 7)
    ),
}


def _replace_by_copy(path):
    """Other bytes of the same size, with the old mtime (as ``cp -p`` or a tar extract leave
    it), written beside the file and renamed over it: only the inode tells."""
    data, st = path.read_bytes(), os.stat(path)
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data.replace(b"2", b"5") if b"2" in data else data.swapcase())
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


def _rewrite_in_place(path):
    """Other bytes of the same size written into the same inode, the old mtime set back."""
    data, st = path.read_bytes(), os.stat(path)
    time.sleep(0.02)  # past the file system clock's tick
    with open(path, "r+b") as f:
        f.write(data.swapcase() if data.swapcase() != data else data[::-1] + b" ")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _bump_system_header(monkeypatch):
    """Touch CCCL's cuda/std/cstdint (in the closure via cuda_shift.h); its mtime is put back
    after the test."""
    (cccl,) = [d.path for d in toolchain().system_dirs if d.tag == "cccl"][:1]
    path = Path(cccl, "cuda", "std", "cstdint")
    st = os.stat(path)
    _RESTORE.append(lambda: os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns)))
    _bump(path)


_RESTORE: list = []


@pytest.fixture(autouse=True)
def _restore_touched_files():
    yield
    while _RESTORE:
        _RESTORE.pop()()


def _stamp_changed(monkeypatch, module):
    """As if ``module`` had been edited: its recorded stamp no longer matches."""
    real = stamps.package_stamps
    suffix = os.sep + os.path.join("cupy_rawcode", *module.split("/"))
    assert any(p.endswith(suffix) for p, *_ in real()), f"{module} is not stamped"

    def edited():
        return [
            (p, size, mtime - 1, *rest) if p.endswith(suffix) else (p, size, mtime, *rest)
            for p, size, mtime, *rest in real()
        ]

    monkeypatch.setattr(stamps, "package_stamps", edited)


def _entries():

    return sorted((layout.cache_dir() / "index").rglob("*.json"))


def _for_each_entry(change):
    for p in _entries():
        change(p)


def _rewrite_stamps(change):
    for p in _entries():
        data = json.loads(p.read_bytes())
        change(data["stamps"])
        p.write_text(json.dumps(data))


def _rewrite(drop=None, **changes):
    for p in _entries():
        data = json.loads(p.read_bytes())
        data.update(changes)
        data.pop(drop, None)
        p.write_text(json.dumps(data))


@pytest.mark.parametrize("case", sorted(MISS_WHEN))
def test_the_index_misses_when(case, user_headers, monkeypatch):
    src = (
        '#include "scale.h"\n#include "cuda_shift.h"\n'
        "__global__ void kern(float* y) { y[0] = SCALE + SHIFT; }\n"
    )
    opts = (f"-I{user_headers / 'inc'}",)
    # a changed package module is changed before recording
    recorded_wrong = "module changes" in case or "__init__" in case
    if recorded_wrong:
        MISS_WHEN[case](user_headers, monkeypatch)
    RawKernel(src, "kern", options=opts)._build.device_code(CC)
    _new_process()
    if not recorded_wrong:
        MISS_WHEN[case](user_headers, monkeypatch)
    _new_process()
    build = RawKernel(src, "kern", options=opts)._build
    assert _lookup(build) is None
    if case != "a user header is removed" and not recorded_wrong:  # (removed: the full path
        build.device_code(CC)  # fails, naming the header) the full path writes the entry again
        _new_process()
        found = _lookup(build)
        assert found is not None and found["key"] == _full_key(build)


def test_the_index_misses_when_a_header_appears_in_the_source_directory(user_headers):
    """A quoted include of a .cu file looks in the file's directory first; found elsewhere, the
    file it did not find there is stamped absent, so its arrival makes the index miss."""
    cu = user_headers / "src" / "k.cu"
    cu.parent.mkdir()
    cu.write_text('#include "scale.h"\n__global__ void kern(float* y) { y[0] = SCALE; }\n')
    opts = (f"-I{user_headers / 'inc'}",)
    RawModule(path=str(cu), options=opts)._build.device_code(CC)
    _new_process()
    assert _lookup(RawModule(path=str(cu), options=opts)._build) is not None
    (cu.parent / "scale.h").write_text("#pragma once\n#define SCALE 4.0f\n")
    _new_process()
    build = RawModule(path=str(cu), options=opts)._build
    assert _lookup(build) is None
    build.device_code(CC)
    _new_process()
    assert _lookup(build)["key"] == _full_key(build)


@pytest.mark.parametrize(
    "change", ["source", "options", "device", "name expressions", "source directory"]
)
def test_every_raw_input_is_in_the_index_id(change):
    base = ("src", ("-ftz=true",), "cc90", ("k<1>",), None)
    changed = {
        "source": ("src ", *base[1:]),
        "options": (base[0], ("-ftz=true", "-DX"), *base[2:]),
        "device": (*base[:2], "cc80", *base[3:]),
        "name expressions": (*base[:3], ("k<1>", "k<2>"), None),
        "source directory": (*base[:4], "/some/dir"),
    }[change]
    assert index_id(*changed) != index_id(*base)
    assert index_id(*base) == index_id(*base)


@pytest.mark.parametrize(
    "options, cwd_counts",
    [
        (("-Iinc",), True),  # another working directory: another inc/
        (("-I", "inc"), True),
        (("--include-path=inc",), True),
        (("-isystem", "../inc"), True),
        (("-include", "pre.h"), True),  # searched in the working directory first
        (("-I/abs/inc",), False),
        (("--include-path", "/abs/inc", "-DX=1"), False),
        (("-DX=1", "-std=c++17"), False),
    ],
)
def test_the_working_directory_is_in_the_index_id_when_the_options_depend_on_it(
    tmp_path, monkeypatch, options, cwd_counts
):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    here = index_id("src", options, "cc90", (), None)
    monkeypatch.chdir(tmp_path / "b")
    assert (index_id("src", options, "cc90", (), None) != here) == cwd_counts


def test_a_relative_include_directory_in_another_directory_is_not_answered_by_the_index(
    tmp_path, monkeypatch
):
    """-Iinc in a/ and then in b/ (another process): b/inc/v.h is compiled, not a/'s kernel
    (the index answered with a/'s key while a/inc/v.h still held)."""
    src = '#include "v.h"\nextern "C" __global__ void k(int* o) { o[0] = V; }\n'
    for d, v in (("a", 1), ("b", 2)):
        (tmp_path / d / "inc").mkdir(parents=True)
        (tmp_path / d / "inc" / "v.h").write_text(f"#define V {v}\n")
    monkeypatch.chdir(tmp_path / "a")
    RawKernel(src, "k", ("-Iinc",))._build.device_code(CC)
    _new_process()
    monkeypatch.chdir(tmp_path / "b")
    build = RawKernel(src, "k", ("-Iinc",))._build
    got = _lookup(build)
    assert got is None or got["key"] == _full_key(build)
    build.device_code(CC)
    _new_process()
    assert _lookup(build)["key"] == _full_key(build)


def test_the_index_stamps_the_toolchain_record_the_closure_and_the_package():
    build = RawKernel(corpus("block_scan.cu"), "kern")._build
    build.device_code(CC)
    (entry,) = _entries()
    data = json.loads(entry.read_bytes())
    stamped = {os.path.join(d, n) for d, names in data["stamps"]["dirs"] for n in names}
    tc = toolchain()
    assert set(toolrecord.watched_paths(tc)) <= stamped
    pkg = Path(key.__file__).parent.parent
    keyed = {str(p) for p in pkg.glob("*.py")} | {str(p) for p in pkg.glob("*/*.py")}
    unkeyed = {p for p in keyed if Path(p).parent.name in stamps.UNKEYED}
    assert unkeyed and keyed - unkeyed <= stamped and not unkeyed & stamped

    (man,) = (layout.cache_dir() / "manifests").rglob("*.json")
    closure = {
        os.path.join(d, n)
        for d, names in json.loads(man.read_bytes())["stamps"]["dirs"]
        for n in names
    }
    assert len(closure) == data["count"] > 100 and closure <= stamped


def test_an_entry_the_store_lost_is_compiled_again(monkeypatch):
    build = RawKernel(corpus("plain.cu"), "kern")._build
    first = build.device_code(CC)

    for p in (layout.cache_dir() / "entries").rglob("*"):
        if p.is_file():
            p.unlink()
    _new_process()
    again = RawKernel(corpus("plain.cu"), "kern")._build
    assert _lookup(again) is not None
    assert again.device_code(CC) == first


def test_an_unwritable_cache_still_compiles_and_writes_no_index(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(blocker / "c"))
    build = RawKernel(corpus("std_traits.cu"), "kern")._build
    assert build.device_code(CC).data[:4] == b"\x7fELF"
    _new_process()
    assert _lookup(build) is None


def test_the_log_line_says_an_index_hit(caplog):
    import io
    import logging

    RawKernel(corpus("plain.cu"), "kern")._build.device_code(CC)
    _new_process()
    log = io.StringIO()
    with caplog.at_level(logging.INFO, logger="cupy_rawcode"):
        RawKernel(corpus("plain.cu"), "kern")._build.device_code(CC, log)
    lines = [r.getMessage() for r in caplog.records if r.name == "cupy_rawcode"]
    assert len(lines) == 1 and lines[0].startswith(f"cupy-rawcode: hit sm_{CC} cubin key ")
    assert "ms index, disk)" in lines[0]
    assert log.getvalue() == ""  # the compiler log (NVRTC's: plain.cu has no warning) only


_WARM = r"""
import json, sys
import cupy_rawcode
k = cupy_rawcode.RawKernel(open(sys.argv[1]).read(), "kern")
code = k._build.device_code(90)
print(json.dumps({"size": len(code.data), "modules": sorted(
    m for m in sys.modules if m.startswith(("cupy_rawcode", "pcpp", "cuda.core")))}))
"""

HIT_PATH = {
    "cupy_rawcode",
    "cupy_rawcode.kernel",  # the drop-in classes (not pickling or cucomplex: imported when used)
    "cupy_rawcode.kernel.building",  # their checks, the warm index hit
    "cupy_rawcode.kernel.loading",  # the module loader and the table of loaded modules
    "cupy_rawcode.ground",  # deferred(), digests, exception roots, file readers, StampedRecord
    "cupy_rawcode.ground.config",
    "cupy_rawcode.key",  # the key's fields and the warm index
    "cupy_rawcode.store",  # with Levels, the store a compile reads through
    "cupy_rawcode.store.base",  # the Store interface, MemoryStore, each level's tally
    "cupy_rawcode.store.directory",
    "cupy_rawcode.store.entry",  # the entry format, with zstd (its C backend alone)
    "cupy_rawcode.store.layout",  # is the directory a cache (CACHEDIR.TAG)? once per process
}


def test_a_warm_process_imports_only_the_hit_path(tmp_path):
    """Each module costs ~0.1-0.6 ms to import on the device host: a warm RawKernel keys
    through the index, without options, request, search, toolchain, manifest or program."""
    from conftest import json_runs

    runs = json_runs(_WARM, "radix_sort.cu", tmp_path / "c")
    assert "cupy_rawcode.key.request" in runs[0]["modules"]  # the first process keys the full way
    assert set(runs[1]["modules"]) == HIT_PATH
    assert runs[0]["size"] == runs[1]["size"] > 0


_RACE = r"""
import sys
import time
import cupy_rawcode
k = cupy_rawcode.RawKernel(open(sys.argv[1]).read(), "kern")
sys.stdout.write(k._build.device_code(90).data.hex()[:4096])
"""


def test_processes_racing_on_a_first_launch_agree_and_leave_one_index_entry(tmp_path):
    from conftest import CORPUS

    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "c")}
    cmd = [sys.executable, "-c", _RACE, str(CORPUS / "warp_reduce.cu")]
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and outs[0][0]
    files = list((tmp_path / "c" / "index").rglob("*"))
    assert len([f for f in files if f.is_file()]) == 1  # no temp file left behind
    after = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    assert after.stdout == outs[0][0]


# stamps.check: each case stamps a file, changes something, and says whether the stamps hold
def _file(tmp_path):
    p = tmp_path / "d" / "f.h"
    p.parent.mkdir(exist_ok=True)
    p.write_text("x")
    return p


HOLD = {
    "nothing changed": (lambda p: None, True),
    "content of another size": (lambda p: p.write_text("xy"), False),
    "same size, newer mtime": (lambda p: (p.write_text("y"), _bump(p)), False),
    "replaced, size and mtime kept (new inode)": (_replace_by_copy, False),
    "rewritten in place, size and mtime kept (the ctime tells)": (_rewrite_in_place, False),
    "removed": (lambda p: p.unlink(), False),
    "its directory removed": (lambda p: (p.unlink(), p.parent.rmdir()), False),
}


@pytest.mark.parametrize("case", sorted(HOLD))
def test_stamps_hold_until_a_file_changes(case, tmp_path):
    p = _file(tmp_path)
    rec, values = stamps.take([stamps.stamp(str(p)), stamps.stamp(str(tmp_path))])
    assert ground.check_stamps(rec) == values
    change, holds = HOLD[case]
    change(p)
    assert (ground.check_stamps(rec) is not None) is holds


@pytest.mark.parametrize("create, holds", [(False, True), (True, False)])
def test_a_file_stamped_absent_must_stay_absent(tmp_path, create, holds):
    missing = tmp_path / "gone" / "nothing.h"
    rec, values = stamps.take([stamps.stamp(str(missing))])
    assert rec["dirs"] == [[str(missing.parent), ["nothing.h"]]] and values == [-1] * ground.WIDTH
    if create:
        missing.parent.mkdir()
        missing.write_text("now here")
    assert (ground.check_stamps(rec) is not None) is holds


def test_merged_stamps_hold_while_every_part_holds(tmp_path):
    a, b = _file(tmp_path), tmp_path / "e" / "g.h"
    b.parent.mkdir()
    b.write_text("g")
    parts = [stamps.take([stamps.stamp(str(a))]), stamps.take([stamps.stamp(str(b))])]
    rec = stamps.merge(parts)
    assert ground.check_stamps(rec) == parts[0][1] + parts[1][1]
    b.write_text("gg")
    assert ground.check_stamps(rec) is None


def test_cache_clear_removes_the_index():
    from cupy_rawcode import cli

    RawKernel(corpus("plain.cu"), "kern")._build.device_code(CC)
    assert _entries()
    assert cli.main(["cache", "clear"]) == 0
    assert not (layout.cache_dir() / "index").exists()
