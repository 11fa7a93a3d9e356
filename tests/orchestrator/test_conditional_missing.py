"""An include that matches no file inside an #if: the scan cannot tell whether NVRTC takes the
branch, so NVRTC is left to open it. When NVRTC then says "cannot open source file", the error
is the resolver's, as for an include outside every #if: a MissingHeaderError with the include
chain and the directories searched (CLI exit 3), a moved header answered by its new name, and
jitify=True's dropped includes (orchestrator/missing.py, flow._retrying)."""

import subprocess
import sys
import warnings

import pytest
from conftest import ROOT

import cupy_rawcode
from cupy_rawcode.compiler.relocated import RelocatedIncludeWarning
from cupy_rawcode.orchestrator.jitify import DroppedIncludeWarning

KERNEL = 'extern "C" __global__ void k(int* p) { *p = value(); }\n'
VALUE = "__device__ int value() { return 1; }\n"

# condition -> whether NVRTC takes its branch (with -DFLAG, for sm_90)
CONDITIONS = [
    ("#if 1", True),
    ("#ifdef __CUDACC__", True),
    ("#ifdef FLAG", True),
    ("#if defined(FLAG) && __CUDA_ARCH__ >= 800", True),
    ("#if 0\n#elif 1", True),
    ("#ifndef __CUDACC_RTC__\n#else", True),
    ("#if 0", False),
    ("#ifdef __HIPCC__", False),
    ("#ifndef FLAG", False),
]


def _header(tree, condition: str, name: str = "no_such_header.h"):
    """A tree with h.h holding the missing include under ``condition``; its -I options."""
    root = tree({"i/h.h": f"#pragma once\n{condition}\n#include <{name}>\n#endif\n{VALUE}"})
    return (f"-I{root / 'i'}", "-DFLAG")


@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("condition, taken", CONDITIONS, ids=[c for c, _ in CONDITIONS])
def test_a_missing_include_nvrtc_reaches_is_the_resolvers_error(
    tree, monkeypatch, condition, taken, overlap
):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", overlap)
    options = _header(tree, condition)
    source = '#include "h.h"\n' + KERNEL
    if not taken:
        cupy_rawcode.compile(source, arch="sm_90", options=options)
        return
    for _ in range(2):  # the second keyed by the manifest the first wrote
        with pytest.raises(cupy_rawcode.MissingHeaderError) as e:
            cupy_rawcode.compile(source, arch="sm_90", options=options)
        said = str(e.value)
        assert 'cannot open source file "no_such_header.h"' in said
        assert "included from <source>:1" in said and "searched:" in said
        assert [m.name for m in e.value.missing] == ["no_such_header.h"]
        assert "cannot open source file" in e.value.log  # NVRTC's own log, kept


def test_it_is_still_cupys_compile_exception():
    cupy_compiler = pytest.importorskip("cupy.cuda.compiler")
    source = "#if 1\n#include <no_such_header.h>\n#endif\n" + KERNEL
    with pytest.raises(cupy_compiler.CompileException):
        cupy_rawcode.RawKernel(source, "k").compile(arch="sm_90")


