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

The two roots are defined in the ground package (ground/__init__.py), which every process loads;
every other class, and the messages of a failed compile, in error_types.py, imported the first
time this module is asked for one of them (``__getattr__``): a warm cache hit raises nothing and
loads none of them. The CuPy-based ones import CuPy (0.2-0.5 s) when first built. Each class is
named and pickled as ``cupy_rawcode.ground.errors.X``.
"""

from __future__ import annotations

from . import RawcodeError, RawcodeWarning, deferred

TYPE_CHECKING = False
if TYPE_CHECKING:  # what __getattr__ gives, as the type checker sees it
    from .error_types import (  # noqa: F401 (named here for the type checker)
        BadInputError,
        CacheNotADirectoryError,
        CompileError,
        CompileException,
        ConfigError,
        EntryError,
        JitifyCompileError,
        JitifyException,
        JitifyMissingHeaderError,
        MissingHeaderCompileError,
        MissingHeaderError,
        NotACacheError,
        RawcodeOverflowError,
        RawcodeRuntimeError,
        RawcodeTimeoutError,
        RawcodeTypeError,
        RawcodeValueError,
        ResolveError,
        SignatureWarning,
        UnreadableHeaderError,
        as_jitify,
        compile_message,
        cupy_dump,
        source_context,
    )

kinds = deferred("cupy_rawcode.ground.error_types")  # the classes below the roots

__all__ = ["RawcodeError", "RawcodeWarning"]


def __getattr__(name: str):
    """A class below the roots (or a message helper) from error_types.py, on first use."""
    value = None if name.startswith("__") else getattr(kinds, name, None)
    if value is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next look-up is a plain global
    return value
