"""An -I spelled through a symbolic link and '..' (``-I lnk/..``) names the directory the link's
target is in, as NVRTC reads it (headers/paths.py). The warm index, keyed by the options as
given, must miss once the link points elsewhere, whatever the headers it read."""

import os

import pytest

from cupy_rawcode.key import index_id, index_lookup, index_save
from cupy_rawcode.key.request import compute_key, make_request

SOURCE = '#include <x.h>\nextern "C" __global__ void k() {}\n'


def _read(keyed, root) -> list[str]:
    return [os.path.relpath(h.path, root) for h in keyed.closure.headers if str(root) in h.path]


@pytest.mark.parametrize("spelled", ["{root}/lnk/..", "lnk/..", "{root}/lnk/../"])
def test_a_link_re_pointed_under_an_include_dir_with_dotdot_is_a_miss(
    tmp_path, monkeypatch, spelled
):
    for side in ("a", "b"):
        (tmp_path / side / "inc").mkdir(parents=True)
        (tmp_path / side / "x.h").write_text(f"int {side};\n")
    os.symlink(tmp_path / "a" / "inc", tmp_path / "lnk")
    monkeypatch.chdir(tmp_path)
    options = (f"-I{spelled.format(root=tmp_path)}",)
    keyed = compute_key(make_request(SOURCE, arch="sm_90", options=options))
    assert _read(keyed, tmp_path) == ["a/x.h"]
    iid = index_id(SOURCE, options, "sm_90", (), None)
    index_save(iid, keyed.key, "sm_90", "cubin", keyed.count, keyed.stamps)
    assert index_lookup(iid) is not None
    os.unlink(tmp_path / "lnk")
    os.symlink(tmp_path / "b" / "inc", tmp_path / "lnk")
    assert index_lookup(iid) is None  # the directory NVRTC searches is another now
    again = compute_key(make_request(SOURCE, arch="sm_90", options=options))
    assert _read(again, tmp_path) == ["b/x.h"] and again.key != keyed.key
