"""How a path holding ``..`` is read: as the system (and NVRTC, which opens what it is given)
reads it, not as ``os.path.normpath`` spells it. ``a/lnk/../x.h``, where ``lnk`` is a symbolic
link to ``far/deep``, is ``far/x.h``; only where no symbolic link stands before a ``..`` are the
two the same. Used for include names (search.py) and ``-I`` directories (options.py)."""

from __future__ import annotations

import os


def has_dotdot(name: str) -> bool:
    """Whether ``name`` has a ``..`` component (only then can its reading differ)."""
    return ".." in name and ".." in name.split("/")


def joined(directory: str, name: str) -> str:
    """``directory``/``name`` as open() reads it, normalized where that is the same file: a
    ``..`` goes up from where a symbolic link before it leads (what is up to and including the
    last ``..`` is resolved, the rest joined as written, so a link as the last component is
    kept); a ``..`` after something that is no directory names nothing, and the path is kept
    as written (open() fails on it, and a stamp of it sees one appear)."""
    path = os.path.join(directory, name)
    lexical = os.path.normpath(path)
    if not has_dotdot(path):
        return lexical
    parts = path.split("/")
    last = len(parts) - 1 - parts[::-1].index("..")
    head = "/".join(parts[: last + 1])
    if not os.path.isdir(head):
        return path
    up = os.path.realpath(head)
    if up == os.path.realpath(os.path.normpath(head)):
        return lexical  # no link before a '..': the lexical spelling names the same file
    return os.path.normpath(os.path.join(up, *parts[last + 1 :]))


def physical(path: str) -> str:
    """An absolute ``path`` as the system reads it (``joined``)."""
    if not has_dotdot(path):
        return os.path.normpath(path)
    return joined(path, "").rstrip("/") or "/"


def same_reading(directory: str, name: str, found: bool = True) -> bool:
    """Whether ``directory``/``name`` names, as the system reads it, the file its lexical
    spelling names, where the search ``found`` a file; where it found none, also where nothing
    stands before its last ``..`` (then nothing is read there either way). What lets a closure
    name a header by root and relative name on another machine (key/portable.py checks it
    there again)."""
    read = joined(directory, name)
    if read == os.path.normpath(os.path.join(directory, name)):
        return True
    return not found and has_dotdot(read)
