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


def open_own(path, flags: int) -> int:
    """An fd of one of the cache's own files opened with ``flags`` (creating it 0600 with
    O_CREAT) without following a link or blocking on a FIFO; NotRegularFileError when it is
    anything but a regular file, or one with another name too (a hard link: the same file as
    a user's elsewhere): a counter or a ledger never writes through a link of either kind."""
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
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        words = (
            f"a hard link (one of {st.st_nlink} names of one file)"
            if stat.S_ISREG(st.st_mode)
            else f"{kind_of(st.st_mode)}, not a regular file"
        )
        raise NotRegularFileError(errno.EINVAL, words, os.fspath(path))
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


def read_at(fd: int, offset: int, size: int) -> bytes:
    """``size`` bytes of an open file from ``offset`` (fewer where the file ends first): one
    entry of a bundle, never the whole file."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 30))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
