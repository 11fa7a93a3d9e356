"""Compile through the cache (CPU: NVRTC needs no GPU)."""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, corpus

from cupy_rawcode.compiler.nvrtc import CompileError
from cupy_rawcode.key.request import make_request
from cupy_rawcode.orchestrator.compiling import compile_request
from cupy_rawcode.store import Levels
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.memory import MemoryStore

NVRTC_KERNELS = [
    "block_reduce.cu",
    "block_scan.cu",
    "complex.cu",
    "plain.cu",
    "radix_sort.cu",
    "warp_reduce.cu",
]


@pytest.mark.parametrize("name", NVRTC_KERNELS)
def test_corpus_compiles_to_cubin(name, tmp_path):
    store = Levels([DirectoryStore(tmp_path / "c")])
    r = compile_request(make_request(corpus(name), arch="sm_90"), store=store)
    assert not r.hit and r.object_code.code[:4] == b"\x7fELF"


_CHILD = r"""
import json, sys
from cupy_rawcode.orchestrator import compiling as program
from cupy_rawcode.key.request import make_request
calls = []
orig = program._nvrtc_compile
program._nvrtc_compile = lambda *a: (calls.append(1), orig(*a))[1]
src = open(sys.argv[1]).read()
names = tuple(sys.argv[2:])
r = program.compile_request(make_request(src, arch="sm_90", name_expressions=names))
print(json.dumps({"hit": r.hit, "compiles": len(calls), "key": r.key,
                  "symbols": {k: v.decode() for k, v in r.object_code.symbol_mapping.items()},
                  "size": len(r.object_code.code)}))
"""


def _child(path, env, *names):
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), *names],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_second_process_hits_without_nvrtc_and_keeps_name_expressions(tmp_path):
    src = tmp_path / "t.cu"
    src.write_text(
        "#include <cub/warp/warp_reduce.cuh>\n"
        "template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= N; }\n"
    )
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "c")}
    first = _child(src, env, "scale<3>")
    second = _child(src, env, "scale<3>")
    assert (first["hit"], first["compiles"]) == (False, 1)
    assert (second["hit"], second["compiles"]) == (True, 0)
    assert second["symbols"] == first["symbols"] and second["symbols"]["scale<3>"].startswith("_Z")
    assert second["size"] == first["size"]


def _entry_path(tmp_path, key):
    return DirectoryStore(tmp_path / "c").path(key)


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "foreign", "other_key"])
def test_broken_entry_is_a_miss(tmp_path, damage, caplog):
    req = make_request(corpus("plain.cu"), arch="sm_90")
    disk = lambda: Levels([DirectoryStore(tmp_path / "c")])
    good = compile_request(req, store=disk())
    path = _entry_path(tmp_path, good.key)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 0x40]) + data[-9:])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "foreign":
        path.write_bytes(b"\x80\x04this is a pickle, never loaded")
    else:
        other = compile_request(
            make_request(corpus("plain.cu") + "//x\n", arch="sm_90"), store=disk()
        )
        path.write_bytes(_entry_path(tmp_path, other.key).read_bytes())
    again = compile_request(req, store=disk())
    assert not again.hit and again.object_code.code == good.object_code.code
    from cupy_rawcode.store.entry import decode

    assert decode(good.key, path.read_bytes())[0] == good.object_code.code  # replaced, valid
    assert "broken cache entry" in caplog.text


def test_read_only_cache_still_compiles(tmp_path, caplog):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    if os.access(ro, os.W_OK):
        pytest.skip("running as root: directory permissions are not enforced")
    r = compile_request(
        make_request(corpus("plain.cu"), arch="sm_90"),
        store=Levels([MemoryStore(), DirectoryStore(ro / "c")]),
    )
    assert not r.hit and len(r.object_code.code) > 0


def test_unwritable_cache_path_still_compiles(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = Levels([MemoryStore(), DirectoryStore(blocker / "c")])
    req = make_request(corpus("plain.cu"), arch="sm_90")
    assert not compile_request(req, store=store).hit
    assert compile_request(req, store=store).hit  # from memory


def test_eight_processes_compile_at_once(tmp_path):
    src = tmp_path / "t.cu"
    src.write_text(corpus("block_reduce.cu"))
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "c")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(src)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for _ in range(8)
    ]
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    results = [json.loads(o) for o, _ in outs]
    assert len({r["key"] for r in results}) == 1
    from cupy_rawcode.store.entry import decode

    files = [p for p in (tmp_path / "c" / "entries").rglob("*") if p.is_file()]
    assert not any(p.name.endswith(".tmp") for p in files)
    # the kernel's entry, and its closure's record (key/portable.py)
    entries = [p for p in files if decode(p.name, p.read_bytes())[1].get("target") == "cubin"]
    assert len(entries) == 1 and len(files) == 2

    code, meta = decode(results[0]["key"], entries[0].read_bytes())
    assert len(code) == results[0]["size"]


def test_compile_error_carries_log_options_and_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_DUMP_SOURCE", "1")
    src = 'extern "C" __global__ void k(float* x) {\n  x[0] = nope;\n}\n'
    with pytest.raises(CompileError) as e:
        compile_request(
            make_request(src, arch="sm_90", options=("-DQ=1",)), store=Levels([MemoryStore()])
        )
    err = e.value
    assert "nope" in err.log and "--define-macro=Q=1" in err.options
    assert ">     2 |   x[0] = nope;" in str(err)
    assert err.dump_path and "nope" in open(err.dump_path).read()


def test_passthrough_option_reaches_nvrtc():
    with pytest.raises(CompileError, match="bogus"):
        compile_request(
            make_request("", arch="sm_90", options=("--bogus-flag",)),
            store=Levels([MemoryStore()]),
        )


@pytest.mark.parametrize("arch", ["compute_90", "lto_90"])
def test_cubin_of_a_virtual_arch_is_refused_up_front(arch):
    with pytest.raises(ValueError, match=f"{arch}.*virtual.*target='ptx'"):
        make_request(corpus("plain.cu"), arch=arch, target="cubin")


def test_ptx_compiles_with_name_expressions_on_any_host(tmp_path):
    """NVRTC needs no GPU or driver for PTX (cuda.core 1.2 asks the driver and raises without
    one; the package then asks NVRTC directly). Runs in CI, which has no GPU."""
    store = Levels([DirectoryStore(tmp_path / "c")])
    src = "template <class T> __global__ void k(T* p) { *p = T(3); }\n"
    req = make_request(src, arch="compute_90", target="ptx", name_expressions=("k<float>",))
    first = compile_request(req, store=store)
    again = compile_request(req, store=store)
    ptx = bytes(first.object_code.code)
    mangled = first.object_code.symbol_mapping["k<float>"]
    assert ptx.startswith(b"//") and b".version" in ptx and b".entry " + mangled in ptx
    assert (again.hit, bytes(again.object_code.code), again.symbols) == (
        True,
        ptx,
        {"k<float>": mangled.decode()},
    )


def test_ptx_compile_error_says_where(tmp_path):
    store = Levels([DirectoryStore(tmp_path / "c")])
    req = make_request("__global__ void k() {\n  nope();\n}\n", arch="compute_90", target="ptx")
    with pytest.raises(
        CompileError, match=r"(?s)identifier \"nope\" is undefined.*>     2 \|   nope\(\);"
    ):
        compile_request(req, store=store)
