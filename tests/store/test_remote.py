"""Remote levels beyond the contract, against real servers on loopback (servers.py): a server
stopped mid-run, a slow one, an entry damaged on the server, a read-only level, write-back into
the faster levels, ``module:Class`` and CUPY_RAWCODE_REMOTE, and the per-level statistics."""

from __future__ import annotations

import http.server
import sys
import threading
import types
import warnings
from collections import OrderedDict

import pytest
from servers import (  # noqa: F401  (fixtures)
    memcached_server,
    s3_server,
    shared_s3,
    shared_webdav,
    webdav_server,
)

from cupy_rawcode.ground import config
from cupy_rawcode.ground.errors import ConfigError, RawcodeError
from cupy_rawcode.key.request import make_request
from cupy_rawcode.orchestrator.compiling import compile_request
from cupy_rawcode.store import Levels, ReadOnly, Store, make_store, open_remote, open_store
from cupy_rawcode.store.entry import decode, encode
from cupy_rawcode.store.memory import MemoryStore
from cupy_rawcode.store.remote import MissingExtraError, RemoteLevelWarning, split_spec

SMALL = 'extern "C" __global__ void k(int* a) {{ a[0] = {value}; }}\n'
KEY = "cd" * 32
BACKENDS = ("memcached", "http", "s3")


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Every warn-once speaks again in each test."""
    from cupy_rawcode.ground import log

    monkeypatch.setattr(log, "_said", set())


def _entry(tag: str = "") -> bytes:
    return encode(KEY, f"code {tag}".encode() * 4, {"arch": "sm_90"})


def _own_server(request, backend: str):
    """A server of this test's own, which it may stop, and its store URL."""
    server = request.getfixturevalue(
        {"memcached": "memcached_server", "http": "webdav_server", "s3": "s3_server"}[backend]
    )
    return server, server.url if backend == "memcached" else server.namespace()


def _shared_url(request, backend: str) -> str:
    """A fresh namespace on a server shared by the whole test run (a server of its own: memcached)."""
    if backend == "memcached":
        return request.getfixturevalue("memcached_server").url
    return request.getfixturevalue(f"shared_{'webdav' if backend == 'http' else 's3'}").namespace()


def _machine(tmp_path, name: str, *remote, timeout: float = 2.0) -> Levels:
    """A store as one machine sees it: its own memory and disk, then the remote levels."""
    return make_store(
        tmp_path / name, bundles=(), redis_url="", remote=remote, remote_timeout=timeout
    )


def _compile(store: Levels, value: int):
    return compile_request(make_request(SMALL.format(value=value), arch="sm_90"), store=store)


def _remote_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_stopped_mid_run_warns_once_and_compiles_go_on(tmp_path, request, backend):
    server, url = _own_server(request, backend)
    store = _machine(tmp_path, "a", url, timeout=1.0)
    first = [_compile(store, v) for v in range(3)]
    assert store.counts[-1]["writes"] == 3  # each compile reached the server
    server.stop()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        later = [_compile(store, v) for v in range(3, 6)]
        store.level("memory").clear()
        again = [_compile(store, v) for v in range(3)]  # the disk still answers
    assert all(r.code for r in later) and all(not r.hit for r in later)
    assert [r.code for r in again] == [r.code for r in first] and all(r.hit for r in again)
    said = _remote_warnings(caught)
    assert len(said) == 1 and url.split("//")[1].split("/")[0] in said[0], said
    remote = store.stats()["levels"][-1]
    assert remote["errors"] + remote["timeouts"] == 1 and remote["writes"] == 3


class _Slow(http.server.BaseHTTPRequestHandler):
    """Answers nothing until the test lets it go: a server slower than any timeout."""

    release = threading.Event()
    seen = 0

    def do_GET(self):
        type(self).seen += 1
        self.release.wait(30)

    do_PUT = do_GET

    def log_message(self, *args):
        pass


