"""C constant expressions for the signature reader: defaults and enumerators, evaluated with C's
types (literal suffixes, the usual arithmetic conversions, unsigned wrap-around, division and
``%`` truncating toward zero), and a default converted to its parameter's type as C converts it.
What C leaves undefined or this reader does not model (signed overflow, ``!``, casts, ``sizeof``)
raises SignatureError: a default is refused rather than guessed."""

from __future__ import annotations

import ast
import math
import re
import sys
from typing import Any

import numpy

from .lexer import SignatureError

_LONG_BITS = 32 if sys.platform == "win32" else 64
# integer type -> (bits, unsigned, rank)
INT_TYPES = {
    "int": (32, False, 1),
    "unsigned int": (32, True, 1),
    "long": (_LONG_BITS, False, 2),
    "unsigned long": (_LONG_BITS, True, 2),
    "long long": (64, False, 3),
    "unsigned long long": (64, True, 3),
}
_MAX_TOKENS = 256  # a longer default is refused (and no recursion limit is reached)
_INT_LITERAL = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)([uU]?(?:ll|LL|l|L)?[uU]?)\Z")
_FLOAT_LITERAL = re.compile(r"((?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([fF]?)\Z")
_OPS = ("+", "-", "*", "/", "%", "<<", "~", "(", ")", "|", "&", "^", ">")


def _literal_type(digits: str, suffix: str, value: int) -> str:
    """The type of an integer literal: the first of C++'s list for its suffix that holds it."""
    s = suffix.lower()
    decimal = not digits.startswith("0") or digits == "0"
    u, size = "u" in s, s.replace("u", "")
    names = {"": ["int", "long", "long long"], "l": ["long", "long long"], "ll": ["long long"]}
    for name in names[size]:
        for cand in [f"unsigned {name}"] if u else [name, f"unsigned {name}"]:
            bits, unsigned, _ = INT_TYPES[cand]
            if unsigned and not u and decimal:
                continue
            if value < 2 ** (bits - (0 if unsigned else 1)):
                return cand
    raise SignatureError(f"the literal {digits}{suffix} is too large")


def _typed(t: str) -> tuple[str, Any]:
    """(C type, value) of one literal token."""
    t = t.replace("'", "") if t[:1].isdigit() else t
    if t in ("true", "false"):
        return "bool", t == "true"
    if t in ("nullptr", "NULL"):
        return "null", None
    if t.isascii() and re.fullmatch(r"'(\\?[^\\'])'", t):
        return "int", ord(ast.literal_eval(t))
    if m := _INT_LITERAL.match(t):
        digits = m.group(1)
        value = int(digits, 8) if re.fullmatch(r"0[0-7]+", digits) else int(digits, 0)
        return _literal_type(digits, m.group(2), value), value
    if m := _FLOAT_LITERAL.match(t):
        return ("float", numpy.float32(m.group(1))) if m.group(2) else ("double", float(m.group(1)))
    raise SignatureError(f"cannot evaluate the token {t!r}")


def _wrap(kind: str, value: int) -> tuple[str, int]:
    """``value`` as the integer type ``kind``: unsigned wraps; signed overflow is refused."""
    bits, unsigned, _ = INT_TYPES[kind]
    if unsigned:
        return kind, value % (1 << bits)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise SignatureError(f"{value} overflows {kind}")
    return kind, value


def _promote(x: tuple) -> tuple:
    kind, v = x
    if kind == "bool":
        return "int", int(v)
    if kind == "null":
        raise SignatureError("nullptr in arithmetic")
    return x


def _common(a: tuple, b: tuple) -> str:
    """The usual arithmetic conversions: the type both operands are converted to."""
    ka, kb = a[0], b[0]
    if "double" in (ka, kb):
        return "double"
    if "float" in (ka, kb):
        return "float"
    if ka == kb:
        return ka
    (_, ua, ra), (_, ub, rb) = INT_TYPES[ka], INT_TYPES[kb]
    if ua == ub:
        return ka if ra > rb else kb
    unsigned_kind, signed_kind = (ka, kb) if ua else (kb, ka)
    if INT_TYPES[unsigned_kind][2] >= INT_TYPES[signed_kind][2]:
        return unsigned_kind
    if INT_TYPES[signed_kind][0] > INT_TYPES[unsigned_kind][0]:
        return signed_kind
    return "unsigned " + signed_kind


def int_to_float(ftype, v: int):
    """The integer ``v`` converted to the NumPy float type ``ftype`` with one rounding (to
    nearest, ties to even), as C converts it; numpy's own conversion goes through double."""
    bits = numpy.finfo(ftype).nmant + 1
    n = abs(v).bit_length()
    if n > bits:
        drop = n - bits
        q, r = divmod(abs(v), 1 << drop)
        half = 1 << (drop - 1)
        q += r > half or (r == half and q & 1)
        v = (q << drop) * (1 if v >= 0 else -1)
    with numpy.errstate(all="ignore"):
        return ftype(float(v)) if abs(v) < 2**1023 else ftype(math.copysign(math.inf, v))


def _as(x: tuple, kind: str) -> Any:
    """The value of ``x`` converted to ``kind`` (one of the usual-conversion results)."""
    if kind in ("float", "double"):
        ftype = numpy.float32 if kind == "float" else numpy.float64
        return (
            ftype(x[1]) if isinstance(x[1], (float, numpy.floating)) else int_to_float(ftype, x[1])
        )
    return _wrap(kind, int(x[1]))[1]


