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
