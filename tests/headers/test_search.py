"""Each search rule on a small synthetic tree, checked against gcc's own resolution (gcc -M)."""

import os
import shutil
import subprocess

import pytest
from conftest import nvrtc_defines

from cupy_rawcode.headers.closure import MissingHeaderError
from cupy_rawcode.headers.resolver import resolve

GCC = shutil.which("gcc")

# name -> (files, main source, -I dirs, -isystem dirs, expected relative paths read)
CASES = {
    "quoted looks in the includer's own directory first": (
        {"inc/x/a.h": '#include "b.h"\n', "inc/x/b.h": "//own\n", "inc/b.h": "//list\n"},
        "#include <x/a.h>\n",
        ["inc"],
        [],
        {"inc/x/a.h", "inc/x/b.h"},
    ),
    "quoted does not look in directories further up the stack": (
        {"main/y.h": "//wrong\n", "i1/x/a.h": '#include "y.h"\n', "i2/y.h": "//right\n"},
        "#include <x/a.h>\n",
        ["i1", "i2"],
        [],
        {"i1/x/a.h", "i2/y.h"},
    ),
    "angle skips the own directory": (
        {"i1/x/a.h": "#include <b.h>\n", "i1/x/b.h": "//own\n", "i2/b.h": "//list\n"},
        "#include <x/a.h>\n",
        ["i1", "i2"],
        [],
        {"i1/x/a.h", "i2/b.h"},
    ),
    "quoted from the main source uses its directory": (
        {"main/m.h": "//main dir\n", "i1/m.h": "//list\n"},
        '#include "m.h"\n',
        ["i1"],
        [],
        {"main/m.h"},
    ),
    "-I comes before -isystem": (
        {"i1/h.h": "//I\n", "s1/h.h": "//isystem\n"},
        "#include <h.h>\n",
        ["i1"],
        ["s1"],
        {"i1/h.h"},
    ),
    "-I order is kept": (
        {"i1/h.h": "//1\n", "i2/h.h": "//2\n"},
        "#include <h.h>\n",
        ["i2", "i1"],
        [],
        {"i2/h.h"},
    ),
    "include_next continues after the current directory": (
        {
            "i1/h.h": "#pragma once\n#include_next <h.h>\n",
            "i2/h.h": "#include_next <h.h>\n",
            "i3/h.h": "//last\n",
        },
        "#include <h.h>\n",
        ["i1", "i2", "i3"],
        [],
        {"i1/h.h", "i2/h.h", "i3/h.h"},
    ),
    "pragma once and guards read a file once": (
        {
            "i1/a.h": "#pragma once\n#include <g.h>\n",
            "i1/g.h": "#ifndef G\n#define G\n#include <a.h>\n#endif\n",
        },
        "#include <a.h>\n#include <a.h>\n#include <g.h>\n",
        ["i1"],
        [],
        {"i1/a.h", "i1/g.h"},
    ),
    "computed include": (
        {"i1/cfg.h": "#define SYS sys_a\n#define HDR <SYS/impl.h>\n", "i1/sys_a/impl.h": "//a\n"},
        "#include <cfg.h>\n#include HDR\n",
        ["i1"],
        [],
        {"i1/cfg.h", "i1/sys_a/impl.h"},
    ),
}

EXACT_CASES = {
    "__has_include picks the branch": (
        {
            "i1/yes.h": "//y\n",
            "i1/p.h": "#if __has_include(<yes.h>)\n#include <yes.h>\n#else\n#include <no.h>\n#endif\n",
        },
        "#include <p.h>\n",
        ["i1"],
        [],
        {"i1/p.h", "i1/yes.h"},
    ),
    "__has_include_next": (
        {
            "i1/h.h": "#if __has_include_next(<h.h>)\n#include_next <h.h>\n#endif\n",
            "i2/h.h": "//2\n",
        },
        "#include <h.h>\n",
        ["i1", "i2"],
        [],
        {"i1/h.h", "i2/h.h"},
    ),
    "conditions under user macros": (
        {
            "i1/a.h": "#if MODE == 2\n#include <two.h>\n#elif defined(OTHER)\n#include <other.h>\n#endif\n",
            "i1/two.h": "//2\n",
            "i1/other.h": "//o\n",
        },
        "#include <a.h>\n",
        ["i1"],
        [],
        {"i1/a.h", "i1/two.h"},
    ),
    "elifdef": (
        {
            "i1/a.h": "#ifdef NOPE\n#include <x.h>\n#elifdef MODE\n#include <two.h>\n#endif\n",
            "i1/two.h": "//2\n",
        },
        "#include <a.h>\n",
        ["i1"],
        [],
        {"i1/a.h", "i1/two.h"},
    ),
}


