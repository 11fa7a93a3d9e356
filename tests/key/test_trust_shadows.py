"""A header that appears earlier in the search path than the one the key read (an earlier -I
directory) is what NVRTC reads from then on: a compile during which one appears stores nothing,
a manifest that names the shadowed header is keyed afresh on the next miss, and a precompiled
header made before it is never reused."""

import os
import warnings
from pathlib import Path

import pytest

import cupy_rawcode
from cupy_rawcode.key.request import make_request
from cupy_rawcode.orchestrator import compiling as program
from cupy_rawcode.orchestrator.compiling import compile_request

KERNEL = '#include <hv.h>\nextern "C" __global__ void k(int* p) { *p = VAL; }\n'
OLD, NEW = "#define VAL 1111111\n", "#define VAL 2222222\n"


def _compile(root: Path, arch: str = "sm_80", source: str = KERNEL):
    options = (f"-I{root / 'a'}", f"-I{root / 'b'}")
    return compile_request(make_request(source, arch=arch, target="ptx", options=options))


def _value(result) -> str:
    ptx = result.code.decode()
    assert ("1111111" in ptx) != ("2222222" in ptx), ptx
    return "1111111" if "1111111" in ptx else "2222222"


def _entries() -> list[Path]:
    root = Path(os.environ["CUPY_RAWCODE_CACHE_DIR"]) / "entries"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def _appearing(monkeypatch, path: Path) -> None:
    """``path`` (holding NEW) appears once, while the next NVRTC compile starts."""
    real, done = program._nvrtc_compile, []

    def hook(req, ctx, dump):
        if not done:
            done.append(1)
            path.write_text(NEW)
        return real(req, ctx, dump)

    monkeypatch.setattr(program, "_nvrtc_compile", hook)


@pytest.mark.parametrize("keyed_by", ["a fresh resolve", "a manifest"])
def test_a_header_that_appears_earlier_in_the_search_mid_compile_stores_nothing(
    keyed_by, tree, monkeypatch
):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")
    root = tree({"b/hv.h": OLD, "a/other.h": ""})
    if keyed_by == "a manifest":  # the manifest is the source's: another arch misses on it
        assert _value(_compile(root, "sm_75")) == "1111111"
    before = len(_entries())
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _appearing(mp, root / "a" / "hv.h")
        first = _compile(root)
    assert _value(first) == "2222222"  # NVRTC read the new header: the key holds the old one
    changed = [w for w in caught if issubclass(w.category, cupy_rawcode.HeaderChangedWarning)]
    assert len(changed) == 1 and str(root / "a" / "hv.h") in str(changed[0].message)
    assert len(_entries()) == before
    (root / "a" / "hv.h").unlink()
    again = _compile(root)
    assert _value(again) == "1111111" and not again.hit


def test_a_manifest_whose_header_is_shadowed_since_is_keyed_afresh_on_a_miss(tree, monkeypatch):
    """The manifest's stamps cannot see a new file earlier in the search path (ccache's limit,
    README); a miss resolves again before it compiles, so what it stores is keyed on the header
    NVRTC reads, and the manifest is written anew."""
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")
    root = tree({"b/hv.h": OLD, "a/other.h": ""})
    assert _value(_compile(root, "sm_75")) == "1111111"
    (root / "a" / "hv.h").write_text(NEW)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cupy_rawcode.HeaderChangedWarning)
        shadowed = _compile(root)
    assert _value(shadowed) == "2222222" and not shadowed.hit
    assert _value(_compile(root)).startswith("2") and _compile(root).hit
    assert _value(_compile(root, "sm_75")) == "2222222"  # the new manifest names a/hv.h
    (root / "a" / "hv.h").unlink()
    assert _value(_compile(root)) == "1111111"


def test_a_precompiled_header_is_not_reused_once_a_header_is_shadowed(tree, monkeypatch):
    """NVRTC keeps a PCH of the headers it read; a header that appears earlier in the search
    path since makes the next compile of the prefix make a new one."""
    from cupy_rawcode.compiler import nvrtc

    monkeypatch.setenv("CUPY_RAWCODE_PCH", "1")
    monkeypatch.setattr(nvrtc, "_pch", nvrtc._Pch())
    root = tree({"b/hv.h": OLD, "a/other.h": ""})
    for i, value in enumerate(["1111111", "1111111", "2222222", "2222222"]):
        if i == 2:
            (root / "a" / "hv.h").write_text(NEW)
        source = KERNEL.replace("*p = VAL", f"*p = VAL + {i} - {i}")  # a miss each time
        assert _value(_compile(root, source=source)) == value


