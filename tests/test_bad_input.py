import os

import pytest

from cupy_rawcode.headers.closure import MissingHeaderError, ResolveError
from cupy_rawcode.headers.resolver import resolve
from cupy_rawcode.key.request import cache_key


def test_missing_header_names_header_chain_and_dirs(tree):
    root = tree({"i/a.h": "// one\n#include <b.h>\n", "i/b.h": '\n\n#include "gone.h"\n'})
    for exact in (True, False):
        with pytest.raises(MissingHeaderError) as e:
            c = resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)
            c.raise_for_missing()
        msg = str(e.value)
        assert '"gone.h"' in msg
        assert "user0:b.h:3" in msg and "user0:a.h:2" in msg and "<source>:1" in msg
        assert str(root / "i") in msg


def test_missing_header_before_compile_through_cache_key(tree):
    with pytest.raises(MissingHeaderError, match="nothere.h"):
        cache_key("#include <nothere.h>\n", arch="sm_90")


def test_conditional_missing_is_not_an_error_in_fast_mode(tree):
    root = tree({"i/a.h": "#ifdef _WIN32\n#include <windows.h>\n#endif\n"})
    c = resolve("#include <a.h>\n", ("-I", str(root / "i")))
    c.raise_for_missing()
    assert [m.name for m in c.missing] == ["windows.h"]


def test_unguarded_cycle_terminates(tree):
    root = tree({"i/a.h": "#include <b.h>\n", "i/b.h": "#include <a.h>\n"})
    c = resolve("#include <a.h>\n", ("-I", str(root / "i")))
    assert {h.logical for h in c.headers} == {"user0:a.h", "user0:b.h"}
    with pytest.raises(ResolveError, match="nested too deeply"):
        resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=True)


def test_non_utf8_header_names_file_and_line(tree):
    root = tree({"i/a.h": "// fine\n"})
    (root / "i" / "bad.h").write_bytes(b"// ok\n// caf\xe9\n")
    (root / "i" / "a.h").write_text("#include <bad.h>\n")
    for exact in (False, True):
        with pytest.raises(ResolveError) as e:
            resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)
        assert "bad.h:2" in str(e.value) and "UTF-8" in str(e.value)


def test_unreadable_header(tree, monkeypatch):
    root = tree({"i/a.h": "//x\n"})
    real_open, real_os_open = open, os.open

    def denying(real):
        def deny(path, *a, **k):
            if str(path).endswith("a.h"):
                raise PermissionError(13, "Permission denied")
            return real(path, *a, **k)

        return deny

    monkeypatch.setattr("builtins.open", denying(real_open))  # (root ignores chmod)
    monkeypatch.setattr(os, "open", denying(real_os_open))
    for exact in (False, True):
        with pytest.raises(ResolveError, match="cannot read .*a.h"):
            resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=exact)


def test_unterminated_if(tree):
    root = tree({"i/a.h": "#if 1\n"})
    with pytest.raises(ResolveError, match="unterminated"):
        resolve("#include <a.h>\n", ("-I", str(root / "i")), exact=True)
