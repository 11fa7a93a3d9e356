"""Bind launch arguments to a kernel signature: positional and keyword arguments, defaults,
scalars converted to the declared type and arrays checked against pointer parameters.
Every error names the kernel and the parameter."""

from __future__ import annotations

import enum
import math

import numpy

from ..ground import deferred
from ..ground.errors import RawcodeOverflowError, RawcodeTypeError
from ..ground.regular import read_bytes
from .cexpr import int_to_float
from .ctype import OPAQUE_SIZES
from .signature import NO_DEFAULT, Param, Signature, parse_signature

# a user's headers read for their declarations: only with a source directory or -I
search = deferred("cupy_rawcode.headers.search")
discovery = deferred("cupy_rawcode.toolkit.discovery")

_MISSING = object()


def label(p: Param, index: int) -> str:
    """How an error names a parameter: 'n' (int), or #3 (int) when it has no name."""
    return f"{p.name!r} ({p.type.text})" if p.name else f"#{index + 1} ({p.type.text})"


def bind(sig: Signature, args: tuple, kwargs: dict, *, check_pointers: bool = True) -> tuple:
    """The kernel arguments in parameter order, converted; raises TypeError/OverflowError."""
    params, where = sig.params, f"{sig.name}()"
    if len(args) > len(params):
        raise RawcodeTypeError(f"{where} takes {len(params)} arguments but {len(args)} were given")
    values = list(args) + [_MISSING] * (len(params) - len(args))
    index = {p.name: i for i, p in enumerate(params) if p.name}
    for key, value in kwargs.items():
        i = index.get(key)
        if i is None:
            raise RawcodeTypeError(
                f"{where} got an unknown keyword argument {key!r}; its parameters "
                f"are {', '.join(sig.names()) or 'unnamed'}"
            )
        if values[i] is not _MISSING:
            raise RawcodeTypeError(f"{where} got multiple values for parameter {key!r}")
        values[i] = value
    out = []
    for i, (p, v) in enumerate(zip(params, values, strict=True)):
        if v is _MISSING:
            if p.default is NO_DEFAULT:
                raise RawcodeTypeError(f"{where} missing the argument for parameter {label(p, i)}")
            v = p.default
        out.append(convert(p, v, f"{where} parameter {label(p, i)}", check_pointers))
    return tuple(out)


def _is_scalar(v) -> bool:
    return isinstance(v, (bool, int, float, complex, numpy.generic)) or (
        isinstance(v, numpy.ndarray) and v.ndim == 0
    )


def _is_device_array(v) -> bool:
    return hasattr(v, "__cuda_array_interface__")


def convert(p: Param, v, where: str, check_pointers: bool = True):
    """One argument as the kernel receives it (see module docstring)."""
    t = p.type
    if t.is_pointer:
        return _pointer(t, v, where, check_pointers)
    if _is_device_array(v) or (isinstance(v, numpy.ndarray) and v.ndim > 0):
        shape = getattr(v, "shape", None)
        if shape is None:
            shape = v.__cuda_array_interface__.get("shape", "?")
        raise RawcodeTypeError(f"{where} is a scalar, but got an array of shape {tuple(shape)}")
    if t.base in ("cudaTextureObject_t", "cudaSurfaceObject_t") and _is_cupy_object(v):
        return numpy.uint64(v.ptr)  # as CuPy's launch passes a TextureObject/SurfaceObject
    if t.base in OPAQUE_SIZES and not t.reference and not t.pointer:
        return _opaque(v, OPAQUE_SIZES[t.base], where)
    if t.dtype is None and not t.reference and not t.struct and _is_number(v):
        raise RawcodeTypeError(
            f"{where} has the type {t.text}, which a Python number cannot be converted to "
            "exactly here; pass a NumPy/CuPy scalar of that type"
        )
    if t.dtype is None or t.reference:
        return v  # opaque: a struct, or a name nothing resolved; passed as given
    if isinstance(v, enum.Enum) and not isinstance(v, int):
        v = v.value
    if isinstance(v, numpy.ndarray):
        v = v[()]
    if not _is_scalar(v):
        raise RawcodeTypeError(f"{where} expects a number, got {type(v).__name__}")
    return _scalar(numpy.dtype(t.dtype), t.text, v, where)


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float, complex))


def _is_cupy_object(v) -> bool:
    """Whether ``v`` is CuPy's TextureObject or SurfaceObject (by class, CuPy not imported)."""
    cls = type(v)
    return cls.__name__ in ("TextureObject", "SurfaceObject") and cls.__module__.startswith("cupy")


