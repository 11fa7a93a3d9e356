"""Exact mode: evaluate conditions like NVRTC to find exactly the files a compile reads.

Only directive lines are processed; text lines are never macro-expanded (pcpp as released expands
every line, which is where its time goes). pcpp defines macros and evaluates ``#if`` expressions,
through a subclass that fixes its defects listed in facts.md:

- ``x ## __VA_ARGS__`` with leading whitespace in the argument failed to paste (args are stripped);
- ``__has_include`` / ``__has_include_next`` are evaluated with the real search rules;
- ``LL``/``ULL`` integer suffixes, ``true``/``false`` and ``__VA_OPT__`` are understood;
- ``#include_next``, ``#elifdef``/``#elifndef`` and quoted-include search are handled by the
  driver below (search.py), not by pcpp.
"""

from __future__ import annotations

import copy
import re

import pcpp

from ..ground.regular import read_bytes
from . import scan as _scan
from .closure import (
    MAIN,
    Closure,
    Header,
    Missing,
    MissingHeaderError,
    ResolveError,
    Step,
    UnreadableHeaderError,
)
from .options import arch_number
from .search import Context, Found, find, searched

_STD_CPLUSPLUS = {
    "c++03": "199711L",
    "c++11": "201103L",
    "c++14": "201402L",
    "c++17": "201703L",
    "c++20": "202002L",
}
_INT_SUFFIX = re.compile(r"^((?:0[xX][0-9a-fA-F]+)|(?:0[bB][01]+)|\d+)[uUlL]+$")
_SUFFIX_ONLY = re.compile(r"^[uUlL]+$")
_HAS_INCLUDE = ("__has_include", "__has_include_next")
_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z_]\w*)((?:[^\n\\]|\\\n|\\)*)", re.M)
MAX_DEPTH = 200


def nvrtc_macros(arch: str, std: str, nvrtc_version: tuple[int, int]) -> dict[str, str]:
    """The macros NVRTC predefines for a device compile (facts.md), plus the execution-space
    keywords its built-in cuda_runtime.h defines."""
    major, minor = nvrtc_version
    sm = arch_number(arch) * 10
    macros = {
        "__CUDACC__": "1",
        "__CUDACC_RTC__": "1",
        "__CUDA_ARCH__": str(sm),
        "__CUDA_ARCH_LIST__": str(sm),
        "__CUDACC_VER_MAJOR__": str(major),
        "__CUDACC_VER_MINOR__": str(minor),
        "__CUDACC_VER_BUILD__": "0",
        "__CUDA_API_VER_MAJOR__": str(major),
        "__CUDA_API_VER_MINOR__": str(minor),
        "CUDART_VERSION": str(major * 1000 + minor * 10),
        "__cplusplus": _STD_CPLUSPLUS[std],
        "__LP64__": "1",
        "__EDG__": "1",
        "__STDC_HOSTED__": "1",
        "__NVCC_DIAG_PRAGMA_SUPPORT__": "1",
        "__CUDACC_DEVICE_ATOMIC_BUILTINS__": "1",
        "__NV_BUILTIN_INITIALIZER_LIST": "1",  # NVRTC 12.9 and 13.5 define it (CCCL 3.5 needs it)
        "__CHAR_BIT__": "8",
        "__SIZEOF_INT__": "4",
        "__SIZEOF_LONG__": "8",
        "__SIZEOF_POINTER__": "8",
        "__SIZEOF_LONG_LONG__": "8",
    }
    for kw in (
        "__host__",
        "__device__",
        "__global__",
        "__shared__",
        "__constant__",
        "__managed__",
        "__forceinline__",
        "__noinline__",
    ):
        macros[kw] = f"__attribute__(({kw.strip('_')}))"
    if std in ("c++17", "c++20"):
        macros.update(
            {
                "__cpp_if_constexpr": "201606L",
                "__cpp_inline_variables": "201606L",
                "__cpp_fold_expressions": "201603L",
                "__cpp_deduction_guides": "201703L",
                "__cpp_nontype_template_auto": "201606L",
                "__cpp_structured_bindings": "201606L",
                "__cpp_noexcept_function_type": "201510L",
                "__cpp_aligned_new": "201606L",
            }
        )
    if std != "c++03":
        macros.update(
            {
                "__cpp_constexpr": "201603L" if std in ("c++17", "c++20") else "201304L",
                "__cpp_variable_templates": "201304L",
                "__cpp_decltype_auto": "201304L",
                "__cpp_generic_lambdas": "201304L",
                "__cpp_rvalue_references": "200610L",
                "__cpp_variadic_templates": "200704L",
                "__cpp_alias_templates": "200704L",
                "__cpp_static_assert": "201411L",
                "__cpp_lambdas": "200907L",
            }
        )
    return macros


