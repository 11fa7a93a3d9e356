"""NVIDIA's cuda-python modules (cuda.core, cuda.bindings, cuda.pathfinder), imported under one
process-wide lock. cuda.core 1.2 swaps its versioned subpackage's ``__spec__`` in during its own
import, which imports cuda.bindings; another thread importing one of them meanwhile can be let
through to a half-imported module ("cannot import name 'ObjectCode'", "name 'sys' is not
defined"). An overlapped compile, nvJitLink's prefetch and a cache hit run on three threads."""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

_lock = threading.RLock()  # reentrant: an import under it may ask for another through here


def cuda_module(name: str) -> ModuleType:
    """The module ``name`` (``cuda.core``, ``cuda.bindings.nvrtc``, ...), imported under the lock
    the first time; ImportError as ``import`` raises it."""
    with _lock:  # always: a module in sys.modules may be one another thread is importing
        return importlib.import_module(name)