def _setup(tree, files, main):
    root = tree(files)
    (root / "main").mkdir(exist_ok=True)
    (root / "main" / "k.cu").write_text(main)
    return root


def _ours(root, main, inc, isys, exact):
    opts = []
    for d in inc:
        opts += ["-I", str(root / d)]
    for d in isys:
        opts += ["-isystem", str(root / d)]
    opts += ["-DMODE=2"]
    c = resolve(main, tuple(opts), exact=exact, source_dir=str(root / "main"), arch="sm_90")
    return {os.path.relpath(h.path, root) for h in c.headers}


def _gcc(root, inc, isys):
    cmd = [GCC, "-M", "-nostdinc", "-x", "c++", "-std=c++2b", "-DMODE=2"]
    for d in inc:
        cmd += ["-I", str(root / d)]
    for d in isys:
        cmd += ["-isystem", str(root / d)]
    out = subprocess.run(
        cmd + [str(root / "main" / "k.cu")], capture_output=True, text=True, check=True
    ).stdout
    deps = out.replace("\\\n", " ").split(":", 1)[1].split()
    return {os.path.relpath(p, root) for p in deps[1:]}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("exact", [False, True])
def test_rule(tree, name, exact):
    files, main, inc, isys, expected = CASES[name]
    root = _setup(tree, files, main)
    assert _ours(root, main, inc, isys, exact) == expected
    if GCC:
        assert _gcc(root, inc, isys) == expected


@pytest.mark.parametrize("name", sorted(EXACT_CASES))
def test_exact_rule(tree, name):
    files, main, inc, isys, expected = EXACT_CASES[name]
    root = _setup(tree, files, main)
    ours = expected
    if "__has_include_next" in name and not nvrtc_defines("__has_include_next"):
        ours = {"i1/h.h"}  # this NVRTC (13.5) has no __has_include_next: GCC's rule is not its
    assert _ours(root, main, inc, isys, True) == ours
    if GCC:
        assert _gcc(root, inc, isys) == expected
    # fast mode is a superset: it follows every branch
    assert _ours(root, main, inc, isys, False) >= expected


def test_no_source_dir_means_no_own_directory_for_main(tree):
    root = tree({"main/m.h": "//x\n"})
    with pytest.raises(MissingHeaderError):
        resolve('#include "m.h"\n', exact=True)
    assert resolve('#include "m.h"\n', exact=True, source_dir=str(root / "main")).headers


def test_header_sources_are_asked_lazily_in_policy_order():
    from cupy_rawcode.toolkit.discovery import choose_system_dirs

    asked = []
    wheel = {"cccl": ["/w/cccl"], "cuda": ["/w/cuda"], "curand": ["/w/curand"], "crt": ["/w/nvcc"]}
    offers = {"wheel": wheel, "nvrtc": {"cccl": ["/n"]}}

    def offer(source):
        asked.append(source)
        return offers.get(source, {})

    dirs = choose_system_dirs(("wheel", "nvrtc", "cupy"), offer, "/shim")
    assert [(d.tag, d.path, d.origin) for d in dirs] == [
        ("cccl", "/w/cccl", "wheel"),
        ("cuda", "/w/cuda", "wheel"),
        ("curand", "/w/curand", "wheel"),
        ("crt", "/w/nvcc", "wheel"),
        ("shim", "/shim", "package"),
    ]
    assert "nvrtc" not in asked  # never extracted when an earlier source has everything
    asked.clear()
    dirs = choose_system_dirs(("cupy", "nvrtc", "wheel"), offer, "/shim")
    assert [(d.tag, d.origin) for d in dirs] == [
        ("cccl", "nvrtc"),
        ("cuda", "wheel"),
        ("curand", "wheel"),
        ("crt", "wheel"),
        ("shim", "package"),
    ]


