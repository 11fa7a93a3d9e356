"""The orchestrator (orchestrator/flow.py): every entry point compiles through flow.compile_for
with one Request, and a missing header has one retry path (CPU: NVRTC needs no GPU)."""

import warnings

import pytest

import cupy_rawcode
from cupy_rawcode.compiler.relocated import RelocatedIncludeWarning
from cupy_rawcode.key import index_lookup
from cupy_rawcode.key.request import Request
from cupy_rawcode.orchestrator import flow
from cupy_rawcode.parallel.task import Task, run_task

ARCH = "sm_80"
PLAIN = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
MOVED = (  # CuPy 12's CUB path, answered by CCCL's (compiler/relocated.py)
    "#include <cupy/cub/cub/block/block_load.cuh>\n"
    'extern "C" __global__ void k(float* x) {\n'
    "  float v[2]; cub::LoadDirectBlocked(threadIdx.x, x, v); x[0] = v[1];\n}\n"
)


def _compile(src):
    return cupy_rawcode.compile(src, arch=ARCH)


def _kernel(src):
    return cupy_rawcode.RawKernel(src, "k").compile(arch=ARCH)


def _jitify_kernel(src):
    return cupy_rawcode.RawKernel(src, "k", jitify=True).compile(arch=ARCH)


def _task(src):
    out = run_task(Task(src, arch=ARCH))
    assert out.error is None, out.error


ENTRY_POINTS = [
    ("compile()", _compile, False),
    ("RawKernel", _kernel, False),
    ("RawKernel jitify=True", _jitify_kernel, True),
    ("a prebuild or warmup task", _task, False),
]


@pytest.mark.parametrize("how, call, jitify", ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_every_entry_point_compiles_one_request_through_the_orchestrator(
    how, call, jitify, monkeypatch
):
    seen = []
    real = flow.compile_for

    def spy(req, **kw):
        seen.append((req, kw.get("jitify_mode", False)))
        return real(req, **kw)

    monkeypatch.setattr(flow, "compile_for", spy)
    call(PLAIN)
    assert len(seen) == 1, how
    req, mode = seen[0]
    assert isinstance(req, Request) and req.arch == ARCH and mode == jitify


@pytest.mark.parametrize("how, call, jitify", ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_a_moved_header_is_answered_once_whatever_the_entry_point(how, call, jitify):
    with pytest.warns(RelocatedIncludeWarning) as w:
        call(MOVED)
    assert len([x for x in w if x.category is RelocatedIncludeWarning]) == 1, how


# (source, whether the warm index gets the key): a retry answers a header from a directory
# that lives as long as this process, so its key is not indexed
INDEXED = [("plain", PLAIN, True), ("moved header", MOVED, False)]


@pytest.mark.parametrize("what, src, indexed", INDEXED, ids=[i[0] for i in INDEXED])
def test_the_warm_index_gets_a_key_unless_a_retry_answered_a_header(what, src, indexed):
    iid = "c" * 64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RelocatedIncludeWarning)
        _, result = flow.compile_for(flow.request(src, arch=ARCH, target="ptx"), index_id=iid)
    found = index_lookup(iid)
    assert (found is not None) == indexed, what
    assert found is None or found["key"] == result.key


def test_a_compile_records_its_time_and_each_hit_counts_it_saved(tmp_path):
    """An entry keeps how long NVRTC took (``compile_seconds``); a hit served from it adds
    that to its level's ``saved_ms`` (``cache stats``' compile time saved)."""
    from cupy_rawcode.key.request import make_request
    from cupy_rawcode.store import Levels, counters, default_store
    from cupy_rawcode.store.directory import DirectoryStore
    from cupy_rawcode.store.layout import cache_location

    src = PLAIN.replace("2.0f", "3.5f")  # a kernel no other test compiled
    req, result = flow.compile_for(make_request(src, arch=ARCH))
    assert not result.hit and result.compile_seconds > 0
    code, meta, _ = default_store().fetch(result.key)
    assert meta["compile_seconds"] == round(result.compile_seconds, 4)
    counters.zero_tallies()
    disk = DirectoryStore(cache_location().path)
    assert Levels([disk]).fetch(result.key)[2] == "disk"
    assert counters.tally("disk")["saved_ms"] == round(meta["compile_seconds"] * 1000)


def test_cupy_compiles_record_their_time_and_a_hit_counts_it_saved():
    """CuPy's own compiles (payloads.serve, install(scope="all")) keep the time CuPy's compile
    took, and a hit counts it saved, as the package's own compiles do."""
    import time

    from cupy_rawcode.orchestrator import payloads
    from cupy_rawcode.store import counters, default_store

    key = "c0ffee" + "0" * 58
    compiled = []

    def compile():
        time.sleep(0.03)
        compiled.append(1)
        return "module", b"CuPy's payload bytes"

    assert payloads.serve(key, "90", lambda b: ("loaded", b), compile, lambda: None) == "module"
    meta = default_store().fetch(key)[1]
    assert 0.03 <= meta["compile_seconds"] < 5
    counters.zero_tallies()
    again = payloads.serve(key, "90", lambda b: ("loaded", b), compile, lambda: None)
    assert again == ("loaded", b"CuPy's payload bytes") and compiled == [1]
    assert counters.tally("memory")["saved_ms"] == round(meta["compile_seconds"] * 1000)


@pytest.mark.parametrize("changed, stored", [(None, True), ("inc/h.cuh", False)])
def test_a_payload_compiled_ahead_is_stored_only_when_no_header_changed(changed, stored):
    """prebuild and warmup (payloads.ahead) store CuPy's payload as a served call does: not
    when a header changed while CuPy compiled (one warning); a held entry found again is a
    probe, no kernel served, and counted nowhere."""
    from cupy_rawcode.orchestrator import payloads
    from cupy_rawcode.orchestrator.compiling import HeaderChangedWarning
    from cupy_rawcode.store import counters, default_store, uncounted

    key = "beef" + "0" * 60
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert payloads.ahead(key, "90", lambda: b"payload", lambda: changed) is False
    assert [w.category for w in caught] == ([] if stored else [HeaderChangedWarning])
    with uncounted():
        assert (default_store().get(key) is not None) == stored
    if stored:
        counters.zero_tallies()
        assert payloads.ahead(key, "90", lambda: b"other", lambda: None) is True
        assert payloads.stored(key) == b"payload"
        assert all(v == 0 for t in counters._tallies.values() for v in t.values())
