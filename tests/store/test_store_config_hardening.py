"""Configuration and transfer hardening of the store: a malformed CUPY_RAWCODE_REMOTE is a
configuration error naming the variable (never a directory in the working directory, never a
dropped level), a relative cache directory stays where it was when the store was made, a pull
counts only what the cache really stored, and a push --verify repairs a damaged remote copy of
the same length."""

from __future__ import annotations

import errno
import json
import os
import warnings

import pytest
from conftest import dict_store, flipped
from conftest import stamped_entry as entry

from cupy_rawcode.ground import config
from cupy_rawcode.ground.errors import ConfigError
from cupy_rawcode.store import make_store, open_remote, transfer
from cupy_rawcode.store import sizebound as sizebound_module
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import decode
from cupy_rawcode.store.layout import cache_location
from cupy_rawcode.store.remote import RemoteLevelWarning

KEYS = [f"{i + 0x5EED:064x}" for i in range(5)]


# ------------------------------------------------- 5: CUPY_RAWCODE_REMOTE is validated


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("cache.internal:11211", "no scheme"),  # memcached:// forgotten: was a directory
        ("localhost:6379", "no scheme"),
        ("kernels.internal/cuda12", "no scheme"),
        ("~/team-cache", "no scheme"),
        ("s3:/team-kernels/cuda12", "no // after s3:"),
        ("memcached:cache.internal:11211", "no // after memcached:"),
        ("redis:/cache/0", "no // after redis:"),
        ("htp://kernels.internal/cuda12", "unknown scheme 'htp'"),
        ("memcached://cache.internal:port", "the port 'port' is not a number"),
        ("http://kernels.internal:99999/x", "the port '99999' is not a number"),
        ("s3:///cuda12", "no bucket"),
        ("http:///cuda12", "no host"),
        ("memory: s3:/b|read-only", "no // after s3:"),  # the second entry of two
    ],
)
def test_a_malformed_remote_is_a_config_error_naming_the_variable(monkeypatch, value, says):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", value)
    with pytest.raises(ConfigError) as e:
        config.validate()
    msg = str(e.value)
    bad = value.split()[-1]
    assert msg.startswith(f"CUPY_RAWCODE_REMOTE: {bad!r}: {says}"), msg
    assert "memcached://" in msg and "module:Class" in msg  # what it accepts


@pytest.mark.parametrize(
    "value",
    [
        "memcached://user:s3cret@cache.internal:port",
        "htp://user:s3cret@kernels.internal/x",
        "user:s3cret@cache.internal:11211",
        "redis://s3cret@cache.internal:port/0",  # a token alone
        "redis://cache.internal:port/0?password=s3cret",
    ],
)
def test_the_error_never_shows_a_password(monkeypatch, value):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", value)
    with pytest.raises(ConfigError) as e:
        config.validate()
    assert "s3cret" not in str(e.value) and "***" in str(e.value)


@pytest.mark.parametrize(
    "value",
    [
        "s3://team-kernels/cuda12",
        "memcached://cache.internal:11211|read-only",
        "memcached://[::1]:11211",
        "http://kernels.internal:8080/cuda12 https://user:pw@kernels.internal/x",
        "redis://:pw@cache.internal:6379/0?ssl_cert_reqs=none rediss://cache.internal",
        "unix:///run/redis.sock?db=1",
        "team_stores:UserStore my_team.stores:VaultStore|read-only",
        "memory: file:relative/dir file:///abs/dir /abs/dir bundle:/abs/app.bundle",
    ],
)
def test_every_accepted_form_passes(monkeypatch, value):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", value)
    config.validate()
    assert config.remote() == tuple(value.split())


def test_a_url_without_its_scheme_fails_the_store_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", "cache.internal:11211")
    with pytest.raises(ConfigError, match="CUPY_RAWCODE_REMOTE: 'cache.internal:11211'"):
        make_store(tmp_path / "cache", bundles=(), redis_url="")
    assert not (tmp_path / "cache.internal:11211").exists()


def test_in_code_a_url_without_its_scheme_warns_and_is_left_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = make_store(
            tmp_path / "cache", bundles=(), redis_url="", remote=["cache.internal:11211"]
        )
    assert [level.name for level in store.levels] == ["memory", "disk"]
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert len(said) == 1 and "no scheme" in said[0], said
    store.put(KEYS[0], entry(KEYS[0]))
    assert sorted(os.listdir(tmp_path)) == ["cache"]


def test_open_remote_refuses_a_one_slash_url():
    with pytest.raises(ValueError, match="no // after s3:"):
        open_remote("s3:/team-kernels/cuda12", timeout=1.0)


