"""Parameter types for the signature reader: a parameter's tokens split into type, name,
default and array dimensions, and the type classified: its base type, pointer depth and NumPy
dtype (arithmetic, bool, half, complex, enums; ``long`` as wide as on this platform), or opaque.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from .lexer import SignatureError, Unit, _find, _is_id, _match, substitute

_LONG = "int32" if sys.platform == "win32" else "int64"
_SKIP_CALLS = {
    "__launch_bounds__",
    "__attribute__",
    "__declspec",
    "alignas",
    "__maxnreg__",
    "__cluster_dims__",
}


@dataclass(frozen=True)
class CType:
    """A parameter's type after substitution. ``dtype`` is the NumPy dtype name of the base type
    when it is arithmetic, bool, half, complex or an enum; None means opaque (a struct, an
    unresolved name): values are then passed unconverted and pointers unchecked."""

    text: str
    base: str
    pointer: int = 0
    reference: bool = False
    dtype: str | None = None
    enum: bool = False
    struct: bool = False  # a struct/class/union the text defines (passed as given)

    @property
    def is_pointer(self) -> bool:
        return self.pointer > 0


_INT_WORDS = {"signed", "unsigned", "short", "long", "int", "char"}
_QUALIFIERS = {
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
    "__grid_constant__",
    "register",
    "struct",
    "class",
    "enum",
    "typename",
    "union",
}
_ARITH = {
    "bool": "bool",
    "char": "int8",
    "signed char": "int8",
    "unsigned char": "uint8",
    "short": "int16",
    "unsigned short": "uint16",
    "int": "int32",
    "unsigned int": "uint32",
    "long": _LONG,
    "unsigned long": "u" + _LONG,
    "long long": "int64",
    "unsigned long long": "uint64",
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_half": "float16",
    "int8_t": "int8",
    "int16_t": "int16",
    "int32_t": "int32",
    "int64_t": "int64",
    "uint8_t": "uint8",
    "uint16_t": "uint16",
    "uint32_t": "uint32",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "ptrdiff_t": "int64",
    "intptr_t": "int64",
    "uintptr_t": "uint64",
    "ssize_t": "int64",
    "cudaTextureObject_t": "uint64",
    "cudaSurfaceObject_t": "uint64",
    "complex<float>": "complex64",
    "complex<double>": "complex128",
    "cuFloatComplex": "complex64",
    "cuDoubleComplex": "complex128",
    "cuComplex": "complex64",
    "char16_t": "uint16",
    "char32_t": "uint32",
    "wchar_t": "uint16" if sys.platform == "win32" else "int32",
}
# types known to have no NumPy dtype here, with their size: a Python number is refused for them
OPAQUE_SIZES = {
    "__nv_bfloat16": 2,
    "nv_bfloat16": 2,
    "__nv_bfloat162": 4,
    "nv_bfloat162": 4,
    "__half2": 4,
    "half2": 4,
    "__nv_half2": 4,
    "__nv_fp8_e4m3": 1,
    "__nv_fp8_e5m2": 1,
    **{
        f"{p}{v}{n}": size * n
        for v, size in (
            ("char", 1),
            ("short", 2),
            ("int", 4),
            ("long", 4 if sys.platform == "win32" else 8),
            ("longlong", 8),
            ("float", 4),
            ("double", 8),
        )
        for p in ("", "u")
        if not (p and v in ("float", "double"))
        for n in (1, 2, 3, 4)
    },
}
_KEYWORDS = _INT_WORDS | _QUALIFIERS | {"float", "double", "bool", "void"}
_NAMESPACES = ("::", "cuda::std::", "std::", "thrust::", "cupy::")


def canonical_int(words: list[str]) -> str:
    """``unsigned long int`` -> 'unsigned long', ``signed`` -> 'int', ..."""
    unsigned = "unsigned" in words
    if "char" in words:
        return "unsigned char" if unsigned else "signed char" if "signed" in words else "char"
    base = (
        "long long"
        if words.count("long") == 2
        else "long"
        if "long" in words
        else "short"
        if "short" in words
        else "int"
    )
    return f"unsigned {base}" if unsigned else base


def _strip_ns(name: str) -> str:
    changed = True
    while changed:
        changed = False
        for p in _NAMESPACES:
            if name.startswith(p):
                name, changed = name[len(p) :], True
    return name


def split_declarator(
    tokens: list[str], unit: Unit
) -> tuple[list[str], str | None, list[str] | None, int]:
    """(type tokens, parameter name, default tokens or None, array dimensions) of one
    parameter's tokens, before aliases are substituted: a parameter named like an alias keeps
    its name."""
    default = None
    if "=" in tokens:
        k = tokens.index("=")
        tokens, default = tokens[:k], tokens[k + 1 :]
    toks = []
    i = 0
    while i < len(tokens):  # drop attributes
        t = tokens[i]
        if t == "[[":
            i = _find(tokens, i, "]]") + 1
            continue
        if t in _SKIP_CALLS and i + 1 < len(tokens) and tokens[i + 1] == "(":
            i = _match(tokens, i + 1, "(", ")") + 1
            continue
        toks.append(t)
        i += 1
    arrays = 0
    while toks and toks[-1] == "]":  # array declarator: T x[] or T x[N]
        k = len(toks) - 1 - toks[::-1].index("[")
        toks, arrays = toks[:k], arrays + 1
    for t in toks:
        if t in unit.function_macros:
            raise SignatureError(f"declaration uses the function-like macro {t}")
    if "(" in toks:
        raise SignatureError(f"unusual declarator {' '.join(tokens)!r}")
    name = None
    if (
        len(toks) >= 2
        and _is_id(toks[-1])
        and toks[-1] not in _KEYWORDS
        and toks[-2] != "::"
        and any(_is_id(t) and t not in _QUALIFIERS for t in toks[:-1])
    ):
        name = toks.pop()
    return toks, name, default, arrays


def underlying_dtype(tokens: list[str], unit: Unit) -> str | None:
    """The dtype of an enum's underlying type (its tokens, aliases and macros substituted)."""
    table = {**unit.macros, **unit.aliases}
    under = substitute(tokens, table, refused={**unit.refused, **unit.refused_types})
    words = [w for w in under if w not in _QUALIFIERS]
    if words and all(w in _INT_WORDS for w in words):
        return _ARITH.get(canonical_int(words))
    return _ARITH.get(_strip_ns(_join(words)))


