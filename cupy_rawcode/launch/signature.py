"""Kernel signatures: each entry point's parameter names, declared types and defaults, read from
the CUDA source (and the user's own headers) with a small declaration parser over the tokens,
macros, aliases and enums that lexer.py reads.

Object-like macros (``#define``, ``-D``), ``typedef``/``using`` aliases, enums and template
arguments of a name expression are substituted before a parameter's type is classified. Anything
the parser does not understand raises SignatureError; the caller then falls back to
positional-only launches and converts nothing, so a misparse never becomes a wrong conversion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lexer import (
    SignatureError,
    Unit,
    _find,
    _is_id,
    _match,
    _unqualify,
    evaluate,
    read_unit,
    split_top,
    substitute,
    tokenize,
)

NO_DEFAULT = type("NoDefault", (), {"__repr__": lambda self: "NO_DEFAULT"})()


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

    @property
    def is_pointer(self) -> bool:
        return self.pointer > 0


@dataclass(frozen=True)
class Param:
    name: str | None
    type: CType
    default: object = NO_DEFAULT
    default_text: str | None = None  # as written, also when it could not be evaluated

    def __str__(self) -> str:
        s = self.type.text + (f" {self.name}" if self.name else "")
        return s + (f" = {self.default_text}" if self.default_text is not None else "")


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]
    extern_c: bool = False

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})"

    def names(self) -> list[str]:
        return [p.name for p in self.params if p.name]


# ------------------------------------------------------------------ declarations


@dataclass(frozen=True)
class Declaration:
    name: str  # qualified with enclosing namespaces
    template: tuple  # ((kind, name, default tokens), ...); kind 'type' or 'value'
    params: tuple  # token lists, one per parameter
    extern_c: bool


_SKIP_CALLS = {
    "__launch_bounds__",
    "__attribute__",
    "__declspec",
    "alignas",
    "__maxnreg__",
    "__cluster_dims__",
}


def declarations(tokens: list[str]) -> list[Declaration]:
    """Every ``__global__`` function declared or defined in ``tokens``."""
    out: list[Declaration] = []
    stack: list[str] = []
    start, i, n = 0, 0, len(tokens)
    while i < n:
        t = tokens[i]
        if t in (";", "}"):
            if t == "}" and stack:
                stack.pop()
            start = i + 1
        elif t == "{":
            prev = tokens[start:i]
            if len(prev) >= 2 and prev[-2] == "namespace":
                stack.append(prev[-1])
            elif prev[:2] == ["extern", '"C"']:
                stack.append('extern"C"')
            elif prev and prev[0] == "namespace" and len(prev) == 1:
                stack.append("")
            else:  # a body: skip it
                i = _match(tokens, i, "{", "}")
                start = i + 1
            if i < n and tokens[i] == "{":
                start = i + 1
        elif t == "__global__":
            decl, i = _declaration(tokens, start, i, stack)
            out.append(decl)
            if i < n and tokens[i] == "{":
                i = _match(tokens, i, "{", "}")
            start = i + 1
        i += 1
    return out


def _declaration(tokens: list[str], start: int, g: int, stack: list[str]):
    prefix = tokens[start:g]
    template: tuple = ()
    if "template" in prefix:
        k = prefix.index("template")
        close = _match(prefix, k + 1, "<", ">")
        template = tuple(_template_param(p) for p in split_top(prefix[k + 2 : close]) if p)
    extern_c = 'extern"C"' in stack or '"C"' in prefix
    j = g + 1
    while j < len(tokens):
        t = tokens[j]
        if t in _SKIP_CALLS and j + 1 < len(tokens) and tokens[j + 1] == "(":
            j = _match(tokens, j + 1, "(", ")") + 1
            continue
        if t == "[[":
            j = _find(tokens, j, "]]") + 1
            continue
        if t == "(":
            break
        if t in (";", "{"):
            raise SignatureError("no parameter list after __global__")
        j += 1
    name_tokens: list[str] = []
    k = j - 1
    while k > g and (_is_id(tokens[k]) or tokens[k] == "::"):
        name_tokens.insert(0, tokens[k])
        k -= 1
    while name_tokens and name_tokens[0] in ("void", "static", "inline", "__global__", "::"):
        name_tokens.pop(0)
    if not name_tokens:
        raise SignatureError("cannot find the kernel's name")
    close = _match(tokens, j, "(", ")")
    params = [p for p in split_top(tokens[j + 1 : close])]
    if params in ([["void"]], [[]]):
        params = []
    ns = "::".join(s for s in stack if s and s != 'extern"C"')
    name = "".join(name_tokens)
    return (
        Declaration(f"{ns}::{name}" if ns else name, template, tuple(map(tuple, params)), extern_c),
        close + 1,
    )


def _template_param(tokens: list[str]) -> tuple[str, str, tuple]:
    default: list[str] = []
    if "=" in tokens:
        k = tokens.index("=")
        tokens, default = tokens[:k], tokens[k + 1 :]
    if "..." in tokens:
        raise SignatureError("variadic template parameters are not supported")
    if not tokens or not _is_id(tokens[-1]):
        raise SignatureError(f"unusual template parameter {' '.join(tokens)!r}")
    kind = "type" if tokens[0] in ("typename", "class") and len(tokens) == 2 else "value"
    return kind, tokens[-1], tuple(default)


# ------------------------------------------------------------------ types

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
    "long": "int64",
    "unsigned long": "uint64",
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
}
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


def classify(tokens: list[str], unit: Unit) -> tuple[CType, str | None, list[str] | None]:
    """(type, parameter name, default tokens) for one parameter's tokens, already substituted."""
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
    pointer = 0
    while toks and toks[-1] == "]":  # array declarator: T x[] or T x[N]
        k = len(toks) - 1 - toks[::-1].index("[")
        toks, pointer = toks[:k], pointer + 1
    for t in toks:
        if t in unit.function_macros:
            raise SignatureError(f"declaration uses the function-like macro {t}")
    if "(" in toks:
        raise SignatureError(f"unusual declarator {' '.join(tokens)!r}")
    name = None
    if (
        len(toks) >= 2
        and _is_id(toks[-1])
        and toks[-1] not in _INT_WORDS | _QUALIFIERS | {"float", "double", "bool", "void"}
        and toks[-2] != "::"
    ):
        name = toks.pop()
    pointer += toks.count("*")
    reference = "&" in toks or "&&" in toks
    words = [t for t in toks if t not in _QUALIFIERS and t not in ("*", "&", "&&")]
    if not words:
        raise SignatureError(f"no type in {' '.join(tokens)!r}")
    text = _join(toks)
    if all(w in _INT_WORDS for w in words):
        base = canonical_int(words)
    else:
        base = _strip_ns(_join(words))
        if any(w in _INT_WORDS for w in words) or any(
            not (_is_id(w) or w in ("::", "<", ">", ",")) for w in words
        ):
            if not re.fullmatch(r"complex<(float|double)>", base):
                raise SignatureError(f"cannot read the type {' '.join(tokens)!r}")
    enum = base in unit.enums
    if enum:
        under = substitute(unit.enums[base], {**unit.macros, **unit.aliases})
        under_words = [w for w in under if w not in _QUALIFIERS]
        dtype = _ARITH.get(
            canonical_int(under_words)
            if all(w in _INT_WORDS for w in under_words)
            else _strip_ns(_join(under_words))
        )
    else:
        dtype = _ARITH.get(base)
    if base == "void":
        dtype = None
    return CType(text, base, pointer, reference, dtype, enum), name, default


