"""The cache touches only files it wrote, under names of its own form:

- a key of another form than the directory store's (64 lower-case hex digits) never becomes a
  path: ``put`` refuses it with a clear error, ``get`` misses, ``delete`` does nothing; and
  ``cache pull`` keeps only the keys it asked for, whatever a level answers;
- a cache file that is a hard link (one of several names of one file, a user's elsewhere) is
  not the cache's: a counter or the ledger is never appended to, rewritten or truncated through
  it, and its bytes count nothing;
- a directory standing at the name of an entry, a manifest, an index entry or a toolchain
  record is someone else's: a write there fails (not stored, as in a read-only cache), and no
  scan, prune or clear removes it or what it holds."""

from __future__ import annotations

import gc
import logging
import os

import pytest
from conftest import recounts_done

from cupy_rawcode.ground.errors import RawcodeValueError
from cupy_rawcode.ground.regular import open_own
from cupy_rawcode.store import Store, eviction, transfer, usage
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import encode
from cupy_rawcode.store.sizebound import publish

KEY = "ab" * 32
USER = b"the user's own notes\n"


@pytest.fixture(autouse=True)
def _every_warning(monkeypatch):
    """Each test hears every warn-once again."""
    from cupy_rawcode.ground import log

    monkeypatch.setattr(log, "_said", set())


def _user_file(tmp_path, name: str = "notes.txt"):
    path = tmp_path / "user" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(USER)
    return path


def _files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


# ---------------------------------------------------------------- keys of another form

# a key -> why it is no key of the directory store
BAD_KEYS = {
    "an absolute path": lambda victim: str(victim),
    "a path going up": lambda victim: "../../../user/notes.txt",
    "upper-case hex": lambda victim: "AB" * 32,
    "63 hex digits": lambda victim: "a" * 63,
    "65 hex digits": lambda victim: "a" * 65,
    "a key and more": lambda victim: KEY + "/x",
    "a manifest's name": lambda victim: KEY + ".json",
    "empty": lambda victim: "",
}


@pytest.mark.parametrize("why", sorted(BAD_KEYS))
def test_a_key_of_another_form_never_becomes_a_path(tmp_path, why):
    victim = _user_file(tmp_path)
    key = BAD_KEYS[why](victim)
    cache = tmp_path / "cache"
    store = DirectoryStore(cache)
    store.put(KEY, encode(KEY, b"code", {}))  # a cache with one entry
    with pytest.raises(RawcodeValueError, match="not a cache key"):
        store.path(key)
    with pytest.raises(RawcodeValueError, match="not a cache key"):
        store.put(key, encode(key, b"\necho PWNED\n", {}))
    assert store.get(key) is None
    store.delete(key)
    assert victim.read_bytes() == USER
    assert _files(cache) == ["CACHEDIR.TAG", f"entries/ab/{KEY}", "stats/size"]
    assert store.get(KEY) is not None


class Answering(Store):
    """A ``module:Class`` level (anyone's code) whose bulk answer holds what it is given."""

    name = "answering"
    read_only = True

    def __init__(self, answer: dict[str, bytes]):
        self.answer = answer

    def get(self, key):
        return self.answer.get(key)

    def get_many(self, keys):
        return dict(self.answer)

    def put(self, key, data):
        pass

    def delete(self, key):
        pass

    def clear(self):
        return 0

    def __len__(self):
        return len(self.answer)

    @property
    def location(self):
        return "answering:"


OTHER = "cd" * 32
# a key a level answers besides the one asked -> what the pull wrote (besides the asked one)
UNASKED = {
    "an absolute path": lambda victim: str(victim),
    "a path going up": lambda victim: "../../user/notes.txt",
    "a valid key it was not asked for": lambda victim: OTHER,
}


