"""Headers that moved: their old names and where they live now. CuPy 8-12 shipped CUB inside its
own include directory, so code of that era includes ``<cupy/cub/cub/block/block_load.cuh>``;
CuPy 13 dropped that copy for CCCL, where the same header is ``<cub/block/block_load.cuh>``.
The resolver raises for such an include wherever it stands (closure.py), and the compiler
answers it by its new name (compiler/relocated.py)."""

from __future__ import annotations

# old prefix -> new prefix
MOVES = (("cupy/cub/cub/", "cub/"), ("cupy/cub/", "cub/"))


def new_name(name: str) -> str | None:
    """Where header ``name`` lives now, or None when it did not move."""
    for old, new in MOVES:
        if name.startswith(old):
            return new + name[len(old) :]
    return None