def test_a_pre_include_is_searched_in_the_working_directory_first(tree, monkeypatch):
    """``-include p.h`` (NVRTC's --pre-include) is searched in the working directory, then the
    search list, never in the source's directory (as gcc's -include): the key follows the file
    NVRTC reads, and a compile in another working directory is keyed on that one's."""
    from conftest import bare_nvrtc

    from cupy_rawcode.key import index_id

    root = tree(
        {
            "one/p.h": "#define VAL 1111111\n",
            "two/p.h": "#define VAL 2222222\n",
            "i/p.h": '#error "the -I copy"\n',
            "src/p.h": '#error "the source directory\'s copy"\n',
        }
    )
    source = 'extern "C" __global__ void k(int* p) { *p = VAL; }\n'
    options = (f"-I{root / 'i'}", "-include", "p.h")
    for cwd in ("one", "two"):
        monkeypatch.chdir(root / cwd)
        assert bare_nvrtc("#ifndef VAL\n#error\n#endif\n", options).ok  # NVRTC reads cwd/p.h
        req = make_request(source, arch="sm_80", target="ptx", options=options)
        req = req._replace(source_dir=str(root / "src"), source_name="k.cu")
        assert _value(compile_request(req)) == ("1111111" if cwd == "one" else "2222222")
    ids = set()
    for cwd in ("one", "two"):
        monkeypatch.chdir(root / cwd)
        ids.add(index_id(source, options, "sm_80", (), None))
    assert len(ids) == 2


def test_a_directory_named_like_a_header_in_an_include_directory_keeps_the_cache(tree, compiles):
    """The search skips a directory (``src/utility/`` for ``<utility>``): it is not a path
    found empty, so it is not stamped absent, and the second compile is a hit."""
    root = tree({"src/utility/readme.txt": "", "src/keep.h": ""})
    source = '#include <utility>\nextern "C" __global__ void k(int* p) { *p = 1; }\n'
    options = (f"-I{root / 'src'}",)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cupy_rawcode.HeaderChangedWarning)
        for _ in range(2):
            cupy_rawcode.compile(source, arch="sm_90", target="ptx", options=options)
    assert len(compiles) == 1


def test_a_closure_record_whose_header_an_includers_directory_now_shadows_is_refused(
    tree, monkeypatch
):
    """A header found through the search list from a quoted include: a file that appears in
    the including file's own directory is read instead. The closure record of another process
    holds that place as watched, so it is refused; and a miss keyed afresh takes no lock it
    holds (it once waited on its own lock forever)."""
    import shutil
    import threading

    from cupy_rawcode.key import manifest

    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")
    root = tree({"a/x.h": OLD, "b/main.h": '#include "x.h"\n#include <utility>\n'})
    source = '#include <main.h>\nextern "C" __global__ void k(int* p) { *p = VAL; }\n'

    def compiled(arch):
        options = (f"-I{root / 'a'}", f"-I{root / 'b'}")
        return _value(
            compile_request(make_request(source, arch=arch, target="ptx", options=options))
        )

    assert compiled("sm_80") == "1111111"  # keeps a closure record (16 headers or more)
    manifest._memo.clear()  # a new process: no manifest, the record answers
    shutil.rmtree(Path(os.environ["CUPY_RAWCODE_CACHE_DIR"]) / "manifests")
    (root / "b" / "x.h").write_text(NEW)
    assert compiled("sm_80") == "2222222"
    done = []
    worker = threading.Thread(target=lambda: done.append(compiled("sm_75")), daemon=True)
    worker.start()
    worker.join(120)
    assert done == ["2222222"]


def test_a_directory_named_like_a_quoted_include_in_the_source_directory_keeps_the_cache(
    tree, compiles, monkeypatch
):
    """A quoted include looks in the source's directory first; a directory of that name there
    is skipped, not a file that must stay absent, so the second compile is a hit."""
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")  # one NVRTC run a compile
    root = tree({"src/hv.h/readme.txt": "", "inc/hv.h": OLD})
    req = make_request(
        '#include "hv.h"\nextern "C" __global__ void k(int* p) { *p = VAL; }\n',
        arch="sm_80",
        target="ptx",
        options=(f"-I{root / 'inc'}",),
    )._replace(source_dir=str(root / "src"), source_name="k.cu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", cupy_rawcode.HeaderChangedWarning)
        assert _value(compile_request(req)) == "1111111"
        assert compile_request(req).hit
    assert len(compiles) == 1
