"""Open input files (sources, headers) only when they are regular files: a FIFO, a device or a
socket named as a source or found as a header would block a read forever, or never end."""

from __future__ import annotations

import errno
import os
import stat

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


class NotRegularFileError(OSError):
    """A path that names something other than a regular file; ``strerror`` says what it is."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ('a FIFO (named pipe)', ...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """(file descriptor, its fstat) of a regular file, opened for reading without ever
    blocking; NotRegularFileError (an OSError) for anything else."""
    fd = os.open(path, _FLAGS)
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


def read_bytes(path: str) -> bytes:
    """The whole of a regular file (NotRegularFileError for anything else)."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        return f.read()
