"""Stage 4, the store: takes a key and gives the entry's bytes, or stores them.

Storage: bytes in, bytes out. Every backend is a ``Store`` (base.py) opened by URL
(``open_store``, urls.py); entry.py turns compiled code + JSON metadata into self-validating
bytes.

The default stack (make_store), a ``Levels`` (defined here) in lookup order: memory LRU
(``MemoryStore``, base.py, built here with the cache directory's level: a warm hit then loads
neither memory.py nor urls.py), the cache directory, read-only bundles (CUPY_RAWCODE_BUNDLES),
then the remote levels: Redis (CUPY_RAWCODE_REDIS_URL) and each store of CUPY_RAWCODE_REMOTE in
order (remote.py). A hit below copies the entry into the writable levels above it; a compile
writes to every writable level; a remote level that fails is skipped with one warning
(remote.py)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..ground import config, deferred
from .base import MemoryStore, Store, Tally, counting, tally, uncounted
from .entry import decode
from .layout import cache_location

# a failing level or a broken entry only (ground/deferrals.py): off a warm hit's path
remote = deferred("cupy_rawcode.store.remote")
log = deferred("cupy_rawcode.ground.log")
errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised

__all__ = [
    "Levels",
    "MemoryStore",
    "ReadOnly",
    "Store",
    "default_store",
    "make_store",
    "open_remote",
    "open_store",
    "uncounted",
]


# a level's counts in a Levels (a Tally of these): what Levels.stats() reports for each level
COUNTS = ("hits", "misses", "errors", "timeouts", "writes", "bytes_read", "bytes_written")


def counts(also: dict[str, int] | None = None) -> Tally:
    """One level's counts in a Levels: hits, misses, errors (broken entries and failed calls),
    timeouts, writes, and the bytes read from it and written to it. What is added is added to
    ``also`` too when given: a remote level's tally in this process (``tally``), which the
    process adds to the cache directory's counts as it exits, so that ``cache stats`` shows
    remote levels as well as local ones."""
    return Tally(dict.fromkeys(COUNTS, 0), also)


BACKOFF = 10.0  # seconds a level that failed is skipped before it is tried again


def _check_entry(key: str, data: bytes) -> Any:
    """The default check of a Levels: the bytes decode as the entry of ``key`` (entry.py)."""
    return decode(key, data)


class Levels(Store):
    """Stores looked up in order; ``counts[i]`` are the counts of ``levels[i]``. ``check(key,
    data)`` raises ValueError for bytes that are no valid entry of ``key`` (a broken entry is a
    miss, with one warning per entry)."""

    name = "levels"

    def __init__(self, levels: Iterable[Store], check: Callable[[str, bytes], Any] = _check_entry):
        self.levels = list(levels)
        for level in self.levels:
            if not isinstance(level, Store):
                raise errors.RawcodeTypeError(
                    f"a level of Levels must be a Store, not {type(level).__name__}"
                )
        self.counts = [
            counts(None if level.tallied() else tally(level.name)) for level in self.levels
        ]
        self.check = check
        self.backoff = BACKOFF
        self._down_until = [0.0] * len(self.levels)

    @property
    def read_only(self) -> bool:  # type: ignore[override]
        """Whether no level can be written."""
        return all(level.read_only for level in self.levels)

    @property
    def location(self) -> str:
        return ", ".join(level.location for level in self.levels)

    def find(
        self, key: str, validate: Callable[[bytes], Any], *, memory: bool = True
    ) -> tuple[Any, str] | None:
        """(``validate(data)``, level name) from the first level holding bytes ``validate``
        accepts (it raises ValueError for a broken entry); written back to the writable levels
        above it (``memory=False``: to those that outlive the process only, for what a process
        reads once, such as a closure record)."""
        _checked(key)
        for i, level in enumerate(self.levels):
            if not self._up(i):
                continue
            try:
                data = level.get(key)
            except Exception as e:
                self._failed(i, e)
                continue
            if data is None:
                self.counts[i]["misses"] += level.up()  # not when it failed and said nothing
                continue
            self.counts[i]["bytes_read"] += len(data)
            try:
                value = validate(data)
            except ValueError as e:
                self.counts[i]["errors"] += 1
                _warn_broken(key, level.name, e)
                continue
            self.counts[i]["hits"] += 1
            nearer: Iterable[int] = range(i)
            if level.on_disk:  # a bundle's hit goes to memory, not to the cache directory
                nearer = [j for j in nearer if not self.levels[j].on_disk]
            if not memory:
                nearer = [j for j in nearer if self.levels[j].lasting]
            self._put(key, data, nearer)
            return value, level.name
        return None

    def get(self, key: str) -> bytes | None:
        """The bytes of the first valid entry for ``key`` (``check``), or None."""

        def checked(data: bytes) -> bytes:
            self.check(key, data)  # raises ValueError: a broken entry
            return data

        found = self.find(key, checked)
        return None if found is None else found[0]

    def fetch(self, key: str) -> tuple[bytes, dict, str] | None:
        """(code, metadata, level name) of the first valid entry for ``key``, counted as a hit;
        None when no level holds one."""
        found = self.find(key, lambda data: decode(key, data))
        if found is None:
            return None
        (code, meta), name = found
        self.served(name, meta)
        return code, meta, name

    def served(self, level: str, meta: dict) -> None:
        """A kernel served from the level called ``level``: a hit (``record``), and the compile
        time its entry recorded (``compile_seconds``) added to that level's ``saved_ms``."""
        self.record(True)
        seconds = meta.get("compile_seconds")
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            if 0 < seconds < 86400:  # neither NaN nor nonsense
                tally(level)["saved_ms"] += round(seconds * 1000)

    def _up(self, i: int) -> bool:
        """Whether level ``i`` may be asked now (neither it nor this Levels rests it)."""
        resting = self._down_until[i] and time.monotonic() < self._down_until[i]
        return not resting and self.levels[i].up()

    def _failed(self, i: int, error: Exception) -> None:
        """Level ``i`` raised: counted (a timeout or an error), one warning per process and
        level, and the level rests ``backoff`` seconds (a dead server must not cost a timeout
        per kernel)."""
        if remote.is_timeout(error):
            self.counts[i]["timeouts"] += 1
        else:
            self.counts[i]["errors"] += 1
        self._down_until[i] = time.monotonic() + self.backoff
        level = self.levels[i]
        remote.warn_failed(level.name, level.location, error, url=remote.url_of(level))

    def _each(self, op: Callable[[Store], Any], writable: bool = False) -> list[Any]:
        """``op(level)`` for each level that is up (and writable, when asked); a level that
        raises is counted and skipped."""
        done = []
        for i, level in enumerate(self.levels):
            if (writable and level.read_only) or not self._up(i):
                continue
            try:
                done.append(op(level))
            except Exception as e:
                self._failed(i, e)
        return done

    def _put(self, key: str, data: bytes, indices: Iterable[int]) -> None:
        """Write ``data`` to each writable level of self.levels at ``indices`` (a write the
        level declined, as too large for it, is no write)."""
        _checked(key)
        for i in indices:
            level = self.levels[i]
            if level.read_only or not self._up(i):
                continue
            try:
                stored = level.put(key, data)
            except Exception as e:
                self._failed(i, e)
                continue
            if stored is False or not level.up():  # declined, or it failed and said so itself
                continue
            self.counts[i]["writes"] += 1
            self.counts[i]["bytes_written"] += len(data)

    def put(self, key: str, data: bytes, *, memory: bool = True) -> None:
        """Write to every writable level (``memory=False``: but the memory level)."""
        self._put(key, data, [i for i, lv in enumerate(self.levels) if memory or lv.lasting])

    def delete(self, key: str) -> None:
        _checked(key)
        self._each(lambda level: level.delete(key), writable=True)

    def clear(self) -> int:
        """Clear every writable level; returns the most entries one of them held."""
        return max(self._each(lambda level: level.clear(), writable=True), default=0)

    def __len__(self) -> int:
        """The most entries one level holds (a hit is copied upward, so levels overlap)."""
        return max(self._each(len), default=0)

    def stats(self) -> dict[str, list[dict[str, Any]]]:
        """This process's counts per level, in look-up order, as plain data (for JSON):
        ``{"levels": [{"level", "location", "read_only", "hits", "misses", "errors",
        "timeouts", "writes", "bytes_read", "bytes_written"}, ...]}``."""
        rows = []
        for level, counted in zip(self.levels, self.counts, strict=True):
            numbers = dict(counted)
            for kind, n in level.failures().items():  # a store that keeps its own (Redis)
                if kind in ("errors", "timeouts") and type(n) is int and n > 0:
                    numbers[kind] += n
            where = {"level": level.name, "location": level.location, "read_only": level.read_only}
            rows.append({**where, **numbers})
        return {"levels": rows}

    def close(self) -> None:
        for level in self.levels:
            try:
                level.close()
            except Exception:  # a remote client that fails to close holds nothing more
                pass

    def kept(self, key: str) -> bool:
        """Whether a level that outlives the process (any but memory) holds a valid entry for
        ``key``: a put on a full or read-only disk only warns, so prebuild checks here. True
        when no such level exists (nothing could keep it)."""
        lasting = [level for level in self.levels if level.lasting]
        for level in lasting:
            try:
                decode(key, level.get(key) or b"")
                return True
            except Exception:  # a broken entry, or a remote level that failed: not kept there
                continue
        return not lasting

    def record(self, hit: bool) -> None:
        """Count a hit or a miss in the levels that keep counts of their own (the directory)."""
        if not counting():
            return
        for level in self.levels:
            rec = getattr(level, "record", None)
            if rec is not None:
                rec(hit)

    def level(self, name: str) -> Any:
        """The first level called ``name`` ("memory", "disk", "redis"), or None."""
        return next((level for level in self.levels if level.name == name), None)


