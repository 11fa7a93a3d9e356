"""Configuration (config.py): every CUPY_RAWCODE_* variable is checked on every code path, the
first time any of them is read; a bad value or an unknown name is a ValueError naming it and
listing what is accepted; values mean what ccache users expect (a size bound of 0: no bound)."""

import ast
import re

import pytest
from conftest import ROOT, recounts_done

import cupy_rawcode
from cupy_rawcode import cli
from cupy_rawcode.ground import config
from cupy_rawcode.key.request import cache_key
from cupy_rawcode.store import layout
from cupy_rawcode.store.directory import DirectoryStore

SMALL = 'extern "C" __global__ void k(int* a) { a[0] = 1; }\n'
KEY_READS = {"CUPY_RAWCODE_HEADER_SOURCES", "CUPY_RAWCODE_STRIP", "CUPY_RAWCODE_CUPY_OPTIONS"}

# (variable, bad value, what the message says after "NAME='value' ")
BAD = [
    (
        "CUPY_RAWCODE_MEMORY_ENTRIES",
        "-5",
        "is not a number of in-memory entries (accepted: a whole",
    ),
    ("CUPY_RAWCODE_MEMORY_ENTRIES", "many", "(accepted: a whole number >= 0; 0 keeps none)"),
    ("CUPY_RAWCODE_CACHE_MAX_SIZE", "lots", "is not a size (accepted: a byte count"),
    ("CUPY_RAWCODE_CACHE_MAX_SIZE", "-1G", "is not a size"),
    ("CUPY_RAWCODE_OVERLAP", "maybe", "is not a boolean (accepted: 1, true, yes, on, 0, false"),
    ("CUPY_RAWCODE_STRIP", "2", "is not a boolean"),
    ("CUPY_RAWCODE_CUPY_OPTIONS", "yes please", "is not a boolean"),
    ("CUPY_RAWCODE_DUMP_SOURCE", "x", "is not a boolean"),
    ("CUPY_RAWCODE_PCH", "sometimes", "is not a PCH mode (accepted: auto, or a boolean"),
    ("CUPY_RAWCODE_WORKERS", "many", "is not a whole number of worker processes (accepted"),
    ("CUPY_RAWCODE_REDIS_URL", "localhost:6379", "is not a Redis URL (accepted: redis://"),
    ("CUPY_RAWCODE_REDIS_TTL", "0", "is not a whole number of seconds (accepted: a whole"),
    ("CUPY_RAWCODE_REDIS_TTL", "soon", "is not a whole number of seconds"),
    ("CUPY_RAWCODE_REDIS_TIMEOUT", "-1", "is not a number of seconds (accepted: a number > 0)"),
    ("CUPY_RAWCODE_REDIS_TIMEOUT", "nan", "is not a number of seconds"),
    ("CUPY_RAWCODE_HEADER_SOURCES", "wheels", "unknown header source 'wheels' (accepted: a"),
    ("CUPY_RAWCODE_HEADER_SOURCES", "cccl=", "header source 'cccl=' is not KIND=DIR"),
]


def _through_a_path_that_does_not_read(variable: str, tmp_path) -> None:
    """Key a source (reads the key's variables), or make a store (reads the size bound)."""
    if variable in KEY_READS:
        DirectoryStore(tmp_path / "c")
    else:
        cache_key(SMALL, arch="sm_90")


@pytest.mark.parametrize("variable, value, says", BAD)
def test_a_bad_value_is_refused_on_a_path_that_does_not_read_it(
    monkeypatch, tmp_path, variable, value, says
):
    recounts_done()  # an earlier test's background recount reads the configuration too
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(config, "_validated", False)  # validated again at the first read, here
    with pytest.raises(ValueError) as e:
        _through_a_path_that_does_not_read(variable, tmp_path)
    assert f"{variable}={value!r}" in str(e.value) and says in str(e.value)


