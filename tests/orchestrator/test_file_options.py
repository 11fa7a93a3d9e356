"""NVRTC options that name a file NVRTC writes (a timing report, a precompiled header) or reads
besides the headers (a precompiled header): every compile with one runs NVRTC, as in CuPy, so
the file is written each time (a cache hit would skip it), and a file NVRTC would block on is
refused first."""

import os

import pytest

import cupy_rawcode
from cupy_rawcode.ground.errors import BadInputError

SOURCE = '#include <cuda/std/type_traits>\nextern "C" __global__ void k(int* p) { *p = 1; }\n'

# option -> the file it names is written by NVRTC
WRITTEN = {
    "-time={}": "a timing report",
    "--time={}": "a timing report, the long spelling",
    "--create-pch={}": "a precompiled header",
}


@pytest.mark.parametrize("option", sorted(WRITTEN))
def test_a_file_an_option_names_is_written_by_every_compile(option, tmp_path, compiles):
    out = tmp_path / "out.file"
    for _ in range(2):
        cupy_rawcode.compile(SOURCE, arch="sm_90", options=(option.format(out),))
        assert out.is_file(), f"{WRITTEN[option]} not written"
        out.unlink()
    assert len(compiles) == 2  # the second is no hit


def test_a_compile_with_one_is_not_served_from_the_cache(tmp_path, compiles):
    cupy_rawcode.compile(SOURCE, arch="sm_90")
    cupy_rawcode.compile(SOURCE, arch="sm_90", options=(f"-time={tmp_path / 't.csv'}",))
    assert len(compiles) == 2 and (tmp_path / "t.csv").is_file()


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_precompiled_header_to_read_that_is_no_regular_file_is_refused(kind, tmp_path):
    path = tmp_path / "p.pch"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    with pytest.raises(BadInputError, match=f"--use-pch={path}: .* not a regular file"):
        cupy_rawcode.compile(SOURCE, arch="sm_90", options=(f"--use-pch={path}",))
