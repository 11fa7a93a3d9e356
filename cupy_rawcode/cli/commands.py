"""The subcommands of ``cupy-rawcode``: each runs what the package does and prints it."""

from __future__ import annotations

import functools
import json
import os
import stat
import sys
import time

from ..ground import deferred, kind_of
from ..ground.config import check_workers
from ..ground.errors import EntryError
from ..ground.inputs import read_source
from ..headers.options import file_options
from ..key import portable
from ..store import maintenance, transfer, uncounted
from ..store.bundle import BundleError, BundleStore, damage, read_index, write_bundle
from ..store.entry import decode
from ..store.layout import cache_location, refusal
from ..store.usage import CacheFilesError, failure
from . import stats
from .codes import EXIT_COMPILE, EXIT_ERROR, EXIT_OK, InputError, UsageError
from .stats import human as _human
from .transfer import cache_transfer  # pull and push (the remote levels)

# the compile pipeline, for the commands that key or compile only: ``cache`` and ``bundle``
# start without it (ground/deferrals.py)
request = deferred("cupy_rawcode.key.request")
header_options = deferred("cupy_rawcode.headers.options")
search = deferred("cupy_rawcode.headers.search")
toolrecord = deferred("cupy_rawcode.toolkit.record")
compiling = deferred("cupy_rawcode.orchestrator.compiling")
flow = deferred("cupy_rawcode.orchestrator.flow")  # deps of a source with a moved header
prebuilding = deferred("cupy_rawcode.parallel.prebuild")


def _read_source(path: str) -> str:
    """The file's text, checked (inputs.read_source): a NUL, a lone surrogate or bytes that are
    not UTF-8 raise BadInputError naming path:line:col (exit status 2); a file that cannot be
    read, or is no regular file (a FIFO would block), is an InputError (4)."""
    try:
        return read_source(path)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None


def _request(args, options, *, arch=None, target: str = "cubin", name_expressions=()):
    """The compile request of the subcommand's FILE, as compile makes it (make_request), for
    ``arch`` (default: its --arch)."""
    return request.make_request(
        _read_source(args.file),
        arch=arch or args.arch,
        options=options,
        target=target,
        name_expressions=name_expressions,
        source_dir=os.path.dirname(os.path.abspath(args.file)),
        source_name=os.path.basename(args.file),
    )


def _checked_closure(req):
    """The request's fast closure; MissingHeaderError for what NVRTC would not find."""
    closure = request.request_closure(req)
    closure.raise_for_missing()
    return closure


def _cmd_deps(args, options) -> int:
    arch = args.arch
    if arch is None:  # an -arch option, else sm_90
        arch = header_options.parse_options(options).arch or "sm_90"
    # the request compile makes (its pre-include and CuPy's defaults): the same header count
    req = _request(args, options, arch=arch, target="ptx")
    if args.exact:
        closure = request.request_closure(req, exact=True)
    else:  # a moved header answered by its new name, as a compile does
        closure = flow.moved_answered(req, _checked_closure)
    print(f"{args.file}: {len(closure.headers)} headers ({closure.mode} mode)")
    for h in closure.headers:
        rel = h.logical.split(":", 1)[1]
        root = h.path[: -len(rel) - 1] if h.path.endswith(os.sep + rel) else os.path.dirname(h.path)
        print(f"  {h.logical}  [{root}]")
        if args.why:
            print(f"      via {h.why()}")
    return EXIT_OK


def _cmd_key(args, options) -> int:
    keyed = request.compute_key(_request(args, options, target=args.target))
    print(keyed.key)
    if args.verbose:
        print(f"{args.file}: {keyed.count} headers")
    return EXIT_OK


def _cmd_env(args, options) -> int:
    ctx = search.make_context(options)
    tc = ctx.toolchain
    print(f"cupy-rawcode {__import__('cupy_rawcode').__version__}")
    print(f"NVRTC           {tc.nvrtc_version_str} ({tc.nvrtc_library or 'library path unknown'})")
    print(f"CCCL            {tc.cccl_version or 'not found'}")
    print(f"header sources  {','.join(tc.sources)}")
    print("search order (after the including file's own directory for quoted includes):")
    for i, d in enumerate(ctx.dirs):
        print(f"  {i:2d}. {d.tag:7s} {d.path}  ({d.origin})")
    print(f"cache           {cache_location().path}")
    print(
        f"toolchain       {'from the record' if tc.from_record else 'discovered'} "
        f"{toolrecord.record_path(tc.sources)}"
    )
    return EXIT_OK