class _Pcpp(pcpp.Preprocessor):
    """pcpp for macro definitions and #if evaluation only, with its defects fixed."""

    def __init__(self, has_include):
        super().__init__()
        self.has_include = has_include  # (name, angled, next) -> bool
        self.errors: list[str] = []
        self._va_opt: dict = {}
        self.where = ("", 0)

    def on_error(self, file, line, msg):
        self.errors.append(f"{self.where[0]}:{self.where[1]}: {msg}")

    def on_unknown_macro_in_expr(self, ident):
        return 0

    def on_unknown_macro_in_defined_expr(self, tok):
        return tok.value in _HAS_INCLUDE

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
                    j = i + 1
                    while j < len(v) and v[j].value != "(":
                        j += 1
                    depth, k = 0, j
                    while k < len(v):
                        depth += (v[k].value == "(") - (v[k].value == ")")
                        if depth == 0:
                            break
                        k += 1
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
        tokens = self._replace_defined(tokens)
        tokens = self.expand_macros(tokens)
        tokens = self._replace_has_include(tokens)
        tokens = self._fix_literals(tokens)
        return super().evalexpr(tokens)

    def _int(self, tok, value: int):
        t = copy.copy(tok)
        t.type, t.value = self.t_INTEGER, self.t_INTEGER_TYPE(str(value))
        return t

    def _replace_defined(self, tokens):
        out, i = [], 0
        while i < len(tokens):
            t = tokens[i]
            if t.type == self.t_ID and t.value == "defined":
                j = i + 1
                while j < len(tokens) and tokens[j].type in self.t_WS:
                    j += 1
                paren = j < len(tokens) and tokens[j].value == "("
                if paren:
                    j += 1
                    while j < len(tokens) and tokens[j].type in self.t_WS:
                        j += 1
                if j < len(tokens) and tokens[j].type == self.t_ID:
                    name = tokens[j].value
                    val = name in self.macros or name in _HAS_INCLUDE
                    if paren:
                        j += 1
                        while j < len(tokens) and tokens[j].value != ")":
                            j += 1
                    out.append(self._int(t, int(val)))
                    i = j + 1
                    continue
            out.append(t)
            i += 1
        return out

    def _replace_has_include(self, tokens):
        out, i = [], 0
        while i < len(tokens):
            t = tokens[i]
            if t.type == self.t_ID and t.value in _HAS_INCLUDE:
                j = i + 1
                while j < len(tokens) and tokens[j].value != "(":
                    j += 1
                depth, k = 0, j
                while k < len(tokens):
                    depth += (tokens[k].value == "(") - (tokens[k].value == ")")
                    if depth == 0:
                        break
                    k += 1
                text = "".join(str(x.value) for x in tokens[j + 1 : k]).strip()
                name, angled = _header_name(text)
                ok = name is not None and self.has_include(name, angled, t.value.endswith("next"))
                out.append(self._int(t, int(ok)))
                i = k + 1
                continue
            out.append(t)
            i += 1
        return out

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


def _header_name(text: str) -> tuple[str | None, bool]:
    text = text.strip()
    if len(text) >= 2 and text[0] == "<" and text[-1] == ">":
        return re.sub(r"\s+", "", text[1:-1]) if " " in text else text[1:-1], True
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1], False
    return None, False


def _strip(m: re.Match) -> str:
    s = m.group(0)
    if s[0] in "\"'":
        return s
    return " " + "\n" * s.count("\n")


