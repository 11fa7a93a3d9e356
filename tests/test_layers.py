"""The package's layers, enforced: a module imports only from its own layer or lower ones,
counting imports inside functions as well as at module level, and every module belongs to a
layer. The order follows the pipeline (README "Code layout"): what every stage stands on, the
stages from store to compiler, the one orchestrator, then the faces users call. Read with
``ast``: nothing is imported to check it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_import_graph import PACKAGE, ROOT, _absolute, module_names

# lowest first; a module's layer is that of its longest matching name (relative to the package)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("ground",)),
    ("store", ("store",)),
    ("toolkit", ("toolkit",)),
    ("headers", ("headers",)),
    ("key", ("key",)),
    ("compiler and launch", ("compiler", "launch")),
    ("orchestrator", ("orchestrator",)),
    ("faces", ("", "kernel", "hook", "parallel", "cli", "autoinstall")),
]


def layer_of(module: str) -> int | None:
    """The index in LAYERS of ``module`` (a dotted name under the package), or None."""
    name = module[len(PACKAGE) + 1 :] if module != PACKAGE else ""
    best: tuple[int, int] | None = None  # (length of the match, layer)
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = name == prefix or (prefix == "" and name == "")
            matches = matches or (prefix != "" and name.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), i)
    return None if best is None else best[1]


def imports_with_lines(module: str, path: Path, modules: dict[str, Path]):
    """(package module imported, line) for every import in ``path``, functions included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.level, node.module)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != module:
                yield t, node.lineno


def violations(root: Path = ROOT) -> list[str]:
    """'file:line: a (layer) imports b (higher layer)' for every upward import, and 'file: in
    no layer' for a module LAYERS does not place."""
    modules = module_names(root)
    out = []
    for module, path in sorted(modules.items()):
        here = layer_of(module)
        rel = path.relative_to(root.parent)
        if here is None:
            out.append(f"{rel}: {module} is in no layer (add it to LAYERS)")
            continue
        for target, line in imports_with_lines(module, path, modules):
            there = layer_of(target)
            if there is not None and there > here:
                out.append(
                    f"{rel}:{line}: {module} ({LAYERS[here][0]}) imports {target} "
                    f"({LAYERS[there][0]}, a higher layer)"
                )
    return out


def test_no_module_imports_from_a_higher_layer_and_every_module_has_a_layer():
    assert violations() == []


def test_the_check_finds_an_upward_import_and_a_module_in_no_layer(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "store").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ground").mkdir()
    (pkg / "ground" / "__init__.py").write_text("")
    (pkg / "ground" / "errors.py").write_text("def f():\n    from ..store import memory\n")
    (pkg / "store" / "__init__.py").write_text("")
    (pkg / "store" / "memory.py").write_text("from ..ground import errors\n")
    (pkg / "stray.py").write_text("")
    found = violations(pkg)
    assert any("errors.py:2:" in v and "imports cupy_rawcode.store.memory" in v for v in found)
    assert any("stray.py" in v and "in no layer" in v for v in found)
    assert not any("memory.py" in v for v in found)  # downward: allowed


LAYER_TABLE = {
    "cupy_rawcode.ground.errors": "ground",
    "cupy_rawcode.ground.stamps": "ground",
    "cupy_rawcode.store.layout": "store",
    "cupy_rawcode.key.manifest": "key",
    "cupy_rawcode.compiler.nvrtc": "compiler and launch",
    "cupy_rawcode.orchestrator.flow": "orchestrator",
    "cupy_rawcode.kernel.classes": "faces",
    "cupy_rawcode": "faces",
}


def test_layer_of_takes_the_longest_matching_name():
    assert {m: LAYERS[layer_of(m)][0] for m in LAYER_TABLE} == LAYER_TABLE


def test_the_version_is_the_projects():
    from cupy_rawcode.ground import VERSION

    text = (ROOT.parent / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"$', text, re.M).group(1) == VERSION
