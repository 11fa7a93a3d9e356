"""The README's example: its kernel compiles anywhere, and on a GPU the example runs as written
and its result matches NumPy."""

import re
from pathlib import Path

import numpy as np
import pytest

import cupy_rawcode

README = Path(__file__).resolve().parent.parent / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## An example\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_kernel_compiles():
    source = re.search(r'code = r"""(.*?)"""', _example(), re.S).group(1)
    assert "#include <type_traits>" in source
    cupy_rawcode.compile(source, arch="sm_90")


@pytest.mark.gpu
def test_the_readme_example_runs_and_matches_numpy():
    ns: dict = {}
    exec(compile(_example(), str(README), "exec"), ns)
    x, out = ns["x"].get(), ns["out"].get()
    np.testing.assert_allclose(out, x.reshape(64, 128).sum(axis=1, dtype=np.float64), rtol=1e-5)
