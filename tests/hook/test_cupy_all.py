"""install(scope="all"), record() and prebuild/warmup from a record, on a CPU: CuPy compiles
for an explicit arch with its module never loaded (cupy_compiles.unloaded), so no GPU is
needed. The same on the GPU, with CuPy's own kernels and tests: test_gpu_cupy_all.py."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

cupy = pytest.importorskip("cupy")
from cupy._core import core  # noqa: E402
from cupy.cuda import compiler  # noqa: E402

import cupy_rawcode  # noqa: E402
from cupy_rawcode.hook import compiles as cupy_compiles  # noqa: E402
from cupy_rawcode.hook import install as hook  # noqa: E402
from cupy_rawcode.hook import recording  # noqa: E402
from cupy_rawcode.key import cupy as cupy_key  # noqa: E402
from cupy_rawcode.key.portable import TARGET as RECORD  # noqa: E402
from cupy_rawcode.parallel.task import Task  # noqa: E402
from cupy_rawcode.store import default_store  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADERS = "".join(f"#include <{h}>\n" for h in core._cupy_header_list)
# what an ElementwiseKernel and a ReductionKernel generate: CuPy's headers, CArray, CIndexer
ELEMENTWISE = (
    HEADERS
    + r"""
extern "C" __global__ void cupy_add_one(const CArray<float, 1, true, true> _raw_x,
                                        CArray<float, 1, true, true> _raw_y, CIndexer<1> _ind) {
  CUPY_FOR(i, _ind.size()) { _ind.set(i); _raw_y[_ind.get()] = _raw_x[_ind.get()] + 1.0f; }
}
"""
)
REDUCTION = (
    HEADERS
    + r"""
template <typename T>
__global__ void cupy_sum_blocks(const T* x, T* out, int n) {
  __shared__ T part[256];
  T s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}
"""
)
NAMES = ["cupy_sum_blocks<float>", "cupy_sum_blocks<double>"]


def cupy_compile(source, names=None, options=(), arch="90"):
    """CuPy's compile function (ours while installed), as CuPy's compile_with_cache calls it."""
    with cupy_compiles.unloaded(compiler):
        return compiler._compile_module_with_cache(
            source,
            core.assemble_cupy_compiler_options(tuple(options)),
            arch=arch,
            extra_source=core._get_header_source(),
            name_expressions=names,
        )


def cupy_own_payload(tmp_path, source, names=None, options=()):
    """What CuPy alone stores for the same call (its own disk cache, no hook)."""
    from cupy.cuda import _compiler_cache

    backend = _compiler_cache.DiskKernelCacheBackend(str(tmp_path / "cupy-cache"))
    saved = []
    real_save = backend.save
    backend.save = lambda name, payload, src: saved.append(payload) or real_save(name, payload, src)
    previous = compiler._kernel_cache_backend
    compiler._set_kernel_cache_backend(backend)
    try:
        cupy_compile(source, names, options)
    finally:
        compiler._set_kernel_cache_backend(previous)
    return saved[-1]


def counts():
    return default_store().level("disk").counts() or (0, 0)


@pytest.fixture
def scope_all():
    hook.install("all")
    yield
    hook.uninstall()
    hook.record(None)


@pytest.mark.parametrize(
    "source, names",
    [(ELEMENTWISE, None), (REDUCTION, NAMES)],
    ids=["elementwise", "reduction with name expressions"],
)
def test_cupy_compiles_go_through_the_store_with_cupys_own_result(
    tmp_path, scope_all, source, names
):
    first = cupy_compile(source, names)
    assert counts() == (0, 1)  # a miss: CuPy compiled, the store kept its payload
    again = cupy_compile(source, names)
    assert counts() == (1, 1)  # a hit: the store answered
    if names:
        assert first.mapping == again.mapping and set(first.mapping) == set(names)
    from cupy_rawcode.store.entry import decode

    stored = {k: decode(k, d) for k, d in _entries()}
    [(key, (payload, meta))] = [(k, e) for k, e in stored.items() if e[1]["target"] != RECORD]
    assert meta["target"] == "cupy-payload"
    # it names its closure's record (key/portable.py), which a bundle or a pull carries along
    # (made in this cache unless an earlier test of this process keyed the same closure)
    record = meta["closure_record"]
    assert record not in stored or stored[record][1]["target"] == RECORD
    hook.uninstall()
    assert payload == cupy_own_payload(tmp_path, source, names)  # byte for byte CuPy's


def _entries():
    disk = default_store().level("disk")
    for path in (disk.root / "entries").rglob("*"):
        if path.is_file():
            yield path.stem, path.read_bytes()


def test_a_new_process_is_served_by_the_store(tmp_path, scope_all):
    cupy_compile(ELEMENTWISE)
    script = textwrap.dedent(
        f"""
        import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import cupy_rawcode
        from test_cupy_all import ELEMENTWISE, cupy_compile, counts
        cupy_rawcode.install(scope="all")
        cupy_compile(ELEMENTWISE)
        print(counts())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["(1,", "1)"]  # a hit, no new miss