def _checked(key: str) -> None:
    """A ValueError naming ``key`` unless it is a cache key (remote.checked_key), asked before
    any level names it: no level's path or URL is made of anything else."""
    if not _directory.is_key(key):
        remote.checked_key(key)


def _warn_broken(key: str, where: str, error: ValueError) -> None:
    """One warning for a broken entry: it is ignored and compiled again."""
    log.warn(
        "cupy-rawcode: ignoring a broken cache entry %s in %s (%s); recompiling",
        key[:16],
        where,
        error,
    )


_directory = deferred("cupy_rawcode.store.directory")  # the cache directory: every stack's
_urls = deferred("cupy_rawcode.store.urls")  # stores opened by URL: open_store and the others
_readonly = deferred("cupy_rawcode.store.readonly")

# named here, not imported by a default stack: opening a store by URL (urls.py), ReadOnly
_LAZY = {
    "open_store": _urls,
    "open_remote": _urls,
    "parse_url": _urls,
    "path_url": _urls,
    "store_class": _urls,
    "ReadOnly": _readonly,
}

TYPE_CHECKING = False
if TYPE_CHECKING:  # what __getattr__ gives, as the type checker sees it
    from .readonly import ReadOnly
    from .urls import open_remote, open_store, parse_url, path_url, store_class  # noqa: F401


