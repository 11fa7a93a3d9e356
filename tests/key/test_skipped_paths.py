"""A path the header search skipped because it holds no file (a directory, a symbolic link loop
where an -I directory has the header's name) is watched like an empty one: a header put in its
place is what NVRTC reads, so the manifest, and one written from a portable record, miss."""

import os
import shutil

import pytest
from conftest import new_process

from cupy_rawcode.key import manifest
from cupy_rawcode.key.request import compute_key, context, make_request

N = 20  # headers: over portable.MIN_HEADERS, so that the closure gets a portable record
SOURCE = "#include <x.h>\n#include <all.h>\n" + 'extern "C" __global__ void k() {}\n'


def _skipped(path, kind: str) -> None:
    """Make ``path`` something the search skips: a directory or a symbolic link loop."""
    if kind == "directory":
        os.makedirs(path / "inside")
    else:
        os.symlink(path, path)


def _tree(base, kind: str):
    """-I A -I B: A/x.h skipped, B/x.h and N more headers found."""
    (base / "A").mkdir(parents=True)
    _skipped(base / "A" / "x.h", kind)
    (base / "B").mkdir()
    (base / "B" / "x.h").write_text("int b;\n")
    for i in range(N):
        (base / "B" / f"f{i}.h").write_text(f"int f{i};\n")
    (base / "B" / "all.h").write_text("".join(f"#include <f{i}.h>\n" for i in range(N)))
    return make_request(
        SOURCE, arch="sm_90", options=("-I", str(base / "A"), "-I", str(base / "B"))
    )


def _lookup(req):
    return manifest.lookup(req.source, context(req), req.pre_includes)


@pytest.mark.parametrize("through", ["a resolve", "a portable record"])
@pytest.mark.parametrize("kind", ["directory", "symlink loop"])
def test_a_header_put_where_the_search_skipped_a_path_is_a_miss(tmp_path, kind, through):
    req, base = _tree(tmp_path / "a", kind), tmp_path / "a"
    key = compute_key(req).key
    if through == "a portable record":  # another root, the same tree: the record answers
        new_process()
        req, base = _tree(tmp_path / "b", kind), tmp_path / "b"
        keyed = compute_key(req)
        assert keyed.closure is None and keyed.key == key
    assert _lookup(req) is not None  # what the search skipped still skipped: the manifest holds
    skipped = base / "A" / "x.h"
    if kind == "directory":
        shutil.rmtree(skipped)
    else:
        skipped.unlink()
    skipped.write_text("int a;\n")
    assert _lookup(req) is None
    again = compute_key(req)
    assert again.closure is not None and again.key != key
    assert any(h.path == str(skipped) for h in again.closure.headers)


@pytest.mark.parametrize(
    "change",
    ["a file written in the skipped directory", "a file written beside the headers"],
)
def test_a_change_that_replaces_nothing_keeps_the_manifest(tmp_path, change):
    """A skipped directory is watched for what it is, not what it holds: an editor's swap file
    or a build output written in it (or in an -I directory) leaves the manifest valid."""
    req = _tree(tmp_path, "directory")
    compute_key(req)
    assert _lookup(req) is not None
    where = tmp_path / "A" / "x.h" if change.endswith("directory") else tmp_path / "A"
    (where / ".swp").write_text("scratch\n")
    assert _lookup(req) is not None


@pytest.mark.parametrize("spelling", ["absolute", "relative"])
def test_an_include_dir_spelled_with_dotdot_keeps_its_manifest_when_a_file_appears(
    tmp_path, monkeypatch, spelling
):
    """-I ../inc with no link anywhere: a new file in the directory is no change of it."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "h.h").write_text("int h;\n")
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    inc = "../inc" if spelling == "relative" else str(tmp_path / "src" / ".." / "inc")
    req = make_request("#include <h.h>\n", arch="sm_90", options=(f"-I{inc}",))
    compute_key(req)
    assert _lookup(req) is not None
    (tmp_path / "inc" / "new_output.o").write_text("x\n")
    assert _lookup(req) is not None
