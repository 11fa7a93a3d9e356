"""pcpp 1.30 as exact mode's macro table and ``#if`` evaluator, with its defects (facts.md) fixed:
a ``x ## __VA_ARGS__`` whose argument has leading whitespace failed to paste (arguments are now
stripped); ``__has_include`` / ``__has_include_next`` are evaluated with the real search rules
(through a callback the walker in exact.py gives); ``LL``/``ULL`` integer suffixes,
``true``/``false`` and ``__VA_OPT__`` are understood. Only definitions and conditions go through
pcpp: includes, ``#include_next``, ``#elifdef``/``#elifndef`` and the branch stack are the
walker's."""

from __future__ import annotations

import copy
import re

import pcpp

from .lexical import header_name

_INT_SUFFIX = re.compile(r"^((?:0[xX][0-9a-fA-F]+)|(?:0[bB][01]+)|\d+)[uUlL]+$")
_SUFFIX_ONLY = re.compile(r"^[uUlL]+$")
_HAS_INCLUDE = ("__has_include", "__has_include_next")


def _parenthesized(tokens: list, start: int) -> tuple[int, int]:
    """The indexes of the first ``(`` at or after ``start`` and of the ``)`` that closes it
    (``len(tokens)`` for one that is missing): the argument of ``__VA_OPT__`` or
    ``__has_include``."""
    j = start
    while j < len(tokens) and tokens[j].value != "(":
        j += 1
    depth, k = 0, j
    while k < len(tokens):
        depth += (tokens[k].value == "(") - (tokens[k].value == ")")
        if depth == 0:
            break
        k += 1
    return j, k


class _Pcpp(pcpp.Preprocessor):
    """pcpp for macro definitions and #if evaluation only, with its defects fixed."""

    def __init__(self, has_include, probes: tuple[str, ...] = _HAS_INCLUDE):
        super().__init__()
        self.has_include = has_include  # (name, angled, next) -> bool
        self.probes = probes  # the operators this NVRTC has (predefined.probe_operators)
        self.lacking = tuple(p for p in _HAS_INCLUDE if p not in probes)  # an error in an #if
        self.errors: list[str] = []
        self._va_opt: dict = {}
        self.where = ("", 0)

    def on_error(self, file, line, msg):
        self.errors.append(f"{self.where[0]}:{self.where[1]}: {msg}")

    def on_unknown_macro_in_expr(self, ident):
        return 0

    def on_unknown_macro_in_defined_expr(self, tok):
        return tok.value in self.probes

    def on_unknown_macro_function_in_expr(self, ident):
        return lambda *args: 0

    # fix: x ## __VA_ARGS__ (and any ## operand) with leading/trailing whitespace in the argument
    def macro_expand_args(self, macro, args):
        args = [self.tokenstrip(list(a)) for a in args]
        if macro.variadic and any(t.value == "__VA_OPT__" for t in macro.value):
            macro = self._without_va_opt(macro, bool(args[-1]))
        return super().macro_expand_args(macro, args)

    def _without_va_opt(self, macro, keep: bool):
        key = (id(macro), keep)
        if key not in self._va_opt:
            value, i, v = [], 0, macro.value
            while i < len(v):
                if v[i].value == "__VA_OPT__":
                    j, k = _parenthesized(v, i + 1)
                    if keep:
                        value.extend(v[j + 1 : k])
                    i = k + 1
                    continue
                value.append(v[i])
                i += 1
            fixed = pcpp.preprocessor.Macro(macro.name, value, list(macro.arglist), macro.variadic)
            self.macro_prescan(fixed)
            self._va_opt[key] = (macro, fixed)  # holding macro keeps its id() unique
        return self._va_opt[key][1]

    def evalexpr(self, tokens):
        tokens = self._replace_operators(tokens, ("defined",), self._defined)
        tokens = self.expand_macros(tokens)
        tokens = self._replace_operators(tokens, self.probes, self._has_include_value)
        tokens = self._replace_operators(tokens, self.lacking, self._lacking_value)
        tokens = self._fix_literals(tokens)
        return super().evalexpr(tokens)

    def _int(self, tok, value: int):
        t = copy.copy(tok)
        t.type, t.value = self.t_INTEGER, self.t_INTEGER_TYPE(str(value))
        return t

    def _replace_operators(self, tokens, names, operand):
        """``tokens`` with each operator named in ``names`` and its operand replaced by an
        integer: ``operand(tokens, i)`` gives (value, index after the operand) for the operator
        at ``i``, or None to leave the token as it is."""
        out, i = [], 0
        while i < len(tokens):
            t = tokens[i]
            if t.type == self.t_ID and t.value in names:
                replaced = operand(tokens, i)
                if replaced is not None:
                    value, i = replaced
                    out.append(self._int(t, value))
                    continue
            out.append(t)
            i += 1
        return out

    def _defined(self, tokens, i: int) -> tuple[int, int] | None:
        """``defined NAME`` or ``defined ( NAME )`` at ``i``: 1 when NAME is a macro."""
        j = i + 1
        while j < len(tokens) and tokens[j].type in self.t_WS:
            j += 1
        paren = j < len(tokens) and tokens[j].value == "("
        if paren:
            j += 1
            while j < len(tokens) and tokens[j].type in self.t_WS:
                j += 1
        if not (j < len(tokens) and tokens[j].type == self.t_ID):
            return None
        name = tokens[j].value
        val = name in self.macros or name in self.probes
        if paren:
            j += 1
            while j < len(tokens) and tokens[j].value != ")":
                j += 1
        return int(val), j + 1

    def _has_include_value(self, tokens, i: int) -> tuple[int, int]:
        """``__has_include(<h>)`` (or ``_next``) at ``i``: 1 when the search finds the header."""
        j, k = _parenthesized(tokens, i + 1)
        text = "".join(str(x.value) for x in tokens[j + 1 : k]).strip()
        name, angled = header_name(text)
        nxt = tokens[i].value.endswith("next")
        return int(name is not None and self.has_include(name, angled, nxt)), k + 1

    def _lacking_value(self, tokens, i: int) -> tuple[int, int]:
        """A probe operator this NVRTC lacks, at ``i``, with its operand: 0, and the error
        NVRTC gives there (its compile fails)."""
        self.on_error("", 0, f"this NVRTC has no {tokens[i].value} (its #if is an error)")
        return 0, _parenthesized(tokens, i + 1)[1] + 1

    def _fix_literals(self, tokens):
        """true/false -> 1/0; integer suffixes dropped (pcpp lexes 1ULL as '1UL' 'L')."""
        out: list = []
        for t in tokens:
            if t.type == self.t_ID and t.value in ("true", "false"):
                t = self._int(t, int(t.value == "true"))
            elif (
                t.type == self.t_ID
                and out
                and out[-1].type == self.t_INTEGER
                and _SUFFIX_ONLY.match(t.value)
            ):
                continue  # the rest of a split suffix
            elif t.type == self.t_INTEGER:
                m = _INT_SUFFIX.match(str(t.value))
                if m:
                    t = self._int(t, _c_int(m.group(1)))
            out.append(t)
        return out


def _c_int(s: str) -> int:
    """A C integer literal without suffix: decimal, 0x hex, 0b binary or 0 octal."""
    if len(s) > 1 and s[0] == "0" and s[1] not in "xXbB":
        return int(s, 8)
    return int(s, 0)
