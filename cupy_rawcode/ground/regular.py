"""Open files only when they are regular files: a FIFO, a device or a socket named as a source,
found as a header or standing in the cache would block a read forever, or never end. The cache's
own files are also opened without following a symlink, and read up to a size limit."""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
import time

try:
    import fcntl as _fcntl
except ImportError:  # Windows: no advisory locks
    _fcntl = None  # type: ignore[assignment]

from . import RawcodeError, deferred

log = deferred("cupy_rawcode.ground.log")  # a refused cache file only: off a hit's import path

# O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer (on a
# regular file it changes nothing); O_CLOEXEC: never leaks into a worker process
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFileError(RawcodeError, OSError):
    """A path that names something other than a regular file; ``strerror`` says what it is."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ('a FIFO (named pipe)', ...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


class TooLargeError(RawcodeError, OSError):
    """A file larger than its reader's limit (a cache file cannot be that big)."""


# the cache's limits: an entry is code (CUB kernels are < 1 MiB), a record is a JSON object
ENTRY_LIMIT = 256 << 20
RECORD_LIMIT = 8 << 20
NO_LIMIT = sys.maxsize  # a header: read whole, whatever its size


def open_regular(path: str, follow: bool = True) -> tuple[int, os.stat_result]:
    """(file descriptor, its fstat) of a regular file, opened for reading without ever
    blocking; NotRegularFileError (an OSError) for anything else, and for a symlink when
    ``follow`` is False (the cache's own files: a link there points outside it)."""
    try:
        fd = os.open(path, _FLAGS if follow else _FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise NotRegularFileError(errno.ELOOP, "a symbolic link", os.fspath(path)) from None
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFileError(
            errno.EINVAL, f"{kind_of(st.st_mode)}, not a regular file", os.fspath(path)
        )
    return fd, st


def open_own(path, flags: int) -> int:
    """An fd of one of the cache's own files opened with ``flags`` (creating it 0600 with
    O_CREAT) without following a link or blocking on a FIFO; NotRegularFileError when it is
    anything but a regular file: a counter or a ledger never writes through a link."""
    extra = (
        getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags | extra, 0o600)
    except OSError as e:
        words = {
            errno.ELOOP: "a symbolic link",
            errno.ENXIO: "a FIFO (named pipe), not a regular file",  # opened to write, no reader
            errno.EISDIR: "a directory, not a regular file",
        }.get(e.errno or 0)
        if words is not None:
            raise NotRegularFileError(e.errno, words, os.fspath(path)) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFileError(
            errno.EINVAL, f"{kind_of(st.st_mode)}, not a regular file", os.fspath(path)
        )
    return fd


def read_bytes(path: str) -> bytes:
    """The whole of a regular file (NotRegularFileError for anything else)."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def read_lines(path: str) -> list[bytes]:
    """A regular file's lines as a binary file iterates them (each ends with its b'\\n', the
    last one perhaps not): a record is read line by line."""
    return io.BytesIO(read_bytes(path)).readlines()


def universal_newlines(text: str) -> str:
    """``text`` with '\\r\\n' and '\\r' read as '\\n', as ``open`` in text mode reads them."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def read_text(path: str) -> str:
    """A regular file's UTF-8 text with universal newlines, as ``open(path).read()`` gives it
    (UnicodeDecodeError for other bytes: ``e.object`` holds them, for a line and column)."""
    return universal_newlines(read_bytes(path).decode("utf-8"))


def read_fd(fd: int, st: os.stat_result, limit: int = NO_LIMIT, path: str = "") -> bytes:
    """A whole open file of at most ``limit`` bytes (TooLargeError past it, even when it grows
    while read): one read when it is no larger than fstat said."""
    if st.st_size > limit:
        raise TooLargeError(errno.EFBIG, f"larger than {limit} bytes", path)
    data = os.read(fd, st.st_size + 1)
    if len(data) <= st.st_size:
        return data
    chunks, total = [data], len(data)  # it grew meanwhile: read on to the end, or the limit
    while chunk := os.read(fd, 1 << 16):
        total += len(chunk)
        if total > limit:
            raise TooLargeError(errno.EFBIG, f"larger than {limit} bytes", path)
        chunks.append(chunk)
    return b"".join(chunks)


def read_at(fd: int, offset: int, size: int) -> bytes:
    """``size`` bytes of an open file from ``offset`` (fewer where the file ends first): one
    entry of a bundle, never the whole file."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 30))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _refused_key(path) -> tuple[str, str]:
    """The warn-once key (log.py) of a refused cache path."""
    return ("refused cache file", str(path))


def warned(path) -> bool:
    """Whether ``refused`` warned about ``path`` in this process (a repair then says nothing)."""
    return log.said(_refused_key(path))


def refused(path, e: OSError) -> None:
    """Warn once per path that a cache file is a symlink, not a regular file or too large: a
    miss (a missing or unreadable one is a plain miss, silently)."""
    if isinstance(e, (NotRegularFileError, TooLargeError)):
        log.warn_once(
            _refused_key(path),
            "cupy-rawcode: ignoring %s in the cache: %s (a miss)",
            path,
            e.strerror,
        )


def open_cache_file(path) -> tuple[int, os.stat_result] | None:
    """(fd, fstat) of one of the cache's own files: a regular file reached without a symlink;
    None (a miss, see ``refused``) for anything else."""
    try:
        return open_regular(path, follow=False)
    except OSError as e:
        refused(path, e)
        return None


def read_cache_file(
    path, limit: int, mark_used: bool = False, *, shared_lock: bool = False, used_after: float = 0
) -> bytes | None:
    """One of the cache's own files (``open_cache_file``) of at most ``limit`` bytes, or None
    (a miss). ``mark_used`` sets its mtime through the open file (the size bound's LRU) when it
    is older than ``used_after`` seconds; ``shared_lock`` holds an flock while reading, so that
    eviction (which takes it exclusively) never removes a file being read."""
    opened = open_cache_file(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        if shared_lock and _fcntl is not None:
            _fcntl.flock(fd, _fcntl.LOCK_SH)
            st_read = os.fstat(fd)  # its size once locked
        else:
            st_read = st
        data = read_fd(fd, st_read, limit, os.fspath(path))
        if mark_used and time.time() - st.st_mtime > used_after:
            try:
                os.utime(fd)
            except OSError:
                pass  # a read-only cache still serves hits
        return data
    except OSError as e:
        refused(path, e)
        return None
    finally:
        os.close(fd)  # releases the lock
