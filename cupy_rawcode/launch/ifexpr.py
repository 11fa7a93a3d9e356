"""``#if`` expressions with C's rules, for directives.py: every integer is ``intmax_t`` or
``uintmax_t`` (a ``u`` suffix or an unsigned operand makes the operation unsigned, 64-bit
wrap-around), C's precedence (``&``/``^``/``|`` below comparisons, ``==`` below ``<``), no
chained comparisons, ``&&``/``||``/``!`` and comparisons giving 0 or 1, ``/`` and ``%``
truncating toward zero, ``?:``. Arithmetic is cexpr.py's. Anything else (a float, signed
overflow, a division by zero, an unknown token) raises SignatureError: the caller refuses."""

from __future__ import annotations

import ast

from .cexpr import _binary, _common, _typed, _unary
from .lexer import SignatureError

_MAX_TOKENS = 4096
_MAX_DEPTH = 200
ALTERNATIVE_TOKENS = {  # C++'s spellings of operators: words, not names, in #if
    "and": "&&",
    "or": "||",
    "not": "!",
    "not_eq": "!=",
    "bitand": "&",
    "bitor": "|",
    "xor": "^",
    "compl": "~",
}
_LEVELS = [["||"], ["&&"], ["|"], ["^"], ["&"], ["==", "!="], ["<", ">", "<=", ">="]]
_LEVELS += [["<<", ">>"], ["+", "-"], ["*", "/", "%"]]
_LL, _ULL = "long long", "unsigned long long"


def _intmax(t: str) -> tuple[str, int]:
    """A literal token as (intmax type, value)."""
    kind, v = _typed(t)
    if kind in ("bool",):
        return _LL, int(v)
    if kind not in ("int", "long", "long long", "unsigned int", "unsigned long", _ULL):
        raise SignatureError(f"{t!r} in #if")
    return (_ULL if kind.startswith("unsigned") else _LL), int(v)


def _to(x: tuple, kind: str) -> tuple:
    return kind, x[1] % (1 << 64) if kind == _ULL else x[1]


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.toks, self.i, self.depth = tokens, 0, 0

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self) -> str:
        t = self.peek()
        self.i += 1
        return t

    def ternary(self) -> tuple:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise SignatureError("the #if expression is nested too deeply")
        cond = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            if self.take() != ":":
                raise SignatureError("'?' without ':' in #if")
            b = self.ternary()
            kind = _common(a, b)
            cond = _to(a if cond[1] else b, kind)
        self.depth -= 1
        return cond

    def binary(self, level: int) -> tuple:
        if level == len(_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in _LEVELS[level]:
            op = self.take()
            right = self.binary(level + 1)
            left = _apply(op, left, right)
        return left

    def unary(self) -> tuple:
        t = self.take()
        if t in ("+", "-", "~", "!"):
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise SignatureError("the #if expression is nested too deeply")
            x = self.unary()
            self.depth -= 1
            if t == "!":
                return _LL, int(x[1] == 0)
            op = {"+": ast.UAdd, "-": ast.USub, "~": ast.Invert}[t]
            return _unary(op, x)
        if t == "(":
            x = self.ternary()
            if self.take() != ")":
                raise SignatureError("unbalanced '(' in #if")
            return x
        if not t:
            raise SignatureError("incomplete #if expression")
        return _intmax(t)


def _apply(op: str, a: tuple, b: tuple) -> tuple:
    """``a op b`` as the preprocessor computes it."""
    if op == "&&":
        return _LL, int(bool(a[1]) and bool(b[1]))
    if op == "||":
        return _LL, int(bool(a[1]) or bool(b[1]))
    if op in ("<<", ">>"):
        return _binary(ast.LShift if op == "<<" else ast.RShift, a, b)
    kind = _common(a, b)
    x, y = _to(a, kind), _to(b, kind)
    cmp = {"==": x[1] == y[1], "!=": x[1] != y[1], "<": x[1] < y[1], ">": x[1] > y[1]}
    cmp.update({"<=": x[1] <= y[1], ">=": x[1] >= y[1]})
    if op in cmp:
        return _LL, int(cmp[op])
    names = {"|": ast.BitOr, "^": ast.BitXor, "&": ast.BitAnd, "+": ast.Add, "-": ast.Sub}
    names.update({"*": ast.Mult, "/": ast.Div, "%": ast.Mod})
    return _binary(names[op], x, y)


def evaluate_if(tokens: list[str]) -> bool:
    """The truth of an ``#if`` expression of literals (macros and ``defined`` already
    replaced). Raises SignatureError when C's value is not certain here."""
    if len(tokens) > _MAX_TOKENS:
        raise SignatureError("the #if expression is too long")
    toks: list[str] = []
    for t in tokens:
        t = ALTERNATIVE_TOKENS.get(t, t)
        if t == ">" and toks and toks[-1] == ">":
            toks[-1] = ">>"
        else:
            toks.append(t)
    p = _Parser(toks)
    try:
        value = p.ternary()
    except (RecursionError, SyntaxError, ValueError, TypeError, OverflowError, IndexError) as e:
        raise SignatureError(f"cannot evaluate the #if expression: {e}") from None
    if p.i != len(toks):
        raise SignatureError("trailing tokens in #if")
    return bool(value[1])