def _opaque(v, size: int, where: str):
    """A value for a type known here with no NumPy conversion (``__nv_bfloat16``, ``half2``,
    ``float2``, ...): a Python number would arrive as 8 bytes, so it is refused."""
    if isinstance(v, (bool, int, float, complex)) or (
        isinstance(v, numpy.generic) and v.dtype.itemsize != size
    ):
        raise RawcodeTypeError(
            f"{where} cannot be converted from {type(v).__name__} {v!r}; pass a NumPy/CuPy "
            f"scalar of that type ({size} bytes)"
        )
    return v


def _scalar(dt: numpy.dtype, text: str, v, where: str):
    is_int = isinstance(v, (int, numpy.integer, numpy.bool_))
    is_real = is_int or isinstance(v, (float, numpy.floating))
    if dt.kind == "b":
        if isinstance(v, (bool, numpy.bool_)) or (is_int and int(v) in (0, 1)):
            return numpy.bool_(bool(v))
        raise RawcodeTypeError(f"{where} expects a bool, got {type(v).__name__} {v!r}")
    if dt.kind in "iu":
        if not is_int:
            raise RawcodeTypeError(f"{where} expects an integer, got {type(v).__name__} {v!r}")
        info = numpy.iinfo(dt)
        if not info.min <= int(v) <= info.max:
            raise RawcodeOverflowError(
                f"{where}: {int(v)} is out of range for {text} ({info.min}..{info.max})"
            )
        return dt.type(int(v))
    if dt.kind == "f":
        if not is_real:
            raise RawcodeTypeError(f"{where} expects a real number, got {type(v).__name__} {v!r}")
        if isinstance(v, (int, numpy.integer)) and not isinstance(v, bool):
            out = int_to_float(dt.type, int(v))
        else:
            with numpy.errstate(over="ignore"):
                out = dt.type(float(v))
        if math.isinf(out) and not (isinstance(v, (float, numpy.floating)) and math.isinf(v)):
            raise RawcodeOverflowError(f"{where}: {v!r} is out of range for {text}")
        return out
    if dt.kind == "c":
        if not (is_real or isinstance(v, (complex, numpy.complexfloating))):
            raise RawcodeTypeError(
                f"{where} expects a complex number, got {type(v).__name__} {v!r}"
            )
        z = complex(v)
        with numpy.errstate(over="ignore"):
            out = dt.type(z)
        if any(math.isinf(a) and not math.isinf(b) for a, b in _parts(out, z)):
            raise RawcodeOverflowError(f"{where}: {v!r} is out of range for {text}")
        return out
    raise RawcodeTypeError(f"{where}: cannot convert to {text}")  # not reached with _ARITH's dtypes


def _parts(out, z: complex) -> tuple:
    return ((float(out.real), z.real), (float(out.imag), z.imag))


def _pointer(t, v, where: str, check: bool):
    if v is None:
        return numpy.uint64(0)  # a null pointer: 8 zero bytes, aligned as a pointer
    if isinstance(v, numpy.ndarray):
        raise RawcodeTypeError(
            f"{where} is a pointer, but got a host numpy array; pass a cupy array"
        )
    if _is_scalar(v):
        raise RawcodeTypeError(f"{where} is a pointer, but got the scalar {type(v).__name__} {v!r}")
    dtype = getattr(v, "dtype", None)
    if check and dtype is not None and t.dtype is not None and t.pointer == 1:
        try:
            dtype = numpy.dtype(dtype)
        except TypeError:
            typestr = getattr(v, "__cuda_array_interface__", {}).get("typestr")
            if typestr is None:
                raise RawcodeTypeError(
                    f"{where} got an array whose dtype {dtype!r} NumPy cannot read; "
                    "set kernel.check_pointers = False to pass it unchecked"
                ) from None
            dtype = numpy.dtype(typestr)
        if dtype != numpy.dtype(t.dtype):
            raise RawcodeTypeError(
                f"{where} points to {numpy.dtype(t.dtype).name}, but got a "
                f"{numpy.dtype(dtype).name} array; convert it (x.astype(...)) or set "
                "kernel.check_pointers = False"
            )
    return v


def header_reader(options, source_dir: str | None):
    """``include(name, angled, includer)`` for directives.py: (path, text) of a user header
    (the source's directory, ``-I``) that is a UTF-8 regular file, else None (not read)."""
    dirs = tuple(
        discovery.SearchDir(f"user{i}", d, "user") for i, d in enumerate(options.include_dirs)
    )

    def include(name: str, angled: bool, includer):
        found = search.find(
            name, angled=angled, includer=includer, source_dir=source_dir, dirs=dirs
        )
        if found is None:
            return None
        try:
            return found, read_bytes(found.path).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    return include


def signature_for(source: str, entry: str, options, source_dir: str | None) -> Signature:
    """The parsed signature of ``entry`` in ``source`` and the user's headers, read in include
    order (SignatureError when it cannot be parsed safely)."""
    include = header_reader(options, source_dir) if (source_dir or options.include_dirs) else None
    return parse_signature(
        source, entry, options.macros, include=include, complete=not options.pre_includes
    )
