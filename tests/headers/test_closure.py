"""Proof that nothing was missed: compile from a directory holding only the closure."""

import shutil

import pytest
from conftest import corpus

from cupy_rawcode.headers.resolver import resolve

KERNELS = ["block_reduce.cu", "block_scan.cu", "radix_sort.cu", "warp_reduce.cu", "complex.cu"]


def _copy_closure(closure, dest):
    for h in closure.headers:
        rel = h.logical.split(":", 1)[1]
        target = dest / h.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(h.path, target)
    return [str(dest / tag) for tag in ("cccl", "cuda", "shim") if (dest / tag).is_dir()]


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("exact", [True, False])
def test_closure_alone_compiles(tmp_path, name, exact):
    from cuda.core import Program, ProgramOptions

    src = corpus(name)
    closure = resolve(src, exact=exact, arch="sm_90")  # default policy: the CCCL wheel first
    assert len(closure.headers) > 100
    assert not closure.errors
    dirs = _copy_closure(closure, tmp_path / "only")
    obj = Program(src, "c++", ProgramOptions(arch="sm_90", std="c++17", include_path=dirs)).compile(
        "cubin"
    )
    assert len(obj.code) > 1000


@pytest.mark.parametrize("name", KERNELS)
def test_exact_is_subset_of_fast(name):
    src = corpus(name)
    exact = {h.logical for h in resolve(src, exact=True, arch="sm_90").headers}
    fast = {h.logical for h in resolve(src).headers}
    assert exact <= fast


def test_exact_differs_by_arch_where_headers_do(tree):
    root = tree(
        {"i/a.h": "#if __CUDA_ARCH__ >= 900\n#include <hopper.h>\n#endif\n", "i/hopper.h": ""}
    )
    names = lambda arch: {
        h.logical
        for h in resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=True, arch=arch).headers
    }
    assert names("sm_90") == {"user0:a.h", "user0:hopper.h"}
    assert names("sm_80") == {"user0:a.h"}


def test_chain_names_each_step(tree):
    root = tree({"i/a.h": "\n#include <b.h>\n", "i/b.h": "//b\n"})
    for exact in (False, True):
        c = resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)
        b = next(h for h in c.headers if h.logical == "user0:b.h")
        assert [str(s) for s in b.chain] == ["<source>:1", "user0:a.h:2"]


# #include spelled in ways a line scan for '#include' misses; NVRTC reads every one
ODD_INCLUDES = {
    "digraph": '%:include "h.h"\n',
    "comment after '#'": '#/* why */include "h.h"\n',
    "comment across lines": '# /* a\n */ include "h.h"\n',
    "backslash-newline after '#'": '#\\\ninclude "h.h"\n',
    "form feed before '#'": '\f#include "h.h"\n',
    "comment before the name": '#include/**/"h.h"\n',
    "comment before '#'": '/**/#include "h.h"\n',
    "comment across lines before '#'": '/*\n*/#include "h.h"\n',
    "backslash-newline inside 'include'": '#inc\\\nlude "h.h"\n',
    "backslash-newline inside '%:'": '%\\\n:include "h.h"\n',
    "backslash-newline inside the name": '#include "h\\\n.h"\n',
    "backslash-newline before the name": '#include \\\n "h.h"\n',
    "comment across lines before the name": '#include /*\n*/ "h.h"\n',
    "text after the name": '%:include "h.h" junk\n',  # NVRTC only warns
    "'??/' in a comment at C++17 (no trigraph)": '// ??/\n%:include "h.h"\n',
    "a comment across lines after code": '__device__ int a; /*\n*/ #include "h.h"\n',
    "a carriage return after '#'": '#\rinclude "h.h"\n',
    "a quote in a skipped group": '#if 0\n1\'0 /*\n#endif\n%:include "h.h"\n// */\n',
    "two comments, one across lines": '/**/#include /*\n*/ "h.h"\n',
    "comments across lines on both sides": '#/*\n*/include /*\n*/ "h.h"\n',
    "a quote in a skipped group, a comment after '#'": '#if 0\n1\'/*\n#endif\n#/**/include"h.h"\n',
}


EXACT_MISSES = {
    "text after the name",
    "a quote in a skipped group",
    "a quote in a skipped group, a comment after '#'",
}


@pytest.mark.parametrize("name", sorted(ODD_INCLUDES))
@pytest.mark.parametrize("exact", [True, False])
def test_an_include_however_spelled_is_in_the_closure(tree, name, exact):
    """NVRTC reads the header (its static_assert fails), so the closure, and the key, hold it."""
    from conftest import bare_nvrtc

    if exact and name in EXACT_MISSES:
        pytest.skip("exact mode (pcpp, for deps --exact) reads this one otherwise; keys use fast")
    root = tree({"i/h.h": 'static_assert(false, "read");\n'})
    src = ODD_INCLUDES[name]
    assert "read" in bare_nvrtc(src, (f"-I{root / 'i'}",)).log
    closure = resolve(src, (f"-I{root / 'i'}",), exact=exact)
    assert [h.logical for h in closure.headers if h.root == "user0"] == ["user0:h.h"]


def test_dot_dot_goes_up_from_where_a_symlinked_directory_leads(tree):
    """sub -> x/y: '../h.h' in sub/a.h is x/h.h, as the system opens it (NVRTC reads it)."""
    from conftest import bare_nvrtc

    root = tree({"x/y/a.h": '#include "../h.h"\n', "x/h.h": 'static_assert(false, "read");\n'})
    (root / "sub").symlink_to(root / "x" / "y")
    src = '#include "sub/a.h"\n'
    assert "read" in bare_nvrtc(src, (f"-I{root}",)).log
    paths = {h.path for h in resolve(src, (f"-I{root}",)).headers}
    assert str(root / "x" / "h.h") in paths
