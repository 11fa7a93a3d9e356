"""Every exception the package raises is a ``RawcodeError`` and every warning a ``RawcodeWarning``,
while each keeps the built-in or CuPy class it was before (``except ValueError`` still catches a
bad option). The table raises each kind of error through a public or stage entry point; the static
check reads the package with ``ast`` for classes and ``raise <built-in>(`` that escape the root."""

from __future__ import annotations

import ast
import builtins
import errno
import pickle
from pathlib import Path

import pytest

import cupy_rawcode
from cupy_rawcode.ground import config, errors
from cupy_rawcode.ground.errors import RawcodeError, RawcodeWarning
from cupy_rawcode.ground.inputs import name_expressions
from cupy_rawcode.ground.regular import read_bytes
from cupy_rawcode.headers.options import parse_options
from cupy_rawcode.headers.resolver import resolve
from cupy_rawcode.hook.recording import read as read_record
from cupy_rawcode.kernel import RawKernel, RawModule
from cupy_rawcode.kernel.pickling import unpickled
from cupy_rawcode.key.request import make_request
from cupy_rawcode.launch.bind import bind
from cupy_rawcode.launch.signature import parse_signature
from cupy_rawcode.orchestrator.compiling import compile_request
from cupy_rawcode.store import Levels, open_store
from cupy_rawcode.store.bundle import BundleError, read_index
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import decode
from cupy_rawcode.store.layout import claim
from cupy_rawcode.store.memory import MemoryStore
from cupy_rawcode.store.usage import failure

PACKAGE = Path(cupy_rawcode.__file__).resolve().parent
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


def _file(tmp_path: Path, data: bytes = b"not a bundle, not a cache\n") -> Path:
    path = tmp_path / "some.file"
    path.write_bytes(data)
    return path


def _foreign_dir(tmp_path: Path) -> Path:
    """A directory that is not a cache: it holds someone's file and no CACHEDIR.TAG."""
    _file(tmp_path)
    return tmp_path


def _failed_clear(tmp_path: Path):
    """What a clear that could not remove a file raises."""
    raise failure("clear", tmp_path, [(str(tmp_path / "x"), OSError(errno.EACCES, "denied"))])


def _launch_args(sig_source: str, *args):
    """Bind ``args`` to the parameters of ``k`` in ``sig_source``."""
    return bind(parse_signature(sig_source, "k"), args, {})


SIG = 'extern "C" __global__ void k(int n, float* x) {}\n'


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
    # store/
    ("store class not found", lambda p: open_store("no_such_module:Store"), ValueError),
    ("store class not a Store", lambda p: open_store("json:JSONDecoder"), TypeError),
    ("bad store URL", lambda p: open_store("memory:x"), ValueError),
    ("level not a Store", lambda p: Levels([object()]), TypeError),
    ("bad bundle", lambda p: read_index(_file(p)), ValueError),
    ("broken entry", lambda p: decode("0" * 64, b"junk"), ValueError),
    ("zero counts of no cache", lambda p: DirectoryStore(_foreign_dir(p)).zero_counts(), OSError),
    ("cache path is a file", lambda p: claim(_file(p)), NotADirectoryError),
    ("clear failed", _failed_clear, OSError),
    # kernel/ and launch/
    ("kernel code not str", lambda p: RawKernel(b"x", "k"), TypeError),
    ("kernel name not str", lambda p: RawKernel("x", 1), TypeError),
    (
        "bad backend",
        lambda p: RawKernel("x", "k", backend="clang").compile(arch="sm_90"),
        ValueError,
    ),
    ("options not a tuple", lambda p: RawKernel("x", "k", options="-O3"), TypeError),
    ("code and path", lambda p: RawModule(code="x", path="x.cu"), TypeError),
    ("jitify a cubin", lambda p: RawModule(path="x.cubin", jitify=True), ValueError),
    ("pickle of another version", lambda p: unpickled({}, "RawKernel"), pickle.UnpicklingError),
    ("unparsable signature", lambda p: parse_signature("int x;", "k"), ValueError),
    ("too many launch args", lambda p: _launch_args(SIG, 1, 2, 3), TypeError),
    ("launch arg out of range", lambda p: _launch_args(SIG, 1 << 40, 0), OverflowError),
    ("launch arg not a number", lambda p: _launch_args(SIG, "1", 0), TypeError),
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


def test_bundle_error_is_a_rawcode_error_and_a_value_error(tmp_path):
    with pytest.raises(BundleError) as e:
        read_index(_file(tmp_path))
    assert isinstance(e.value, RawcodeError) and isinstance(e.value, ValueError)


def test_roots_are_exported():
    assert cupy_rawcode.RawcodeError is RawcodeError
    assert cupy_rawcode.RawcodeWarning is RawcodeWarning
    assert issubclass(cupy_rawcode.ConfigError, ValueError)
    assert issubclass(cupy_rawcode.BadInputError, (RawcodeError, ValueError))


def _modules():
    """(path relative to the package, parsed tree) of every module of the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


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
        if not (rel == "ground/__init__.py" and n.name in ROOTS)  # the roots, named by errors.py
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
