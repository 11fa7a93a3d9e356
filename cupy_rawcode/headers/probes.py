"""The ``__has_include`` probes of one file, as the scan reports them (scan.Include's fields):
a header name, a computed probe (a macro, a name a comment or a backslash-newline splits), or
a macro whose uses probe (``#define HAS(x) __has_include(x)``: fast.py expands them)."""

from __future__ import annotations

import re
from typing import NamedTuple

from .lexical import header_name, logical_start, probe_operand, spliced

_PROBE_NAME = re.compile(rb"(?:has_include|HAS_INCLUDE)(_next|_NEXT)?")
_WORD = re.compile(r"[A-Za-z_]\w*")
_DEFINE_HEAD = re.compile(rb"[ \t]*#[ \t]*define[ \t]+(\w+)(?:\(([\w \t,.]*)\))?")
_PROBE = re.compile(rb"(?:has_include|HAS_INCLUDE)(_next|_NEXT)?\s*\(\s*(<[^>\n]*>|\"[^\"\n]*\")")


class Probe(NamedTuple):  # scan.Include's fields
    name: str
    angled: bool
    line: int
    kind: str
    pos: int


def probes(data: bytes, split: bool) -> list[Probe]:
    """Every ``__has_include`` probe (and a wrapper macro's, ``_CCCL_HAS_INCLUDE(<x>)``): its
    header name; where its operand is no name as written (a macro, a name a comment or a
    backslash-newline splits), the operand as the preprocessor reads it, a computed probe
    that fast.py expands like a computed include; where it uses a parameter of the
    function-like #define it sits in, that macro as a "prober", whose uses in #if lines probe
    (fast.py expands them)."""
    found = _probes_in(data)
    if split:  # '__has_incl\' newline 'ude(...)': read spliced too (its lines are kept)
        seen = {(i.name, i.kind, i.line) for i in found}
        spliced_data = spliced(data.decode("utf-8")).encode()
        found += [
            i._replace(pos=-1)
            for i in _probes_in(spliced_data)
            if (i.name, i.kind, i.line) not in seen
        ]
    return found


def _probes_in(data: bytes) -> list[Probe]:
    out, line, last = [], 1, 0
    for m in _PROBE_NAME.finditer(data):
        line += data.count(b"\n", last, m.start())
        last = m.start()
        kind = "probe_next" if m.group(1) else "probe"
        strict = _PROBE.match(data, m.start())
        operand = (
            strict.group(2).decode()
            if strict
            else probe_operand(data[m.end() : m.end() + 1024].decode("utf-8", "replace"))
        )
        macro, params = _own_define(data, m.start())
        if not operand:  # no call: '#ifdef __has_include', or '#define HI __has_include'
            if macro and not _PROBE_NAME.search(macro.encode()):
                out.append(Probe(macro, False, line, "prober", last))  # its uses probe
            continue
        if set(_WORD.findall(operand)) & set(params):  # '#define HAS(x) __has_include(x)'
            if not _PROBE_NAME.search(macro.encode()):  # (_CCCL_HAS_INCLUDE's calls: above)
                out.append(Probe(macro, False, line, "prober", last))  # its uses probe
            continue
        header, angled = header_name(operand)
        if header is not None:
            out.append(Probe(header, angled, line, kind, last))
        else:
            out.append(Probe(operand, False, line, "computed_" + kind, last))
    return out


def _own_define(data: bytes, at: int) -> tuple[str, list[str]]:
    """(name, parameters) of the #define whose value holds byte ``at`` (its lines joined by
    backslash-newlines; ``...`` is ``__VA_ARGS__``, ``args...`` is ``args``); ("", []) when
    none does."""
    m = _DEFINE_HEAD.match(data, logical_start(data, at))
    if m is None:
        return "", []
    names = [p.strip().decode() for p in (m.group(2) or b"").split(b",")]
    params = ["__VA_ARGS__" if p == "..." else p.removesuffix("...") for p in names if p]
    return m.group(1).decode(), params