def test_a_slow_server_times_out_once_then_rests(tmp_path):
    handler = type("Slow", (_Slow,), {"release": threading.Event(), "seen": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/cache"
        store = _machine(tmp_path, "a", url, timeout=0.2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = [_compile(store, v) for v in (31, 32)]
    finally:
        handler.release.set()
        server.shutdown()
        server.server_close()
    assert all(r.code and not r.hit for r in results)
    said = _remote_warnings(caught)
    assert len(said) == 1 and "timed out" in said[0]
    remote = store.stats()["levels"][-1]
    assert remote["timeouts"] == 1 and remote["errors"] == 0  # then skipped: it rests
    assert handler.seen == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hit_below_is_written_back_and_counted(tmp_path, request, backend):
    url = _shared_url(request, backend)
    a, b = _machine(tmp_path, "a", url), _machine(tmp_path, "b", url)
    made = _compile(a, 41)
    assert not made.hit and a.stats()["levels"][-1]["writes"] == 1
    got = _compile(b, 41)
    assert got.hit and got.hit_layer == b.levels[-1].name and got.code == made.code
    assert b.level("disk").get(made.key) is not None  # written back to the faster levels
    assert b.level("memory").get(made.key) is not None
    levels = b.stats()["levels"]
    assert [lv["level"] for lv in levels] == ["memory", "disk", backend]
    assert levels[-1]["hits"] == 1 and levels[-1]["bytes_read"] > 0
    assert levels[1]["writes"] == 1 and levels[1]["bytes_written"] == levels[-1]["bytes_read"]
    assert _compile(b, 41).hit_layer == "memory"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_entry_damaged_on_the_server_is_a_miss_then_replaced(tmp_path, request, backend):
    url = _shared_url(request, backend)
    made = _compile(_machine(tmp_path, "a", url), 51)
    raw = open_store(url)
    data = raw.get(made.key)
    raw.put(made.key, data[:-1] + bytes([data[-1] ^ 1]))  # the server holds damaged bytes
    b = _machine(tmp_path, "b", url)
    got = _compile(b, 51)
    assert not got.hit and got.code == made.code  # compiled again, never the damaged bytes
    assert b.stats()["levels"][-1]["errors"] == 1
    assert b.level("disk").get(made.key) == raw.get(made.key)  # the server holds a good one
    decode(made.key, raw.get(made.key))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_only_level_is_read_and_never_written(tmp_path, request, backend):
    url = _shared_url(request, backend)
    made = _compile(_machine(tmp_path, "a", url), 61)
    b = _machine(tmp_path, "b", f"{url}|read-only")
    assert isinstance(b.levels[-1], ReadOnly) and b.levels[-1].read_only
    assert _compile(b, 61).hit  # read
    fresh = _compile(b, 62)
    assert not fresh.hit and open_store(url).get(fresh.key) is None  # never written
    assert b.stats()["levels"][-1]["writes"] == 0 and b.stats()["levels"][-1]["read_only"]
    assert b.level("disk").get(made.key) is not None  # its hit went to the writable disk


def test_levels_go_on_in_order_memory_disk_bundles_then_each_remote(tmp_path, request):
    cached = _shared_url(request, "memcached")
    dav = _shared_url(request, "http")
    made = _compile(_machine(tmp_path, "a", dav), 71)  # only the second remote level holds it
    b = _machine(tmp_path, "b", cached, dav)
    assert [lv.name for lv in b.levels] == ["memory", "disk", "memcached", "http"]
    got = _compile(b, 71)
    assert got.hit and got.hit_layer == "http"
    assert open_store(cached).get(made.key) is not None  # written back to the faster remote


class UserStore(MemoryStore):
    """A user's own backend, named in CUPY_RAWCODE_REMOTE as module:Class."""

    name = "mine"
    shared: OrderedDict[str, bytes] = OrderedDict()

    def __init__(self) -> None:
        super().__init__(64)
        self._data = self.shared

    @property
    def location(self) -> str:
        return "team_stores:UserStore"


class Unreachable(MemoryStore):
    """A user's backend that cannot reach its server while it is made."""

    def __init__(self) -> None:
        raise ConnectionRefusedError("no route to the team's store")


@pytest.fixture
def user_module(monkeypatch):
    module = types.ModuleType("team_stores")
    module.UserStore = UserStore  # type: ignore[attr-defined]
    module.NotAStore = dict  # type: ignore[attr-defined]
    module.Unreachable = Unreachable  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "team_stores", module)
    UserStore.shared.clear()
    return module


def test_a_users_class_is_a_remote_level_from_the_environment(tmp_path, monkeypatch, user_module):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", "team_stores:UserStore")
    store = make_store(tmp_path / "a", bundles=(), redis_url="")
    assert type(store.levels[-1]) is UserStore
    made = _compile(store, 81)
    assert made.key in UserStore.shared
    other = make_store(tmp_path / "b", bundles=(), redis_url="")
    assert _compile(other, 81).hit_layer == "mine"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("team_stores:NotAStore", "not a subclass"),
        ("team_stores:Unreachable", "no route"),
        ("gs://bucket/k", "unknown scheme"),
    ],
)
def test_a_remote_level_that_cannot_be_opened_warns_and_is_left_out(
    tmp_path, user_module, spec, why
):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = _machine(tmp_path, "a", spec)
    assert [lv.name for lv in store.levels] == ["memory", "disk"]
    said = _remote_warnings(caught)
    assert len(said) == 1 and why in said[0] and "left out" in said[0]
    assert _compile(store, 85).code


