"""Checks of what a user passes that NVRTC would misread without a word.

NVRTC and the driver take C strings: a NUL byte in a source, an option or a kernel name ends it
there, and the rest is dropped (a source cut inside a comment compiles to a module with no
kernel). A lone surrogate in a ``str`` cannot be encoded as UTF-8 at all. Each input is checked
where it enters: a source string in ``key.request.make_request`` (and the kernel constructors,
before ``translate_cucomplex`` shifts its lines), a source file in ``read_source`` (the CLI,
prebuild, ``RawModule(path=...)``), options in ``headers.options.parse_options``, kernel names
in the kernel classes, name expressions in ``name_expressions``. Headers are read by NVRTC
itself from disk, whole: it reports a NUL outside a comment with the header's file and line.

Nothing is imported here (but errors.py for its error class and regular.py to read a file): the
checks cost a ``"\\0" in s`` and an ``isascii()`` each.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import BadInputError as BadInputError  # defined with the package's root error
from .errors import RawcodeTypeError, RawcodeValueError
from .regular import read_text


def line_col(text: str, index: int) -> tuple[int, int]:
    """The 1-based (line, column) of ``text[index]``."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def not_utf8(e: UnicodeDecodeError, path: str) -> str:
    """The message for a file whose bytes are not UTF-8: ``path:line:col`` of the first bad byte
    (from the decoding error), the byte, and what to do."""
    data = e.object
    line = data.count(b"\n", 0, e.start) + 1
    col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    return (
        f"{path}:{line}:{col}: not UTF-8 text (byte 0x{data[e.start]:02x}); save the file as UTF-8"
    )


def _surrogate(text: str) -> int:
    """The index of the first lone surrogate in ``text``, or -1."""
    if text.isascii():
        return -1
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return -1


def strip_bom(text: str) -> str:
    """``text`` without a leading UTF-8 byte order mark: nvcc skips one, NVRTC would read it as
    four bad tokens; a source keys as the same text without it."""
    return text[1:] if text.startswith("\ufeff") else text


def check_source(text: str, where: str) -> None:
    """Raise BadInputError naming ``where:line:col`` of a NUL byte or a lone surrogate in a
    source (``where``: its file, or ``<source>`` for a string)."""
    nul, sur = text.find("\0"), _surrogate(text)
    if nul < 0 and sur < 0:
        return
    if nul >= 0 and (sur < 0 or nul < sur):
        line, col = line_col(text, nul)
        raise BadInputError(
            f"{where}:{line}:{col}: NUL byte (\\0) in the source: NVRTC reads the source as a C "
            "string and would drop everything after it; remove it"
        )
    line, col = line_col(text, sur)
    raise BadInputError(
        f"{where}:{line}:{col}: lone surrogate U+{ord(text[sur]):04X} in the source: not "
        "encodable as UTF-8 (text decoded with errors='surrogateescape'?); fix the text"
    )


def _check_c_string(value: str, what: str, nul_effect: Callable[[int], str]) -> None:
    """Raise BadInputError naming ``what`` and ``value`` when it holds a NUL byte (saying
    ``nul_effect(offset)``: what NVRTC would do with it) or a lone surrogate."""
    nul = value.find("\0")
    if nul >= 0:
        raise BadInputError(
            f"{what} {value!r} has a NUL byte (\\0) at offset {nul}: {nul_effect(nul)}"
        )
    sur = _surrogate(value)
    if sur >= 0:
        raise BadInputError(
            f"{what} {value!r} has a lone surrogate U+{ord(value[sur]):04X} at offset {sur}: "
            "not encodable as UTF-8"
        )


def check_name(value: str, what: str) -> None:
    """Raise BadInputError when a name (``what``: 'kernel name', 'name_expressions[1]', ...)
    holds a NUL byte or a lone surrogate."""
    _check_c_string(
        value, what, lambda _: "NVRTC and the driver read names as C strings and would cut it there"
    )


def check_option(option: str, position: int) -> None:
    """Raise BadInputError naming an option (its position in the options and its text) that
    holds a NUL byte or a lone surrogate."""
    _check_c_string(
        option, f"options[{position}]", lambda nul: f"NVRTC would read only {option[:nul]!r}"
    )


def name_expressions(value) -> tuple[str, ...]:
    """Name expressions as a tuple of non-empty str, each checked (None: none). A ``str`` is
    refused: CuPy 14.2 splits it into its characters."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise RawcodeTypeError(
            f"name_expressions must be a sequence of str, not a {type(value).__name__} "
            f"({value!r}: it would be split into characters); write ({value!r},)"
        )
    names = tuple(value)
    for i, n in enumerate(names):
        if not isinstance(n, str) or not n:
            raise RawcodeValueError(f"name expression {n!r} is not a non-empty string")
        check_name(n, f"name_expressions[{i}]")
    return names


def read_source(path: str) -> str:
    """A CUDA source file's text (UTF-8, universal newlines, as ``open`` reads it), checked:
    BadInputError naming ``path:line:col`` for bytes that are not UTF-8, a NUL or a lone
    surrogate. OSError propagates: NotRegularFileError for a FIFO, a device or a directory,
    which are never read (regular.py: a FIFO would block)."""
    try:
        text = read_text(path)
    except UnicodeDecodeError as e:
        raise BadInputError(not_utf8(e, path)) from None
    check_source(text, path)
    return text