@pytest.mark.parametrize("why", sorted(UNASKED))
def test_a_pull_keeps_only_the_keys_it_asked_for(tmp_path, why):
    victim = _user_file(tmp_path)
    unasked = UNASKED[why](victim)
    level = Answering(
        {
            unasked: encode(unasked, b"\necho PWNED\n", {"target": "cubin"}, compress=False),
            KEY: encode(KEY, b"code", {"target": "cubin"}),
        }
    )
    cache = tmp_path / "cache"
    summary = transfer.pull([KEY], [level], DirectoryStore(cache))
    assert victim.read_bytes() == USER
    assert _files(cache) == ["CACHEDIR.TAG", f"entries/ab/{KEY}", "stats/size"]
    assert (summary.asked, summary.fetched, summary.missing) == (1, {"answering:": 1}, 0)


# ---------------------------------------------------------------- hard links


def _linked(cache, name: str, user) -> None:
    (cache / "stats").mkdir(parents=True, exist_ok=True)
    (cache / "stats" / name).unlink(missing_ok=True)
    os.link(user, cache / "stats" / name)


def _count_a_miss(store: DirectoryStore) -> None:
    store.record(False)


def _zero(store: DirectoryStore) -> None:
    store.zero_counts()


def _write_an_entry(store: DirectoryStore) -> None:
    store.put(OTHER, encode(OTHER, b"more code", {}))  # counted in the ledger


# (the stats file hard-linked to a user's file, what the cache does next)
LINKED = {
    "a miss counted (stats/misses)": ("misses", _count_a_miss),
    "cache stats -z (stats/hits)": ("hits", _zero),
    "cache stats -z (stats/misses)": ("misses", _zero),
    "an entry written (the ledger, stats/size)": ("size", _write_an_entry),
}


@pytest.mark.parametrize("case", sorted(LINKED))
def test_a_hard_linked_stats_file_is_never_written_through(tmp_path, case, caplog):
    """The cache's name gets a file of its own first (a copy): the user's is left as it was."""
    name, act = LINKED[case]
    cache = tmp_path / "cache"
    store = DirectoryStore(cache)
    store.put(KEY, encode(KEY, b"code", {}))
    user = _user_file(tmp_path)
    _linked(cache, name, user)
    with caplog.at_level(logging.WARNING, logger="cupy_rawcode"):
        act(store)
    assert user.read_bytes() == USER  # written, the cache's name got a file of its own


@pytest.mark.parametrize("links", [1, 2])
def test_open_own_writes_a_file_with_another_name_through_a_copy(tmp_path, links):
    path = tmp_path / "counter"
    path.write_bytes(b"..")
    if links == 2:
        os.link(path, tmp_path / "elsewhere")
    fd = open_own(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"+")
    os.close(fd)
    assert path.read_bytes() == b"..+" and os.stat(path).st_nlink == 1
    if links == 2:
        assert (tmp_path / "elsewhere").read_bytes() == b".."


def test_a_hard_linked_copy_of_a_cache_keeps_its_counts_and_bound_and_the_original_its_own(
    tmp_path,
):
    """``cp -al cache copy`` (a backup with rsync --link-dest): every file has two names. Each
    cache then counts and bounds its own, and neither writes through to the other."""
    cache = tmp_path / "cache"
    store = DirectoryStore(cache)
    store.put(KEY, encode(KEY, b"code", {}))
    store.record(False)
    store.counts()  # what it defers (its tallies, a recount) is written now
    gc.collect()
    recounts_done()  # the put's background recount rewrites the ledger
    before = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    copy = tmp_path / "copy"
    for p in cache.rglob("*"):
        q = copy / p.relative_to(cache)
        q.mkdir(parents=True, exist_ok=True) if p.is_dir() else os.link(p, q)
    other = DirectoryStore(copy)
    other.record(False)
    other.put(OTHER, encode(OTHER, b"more code", {}))
    assert {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()} == before
    hits, misses = other.counts() or (0, 0)
    assert misses == (store.counts() or (0, 0))[1] + 1


# ---------------------------------------------------------------- directories at file names

