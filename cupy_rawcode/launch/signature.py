"""Kernel signatures: each entry point's parameter names, declared types and defaults, read from
the CUDA source (and the user's own headers) with a small declaration parser over the tokens,
macros, aliases and enums that lexer.py reads.

Object-like macros (``#define``, ``-D``), ``typedef``/``using`` aliases, enums and template
arguments of a name expression are substituted before a parameter's type is classified. Anything
the parser does not understand raises SignatureError; the caller then falls back to
positional-only launches and converts nothing, so a misparse never becomes a wrong conversion.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cexpr import convert_default, evaluate_typed
from .ctype import _SKIP_CALLS, CType, classify, split_declarator
from .lexer import (
    SignatureError,
    Unit,
    _find,
    _is_id,
    _match,
    _unqualify,
    match_angle,
    split_top,
    substitute,
    tokenize,
)
from .reading import read_unit

__all__ = ["CType", "NO_DEFAULT", "Param", "Signature", "SignatureError", "parse_signature"]

NO_DEFAULT = type("NoDefault", (), {"__repr__": lambda self: "NO_DEFAULT"})()


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
    span: tuple = (0, 0)  # token indices from the prefix to the closing parenthesis
    error: tuple | None = None  # (tokens, why) for a declaration that could not be read


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
            try:
                decl, i = _declaration(tokens, start, i, stack)
            except SignatureError as e:  # kept, so that asking for this kernel raises
                end = min(_find(tokens, i, ";"), _find(tokens, i, "{"))
                decl = Declaration("", (), (), False, (start, end), (tokens[i:end], str(e)))
                i = end
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
        close = match_angle(prefix, k + 1)
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
        Declaration(
            f"{ns}::{name}" if ns else name,
            template,
            tuple(map(tuple, params)),
            extern_c,
            (start, close + 1),
        ),
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
    close = match_angle(tokens, k)
    if close != len(tokens) - 1:
        raise SignatureError(f"cannot read the name expression {entry!r}")
    return "".join(tokens[:k]), [p for p in split_top(tokens[k + 1 : close])]


def _same_name(qualified: str, wanted: str) -> bool:
    wanted = wanted.lstrip(":")
    return qualified == wanted or (("::" not in wanted) and qualified.rsplit("::", 1)[-1] == wanted)


def find_signature(unit: Unit, entry: str) -> Signature:
    """The signature of the kernel ``entry`` (a name or a name expression) in ``unit``."""
    name, args = parse_entry(entry)
    found = declarations(unit.tokens)
    short = name.rsplit("::", 1)[-1]
    for d in found:
        if d.error is not None and short in d.error[0]:
            raise SignatureError(f"a declaration of {short} cannot be read: {d.error[1]}")
    decls = [d for d in found if d.error is None and _same_name(d.name, name)]
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
    for d in decls:
        if any(unit.flags[d.span[0] : d.span[1]]):
            raise SignatureError(f"the declaration of {name} is under #if/#ifdef")
    params = [_parameter(unit, decls, idx, subs, name) for idx in range(len(decls[0].params))]
    seen = [p.name for p in params if p.name]
    if len(seen) != len(set(seen)):
        raise SignatureError(f"{name} repeats a parameter name")
    if any(p.type.base == "void" and not p.type.pointer for p in params):
        raise SignatureError(f"{name} has a void parameter")
    return Signature(
        entry if args is not None else decls[0].name, tuple(params), any(d.extern_c for d in decls)
    )


def _parameter(unit: Unit, decls: list, idx: int, subs: dict, name: str) -> Param:
    """Parameter ``idx`` of ``name`` over its declarations: the name split off after macros,
    the type read after aliases, the default evaluated and converted as C does."""
    refused = {**unit.refused, **unit.refused_types}
    table = {**unit.macros, **unit.aliases}
    ctype = pname = None
    default_tokens = None
    for d in decls:
        toks = substitute(
            substitute(d.params[idx], subs), unit.macros, unit.function_macros, refused=unit.refused
        )
        type_toks, nm, df, arrays = split_declarator(toks, unit)
        ct = classify(
            substitute(type_toks, table, unit.function_macros, refused=refused), unit, arrays
        )
        if ctype is not None and (ct.base, ct.pointer) != (ctype.base, ctype.pointer):
            raise SignatureError(f"declarations of {name} disagree on parameter {idx + 1}")
        ctype, pname = ct, nm or pname
        if df is not None:
            default_tokens = (df, d.params[idx][d.params[idx].index("=") + 1 :])
    if ctype is None:  # decls[0] has this parameter, so every pass sets ctype
        raise SignatureError(f"{name}: no type for parameter {idx + 1}")
    if default_tokens is None:
        return Param(pname, ctype, NO_DEFAULT, None)
    text = " ".join(default_tokens[1]).replace(" :: ", "::")
    where = f"the default of {name}'s parameter {pname or idx + 1}"
    try:
        expr = _unqualify(
            substitute(
                _scoped(default_tokens[0], unit), unit.enumerators, refused=unit.refused_types
            )
        )
        if ctype.reference:
            raise SignatureError("a default for a reference")
        value = convert_default(evaluate_typed(expr), ctype.dtype, ctype.is_pointer, expr)
    except SignatureError as e:
        raise SignatureError(f"{where} ({text}): {e}") from None
    return Param(pname, ctype, value, text)


def _scoped(tokens: list[str], unit: Unit) -> list[str]:
    """``E::X`` of an enum class replaced by its value (refused when it is not certain)."""
    out: list[str] = []
    for t in tokens:
        if len(out) >= 2 and out[-1] == "::" and (out[-2], t) in unit.scoped:
            enum, name = out[-2], f"{out[-2]}::{t}"
            if name in unit.refused_types:
                raise SignatureError(unit.refused_types[name])
            del out[-2:]
            while len(out) >= 2 and out[-1] == "::" and _is_id(out[-2]):
                del out[-2:]  # ns::E::X
            if out and out[-1] == "::":
                out.pop()
            out += unit.scoped[(enum, t)]
        else:
            out.append(t)
    return out


def parse_signature(source: str, entry: str, defines=(), include=None, complete=True) -> Signature:
    """The signature of ``entry`` in ``source``; ``include`` reads the user's headers in place
    (directives.py), ``complete`` is False when NVRTC reads something first that is not read
    here. Raises SignatureError, whatever fails."""
    try:
        return find_signature(read_unit([source], defines, include, complete), entry)
    except SignatureError:
        raise
    except Exception as e:
        raise SignatureError(f"cannot read the declaration: {type(e).__name__}: {e}") from None