def _join(tokens: list[str]) -> str:
    out = ""
    for t in tokens:
        if out and _is_id(t) and (_is_id(out[-1]) or out[-1].isdigit() or out[-1] in "*&"):
            out += " "
        out += t
    return out


# ------------------------------------------------------------------ entry points


def parse_entry(entry: str) -> tuple[str, list[list[str]] | None]:
    """'ns::kern<float, 4>' -> ('ns::kern', [['float'], ['4']]); a plain name has None args."""
    tokens = tokenize(entry.strip())
    if tokens[:1] == ["&"]:
        tokens = tokens[1:]
    if "<" not in tokens:
        if not all(_is_id(t) or t == "::" for t in tokens) or not tokens:
            raise SignatureError(f"cannot read the name {entry!r}")
        return "".join(tokens), None
    k = tokens.index("<")
    close = _match(tokens, k, "<", ">")
    if close != len(tokens) - 1:
        raise SignatureError(f"cannot read the name expression {entry!r}")
    return "".join(tokens[:k]), [p for p in split_top(tokens[k + 1 : close])]


def _same_name(qualified: str, wanted: str) -> bool:
    wanted = wanted.lstrip(":")
    return qualified == wanted or (("::" not in wanted) and qualified.rsplit("::", 1)[-1] == wanted)


