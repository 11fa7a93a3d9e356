"""A directory standing in for a team's remote level in bench/cupy_workload.py: two machines
sharing one store, simulated on one host.

    CUPY_RAWCODE_REMOTE=bench.workload_shared:SharedDirectory RAWCODE_SHARED_DIR=/some/dir

A ``file:`` URL would open a directory store named "disk", which the look-up treats as a remote
level but ``cache pull``/``push`` (store/transfer.py) take for the local disk and leave out; this
one is the same directory store under another name, so it is a remote level to every part.
"""

from __future__ import annotations

import os
from pathlib import Path

from cupy_rawcode.store.directory import DirectoryStore

VARIABLE = "RAWCODE_SHARED_DIR"


class SharedDirectory(DirectoryStore):
    """The directory RAWCODE_SHARED_DIR names, as a remote level ("shared")."""

    name = "shared"

    def __init__(self, **options):
        path = os.environ.get(VARIABLE)
        if not path:
            raise RuntimeError(f"{VARIABLE} names no directory for the shared level")
        super().__init__(Path(path), **options)