@pytest.mark.parametrize(
    "offers, expected",
    [
        # CUDA 13 wheels share one include directory: one root, not three
        (
            {"wheel": {"cuda": ["/cu13"], "curand": ["/cu13"], "crt": ["/cu13"]}},
            [("cuda", "/cu13", "wheel")],
        ),
        # a library only the toolkit has comes from there, after the wheel's runtime headers
        (
            {
                "wheel": {"cuda": ["/w/rt"], "curand": ["/w/rand"]},
                "toolkit": {"cuda": ["/tk"], "crt": ["/tk"]},
            },
            [("cuda", "/w/rt", "wheel"), ("curand", "/w/rand", "wheel"), ("crt", "/tk", "toolkit")],
        ),
        # CuPy's CCCL first; CUDA headers from the next source that has them
        (
            {
                "cupy": {"cccl": ["/c/libcudacxx", "/c/cub"]},
                "wheel": {"cccl": ["/w/cccl"], "cuda": ["/w/rt"]},
            },
            [
                ("cccl", "/c/libcudacxx", "cupy"),
                ("cccl", "/c/cub", "cupy"),
                ("cuda", "/w/rt", "wheel"),
            ],
        ),
        # without CuPy: the wheel's CCCL
        (
            {"cupy": {}, "wheel": {"cccl": ["/w/cccl"], "cuda": ["/w/rt"]}},
            [("cccl", "/w/cccl", "wheel"), ("cuda", "/w/rt", "wheel")],
        ),
    ],
)
def test_library_roots_come_from_the_first_source_that_has_them(offers, expected):
    from cupy_rawcode.toolkit.discovery import DEFAULT_SOURCES, choose_system_dirs

    dirs = choose_system_dirs(DEFAULT_SOURCES, offers, "/shim")
    assert [(d.tag, d.path, d.origin) for d in dirs] == expected + [("shim", "/shim", "package")]


def test_nvrtc_bundled_headers_source(monkeypatch, tmp_path):
    from cupy_rawcode.toolkit.discovery import BUNDLED_MIN, nvrtc_version, source_dirs

    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / "c"))
    if nvrtc_version() < BUNDLED_MIN:
        assert source_dirs("nvrtc") == {}  # older NVRTC: the source offers nothing
        return
    dirs = source_dirs("nvrtc")
    assert os.path.isfile(os.path.join(dirs["cccl"][0], "cub", "block", "block_reduce.cuh"))
    assert os.path.isfile(os.path.join(dirs["cuda"][0], "cuda_fp16.h"))
    from conftest import corpus

    from cupy_rawcode.key.request import make_request
    from cupy_rawcode.orchestrator.compiling import compile_request

    monkeypatch.setenv("CUPY_RAWCODE_HEADER_SOURCES", "nvrtc")
    r = compile_request(make_request(corpus("block_reduce.cu"), arch="sm_90"))
    assert r.code[:4] == b"\x7fELF" and r.header_count > 100


# A -I holding a CCCL of its own, as a CUDA 12 toolkit's include/ does: CuPy puts its CCCL's -I
# before the user's, so its CCCL answers; a header only the user's tree has still comes from it
OLD_CCCL = {
    "old/cuda/std/type_traits": '#error "the -I CCCL\'s type_traits"\n',
    "old/cub/cub.cuh": '#error "the -I CCCL\'s cub"\n',
    "old/cuda/std/only_here.h": "// a header the package's CCCL lacks\n",
}


@pytest.mark.parametrize("exact", [False, True])
def test_the_package_cccl_comes_before_a_user_cccl(tree, exact):
    root = tree(OLD_CCCL)
    main = "#include <cuda/std/type_traits>\n#include <cuda/std/only_here.h>\n"
    closure = resolve(main, (f"-I{root / 'old'}",), exact=exact)
    tags = {h.logical.split(":", 1)[1]: h.logical.split(":", 1)[0] for h in closure.headers}
    assert tags["cuda/std/type_traits"] == "cccl"
    assert tags["cuda/std/only_here.h"] == "user0"


def test_the_search_list_is_cupys_cccl_then_user_then_the_other_roots(tree):
    from cupy_rawcode.headers.search import make_context

    root = tree({"a/x.h": "", "b/y.h": ""})
    ctx = make_context((f"-I{root / 'a'}", "-isystem", str(root / "b")))
    tags = [d.tag for d in ctx.dirs]
    first_user = tags.index("user0")
    assert set(tags[:first_user]) == {"cccl"} and tags[first_user : first_user + 2] == [
        "user0",
        "isys0",
    ]
    assert "cccl" not in tags[first_user:] and tags[-1] == "shim"


# a missing include -> whether fast mode calls it conditional (NVRTC may never reach it)
MISSING_REACHED = {
    "at the top": ("#include <gone.h>\n", False),
    "inside #if": ("#if X\n#include <gone.h>\n#endif\n", True),
    "after the #if closed": ("#if X\n#endif\n#include <gone.h>\n", False),
    "inside a guard only": ("#ifndef G\n#define G\n#include <gone.h>\n#endif\n", False),
    "inside #if within a guard": (
        "#ifndef G\n#define G\n#ifdef Y\n#include <gone.h>\n#endif\n#endif\n",
        True,
    ),
    "before the guard's #define": ("#ifndef G\n#include <gone.h>\n#define G\n#endif\n", True),
    "a guard of another name": ("#ifndef G\n#define H\n#include <gone.h>\n#endif\n", True),
    "an extra #endif does not go below zero": ("#endif\n#if X\n#include <gone.h>\n#endif\n", True),
    "a directive not at a line start": ("int a; #if X\n#include <gone.h>\n", False),
    # no directive at all, to NVRTC: inside a comment or a raw string
    "inside a block comment": ("/*\n#include <gone.h>\n*/\n", True),
    "inside a block comment, indented": ("/* old:\n   #include <gone/deep.h>\n*/\n", True),
    "inside a line comment a backslash goes on": ("// old \\\n#include <gone.h>\n", True),
    "inside a raw string": ('const char* s = R"(\n#include "gone.h"\n)";\n', True),
    "inside a raw string with a delimiter": ('auto s = R"xy(\n#include <gone.h>\n)xy";\n', True),
    "after a block comment closed": ("/*\n*/\n#include <gone.h>\n", False),
    "after a string holding a comment's start": ('auto s = "/*";\n#include <gone.h>\n', False),
}