@pytest.mark.parametrize(
    "change, options",
    [
        ("an option", ("-DEXTRA=1",)),
        ("the standard", ("--std=c++20",)),
    ],
)
def test_key_differs_when(scope_all, change, options):
    base = cupy_compiles.key_of(_call(ELEMENTWISE))
    assert cupy_compiles.key_of(_call(ELEMENTWISE, options=options)) != base, change


@pytest.mark.parametrize(
    "what, other",
    [
        ("the source", lambda c: c._replace(source=c.source + "\n// more\n")),
        ("the arch", lambda c: c._replace(arch="80")),
        ("the name expressions", lambda c: c._replace(name_expressions=("f<int>",))),
        ("cooperative groups", lambda c: c._replace(cooperative=True)),
        ("CuPy's header text", lambda c: c._replace(extra_source=c.extra_source + " ")),
    ],
)
def test_key_differs_when_the_call_changes(what, other):
    call = _call(ELEMENTWISE)
    assert cupy_compiles.key_of(other(call)) != cupy_compiles.key_of(call), what


def test_key_differs_when_cupy_compiles_ptx(monkeypatch):
    """CUPY_COMPILE_WITH_PTX=1 (CuPy reads it into compiler._use_ptx at import) makes CuPy's
    payload PTX where it was a cubin: the two never answer each other."""
    from cupy.cuda import compiler

    call = _call(ELEMENTWISE)
    monkeypatch.setattr(compiler, "_use_ptx", False)
    cubin = cupy_compiles.key_of(call)
    monkeypatch.setattr(compiler, "_use_ptx", True)
    assert cupy_compiles.key_of(call) != cubin
    monkeypatch.setattr(compiler, "_use_ptx", False)
    assert cupy_compiles.key_of(call) == cubin


@pytest.mark.parametrize(
    "before_hash",
    ["", "  ", "/* a comment */ ", "/* a\ncomment */ ", "\f", "\v", "/**/ /* two */\t", "crlf"],
    ids=[
        "first",
        "blanks",
        "comment",
        "comment-over-lines",
        "form-feed",
        "vertical-tab",
        "two",
        "crlf",
    ],
)
def test_key_differs_when_a_header_changes(tmp_path, before_hash):
    """What may stand before a directive's '#' (NVRTC reads an include there): its header is in
    the key whatever it is."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "mine.h").write_text("#define MINE 1\n")
    src = before_hash + '#include "mine.h"\n' + ELEMENTWISE
    if before_hash == "crlf":  # the name on a line a backslash before CR LF joins
        src = '#include \\\r\n"mine.h"\r\n' + ELEMENTWISE
    call = _call(src, options=(f"-I{inc}",))
    before = cupy_compiles.key_of(call)
    (inc / "mine.h").write_text("#define MINE 2\n")
    assert cupy_compiles.key_of(call) == before  # within a process headers are read once
    cupy_key._closures.clear()  # as in a new process: the manifest's stamps see the change
    assert cupy_compiles.key_of(call) != before


def test_key_equal_when_cupy_is_elsewhere(tmp_path):
    """CuPy's include directories enter as tags and header contents, never as paths."""
    import shutil

    include = core._get_header_dir_path()
    moved = tmp_path / "include"
    shutil.copytree(include, moved)
    call = _call(ELEMENTWISE)
    there = call._replace(options=tuple(o.replace(include, str(moved)) for o in call.options))
    assert there.options != call.options
    assert cupy_compiles.key_of(there) == cupy_compiles.key_of(call)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("#include <a.h>\nint x;\n", "#include <a.h>"),
        ("  # define X \\\n   1\nint y;\n#if X\n#endif\n", "  # define X \\\n   1\n#if X\n#endif"),
        ("int z; // # not a directive\n", ""),
        ('/* c */ #include "a.h"\n', '#include "a.h"'),
        ('/* c\n */ # include "a.h"\n', '#include "a.h"'),
        ('\f\v%:include "a.h" // two\n', '#include "a.h"'),
        ('/* #include "no.h" */\nconst char* s = "#include <no.h>";\n', ""),
        ('// old \\\n#include "gone.h"\nint x;\n', ""),  # a line comment goes on: no directive
        ('// old \\\r\n#include "gone.h"\r\nint x;\r\n', ""),
        (  # the same line twice, meaning two headers: both kept
            '#define H "a.h"\n#include H\n#undef H\n#define H "b.h"\n#include H\n',
            '#define H "a.h"\n#include H\n#undef H\n#define H "b.h"\n#include H',
        ),
    ],
)
def test_directives_are_the_preprocessor_lines(source, expected):
    assert cupy_key.directives(source) == expected


