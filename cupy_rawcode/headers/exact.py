"""Exact mode: evaluate conditions like NVRTC to find exactly the files a compile reads. A walker
follows the directive lines (directives.py) of the source and of each header it includes, keeps
the branch stack itself (``#elifdef``/``#elifndef`` included), finds each live ``#include`` and
``#include_next`` with nvcc's search (search.py, quoted includes from the includer's directory),
skips a header under ``#pragma once`` or a whole-file include guard already defined, and records
every header read, with its include chain, in a Closure; macros and ``#if`` expressions go to pcpp
(conditions.py), started from NVRTC's predefined macros (predefined.py)."""

from __future__ import annotations

import os

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
from .conditions import _Pcpp
from .directives import _file_directives
from .lexical import directives, header_name
from .predefined import nvrtc_macros, probe_operators
from .search import Context, Found, find, searched

MAX_DEPTH = 200


class _Walker:
    def __init__(self, ctx: Context, arch: str):
        self.ctx = ctx
        self.pp = _Pcpp(self._has_include, probe_operators(ctx.toolchain.nvrtc_version))
        for name, value in nvrtc_macros(arch, ctx.opts.std, ctx.toolchain.nvrtc_version).items():
            self.pp.define(f"{name} {value}")
        for macro, body in ctx.opts.macros:
            if body is None:
                self.pp.undef(macro)
            else:
                self.pp.define(f"{macro} {body}")
        self.memo: dict[str, int] = {}  # search.py: what each path is
        self.headers: dict[str, Header] = {}
        self.file_ids: dict[str, tuple] = {}
        self.once: set[str] = set()
        self.guards: dict[str, str] = {}  # path -> include-guard macro
        self.errors: list[str] = []
        self.current: list[Found | None] = []
        self.own = ctx.source_dir  # the main text's own directory (the cwd for a -include)
        self.pre = False  # walking a -include's line

    def _find(self, name: str, angled: bool, includer: Found | None, nxt: bool) -> Found | None:
        """Where ``name`` resolves from ``includer`` (None: the main source) by the search
        rules; ``nxt``: as ``#include_next`` does, after the includer's directory."""
        return find(
            name,
            angled=angled,
            includer=includer,
            source_dir=self.own,
            dirs=self.ctx.dirs,
            next_after=includer.index if nxt and includer is not None else None,
            memo=self.memo,
            own_dir=self._own_dir(includer),
        )

    def _own_dir(self, includer: Found | None) -> bool:
        """Whether a quoted include looks in its includer's directory: not under
        -no-source-include, but for a -include's in the working directory."""
        return not self.ctx.opts.no_source_include or (includer is None and self.pre)

    def _has_include(self, name: str, angled: bool, nxt: bool) -> bool:
        includer = self.current[-1] if self.current else None
        return self._find(name, angled, includer, nxt) is not None

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
            defined = ident in self.pp.macros or ident in self.pp.probes
            return defined if d in ("ifdef", "def") else not defined
        value, _ = self.pp.evalexpr(self.pp.tokenize(rest))
        return bool(value)

    def include(self, rest, nxt, includer, name, line, chain):
        header, angled = header_name(rest)
        if header is None:  # computed include: expand, then read a header name
            toks = self.pp.expand_macros(self.pp.tokenize(rest))
            header, angled = header_name("".join(str(t.value) for t in toks))
            if header is None:
                raise ResolveError(
                    f"{name}:{line}: #include {rest} does not expand to a header name"
                )
        step = Step(name, line)
        nxt = nxt and includer is not None
        found = self._find(header, angled, includer, nxt)
        if found is None:
            m = Missing(
                header,
                angled,
                chain + (step,),
                tuple(
                    searched(
                        angled,
                        includer,
                        self.own,
                        self.ctx.dirs,
                        includer.index if nxt else None,
                        self._own_dir(includer),
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
    for p in pre_includes:  # the forced ones: NVRTC gets their paths, found in the search list
        walker.run(f"#include <{p}>\n", "<pre-include>")
    walker.own, walker.pre = os.getcwd(), True  # a -include: the working directory first
    for p in ctx.opts.pre_includes:
        walker.run(f'#include "{p}"\n', "<pre-include>")
    walker.own, walker.pre = ctx.source_dir, False
    walker.run(source, main_name)
    errors = tuple(walker.errors) + tuple(walker.pp.errors)
    return Closure(tuple(walker.headers.values()), (), "exact", ctx.dirs, walker.file_ids, errors)
