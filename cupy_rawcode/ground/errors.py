"""The package's exceptions and warnings: one root for each, and the classes a failing compile
raises, CuPy's own, so that code written against ``cupy.RawKernel`` catches them unchanged.

- ``RawcodeError``: the root of every exception cupy_rawcode raises. Each class also keeps the
  built-in or CuPy base it had (``ValueError``, ``OSError``, ``CompileException``, ...), so an
  ``except`` written for that base still catches it. ``RawcodeWarning`` is the warnings' root.
- ``ConfigError`` (a ``ValueError``): a bad ``CUPY_RAWCODE_*`` value or configuration argument;
  ``RawcodeValueError``, ``RawcodeTypeError``, ``RawcodeRuntimeError``, ``RawcodeOverflowError``,
  ``RawcodeTimeoutError``: what the package raised as the bare built-in before.

- ``CompileError``: NVRTC rejected the source. A subclass of
  ``cupy.cuda.compiler.CompileException`` (message: NVRTC's log, then the failing source lines;
  ``.dump(f)`` as CuPy's) and of ``RuntimeError`` (what cupy_rawcode raised before).
- ``MissingHeaderCompileError``: an include matched no file. Also a
  ``MissingHeaderError``; says NVRTC's words ``cannot open source file "x.h"``.
- ``JitifyCompileError``, ``JitifyMissingHeaderError``: the same for a ``jitify=True`` compile
  routed by ``install()``; also a ``cupy.cuda.compiler.JitifyException``.
- ``ResolveError`` (a ``ValueError``), ``MissingHeaderError``, ``UnreadableHeaderError``: a
  source or header the resolver (headers/) cannot resolve; re-exported by headers.closure.
- ``BadInputError`` (a ``ValueError``, raised by inputs.py): an input NVRTC would misread, such
  as a NUL byte in a source, option or name, refused before NVRTC runs.

Where CuPy is not installed, stand-ins with CuPy's interface take the place of its classes.

The two roots are built by the ground package (ground/__init__.py) when first asked for; every
other class, and the messages of a failed compile, are here. A module on a warm hit's path names
this module through ``deferred()`` and imports it only when it raises: a warm cache hit raises
nothing and loads none of them. The CuPy-based ones import CuPy (0.2-0.5 s) when first built
(``__getattr__``). Each class is named and pickled as ``cupy_rawcode.ground.errors.X``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from . import RawcodeError, RawcodeWarning, deferred

nvrtclog = deferred("cupy_rawcode.ground.nvrtclog")  # its regular expressions: a failed compile


class RawcodeValueError(RawcodeError, ValueError):
    """A bad value passed to cupy_rawcode (a ValueError, as it was before the root)."""


class RawcodeTypeError(RawcodeError, TypeError):
    """An argument of the wrong type (a TypeError, as it was before the root)."""


class RawcodeRuntimeError(RawcodeError, RuntimeError):
    """A failure of NVRTC, CuPy or a run (a RuntimeError, as it was before the root)."""


class RawcodeOverflowError(RawcodeError, OverflowError):
    """A kernel argument out of its C++ type's range (an OverflowError, as before the root)."""


class RawcodeTimeoutError(RawcodeError, TimeoutError):
    """A wait that ran past its timeout (a TimeoutError, as it was before the root)."""


class NotACacheError(RawcodeError, OSError):
    """A write refused: the directory is not the cache's, or a link stands in its layout (the
    refusal was warned about once already)."""


class CacheNotADirectoryError(RawcodeError, NotADirectoryError):
    """The cache directory's path names something other than a directory (a file)."""


class EntryError(RawcodeError, ValueError):
    """Bytes that are no valid entry of the key asked for: a miss."""


class SignatureWarning(RawcodeWarning, UserWarning):
    """A kernel's parameters could not be parsed; its launch() is positional-only."""


class ConfigError(RawcodeValueError):
    """A bad CUPY_RAWCODE_* value or configuration argument: the message names it."""


class BadInputError(RawcodeValueError):
    """An input NVRTC would misread (a NUL byte, a lone surrogate, ...): the message names the
    input and where in it."""


def cupy_dump(exc, f) -> None:
    """``CompileException.dump`` as CuPy 14 writes it: the message, name, options and the
    numbered source (used where CuPy is not installed)."""
    lines = exc.source.split("\n")
    fmt = f"{{:0{int(math.floor(math.log10(max(len(lines), 1)))) + 1}d}} "
    f.write(
        f"{exc.backend.upper()} compilation error: {exc}\n-----\nName: {exc.name}\n"
        f"Options: {' '.join(exc.options)}\nCUDA source:\n"
    )
    for i, line in enumerate(lines):
        f.write(fmt.format(i + 1) + line.rstrip() + "\n")
    f.write("-----\n")
    f.flush()


def _cupy_classes() -> tuple[type, type]:
    """CuPy's (CompileException, JitifyException), or stand-ins with the same interface."""
    try:
        from cupy.cuda.compiler import CompileException, JitifyException

        return CompileException, JitifyException
    except Exception:
        pass
    return _StandInCompileException, _StandInJitifyException


class ResolveError(RawcodeError, ValueError):
    """A source or header that cannot be resolved (reported before any compile starts)."""


class UnreadableHeaderError(ResolveError):
    """A header that was found but cannot be read: no permission, or not a regular file (a
    FIFO, a device: regular.py). The message names its path and include chain."""


class MissingHeaderError(ResolveError):
    """An include that matches no file; ``missing`` holds each one (headers.closure.Missing)."""

    def __init__(self, message: str = "", missing: tuple = ()):
        super().__init__(message)
        self.missing = tuple(missing)


