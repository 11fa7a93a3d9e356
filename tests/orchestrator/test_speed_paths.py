"""The speed paths change nothing but time: compile overlapped with the header scan,
NVRTC's automatic precompiled headers, and a miss that never imports cuda.core."""

import pytest
from conftest import corpus

import cupy_rawcode
from cupy_rawcode.compiler import nvrtc
from cupy_rawcode.compiler.nvrtc import _Pch, include_prefix
from cupy_rawcode.key.request import make_request
from cupy_rawcode.orchestrator import compiling as program


@pytest.mark.parametrize(
    "source, prefix",
    [
        (
            "#include <a.h>\n#include <b.h>\n__global__ void k() {}\n",
            "#include <a.h>\n#include <b.h>",
        ),
        (
            "// c\n\n#include <a.h>\n#define X 1\nint y;\n#include <c.h>\n",
            "// c\n#include <a.h>\n#define X 1",
        ),
        ("__global__ void k() {}\n", ""),
    ],
)
def test_include_prefix(source, prefix):
    assert include_prefix(source) == prefix


def _req(src, **kw):
    return make_request(src, arch="sm_90", **kw)


A1 = "#include <a.h>\n__global__ void k1() {}\n"
A2 = "#include <a.h>\n__global__ void k2() {}\n"
B = "#include <b.h>\n__global__ void k3() {}\n"


def _src(header: str, i: int) -> str:
    return f"#include <{header}.h>\n__global__ void k{i}() {{}}\n"


PAIRS = [_src(h, i) for h in "bcd" for i in (1, 2)]
SERIES = [_src("e", i) for i in range(5)]
NONE = 'extern "C" __global__ void k() {}\n'


@pytest.mark.parametrize(
    "mode, sequence, expected",
    [
        # a repeated prefix creates (2nd), then reuses (3rd); the live PCH is reused later too
        ("auto", [A1, A2, A2, B, A1], [False, True, True, False, True]),
        # pairs: the first pair's PCH is never reused, so pairs stop creating one
        ("auto", [A1, A2] + PAIRS, [False, True] + [False] * 6),
        # after that waste a series creates at its 3rd, reuses from its 4th, and runs of 2 pay again
        (
            "auto",
            [A1, A2] + PAIRS + SERIES + PAIRS[:2],
            [False, True] + [False] * 6 + [False, False, True, True, True] + [False, True],
        ),
        # distinct prefixes never ask; nothing included, nothing to precompile
        ("auto", [_src(h, 0) for h in "abcdef"], [False] * 6),
        ("auto", [NONE] * 4, [False] * 4),
        ("0", [A1, A2, A2], [False, False, False]),
        ("1", [A1, B], [True, True]),
    ],
)
def test_pch_is_asked_for_only_when_it_can_pay(monkeypatch, mode, sequence, expected):
    monkeypatch.setenv("CUPY_RAWCODE_PCH", mode)
    pch = _Pch()
    assert [pch.wanted(_req(s), (12, 9)) for s in sequence] == expected


def test_pch_never_on_old_nvrtc_or_ptx(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "1")
    assert _Pch().wanted(_req(A1), (12, 6)) is False
    assert _Pch().wanted(_req("// x\n.version 8.0\n.target sm_90\n"), (12, 9)) is False


def test_pch_compile_gives_the_same_code(monkeypatch, tmp_path):
    src = corpus("warp_reduce.cu")
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "0")
    plain = bytes(cupy_rawcode.compile(src, arch="sm_90", cache_dir=tmp_path / "a").code)
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "1")
    monkeypatch.setattr(nvrtc, "_pch", _Pch())
    first = bytes(cupy_rawcode.compile(src, arch="sm_90", cache_dir=tmp_path / "b").code)
    again = bytes(cupy_rawcode.compile(src + "\n", arch="sm_90", cache_dir=tmp_path / "c").code)
    assert plain == first == again


@pytest.mark.parametrize("overlap", ["1", "0"])
def test_overlap_changes_nothing_but_time(monkeypatch, tmp_path, overlap):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", overlap)
    r = program.compile_request(_req(corpus("block_scan.cu")))
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0" if overlap == "1" else "1")
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / "other"))
    s = program.compile_request(_req(corpus("block_scan.cu")))
    assert (r.key, bytes(r.object_code.code)) == (s.key, bytes(s.object_code.code))