def test_the_command_line_exits_3_for_it(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("#ifdef __CUDACC__\n#include <no_such_header.h>\n#endif\n" + KERNEL)
    out = subprocess.run(
        [sys.executable, "-m", "cupy_rawcode", "compile", str(path), "--arch", "sm_90"],
        capture_output=True,
        text=True,
        env={"CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 3, out.stderr
    assert "no_such_header.h" in out.stderr and "searched:" in out.stderr


# where CuPy 12's CUB include stands -> it is answered by CCCL's <cub/...>, one warning
MOVED = "#include <cupy/cub/cub/block/block_load.cuh>\n"
MOVED_USE = (
    'extern "C" __global__ void k(float* x) {\n'
    "  float v[2]; cub::LoadDirectBlocked(threadIdx.x, x, v); x[0] = v[1];\n}\n"
)
MOVED_PLACES = {
    "outside any #if": MOVED,
    "inside #if 1": "#if 1\n" + MOVED + "#endif\n",
    "a HIP/CUDA split": "#ifdef __HIPCC__\n#include <hipcub/hipcub.hpp>\n#else\n"
    + MOVED
    + "#endif\n",
}


@pytest.mark.parametrize("place", sorted(MOVED_PLACES))
def test_a_moved_header_inside_an_if_is_answered_by_its_new_name(place):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cupy_rawcode.compile(MOVED_PLACES[place] + MOVED_USE, arch="sm_90")
    assert [x.category for x in w] == [RelocatedIncludeWarning], [str(x.message) for x in w]


@pytest.mark.parametrize("condition, taken", CONDITIONS, ids=[c for c, _ in CONDITIONS])
def test_jitify_drops_a_missing_include_inside_an_if_in_a_header(tree, condition, taken):
    options = _header(tree, condition)
    source = '#include "h.h"\n' + KERNEL
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cupy_rawcode.RawModule(code=source, options=options, jitify=True).compile(arch="sm_90")
    dropped = [x for x in w if x.category is DroppedIncludeWarning]
    assert len(dropped) == int(taken)
    assert not dropped or "no_such_header.h" in str(dropped[0].message)


def test_jitify_drops_each_include_nvrtc_meets_in_turn(tree):
    """NVRTC names one missing include per compile: each is dropped in turn, as Jitify did."""
    root = tree(
        {
            "i/h.h": (
                "#pragma once\n#if 1\n#include <gone_a.h>\n#endif\n"
                "#ifdef __CUDACC__\n#include <gone_b.h>\n#endif\n"
                "#ifdef __HIPCC__\n#include <gone_c.h>\n#endif\n" + VALUE
            )
        }
    )
    source = '#include "h.h"\n' + KERNEL
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mod = cupy_rawcode.RawModule(code=source, options=(f"-I{root / 'i'}",), jitify=True)
        mod.compile(arch="sm_90")
    said = " ".join(str(x.message) for x in w if x.category is DroppedIncludeWarning)
    assert "gone_a.h" in said and "gone_b.h" in said and "gone_c.h" not in said


def test_jitify_keeps_the_error_for_the_sources_own_include_inside_an_if():
    source = "#if 1\n#include <no_such_header.h>\n#endif\n" + VALUE + KERNEL
    with pytest.raises(cupy_rawcode.MissingHeaderError, match="no_such_header.h"):
        cupy_rawcode.RawModule(code=source, jitify=True).compile(arch="sm_90")


MOVED_TWO = (
    "#include <cupy/cub/cub/block/block_load.cuh>\n#include <cupy/cub/cub/block/block_store.cuh>\n"
)
MOVED_TWO_USE = (
    'extern "C" __global__ void k(float* x) {\n  float v[2];\n'
    "  cub::LoadDirectBlocked(threadIdx.x, x, v); cub::StoreDirectBlocked(threadIdx.x, x, v);\n}\n"
)


@pytest.mark.parametrize(
    "where", ["#if 1", "#ifdef __HIPCC__\n#include <hipcub/hipcub.hpp>\n#else"]
)
def test_every_moved_header_inside_an_if_is_answered_before_nvrtc_runs(where, monkeypatch):
    """All at once, as outside an #if: no compile fails on one first (which every later call
    would pay again: the failure is never kept)."""
    from cupy_rawcode.orchestrator import compiling

    runs = []
    real = compiling._nvrtc_compile
    monkeypatch.setattr(compiling, "_nvrtc_compile", lambda *a: runs.append(1) or real(*a))
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cupy_rawcode.compile(f"{where}\n{MOVED_TWO}#endif\n{MOVED_TWO_USE}", arch="sm_90")
    assert len(runs) == 1
    (said,) = [str(x.message) for x in w if x.category is RelocatedIncludeWarning]
    assert "block_load.cuh" in said and "block_store.cuh" in said


@pytest.mark.parametrize("moved_first", [True, False])
def test_jitify_answers_a_moved_header_by_its_new_name_beside_a_dropped_one(tree, moved_first):
    blocks = ["#if 1\n#include <gone_a.h>\n#endif\n", "#if 1\n" + MOVED + "#endif\n"]
    root = tree({"i/h.h": "#pragma once\n" + "".join(blocks[::-1] if moved_first else blocks)})
    source = '#include "h.h"\n' + MOVED_USE
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mod = cupy_rawcode.RawModule(code=source, options=(f"-I{root / 'i'}",), jitify=True)
        mod.compile(arch="sm_90")
    kinds = sorted(x.category.__name__ for x in w)
    assert kinds == ["DroppedIncludeWarning", "RelocatedIncludeWarning"]


def test_the_include_nvrtc_names_is_the_one_reported_not_another_of_its_name(tree):
    """NVRTC says which file and line could not open it: the source's own include, not an
    include of the same name in a header's branch NVRTC never takes."""
    root = tree({"i/untaken.h": "#pragma once\n#ifdef __HIPCC__\n#include <gone.h>\n#endif\n"})
    source = '#include "untaken.h"\n#ifdef __CUDACC__\n#include <gone.h>\n#endif\n' + VALUE + KERNEL
    options = (f"-I{root / 'i'}",)
    with pytest.raises(cupy_rawcode.MissingHeaderError) as e:
        cupy_rawcode.compile(source, arch="sm_90", options=options)
    assert [[str(s) for s in m.chain] for m in e.value.missing] == [["<source>:3"]]
    with pytest.raises(cupy_rawcode.MissingHeaderError):  # the source's own: never dropped
        cupy_rawcode.RawModule(code=source, options=options, jitify=True).compile(arch="sm_90")


def test_jitify_never_answers_the_sources_own_include_by_a_headers_dropped_one(tree):
    """A header's include is dropped; the source's own include of the same name, met next,
    still fails (the empty header stands in for includes of headers only)."""
    root = tree({"i/taken.h": "#pragma once\n#ifdef __CUDACC__\n#include <gone.h>\n#endif\n"})
    source = '#include "taken.h"\n#if 1\n#include <gone.h>\n#endif\n' + VALUE + KERNEL
    module = cupy_rawcode.RawModule(code=source, options=(f"-I{root / 'i'}",), jitify=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedIncludeWarning)
        with pytest.raises(cupy_rawcode.CompileError, match='cannot open source file "gone.h"'):
            module.compile(arch="sm_90")


def test_jitify_names_the_dropped_includes_when_the_sources_own_then_fails(tree):
    root = tree({"i/h.h": "#pragma once\n#if 1\n#include <gone_in_header.h>\n#endif\n" + VALUE})
    source = '#include "h.h"\n#if 1\n#include <gone_in_source.h>\n#endif\n' + KERNEL
    module = cupy_rawcode.RawModule(code=source, options=(f"-I{root / 'i'}",), jitify=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedIncludeWarning)
        with pytest.raises(cupy_rawcode.MissingHeaderError) as e:
            module.compile(arch="sm_90")
    assert "gone_in_header.h" in str(e.value) and "gone_in_source.h" in str(e.value)


def test_a_dumped_source_is_named_by_the_missing_header_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_DUMP_SOURCE", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with pytest.raises(cupy_rawcode.MissingHeaderError) as e:
        cupy_rawcode.compile("#if 1\n#include <no_such_header.h>\n#endif\n" + KERNEL, arch="sm_90")
    assert e.value.dump_path and f"written to {e.value.dump_path}" in str(e.value)