# kind -> the name of one of its files, relative to the cache
NAMES = {
    "entry": f"entries/ab/{KEY}",
    "manifest": f"manifests/ab/{KEY}.json",
    "index entry": f"index/ab/{KEY}.json",
    "toolchain record": f"toolchain/{KEY[:32]}.json",
}


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_a_directory_at_a_file_name_is_never_removed(tmp_path, kind):
    cache = tmp_path / "cache"
    DirectoryStore(cache).put(OTHER, encode(OTHER, b"code" * 100, {}))  # a cache, marked
    there = cache / NAMES[kind]
    there.mkdir(parents=True)
    (there / "mine.txt").write_bytes(USER)
    with pytest.raises(IsADirectoryError):
        publish(cache, there, b'{"schema": "x"}')  # every kind is written through publish
    assert all(f.path != str(there) for f in usage.scan(cache).files)
    eviction.prune(cache, 1)  # everything evictable goes
    assert not (cache / f"entries/cd/{OTHER}").exists()
    eviction.clear(cache)
    assert (there / "mine.txt").read_bytes() == USER


def test_an_entry_name_held_by_a_directory_is_not_stored_with_one_warning(tmp_path, caplog):
    cache = tmp_path / "cache"
    store = DirectoryStore(cache)
    store.put(OTHER, encode(OTHER, b"code", {}))
    there = store.path(KEY)
    there.mkdir(parents=True)
    (there / "mine.txt").write_bytes(USER)
    with caplog.at_level(logging.WARNING, logger="cupy_rawcode"):
        assert store.get(KEY) is None
        store.put(KEY, encode(KEY, b"code", {}))
        store.put(KEY, encode(KEY, b"code", {}))
    assert store.get(KEY) is None  # not stored
    assert (there / "mine.txt").read_bytes() == USER
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines  # the read that missed, and the write that failed
    assert "a directory" in lines[0] and str(there) in lines[0]
    assert "cannot write the cache" in lines[1]
    assert [e.key for e in store.entries()] == [OTHER]


FORMS = [
    ("entries", "ab" * 32, True),
    ("entries", "AB" * 32, False),  # upper case: never written
    ("entries", "ab" * 32 + "0", False),
    ("entries", "ab" * 31 + "a", False),
    ("entries", "ab" * 31 + "g0", False),
    ("entries", "ab" * 32 + "\n", False),  # a regex's `$` would take it
    ("entries", "ab" * 32 + ".json", False),
    ("manifests", "ab" * 32 + ".json", True),
    ("manifests", "ab" * 32, False),
    ("manifests", "ab" * 32 + ".jso", False),
    ("manifests", "ab" * 32 + "xjson", False),
    ("index", "0f" * 32 + ".json", True),
    ("index", "0f" * 32 + ".JSON", False),
    ("toolchain", "0f" * 16 + ".json", True),
    ("toolchain", "0f" * 32 + ".json", False),
    ("toolchain", "", False),
]


@pytest.mark.parametrize("kind, name, own", FORMS)
def test_a_name_is_the_layouts_exactly_when_it_fits_its_kinds_pattern(kind, name, own):
    """layout.is_own reads names without a regular expression (a warm hit checks one key):
    it agrees with the kind's pattern (``file_pattern``) on each name of the table."""
    import re

    from cupy_rawcode.store import layout

    shard = name[:2] if kind in layout.SHARDED else None
    assert layout.is_own(kind, name, shard) is own
    assert (re.fullmatch(layout.file_pattern(kind), name) is not None) is own


def test_a_file_where_a_shard_directory_belongs_is_left_alone(tmp_path, caplog):
    """The layout writes no file at entries/<xx>: one there is a user's, never removed; the
    write below it fails, with one warning naming it."""
    store = DirectoryStore(tmp_path / "cache")
    store.put("cd" * 32, encode("cd" * 32, b"code" * 100, {}))  # a cache, marked
    notes = tmp_path / "cache" / "entries" / KEY[:2]
    notes.write_bytes(USER)
    with caplog.at_level(logging.WARNING, logger="cupy_rawcode"):
        store.put(KEY, encode(KEY, b"code" * 100, {}))  # not stored, as in a read-only cache
    assert notes.read_bytes() == USER and store.get(KEY) is None
    assert str(notes) in caplog.text and "left alone" in caplog.text
