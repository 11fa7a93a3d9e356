"""A compile request in normalized form, and its cache key (resolve -> key)."""

import os
import re
from typing import Any, NamedTuple

from ..ground import config, digest_fields
from ..ground.errors import RawcodeTypeError, RawcodeValueError
from ..ground.inputs import check_source, strip_bom
from ..ground.inputs import name_expressions as checked_names
from ..ground.stamps import take
from ..headers.filename import line_info
from ..headers.options import (
    Options,
    normalize_arch,
    parse_options,
    wants_lto,
    wants_rdc,
    with_cupy_defaults,
)
from ..headers.search import make_context
from ..headers.standard import NO_FLOOR, at_standard, effective_std, warn_raised
from ..toolkit import jitify_names
from ..toolkit.record import toolchain
from ..toolkit.specializable import macros as specializable_macros
from . import LINK_RULES, closure_digest, key_fields, program_name, strip_field
from .manifest import NOT_LOOKED_UP, Facts, closure_digests

TARGETS = ("cubin", "ptx", "ltoir")
WORKAROUND = "cupy_rawcode/workaround.h"  # forced pre-include, found in the shim root
_PTX = r"\s*(//.*\n\s*)*\.version\s"  # compiled only for a source that has ".version"


class Request(NamedTuple):
    """One compile in normalized form: ``source``, ``options`` (Options), ``arch`` ('sm_90'),
    ``target`` (one of TARGETS), ``name_expressions`` (tuple of str), ``source_dir`` (str or
    None), ``header_sources`` (as toolchain() takes them, or None) and ``source_name`` (the
    file's name in ``source_dir``, or None)."""

    source: str
    options: Options
    arch: str
    target: str
    name_expressions: tuple[str, ...]
    source_dir: str | None = None
    header_sources: Any = None
    source_name: str | None = None

    @property
    def program_name(self) -> str:
        """The name NVRTC gives the source (key.program_name)."""
        return program_name(self.source, self.source_dir, self.source_name)

    @property
    def is_ptx(self) -> bool:
        """PTX input is linked, not compiled from C++."""
        return ".version" in self.source and re.match(_PTX, self.source) is not None

    @property
    def pre_includes(self) -> tuple[str, ...]:
        return () if self.is_ptx else (WORKAROUND,)


def make_request(
    source: str,
    *,
    arch,
    options=(),
    name_expressions=(),
    target: str = "cubin",
    source_dir: str | None = None,
    header_sources=None,
    source_name: str | None = None,
    device: bool = False,
) -> Request:
    """A Request from what a user passes (``device``: ``arch`` is the device's, which CuPy
    appends after the options, so it overrides an -arch among them as NVRTC does); every entry
    point (RawKernel, RawModule, install(), compile(), the CLI, prebuild) makes its requests
    here, so all compile with the same options, CuPy's defaults included
    (options.with_cupy_defaults), and bad input (a NUL byte, an arch this NVRTC lacks, an arch=
    that contradicts -arch) fails here, naming it (inputs.py)."""
    if not isinstance(source, str):
        raise RawcodeTypeError(f"source must be str, not {type(source).__name__}")
    where = os.path.join(source_dir, source_name) if source_dir and source_name else "<source>"
    source = strip_bom(source)  # nvcc accepts a byte order mark; NVRTC does not
    check_source(source, where)  # a NUL would end NVRTC's copy of it: before anything runs
    opts = options if isinstance(options, Options) else parse_options(options)
    opts = with_cupy_defaults(opts)
    names = checked_names(name_expressions)
    if target not in TARGETS:
        raise RawcodeValueError(f"target={target!r}: expected one of {TARGETS}")
    tc = toolchain(header_sources)
    after = device and config.cupy_options()  # CuPy's defaults off: the options as given
    arch = normalize_arch(arch, opts, tc.supported_archs, tc.nvrtc_version_str, after)
    if target == "cubin" and not arch.startswith("sm_"):
        raise RawcodeValueError(
            f"arch={arch!r} is a virtual architecture: target='cubin' needs a real "
            f"one (sm_{arch.partition('_')[2]}); for {arch} use target='ptx'"
        )
    if target != "ltoir" and wants_lto(opts.passthrough) and not wants_rdc(opts.passthrough):
        raise RawcodeValueError(  # NVRTC would give empty code, CuPy a failed load
            f"option -dlto (--dlink-time-opt): NVRTC then emits LTO-IR only, no {target}; it is "
            "linked into a cubin only with -dc or -rdc=true (add one of them, or leave -dlto out)"
        )
    return Request(
        source,
        opts,
        arch,
        target,
        names,
        source_dir,
        header_sources,
        source_name if source_dir else None,
    )


def context(req: Request):
    """The search context (options + toolchain directories): cheap, no header is read."""
    return make_context(req.options, source_dir=req.source_dir, header_sources=req.header_sources)


