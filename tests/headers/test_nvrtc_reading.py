"""Where the resolver read a name, an option or a line otherwise than NVRTC does (a differential
review against bare NVRTC 12.9): each row is a small tree, what NVRTC reads there, and ours."""

import os

import pytest
from conftest import bare_nvrtc

from cupy_rawcode.headers.options import parse_options
from cupy_rawcode.headers.resolver import resolve

# name -> (files, symbolic links (link -> target), main source, -I dirs, the files NVRTC reads)
DOTDOT = {
    "an angled name's '..' after a linked directory": (
        {"inc/x.h": "//lexical\n", "far/x.h": "//physical\n", "far/deep/.keep": ""},
        {"inc/sub": "far/deep"},
        "#include <sub/../x.h>\n",
        ["inc"],
        {"far/x.h"},
    ),
    "a quoted name's '..' after a linked directory": (
        {"inc/x.h": "//lexical\n", "far/x.h": "//physical\n", "far/deep/.keep": ""},
        {"inc/sub": "far/deep"},
        '#include "sub/../x.h"\n',
        ["inc"],
        {"far/x.h"},
    ),
    "a header's quoted include from a header reached so": (
        {
            "inc/x.h": '#include "y.h"\n',
            "inc/y.h": "//lexical\n",
            "far/x.h": '#include "y.h"\n',
            "far/y.h": "//physical\n",
            "far/deep/.keep": "",
        },
        {"inc/sub": "far/deep"},
        "#include <sub/../x.h>\n",
        ["inc"],
        {"far/x.h", "far/y.h"},
    ),
}


def _link_tree(tree, files, links):
    root = tree(files)
    for link, target in links.items():
        os.symlink(root / target, root / link)
    return root


@pytest.mark.parametrize("name", sorted(DOTDOT))
@pytest.mark.parametrize("exact", [False, True])
def test_a_dotdot_past_a_symbolic_link_reads_where_it_leads(tree, name, exact):
    files, links, main, inc, expected = DOTDOT[name]
    root = _link_tree(tree, files, links)
    opts = tuple(f"-I{root / d}" for d in inc)
    closure = resolve(main, opts, exact=exact, arch="sm_90")
    assert {
        os.path.relpath(h.path, root) for h in closure.headers if h.path.startswith(str(root))
    } == expected
    # named by its path: the root and name it was looked up under say another file
    assert all(h.root == "abs" for h in closure.headers if "far" in h.path)


# name -> (how the -I is spelled, with {root}; what NVRTC searches, relative to the root)
INCLUDE_DIRS = {
    "absolute, through a link then '..'": ("{root}/lnk/..", "a/real"),
    "relative, through a link then '..'": ("lnk/..", "a/real"),
    "'..' after a name that is no directory": ("{root}/nosuch/..", "nosuch/.."),
}


@pytest.mark.parametrize("name", sorted(INCLUDE_DIRS))
def test_an_include_dir_with_dotdot_is_read_as_the_system_reads_it(tree, name):
    spelled, searched = INCLUDE_DIRS[name]
    root = _link_tree(tree, {"a/real/inc2/.keep": ""}, {"lnk": "a/real/inc2"})
    opts = parse_options((f"-I{spelled.format(root=root)}",), cwd=str(root))
    assert opts.include_dirs == (os.path.join(str(root), searched),)


GUARD = "#if !defined(X)\n#error X is undefined\n#endif\n"
UNGUARD = "#if defined(X)\n#error X is defined\n#endif\n"

# NVRTC 12.9 reads '-I=DIR', '-D=X' and '-U=X' as '-I DIR', '-D X', '-U X'
# name -> (options, what the package makes of them, the source NVRTC must accept with them)
EQUALS = {
    "-I=DIR": (("-I=/opt/inc",), ("include_dirs", ("/opt/inc",)), None),
    "-D=X": (("-D=X",), ("macros", (("X", "1"),)), GUARD),
    "-D=X=2": (("-D=X=2",), ("macros", (("X", "2"),)), GUARD),
    "-U=X after -DX": (("-DX", "-U=X"), ("macros", (("X", None),)), UNGUARD),
}


@pytest.mark.parametrize("name", sorted(EQUALS))
def test_equals_spellings_are_read_as_nvrtc_reads_them(name):
    options, (field, expected), source = EQUALS[name]
    assert getattr(parse_options(options), field) == expected
    if source is not None:  # NVRTC itself agrees
        assert bare_nvrtc(source, options).ok


# -no-source-include: name -> (files, main source, options, the header that defines VALUE)
NO_SOURCE = {
    "the main source's quoted include skips its directory": (
        {"src/x.h": "//source dir\n", "inc/x.h": "//-I\n"},
        '#include "x.h"\n',
        (),
        {"inc/x.h"},
    ),
    "a header's quoted include skips its directory": (
        {"inc/sub/h.h": '#include "y.h"\n', "inc/sub/y.h": "//own\n", "inc/y.h": "//-I\n"},
        "#include <sub/h.h>\n",
        (),
        {"inc/sub/h.h", "inc/y.h"},
    ),
    "an -include's quoted include skips its directory": (
        {"cwd/p.h": '#include "y.h"\n', "cwd/y.h": "//own\n", "inc/y.h": "//-I\n"},
        "",
        ("-include", "p.h"),
        {"cwd/p.h", "inc/y.h"},
    ),
}


@pytest.mark.parametrize("spelling", ["-no-source-include", "--no-source-include"])
@pytest.mark.parametrize("name", sorted(NO_SOURCE))
@pytest.mark.parametrize("exact", [False, True])
def test_no_source_include_skips_the_includers_directory(tree, monkeypatch, spelling, name, exact):
    files, main, options, expected = NO_SOURCE[name]
    root = tree({**files, "cwd/.keep": ""})
    monkeypatch.chdir(root / "cwd")  # where NVRTC looks for a -include (it still does)
    opts = (f"-I{root / 'inc'}", spelling, *options)
    closure = resolve(main, opts, exact=exact, source_dir=str(root / "src"), arch="sm_90")
    assert {
        os.path.relpath(h.path, root) for h in closure.headers if h.path.startswith(str(root))
    } == expected


# a computed include whose name NVRTC builds from a value it gives itself
NAMED = "#define S2(x) #x\n#define S(x) S2(x)\n#define C2(a, b) a##b\n#define C(a, b) C2(a, b)\n"
PREDEFINED = {
    "__CUDA_ARCH__": "#include S(C(cfg_, __CUDA_ARCH__).h)\n",
    "__CUDACC_VER_MAJOR__": "#include S(C(v, __CUDACC_VER_MAJOR__).h)\n",
    "CUDART_VERSION": "#include S(C(rt, CUDART_VERSION).h)\n",
    "__LINE__": "#include S(C(line, __LINE__).h)\n",
    "through a macro of the source": "#define ARCH __CUDA_ARCH__\n#include S(C(cfg_, ARCH).h)\n",
}


@pytest.mark.parametrize("name", sorted(PREDEFINED))
def test_a_computed_include_from_an_nvrtc_value_is_unresolved(tree, name):
    root = tree({"pc/cfg_900.h": "", "pc/v12.h": "", "pc/v13.h": "", "pc/line5.h": ""})
    closure = resolve(NAMED + PREDEFINED[name], (f"-I{root / 'pc'}",))
    assert len(closure.unresolved) == 1  # never cached: UnresolvedIncludeWarning