_lines_memo: dict[tuple, tuple[str, list]] = {}


def directives(text: str) -> list[tuple[int, str, str]]:
    """(line, directive, rest) of every directive line, comments removed, continuations joined."""
    clean = _TOKENS.sub(_strip, text)
    out, line, pos = [], 1, 0
    for m in _DIRECTIVE.finditer(clean):
        line += clean.count("\n", pos, m.start())
        pos = m.start()
        out.append((line, m.group(1), m.group(2).replace("\\\n", " ").strip()))
    return out


def _file_directives(path: str) -> tuple[tuple, tuple[str, list]]:
    fid = _scan.file_id(path)
    hit = _lines_memo.get(fid)
    if hit is None:
        data = read_bytes(path)  # a regular file only: a FIFO would block
        _scan.check_header(data, path)  # ScanError naming file:line:col
        text = data.decode("utf-8")
        hit = _lines_memo[fid] = (_scan.digest_bytes(data), directives(text))
    return fid, hit


class _Walker:
    def __init__(self, ctx: Context, arch: str):
        self.ctx = ctx
        self.pp = _Pcpp(self._has_include)
        for name, value in nvrtc_macros(arch, ctx.opts.std, ctx.toolchain.nvrtc_version).items():
            self.pp.define(f"{name} {value}")
        for macro, body in ctx.opts.macros:
            if body is None:
                self.pp.undef(macro)
            else:
                self.pp.define(f"{macro} {body}")
        self.memo: dict[str, bool] = {}
        self.headers: dict[str, Header] = {}
        self.file_ids: dict[str, tuple] = {}
        self.once: set[str] = set()
        self.guards: dict[str, str] = {}  # path -> include-guard macro
        self.errors: list[str] = []
        self.current: list[Found | None] = []

    def _has_include(self, name: str, angled: bool, nxt: bool) -> bool:
        includer = self.current[-1] if self.current else None
        found = find(
            name,
            angled=angled,
            includer=includer,
            source_dir=self.ctx.source_dir,
            dirs=self.ctx.dirs,
            next_after=includer.index if nxt and includer else None,
            memo=self.memo,
        )
        return found is not None

    def run(self, text: str, chain_name: str = MAIN) -> None:
        self.current.append(None)
        self.walk(directives(text), None, chain_name, ())
        self.current.pop()

    def walk(self, lines, found: Found | None, name: str, chain: tuple[Step, ...]) -> None:
        pp = self.pp
        stack: list[list[bool]] = []  # [parent active, branch taken]
        active = True
        for line, d, rest in lines:
            pp.where = (name, line)
            if d in ("if", "ifdef", "ifndef"):
                cond = active and self._cond(d, rest)
                stack.append([active, cond])
                active = cond
            elif d in ("elif", "elifdef", "elifndef"):
                if not stack:
                    raise ResolveError(f"{name}:{line}: #{d} without #if")
                parent, taken = stack[-1]
                cond = parent and not taken and self._cond(d[2:] if d != "elif" else "if", rest)
                stack[-1][1] = taken or cond
                active = cond
            elif d == "else":
                if not stack:
                    raise ResolveError(f"{name}:{line}: #else without #if")
                parent, taken = stack[-1]
                active = parent and not taken
                stack[-1][1] = True
            elif d == "endif":
                if not stack:
                    raise ResolveError(f"{name}:{line}: #endif without #if")
                active = stack.pop()[0]
            elif not active:
                continue
            elif d == "define":
                pp.define(rest)
            elif d == "undef":
                pp.undef(rest)
            elif d in ("include", "include_next"):
                self.include(rest, d == "include_next", found, name, line, chain)
            elif d == "pragma" and rest.split()[:1] == ["once"] and found is not None:
                self.once.add(found.path)
            elif d == "error":
                self.errors.append(f"{name}:{line}: #error {rest}")
        if stack:
            raise ResolveError(f"{name}: unterminated #if at end of file")

    def _cond(self, d: str, rest: str) -> bool:
        if d in ("ifdef", "ifndef", "def", "ndef"):
            ident = rest.split()[0] if rest.split() else ""
            defined = ident in self.pp.macros or ident in _HAS_INCLUDE
            return defined if d in ("ifdef", "def") else not defined
        value, _ = self.pp.evalexpr(self.pp.tokenize(rest))
        return bool(value)

    def include(self, rest, nxt, includer, name, line, chain):
        header, angled = _header_name(rest)
        if header is None:  # computed include: expand, then read a header name
            toks = self.pp.expand_macros(self.pp.tokenize(rest))
            header, angled = _header_name("".join(str(t.value) for t in toks))
            if header is None:
                raise ResolveError(
                    f"{name}:{line}: #include {rest} does not expand to a header name"
                )
        step = Step(name, line)
        nxt = nxt and includer is not None
        found = find(
            header,
            angled=angled,
            includer=includer,
            source_dir=self.ctx.source_dir,
            dirs=self.ctx.dirs,
            next_after=includer.index if nxt else None,
            memo=self.memo,
        )
        if found is None:
            m = Missing(
                header,
                angled,
                chain + (step,),
                tuple(
                    searched(
                        angled,
                        includer,
                        self.ctx.source_dir,
                        self.ctx.dirs,
                        includer.index if nxt else None,
                    )
                ),
                False,
            )
            raise MissingHeaderError(m.message(), (m,))
        if found.path in self.once:
            return
        guard = self.guards.get(found.path)
        if guard is not None and guard in self.pp.macros:
            return
        if len(chain) >= MAX_DEPTH:
            raise ResolveError(
                f"#include nested too deeply ({MAX_DEPTH} levels; an unguarded include "
                f"cycle?): {' -> '.join(map(str, chain[-6:]))} -> {step}"
            )
        try:
            fid, (digest, lines) = _file_directives(found.path)
        except OSError as e:
            raise UnreadableHeaderError(
                f"cannot read {found.path} ({e.strerror}), included from "
                + " -> ".join(map(str, chain + (step,)))
            ) from None
        except (UnicodeDecodeError, _scan.ScanError) as e:
            raise ResolveError(
                f"{e} (included from {' -> '.join(map(str, chain + (step,)))})"
            ) from None
        if found.path not in self.headers:
            self.headers[found.path] = Header(
                found.logical, found.path, found.tag, digest, chain + (step,)
            )
            self.file_ids[found.path] = fid
            g = _guard_of(lines)
            if g:
                self.guards[found.path] = g
        self.current.append(found)
        try:
            self.walk(lines, found, found.logical, chain + (step,))
        finally:
            self.current.pop()