@pytest.mark.parametrize(
    "variable, suggestion",
    [
        ("CUPY_RAWCODE_CACHE_SIZE", "CUPY_RAWCODE_CACHE_MAX_SIZE"),
        ("CUPY_RAWCODE_STRIPPING", "CUPY_RAWCODE_STRIP"),
        ("CUPY_RAWCODE_REDIS_TTL_S", "CUPY_RAWCODE_REDIS_TTL"),
        ("CUPY_RAWCODE_XYZZY", None),
    ],
)
def test_an_unknown_variable_is_refused_with_the_closest_name(monkeypatch, variable, suggestion):
    monkeypatch.setenv(variable, "1")
    with pytest.raises(ValueError) as e:
        cache_key(SMALL, arch="sm_90")
    msg = str(e.value)
    assert msg.startswith(f"unknown environment variable {variable}")
    assert (f"(did you mean {suggestion}?)" in msg) == (suggestion is not None)
    assert "cupy-rawcode reads CUPY_RAWCODE_CACHE_DIR, " in msg  # every known name, listed


def test_every_problem_is_listed_at_once(monkeypatch):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "maybe")
    monkeypatch.setenv("CUPY_RAWCODE_PCH", "sometimes")
    with pytest.raises(ValueError) as e:
        cache_key(SMALL, arch="sm_90")
    assert "CUPY_RAWCODE_OVERLAP='maybe'" in str(e.value)
    assert "CUPY_RAWCODE_PCH='sometimes'" in str(e.value)


def test_a_negative_memory_size_fails_the_compile_naming_the_variable(monkeypatch):
    """It used to make every compile raise KeyError('dictionary is empty')."""
    monkeypatch.setenv("CUPY_RAWCODE_MEMORY_ENTRIES", "-5")
    with pytest.raises(ValueError, match=r"^CUPY_RAWCODE_MEMORY_ENTRIES='-5' is not a number"):
        cupy_rawcode.compile(SMALL, arch="sm_90")
    monkeypatch.delenv("CUPY_RAWCODE_MEMORY_ENTRIES")
    with pytest.raises(ValueError, match="memory_entries=-5 is not a number"):
        cupy_rawcode.make_store(memory_entries=-5)


def test_the_command_line_reports_a_bad_variable(monkeypatch, capsys):
    monkeypatch.setenv("CUPY_RAWCODE_WORKERS", "0")
    assert cli.main(["cache", "stats"]) == 2
    assert "error: CUPY_RAWCODE_WORKERS=0: at least one worker process" in capsys.readouterr().err


@pytest.mark.parametrize(
    "variable, value, read, expected",
    [
        ("CUPY_RAWCODE_CACHE_MAX_SIZE", "0", config.cache_max_size, 0),
        ("CUPY_RAWCODE_CACHE_MAX_SIZE", "2G", config.cache_max_size, 2 << 30),
        ("CUPY_RAWCODE_CACHE_MAX_SIZE", "300kib", config.cache_max_size, 300 << 10),
        ("CUPY_RAWCODE_MEMORY_ENTRIES", "0", config.memory_cache_entries, 0),
        ("CUPY_RAWCODE_PCH", "AUTO", config.pch_mode, "auto"),
        ("CUPY_RAWCODE_PCH", "On", config.pch_mode, "always"),
        ("CUPY_RAWCODE_PCH", "no", config.pch_mode, "never"),
        ("CUPY_RAWCODE_STRIP", "", config.strip, True),  # empty is unset: the default
        ("CUPY_RAWCODE_STRIP", "OFF", config.strip, False),
        ("CUPY_RAWCODE_REDIS_TIMEOUT", "2", config.redis_timeout, 2.0),
        ("CUPY_RAWCODE_REDIS_URL", "unix:///run/redis.sock", config.redis_url, None),
        ("CUPY_RAWCODE_HEADER_SOURCES", "wheel, toolkit", config.header_sources, None),
    ],
)
def test_accepted_values(monkeypatch, variable, value, read, expected):
    monkeypatch.setenv(variable, value)
    got = read()
    if expected is None:  # read back as given (parsed where it is a list)
        expected = tuple(s.strip() for s in value.split(",")) if "," in value else value
    assert got == expected