def __getattr__(name: str):
    """open_store and the other URL functions (urls.py), and ReadOnly, on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value  # the next look-up is a plain global
    return value


def make_store(
    cache_dir=None,
    *,
    max_size=None,
    memory_entries: int | None = None,
    bundles=None,
    redis_url: str | None = None,
    redis_ttl: int | None = None,
    redis_timeout: float | None = None,
    remote: Iterable[str | Store] | None = None,
    remote_timeout: float | None = None,
) -> Levels:
    """The layered store; every argument left None comes from the environment (config.py).
    ``remote``: the remote levels after Redis's, as CUPY_RAWCODE_REMOTE lists them (a spec
    each: a URL, optionally ``|read-only``) or as stores; ``remote_timeout``: seconds a call to
    one may take (CUPY_RAWCODE_REMOTE_TIMEOUT)."""
    location = cache_location(cache_dir)
    max_bytes = None if max_size is None else config.parse_size("max_size", max_size)
    entries = (
        config.memory_cache_entries()
        if memory_entries is None
        else config.parse_memory_entries("memory_entries", memory_entries)
    )
    levels: list[Store] = [  # what open_store("memory:") and open_store("file:...") give
        MemoryStore(max_entries=entries),
        _directory.DirectoryStore(location.path, max_bytes=max_bytes),
    ]
    for path in config.bundles() if bundles is None else bundles:
        levels.append(_urls.open_store(_urls.path_url("bundle", path)))
    url = config.redis_url() if redis_url is None else redis_url
    if url:
        redis = _urls.store_class(
            _urls.BACKENDS["redis"]
        )  # any text: one the client refuses warns once
        levels.append(
            redis(
                url,
                ttl=config.redis_ttl() if redis_ttl is None else redis_ttl,
                timeout=config.redis_timeout() if redis_timeout is None else redis_timeout,
            )
        )
    timeout = config.remote_timeout() if remote_timeout is None else remote_timeout
    for spec in config.remote() if remote is None else remote:
        level = spec if isinstance(spec, Store) else _urls.remote_level(spec, timeout)
        if level is not None:
            levels.append(level)
    return Levels(levels)


@functools.lru_cache(maxsize=8)
def _store_for(
    cache_dir: str,
    max_size: int,
    bundles: tuple[str, ...],
    redis_url: str | None,
    memory_entries: int,
    remote: tuple[str, ...] = (),
    remote_timeout: float = 2.0,
) -> Levels:
    return make_store(
        cache_dir,
        max_size=max_size,
        bundles=bundles,
        redis_url=redis_url or "",
        memory_entries=memory_entries,
        remote=remote,
        remote_timeout=remote_timeout,
    )


_override: Levels | None = None


def set_store(store: Store | None) -> None:
    """Use ``store`` (see ``make_store``; a single Store becomes ``Levels([store])``) for every
    compile of this process; None goes back to the store the environment describes."""
    global _override
    _override = store if store is None or isinstance(store, Levels) else Levels([store])


def default_store(cache_dir=None) -> Levels:
    """The store for a compile: set_store's, else the one the environment describes (read at
    call time, one instance per distinct configuration)."""
    if _override is not None and cache_dir is None:
        return _override
    location = cache_location(cache_dir)
    return _store_for(
        str(location.path),
        location.max_size,
        config.bundles(),
        config.redis_url(),
        config.memory_cache_entries(),
        config.remote(),
        config.remote_timeout(),
    )