def test_missing_header_is_the_resolvers_error_even_with_overlap(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "1")
    with pytest.raises(cupy_rawcode.MissingHeaderError, match="no_such_header.h"):
        cupy_rawcode.compile('#include "no_such_header.h"\n__global__ void k() {}\n', arch="sm_90")
    assert program._in_flight == {}


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 300_000])
def test_scan_file_reads_whole_files_of_any_size(tmp_path, size):
    import hashlib

    from cupy_rawcode.headers import scan

    body = (b"#include <x.h>\n" + b"/" * 60 + b"\n") * (size // 76 + 1)
    path = tmp_path / "h.h"
    path.write_bytes(body[:size])
    _, s = scan.scan_file(str(path))
    assert s.digest == hashlib.sha256(body[:size]).hexdigest()


@pytest.mark.parametrize(
    "source, overlapped",
    [
        ("__global__ void k() {}\n", False),  # nothing to scan: no thread hand-off
        ("#include <a.h>\n__global__ void k() {}\n", True),
        ('#  include "a.h"\n', True),
    ],
)
def test_overlap_only_when_there_is_something_to_scan(source, overlapped):
    assert program._worth_overlapping(_req(source)) is overlapped
    assert program._worth_overlapping(_req(source, options=("-include", "a.h")))


def test_a_miss_looks_for_the_manifest_once(monkeypatch):
    from cupy_rawcode.key import manifest

    calls = []
    real = manifest.lookup
    monkeypatch.setattr(manifest, "lookup", lambda *a: calls.append(1) or real(*a))
    program.compile_request(_req("#include <cuda/std/cstdint>\n__global__ void k() {}\n"))
    assert len(calls) == 1


_HIT_WHILE_COMPILE_IMPORTS = r"""
import shutil, sys
from cupy_rawcode.store import layout
from cupy_rawcode.orchestrator import compiling as program
from cupy_rawcode.key.request import make_request
src = "#include <cuda/std/cstdint>\n__global__ void k(int* p) { *p = 1; }\n"
if sys.argv[1] == "fill":
    program.compile_request(make_request(src, arch="sm_90"))
    shutil.rmtree(layout.cache_dir() / "manifests")  # the next process expects a miss
else:
    # overlap starts the compile (importing cuda.core) on a worker thread; the key then hits
    # on this thread, which imports cuda.core too
    r = program.compile_request(make_request(src, arch="sm_90"))
    assert r.hit and r.object_code.code == r.code
    print("ok")
"""


def test_a_hit_while_the_overlapped_compile_imports_cuda_core(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "c")}
    for step in ("fill", "hit"):
        p = subprocess.run(
            [sys.executable, "-c", _HIT_WHILE_COMPILE_IMPORTS, step],
            env=env,
            capture_output=True,
            text=True,
        )
        assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "ok"


_HIT_MODULES = r"""
import json, sys
from cupy_rawcode.orchestrator import compiling as program
from cupy_rawcode.key.request import make_request
r = program.compile_request(make_request(open(sys.argv[1]).read(), arch="sm_90"))
print(json.dumps({"hit": r.hit, "modules": sorted(m for m in sys.modules if m.startswith(("cupy_rawcode", "pcpp", "cuda.core")))}))
"""


def test_a_warm_hit_imports_nothing_only_a_miss_needs(tmp_path):
    """Each module costs ~0.1-0.5 ms to import on the device host: the hit path keeps to the
    ones keying and reading the store need (NVRTC, stripping, resolving and writing stay out)."""
    from conftest import json_runs

    runs = json_runs(_HIT_MODULES, "block_reduce.cu", tmp_path / "c")
    assert [r["hit"] for r in runs] == [False, True]
    assert "cupy_rawcode.compiler.nvrtc" in runs[0]["modules"]
    # NVRTC through its own API: importing cuda.core cost 50-100 ms of a cold start
    assert not any(m.startswith("cuda.core") for m in runs[0]["modules"])
    miss_only = {
        "cupy_rawcode.compiler.nvrtc",
        "cupy_rawcode.compiler.strip",
        "cupy_rawcode.headers.closure",
        "cupy_rawcode.headers.scan",
        "cupy_rawcode.ground.fsutil",
        "pcpp",
        "cuda.core",
    }
    assert not miss_only & set(runs[1]["modules"])
