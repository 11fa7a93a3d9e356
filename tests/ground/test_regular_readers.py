"""One way to read a file (regular.py): text with universal newlines, a record's lines and an
open header's bytes read as ``open`` would read them, and never a FIFO."""

from __future__ import annotations

import os

import pytest

from cupy_rawcode.ground import NotRegularFileError, open_regular, read_fd
from cupy_rawcode.ground.regular import read_at, read_lines, read_text, universal_newlines

DATA = b"one\r\ntwo\rthree\n\nfour \xc3\xa9"


def test_read_text_is_what_open_reads(tmp_path):
    path = tmp_path / "f.cu"
    path.write_bytes(DATA)
    with open(path, encoding="utf-8") as f:
        assert read_text(str(path)) == f.read()
    assert universal_newlines("a\r\nb\rc") == "a\nb\nc"


def test_read_text_refuses_bytes_that_are_not_utf8_with_the_bytes(tmp_path):
    path = tmp_path / "f.cu"
    path.write_bytes(b"ok\n\xff")
    with pytest.raises(UnicodeDecodeError) as e:
        read_text(str(path))
    assert e.value.object == b"ok\n\xff" and e.value.start == 3


def test_read_lines_is_what_a_binary_file_iterates(tmp_path):
    path = tmp_path / "app.rec"
    for data in (DATA, b"", b"a\n", b"a\nb", b"\n\n"):
        path.write_bytes(data)
        with open(path, "rb") as f:
            assert read_lines(str(path)) == list(f)


def test_read_fd_reads_a_header_whole(tmp_path):
    path = tmp_path / "big.h"
    path.write_bytes(DATA * 20000)
    fd, st = open_regular(str(path))
    try:
        assert read_fd(fd, st) == DATA * 20000
    finally:
        os.close(fd)


def test_read_at_reads_a_span_as_seek_and_read_do(tmp_path):
    path = tmp_path / "x.bundle"
    path.write_bytes(DATA)
    fd, _ = open_regular(str(path))
    try:
        with open(path, "rb") as f:
            for offset, size in ((0, 3), (5, 4), (len(DATA) - 2, 10), (len(DATA) + 1, 1), (2, 0)):
                f.seek(offset)
                assert read_at(fd, offset, size) == f.read(size)
    finally:
        os.close(fd)


def test_a_fifo_is_never_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for reader in (read_text, read_lines):
        with pytest.raises(NotRegularFileError):
            reader(str(fifo))