def test_open_remote_raises_for_a_class_that_is_no_store(user_module):
    with pytest.raises(TypeError, match="not a subclass of cupy_rawcode.store.Store"):
        open_remote("team_stores:NotAStore", timeout=1)


@pytest.mark.parametrize(
    ("scheme", "module", "extra"),
    [("memcached://h:1", "pymemcache", "memcached"), ("s3://b/p", "boto3", "s3")],
)
def test_a_missing_client_library_names_its_extra(monkeypatch, scheme, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, f"{module}.client.base", None)
    with pytest.raises(MissingExtraError, match=rf"pip install 'cupy-rawcode\[{extra}\]'") as e:
        open_store(scheme)
    assert isinstance(e.value, RawcodeError) and isinstance(e.value, ImportError)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("s3://b/p", ("s3://b/p", False)),
        ("memcached://h:11211|read-only", ("memcached://h:11211", True)),
        ("team:Store|read-only", ("team:Store", True)),
    ],
)
def test_split_spec(spec, expected):
    assert split_spec(spec) == expected


@pytest.mark.parametrize("spec", ["s3://b|readonly", "|read-only", "http://h|read-only|x"])
def test_a_bad_spec_is_refused(spec, monkeypatch):
    with pytest.raises(ValueError, match="read-only"):
        split_spec(spec)
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", f"memory: {spec}")
    with pytest.raises(ConfigError, match="CUPY_RAWCODE_REMOTE"):
        config.validate()


def test_the_environment_lists_levels_separated_by_spaces(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", " s3://b/p  memcached://h|read-only ")
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE_TIMEOUT", "0.5")
    config.validate()
    assert config.remote() == ("s3://b/p", "memcached://h|read-only")
    assert config.remote_timeout() == 0.5


def test_redis_url_stays_one_remote_level_before_the_listed_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", "memory:")
    store = make_store(tmp_path / "a", bundles=())
    assert [lv.name for lv in store.levels] == ["memory", "disk", "redis", "memory"]


def test_a_level_that_raises_never_fails_a_call_and_is_counted():
    class Broken(Store):
        name = "broken"
        location = "broken:"  # type: ignore[assignment]

        def get(self, key):
            raise ConnectionRefusedError("refused")

        put = delete = get  # type: ignore[assignment]

        def clear(self):
            raise ConnectionResetError("reset")

        def __len__(self):
            raise OSError("down")

    memory = MemoryStore()
    levels = Levels([memory, Broken()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert levels.get(KEY) is None
        levels.put(KEY, _entry())
        levels.delete(KEY)
        assert levels.clear() == 0 and len(levels) == 0
    assert len(_remote_warnings(caught)) == 1
    assert levels.stats()["levels"][1]["errors"] == 1  # then it rests: not asked again


def test_a_redis_level_that_fails_counts_in_the_statistics(tmp_path):
    pytest.importorskip("redis", reason="the redis client is not installed (extra 'redis')")
    from conftest import free_port

    store = make_store(tmp_path / "a", bundles=(), redis_url=f"redis://127.0.0.1:{free_port()}/0")
    assert _compile(store, 91).code
    redis = store.stats()["levels"][-1]
    assert redis["level"] == "redis" and redis["errors"] == 1 and redis["writes"] == 0
