import functools
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
# The tests mirror the package's stages, one folder each (tests/store/, tests/key/, ...); a
# module of one folder may use another's helpers (test_gpu's kernels, store/servers.py): every
# folder is on sys.path, as pytest puts each test file's own.
sys.path[1:1] = [str(d) for d in sorted(TESTS.iterdir()) if d.is_dir() and d.name.isidentifier()]
CORPUS = ROOT / "bench" / "corpus"


@functools.cache
def gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own cache directory: tests never share state through the disk; and
    the environment is validated again at its first read (config.validate)."""
    from cupy_rawcode.ground import config

    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUPY_RAWCODE_HEADER_SOURCES", raising=False)
    monkeypatch.setattr(config, "_validated", False)
    yield


@pytest.fixture
def compiles(monkeypatch):
    """The NVRTC compiles the package makes in this process, one item each (workers are other
    processes)."""
    from cupy_rawcode.orchestrator import compiling

    calls = []
    real = compiling._nvrtc_compile
    monkeypatch.setattr(compiling, "_nvrtc_compile", lambda *a: (calls.append(1), real(*a))[1])
    return calls


@pytest.fixture
def tree(tmp_path):
    """Write a small file tree: tree({"a/x.h": "...", ...}) -> root path."""

    def make(files: dict, root: Path | None = None) -> Path:
        root = root or tmp_path / "tree"
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return root

    return make


def new_process() -> None:
    """What a new process lacks: the manifests (on disk and in memory) and the memory level."""
    import os

    from cupy_rawcode.key import manifest
    from cupy_rawcode.store import default_store

    manifest._memo.clear()
    shutil.rmtree(os.path.join(os.environ["CUPY_RAWCODE_CACHE_DIR"], "manifests"), True)
    memory = default_store().level("memory")
    if memory is not None:
        memory.clear()


def flipped(data: bytes) -> bytes:
    """``data`` with one bit flipped in its middle: a damaged entry."""
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :]


def stamped_entry(key: str, stamp: str = "1", times: int = 8) -> bytes:
    """A valid entry for ``key`` whose metadata carries ``stamp`` (what tells two puts apart)."""
    from cupy_rawcode.store.entry import encode

    return encode(key, f"code of {key[-6:]}".encode() * times, {"arch": "sm_90", "t": stamp})


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()


class BareCompile(NamedTuple):
    """What NVRTC alone made of a program: its result, its log, and one output when asked."""

    result: object
    log: str
    output: bytes | None

    @property
    def ok(self) -> bool:
        from cuda.bindings import nvrtc

        return self.result == nvrtc.nvrtcResult.NVRTC_SUCCESS

    @property
    def refused_options(self) -> bool:
        from cuda.bindings import nvrtc

        return self.result == nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_OPTION


def bare_nvrtc(
    source: str, options: tuple[str, ...] = (), arch: str = "sm_90", kind: str | None = None
) -> BareCompile:
    """Compile ``source`` with NVRTC straight from cuda.bindings, none of the package between
    (no GPU needed): the reference the package's readings are checked against."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    _, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"probe.cu", 0, [], [])
    try:
        flags = [f"-arch={arch}".encode()] + [o.encode() for o in options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytearray(size)  # never b" " * size: for size 1 that is Python's shared b" "
        nvrtc.nvrtcGetProgramLog(prog, log)
        output = None
        if kind is not None and result == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            get_size, get = {
                "cubin": (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN),
                "ptx": (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX),
                "ltoir": (nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR),
            }[kind]
            _, size = get_size(prog)
            buffer = bytearray(size)
            get(prog, buffer)
            output = bytes(buffer)
        return BareCompile(result, log.rstrip(bytes(1)).decode(errors="replace"), output)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def json_runs(script: str, kernel: str, cache: Path, n: int = 2) -> list:
    """What ``script`` printed as JSON, run ``n`` times in a row as new processes on
    ``CORPUS/kernel`` with the cache directory ``cache`` (a fill, then hits)."""
    import json
    import os

    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(cache)}
    return [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script, str(CORPUS / kernel)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for _ in range(n)
    ]


HANG = """\
import os

if os.environ.get("RAWCODE_TESTS_HANG_MARKS"):
    import threading

    import cupy_rawcode.orchestrator.compiling as program

    def _hang(*args):
        marks = os.environ["RAWCODE_TESTS_HANG_MARKS"]
        open(os.path.join(marks, str(os.getpid())), "w").close()
        threading.Event().wait()  # a compile that never ends

    program._nvrtc_compile = _hang
"""


@pytest.fixture
def hung_nvrtc(tmp_path):
    """Environment for a child process (and its workers) whose every NVRTC compile hangs
    forever, after touching <marks>/<pid>: what waits for a compile then never ends. Returns
    (env, marks directory)."""
    import os

    site, marks = tmp_path / "hang-site", tmp_path / "hang-marks"
    site.mkdir()
    marks.mkdir()
    (site / "sitecustomize.py").write_text(HANG)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    env["RAWCODE_TESTS_HANG_MARKS"] = str(marks)
    return env, marks


# ------------------------------------------------------------------ Redis


def nvrtc_defines(name: str, options: tuple[str, ...] = ()) -> bool:
    """Whether this NVRTC, given ``options``, defines the macro or operator ``name`` (NVRTC 13.5
    has no ``__has_include_next``)."""
    done = bare_nvrtc(f"#ifdef {name}\n#error defined\n#endif\n", options)
    assert not done.refused_options, options
    return not done.ok


def free_port() -> int:
    """A TCP port nothing listens on now, on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A real redis-server on loopback, with no persistence, in ``tmp``."""

    def __init__(self, tmp: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [
                shutil.which("redis-server"),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(tmp),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        self.client = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                if self.client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of its own for one test; skipped with a reason where there is none."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (.ci/run installs it from the system packages)")
    pytest.importorskip("redis", reason="the redis client is not installed (extra 'redis')")
    server = RedisServer(tmp_path)
    yield server
    server.kill()


def dict_store(data: dict | None = None, *, sizes: bool = True, location: str = "dict://team"):
    """A remote level held in a dict, named "team", that records the keys read (``reads``)
    and written (``writes``); ``sizes``: it tells stored sizes cheaply, as Redis, HTTP and S3
    do (else it cannot, as memcached). It keeps no tally of its own."""
    from cupy_rawcode.store import Store

    class DictStore(Store):
        name = "team"

        def __init__(self) -> None:
            self.data: dict[str, bytes] = dict(data or {})
            self.reads: list[str] = []
            self.writes: list[str] = []

        def get(self, key: str) -> bytes | None:
            self.reads.append(key)
            return self.data.get(key)

        def put(self, key: str, value: bytes) -> None:
            self.writes.append(key)
            self.data[key] = value

        def delete(self, key: str) -> None:
            self.data.pop(key, None)

        def clear(self) -> int:
            n = len(self.data)
            self.data.clear()
            return n

        def __len__(self) -> int:
            return len(self.data)

        @property
        def location(self) -> str:
            return location

        def sizes(self, keys):
            if not sizes:
                return None
            return {key: len(self.data[key]) for key in keys if key in self.data}

    return DictStore()


def recounts_done() -> None:
    """Wait for the size recounts a directory store's put may start in the background
    (store/sizebound.py): each writes its directory's ledger, which a test comparing snapshots
    of a cache would otherwise see land at any moment."""
    import threading

    for thread in threading.enumerate():
        if thread.name == "cupy-rawcode-recount":
            thread.join(30)
