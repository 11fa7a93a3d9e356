import subprocess
import sys

from conftest import ROOT


def test_import_loads_no_heavy_modules():
    code = ("import sys, cupy_rawcode; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'cuda', 'pcpp', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.strip()
    assert out == "[]"


def test_lazy_exports_resolve_to_functions():
    import cupy_rawcode
    import cupy_rawcode.closure  # importing the module must not shadow the function
    assert callable(cupy_rawcode.resolve) and cupy_rawcode.resolve.__name__ == "resolve"
    assert cupy_rawcode.compile.__name__ == "compile"
