"""Atomic publication of files: a temp file in the same directory, then os.replace."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing ancestors, each 0700 (os.makedirs gives the mode to the
    last one only)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` so readers see the old file or the whole new one, never a part."""
    for attempt in range(3):
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            break
        except FileNotFoundError:  # the first file of its directory (or one eviction emptied)
            if attempt == 2:
                raise
            make_private_dirs(path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode != 0o600:  # mkstemp already made it 0600
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def process_header_dir(headers: dict[str, str], prefix: str) -> str:
    """A directory holding ``headers`` (include name -> text) for this process, removed at exit:
    what an -isystem answer to missing includes searches. A name that would land outside it
    (absolute, or with ../) is left out."""
    import atexit
    import shutil

    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    for name, text in headers.items():
        path = os.path.normpath(os.path.join(d, name))
        if not path.startswith(d + os.sep):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return d
