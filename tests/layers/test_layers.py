"""The package's layers, enforced: a module imports only from its own layer or lower ones,
counting imports inside functions as well as at module level, and every module belongs to a
layer. The order follows the pipeline (README "Code layout"): what every stage stands on, the
stages from store to compiler, the one orchestrator, then the faces users call. Read with
``ast``: nothing is imported to check it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_import_graph import (
    PACKAGE,
    ROOT,
    _absolute,
    deferred_name,
    imports_with_lines,
    module_names,
)

# lowest first; a module's layer is that of its longest matching name (relative to the package)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("ground",)),
    ("store", ("store",)),
    ("toolkit", ("toolkit",)),
    ("headers", ("headers",)),
    ("key", ("key",)),
    ("compiler and launch", ("compiler", "launch")),
    ("orchestrator", ("orchestrator",)),
    ("faces", ("", "__main__", "kernel", "hook", "parallel", "cli", "autoinstall")),
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


# --- imports inside functions: only of what ground/deferrals.py lists (heavy, optional, or off a
# warm hit's path), and at most MAX_OWN of the package's own modules

MAX_OWN = 40  # the package's own modules imported inside functions, at most (issue 29)

# files whose imports inside functions predate the list (of modules it does not list, or of the
# package's own): each is to name its deferred dependencies at module level
# (``x = deferred("cupy_rawcode.a.x")``) or import them there, and then leave this set (a test
# fails when a file here has nothing left to convert)
PENDING = {
    "cupy_rawcode/kernel/building.py",
    "cupy_rawcode/key/request.py",
    "cupy_rawcode/parallel/sizing.py",
}


def _deferred_list(root: Path) -> dict[str, str]:
    """DEFERRED of ``root``'s ground/deferrals.py, read with ast (the file is data)."""
    tree = ast.parse((root / "ground" / "deferrals.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(getattr(t, "id", None) == "DEFERRED" for t in targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"{root}/ground/deferrals.py has no DEFERRED")


def _listed(name: str, deferred: dict[str, str]) -> bool:
    return any(name == d or name.startswith(d + ".") for d in deferred)


def function_imports(root: Path = ROOT):
    """(file, line, module imported, whether it is the package's own) for every import inside a
    function, nested ones included. ``from X import y`` names X.y when that is a module."""
    modules = module_names(root)
    for module, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        rel = path.relative_to(root.parent).as_posix()
        seen: set[int] = set()
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if id(node) in seen or not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                seen.add(id(node))
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    base = _absolute(module, is_package, node.level, node.module)
                    names = [
                        f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                        for a in node.names
                    ]
                for name in dict.fromkeys(names):
                    own = name == PACKAGE or name.startswith(PACKAGE + ".")
                    yield rel, node.lineno, name, own


def unlisted(root: Path = ROOT, pending: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """'file:line: ...' for every import inside a function of a module ground/deferrals.py does
    not list, and every ``deferred("...")`` naming one (or a relative name), outside
    ``pending``."""
    deferred = _deferred_list(root)
    out = []
    for rel, line, name, _ in function_imports(root):
        if rel not in pending and not _listed(name, deferred):
            out.append(
                f"{rel}:{line}: imports {name} inside a function: import it at module level, or "
                "list it in ground/deferrals.py with the reason and name it with deferred()"
            )
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            name = deferred_name(node)
            if name is not None and rel not in pending and not _listed(name, deferred):
                out.append(f"{rel}:{node.lineno}: deferred({name!r}) is not in ground/deferrals.py")
    return out


def test_imports_inside_functions_are_of_listed_modules_only():
    assert unlisted(pending=PENDING) == []


def test_every_pending_file_still_has_something_to_convert():
    left = {v.split(":")[0] for v in unlisted() + own_function_imports()}
    assert sorted(PENDING - left) == [], "converted: remove these from PENDING"


def test_the_deferred_list_names_modules_that_exist():
    deferred = _deferred_list(ROOT)
    own = [d for d in deferred if d.startswith(PACKAGE + ".")]
    modules = module_names()
    assert own and all(d in modules for d in own), [d for d in own if d not in modules]
    assert all(why.strip() for why in deferred.values())  # each says why


def test_the_check_finds_unlisted_imports_and_deferred_names(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "ground").mkdir(parents=True)
    (pkg / "store").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("")
    (pkg / "ground" / "__init__.py").write_text("def deferred(name):\n    return name\n")
    (pkg / "ground" / "deferrals.py").write_text(
        'DEFERRED: dict[str, str] = {"cupy": "heavy", "cupy_rawcode.store.slow": "a miss"}\n'
    )
    (pkg / "store" / "slow.py").write_text("")
    (pkg / "store" / "fast.py").write_text(
        "from ..ground import deferred\n"
        "slow = deferred('cupy_rawcode.store.slow')\n"  # listed: fine
        "other = deferred('cupy_rawcode.store.other')\n"  # line 3: not listed
        "def f():\n"
        "    import cupy.cuda\n"  # listed (a package's submodule)
        "    from . import slow\n"  # listed
        "    import json\n"  # line 7: not listed
        "    from .. import store\n"  # line 8: not listed
    )
    (pkg / "ground" / "errors.py").write_text(
        "from . import deferred\nx = deferred('cupy_rawcode.store.slow')\n"
    )
    found = unlisted(pkg)
    assert sorted(v.split(": ")[0] for v in found) == [
        "cupy_rawcode/store/fast.py:3",
        "cupy_rawcode/store/fast.py:7",
        "cupy_rawcode/store/fast.py:8",
    ], found
    assert unlisted(pkg, pending={"cupy_rawcode/store/fast.py"}) == []
    # a deferred name counts as an import for the layers: ground names the store, upward
    assert any(
        "errors.py:2:" in v and "imports cupy_rawcode.store.slow" in v for v in violations(pkg)
    )
    own = [(r, line) for r, line, _, is_own in function_imports(pkg) if is_own]
    assert own == [("cupy_rawcode/store/fast.py", 6), ("cupy_rawcode/store/fast.py", 8)]


def own_function_imports(root: Path = ROOT) -> list[str]:
    """'file:line: module' for each import of the package's own modules inside a function."""
    return [f"{r}:{line}: {name}" for r, line, name, own in function_imports(root) if own]


def test_at_most_MAX_OWN_imports_of_own_modules_inside_functions():
    found = own_function_imports()
    assert len(found) <= MAX_OWN, "\n".join(found)


def test_outside_pending_files_own_imports_inside_functions_stay_few():
    found = [f for f in own_function_imports() if f.split(":")[0] not in PENDING]
    assert len(found) <= MAX_OWN, "\n".join(found)
