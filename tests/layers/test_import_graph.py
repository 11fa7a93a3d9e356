"""The package's import graph has no cycle, counting imports inside functions as well as at
module level: each stage imports only the stages below it, so shared types live in the stage
that owns them. The graph is read with ``ast``, so no module is imported to build it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "cupy_rawcode"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def module_names(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module and package ``__init__`` under root."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        if is_init:
            parts = parts[:-1]
        out[".".join([package, *parts])] = path
    return out


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def deferred_name(node: ast.AST) -> str | None:
    """The module named by ``deferred("a.b")`` (ground/__init__.py: imported on first use), or
    None when ``node`` is no such call."""
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return None
    func = node.func
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    arg = node.args[0]
    if called == "deferred" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def imports_with_lines(module: str, path: Path, modules: dict[str, Path]):
    """(package module imported, line) for every import in ``path``, functions included, and
    every module named through ``deferred("...")`` (imported on first use: an import all the
    same). ``from X import y`` counts as an import of X.y when that is a module, else of X; a
    parent package reached only because a submodule is imported is not counted."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        named = deferred_name(node)
        if named is not None:
            targets = [named]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.level, node.module)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for t in targets:
            # `import cupy_rawcode.a.b` names the module a.b (the longest known prefix)
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != module:
                yield t, node.lineno


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules that ``module`` imports anywhere in its file (imports_with_lines)."""
    return {t for t, _ in imports_with_lines(module, path, modules)}


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    modules = module_names(root, package)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, deterministic order)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


@pytest.mark.parametrize(
    "graph, cycle",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
        ({"a": {"a2"}, "a2": set(), "x": {"y"}, "y": {"z"}, "z": {"x"}}, ["x", "y", "z", "x"]),
    ],
)
def test_find_cycle(graph, cycle):
    assert find_cycle(graph) == cycle


@pytest.mark.parametrize(
    "files, graph",
    [
        # module level, inside a function, relative and absolute
        (
            {
                "__init__.py": "def f():\n    from .a import x\n",
                "a.py": "import pkg.b\n",
                "b.py": "from . import c\n",
                "c.py": "def g():\n    from pkg.a import y\n",
            },
            {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}},
        ),
        # a module named through deferred(...) (imported on first use) is imported all the same
        (
            {
                "__init__.py": "",
                "a.py": "from . import deferred\nb = deferred('pkg.b')\n",
                "b.py": "import pkg\nc = pkg.deferred('pkg.c')\nx = deferred('numpy')\n",
                "c.py": "",
            },
            {"pkg": set(), "pkg.a": {"pkg", "pkg.b"}, "pkg.b": {"pkg", "pkg.c"}, "pkg.c": set()},
        ),
        # a subpackage: `from .. import name` is its parent's __init__, `from .x` a sibling
        (
            {
                "__init__.py": "",
                "s/__init__.py": "from .m import K\n",
                "s/m.py": "from .. import config\nfrom ..config import V\n",
                "config.py": "from .s import m\n",
            },
            {
                "pkg": set(),
                "pkg.s": {"pkg.s.m"},
                "pkg.s.m": {"pkg.config"},
                "pkg.config": {"pkg.s.m"},
            },
        ),
    ],
)
def test_import_graph_reads_every_kind_of_import(tmp_path, files, graph):
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    assert import_graph(tmp_path / "pkg", "pkg") == graph


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 20  # the walk found the package
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def folder_of(module: str, package: str = PACKAGE) -> str:
    """The stage folder a module is in ('store', 'kernel', ...); the top-level modules are
    each their own ('autoinstall'), the package's __init__ is the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between folders: a folder imports another when one of its modules
    imports one of the other's; imports within a folder are left out."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = folder_of(module)
        out.setdefault(here, set()).update(folder_of(t) for t in targets if folder_of(t) != here)
    return out


@pytest.mark.parametrize(
    "graph, folders",
    [
        ({"p.a.x": {"p.b.y"}, "p.b.y": {"p.b.z"}, "p.b.z": set()}, {"a": {"b"}, "b": set()}),
        ({"p.a.x": {"p.b.y"}, "p.b.z": {"p.a.w"}}, {"a": {"b"}, "b": {"a"}}),
        (
            {"p": {"p.a.x"}, "p.a.x": {"p.top"}, "p.top": set()},
            {"p": {"a"}, "a": {"top"}, "top": set()},
        ),
    ],
)
def test_folder_graph(graph, folders):
    assert folder_graph(graph) == folders


def test_no_two_folders_import_each_other():
    """Stages stay in order at folder level too: no cycle between the package's folders
    (a file-level graph can be acyclic while key/ and headers/ import each other)."""
    cycle = find_cycle(folder_graph(import_graph()))
    assert cycle is None, "folders import each other: " + " -> ".join(cycle or ())
