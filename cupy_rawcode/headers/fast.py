"""Fast mode: follow every include in every branch from the source (a superset of what NVRTC
reads, enough for the cache key), expanding computed includes from the macros seen."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..toolkit import jitify_names
from . import liveness
from . import scan as _scan
from .closure import MAIN, Closure, Header, Missing, ResolveError, Step, UnreadableHeaderError
from .directives import scanned_directives
from .expansion import (
    Function,
    Table,
    add_functions,
    add_macros,
    expand_computed,
    expansions,
    names_used,
    prober_probes,
    probers_of,
)
from .lexical import directives
from .options import macro_name, macro_parameters
from .paths import has_dotdot
from .search import FILE, NOTHING, Context, Found, find, joined, looked_in, searched
from .standard import NO_FLOOR, Floor, std_for_year, std_year


@dataclass
class _Node:
    found: Found | None
    scan: _scan.FileScan
    chain: tuple[Step, ...]
    parent: _Node | None
    pos: int  # byte offset of the #include in parent
    uncertain: bool = False  # reached by a probe or a computed include (one value of several)
    # (line, kind, path) of each include of this file that found a file
    edges: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def nexts(self) -> bool:
        """Whether the file has an #include_next (or a probe of one)."""
        return any(i.kind.endswith("next") for i in self.scan.includes)


def _live(node: _Node, pos: int, kind: str) -> bool:
    """Whether an include is reached unconditionally along its first-found chain (a miss there
    is an error NVRTC will hit); probes, computed includes, those at no known position (an
    #include spelled oddly: scan.py) and those of a file a probe or a computed include reached
    (every value of a macro is followed: NVRTC may never open it) never are."""
    if _uncertain(kind) or pos < 0:
        return False
    at: _Node | None = node
    while at is not None:
        if at.uncertain or at.scan.conditional(pos) or at.scan.hidden(pos):  # in #if, a comment
            return False
        pos, at = at.pos, at.parent
    return True


def _uncertain(kind: str) -> bool:
    """Whether an include of ``kind`` may be one NVRTC never follows (a probe, a computed one)."""
    return kind.startswith(("probe", "computed"))


_UNSEEN = object()