def _guard_of(lines) -> str | None:
    """The include-guard macro when the file is ``#ifndef X / #define X ... #endif`` entirely."""
    if (
        len(lines) < 3
        or lines[0][1] != "ifndef"
        or lines[1][1] != "define"
        or lines[-1][1] != "endif"
    ):
        return None
    g = lines[0][2].split()[:1]
    if not g or lines[1][2].split()[:1] != g:
        return None
    depth = 0
    for _, d, _ in lines[:-1]:
        depth += d in ("if", "ifdef", "ifndef")
        depth -= d == "endif"
        if depth == 0:
            return None  # the first #if closes before the end: not a whole-file guard
    return g[0]


def resolve_exact(
    source: str,
    ctx: Context,
    *,
    arch: str | None = None,
    pre_includes: tuple[str, ...] = (),
    main_name: str = MAIN,
) -> Closure:
    """The files NVRTC reads for ``source`` compiled for ``arch`` (default sm_90); ``main_name``
    names the source in include chains and messages."""
    walker = _Walker(ctx, arch or ctx.opts.arch or "sm_90")
    pre = tuple(pre_includes) + ctx.opts.pre_includes
    for p in pre:
        walker.run(f'#include "{p}"\n', "<pre-include>")
    walker.run(source, main_name)
    errors = tuple(walker.errors) + tuple(walker.pp.errors)
    return Closure(tuple(walker.headers.values()), (), "exact", ctx.dirs, walker.file_ids, errors)