class _StandInCompileException(RawcodeError):
    """Stand-in for cupy.cuda.compiler.CompileException (CuPy is not installed)."""

    def __init__(self, msg, source, name, options, backend="nvrtc"):
        self._msg, self.source, self.name = msg, source, name
        self.options, self.backend = options, backend
        super().__init__()

    def __reduce__(self):
        return (type(self), (self._msg, self.source, self.name, self.options, self.backend))

    def __str__(self) -> str:
        return self.get_message()

    __repr__ = __str__

    def get_message(self) -> str:
        return self._msg

    dump = cupy_dump


class _StandInJitifyException(RawcodeError):
    """Stand-in for cupy.cuda.compiler.JitifyException (CuPy is not installed)."""


# named as CuPy's, and pickled as errors.CompileException / errors.JitifyException
for _cls, _name in (
    (_StandInCompileException, "CompileException"),
    (_StandInJitifyException, "JitifyException"),
):
    _cls.__name__ = _cls.__qualname__ = _name


def source_context(log: str, program_name: str, source: str) -> str:
    """The source lines around each error NVRTC reports in the main source (two either side),
    each line once: errors on one line, or near each other, share one excerpt."""
    lines = source.splitlines()
    marked = set(nvrtclog.error_lines(log, program_name))
    out: list[str] = []
    last = 0  # the last line printed
    for n in sorted(marked):
        first = max(1, n - 2, last + 1)
        if out and first > last + 1:
            out.append("")  # a gap: a new excerpt
        for i in range(first, min(len(lines), n + 2) + 1):
            out.append(f"{'>' if i in marked else ' '} {i:5d} | {lines[i - 1]}")
            last = i
    return "\n".join(out + [""]) if out else ""


def compile_message(
    log: str,
    program_name: str,
    source: str,
    options,
    *,
    dump_path: str | None = None,
    note: str | None = None,
    hints: str = "",
) -> str:
    """NVRTC's log first (as CuPy's message), then the failing lines, the options, notes and
    ``hints`` (compiler/hints.py: what the errors point at, one per line)."""
    msg = log.strip()
    context = source_context(log, program_name, source)
    if context:
        msg += "\n\nsource:\n" + context.rstrip("\n")
    msg += f"\n\noptions: {' '.join(options)}"
    if dump_path:
        msg += f"\nfull source and options written to {dump_path}"
    if note:
        msg += f"\n({note})"
    return msg + "\n" + hints if hints else msg


@functools.cache
def _classes() -> dict[str, Any]:
    bases: tuple[Any, Any] = _cupy_classes()  # CuPy's classes are untyped
    CompileException, JitifyException = bases

    class CompileError(CompileException, RawcodeError, RuntimeError):  # type: ignore[misc,valid-type]
        """NVRTC rejected the source: ``str(e)`` is NVRTC's log followed by the failing source
        lines and the options; ``log`` is NVRTC's log alone; ``dump(f)`` as CuPy's."""

        def __init__(
            self,
            msg: str,
            source: str,
            name: str,
            options,
            backend: str = "nvrtc",
            *,
            log: str | None = None,
            dump_path: str | None = None,
        ):
            super().__init__(msg, source, name, tuple(options), backend)
            self.log = msg if log is None else log
            self.dump_path = dump_path

        def __reduce__(self):
            """CuPy's five arguments, then the attributes (log, dump_path, missing), which
            CuPy's __reduce__ alone would lose crossing a process (a worker's error)."""
            return (*super().__reduce__()[:2], dict(self.__dict__))

    class MissingHeaderCompileError(CompileError, MissingHeaderError):
        """An include matched no file: NVRTC's ``cannot open source file`` words, with the
        include chain and the directories searched. ``missing``: the closure's Missing list;
        the other arguments are CompileError's."""

        def __init__(self, *args: Any, missing: tuple = (), **kw: Any):
            super().__init__(*args, **kw)
            self.missing = missing

    class JitifyCompileError(CompileError, JitifyException):  # type: ignore[misc,valid-type]
        """A failing ``jitify=True`` compile routed by install(): CuPy raises JitifyException."""

    class JitifyMissingHeaderError(
        MissingHeaderCompileError,
        JitifyException,  # type: ignore[misc,valid-type]
    ):
        """A missing header in a ``jitify=True`` compile routed by install()."""

    for cls in (
        CompileError,
        MissingHeaderCompileError,
        JitifyCompileError,
        JitifyMissingHeaderError,
    ):
        cls.__qualname__ = cls.__name__  # pickled as errors.X, not as a local of _classes
    return {
        "CompileError": CompileError,
        "MissingHeaderCompileError": MissingHeaderCompileError,
        "JitifyCompileError": JitifyCompileError,
        "JitifyMissingHeaderError": JitifyMissingHeaderError,
        "CompileException": CompileException,
        "JitifyException": JitifyException,
    }


# the names __getattr__ builds: any other (``__path__``, which every ``from .errors import X``
# asks for) is answered without importing CuPy or the headers stage
_LAZY = (
    "CompileError",
    "MissingHeaderCompileError",
    "JitifyCompileError",
    "JitifyMissingHeaderError",
    "CompileException",
    "JitifyException",
)


def __getattr__(name: str):
    """CuPy's classes and the compile errors built on them, on first use (importing CuPy)."""
    if name in _LAZY:
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def as_jitify(e):
    """The same error as a JitifyCompileError (what CuPy raises for ``jitify=True``)."""
    classes = _classes()
    if isinstance(e, classes["MissingHeaderCompileError"]):
        return classes["JitifyMissingHeaderError"](
            e._msg, e.source, e.name, e.options, e.backend, missing=e.missing, log=e.log
        )
    return classes["JitifyCompileError"](
        e._msg,
        e.source,
        e.name,
        e.options,
        e.backend,
        log=getattr(e, "log", None),
        dump_path=getattr(e, "dump_path", None),
    )
