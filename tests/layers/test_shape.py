"""The package's shape: few modules at its top level
(everything else sits in its stage's folder) and no module so long that it holds several jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "cupy_rawcode"
MAX_TOP_LEVEL = 6  # modules beside __init__ and __main__
MAX_LINES = 450


def top_level_modules(root: Path = ROOT) -> list[str]:
    return sorted(p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def long_modules(root: Path = ROOT, limit: int = MAX_LINES) -> list[str]:
    """'path: N lines' for each module of ``root`` longer than ``limit`` lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(f"{path.relative_to(root.parent)}: {n} lines")
    return out


def test_few_modules_at_the_top_level():
    assert len(top_level_modules()) <= MAX_TOP_LEVEL, top_level_modules()


def test_no_module_is_over_the_line_limit():
    assert long_modules() == []


@pytest.mark.parametrize("lines, found", [(MAX_LINES, False), (MAX_LINES + 1, True)])
def test_the_line_limit_is_read_as_stated(tmp_path, lines, found):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("x = 1\n" * lines)
    assert bool(long_modules(tmp_path / "pkg")) == found
