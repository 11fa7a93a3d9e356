"""The key of a compile CuPy makes itself (install(scope="all"), prebuild and warmup of a
record): the source, CuPy's options with include directories as tags, the digest of every
header NVRTC can reach through CuPy's directories (fast mode, of the source's directive lines),
the arch and what CuPy brings (its version, payload format, NVRTC, debug flag: gathered by
hook/compiles.py, passed in here as values)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..ground import deferred, digest_fields
from ..ground.confine import pieces
from ..ground.errors import RawcodeValueError
from ..ground.stamps import first_changed
from ..headers.options import NotAnOptionError, parse_options
from ..headers.search import make_context
from . import key_fields
from .manifest import closure_digests, discard

lexical = deferred("cupy_rawcode.headers.lexical")  # a source something could hide a directive in
KEY_KIND = "cupy-compile-2"  # change when the fields below change (2: the options as given)
_digests: dict[int, tuple[str, str]] = {}  # id(extra_source) -> (the str, its SHA-256)
_contexts: dict[tuple[str, ...], tuple[Any, Any]] = {}  # options -> (Options, Context)
# (directives, options) -> (closure digest, its files' stamps as stamps.take gave them, the key
# of its portable record or "")
_closures: dict[tuple[str, tuple[str, ...]], tuple[str, tuple, str]] = {}


def extra_digest(extra: str | None) -> str:
    """SHA-256 of CuPy's header text (one 170 kB string, the same object every call)."""
    if extra is None:
        return ""
    memo = _digests.get(id(extra))
    if memo is not None and memo[0] is extra:
        return memo[1]
    digest = hashlib.sha256(extra.encode("utf-8", "surrogatepass")).hexdigest()
    _digests[id(extra)] = (extra, digest)
    return digest


def cupy_fields(
    version: str, payload: str, nvrtc: str, debug: bool, ptx: bool
) -> list[tuple[str, str]]:
    """The key fields of what CuPy itself brings to every compile (``ptx``: its
    CUPY_COMPILE_WITH_PTX, which makes PTX where it made a cubin)."""
    return [
        ("kind", KEY_KIND),
        ("cupy", version),
        ("cupy_payload", payload),
        ("cupy_nvrtc", nvrtc),
        ("cupy_debug", "1" if debug else "0"),
        ("cupy_ptx", "1" if ptx else "0"),
    ]


_skeletons: dict[str, str] = {}  # source -> its directives: a CuPy call's source comes again
SKELETONS = 4096  # sources remembered at most (CuPy keeps its kernels' sources itself)


def directives(source: str) -> str:
    """The source's directives, one line each (comments removed, continuations joined), as every
    reading of the lexer finds them (a superset where NVRTC's own may differ): all that decides
    its header closure in fast mode, which reads every branch (CuPy's kernels differ in their
    code and share their includes). A directive after a comment or a form feed is one too.
    Remembered per source: every call of a kernel asks again."""
    found = _skeletons.get(source)
    if found is None:
        if len(_skeletons) >= SKELETONS:
            _skeletons.clear()
        found = _skeletons[source] = _skeleton(source)
    return found


# what lets a directive start after something other than blanks (a comment's end, a form feed
# or vertical tab, a digraph, a lone carriage return) or hides one that does (a line comment a
# backslash goes on). A source with none of them (most CuPy kernels) has its directives where
# a line starts with blanks and '#', each with the lines a backslash joins: 20x faster to find.
_HIDING = re.compile(r"/\*|[\f\v]|%:|\r(?!\n)|//[^\n]*\\\r?\n")
_PLAIN = re.compile(r"^[ \t]*#(?:.*\\\r?\n)*.*", re.M)


def _skeleton(source: str) -> str:
    """Every reading's directives, in line order, each the most times any one reading has it
    (the readings number a directive a comment spans differently)."""
    if _HIDING.search(source) is None:
        return "\n".join(m.group(0) for m in _PLAIN.finditer(source))
    lines: dict[tuple[str, str, int], int] = {}
    for reading in _READINGS:
        times: dict[tuple[str, str], int] = {}
        for line, name, rest in lexical.directives(source, reading):
            n = times[name, rest] = times.get((name, rest), -1) + 1
            lines.setdefault((name, rest, n), line)
    ordered = sorted(lines.items(), key=lambda item: item[1])
    return "\n".join(f"#{name} {rest}".rstrip() for (name, rest, _), _ in ordered)


_READINGS = ("nvrtc", "skipped", "joined")


_parsed: dict[tuple[str, ...], Any] = {}  # options -> their Options, or None: refused