def resolve_fast(
    source: str, ctx: Context, pre_includes: tuple[str, ...] = (), main_name: str = MAIN
) -> Closure:
    """Superset closure by lexical scan: every branch, every probe, every computed-include value.
    ``main_name`` names the source in include chains (its file's name, else "<source>");
    ``pre_includes`` (the forced ones, the shims') are found in the search list, as NVRTC is
    handed their paths (compiler/nvrtc.py), and an option's ``-include`` in the working
    directory first, as NVRTC looks for it."""
    memo: dict[str, int] = {}  # path -> search.FILE, NOTHING or OTHER
    found_memo: dict[tuple, Any] = {}
    table: Table = defaultdict(set)
    for head, value in ctx.opts.macros:
        params = macro_parameters(head)
        if value is not None:
            table[macro_name(head)].add(value if params is None else Function(params, value))
    nodes: dict[str, _Node] = {}
    positions: set[tuple[str, int]] = set()  # (path, search index) of every file found
    file_ids: dict[str, tuple] = {}
    missing: dict[tuple, Missing] = {}
    deferred: list[tuple[_Node, _scan.Include]] = []
    absent: set[str] = set()
    watched: set[str] = set()  # paths found empty in the program's own directories
    dotdots: set[tuple[str, str, bool]] = set()  # (directory, name, found there): names with '..'
    own_dirs = not ctx.opts.no_source_include  # -no-source-include: no includer's directory
    pre = "".join(f"#include <{p}>\n" for p in pre_includes)
    pre += "".join(f'#include "{p}"\n' for p in ctx.opts.pre_includes)
    n_pre = pre.count("\n")
    main = _Node(None, _scan.scan_bytes((pre + source).encode("utf-8"), MAIN), (), None, 0)
    unread_functions = [main.scan]  # the scans whose function-like macros the table lacks
    add_macros(table, main.scan)  # '#define H "h.h"' then '#include H' in the source itself
    work = [main]

    cwd = os.getcwd() if ctx.opts.pre_includes else None

    def add(parent: _Node, inc: _scan.Include, name: str, angled: bool) -> None:
        pf = parent.found
        # a quoted include of the main source looks in its directory first; a pre-include
        # (-include p.h) in the working directory instead, as gcc's and NVRTC's do
        pre_line = parent is main and inc.line <= n_pre
        own = cwd if pre_line and cwd else ctx.source_dir
        mine = own_dirs or pre_line  # NVRTC looks in the working directory all the same
        nxt = pf is not None and inc.kind.endswith("next")
        after = pf.index if pf is not None and nxt else None
        # what decides the answer: the name, the search start, and for a quoted include the
        # includer's directory (and the root it is named under)
        fkey = (
            (name, angled, after)
            if angled or nxt or (pf is None and own is None) or not mine
            else (
                name,
                angled,
                after,
                pf.tag if pf else None,
                pf.path.rpartition("/")[0] if pf else own,
                pf.rel.rpartition("/")[0] if pf else "",
            )
        )
        found = found_memo.get(fkey, _UNSEEN)
        if found is _UNSEEN:
            found = found_memo[fkey] = find(
                name,
                angled=angled,
                includer=pf,
                source_dir=own,
                dirs=ctx.dirs,
                next_after=after,
                memo=memo,
                own_dir=mine,
            )
            looked = looked_in(angled, pf, own, ctx.dirs, after, found, mine)
            watched.update(_own_empty(name, looked, found, memo))
            if has_dotdot(name) and not os.path.isabs(name):  # the last place found it, if any
                last = len(looked) - 1 if found is not None else -1
                dotdots.update((d, name, i == last) for i, (d, _) in enumerate(looked))
        if pf is None and not angled and own and mine and (found is None or found.tag != "src"):
            # looked for in the main source's directory first, not there: if it appears, the
            # compile changes (manifest.py stamps it as absent)
            there = None if os.path.isabs(name) else joined(own, name)
            if there is not None and memo.get(there) == NOTHING:
                absent.add(there)  # (a directory: no; watched instead)
        if found is not None:
            parent.edges.append((inc.line, inc.kind, found.path))
            first = nodes.get(found.path)
            if first is not None:
                if (found.path, found.index) not in positions:
                    positions.add((found.path, found.index))
                    if first.nexts:  # its #include_next goes on from this place of the search
                        # list (a wrapper reached twice): followed again from here
                        again = _Node(found, first.scan, first.chain, parent, inc.pos)
                        again.uncertain, again.edges = first.uncertain, first.edges
                        work.append(again)
                return  # the common case: made no Step
        includer_name = pf.logical if pf else main_name
        step = Step(includer_name, inc.line)
        if parent is main:  # pre-included headers come first, from the command line
            line = inc.line - n_pre
            step = Step(main_name, line) if line > 0 else Step("<pre-include>", 0)
        if found is None:
            key = (name, angled, includer_name, nxt)
            if key not in missing:
                missing[key] = Missing(
                    name,
                    angled,
                    parent.chain + (step,),
                    tuple(searched(angled, pf, own, ctx.dirs, after, mine)),
                    not _live(parent, inc.pos, inc.kind),
                )
            return
        try:
            fid, fscan = _scan.scan_file(found.path)
        except OSError as e:
            raise UnreadableHeaderError(
                f"cannot read {found.path} ({e.strerror}), included from "
                + " -> ".join(map(str, parent.chain + (step,)))
            ) from None
        except _scan.ScanError as e:
            raise ResolveError(
                f"{e} (included from " + " -> ".join(map(str, parent.chain + (step,))) + ")"
            ) from None
        positions.add((found.path, found.index))
        file_ids[found.path] = fid
        node = nodes[found.path] = _Node(found, fscan, parent.chain + (step,), parent, inc.pos)
        node.uncertain = _uncertain(inc.kind)
        add_macros(table, fscan)
        unread_functions.append(fscan)
        work.append(node)

    def follow(node: _Node, inc: _scan.Include) -> None:
        if inc.kind.startswith("computed"):
            add_functions(table, unread_functions)
            deferred.append((node, inc))
            for name, angled in expand_computed(inc.name, table):
                add(node, inc, name, angled)
        elif inc.kind == "prober":
            probers.add(inc.name)
        else:
            add(node, inc, inc.name, inc.angled)

    def visit(node: _Node) -> None:
        for inc in node.scan.includes:
            follow(node, inc)

    probers: set[str] = set()  # macros whose value probes: '#define HAS(x) __has_include(x)'
    read: dict[int, frozenset[str]] = {}  # node -> the probers whose uses in it were read
    seen_tables = -1
    while work:
        while work:
            visit(work.pop())
        if probers:  # their uses are probes: read in every file, once each
            add_functions(table, unread_functions)
            every = frozenset(probers_of(probers, table))
            for node in (main, *nodes.values()):
                if read.get(id(node)) != every:
                    new = every - read.get(id(node), frozenset())
                    read[id(node)] = every
                    for inc in prober_probes(node.scan.data, set(new), table):
                        follow(node, inc)
        # computed includes may name macros defined in files scanned after them: retry
        if deferred:
            add_functions(table, unread_functions)
        size = sum(len(v) for v in table.values())
        if size != seen_tables:
            seen_tables = size
            for node, inc in list(deferred):
                for name, angled in expand_computed(inc.name, table):
                    add(node, inc, name, angled)
    headers = tuple(
        Header(n.found.logical, n.found.path, n.found.tag, n.scan.digest, n.chain)
        for n in nodes.values()
        if n.found is not None  # every node but the main source's has its file
    )
    floor = max(
        (
            Floor(h.std_floor, logical)
            for logical, h in ((n.found.logical, n.scan) for n in nodes.values() if n.found)
            if h.std_floor
        ),
        default=NO_FLOOR,
    )
    if floor.year > std_year(ctx.opts.std):  # a raise, if NVRTC can reach a header that asks
        floor = _raised_floor(main, nodes, file_ids, floor, ctx)
    # the program's own files: the source, -I/-isystem directories and its own directory
    own = [n for n in nodes.values() if n.found and n.found.tag.startswith(("user", "isys", "src"))]
    specialized = sorted({s for n in (main, *own) for s in n.scan.specializes})
    # and, under jitify=True (its guard macro defined), the names of its global blocks that
    # they declare themselves ("::name"): only there do they change what NVRTC gets
    # (key/request.py), and a CuPy kernel's closure holds some 2,000 headers to read for them
    if any(name == jitify_names.GUARD for name, _ in ctx.opts.macros):
        specialized += sorted(
            {"::" + s for n in (main, *own) for s in jitify_names.own_global_names(n.scan.data)}
        )
    scans = {n.found.path: n.scan for n in nodes.values() if n.found is not None}
    unresolved = _unresolved(deferred, table, main, nodes, ctx, main_name, n_pre)
    return Closure(
        headers,
        tuple(missing.values()),
        "fast",
        ctx.dirs,
        file_ids,
        floor=floor,
        specialized=tuple(specialized),
        scans=scans,
        absent=tuple(sorted(absent)),
        unresolved=unresolved,
        probed=tuple(sorted(path for path, what in memo.items() if what == NOTHING)),
        watched=tuple(sorted(watched)),
        dotdots=tuple(sorted(dotdots)),
    )


