"""Lexing CUDA C++ for the signature reader (signature.py): tokens, the macros, aliases and enums
a source defines, macro substitution and constant expressions (defaults, enumerators). Anything
it does not understand raises SignatureError.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

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
_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\()?(.*)", re.S)


def _strip_comments(text: str) -> str:
    """``text`` with each comment replaced by a space (string literals are kept)."""
    return _COMMENT_OR_STRING.sub(lambda m: m.group() if m.group()[0] in "\"'" else " ", text)


def tokenize(text: str) -> list[str]:
    """The C++ tokens of ``text``, whitespace dropped."""
    return [m.group() for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]


@dataclass
class Unit:
    """What the parser learns from one or more sources: tokens outside directives, object-like
    macros, function-like macro names, aliases (typedef/using) and enums."""

    tokens: list
    macros: dict
    function_macros: dict  # name -> (parameter names, body tokens)
    aliases: dict
    enums: dict  # name -> underlying base type text
    enumerators: dict  # enumerator name -> [value token]


def read_unit(texts: list[str], defines=()) -> Unit:
    """Lex ``texts`` (the user's headers, then the source) with the ``-D``/``-U`` macros
    applied first. Directives are dropped after their ``#define``s are recorded."""
    macros: dict[str, list[str]] = {}
    fmacros: dict[str, tuple[list[str], list[str]]] = {}
    for name, value in defines:
        if value is None:
            macros.pop(name, None)
        else:
            macros[name] = tokenize(value)
    tokens: list[str] = []
    for text in texts:
        body = []
        for line in _strip_comments(text.replace("\\\n", "")).splitlines():
            s = line.lstrip()
            if s.startswith("#"):
                m = _DEFINE.match(s)
                if m and m.group(2):
                    close = m.group(3).find(")")
                    fmacros[m.group(1)] = (
                        [t for t in tokenize(m.group(3)[:close]) if t != ","],
                        tokenize(m.group(3)[close + 1 :]),
                    )
                    macros.pop(m.group(1), None)
                elif m:
                    macros[m.group(1)] = tokenize(m.group(3))
                    fmacros.pop(m.group(1), None)
                continue
            body.append(line)
        tokens += tokenize("\n".join(body))
    unit = Unit(tokens, macros, fmacros, {}, {}, {})
    _collect_types(tokens, unit)
    return unit


def _collect_types(tokens: list[str], unit: Unit) -> None:
    """typedef / using aliases and enums, wherever they are declared (structs stay opaque)."""
    n = len(tokens)
    for i, t in enumerate(tokens):
        if t == "typedef":
            j = _find(tokens, i, ";")
            decl = tokens[i + 1 : j]
            if "{" in decl or "(" in decl or not decl or not _is_id(decl[-1]):
                continue  # a struct definition or a function type: opaque
            unit.aliases[decl[-1]] = decl[:-1]
        elif t == "using" and i + 2 < n and _is_id(tokens[i + 1]) and tokens[i + 2] == "=":
            j = _find(tokens, i, ";")
            unit.aliases[tokens[i + 1]] = tokens[i + 3 : j]
        elif t == "enum":
            j = i + 1
            if j < n and tokens[j] in ("class", "struct"):
                j += 1
            if j < n and _is_id(tokens[j]):
                name, under = tokens[j], ["int"]
                if j + 1 < n and tokens[j + 1] == ":":
                    k = j + 2
                    while k < n and tokens[k] not in ("{", ";"):
                        k += 1
                    under = tokens[j + 2 : k]
                unit.enums[name] = under
                k = j + 1
                while k < n and tokens[k] not in ("{", ";"):
                    k += 1
                if k < n and tokens[k] == "{":
                    _enumerators(tokens[k + 1 : _match(tokens, k, "{", "}")], unit)


def _enumerators(body: list[str], unit: Unit) -> None:
    """Values of ``A, B = 5, C``; an enumerator whose value cannot be computed is left out."""
    value = -1
    for part in split_top(body):
        if not part or not _is_id(part[0]):
            continue
        try:
            value = (
                evaluate(_unqualify(substitute(part[2:], unit.enumerators)))
                if len(part) > 2 and part[1] == "="
                else value + 1
            )
        except SignatureError:
            return
        unit.enumerators[part[0]] = [str(int(value))]


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
    """Split at ``sep`` outside (), [], {} and <> nesting."""
    parts: list[list[str]] = []
    cur: list[str] = []
    depth = 0
    for t in tokens:
        if t in ("(", "[", "{", "<"):
            depth += 1
        elif t in (")", "]", "}", ">"):
            depth -= 1
        if t == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur or parts:
        parts.append(cur)
    return parts


# ------------------------------------------------------------------ macros


def substitute(tokens, table: dict, functions: dict | None = None, limit: int = 16) -> list[str]:
    """Replace identifiers found in ``table`` by their token lists and calls of ``functions``
    (function-like macros: (parameters, body)) by their bodies, to a fixed point."""
    out = list(tokens)
    for _ in range(limit):
        changed, new, i = False, [], 0
        while i < len(out):
            t = out[i]
            if t in table:
                new.extend(table[t])
                changed = True
            elif functions and t in functions and i + 1 < len(out) and out[i + 1] == "(":
                close = _match(out, i + 1, "(", ")")
                new.extend(_expand_call(t, functions[t], split_top(out[i + 2 : close])))
                changed, i = True, close
            else:
                new.append(t)
            i += 1
        out = new
        if not changed:
            return out
    raise SignatureError("recursive alias or macro")


def _expand_call(name: str, macro: tuple, args: list[list[str]]) -> list[str]:
    params, body = macro
    if "#" in body or "##" in body or "..." in params or "__VA_ARGS__" in body:
        raise SignatureError(f"the macro {name} is too unusual to expand")
    if len(args) != len(params) and not (not params and args in ([], [[]])):
        raise SignatureError(f"the macro {name} takes {len(params)} arguments")
    table = dict(zip(params, args, strict=False))
    return [x for t in body for x in table.get(t, [t])]


# ------------------------------------------------------------------ constant expressions

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
    ast.BitXor: operator.xor,
}
_UNOPS: dict[type, Callable] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
_INT_LITERAL = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)[uUlL]*\Z")
_FLOAT_LITERAL = re.compile(r"((?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFlL]?\Z")


