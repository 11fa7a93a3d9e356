"""What the sources declare, for the signature reader: the ``typedef``/``using`` aliases, the
enums and their enumerators, over the tokens and macros directives.py reads. Names are not
scoped: a name declared twice with different meanings (in two namespaces, a struct, a function
body) or under a condition that could not be evaluated is refused by name, never guessed. One
forward pass: unterminated declarations cost no rescans."""

from __future__ import annotations

from .cexpr import evaluate_typed
from .ctype import _ARITH, OPAQUE_SIZES, underlying_dtype
from .directives import read_lines
from .lexer import SignatureError, Unit, _is_id, _unqualify, split_top, substitute

_LONGEST = 4096  # tokens: a longer (or unterminated) declaration is refused, not rescanned
_BUILTIN_NAMES = {"half", "half2", "size_t", "dim3", "uint3", "int3", "float2", "nv_bfloat16"}
_SUFFIX = {"uint32": "u", "int64": "ll", "uint64": "ull"}  # smaller types promote to int


def read_unit(texts: list[str], defines=(), include=None, complete=True) -> Unit:
    """Lex ``texts`` (read in order, the source last; ``include`` reads the user's headers in
    place) with the ``-D``/``-U`` macros applied first (see directives.py), then collect the
    types they declare."""
    lines = read_lines(texts, defines, include, complete)
    unit = Unit(lines.tokens, lines.macros, lines.function_macros, {}, {}, {})
    unit.flags, unit.refused = lines.flags, lines.refused
    _collect_types(unit)
    return unit


def _next_of(tokens: list[str], stops: tuple[str, ...]) -> list[int]:
    """For each index, the index of the first token in ``stops`` at or after it."""
    out, nxt = [0] * (len(tokens) + 1), len(tokens)
    out[-1] = nxt
    for i in range(len(tokens) - 1, -1, -1):
        if tokens[i] in stops:
            nxt = i
        out[i] = nxt
    return out


def _closing_braces(tokens: list[str]) -> dict[int, int]:
    """Index of each ``{`` -> index of its ``}`` (len(tokens) when unclosed)."""
    out, stack = {}, []
    for i, t in enumerate(tokens):
        if t == "{":
            stack.append(i)
        elif t == "}" and stack:
            out[stack.pop()] = i
    for i in stack:
        out[i] = len(tokens)
    return out


def _declare(
    unit: Unit, table: dict, name: str, body: list[str], flagged: bool, scoped: bool = False
) -> None:
    """Record ``name`` in ``table``; a second, different meaning or a flagged one refuses it,
    as does a builtin's name declared inside a struct or namespace (it shadows only there)."""
    existing = unit.aliases.get(name, unit.enums.get(name))
    if scoped and (name in _ARITH or name in OPAQUE_SIZES or name in _BUILTIN_NAMES):
        unit.refused_types[name] = f"{name!r} is declared in a struct or namespace"
    elif flagged:
        unit.refused_types[name] = f"{name!r} is declared under #if/#ifdef"
    elif existing is not None and existing != body:
        unit.refused_types[name] = f"the alias {name!r} is defined more than once"
    table.setdefault(name, body)


def _refuse_long(unit: Unit, tokens: list[str], i: int, end: int) -> None:
    """Refuse the name a declaration too long to read may declare."""
    for name in (tokens[i + 1 : i + 3] + tokens[end - 1 : end]) if end > i + 1 else []:
        if _is_id(name):
            unit.refused_types[name] = f"the declaration of {name!r} is too long to read"


def _collect_types(unit: Unit) -> None:
    """typedef / using aliases and enums, wherever they are declared (structs stay opaque)."""
    tokens, flags = unit.tokens, unit.flags
    n = len(tokens)
    semi = _next_of(tokens, (";",))
    brace_or_semi = _next_of(tokens, ("{", ";"))
    closing = _closing_braces(tokens)
    bodies = []
    scoped = [False]  # per open '{': inside a scope other than extern "C"
    for i, t in enumerate(tokens):
        flagged = bool(flags) and flags[i]
        if t == "{":
            extern_c = i >= 2 and tokens[i - 1] == '"C"' and tokens[i - 2] == "extern"
            scoped.append(scoped[-1] or not extern_c)
        elif t == "}" and len(scoped) > 1:
            scoped.pop()
        if t in ("typedef", "using", "enum") and semi[i] - i > _LONGEST:
            _refuse_long(unit, tokens, i, semi[i])
        elif t == "typedef":
            _typedef(unit, tokens[i + 1 : semi[i]], flagged, scoped[-1])
        elif t == "using" and i + 2 < n and _is_id(tokens[i + 1]) and tokens[i + 2] == "=":
            name = tokens[i + 1]
            _declare(unit, unit.aliases, name, tokens[i + 3 : semi[i]], flagged, scoped[-1])
        elif t in ("struct", "class", "union") and i + 2 < n and _is_id(tokens[i + 1]):
            if tokens[i + 2] in ("{", ":") and (i == 0 or tokens[i - 1] != "enum"):
                unit.structs.add(tokens[i + 1])
        elif t == "enum":
            j = i + 1
            scoped_enum = j < n and tokens[j] in ("class", "struct")
            j += scoped_enum
            if j < n and _is_id(tokens[j]):
                name, under, fixed = tokens[j], ["int"], False
                k = brace_or_semi[j]
                if j + 1 < n and tokens[j + 1] == ":":
                    under, fixed = tokens[j + 2 : k], True
                _declare(unit, unit.enums, name, under, flagged)
                if k < n and tokens[k] == "{" and closing[k] - k > _LONGEST:
                    unit.refused_types[name] = f"the enum {name!r} is too long to read"
                elif k < n and tokens[k] == "{":
                    bodies.append((name, fixed, tokens[k + 1 : closing[k]], flagged, scoped_enum))
    for name, fixed, body, flagged, scoped_enum in bodies:
        _enumerators(name, fixed, body, unit, flagged, scoped_enum)
    _refuse_shadowed(unit, bodies)