@pytest.mark.parametrize("name", MISSING_REACHED)
def test_a_missing_include_is_conditional_only_inside_if(name):
    source, conditional = MISSING_REACHED[name]
    missing = resolve(source).missing
    assert [m.conditional for m in missing] == [conditional]
    if not conditional:
        with pytest.raises(MissingHeaderError):
            resolve(source).raise_for_missing()


# a header only a computed include or a probe reached (NVRTC may never open it: every value of
# a macro is followed): name -> (files under the -I directory, main source)
SELECT = "#if defined(USE_B)\n#define IMPL <b/impl.h>\n#else\n#define IMPL <a/impl.h>\n#endif\n"
REACHED_UNCERTAINLY = {
    "one value of a computed include": (
        {"sel.h": SELECT, "a/impl.h": "int a;\n", "b/impl.h": "#include <gone.h>\n"},
        "#include <sel.h>\n#include IMPL\n",
    ),
    "a header below one a computed include reached": (
        {
            "sel.h": SELECT,
            "a/impl.h": "int a;\n",
            "b/impl.h": "#include <b/more.h>\n",
            "b/more.h": "#include <gone.h>\n",
        },
        "#include <sel.h>\n#include IMPL\n",
    ),
    "a header a __has_include probed": (
        {"p.h": "#include <gone.h>\n"},
        "#if __has_include(<p.h>) && 0\n#endif\n",
    ),
}


@pytest.mark.parametrize("name", REACHED_UNCERTAINLY)
def test_a_missing_include_of_a_header_nvrtc_may_never_open_is_no_error(tmp_path, name):
    files, source = REACHED_UNCERTAINLY[name]
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    closure = resolve(source, (f"-I{tmp_path}",))
    assert [m.name for m in closure.missing] == ["gone.h"]
    assert all(m.conditional for m in closure.missing)
    closure.raise_for_missing()  # NVRTC decides


def test_many_missing_includes_read_the_conditionals_once(monkeypatch):
    """Each missing include asks whether it sits in #if: the file's conditionals are read at
    the first question only (it was once a rescan per question: 6 s for 5,000 of them)."""
    from cupy_rawcode.headers import scan

    reads = []
    real = scan._Marks.of
    monkeypatch.setattr(scan._Marks, "of", lambda data: reads.append(1) or real(data))
    source = "#if X\n" + "".join(f"#include <gone_{i}.h>\n" for i in range(300)) + "#endif\n"
    missing = resolve(source).missing
    assert len(missing) == 300 and all(m.conditional for m in missing)
    assert len(reads) == 1


# a header whose #include_next is reached from two places of the search list: name -> (files,
# -I directories, the marked header NVRTC reads)
NEXT_TWICE = {
    "a directory listed twice": (
        {"i0/b.h": "#include_next <b.h>\n", "i1/b.h": 'static_assert(false, "READ");\n'},
        ["i0", "i0/", "i1"],
        "i1/b.h",
    ),
    "a wrapper reached by a quoted include of its sibling": (
        {
            "i0/a.h": '#include "b.h"\n',
            "i0/b.h": "#include_next <b.h>\n",
            "i1/b.h": 'static_assert(false, "READ");\n',
        },
        ["i0", "i1"],
        "i1/b.h",
    ),
}


@pytest.mark.parametrize("name", NEXT_TWICE)
def test_an_include_next_reached_from_two_places_is_followed_from_both(name, tree):
    from conftest import bare_nvrtc

    files, dirs, read = NEXT_TWICE[name]
    root = tree(files)
    options = tuple(f"-I{root / d}" for d in dirs)
    source = "#include <a.h>\n" if "i0/a.h" in files else "#include <b.h>\n"
    assert "READ" in bare_nvrtc(source, options).log
    assert str(root / read) in {h.path for h in resolve(source, options).headers}
