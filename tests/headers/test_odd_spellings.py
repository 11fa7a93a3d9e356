"""Includes spelled so that a line scan reads them wrong, each checked against NVRTC itself: it
reads the header (its static_assert or #error shows in the log), so the closure, and the key,
hold it. Found by a differential fuzzer (A: '//' in a name after a comment; B: an odd include
next to another of the same name; F: a backslash-newline inside a header name)."""

import pytest
from conftest import bare_nvrtc

from cupy_rawcode.headers.resolver import resolve

READ = 'static_assert(false, "read");\n'
NEEDS17 = "#if __cplusplus < 201703L\n#error needs C++17\n#endif\n"

# A: '//' inside a header name, with a comment before the name or before the '#'
SLASHES = {
    "comment before an angled name": ("#include /**/ <sub//h.h>\n", "sub/h.h"),
    "comment before a quoted name": ('#include /**/ "sub//h.h"\n', "sub/h.h"),
    "comment before '#'": ("/**/#include <.//h.h>\n", "h.h"),
    "comment across lines before the name": ("#include /*\n*/ <sub//h.h>\n", "sub/h.h"),
    "comment after '#'": ("#/**/include <sub//h.h>\n", "sub/h.h"),
    "a digraph and a comment": ("%:include /**/ <sub//h.h>\n", "sub/h.h"),
    "a comment after the name too": ("#include /**/ <sub//h.h> // <x.h>\n", "sub/h.h"),
}

# F: a backslash-newline inside a header name, before a character that no name starts with
SPLIT_NAMES = {
    "quoted, before '/'": ('#include "sub\\\n/h.h"\n', "sub/h.h"),
    "quoted, before '-'": ('#include "a\\\n-b.h"\n', "a-b.h"),
    "angled, before '/'": ("#include <sub\\\n/h.h>\n", "sub/h.h"),
    "quoted, after '/'": ('#include "sub/\\\nh.h"\n', "sub/h.h"),
    "angled, after '-'": ("#include <a-\\\nb.h>\n", "a-b.h"),
    "twice in one name": ('#include "sub\\\n/\\\n-b.h"\n', "sub/-b.h"),
}


@pytest.mark.parametrize("name", sorted({**SLASHES, **SPLIT_NAMES}))
def test_a_header_name_nvrtc_reads_is_in_the_closure(tree, name):
    """NVRTC reads the header however its name is spelled, so the closure holds it."""
    src, header = {**SLASHES, **SPLIT_NAMES}[name]
    root = tree({f"i/{header}": READ})
    options = (f"-I{root / 'i'}",)
    assert "read" in bare_nvrtc(src, options).log
    closure = resolve(src, options)
    assert [h.logical for h in closure.headers] == [f"user0:{header}"]
    assert not closure.unresolved


# B1: a header that includes b.h twice, once spelled oddly: the two find different files
TWICE = {
    "a digraph, angled after quoted": '#include "b.h"\n%:include <b.h>\n',
    "a comment after '#'": '#include "b.h"\n#/**/include <b.h>\n',
    "a backslash-newline after '#'": '#include "b.h"\n#\\\ninclude <b.h>\n',
    "a comment before '#'": '#include "b.h"\n/**/#include <b.h>\n',
    "a comment across lines before '#'": 'int v; /*\n*/ #include <b.h>\n#include "b.h"\n',
    "a backslash-newline before the name": '#include "b.h"\n#include \\\n <b.h>\n',
}


@pytest.mark.parametrize("name", sorted(TWICE))
def test_an_odd_include_next_to_another_of_its_name_is_in_the_closure(tree, name):
    """a.h's quoted "b.h" finds i0/b.h (a.h's own directory), its angled <b.h> finds i1/b.h
    (first on the path): NVRTC reads both, however the second include is spelled."""
    root = tree({"i0/a.h": TWICE[name], "i0/b.h": READ, "i1/b.h": READ})
    options = (f"-I{root / 'i1'}", f"-I{root / 'i0'}")
    log = bare_nvrtc("#include <a.h>\n", options).log
    assert str(root / "i0" / "b.h") in log and str(root / "i1" / "b.h") in log
    closure = resolve("#include <a.h>\n", options)
    assert {h.path for h in closure.headers} == {
        str(root / "i0" / "a.h"),
        str(root / "i0" / "b.h"),
        str(root / "i1" / "b.h"),
    }


# B2: the same header twice, a dead copy spelled plainly and a live one spelled oddly
DEAD_AND_LIVE = {
    "a digraph": '#if 0\n#include "n.h"\n#endif\n%:include "n.h"\n',
    "a comment after '#'": '#if 0\n#include "n.h"\n#endif\n#/**/include "n.h"\n',
    "a backslash-newline inside 'include'": '#if 0\n#include "n.h"\n#endif\n#inc\\\nlude "n.h"\n',
    "the odd one first, dead": '#if 0\n%:include "n.h"\n#endif\n%:include "n.h"\n',
    "in a header": '#include "top.h"\n',
}


@pytest.mark.parametrize("name", sorted(DEAD_AND_LIVE))
def test_a_live_odd_include_raises_the_floor(tree, name):
    """At C++14 NVRTC reaches n.h through the live include and stops at its #error: so the
    floor the closure asks for is C++17, whatever dead copy of the include stands before it."""
    src = DEAD_AND_LIVE[name]
    top = DEAD_AND_LIVE["a digraph"]
    root = tree({"i/n.h": NEEDS17, "i/top.h": top})
    options = (f"-I{root / 'i'}", "-std=c++14")
    assert "needs C++17" in bare_nvrtc(src, options).log
    closure = resolve(src, options)
    assert closure.floor.year == 2017
