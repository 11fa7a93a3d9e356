"""A backend chosen by URL: open_store, parse_url and the checks on a user's class."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from cupy_rawcode.store import make_store, open_store, parse_url, path_url
from cupy_rawcode.store.bundle import BundleStore
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.memory import MemoryStore
from cupy_rawcode.store.redis import RedisStore, redacted


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/var/cache/k", (".directory:DirectoryStore", ("/var/cache/k",))),
        ("relative/k", (".directory:DirectoryStore", ("relative/k",))),
        ("file:///var/cache/k", (".directory:DirectoryStore", ("/var/cache/k",))),
        ("file://localhost/a%20b", (".directory:DirectoryStore", ("/a b",))),
        ("file:/a%20b", (".directory:DirectoryStore", ("/a%20b",))),  # the plain form: as is
        ("memory:", (".memory:MemoryStore", ())),
        ("/ship/app.bundle", (".bundle:BundleStore", ("/ship/app.bundle",))),
        ("bundle:///ship/app", (".bundle:BundleStore", ("/ship/app",))),
        ("redis://h:6379/0", (".redis:RedisStore", ("redis://h:6379/0",))),
        ("rediss://h/0", (".redis:RedisStore", ("rediss://h/0",))),
        ("unix:///run/redis.sock", (".redis:RedisStore", ("unix:///run/redis.sock",))),
        ("memcached://h:11211", (".memcached:MemcachedStore", ("memcached://h:11211",))),
        ("http://h:8080/cache", (".http:HttpStore", ("http://h:8080/cache",))),
        ("https://u:p@h/c", (".http:HttpStore", ("https://u:p@h/c",))),
        ("s3://bucket/prefix", (".s3:S3Store", ("s3://bucket/prefix",))),
        ("my_pkg.stores:Shared", ("my_pkg.stores:Shared", ())),
        (Path("/p/x.bundle"), (".bundle:BundleStore", ("/p/x.bundle",))),
    ],
)
def test_parse_url(url, expected):
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    "url", ["memory:x", "gs://bucket/k", "az://c/k", "file://host/k", "file:", "bundle://"]
)
def test_a_url_no_backend_takes_is_refused(url):
    with pytest.raises(ValueError, match=r"store|file:"):
        parse_url(url)


@pytest.mark.parametrize("path", ["/a/b", "rel/x.bundle", "//net/share", "/100%/x"])
def test_path_url_opens_exactly_that_path(path):
    assert parse_url(path_url("file", path)) == (".directory:DirectoryStore", (path,))
    assert parse_url(path_url("bundle", path)) == (".bundle:BundleStore", (path,))


def test_open_store_builds_each_backend(tmp_path):
    assert isinstance(open_store("memory:", max_entries=3), MemoryStore)
    disk = open_store(tmp_path / "c", max_bytes=0)
    assert isinstance(disk, DirectoryStore) and disk.root == tmp_path / "c"
    assert isinstance(open_store(f"bundle://{tmp_path}/b"), BundleStore)
    red = open_store("redis://127.0.0.1:1/0", timeout=0.1)
    assert isinstance(red, RedisStore) and red.location == "redis://127.0.0.1:1/0"


@pytest.fixture
def user_module(monkeypatch):
    """A module ``user_stores`` holding a Store subclass and a class that is not one."""
    from cupy_rawcode.store.memory import MemoryStore

    module = types.ModuleType("user_stores")

    class Shared(MemoryStore):
        name = "shared"

        def __init__(self, size: int = 4):
            super().__init__(size)

    module.Shared = Shared  # type: ignore[attr-defined]
    module.NotAStore = dict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "user_stores", module)
    return module


def test_a_users_class_by_module_and_name(user_module):
    store = open_store("user_stores:Shared", size=2)
    assert isinstance(store, user_module.Shared) and store.max_entries == 2


def test_a_users_class_that_is_no_store_is_a_clear_error(user_module):
    with pytest.raises(TypeError, match=r"'user_stores:NotAStore' is not a subclass of .*Store"):
        open_store("user_stores:NotAStore")
    with pytest.raises(ValueError, match="'user_stores:Missing' cannot be loaded"):
        open_store("user_stores:Missing")
    with pytest.raises(ValueError, match="'no_such_module_xyz:Store' cannot be loaded"):
        open_store("no_such_module_xyz:Store")


def test_make_store_opens_a_cache_dir_named_like_a_bundle_as_a_directory(tmp_path):
    store = make_store(tmp_path / "odd.bundle", redis_url="", bundles=(tmp_path / "x",))
    assert [type(level) for level in store.levels] == [MemoryStore, DirectoryStore, BundleStore]


def test_a_password_is_never_shown():
    assert redacted("redis://user:secret@h:6379/0") == "redis://user:***@h:6379/0"
    assert redacted("redis://:secret@h/0") == "redis://:***@h/0"
    assert redacted("redis://h:6379/0") == "redis://h:6379/0"


def test_http_credentials_go_as_basic_auth_and_are_never_shown():
    import base64

    from cupy_rawcode.store.http import HttpStore

    store = HttpStore("https://ci:s%40cret@kernels.example:8443/cuda12/")
    assert store.base == "https://kernels.example:8443/cuda12"
    assert store.headers["Authorization"] == "Basic " + base64.b64encode(b"ci:s@cret").decode()
    assert store.location == "https://ci:***@kernels.example:8443/cuda12"
    assert "cret" not in repr(store)
