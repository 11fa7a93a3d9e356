import subprocess
import sys

from conftest import ROOT


def _heavy_modules(stmt: str) -> str:
    code = (
        f"import sys; {stmt}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'cuda', 'pcpp', 'numpy')))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.strip()


def test_import_loads_no_heavy_modules():
    # cuda-bindings' .pth preloads the bare 'cuda' namespace at startup; compare with that
    assert _heavy_modules("import cupy_rawcode") == _heavy_modules("pass")


def test_lazy_exports_resolve_to_functions():
    import cupy_rawcode
    import cupy_rawcode.headers.closure

    assert callable(cupy_rawcode.resolve) and cupy_rawcode.resolve.__name__ == "resolve"
    assert cupy_rawcode.compile.__name__ == "compile"


_DEFERRED = r"""
import sys
from cupy_rawcode.ground import deferred
scan = deferred("cupy_rawcode.headers.scan")
before = "cupy_rawcode.headers.scan" in sys.modules
fn = scan.scan_bytes  # the first attribute read imports it
import cupy_rawcode.headers.scan as real
scan.marker = 1  # a patch lands on the module itself
print(before, fn is real.scan_bytes, real.marker, repr(scan))
"""


def test_a_deferred_module_is_imported_on_first_use_and_patched_in_place():
    out = subprocess.run(
        [sys.executable, "-c", _DEFERRED], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    assert out == ["False", "True", "1", "<deferred", "module", "'cupy_rawcode.headers.scan'>"]


def test_a_deferred_name_that_is_no_module_fails_on_use_not_on_import():
    import pytest

    from cupy_rawcode.ground import deferred

    missing = deferred("cupy_rawcode.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        _ = missing.anything