def classify(toks: list[str], unit: Unit, arrays: int = 0) -> CType:
    """The type of one parameter's type tokens (name and default split off, substituted)."""
    pointer = arrays + toks.count("*")
    reference = "&" in toks or "&&" in toks
    words = [t for t in toks if t not in _QUALIFIERS and t not in ("*", "&", "&&")]
    if not words:
        raise SignatureError(f"no type in {' '.join(toks)!r}")
    text = _join(toks)
    if all(w in _INT_WORDS for w in words):
        base = canonical_int(words)
    else:
        base = _strip_ns(_join(words))
        if (
            any(w in _INT_WORDS for w in words)
            or any(not (_is_id(w) or w in ("::", "<", ">", ",")) for w in words)
            or (len(words) > 1 and any(w in ("float", "double", "bool", "void") for w in words))
        ):
            if not re.fullmatch(r"complex<(float|double)>", base):
                raise SignatureError(f"cannot read the type {' '.join(toks)!r}")
    if base in unit.refused_types:
        raise SignatureError(unit.refused_types[base])
    enum = base in unit.enums
    dtype = underlying_dtype(unit.enums[base], unit) if enum else _ARITH.get(base)
    if base == "void":
        dtype = None
    struct = base in unit.structs or any(t in ("struct", "class", "union") for t in toks)
    return CType(text, base, pointer, reference, dtype, enum, struct)


def _join(tokens: list[str]) -> str:
    out = ""
    for t in tokens:
        if out and _is_id(t) and (_is_id(out[-1]) or out[-1].isdigit() or out[-1] in "*&"):
            out += " "
        out += t
    return out
