"""Where a record or a manifest may point: the paths it names (a manifest's ``file``, a record's
``source_dir``, the paths of -I, --pre-include and the other path options) stay inside its own
directory or a root given explicitly (``--root``, ``root=``), so that a record from elsewhere
cannot make a compile read, and an error echo, any file of the machine.

The rule: a relative path and a ``{record}/...`` path are taken from the record's (manifest's)
directory and must stay inside it or a root; an absolute path in a record must lie in a root
(in a manifest, its own directory will do too); a pre-included header given by name
(``-include cuda_fp16.h``) is searched like an #include and must not climb with ``..``.
Symbolic links are resolved before the check. Pure functions: no file is opened or read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from .errors import RawcodeError

PLACE = "{record}"
# options whose value is a path: spelling -> whether the value may be a header name
PATH_OPTIONS: dict[str, bool] = {
    "-I": False,
    "--include-path": False,
    "-isystem": False,
    "-include": True,
    "--pre-include": True,
    "--pch-dir": False,
    "-pch-dir": False,
    "--use-pch": False,
    "-use-pch": False,
    "--create-pch": False,
    "-create-pch": False,
    "--time": False,  # the files NVRTC writes (headers/options.py FILE_OPTIONS)
    "-time": False,
    "--fdevice-time-trace": False,
    "-fdevice-time-trace": False,
    "--use-bundled-headers": False,
    "--options-file": False,
    "-optf": False,
}
_JOINED = ("-isystem", "-I")  # may be glued to their value: -Idir (longest first)
WHITESPACE = " \t\n\r\v\f"  # what NVRTC trims from each option (headers/options.py reads so)


class EscapeError(RawcodeError, ValueError):
    """A path in a record or manifest that leads outside the directories it may name."""


def inside(path: str, roots: Sequence[str]) -> bool:
    """Whether the absolute ``path`` is one of ``roots`` or lies below one (all normalized)."""
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def resolve(value: str, base: str) -> tuple[str, bool]:
    """(the real absolute path ``value`` names, whether the record gave it as absolute): a
    ``{record}/...`` or relative value is taken from ``base``."""
    if value.startswith(PLACE):
        return os.path.realpath(base + value[len(PLACE) :]), False
    if os.path.isabs(value):
        return os.path.realpath(value), True
    return os.path.realpath(os.path.join(base, value)), False


def confine(
    value: str, base: str, roots: Sequence[str], what: str, where: str, *, record: bool = True
) -> str:
    """The real absolute path of ``value`` (``what`` names it in messages), or EscapeError when
    it leads outside ``base`` and every root. In a ``record`` an absolute value must lie in a
    root (a recorder writes none: it writes {record}/...); in a manifest, base will do."""
    path, absolute = resolve(value, base)
    real_roots = [os.path.realpath(r) for r in roots]
    only_roots = absolute and record
    allowed = real_roots if only_roots else [os.path.realpath(base), *real_roots]
    if inside(path, allowed):
        return path
    if only_roots:
        why = "an absolute path in a record, allowed only under a --root DIR"
    else:
        why = f"outside {os.path.realpath(base)} (allow it with --root DIR)"
    raise EscapeError(f"{where}: {what} leads to {path}, {why}")


def header_name_escapes(value: str) -> bool:
    """Whether a header name (searched like an #include) climbs out of its directory with .."""
    return os.path.normpath(value).split(os.sep)[0] == ".."


def split(options: Sequence[str], i: int) -> tuple[str | None, str | None, int]:
    """(path option spelling, its value, next index) for item i; (None, None, i + 1) when the
    item is no path option. A value given as the next item is taken from there. Each item is
    read without the blanks around it, as parse_options and NVRTC read it."""
    item = options[i].strip(WHITESPACE)
    head, eq, tail = item.partition("=")
    if head in PATH_OPTIONS and eq:  # -I=DIR is DIR, as parse_options and NVRTC read it
        return head, tail, i + 1
    if item in PATH_OPTIONS:
        value = options[i + 1].strip(WHITESPACE) if i + 1 < len(options) else None
        return item, value, i + 2
    for prefix in _JOINED:
        if item.startswith(prefix) and len(item) > len(prefix):
            return prefix, item[len(prefix) :], i + 1
    return None, None, i + 1


def pieces(options: Sequence[str]) -> Iterator[tuple[str | None, str | None, list[str]]]:
    """(path option spelling or None, its value, the items given for it) for each option in
    turn, as split() reads them: one walk for confine_options, a record's and CuPy's keys."""
    i = 0
    while i < len(options):
        flag, value, nxt = split(options, i)
        yield flag, value, list(options[i:nxt])
        i = nxt


def spelled(flag: str, path: str) -> list[str]:
    """A path option as NVRTC and parse_options read it: -I/dir, --flag=/dir or -flag /dir."""
    if flag in _JOINED:
        return [flag + path]
    return [f"{flag}={path}"] if flag.startswith("--") else [flag, path]


def confine_options(
    options: Sequence[str], base: str, roots: Sequence[str], where: str, *, record: bool = True
) -> tuple[str, ...]:
    """The options with every path made real and absolute (EscapeError for one outside ``base``
    and ``roots``, as confine() says); a header name given to a pre-include stays a name."""
    out: list[str] = []
    for flag, value, given in pieces(options):
        if flag is None or not value:  # no path option, or an empty -I: no directory
            out += given
            continue
        what = f"option {' '.join(given)}"
        if PATH_OPTIONS[flag] and not value.startswith(PLACE) and not os.path.isabs(value):
            if header_name_escapes(value):
                raise EscapeError(
                    f"{where}: {what} climbs out of the include directories (name the "
                    "header by a path inside the directory of the record or a --root DIR)"
                )
            path = value  # a header name: searched in the (confined) include directories
        else:
            path = confine(value, base, roots, what, where, record=record)
        out += spelled(flag, path)
    return tuple(out)