def _float_result(kind: str, value) -> tuple:
    out = (numpy.float32 if kind == "float" else numpy.float64)(value)
    if not math.isfinite(out):
        raise SignatureError("the default overflows")
    return kind, out


def _binary(op: type, a: tuple, b: tuple) -> tuple:
    a, b = _promote(a), _promote(b)
    if op in (ast.LShift, ast.RShift):
        if a[0] not in INT_TYPES or b[0] not in INT_TYPES:
            raise SignatureError("a shift of a non-integer")
        bits, unsigned, _ = INT_TYPES[a[0]]
        n, v = int(b[1]), int(a[1])
        if not 0 <= n < bits or (op is ast.LShift and not unsigned and v < 0):
            raise SignatureError("a shift C leaves undefined")
        return _wrap(a[0], v << n if op is ast.LShift else v >> n)
    kind = _common(a, b)
    x, y = _as(a, kind), _as(b, kind)
    if kind in ("float", "double"):
        ops = {ast.Add: x + y, ast.Sub: x - y, ast.Mult: x * y}
        if op is ast.Div and y != 0:
            return _float_result(kind, x / y)
        if op not in ops:
            raise SignatureError("this operator on a floating-point value")
        return _float_result(kind, ops[op])
    x, y = int(x), int(y)
    if op in (ast.Div, ast.Mod):
        if y == 0:
            raise SignatureError("a division by zero")
        q = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
        return _wrap(kind, q if op is ast.Div else x - q * y)
    fns = {
        ast.Add: lambda: x + y,
        ast.Sub: lambda: x - y,
        ast.Mult: lambda: x * y,
        ast.BitOr: lambda: x | y,
        ast.BitAnd: lambda: x & y,
        ast.BitXor: lambda: x ^ y,
    }
    if op not in fns:
        raise SignatureError("an unsupported operator")
    return _wrap(kind, fns[op]())


def _unary(op: type, a: tuple) -> tuple:
    kind, v = _promote(a)
    if kind in ("float", "double"):
        if op is ast.Invert:
            raise SignatureError("~ on a floating-point value")
        return kind, (-v if op is ast.USub else v)
    v = int(v)
    return _wrap(kind, -v if op is ast.USub else ~v if op is ast.Invert else v)


def _eval(node, values: list) -> tuple:
    if isinstance(node, ast.Name) and node.id.startswith("v"):
        return values[int(node.id[1:])]
    if isinstance(node, ast.UnaryOp) and type(node.op) in (ast.USub, ast.UAdd, ast.Invert):
        return _unary(type(node.op), _eval(node.operand, values))
    if isinstance(node, ast.BinOp):
        return _binary(type(node.op), _eval(node.left, values), _eval(node.right, values))
    raise SignatureError("not a constant expression")


def evaluate_typed(tokens: list[str]) -> tuple[str, Any]:
    """(C type, value) of a constant expression of literals."""
    if len(tokens) > _MAX_TOKENS:
        raise SignatureError(f"the expression is longer than {_MAX_TOKENS} tokens")
    parts, values = [], []
    for t in tokens:
        if t in _OPS:
            parts.append(t)
        else:
            try:
                with numpy.errstate(all="ignore"):
                    values.append(_typed(t))
            except (SignatureError, SyntaxError, ValueError, TypeError):
                raise SignatureError(f"cannot evaluate {' '.join(tokens)!r}") from None
            parts.append(f"v{len(values) - 1}")
    expr = " ".join(parts).replace("> >", ">>")
    try:
        with numpy.errstate(all="ignore"):
            return _eval(ast.parse(expr, mode="eval").body, values)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        raise SignatureError(f"cannot evaluate {' '.join(tokens)!r}: {e}") from None


def evaluate(tokens: list[str]):
    """The Python value of a constant expression (an int, float, bool or None)."""
    kind, value = evaluate_typed(tokens)
    return float(value) if kind in ("float", "double") else value


def convert_default(typed: tuple, dtype: str | None, pointer: bool, tokens: list[str]):
    """A default of C type and value ``typed`` converted to its parameter's type as C's implicit
    conversion does: None for a null pointer, else a NumPy scalar of ``dtype``."""
    kind, v = typed
    if pointer:
        if kind == "null" or tokens == ["0"]:
            return None
        raise SignatureError(f"the default {' '.join(tokens)!r} is not a null pointer")
    if dtype is None or kind == "null":
        raise SignatureError(f"cannot convert the default {' '.join(tokens)!r}")
    dt = numpy.dtype(dtype)
    real = kind in ("float", "double")
    if dt.kind == "b":
        return numpy.bool_(v != 0)
    if dt.kind in "iu":
        if real and not math.isfinite(v):
            raise SignatureError(f"the default {' '.join(tokens)!r} is not finite")
        n = math.trunc(v) if real else int(v)
        info = numpy.iinfo(dt)
        if real and not info.min <= n <= info.max:
            raise SignatureError(f"the default {' '.join(tokens)!r} does not fit {dt.name}")
        n %= 1 << (8 * dt.itemsize)
        return dt.type(n - (1 << (8 * dt.itemsize)) if dt.kind == "i" and n > info.max else n)
    with numpy.errstate(all="ignore"):
        out = dt.type(float(v)) if real else int_to_float(dt.type, int(v))
    if not numpy.all(numpy.isfinite(out)) and not (real and not math.isfinite(v)):
        raise SignatureError(f"the default {' '.join(tokens)!r} does not fit {dt.name}")
    return out