def _cmd_compile(args, options) -> int:
    req = _request(args, options, target=args.target, name_expressions=args.name_expression or ())
    t0 = time.perf_counter()
    result = compiling.compile_request(req)
    total = time.perf_counter() - t0
    code = result.code
    print(f"{args.file}: {'hit' if result.hit else 'miss'} ({result.hit_layer or 'compiled'})")
    print(f"  key       {result.key}")
    print(f"  headers   {result.header_count}")
    print(f"  target    {req.target} for {req.arch}, {len(code)} bytes")
    if "stripped" in result.made:
        by = f", cubin by {result.made['assembler']}" if "assembler" in result.made else ""
        print(f"  stripped  {result.made['stripped']} unreferenced library globals{by}")
    print(
        f"  times     key {result.key_seconds * 1e3:.1f} ms, compile "
        f"{result.compile_seconds * 1e3:.1f} ms, total {total * 1e3:.1f} ms"
    )
    if args.output:
        with open(args.output, "wb") as f:
            f.write(code)
        print(f"  wrote     {args.output}")
    return EXIT_OK


_KIND_NAMES = {
    "entries": "entries",
    "manifests": "manifests",
    "index": "index entries",
    "toolchain": "toolchain records",
}


def _cache_disk():
    """The cache directory for a command that reads or removes its files; a directory that is
    not a cupy-rawcode cache (store/layout.py: CUPY_RAWCODE_CACHE_DIR=/, say) is a usage error,
    refused before anything there is walked."""
    disk = maintenance.disk()
    why = refusal(disk.root)
    if why is not None:
        raise UsageError(why)
    return disk


def _uncounted(command):
    """A maintenance command's own reads (``cache list -l``, ``bundle export`` and ``info``)
    are no look-ups: counted nowhere (store.uncounted), never kept with the compiles'."""

    @functools.wraps(command)
    def run(args, options) -> int:
        with uncounted():
            return command(args, options)

    return run


@_uncounted
def _cmd_cache(args, options) -> int:
    if (status := cache_transfer(args)) is not None:
        return status
    for flag, given in (("--zero", args.zero), ("--json", args.json)):
        if given and args.action != "stats":
            raise UsageError(f"{flag} goes with 'cache stats', not 'cache {args.action}'")
    disk = _cache_disk()
    if args.action == "stats":
        found = stats.collect(disk)
        if args.json:
            print(json.dumps(found, indent=2))
        else:
            print("\n".join(stats.lines(found)))
        usage_errors = found["unreadable_files"]
        if usage_errors:
            more = f" (and {len(usage_errors) - 1} more)" if len(usage_errors) > 1 else ""
            raise CacheFilesError(f"cannot read {disk.root}: {usage_errors[0]}{more}")
        if args.zero:
            disk.zero_counts()
            if not args.json:
                print("hits and misses zeroed")
    elif args.action == "list":
        for e in disk.entries()[::-1]:
            line = (
                f"{e.key}  {e.size:>9}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(e.used))}"
            )
            if args.long:
                data = disk.get(e.key)
                try:
                    _code, meta = decode(e.key, data or b"")
                    line += (
                        f"  {meta.get('arch', '?')} {meta.get('target', '?')} "
                        f"nvrtc {meta.get('nvrtc', '?')} "
                        f"{meta.get('headers', len(meta.get('closure', [])))} headers"
                    )
                except EntryError as err:
                    line += f"  BROKEN ({err})"
            print(line)
    elif args.action == "clear":
        print(f"removed {disk.clear()} entries from {disk.root}")
    elif args.action == "prune":
        bound = maintenance.prune_bound(disk, args.max_size)
        if bound is None and args.max_size is not None:
            print(
                f"--max-size {args.max_size} means no bound (as CUPY_RAWCODE_CACHE_MAX_SIZE=0): "
                "nothing to prune"
            )
            return EXIT_OK
        if not bound:
            print(f"no bound is configured for {disk.root}: nothing to prune (use --max-size)")
            return EXIT_OK
        done = disk.prune(bound)
        if done is None:  # another process prunes, and held its lock past locks.LONG
            raise CacheFilesError(
                f"cannot prune {disk.root}: another process holds its prune lock; try again"
            )
        kinds = ", ".join(
            f"{done.removed[kind]} {_KIND_NAMES[kind]}"
            for kind in _KIND_NAMES
            if kind in done.removed
        )
        print(
            f"removed {done.files} files ({kinds + '; ' if kinds else ''}{_human(done.freed)}); "
            f"{_human(done.total)} left, bound {_human(bound)}"
        )
        if done.errors:
            raise failure("prune", disk.root, done.errors)
    return EXIT_OK


