"""Every exception the package raises is a ``RawcodeError`` and every warning a ``RawcodeWarning``,
while each keeps the built-in or CuPy class it was before (``except ValueError`` still catches a
bad option). The table raises each kind of error through a public or stage entry point; the static
check reads the package with ``ast`` for classes and ``raise <built-in>(`` that escape the root."""

from __future__ import annotations

import ast
import builtins
import pickle
from pathlib import Path

import pytest

import cupy_rawcode
from cupy_rawcode import config, errors
from cupy_rawcode.compiler.program import compile_request
from cupy_rawcode.errors import RawcodeError, RawcodeWarning
from cupy_rawcode.headers.options import parse_options
from cupy_rawcode.headers.resolver import resolve
from cupy_rawcode.inputs import name_expressions
from cupy_rawcode.key.request import make_request
from cupy_rawcode.recording import read as read_record
from cupy_rawcode.regular import read_bytes
from cupy_rawcode.store import Levels
from cupy_rawcode.store.memory import MemoryStore

PACKAGE = Path(cupy_rawcode.__file__).resolve().parent
# owned by other changes of issue 29 (store backends, the drop-in classes, the signature reader)
NOT_YET = ("store/", "kernel/", "launch/signature.py", "launch/lexer.py")
ROOTS = ("RawcodeError", "RawcodeWarning")
KERNEL = 'extern "C" __global__ void k(float* x) {\n  x[0] = nope;\n}\n'


def _record(tmp_path: Path) -> Path:
    """A record whose line 1 is not an entry."""
    path = tmp_path / "app.rec"
    path.write_text('{"kind": "compile"}\n')
    return path


def _compile(tmp_path: Path, source: str):
    """Compile ``source`` for sm_90 (CPU: NVRTC needs no GPU) without a disk cache."""
    return compile_request(make_request(source, arch="sm_90"), store=Levels([MemoryStore()]))


def _compile_error(tmp_path: Path):
    """NVRTC refuses the source."""
    return _compile(tmp_path, KERNEL)


CASES = [
    ("bad option", lambda p: parse_options(("-std=c++99",)), ValueError),
    ("not an option", lambda p: parse_options(("foo",)), ValueError),
    ("bad env value", lambda p: config.parse_bool("CUPY_RAWCODE_STRIP", "maybe"), ValueError),
    ("bad size", lambda p: config.parse_size("CUPY_RAWCODE_CACHE_MAX_SIZE", "lots"), ValueError),
    ("bad arch", lambda p: make_request("", arch="sm_1"), ValueError),
    ("bad target", lambda p: make_request("", arch="sm_90", target="elf"), ValueError),
    ("missing header", lambda p: resolve('#include "nowhere.h"\n').raise_for_missing(), ValueError),
    ("missing header compiling", lambda p: _compile(p, '#include "nowhere.h"\n'), RuntimeError),
    ("NUL in source", lambda p: resolve("int x;\0\n"), ValueError),
    ("name_expressions str", lambda p: name_expressions("f<int>"), TypeError),
    ("source not str", lambda p: make_request(b"x", arch="sm_90"), TypeError),
    ("bad record line", lambda p: read_record(_record(p)), ValueError),
    ("not a regular file", lambda p: read_bytes(str(p)), OSError),
    ("compile error", _compile_error, RuntimeError),
]


@pytest.mark.parametrize("what,call,before", CASES, ids=[c[0] for c in CASES])
def test_each_error_is_a_rawcode_error_and_what_it_was(what, call, before, tmp_path):
    with pytest.raises(before) as e:
        call(tmp_path)
    assert isinstance(e.value, RawcodeError), type(e.value).__mro__


def test_compile_error_is_still_cupys(tmp_path):
    with pytest.raises(errors.CompileException) as e:
        _compile_error(tmp_path)
    assert isinstance(e.value, RawcodeError) and isinstance(e.value, errors.CompileError)
    again = pickle.loads(pickle.dumps(e.value))
    assert isinstance(again, RawcodeError) and str(again) == str(e.value)


def test_oserror_subclass_keeps_errno_and_pickles(tmp_path):
    with pytest.raises(OSError) as e:
        read_bytes(str(tmp_path))
    assert e.value.errno is not None and e.value.filename == str(tmp_path)
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is type(e.value) and str(again) == str(e.value)


def test_roots_are_exported():
    assert cupy_rawcode.RawcodeError is RawcodeError
    assert cupy_rawcode.RawcodeWarning is RawcodeWarning
    assert issubclass(cupy_rawcode.ConfigError, ValueError)
    assert issubclass(cupy_rawcode.BadInputError, (RawcodeError, ValueError))


def _modules():
    """(path relative to the package, parsed tree) of every module outside NOT_YET."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(NOT_YET):
            yield rel, ast.parse(path.read_text(encoding="utf-8"))


def _is_exception_class(node: ast.ClassDef) -> bool:
    """A class whose name or a base's name says exception or warning."""
    names = [node.name] + [ast.unparse(b) for b in node.bases]
    return any(n.endswith(("Error", "Exception", "Warning")) for n in names)


def _escapes(node: ast.ClassDef) -> bool:
    """Whether a class derives from no package class: only built-ins (or CuPy's) as bases."""
    bases = [ast.unparse(b) for b in node.bases]
    return all(isinstance(getattr(builtins, b, None), type) for b in bases)


def test_no_exception_class_escapes_the_root():
    bad = [
        f"{rel}:{n.lineno}: class {n.name}({', '.join(ast.unparse(b) for b in n.bases)})"
        for rel, tree in _modules()
        for n in ast.walk(tree)
        if isinstance(n, ast.ClassDef) and _is_exception_class(n) and _escapes(n)
        if not (rel == "errors.py" and n.name in ROOTS)
    ]
    assert not bad, "\n".join(bad)


def _module_getattr_raises(tree: ast.Module) -> set[int]:
    """Lines of the raises inside a module-level ``__getattr__``: the attribute protocol."""
    return {
        r.lineno
        for f in tree.body
        if isinstance(f, ast.FunctionDef) and f.name == "__getattr__"
        for r in ast.walk(f)
        if isinstance(r, ast.Raise)
    }


def test_no_bare_builtin_raise():
    bad = []
    for rel, tree in _modules():
        protocol = _module_getattr_raises(tree)
        for n in ast.walk(tree):
            if not isinstance(n, ast.Raise) or n.exc is None or n.lineno in protocol:
                continue
            f = n.exc.func if isinstance(n.exc, ast.Call) else n.exc
            if isinstance(f, ast.Name) and isinstance(getattr(builtins, f.id, None), type):
                bad.append(f"{rel}:{n.lineno}: {ast.unparse(n)[:100]}")
    assert not bad, "\n".join(bad)


def test_every_defined_class_is_under_the_root():
    """Import-time view of the static check: the classes the package defines, by their MRO."""
    import importlib

    found = 0
    for rel, _ in _modules():
        if rel.endswith("__main__.py"):
            continue  # runs the command when imported
        name = "cupy_rawcode." + rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue  # an optional dependency (pcpp, cuda bindings) is missing
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                if issubclass(value, Warning):
                    assert issubclass(value, RawcodeWarning), value
                    found += 1
                elif issubclass(value, BaseException):
                    assert issubclass(value, RawcodeError), value
                    found += 1
    assert found >= 15
