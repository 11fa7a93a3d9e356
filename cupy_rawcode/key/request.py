"""A compile request in normalized form, and its cache key (resolve -> key)."""

import hashlib
import os
import re
from typing import Any, NamedTuple

from ..compiler.devrt import link_field
from ..headers.manifest import NOT_LOOKED_UP, closure_digests
from ..headers.options import Options, normalize_arch, parse_options, with_cupy_defaults
from . import closure_digest, digest_fields, key_fields, strip_field
from .stamps import take

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
        """The name NVRTC gives the source in diagnostics: the user's file when there is one,
        else a stable name derived from the source, in a directory that does not exist (so that
        a quoted include never searches the working directory, as in CuPy)."""
        if self.source_dir:
            return os.path.join(self.source_dir, self.source_name or "kernel.cu")
        digest = hashlib.sha256(self.source.encode("utf-8", "surrogatepass")).hexdigest()
        return f"<source>/kernel-{digest[:12]}.cu"

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
) -> Request:
    """A Request from what a user passes; every entry point (RawKernel, RawModule, install(),
    compile(), the CLI, prebuild) makes its requests here, so all compile with the same options,
    CuPy's defaults included (options.with_cupy_defaults)."""
    if not isinstance(source, str):
        raise TypeError(f"source must be str, not {type(source).__name__}")
    opts = options if isinstance(options, Options) else parse_options(options)
    opts = with_cupy_defaults(opts)
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: expected one of {TARGETS}")
    arch = normalize_arch(arch, opts)
    if target == "cubin" and not arch.startswith("sm_"):
        raise ValueError(
            f"arch={arch!r} is a virtual architecture: target='cubin' needs a real "
            f"one (sm_{arch.partition('_')[2]}); for {arch} use target='ptx'"
        )
    names = tuple(name_expressions or ())
    for n in names:
        if not isinstance(n, str) or not n:
            raise ValueError(f"name expression {n!r} is not a non-empty string")
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
    from ..headers.search import make_context

    return make_context(req.options, source_dir=req.source_dir, header_sources=req.header_sources)


class Keyed:
    """What keying a request gave: ``key`` (hex), ``closure`` (the resolved Closure, or None when
    a manifest answered), ``count`` (headers), ``context``, and the closure headers' stamps
    (``closure_stamps``, as stamps.take gives them). (A slotted class, not a NamedTuple: a
    field named ``count`` would shadow tuple.count.)"""

    __slots__ = ("closure", "closure_stamps", "context", "count", "key")

    def __init__(self, key: str, closure, count: int, context, closure_stamps: tuple):
        self.key, self.closure, self.count, self.context = key, closure, count, context
        self.closure_stamps = closure_stamps

    @property
    def stamps(self) -> list | None:
        """Every file the key depended on, as (record, values) parts of stamps.take (toolchain
        record, closure headers), or None when the toolchain could not be stamped. Built only
        when asked (index.py writes them; a compile() hit never needs them)."""
        tool = self.context.toolchain.stamps
        return [take(tool), self.closure_stamps] if tool else None


def compute_key(req: Request, ctx=None, known=NOT_LOOKED_UP) -> Keyed:
    """Key a request. ``known``: a manifest lookup the caller already made (None when it
    found nothing)."""
    ctx = ctx if ctx is not None else context(req)
    if req.is_ptx:
        (digest, count, part), closure = (closure_digest([]), 0, take([])), None
    else:
        (digest, count, part), closure = closure_digests(req.source, ctx, req.pre_includes, known)
    fields = key_fields(
        source=req.source,
        option_fields=req.options.key_fields(),
        search_tags=[d.tag for d in ctx.dirs],
        nvrtc_version=ctx.toolchain.nvrtc_version_str,
        arch=req.arch,
        target=req.target,
        name_expressions=req.name_expressions,
        closure=digest,
        extra=[
            ("input", "ptx" if req.is_ptx else "c++"),
            ("source_dir", "src" if req.source_dir else ""),
            strip_field(),
            link_field(req.options.passthrough),
        ],
    )
    return Keyed(digest_fields(fields), closure, count, ctx, part)


def cache_key(
    source: str,
    *,
    arch,
    options=(),
    name_expressions=(),
    target: str = "cubin",
    source_dir: str | None = None,
    header_sources=None,
    source_name: str | None = None,
) -> str:
    """The cache key of a compile, as a hex string: equal under relocated header roots,
    different when any byte of the source or any closure header changes."""
    req = make_request(
        source,
        arch=arch,
        options=options,
        name_expressions=name_expressions,
        target=target,
        source_dir=source_dir,
        header_sources=header_sources,
        source_name=source_name,
    )
    return compute_key(req).key
