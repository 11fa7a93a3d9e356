"""Each pcpp 1.30 defect (facts.md) fixed in exact mode, one test each."""

from cupy_rawcode.headers.resolver import resolve


def _reads(tree, header_text, extra=None):
    files = {"i/a.h": header_text, "i/yes.h": "", "i/no.h": ""}
    files.update(extra or {})
    root = tree(files)
    c = resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=True)
    assert not c.errors, c.errors
    return {h.logical.split(":")[1] for h in c.headers} - {"a.h"}


def test_paste_with_va_args_leading_whitespace(tree):
    text = (
        "#define CAT(a, ...) a##__VA_ARGS__\n#define V_12 1\n"
        "#if CAT(V_, 12)\n#include <yes.h>\n#else\n#include <no.h>\n#endif\n"
    )
    assert _reads(tree, text) == {"yes.h"}


def test_ll_and_ull_suffixes(tree):
    text = "#define ISA 870ULL\n#if ISA >= 800LL && 1ull\n#include <yes.h>\n#else\n#include <no.h>\n#endif\n"
    assert _reads(tree, text) == {"yes.h"}


def test_has_include_is_evaluated(tree):
    text = (
        "#ifdef __has_include\n#if __has_include(<yes.h>) && !__has_include(<absent.h>)\n"
        "#include <yes.h>\n#endif\n#else\n#include <no.h>\n#endif\n"
    )
    assert _reads(tree, text) == {"yes.h"}


def test_has_include_through_a_macro(tree):
    text = "#define HAS(x) __has_include(x)\n#if HAS(<yes.h>)\n#include <yes.h>\n#else\n#include <no.h>\n#endif\n"
    assert _reads(tree, text) == {"yes.h"}


def test_va_opt(tree):
    text = (
        "#define F(...) 1 __VA_OPT__(+ 1)\n#if F() == 1 && F(x) == 2\n#include <yes.h>\n"
        "#else\n#include <no.h>\n#endif\n"
    )
    assert _reads(tree, text) == {"yes.h"}


def test_true_false_in_if(tree):
    assert _reads(
        tree, "#if true && !false\n#include <yes.h>\n#else\n#include <no.h>\n#endif\n"
    ) == {"yes.h"}


def test_include_next(tree):
    root = tree({"j/yes.h": "#include_next <yes.h>\n", "i/yes.h": "//real\n"})
    c = resolve("#include <yes.h>\n", ("-I", str(root / "j"), "-I", str(root / "i")), exact=True)
    assert [h.logical for h in c.headers] == ["user0:yes.h", "user1:yes.h"]


def test_corpus_evaluates_without_errors():
    from conftest import corpus

    c = resolve(corpus("block_reduce.cu"), exact=True, arch="sm_90")
    assert c.errors == ()