def evaluate(tokens: list[str]):
    """The value of a constant expression of literals (C rules for / and literal suffixes)."""
    parts = []
    for t in tokens:
        t = t.replace("'", "") if t[:1].isdigit() else t
        if t in ("true", "false"):
            parts.append("True" if t == "true" else "False")
        elif t in ("nullptr", "NULL"):
            parts.append("None")
        elif re.fullmatch(r"'(\\?[^\\'])'", t):
            parts.append(str(ord(ast.literal_eval(t))))
        elif _INT_LITERAL.match(t):
            digits = t.rstrip("uUlL")
            parts.append(
                str(int(digits, 0) if not re.fullmatch(r"0[0-7]+", digits) else int(digits, 8))
            )
        elif fm := _FLOAT_LITERAL.match(t):
            parts.append(repr(float(fm.group(1))))
        elif t in ("+", "-", "*", "/", "%", "<<", "~", "(", ")", "|", "&", "^", "!", ">"):
            parts.append(" not " if t == "!" else t)
        else:
            raise SignatureError(f"cannot evaluate {' '.join(tokens)!r}")
    expr = " ".join(parts).replace("> >", ">>")
    try:
        tree = ast.parse(expr, mode="eval")
        return _eval(tree.body)
    except (SyntaxError, TypeError, ZeroDivisionError, ValueError) as e:
        raise SignatureError(f"cannot evaluate {' '.join(tokens)!r}: {e}") from None


def _eval(node):
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, (bool, int, float))
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
        return _UNOPS[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Div):
            if isinstance(a, int) and isinstance(b, int):
                q = abs(a) // abs(b)
                return q if (a >= 0) == (b >= 0) else -q
            return a / b
        if type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](a, b)
    raise SignatureError("not a constant expression")
