"""Where the cache lives and its bound: one value (store/layout.CacheLocation) resolved from
configuration in one place (cache_location), which every module that reads or writes the cache
directory asks; a ``cache_dir=`` given to a compile (layout.using_cache_dir) takes the place of
the environment's directory, and an empty variable counts as unset."""

import ast
from pathlib import Path

import pytest
from conftest import ROOT

from cupy_rawcode.ground import config
from cupy_rawcode.store import layout
from cupy_rawcode.store.layout import CacheLocation, cache_location

DEFAULT = config.DEFAULT_MAX_SIZE

# (CUPY_RAWCODE_CACHE_DIR, XDG_CACHE_HOME, CUPY_RAWCODE_CACHE_MAX_SIZE, the compile's
#  cache_dir= (using_cache_dir), expected directory ("~": $HOME, "T": the test's directory),
#  expected bound)
RESOLUTION = [
    (None, None, None, None, "~/.cache/cupy-rawcode", DEFAULT),
    ("", "", "", None, "~/.cache/cupy-rawcode", DEFAULT),  # empty: unset
    (None, "T/xdg", None, None, "T/xdg/cupy-rawcode", DEFAULT),
    (None, "~/xdg", None, None, "~/xdg/cupy-rawcode", DEFAULT),
    ("T/env", "T/xdg", None, None, "T/env", DEFAULT),  # the variable before XDG
    ("~/env", None, None, None, "~/env", DEFAULT),
    ("", "T/xdg", None, None, "T/xdg/cupy-rawcode", DEFAULT),
    (None, None, "2G", None, "~/.cache/cupy-rawcode", 2 << 30),
    (None, None, "0", None, "~/.cache/cupy-rawcode", 0),  # 0: no bound
    ("T/env", "T/xdg", "300k", "T/given", "T/given", 300 << 10),  # the compile's first
    ("T/env", None, None, "~/given", "~/given", DEFAULT),
]


def _place(text, tmp_path: Path, home: Path):
    """``text`` with a leading "~" or "T" standing for $HOME or the test's directory."""
    if text is None or text[:1] not in ("~", "T"):
        return text
    return str((home if text[0] == "~" else tmp_path) / text[2:])


@pytest.mark.parametrize("env_dir, xdg, max_size, given, expected, bound", RESOLUTION)
def test_the_cache_location_is_resolved_from_configuration(
    tmp_path, monkeypatch, env_dir, xdg, max_size, given, expected, bound
):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for name, value in [
        ("CUPY_RAWCODE_CACHE_DIR", env_dir),
        ("XDG_CACHE_HOME", xdg),
        ("CUPY_RAWCODE_CACHE_MAX_SIZE", max_size),
    ]:
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:  # "~" is left for the resolution to expand
            monkeypatch.setenv(name, value if value[:1] == "~" else _place(value, tmp_path, home))
    given_dir = given if given is None or given[:1] == "~" else _place(given, tmp_path, home)
    with layout.using_cache_dir(given_dir):
        location = cache_location()
        assert location == CacheLocation(Path(_place(expected, tmp_path, home)), bound)
        assert layout.cache_dir() == location.path  # the same answer by either name
    assert layout.bound(location.path) == (bound or None)


def test_a_directory_given_as_an_argument_is_used_with_the_configured_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_MAX_SIZE", "5M")
    with layout.using_cache_dir(tmp_path / "compile's"):
        assert cache_location(str(tmp_path / "store's")) == CacheLocation(
            tmp_path / "store's", 5 << 20
        )


def test_a_bound_given_in_code_holds_over_the_configured_one(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_MAX_SIZE", "5M")
    root = tmp_path / "bounded"
    layout.set_bound(root, 1 << 20)
    try:
        assert layout.bound(root) == 1 << 20
        assert layout.bound(tmp_path / "other") == 5 << 20
    finally:
        layout._bounds.pop(str(root))


def test_only_the_location_reads_the_cache_directory_and_bound_from_configuration():
    """Every other module asks cache_location: no second reading of the two variables."""
    readers = {"cupy_rawcode/ground/config.py", "cupy_rawcode/store/layout.py"}
    calls = []
    for path in sorted((ROOT / "cupy_rawcode").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in readers:
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in ("cache_dir", "cache_max_size", "cache_dir_variable"):
                    calls.append(f"{rel}:{node.lineno}: {name}()")
    assert calls == []


def test_an_empty_cache_directory_is_refused_not_taken_for_the_working_directory():
    from cupy_rawcode import make_store

    for call in (lambda: cache_location(""), lambda: make_store("")):
        with pytest.raises(ValueError, match=r"^cache_dir='' names no directory"):
            call()
