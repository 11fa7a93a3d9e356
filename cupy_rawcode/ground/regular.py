"""Reading and writing files only when they are regular files (a FIFO, a device or a socket named
as a source, found as a header or standing in the cache would block a read forever, or never
end): a source's text, a record's lines, a file's bytes, part of a bundle, and one of the
cache's own files opened to write. ``open_regular`` and the cache's readers
(``read_cache_file``) are the ground package's, which a warm hit loads anyway."""

from __future__ import annotations

import errno
import io
import os
import stat

from . import NotRegularFileError, kind_of, open_regular

_UNSHARED_LIMIT = 1 << 20  # a counter or a ledger is far smaller


def open_own(path, flags: int, unshare: bool = True) -> int:
    """An fd of one of the cache's own files opened with ``flags`` (creating it 0600 with
    O_CREAT) without following a link or blocking on a FIFO; NotRegularFileError when it is
    anything but a regular file. One with another name too (a hard link: a copy of the cache
    made with ``cp -al``, or a user's file linked in) is first replaced by a copy of its own,
    so a counter or a ledger never writes through a link of either kind."""
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
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and unshare:
        os.close(fd)
        _unshared(path, st)
        return open_own(path, flags, unshare=False)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        words = (
            f"a hard link (one of {st.st_nlink} names of one file)"
            if stat.S_ISREG(st.st_mode)
            else f"{kind_of(st.st_mode)}, not a regular file"
        )
        raise NotRegularFileError(errno.EINVAL, words, os.fspath(path))
    return fd


def _unshared(path, st: os.stat_result) -> None:
    """Put a copy of the file ``path`` names (``st``: its stat) in place of that name (a temp
    file in its directory, renamed over it): the other names keep the file as it was."""
    if st.st_size > _UNSHARED_LIMIT:
        words = f"a hard link (one of {st.st_nlink} names of one file)"
        raise NotRegularFileError(errno.EINVAL, words, os.fspath(path))
    fd, now = open_regular(path, follow=False)
    try:
        if now.st_ino != st.st_ino:
            return  # replaced since: another process unshared it
        data = os.pread(fd, now.st_size, 0)
    finally:
        os.close(fd)
    head, name = os.path.split(os.fspath(path))
    temp = os.path.join(head, f".{name}.{os.getpid()}.unshared")
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(out, data)
    finally:
        os.close(out)
    try:
        os.replace(temp, path)
    except OSError:
        os.unlink(temp)
        raise


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


def read_at(fd: int, offset: int, size: int) -> bytes:
    """``size`` bytes of an open file from ``offset`` (fewer where the file ends first): one
    entry of a bundle, never the whole file."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 30))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