def test_kernels_sharing_their_includes_share_one_closure_resolution(monkeypatch):
    cupy_key._closures.clear()
    calls = []
    real = cupy_key.closure_digests
    monkeypatch.setattr(cupy_key, "closure_digests", lambda *a: calls.append(1) or real(*a))
    keys = {cupy_compiles.key_of(_call(ELEMENTWISE.replace("1.0f", f"{i}.0f"))) for i in range(4)}
    assert len(keys) == 4 and len(calls) == 1


def _call(source, options=(), names=None):
    options = core.assemble_cupy_compiler_options(tuple(options))
    task = Task(source, options, "sm_90", name_expressions=names or (), cupy=("cupy", False))
    return cupy_compiles.call_for(task)


PLAIN = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'

# options CuPy hands NVRTC, or tests itself, as written: two spellings one reading would merge
APART = [
    ("-rdc apart links no device runtime in CuPy", ("-rdc", "true"), ("-rdc=true",)),
    ("-rdc with a blank links none either", (" -rdc=true",), ("-rdc=true",)),
    ("CuPy's Jitify flag bare or valued", ("-DCUPY_USE_JITIFY",), ("-DCUPY_USE_JITIFY=1",)),
    ("an earlier -arch's suffix", ("-arch=sm_90a", "-arch=sm_90"), ("-arch=sm_90",)),
    ("-std apart, which NVRTC refuses", ("-std", "c++14"), ("-std=c++14",)),
    ("an option of Jitify's, which NVRTC refuses", ("-remove-unused-globals",), ()),
]


@pytest.mark.parametrize("why, one, other", APART, ids=[a[0] for a in APART])
def test_key_differs_between_spellings_cupy_treats_apart(why, one, other):
    assert cupy_compiles.key_of(_call(ELEMENTWISE, one)) != cupy_compiles.key_of(
        _call(ELEMENTWISE, other)
    )


def test_key_equal_when_include_directories_differ_only_in_path(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "h.h").write_text("#define H 1\n")
    source = '#include "h.h"\n' + ELEMENTWISE
    keys = {
        cupy_compiles.key_of(_call(source, spelled))
        for spelled in (
            ("-I", str(tmp_path / "a")),
            (f"-I{tmp_path / 'b'}",),
            (f"--include-path={tmp_path / 'a'}",),
        )
    }
    assert len(keys) == 1


@pytest.mark.parametrize("options", [("-maxrregcount=",)])
def test_options_the_key_refuses_are_compiled_by_cupy_uncached(scope_all, options):
    """NVRTC takes them, so CuPy does: its own compile, every time, never an error of ours."""
    from conftest import bare_nvrtc  # not at the top: scripts of other tests import this file

    assert bare_nvrtc(PLAIN, options).ok
    for _ in range(2):
        assert cupy_compile(PLAIN, options=options) is not None
    assert counts() == (0, 0)