def _cmd_prebuild(args, options) -> int:
    writes = file_options(options)
    if writes:  # such a compile runs NVRTC every time and keeps nothing (README: Cache key)
        raise UsageError(
            f"prebuild: {writes[0]} names a file NVRTC writes or reads on every compile, so "
            "nothing compiled with it is stored: there is nothing to prebuild"
        )
    archs = prebuilding.archs_of(args.arch)
    if args.jobs is not None:
        check_workers("-j", args.jobs)
    jobs = prebuilding.plan_jobs(args.paths, archs, tuple(options), args.manifest, args.root)
    outcomes = prebuilding.prebuild(jobs, workers=args.jobs)
    failed = prebuilding.failed(outcomes)
    for o in failed:
        print(
            f"cupy-rawcode: {o.job.label} ({o.job.arch}) failed:\n  "
            + str(o.error).replace("\n", "\n  "),
            file=sys.stderr,
        )
    lost = prebuilding.lost(outcomes)
    for o in lost:
        print(
            f"cupy-rawcode: {o.job.label} ({o.job.arch}) compiled, but not stored in "
            f"{maintenance.disk().root} (full or read-only?)",
            file=sys.stderr,
        )
    keys = prebuilding.stored_keys(outcomes)
    problem = maintenance.record_prebuilt(keys) if keys else None
    if problem:
        _report(f"cupy-rawcode: {problem}")
    print(_prebuild_summary(len(outcomes), len(failed), len(lost), sum(o.hit for o in outcomes)))
    return EXIT_COMPILE if failed or lost else EXIT_OK


def _prebuild_summary(total: int, failed: int, lost: int, hits: int) -> str:
    """prebuild's last line: a kernel compiled but not stored did not succeed, and says so."""
    ok = total - failed - lost
    line = (
        f"prebuild: {ok} of {total} succeeded ({ok - hits} compiled, {hits} already cached), "
        f"{failed} failed"
    )
    return line + (f" ({lost} compiled, but not stored)" if lost else "")


@_uncounted
def _cmd_bundle(args, options) -> int:
    if args.action == "export":
        disk = _cache_disk()
        if args.prebuilt:
            keys = _prebuilt_keys(disk.root)
        else:
            keys = [e.key for e in disk.entries()]
        entries, skipped, metas = maintenance.exportable(disk, keys)
        # the closure records the entries name (key/portable.py): a new process keys them
        # without resolving headers (a whole export holds them already)
        extra, _, more = maintenance.exportable(disk, transfer.named_in(metas, set(keys)))
        n = write_bundle(args.out, entries + extra)
        records = sum(m.get("target") == portable.TARGET for m in (*metas.values(), *more.values()))
        print(
            f"wrote {n - records} entries to {args.out}"
            + (f" with {records} closure records" if records else "")
            + (f" ({skipped} missing or broken skipped)" if skipped else "")
        )
        return EXIT_OK
    try:
        found = read_index(args.out)
    except BundleError as e:
        raise InputError(f"{args.out}: {e}") from None
    store, records = BundleStore(args.out, found.entries), 0
    broken = len(found.cut) + len(found.bad)
    for key in sorted(found.entries):
        try:
            _code, meta = decode(key, store.get(key) or b"")
            if meta.get("target") == portable.TARGET:
                records += 1
                print(f"{key}  closure record")
            else:
                print(f"{key}  {meta.get('arch', '?')} {meta.get('target', '?')}")
        except EntryError as e:
            broken += 1
            print(f"{key}  BROKEN ({e})")
    for key in found.cut:
        print(f"{key}  BROKEN (beyond the end of the file)")
    for key, why in found.bad.items():
        print(f"{key}  BROKEN ({why})")
    total = len(found.entries) + len(found.cut) + len(found.bad) - records
    kept = f" and {records} closure records" if records else ""
    print(f"{total} entries{kept}, {_human(found.size)}, {broken} broken")
    damaged = damage(found)
    if damaged:
        _report(f"cupy-rawcode: error: {args.out}: {damaged}")
    return EXIT_ERROR if broken else EXIT_OK


def _prebuilt_keys(root) -> list[str]:
    """The keys prebuild recorded in ``root`` (maintenance.prebuilt_keys); a prebuilt.keys that
    is no regular file (a FIFO, a link, a directory) is never read: an InputError (4) saying
    what it is, not "no prebuild recorded"."""
    path = root / "prebuilt.keys"
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = None  # none: maintenance says no prebuild was recorded
    if mode is not None and not stat.S_ISREG(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else kind_of(mode)
        raise InputError(
            f"{path} is {what}, not a regular file: no prebuild record can be read from it "
            "(remove it and run cupy-rawcode prebuild again, or export everything)"
        )
    return maintenance.prebuilt_keys(root)


def _report(message: str) -> None:
    print(message, file=sys.stderr)