# the names NVRTC gives values the scan's table has none of: those it predefines (its version,
# the arch: __CUDA_ARCH__) and those it replaces where they stand (__LINE__)
NVRTC_VALUED = liveness.PREDEFINED | {
    *("__LINE__", "__FILE__", "__COUNTER__", "__DATE__", "__TIME__", "__TIMESTAMP__"),
    *("__BASE_FILE__", "__INCLUDE_LEVEL__"),
}


def _unresolved(deferred, table, main: _Node, nodes, ctx: Context, main_name: str, n_pre: int):
    """The computed includes the scan cannot name every header of: a name they use (or one its
    values use) has a definition the table lacks (a function-like ``#define H(x) #x``, a value
    the scan does not read, a value NVRTC gives it: NVRTC_VALUED), or no value expands to a
    header name while something defines one of their names, or the expansion was cut short.
    NVRTC may read a header there the key cannot name. (One whose names nothing defines opens
    nothing: NVRTC skips or refuses it.)"""
    found, unread, defined = [], None, None
    for node, inc in deferred:
        names, complete = expansions(inc.name, table)
        used = names_used(inc.name, table)
        complete &= not used & NVRTC_VALUED  # '#include S(C(cfg_, __CUDA_ARCH__).h)'
        if unread is None:
            scans = [main.scan] + [n.scan for n in nodes.values()]
            unread = frozenset().union(*(s.unread for s in scans))
        if complete and names and not used & unread:
            continue
        if complete and not names:  # nothing to read: unknown only when something defines it
            if defined is None:
                datas = [main.scan.data] + [n.scan.data for n in nodes.values()]
                defined = liveness.macro_names(datas)[0] | {
                    macro_name(n) for n, _ in ctx.opts.macros
                }
            if not used & defined:
                continue
        where = node.found.logical if node.found else main_name
        line = inc.line - n_pre if node is main else inc.line
        probe = "probe" in inc.kind
        found.append(
            f"{where}:{line}: "
            + (f"__has_include({inc.name})" if probe else f"#include {inc.name}")
        )
    return tuple(dict.fromkeys(found))