def find_signature(unit: Unit, entry: str) -> Signature:
    """The signature of the kernel ``entry`` (a name or a name expression) in ``unit``."""
    name, args = parse_entry(entry)
    decls = [d for d in declarations(unit.tokens) if _same_name(d.name, name)]
    if not decls:
        raise SignatureError(f"no __global__ function named {name!r} in the source")
    if len({len(d.params) for d in decls}) > 1 or len({len(d.template) for d in decls}) > 1:
        raise SignatureError(f"{name} is overloaded")
    if args is not None and not decls[0].template:
        raise SignatureError(f"{name} is not a template")
    subs: dict[str, list[str]] = {}
    if decls[0].template:
        if args is None:
            raise SignatureError(
                f"{name} is a template: give its arguments in the name "
                "expression to get a signature"
            )
        tparams = decls[0].template
        if len(args) > len(tparams):
            raise SignatureError(f"{name} takes {len(tparams)} template arguments")
        for idx, (_kind, pname, _default) in enumerate(tparams):
            value = (
                args[idx]
                if idx < len(args)
                else list(next((d.template[idx][2] for d in decls if d.template[idx][2]), ()))
            )
            if not value:
                raise SignatureError(f"no value for template parameter {pname}")
            subs[pname] = substitute(value, subs) if idx >= len(args) else value
    table = {**unit.macros, **unit.aliases}
    params = []
    for idx in range(len(decls[0].params)):
        ctype = pname = None
        default_tokens = None
        for d in decls:
            toks = substitute(substitute(d.params[idx], subs), table, unit.function_macros)
            ct, nm, df = classify(toks, unit)
            if ctype is not None and (ct.base, ct.pointer) != (ctype.base, ctype.pointer):
                raise SignatureError(f"declarations of {name} disagree on parameter {idx + 1}")
            ctype, pname = ct, nm or pname
            if df is not None:
                default_tokens = (df, d.params[idx][d.params[idx].index("=") + 1 :])
        if ctype is None:  # decls[0] has this parameter, so every pass sets ctype
            raise SignatureError(f"{name}: no type for parameter {idx + 1}")
        default, text = NO_DEFAULT, None
        if default_tokens is not None:
            text = " ".join(default_tokens[1]).replace(" :: ", "::")
            default = evaluate(_unqualify(substitute(default_tokens[0], unit.enumerators)))
        params.append(Param(pname, ctype, default, text))
    seen = [p.name for p in params if p.name]
    if len(seen) != len(set(seen)):
        raise SignatureError(f"{name} repeats a parameter name")
    if any(p.type.base == "void" and not p.type.pointer for p in params):
        raise SignatureError(f"{name} has a void parameter")
    return Signature(
        entry if args is not None else decls[0].name, tuple(params), any(d.extern_c for d in decls)
    )


def parse_signature(source: str, entry: str, defines=(), headers=()) -> Signature:
    """The signature of ``entry`` in ``source``; ``headers`` are the texts of the user's own
    headers, whose macros, aliases and kernels count too. Raises SignatureError."""
    return find_signature(read_unit(list(headers) + [source], defines), entry)
