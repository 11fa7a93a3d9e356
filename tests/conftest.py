import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "bench" / "corpus"


@functools.cache
def gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own cache directory: tests never share state through the disk."""
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUPY_RAWCODE_HEADER_SOURCES", raising=False)
    yield


@pytest.fixture
def tree(tmp_path):
    """Write a small file tree: tree({"a/x.h": "...", ...}) -> root path."""

    def make(files: dict, root: Path | None = None) -> Path:
        root = root or tmp_path / "tree"
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return root

    return make


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()
