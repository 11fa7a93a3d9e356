"""The toolchain record (toolrecord.py): used while nothing it stamps changed, rediscovered when
anything did, never trusted when broken; and a warm process keys without loading NVRTC."""

import json
import os
import subprocess
import sys

import pytest

from cupy_rawcode.toolkit import record as toolrecord
from cupy_rawcode.toolkit.discovery import SearchDir, Toolchain

SOURCES = ("wheel", "toolkit")


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A synthetic toolchain whose every stamped path lives under tmp_path, saved once."""
    lib = tmp_path / "lib" / "libnvrtc.so.12"
    cccl = tmp_path / "cccl"
    version = cccl / "cuda" / "std" / "__cccl" / "version.h"
    cuda = tmp_path / "cuda"
    site = tmp_path / "env" / "site-packages"
    for d in (lib.parent, version.parent, cuda, site):
        d.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF nvrtc")
    version.write_text("#define CCCL_VERSION 2008002\n")
    monkeypatch.setattr(
        sys, "path", [str(site)] + [p for p in sys.path if not p.endswith("site-packages")]
    )
    for var in toolrecord.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    tc = Toolchain(
        (12, 9),
        (SearchDir("cccl", str(cccl), "wheel"), SearchDir("cuda", str(cuda), "wheel")),
        "2.8.2",
        SOURCES,
        (80, 90),
        str(lib),
    )
    toolrecord.save(tc)
    return {"tc": tc, "lib": lib, "version": version, "site": site, "cuda": cuda}


def _bump(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


# each case changes one thing the record depends on; the record must then be ignored
INVALID_WHEN = {
    "the NVRTC library is replaced": lambda s, mp: s["lib"].write_bytes(b"\x7fELF nvrtc 2"),
    "the NVRTC library is touched": lambda s, mp: _bump(s["lib"]),
    "CCCL's version header changes": lambda s, mp: s["version"].write_text(
        "#define CCCL_VERSION 3001000\n"
    ),
    "a package is installed (site-packages mtime)": lambda s, mp: (s["site"] / "new").mkdir(),
    "a header directory disappears": lambda s, mp: s["cuda"].rename(s["cuda"].with_name("gone")),
    "CUDA_HOME is set": lambda s, mp: mp.setenv("CUDA_HOME", "/opt/cuda"),
    "LD_LIBRARY_PATH changes": lambda s, mp: mp.setenv("LD_LIBRARY_PATH", "/x"),
    "sys.path gains a site-packages": lambda s, mp: mp.setattr(
        sys, "path", sys.path + [str(s["site"].parent / "other" / "site-packages")]
    ),
    "the record is not JSON": lambda s, mp: toolrecord.record_path(SOURCES).write_bytes(b"{"),
    "the record has another schema": lambda s, mp: _rewrite(schema="cupy-rawcode-toolchain-0"),
    "the record lacks a field": lambda s, mp: _rewrite(drop="dirs"),
    "a field has the wrong type": lambda s, mp: _rewrite(nvrtc_version="12.9"),
    "the record is removed": lambda s, mp: toolrecord.record_path(SOURCES).unlink(),
}


def _rewrite(drop=None, **changes):
    path = toolrecord.record_path(SOURCES)
    data = json.loads(path.read_bytes())
    data.update(changes)
    data.pop(drop, None)
    path.write_text(json.dumps(data))


def test_record_is_used_while_nothing_changed(setup):
    tc = toolrecord.load(SOURCES)
    assert tc is not None and tc.from_record
    assert tc._replace(stamps=()) == setup["tc"]._replace(from_record=True)
    # what the index reuses, in the record's order (grouped by directory)
    assert sorted(s[0] for s in tc.stamps) == sorted(toolrecord.watched_paths(tc))
    assert tc.supported_archs == (80, 90) and tc.cccl_version == "2.8.2"


@pytest.mark.parametrize("case", sorted(INVALID_WHEN))
def test_record_ignored_when(case, setup, monkeypatch):
    assert toolrecord.load(SOURCES) is not None
    INVALID_WHEN[case](setup, monkeypatch)
    assert toolrecord.load(SOURCES) is None


def test_record_is_per_policy(setup):
    assert toolrecord.load(("toolkit",)) is None


def test_unwritable_cache_still_works(setup, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # the cache directory would have to live under a file: any write fails
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(blocker / "cache"))
    toolrecord.save(setup["tc"])  # must not raise
    assert toolrecord.load(SOURCES) is None


_WARM = r"""
import sys
from cupy_rawcode import cache_key
from cupy_rawcode.toolkit.record import toolchain
k = cache_key('#include <cub/block/block_reduce.cuh>\n', arch='sm_90')
print(k, toolchain().from_record,
      'cuda.pathfinder' in sys.modules, 'cuda.bindings.nvrtc' in sys.modules)
"""


def test_warm_process_keys_without_pathfinder_or_nvrtc(tmp_path):
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "c")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", _WARM], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    first, second = runs
    assert first[0] == second[0]  # the same key from discovery and from the record
    assert first[1:] == ["False", "True", "True"]
    assert second[1:] == ["True", "False", "False"]