class Keyed:
    """What keying a request gave: ``key`` (hex), ``closure`` (the resolved Closure, or None when
    a manifest answered), ``count`` (headers), ``context``, the closure headers' stamps
    (``closure_stamps``, as stamps.take gives them) and ``options``, what NVRTC gets (the
    request's, at the standard the closure needs), and ``record``, the key of the closure's
    portable record (key/portable.py; "" for none). (A slotted class, not a NamedTuple: a
    field named ``count`` would shadow tuple.count.)"""

    __slots__ = (
        "closure",
        "closure_stamps",
        "context",
        "count",
        "digest",
        "key",
        "options",
        "record",
    )

    def __init__(
        self,
        key: str,
        closure,
        count: int,
        context,
        closure_stamps: tuple,
        options: Options,
        record: str = "",
        digest: str = "",
    ):
        self.key, self.closure, self.count, self.context = key, closure, count, context
        self.closure_stamps, self.options, self.record = closure_stamps, options, record
        self.digest = digest  # the closure's (key/__init__.py closure_digest)

    @property
    def stamps(self) -> list | None:
        """Every file the key depended on, as (record, values) parts of stamps.take (toolchain
        record, closure headers), or None when the toolchain could not be stamped. Built only
        when asked (the warm index, key/__init__.py, writes them; a compile() hit never needs
        them)."""
        tool = self.context.toolchain.stamps
        return [take(tool), self.closure_stamps] if tool else None


def compute_key(req: Request, ctx=None, known=NOT_LOOKED_UP, fresh: bool = False) -> Keyed:
    """Key a request. ``known``: a manifest lookup the caller already made (None when it
    found nothing); ``fresh``: from a resolve, never a closure record."""
    ctx = ctx if ctx is not None else context(req)
    if req.is_ptx:
        facts, closure = (
            Facts(closure_digest([]), 0, take([]), False, NO_FLOOR, ()),
            None,
        )
    else:
        facts, closure = closure_digests(
            req.source, ctx, req.pre_includes, known, req.source_name, fresh
        )
    digest, count, part = facts.digest, facts.header_count, facts.stamps
    options = _for_closure(req, facts.floor, facts.specialized)
    names = []  # the file names the compiled code holds (headers/filename.py)
    if line_info(req.options.passthrough):
        names = [("program", req.program_name)] + [("root", d.path) for d in ctx.dirs]
    elif facts.expands_file:
        names = [("program", req.program_name)]
    fields = key_fields(
        source=req.source,
        option_fields=options.key_fields(),
        search_tags=[d.tag for d in ctx.dirs],
        nvrtc_version=ctx.toolchain.nvrtc_version_str,
        arch=req.arch,
        target=req.target,
        name_expressions=req.name_expressions,
        closure=digest,
        extra=[
            ("input", "ptx" if req.is_ptx else "c++"),
            *names,
            strip_field(),
            link_field(req.options.passthrough),
        ],
    )
    return Keyed(digest_fields(fields), closure, count, ctx, part, options, facts.record, digest)


def _for_closure(req: Request, floor, specialized: tuple[str, ...]) -> Options:
    """The options NVRTC gets: the request's, at the lowest standard the closure accepts when
    the asked one is older (standard.py; one warning per process; not with
    CUPY_RAWCODE_RAISE_STD=0), and with the shims' own std templates for those the sources
    specialize (toolkit/specializable.py)."""
    opts = req.options
    used = effective_std(opts.std, floor, config.raise_std())
    if used != opts.std:
        warn_raised(req.program_name, opts.std, used, floor)
        opts = at_standard(opts, used)
    templates = [s for s in specialized if not s.startswith("::")]
    if templates:
        opts = opts._replace(macros=opts.macros + specializable_macros(templates))
    # names the program declares itself, left out of jitify=True's global blocks (only there)
    own = [s[2:] for s in specialized if s.startswith("::")]
    if own and any(n == jitify_names.GUARD for n, _ in opts.macros):
        opts = opts._replace(macros=opts.macros + jitify_names.own_macros(own))
    return opts


def request_closure(req: Request, *, exact: bool = False):
    """The header closure of a request with its pre-includes and CuPy's default options, so
    that its header count is the one a compile reports (Keyed.count): fast mode (what the key
    covers) or exact mode (what NVRTC reads for ``req.arch``). Nothing is raised for a missing
    header in fast mode (Closure.raise_for_missing does)."""
    from ..headers.closure import MAIN, Closure  # the resolver: not on a manifest hit's path

    ctx = context(req)
    if req.is_ptx:
        return Closure((), (), "exact" if exact else "fast", ctx.dirs)
    name = req.source_name or MAIN
    if exact:
        from ..headers.exact import resolve_exact  # pcpp: imported only for exact mode

        return resolve_exact(
            req.source, ctx, arch=req.arch, pre_includes=req.pre_includes, main_name=name
        )
    from ..headers.fast import resolve_fast  # the resolver: not on a manifest hit's path

    return resolve_fast(req.source, ctx, req.pre_includes, name)


def cache_key(source: str, **fields: Any) -> str:
    """The cache key of a compile, as a hex string: equal under relocated header roots,
    different when any byte of the source or any closure header changes. ``fields``:
    make_request's keywords (``arch`` required)."""
    return compute_key(make_request(source, **fields)).key


def link_field(passthrough) -> tuple[str, str]:
    """The key's field for the link step: ("link", LINK_RULES) when the output is linked with
    the device runtime (devrt.py), ("link", "") otherwise."""
    return ("link", LINK_RULES if wants_rdc(passthrough) else "")
