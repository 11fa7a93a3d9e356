"""An in-process LRU of entry bytes, in front of the disk: ``MemoryStore``, defined in
store/base.py (the top level of every default stack: a warm hit loads one module fewer) and
named here too, for ``memory:`` URLs and the code that imports it from here.
"""

from __future__ import annotations

from .base import MemoryStore

__all__ = ["MemoryStore"]
