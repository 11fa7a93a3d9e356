"""Lexing CUDA C++ for the signature reader (signature.py): tokens, bracket matching and
splitting, and macro substitution. Directives are read by directives.py, declared types by
reading.py, constant expressions by cexpr.py. Anything it does not understand raises
SignatureError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..ground.errors import RawcodeError


class SignatureError(RawcodeError, ValueError):
    """The declaration could not be parsed safely."""


# ------------------------------------------------------------------ lexing

_COMMENT_OR_STRING = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S
)
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<num>0[xX][0-9a-fA-F']+[uUlL]*|(?:\d[\d']*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[A-Za-z]*)
  | (?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<op>::|->|\.\.\.|&&|\|\||<<|<=|>=|==|!=|\[\[|\]\]|.)
""",
    re.X | re.S,
)


def tokenize(text: str) -> list[str]:
    """The C++ tokens of ``text``, whitespace dropped."""
    return [m.group() for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]


@dataclass
class Unit:
    """What the parser learns from one or more sources: tokens outside directives (``flags``:
    those under a condition that could not be evaluated), object-like macros, function-like
    macro names, aliases (typedef/using), enums, and the names it refuses to resolve, with why
    (``refused``: a macro; ``refused_types``: an alias, enum or enumerator)."""

    tokens: list
    macros: dict
    function_macros: dict  # name -> (parameter names, body tokens)
    aliases: dict
    enums: dict  # name -> underlying base type text
    enumerators: dict  # enumerator name -> [value token]
    flags: list = field(default_factory=list)
    refused: dict = field(default_factory=dict)
    refused_types: dict = field(default_factory=dict)
    structs: set = field(default_factory=set)  # struct/class/union names defined in the text
    scoped: dict = field(default_factory=dict)  # (enum class, enumerator) -> [value token]


def _unqualify(tokens: list[str]) -> list[str]:
    """Drop ``Scope::`` prefixes, so ``Mode::MUL`` reads as the enumerator ``MUL``."""
    out: list[str] = []
    for t in tokens:
        if t == "::" and out and _is_id(out[-1]):
            out.pop()
        elif t != "::":
            out.append(t)
    return out


def _find(tokens: list[str], i: int, what: str) -> int:
    """Index of the first ``what`` at or after ``i`` (len(tokens) when there is none)."""
    while i < len(tokens) and tokens[i] != what:
        i += 1
    return i


def _is_id(t: str) -> bool:
    """Whether the token ``t`` is an identifier or keyword."""
    return bool(t) and (t[0].isalpha() or t[0] == "_")


def _match(tokens: list[str], i: int, open_: str, close: str) -> int:
    """Index of the token closing the bracket opened at ``i``."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j] == open_:
            depth += 1
        elif tokens[j] == close:
            depth -= 1
            if depth == 0:
                return j
    raise SignatureError(f"unbalanced {open_!r}")


def split_top(tokens: list[str], sep: str = ",") -> list[list[str]]:
    """Split at ``sep`` outside (), [], {} and <> nesting (a ``<``/``>`` inside parentheses or
    brackets is a comparison: C++ requires one in a template argument to be parenthesised)."""
    parts: list[list[str]] = []
    cur: list[str] = []
    depth = angle = 0
    for t in tokens:
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
        elif t == "<" and depth == 0:
            angle += 1
        elif t == ">" and depth == 0:
            angle = max(angle - 1, 0)
        if t == sep and depth == 0 and angle == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur or parts:
        parts.append(cur)
    return parts


def match_angle(tokens: list[str], i: int) -> int:
    """Index of the ``>`` closing the ``<`` at ``i``, skipping any inside () or []."""
    depth = angle = 0
    for j in range(i, len(tokens)):
        t = tokens[j]
        if t in ("(", "["):
            depth += 1
        elif t in (")", "]"):
            depth -= 1
        elif depth == 0 and t == "<":
            angle += 1
        elif depth == 0 and t == ">":
            angle -= 1
            if angle == 0:
                return j
    raise SignatureError("unbalanced '<'")


# ------------------------------------------------------------------ macros

_MAX_EXPANDED = 65536  # tokens one substitution may produce: more is refused


def substitute(
    tokens, table: dict, functions: dict | None = None, limit: int = 16, refused=None
) -> list[str]:
    """Replace identifiers found in ``table`` by their token lists and calls of ``functions``
    (function-like macros: (parameters, body)) by their bodies, to a fixed point. A name in
    ``refused`` (name -> reason) raises SignatureError with that reason."""
    out = list(tokens)
    refused = refused or {}
    for _ in range(limit):
        changed, new, i = False, [], 0
        while i < len(out):
            t = out[i]
            if t in refused:
                raise SignatureError(refused[t])
            if t in table and table[t] == [t]:
                new.append(t)  # ``#define restrict restrict``: stops, as cpp does
            elif t in table:
                new.extend(table[t])
                changed = True
                if len(new) > _MAX_EXPANDED:
                    raise SignatureError(f"a macro or alias expands past {_MAX_EXPANDED} tokens")
            elif functions and t in functions and i + 1 < len(out) and out[i + 1] == "(":
                close = _match(out, i + 1, "(", ")")
                new.extend(_expand_call(t, functions[t], split_top(out[i + 2 : close])))
                changed, i = True, close
            else:
                new.append(t)
            i += 1
        out = new
        if len(out) > _MAX_EXPANDED:
            raise SignatureError(f"a macro or alias expands past {_MAX_EXPANDED} tokens")
        if not changed:
            return out
    names = sorted({t for t in out if t in table or (functions and t in functions)})
    raise SignatureError(f"recursive alias or macro: {', '.join(names[:3])}")


def _expand_call(name: str, macro: tuple, args: list[list[str]]) -> list[str]:
    params, body = macro
    if "#" in body or "##" in body or "..." in params or "__VA_ARGS__" in body:
        raise SignatureError(f"the macro {name} is too unusual to expand")
    if len(args) != len(params) and not (not params and args in ([], [[]])):
        raise SignatureError(f"the macro {name} takes {len(params)} arguments")
    table = dict(zip(params, args, strict=False))
    return [x for t in body for x in table.get(t, [t])]