# ------------------------------------------------- 7: a relative cache directory stays put


def test_a_relative_cache_directory_is_made_absolute_once(tmp_path, monkeypatch):
    (tmp_path / "app").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "app")
    store = make_store("kcache", bundles=(), redis_url="", remote=())
    disk = store.level("disk")
    assert disk.location == str(tmp_path / "app" / "kcache")
    store.put(KEYS[0], entry(KEYS[0]))
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert disk.get(KEYS[0]) == entry(KEYS[0])  # the disk level, not the memory one
    disk.flush_counts()  # what the exit writes: in the cache, not under the new cwd
    assert os.listdir(tmp_path / "elsewhere") == []
    assert (tmp_path / "app" / "kcache" / "CACHEDIR.TAG").is_file()


def test_a_relative_cache_dir_variable_is_read_as_an_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", "kcache")
    assert cache_location().path == tmp_path / "kcache"
    assert DirectoryStore("rel").root == tmp_path / "rel"


def test_a_relative_cache_dir_variable_names_one_cache_for_the_process(tmp_path, monkeypatch):
    """Read first in app/, CUPY_RAWCODE_CACHE_DIR=kcache-<unique> is app/kcache-<unique> after
    an os.chdir too: compiles keep their cache (they went to a new one in each directory)."""
    name = f"kcache-{tmp_path.name}"  # a value no other test has read in this process
    (tmp_path / "app").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "app")
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", name)
    assert cache_location().path == tmp_path / "app" / name
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert cache_location().path == tmp_path / "app" / name


# ------------------------------------------------- 8: a pull counts what was stored


def _full_disk(monkeypatch) -> None:
    """Every cache write fails as on a full disk (DirectoryStore.put logs it and goes on)."""

    def publish(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sizebound_module, "publish", publish)


def test_a_pull_into_a_full_cache_counts_nothing_fetched(tmp_path, monkeypatch):
    team = dict_store()
    team.data = {key: entry(key) for key in KEYS}
    disk = DirectoryStore(tmp_path / "cache")
    _full_disk(monkeypatch)
    summary = transfer.pull(KEYS, [team], disk)
    assert summary.fetched == {team.location: 0} and summary.bytes == 0
    assert summary.not_stored == len(KEYS) and summary.missing == 0


def test_cache_pull_exits_1_when_the_cache_stored_nothing(tmp_path, monkeypatch, capsys):
    from cupy_rawcode.cli import transfer as transfer_cli

    team = dict_store()
    team.data = {key: entry(key) for key in KEYS}
    store = make_store(tmp_path / "cache", bundles=(), redis_url="", remote=[team])
    _full_disk(monkeypatch)
    assert transfer_cli._pull(store, KEYS, as_json=True) == 1
    out, err = capsys.readouterr()
    said = json.loads(out)
    assert said["fetched"] == {team.location: 0} and said["not_stored"] == len(KEYS)
    assert f"{len(KEYS)} entries fetched were not stored" in err


def test_a_pull_that_stores_everything_still_counts_it(tmp_path):
    team = dict_store()
    team.data = {key: entry(key) for key in KEYS}
    disk = DirectoryStore(tmp_path / "cache")
    summary = transfer.pull(KEYS, [team], disk)
    assert summary.fetched == {team.location: len(KEYS)} and summary.not_stored == 0
    assert all(disk.get(key) == entry(key) for key in KEYS)


# ------------------------------------------------- 10: a push --verify repairs a damaged copy


def test_a_verified_push_repairs_a_damaged_remote_entry_of_the_same_length(tmp_path):
    local = DirectoryStore(tmp_path / "cache")
    for key in KEYS:
        local.put(key, entry(key))
    team = dict_store()
    team.data = {key: entry(key) for key in KEYS}
    team.data[KEYS[1]] = flipped(entry(KEYS[1]))  # a bit flipped on the server
    team.data[KEYS[2]] = entry(KEYS[3])[: len(entry(KEYS[2]))]  # another key's bytes
    team.data[KEYS[3]] = entry(KEYS[3], stamp="2")  # another machine's valid entry: kept
    assert len(team.data[KEYS[3]]) == len(entry(KEYS[3]))
    summary = transfer.push(None, local, [team], verify=True)
    assert sorted(team.writes) == sorted([KEYS[1], KEYS[2]])
    assert summary.sent == {team.location: 2} and summary.present == {team.location: 3}
    for key in KEYS:
        decode(key, team.data[key])  # every remote copy is valid now
    assert team.data[KEYS[3]] == entry(KEYS[3], stamp="2")
