"""The ground layer: what every stage stands on and that imports nothing of the pipeline above
it: file stamps (stamps.py), the package's version, ``deferred``: a module imported on first use
(deferrals.py lists them, with the reasons), and the labelled digests (here rather than in a
module of their own: every key and every warm hit computes one; digest.py names them too).

The layer order, enforced by tests/layers/test_layers.py: ground, store, toolkit, headers, key,
compiler and launch, the orchestrator, then the faces (the drop-in classes, the CuPy
integration, the worker pool, the CLI)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported for this: a process's first import of it costs
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

VERSION = "0.1.0"  # the package's version (pyproject.toml says the same; a test checks it)


class Deferred:
    """A module imported the first time one of its attributes is read (or set: a test's patch
    lands on the module itself). Here, not in deferrals.py: a hit loads this package anyway."""

    __slots__ = ("_deferred_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_deferred_name", name)

    def _module(self) -> Any:
        name = object.__getattribute__(self, "_deferred_name")
        module = sys.modules.get(name)
        if module is None:
            __import__(name)
            module = sys.modules[name]
        return module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._module(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._module(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._module(), attr)

    def __repr__(self) -> str:
        return f"<deferred module {object.__getattribute__(self, '_deferred_name')!r}>"


def deferred(name: str) -> Any:
    """A stand-in for the module ``name`` (absolute, and listed in deferrals.DEFERRED:
    tests/layers/test_layers.py checks both) that imports it on first use. Typed Any: the call sites
    are checked by the tests that run them."""
    return Deferred(name)


# The roots of the package's exceptions and warnings, named and pickled as errors.py's
# (cupy_rawcode.ground.errors): defined here, so that a module that raises or subclasses them
# (the cache's readers, a warm hit's) loads no other class; errors.py has them all.
_ERRORS = __name__ + ".errors"


class RawcodeError(Exception):
    """Root of every exception cupy_rawcode raises: ``except RawcodeError`` catches them all."""

    __module__ = _ERRORS


class RawcodeWarning(Warning):
    """Root of every warning cupy_rawcode emits: one filter silences or raises them all."""

    __module__ = _ERRORS


hashlib = deferred("hashlib")  # 2-3 ms where CuPy has not loaded it: the first digest only


def encode_fields(fields: Iterable[tuple[str, str | bytes]]) -> bytes:
    """label, value pairs as len(label) label len(value) value: unambiguous, no reprs. The one
    encoding behind the cache key, the closure digest, the manifests' and records' ids."""
    out = bytearray()
    for label, value in fields:
        lab = label.encode()
        val = value if isinstance(value, bytes) else value.encode("utf-8")
        out += len(lab).to_bytes(4, "little") + lab + len(val).to_bytes(8, "little") + val
    return bytes(out)


def digest_fields(fields: list) -> str:
    """The SHA-256 (hex) of the encoded fields."""
    return hashlib.sha256(encode_fields(fields)).hexdigest()