_OWN = ("user", "isys", "src")  # the tags of the program's own directories


def _own_empty(name: str, looked: list[tuple[str, str]], found, memo) -> list[str]:
    """The paths an include looked at in the program's own directories (-I, -isystem, the
    source's, the working directory for a -include, an own header's; ``looked``: search.looked_in)
    before the one it found (every one, when none answered), each holding no file (nothing, a
    directory, a symlink loop): a file that appears at one is read in place of what the key
    holds (a header shadowed, a probe answered), so the manifest stamps them
    (search.empty_stamp). The system roots change only with an install, which the toolchain
    record sees."""
    if os.path.isabs(name):
        return []
    if found is not None:
        looked = looked[:-1]  # the directory that answered
    paths = [joined(d, name) for d, tag in looked if tag.startswith(_OWN)]
    return [p for p in paths if memo.get(p, FILE) != FILE]


def _raised_floor(
    main: _Node, nodes: dict[str, _Node], file_ids: dict[str, tuple], superset: Floor, ctx: Context
) -> Floor:
    """The floor NVRTC meets once raised to it: at the raised standard a branch on
    ``__cplusplus`` may reach a header that asks for more, so it is read again there until
    it asks for no more (at most ``superset``)."""
    floor, year = NO_FLOOR, std_year(ctx.opts.std)
    while True:
        at = ctx._replace(opts=ctx.opts._replace(std=std_for_year(year)))
        reached = _reached_floor(main, nodes, file_ids, superset, at)
        if reached.year <= max(floor.year, year):
            return max(floor, reached)
        floor, year = reached, reached.year


def _reached_floor(
    main: _Node, nodes: dict[str, _Node], file_ids: dict[str, tuple], superset: Floor, ctx: Context
) -> Floor:
    """The highest floor among the headers NVRTC can reach from the source, met in the order
    the preprocessor meets them (depth first: the first is the ``#error`` NVRTC would report),
    leaving out includes in branches no NVRTC compile takes (liveness.py) and ``__has_include``
    probes (they open nothing); at most ``superset``, every header's."""
    datas = [main.scan.data, *(n.scan.data for n in nodes.values())]
    known = liveness.known_macros(datas, ctx.opts.macros, _builtin_macros(ctx), ctx.opts.std)
    best, seen = NO_FLOOR, set[str]()
    unreachable = liveness.unreachable(directives(main.scan.data.decode("utf-8")), known)
    stack = [(main, iter(main.edges), unreachable)]
    while stack:
        node, edges, unreachable = stack[-1]
        for line, kind, path in edges:
            if path in seen or "probe" in kind or unreachable.at(line):
                continue
            seen.add(path)
            child = nodes[path]
            if child.scan.std_floor > best.year and child.found is not None:
                best = Floor(child.scan.std_floor, child.found.logical)
                if best.year >= superset.year:
                    return best
            lines = scanned_directives(file_ids[path], child.scan)
            stack.append((child, iter(child.edges), liveness.unreachable(lines, known)))
            break
        else:
            stack.pop()
    return best


RUNTIME = "#include <cuda_runtime.h>\n"
_builtins: dict[tuple[str, ...], frozenset[str] | None] = {}


# the search roots NVRTC's built-in runtime header mirrors (CUDA's own: no user, CuPy, CCCL or shim)
TOOLKIT_TAGS = ("cuda", "crt")


def _builtin_macros(ctx: Context) -> frozenset[str] | None:
    """The macros NVRTC's built-in runtime header defines (CUDART_VERSION, NULL, CUDARTAPI,
    cudaStreamNonBlocking, ...), read from the closure of the toolkit's <cuda_runtime.h>, which
    it mirrors, within the toolkit's own roots (the shims and CCCL it may reach are no part of
    NVRTC's); None when they have no <cuda_runtime.h> (then no name is surely undefined)."""
    dirs = tuple(d.path for d in ctx.dirs)
    if dirs not in _builtins:
        own = tuple(d for d in ctx.dirs if d.tag in TOOLKIT_TAGS)
        plain = ctx._replace(opts=ctx.opts._replace(std="c++20", macros=(), pre_includes=()))
        closure = resolve_fast(RUNTIME, plain._replace(dirs=own))
        if any(m.name == "cuda_runtime.h" for m in closure.missing):
            _builtins[dirs] = None
        else:
            names = liveness.macro_names(s.data for s in closure.scans.values())[0]
            _builtins[dirs] = frozenset(names | {"NULL"})
    return _builtins[dirs]
