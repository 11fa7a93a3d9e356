"""Paths in a record's and a manifest's options, written portable and read back: each -I as
NVRTC and parse_options read it (an empty one names no directory, -I=DIR is DIR), so a
prebuild compiles with exactly the search the application had."""

from __future__ import annotations

import os

import pytest

from cupy_rawcode.ground.confine import confine_options
from cupy_rawcode.headers.options import parse_options
from cupy_rawcode.hook.recording import local_options, portable_options

EMPTY = [("-I", ""), ("-I=",), ("--include-path=",), ("-DX=1", "-I"), ("-I", "", "-DX=1")]


@pytest.mark.parametrize("options", EMPTY, ids=repr)
def test_an_empty_include_stays_empty_through_a_record(options, tmp_path):
    written = portable_options(options, str(tmp_path))
    assert local_options(written, str(tmp_path / "elsewhere")) == options
    assert confine_options(options, str(tmp_path), (), "r:1") == options
    assert parse_options(options).include_dirs == ()


@pytest.mark.parametrize(
    "spelled", [("-Isub",), ("-I=sub",), ("-I", "sub"), ("--include-path=sub",)]
)
def test_a_relative_include_is_the_same_directory_through_a_record(spelled, tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    written = portable_options(spelled, str(tmp_path))
    moved = tmp_path / "moved"
    (moved / "sub").mkdir(parents=True)
    back = local_options(written, str(moved))
    assert parse_options(back).include_dirs == (os.path.realpath(moved / "sub"),)
    confined = confine_options(spelled, str(tmp_path), (), "r:1")
    assert parse_options(confined).include_dirs == (os.path.realpath(tmp_path / "sub"),)


@pytest.mark.parametrize(
    "option",
    [" -I/etc", "\t--include-path=/etc", " -include=/etc/hostname", "-time=/tmp/t.csv"]
    + ["-fdevice-time-trace=/tmp/t.json", "-create-pch=/tmp/x.pch", "-pch-dir=/tmp"],
    ids=repr,
)
def test_a_path_outside_is_refused_however_spelled(option, tmp_path):
    """A blank around an option (NVRTC trims it) and the options naming a file NVRTC writes are
    confined like -I: outside the manifest's directory and every --root, refused."""
    from cupy_rawcode.ground.confine import EscapeError

    with pytest.raises(EscapeError):
        confine_options((option,), str(tmp_path), (), "m:1")


@pytest.mark.parametrize(
    "spelled", [("-isystem=sub",), ("--include-path", "sub"), (" -Isub",)], ids=repr
)
def test_every_spelling_of_a_directory_is_recorded_portable(spelled, tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    moved = tmp_path / "moved"
    (moved / "sub").mkdir(parents=True)
    back = local_options(portable_options(spelled, str(tmp_path)), str(moved))
    opts = parse_options(back)
    assert opts.include_dirs + opts.isystem_dirs == (os.path.realpath(moved / "sub"),)