def test_a_bad_configuration_is_raised_not_compiled_around(scope_all, monkeypatch):
    """Only the call's own options fall back to CuPy: a misconfigured cache is the user's to
    see, as a RawKernel compile shows it, never compiles silently uncached."""
    from cupy_rawcode.ground.errors import ConfigError

    monkeypatch.setenv("CUPY_RAWCODE_CACHE_MAX_SIZE", "lots")
    with pytest.raises(ConfigError, match="CUPY_RAWCODE_CACHE_MAX_SIZE"):
        cupy_compile(PLAIN)


def test_a_header_the_key_cannot_scan_is_compiled_by_cupy_uncached(scope_all, tmp_path):
    """A Latin-1 byte in a header's comment: NVRTC compiles it, so CuPy does, uncached."""
    (tmp_path / "latin.h").write_bytes(b"// caf\xe9\n#define LATIN 1\n")
    source = '#include "latin.h"\n' + PLAIN
    for _ in range(2):
        assert cupy_compile(source, options=(f"-I{tmp_path}",)) is not None
    assert counts() == (0, 0)


def test_a_header_that_is_a_fifo_is_our_error_never_a_hang(scope_all, tmp_path):
    from cupy_rawcode.ground.errors import UnreadableHeaderError

    os.mkfifo(tmp_path / "pipe.h")
    with pytest.raises(UnreadableHeaderError, match="pipe.h"):
        cupy_compile('#include "pipe.h"\n' + PLAIN, options=(f"-I{tmp_path}",))


def test_a_bad_header_source_setting_is_raised_not_compiled_around(scope_all, monkeypatch):
    from cupy_rawcode.ground.errors import RawcodeError

    monkeypatch.setenv("CUPY_RAWCODE_HEADER_SOURCES", "cccl=/nonexistent")
    monkeypatch.setattr(cupy_key, "_contexts", {})  # the toolchain found again, as in a new process
    with pytest.raises(RawcodeError, match="HEADER_SOURCES|nonexistent"):
        cupy_compile(PLAIN)


def test_an_option_nvrtc_refuses_is_refused_every_time(scope_all):
    """('-std', 'c++14') is no -std=c++14 to NVRTC: CuPy's error, even with the other cached."""
    cupy_compile(PLAIN, options=("-std=c++14",))
    for _ in range(2):
        with pytest.raises(compiler.CompileException, match="-std"):
            cupy_compile(PLAIN, options=("-std", "c++14"))


def test_missing_header_is_cupys_own_error(scope_all):
    src = '#include "never_there.h"\n' + ELEMENTWISE
    with pytest.raises(compiler.CompileException) as e:
        cupy_compile(src)
    assert "never_there.h" in str(e.value) and not isinstance(e.value, cupy_rawcode.CompileError)
    assert counts() == (0, 0)


def test_uninstall_gives_cupy_its_cache_backend_back():
    before = compiler._kernel_cache_backend, compiler._compile_module_with_cache
    hook.install("all")
    assert isinstance(compiler._kernel_cache_backend, cupy_compiles.Capture)
    hook.uninstall()
    assert (compiler._kernel_cache_backend, compiler._compile_module_with_cache) == before


def test_install_refuses_an_unknown_scope():
    with pytest.raises(ValueError, match="'jitify', 'all'"):
        cupy_rawcode.install(scope="everything")


# ---------------------------------------------------------------- record


RECORDER = textwrap.dedent(
    """
    import sys; sys.path.insert(0, {tests!r})
    import cupy_rawcode
    from test_cupy_all import ELEMENTWISE, REDUCTION, NAMES, cupy_compile
    cupy_rawcode.record({path!r})
    for i in range(3):
        cupy_compile(ELEMENTWISE)
        cupy_compile(REDUCTION, NAMES, ("-I{inc}",))
        cupy_rawcode.RawKernel(
            'extern "C" __global__ void k(float* x) {{ x[0] = N; }}', "k", ("-DN=%d" % i, "-I{inc}")
        ).compile(arch="sm_90")
    """
)