def test_a_size_bound_of_zero_means_no_bound(monkeypatch, tmp_path, capsys):
    """As in ccache; it used to evict every entry as it was written."""
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_MAX_SIZE", "0")
    store = DirectoryStore(tmp_path / "c")
    assert store.max_bytes is None
    for i in range(20):
        store.put(f"{i:064x}", b"x" * 10_000)
    assert len(store.entries()) == 20
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / "c"))
    assert cli.main(["cache", "stats"]) == 0
    assert "(no bound)" in capsys.readouterr().out
    assert cli.main(["cache", "prune"]) == 0
    assert "no bound is configured" in capsys.readouterr().out and len(store.entries()) == 20


def test_the_environment_is_validated_once_per_process(monkeypatch):
    calls = []
    real = config.validate
    monkeypatch.setattr(config, "validate", lambda: (calls.append(1), real())[1])
    for _ in range(3):
        config.strip(), layout.cache_dir(), config.key_environment()
    assert calls == [1]


def test_the_readme_environment_table_is_the_rendered_one():
    """The README's table is config.markdown() (python -m cupy_rawcode.ground.config --markdown)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Environment\n", 1)[1].split("\n## ", 1)[0]
    table = section[section.index("| variable | meaning |") :].strip() + "\n"
    assert table == config.markdown()


def test_every_variable_is_one_row():
    names = [v.name for v in config.TABLE]
    assert len(names) == len(set(names))
    assert set(config.VARIABLES) == {n for n in names if n.startswith(config.PREFIX)}
    assert config.TOOLCHAIN_ENV == ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX")
    # the warm index's id takes these in this order: a new order would make every entry miss
    assert config.KEY_ENV == (
        "CUPY_RAWCODE_HEADER_SOURCES",
        "CUPY_RAWCODE_STRIP",
        "CUPY_RAWCODE_CUPY_OPTIONS",
        "CUPY_RAWCODE_RAISE_STD",
        "CUPY_CUDA_COMPILE_WITH_DEBUG",
        "CUPY_COMPILE_WITH_PTX",
        *config.TOOLCHAIN_ENV,
    )


def test_one_boolean_parser():
    """Every boolean CUPY_RAWCODE_* row parses with parse_bool, and no other module spells the
    accepted words."""
    booleans = [v for v in config.VARIABLES.values() if isinstance(v.default, bool)]
    assert len(booleans) == 6 and all(v.parse is config.parse_bool for v in booleans)
    for path in (ROOT / "cupy_rawcode").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple | ast.Set | ast.List):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                assert not {"true", "yes"} <= words or path.name == "config.py", path


def _environment_reads(tree: ast.AST):
    """(line, name) of each os.environ.get/os.getenv/os.environ[...]/... in os.environ with a
    constant name; name None where it is not a constant."""
    for node in ast.walk(tree):
        arg = None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in (
            "os.environ.get",
            "os.getenv",
            "environ.get",
        ):
            arg = node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ",):
            arg = node.slice
        elif isinstance(node, ast.Compare) and ast.unparse(node.comparators[0]) == "os.environ":
            arg = node.left
        else:
            continue
        yield node.lineno, arg.value if isinstance(arg, ast.Constant) else None


# read outside config.py on purpose: CuPy's own variables, beside CuPy's own reading of them
CUPYS_OWN = {"CUPY_CACHE_IN_MEMORY", "CUPY_CUDA_COMPILE_WITH_DEBUG"}
# reads config.TOOLCHAIN_ENV's names (the toolchain record's environment, '' when unset)
BY_NAME = {"cupy_rawcode/toolkit/record.py"}


def test_no_module_reads_the_environment_but_config():
    """Every variable is read through its row; the .pth hook (one line run at every interpreter's
    start, before cupy_rawcode may be imported) reads the two hook rows only."""
    found = []
    for path in sorted((ROOT / "cupy_rawcode").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() == "cupy_rawcode/ground/config.py":
            continue
        for line, name in _environment_reads(ast.parse(path.read_text())):
            where = path.relative_to(ROOT).as_posix()
            if name in CUPYS_OWN or (name is None and where in BY_NAME):
                continue
            found.append(f"{where}:{line}: {name or 'a name computed there'}")
    assert found == []
    pth = (ROOT / "cupy_rawcode.pth").read_text()
    hook = set(re.findall(r"os\.environ\.get\(\"(\w+)\"\)", pth))
    assert hook == {config.install_scope.name, config.record_path.name}