def _options(options: tuple[str, ...]):
    """CuPy's ``options`` as parse_options reads them, None when it refuses them. Memoized."""
    if options not in _parsed:
        try:
            _parsed[options] = parse_options(options)
        except (RawcodeValueError, NotAnOptionError):
            _parsed[options] = None
    return _parsed[options]


def readable(options: tuple[str, ...]) -> bool:
    """Whether the key can read CuPy's ``options`` as NVRTC does: False for one the parser
    refuses (``-maxrregcount=``), which CuPy then compiles itself. Only the options are read
    here: the toolchain's and the environment's errors are raised where the key needs them."""
    return _options(options) is not None


def _context(options: tuple[str, ...]):
    """(Options, search context) of CuPy's options: its own -I and -isystem directories only,
    no root of ours (CuPy does not search them). Memoized per options."""
    found = _contexts.get(options)
    if found is None:
        opts = _options(options)
        if opts is None:
            opts = parse_options(options)  # raises the parser's error, naming the option
        ctx = make_context(opts)
        ctx = ctx._replace(dirs=tuple(d for d in ctx.dirs if d.origin == "user"))
        found = _contexts[options] = (opts, ctx)
    return found


def _closure(source: str, options: tuple[str, ...]) -> tuple[Any, str]:
    """(Options, the closure digest) for a source: its directive lines resolved in fast mode,
    once per process for each set of directives and options (a manifest, checked by stat,
    answers in a new process). Within a process, headers are read once, as CuPy reads them."""
    opts, ctx = _context(options)
    skeleton = directives(source)
    memo = (skeleton, options)
    known = _closures.get(memo)
    if known is None:
        facts, _ = closure_digests(skeleton, ctx)
        known = _closures[memo] = (facts.digest, facts.stamps, facts.record)
    return opts, known[0]


def closure_record(source: str, options: tuple[str, ...]) -> str:
    """The key of the portable record of a keyed source's closure (key/portable.py), which its
    entry names so that a bundle or a pull carries it along; "" when there is none (or the
    source was not keyed in this process)."""
    known = _closures.get((directives(source), options))
    return known[2] if known is not None else ""


def changed_header(source: str, options: tuple[str, ...]) -> str | None:
    """A file of the closure whose stamp differs from the one its key was computed with
    (stamps.first_changed), else None; then the closure is forgotten (here and its manifest), so
    that the next key reads the files again. CuPy read its headers itself while compiling: what
    it compiled may not be what the key covers."""
    skeleton = directives(source)
    known = _closures.get((skeleton, options))
    if known is None:
        return None
    path = first_changed(known[1])
    if path is not None:
        del _closures[(skeleton, options)]
        discard(skeleton, _context(options)[1])
    return path


_SEARCHED = ("-I", "--include-path", "-isystem")  # confine.split's spellings of a directory


def as_given(options: tuple[str, ...]) -> list[str]:
    """CuPy's options exactly as it hands them to NVRTC and tests them itself (by exact string:
    '-rdc=true' links the device runtime, ('-rdc', 'true') does not; '-DCUPY_USE_JITIFY' goes
    through Jitify), each directory replaced by its kind: its place in the search is keyed as a
    tag and what it holds through the closure, never its path (CuPy's own is an install path).
    Options are split as a record's are (confine.pieces: every spelling NVRTC takes)."""
    out: list[str] = []
    for flag, _, given in pieces(options):
        if flag in _SEARCHED:  # -I DIR, --include-path DIR: one directory, however spelled
            out.append("-isystem <directory>" if flag == "-isystem" else "-I <directory>")
        else:
            out += given
    return out


def cupy_key(
    source: str,
    options: tuple[str, ...],
    arch: str,
    name_expressions: tuple[str, ...],
    extra: list[tuple[str, str]],
) -> str:
    """The key of one CuPy compile for ``arch`` (CuPy's: '90'); ``extra``: cupy_fields and the
    call's own (cooperative groups, extra source digest). Raises MissingHeaderError when a
    header is missing."""
    opts, digest = _closure(source, options)
    fields = key_fields(
        source=source,
        option_fields=opts.key_fields(),
        search_tags=[f"user{i}" for i in range(len(opts.include_dirs))]
        + [f"isys{i}" for i in range(len(opts.isystem_dirs))],
        nvrtc_version="cupy",  # CuPy's NVRTC, in the CuPy fields
        arch=f"cc{arch}",
        target="cubin",
        name_expressions=name_expressions,
        closure=digest,
        extra=extra + [("cupy_option", o) for o in as_given(options)],
    )
    return digest_fields(fields)