def _record_in_processes(tmp_path, n):
    rec, inc = tmp_path / "app" / "app.rec", tmp_path / "inc"
    rec.parent.mkdir()
    inc.mkdir()
    script = RECORDER.format(
        tests=os.path.dirname(os.path.abspath(__file__)), path=str(rec), inc=str(inc)
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    for p in procs:
        assert p.wait() == 0, p.stderr.read()
    return rec, inc


def test_two_processes_record_one_deduplicated_record(tmp_path):
    rec, _ = _record_in_processes(tmp_path, 2)
    lines = rec.read_text().splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids)) == 5  # 2 CuPy compiles + 3 raw kernels
    kinds = sorted(json.loads(line)["kind"] for line in lines)
    assert kinds == ["cupy", "cupy", "raw", "raw", "raw"]


def test_a_record_holds_no_path_of_this_machine_and_no_code(tmp_path):
    rec, inc = _record_in_processes(tmp_path, 1)
    text = rec.read_text()
    for path in (str(tmp_path), core._get_header_dir_path(), sys.prefix, ROOT):
        assert path not in text
    assert "ELF" not in text and "cubin" not in text
    entries = recording.read(rec, [tmp_path])  # inc/ lies beside the record's directory
    assert {tuple(e["options"]) for e in entries if e["kind"] == "cupy"} == {(), (f"-I{inc}",)}


def test_a_record_is_read_back_with_its_paths_made_local(tmp_path):
    """Moved elsewhere with the directories beside it, a record names them there."""
    import shutil

    rec, _ = _record_in_processes(tmp_path, 1)
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "app", moved / "app")
    (moved / "inc").mkdir()
    entries = recording.read(moved / "app" / "app.rec", [moved])
    assert any(f"-I{moved / 'inc'}" in e["options"] for e in entries)


def test_prebuild_from_a_record_then_a_new_process_hits(tmp_path):
    rec, inc = _record_in_processes(tmp_path, 1)
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "fresh")}
    cli = [sys.executable, "-m", "cupy_rawcode.cli"]
    out = subprocess.run(
        cli
        + ["prebuild", "--manifest", str(rec), "--root", str(tmp_path), "--arch", "sm_90"]
        + ["-j", "2"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "5 of 5 succeeded (5 compiled" in out.stdout
    replay = RECORDER.format(
        tests=os.path.dirname(os.path.abspath(__file__)), path=str(rec), inc=str(inc)
    )
    replay = replay.replace(f"cupy_rawcode.record({str(rec)!r})", "cupy_rawcode.install('all')")
    replay += "from test_cupy_all import counts\nprint(*counts())\n"
    out = subprocess.run([sys.executable, "-c", replay], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    hits, misses = map(int, out.stdout.split()[-2:])
    assert (hits, misses) == (
        3 * 2 + 3,
        5,
    )  # 6 CuPy calls, 3 kernels: all hits; the 5 misses were prebuild's


def _pth_installed() -> bool:
    """Whether the package's .pth start-up hook is installed (pip install; not a PYTHONPATH run)."""
    import site

    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return any(os.path.exists(os.path.join(d, "cupy_rawcode.pth")) for d in dirs)


needs_pth = pytest.mark.skipif(
    not _pth_installed(), reason="needs cupy-rawcode installed: its .pth start-up hook"
)


@needs_pth
def test_record_environment_variable_reaches_a_program_that_never_calls_record(tmp_path):
    """CUPY_RAWCODE_RECORD through the installed .pth file: CuPy is wrapped once imported."""
    rec = tmp_path / "env.rec"
    script = (
        f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "from test_cupy_all import ELEMENTWISE, cupy_compile\ncupy_compile(ELEMENTWISE)\n"
    )
    env = {**os.environ, "CUPY_RAWCODE_RECORD": str(rec)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    [entry] = recording.read(rec)
    assert entry["kind"] == "cupy" and entry["cupy_options"] is True


@needs_pth
def test_install_environment_variable_routes_a_program_that_never_calls_install(tmp_path):
    script = (
        f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "from test_cupy_all import ELEMENTWISE, cupy_compile, counts\n"
        "from cupy_rawcode.hook import install as hook\n"
        "cupy_compile(ELEMENTWISE); print(hook.installed('all'), counts())\n"
    )
    env = {**os.environ, "CUPY_RAWCODE_INSTALL": "all"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "(0,", "1)"]