def _enumerators(
    enum: str, fixed: bool, body: list[str], unit: Unit, flagged: bool, scoped: bool = False
) -> None:
    """Values of ``A, B = 5, C`` as literals of the enum's promoted type. An enum with no fixed
    type whose values are not all computable, or not all within int, is refused."""
    try:
        dtype = underlying_dtype(unit.enums[enum], unit) if fixed else "int32"
    except SignatureError as e:
        dtype, unit.refused_types[enum] = None, str(e)
    suffix = _SUFFIX.get(dtype or "", "")
    value = -1
    own: dict[str, list[str]] = {}
    for part in split_top(body):
        if not part or not _is_id(part[0]):
            continue
        try:
            if len(part) > 2 and part[1] == "=":
                table = {**unit.enumerators, **own}
                expr = substitute(part[2:], table, refused=unit.refused_types)
                value = int(evaluate_typed(_unqualify(expr))[1])
            else:
                value += 1
        except (SignatureError, TypeError, ValueError):
            if not fixed:
                unit.refused_types[enum] = f"cannot compute every enumerator of {enum!r}"
            return
        if not fixed and not -(2**31) <= value < 2**31:
            unit.refused_types[enum] = f"the enum {enum!r} has an enumerator outside int"
        token = [str(value) + suffix] if value >= 0 else ["(", "-", str(-value) + suffix, ")"]
        name = part[0]
        own[name] = token
        if scoped:  # an enum class's enumerator is only in scope qualified: E::X
            key = (enum, name)
            if flagged or (key in unit.scoped and unit.scoped[key] != token):
                unit.refused_types[f"{enum}::{name}"] = f"'{enum}::{name}' is not certain"
            unit.scoped.setdefault(key, token)
            continue
        if flagged:
            unit.refused_types[name] = f"{name!r} is declared under #if/#ifdef"
        elif name in unit.enumerators and unit.enumerators[name] != token:
            unit.refused_types[name] = f"the enumerator {name!r} is defined more than once"
        unit.enumerators.setdefault(name, token)


def _typedef(unit: Unit, decl: list[str], flagged: bool, scoped: bool) -> None:
    """``typedef T a, *b;``: each declarator an alias of T (with its pointers); one that is not
    a plain name after ``*``/``&`` is refused."""
    if "{" in decl or "(" in decl or not decl or not _is_id(decl[-1]):
        return  # a struct definition or a function type: opaque
    parts = split_top(decl)
    first = parts[0]
    if not first or not _is_id(first[-1]) or first[-1] in first[:-1]:
        return  # typedef struct Foo Foo;: the struct itself
    _declare(unit, unit.aliases, first[-1], first[:-1], flagged, scoped)
    base = list(first[:-1])
    while base and base[-1] in ("*", "&", "const"):
        base.pop()
    for part in parts[1:]:
        if part and _is_id(part[-1]) and all(t in ("*", "&", "const") for t in part[:-1]):
            _declare(unit, unit.aliases, part[-1], base + part[:-1], flagged, scoped)
        else:
            for name in filter(_is_id, part):
                unit.refused_types[name] = f"cannot read the typedef of {name!r}"


def _refuse_shadowed(unit: Unit, bodies: list) -> None:
    """Refuse an enumerator whose name is also declared as something else outside enum bodies
    (``constexpr int X = ...``, ``X{...}``, ``X(...)``): lookup without scope could pick it."""
    names = set(unit.enumerators)
    if not names:
        return
    toks = unit.tokens
    inside = [
        i
        for i, t in enumerate(toks)
        if t in names and toks[i + 1 : i + 2] in (["="], ["{"], ["("], ["["])
    ]
    counts: dict[str, int] = {}
    for i in inside:
        counts[toks[i]] = counts.get(toks[i], 0) + 1
    defined_in_enums: dict[str, int] = {}
    for _, _, body, _, _ in bodies:
        for part in split_top(body):
            if part and _is_id(part[0]) and len(part) > 1 and part[1] == "=":
                defined_in_enums[part[0]] = defined_in_enums.get(part[0], 0) + 1
    for name, c in counts.items():
        if c > defined_in_enums.get(name, 0):
            unit.refused_types[name] = f"{name!r} names an enumerator and something else"
