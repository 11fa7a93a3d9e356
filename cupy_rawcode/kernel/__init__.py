"""CuPy drop-ins: RawKernel and RawModule with CuPy 14's call convention, built by cupy-rawcode.

One job per module: classes.py (the drop-in classes), checks.py (their checks at construction),
cucomplex.py (translate_cucomplex), building.py (code for a device: warm index, key, store,
compile, background warmups, recording), loading.py (a module loaded once per device),
pickling.py (what a pickle carries); the kernel attributes are properties in classes.py.
"""

from __future__ import annotations

from .building import Code, build
from .classes import RawKernel, RawModule, SignatureWarning

__all__ = ["Code", "RawKernel", "RawModule", "SignatureWarning", "build"]
