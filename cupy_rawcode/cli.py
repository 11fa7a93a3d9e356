"""The ``cupy-rawcode`` command: deps, key, env, compile, cache, prebuild, bundle."""

from __future__ import annotations

import argparse
import os
import sys
import time

from .errors import RawcodeError, RawcodeValueError

# Exit statuses, the same for every subcommand (listed in --help and in the README).
EXIT_OK = 0
EXIT_COMPILE = 1  # NVRTC rejected the source; prebuild: a kernel failed or was not stored
EXIT_USAGE = 2  # argparse's: the command line, a manifest or a source is refused as given
EXIT_MISSING_HEADER = 3  # an #include matched no file
EXIT_ERROR = 4  # a file that cannot be read (a FIFO...), a broken bundle, an internal error
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (| head): 128 + SIGPIPE, quietly

EXIT_CODES = (
    (EXIT_OK, "success"),
    (
        EXIT_COMPILE,
        "compile error (NVRTC rejected the source); prebuild: a kernel failed, or was "
        "compiled but not stored (a full or read-only cache)",
    ),
    (
        EXIT_USAGE,
        "usage error or bad input, refused before NVRTC runs: an unknown subcommand or "
        "flag, a bad option value, a bad manifest, a source or header NVRTC would misread "
        "(not UTF-8, a NUL byte)",
    ),
    (EXIT_MISSING_HEADER, "missing header: an #include matched no file"),
    (
        EXIT_ERROR,
        "a file that cannot be read: missing, no permission, not a regular file (a FIFO, a "
        "device); a broken bundle; an internal error",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (
        EXIT_BROKEN_PIPE,
        "the output pipe closed early (piped into head, say): nothing more is printed",
    ),
)

# subcommands whose unknown options are NVRTC options (the others refuse them)
NVRTC_SUBCOMMANDS = ("deps", "key", "env", "compile", "prebuild")


class UsageError(RawcodeError, ValueError):
    """A command line that cannot be carried out as given (exit status 2)."""


class InputError(RawcodeError):
    """An input file that cannot be used (exit status 4)."""


def _read_source(path: str) -> str:
    """The file's text, checked (inputs.read_source): a NUL, a lone surrogate or bytes that are
    not UTF-8 raise BadInputError naming path:line:col (exit status 2); a file that cannot be
    read, or is no regular file (a FIFO would block), is an InputError (4)."""
    from .inputs import read_source

    try:
        return read_source(path)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None


def _request(args, options, *, arch=None, target: str = "cubin", name_expressions=()):
    """The compile request of the subcommand's FILE, as compile makes it (make_request), for
    ``arch`` (default: its --arch)."""
    from .key.request import make_request

    return make_request(
        _read_source(args.file),
        arch=arch or args.arch,
        options=options,
        target=target,
        name_expressions=name_expressions,
        source_dir=os.path.dirname(os.path.abspath(args.file)),
        source_name=os.path.basename(args.file),
    )


def _cmd_deps(args, options) -> int:
    from .key.request import request_closure

    arch = args.arch
    if arch is None:  # an -arch option, else sm_90
        from .headers.options import parse_options

        arch = parse_options(options).arch or "sm_90"
    # the request compile makes (its pre-include and CuPy's defaults): the same header count
    closure = request_closure(_request(args, options, arch=arch, target="ptx"), exact=args.exact)
    if not args.exact:
        closure.raise_for_missing()
    print(f"{args.file}: {len(closure.headers)} headers ({closure.mode} mode)")
    for h in closure.headers:
        rel = h.logical.split(":", 1)[1]
        root = h.path[: -len(rel) - 1] if h.path.endswith(os.sep + rel) else os.path.dirname(h.path)
        print(f"  {h.logical}  [{root}]")
        if args.why:
            print(f"      via {h.why()}")
    return EXIT_OK


def _cmd_key(args, options) -> int:
    from .key.request import compute_key

    keyed = compute_key(_request(args, options, target=args.target))
    print(keyed.key)
    if args.verbose:
        print(f"{args.file}: {keyed.count} headers")
    return EXIT_OK


def _cmd_env(args, options) -> int:
    from .headers.search import make_context

    ctx = make_context(options)
    tc = ctx.toolchain
    print(f"cupy-rawcode {__import__('cupy_rawcode').__version__}")
    print(f"NVRTC           {tc.nvrtc_version_str} ({tc.nvrtc_library or 'library path unknown'})")
    print(f"CCCL            {tc.cccl_version or 'not found'}")
    print(f"header sources  {','.join(tc.sources)}")
    print("search order (after the including file's own directory for quoted includes):")
    for i, d in enumerate(ctx.dirs):
        print(f"  {i:2d}. {d.tag:7s} {d.path}  ({d.origin})")
    from . import config
    from .toolkit import record as toolrecord

    print(f"cache           {config.cache_dir()}")
    print(
        f"toolchain       {'from the record' if tc.from_record else 'discovered'} "
        f"{toolrecord.record_path(tc.sources)}"
    )
    return EXIT_OK


def _cmd_compile(args, options) -> int:
    from .compiler.program import compile_request

    req = _request(args, options, target=args.target, name_expressions=args.name_expression or ())
    t0 = time.perf_counter()
    result = compile_request(req)
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


def _human(n: float) -> str:
    """Bytes as B, KiB, MiB or GiB."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"


_KIND_NAMES = {
    "entries": "entries",
    "manifests": "manifests",
    "index": "index entries",
    "toolchain": "toolchain records",
}


def _disk():
    from . import config
    from .store.directory import DirectoryStore

    return DirectoryStore(config.cache_dir())


def _cache_disk():
    """The cache directory for a command that reads or removes its files; a directory that is
    not a cupy-rawcode cache (store/layout.py: CUPY_RAWCODE_CACHE_DIR=/, say) is a usage error,
    refused before anything there is walked."""
    from .store.layout import refusal

    disk = _disk()
    why = refusal(disk.root)
    if why is not None:
        raise UsageError(why)
    return disk


def _cmd_cache(args, options) -> int:
    if args.zero and args.action != "stats":
        raise UsageError(f"--zero goes with 'cache stats', not 'cache {args.action}'")
    disk = _cache_disk()
    if args.action == "stats":
        from .store.sizebound import scan

        usage = scan(disk.root)
        counts = disk.counts()
        print(f"location  {disk.root}")
        for kind, (n, size) in usage.by_kind().items():
            print(f"{kind:<9s} {n} ({_human(size)})")
        limit = f"bound {_human(disk.max_bytes)}" if disk.max_bytes else "no bound"
        print(f"size      {_human(usage.total)} in all ({limit})")
        if counts is None:
            print("hits      not recorded")
        else:
            total = counts[0] + counts[1]
            rate = f" ({100 * counts[0] / total:.0f}% hits)" if total else ""
            print(f"hits      {counts[0]}\nmisses    {counts[1]}{rate}")
        if usage.errors:
            from .store.sizebound import failure

            raise failure("read", disk.root, usage.errors)
        if args.zero:
            disk.zero_counts()
            print("hits and misses zeroed")
    elif args.action == "list":
        from .store.entry import EntryError, decode

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
        from . import config
        from .store.sizebound import failure

        bound = (
            disk.max_bytes
            if args.max_size is None
            else config.parse_size("--max-size", args.max_size) or None
        )
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
            from .store.sizebound import failure

            raise failure("prune", disk.root, done.errors)
    return EXIT_OK


def _cmd_prebuild(args, options) -> int:
    from .parallel.prebuild import jobs_for, prebuild, record_jobs

    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    if not archs:
        raise RawcodeValueError("--arch needs at least one architecture, e.g. sm_80,sm_90")
    if args.jobs is not None:
        from .config import check_workers

        check_workers("-j", args.jobs)
    roots = args.root or ()
    jobs = jobs_for(args.paths, archs, tuple(options), roots)
    for rec in args.manifest or ():
        jobs += record_jobs(rec, archs, roots)
    if not jobs:
        raise RawcodeValueError(
            "prebuild: nothing to compile (give files, JSON manifests or --manifest)"
        )
    outcomes = prebuild(jobs, workers=args.jobs)
    failed = [o for o in outcomes if o.error]
    for o in failed:
        print(
            f"cupy-rawcode: {o.job.label} ({o.job.arch}) failed:\n  "
            + str(o.error).replace("\n", "\n  "),
            file=sys.stderr,
        )
    lost = [o for o in outcomes if not o.error and not o.stored]
    for o in lost:
        print(
            f"cupy-rawcode: {o.job.label} ({o.job.arch}) compiled, but not stored in "
            f"{_disk().root} (full or read-only?)",
            file=sys.stderr,
        )
    keys = [o.key for o in outcomes if o.key and o.stored]
    if keys:
        _record_prebuilt(keys)
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


def _record_prebuilt(keys: list[str]) -> None:
    """Append to <cache>/prebuilt.keys, which ``bundle export --prebuilt`` reads: only in a
    directory the cache claims (store/layout.py), never through a link or into a FIFO."""
    from .regular import open_own
    from .store.layout import claim, foreign_message

    disk = _disk()
    try:
        if not claim(disk.root):
            print(
                f"cupy-rawcode: prebuilt keys not recorded: {foreign_message(disk.root)}",
                file=sys.stderr,
            )
            return
        fd = open_own(disk.root / "prebuilt.keys", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a", encoding="ascii") as f:
            f.write("".join(k + "\n" for k in keys))
    except OSError as e:
        print(f"cupy-rawcode: cannot record prebuilt keys ({e})", file=sys.stderr)


def _cmd_bundle(args, options) -> int:
    from .store.bundle import BundleError, read_index, write_bundle
    from .store.entry import EntryError, decode

    if args.action == "export":
        from .regular import RECORD_LIMIT, read_cache_file

        disk = _cache_disk()
        if args.prebuilt:
            raw = read_cache_file(disk.root / "prebuilt.keys", 32 * RECORD_LIMIT)
            try:
                wanted = (raw or b"").decode("ascii").split()
            except UnicodeDecodeError:
                raw = None
            if raw is None:
                raise RawcodeValueError(
                    f"no prebuild recorded in {disk.root}; run cupy-rawcode "
                    "prebuild first, or export everything"
                ) from None
            keys = list(dict.fromkeys(wanted))
        else:
            keys = [e.key for e in disk.entries()]
        entries, skipped = [], 0
        for key in keys:
            data = disk.get(key)
            try:
                decode(key, data or b"")
            except EntryError:
                skipped += 1  # missing (evicted) or broken: never shipped
                continue
            entries.append((key, data))
        n = write_bundle(args.out, entries)
        print(
            f"wrote {n} entries to {args.out}"
            + (f" ({skipped} missing or broken skipped)" if skipped else "")
        )
        return EXIT_OK
    try:
        found = read_index(args.out)
    except BundleError as e:
        raise InputError(f"{args.out}: {e}") from None
    from .store.bundle import BundleStore, truncation

    store, broken = BundleStore(args.out, found.entries), len(found.cut)
    for key in sorted(found.entries):
        try:
            _code, meta = decode(key, store.get(key) or b"")
            print(f"{key}  {meta.get('arch', '?')} {meta.get('target', '?')}")
        except EntryError as e:
            broken += 1
            print(f"{key}  BROKEN ({e})")
    for key in found.cut:
        print(f"{key}  BROKEN (beyond the end of the file)")
    total = len(found.entries) + len(found.cut)
    print(f"{total} entries, {_human(found.size)}, {broken} broken")
    cut = truncation(found)
    if cut:
        _report(f"cupy-rawcode: error: {args.out}: {cut}")
    return EXIT_ERROR if broken else EXIT_OK


def _exit_table() -> str:
    """EXIT_CODES as --help lists them."""
    import textwrap

    rows = (
        textwrap.fill(what, 78, initial_indent=f"  {code:3d}  ", subsequent_indent=" " * 7)
        for code, what in EXIT_CODES
    )
    return "exit status:\n" + "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    """The command line; ``nvrtc`` (a default of each subcommand) says whether it takes NVRTC
    options: flags it does not know are then handed to NVRTC, which must accept them."""
    import textwrap

    from . import __version__

    p = argparse.ArgumentParser(
        prog="cupy-rawcode",
        description="Resolve headers, key, compile and cache CUDA C++ kernels for CuPy.",
        epilog=textwrap.fill(
            "deps, key, env, compile and prebuild take NVRTC options too (-I, -D, "
            "-std=..., --use_fast_math), as CuPy users pass them; a flag that neither the "
            "subcommand nor NVRTC knows is a usage error.",
            78,
        )
        + "\n\n"
        + _exit_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="SUBCOMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        nvrtc = name in NVRTC_SUBCOMMANDS
        c = sub.add_parser(
            name,
            help=help,
            description=help[0].upper() + help[1:] + ".",
            epilog=("Other options are NVRTC options (-I, -D, -std=...).\n\n" if nvrtc else "")
            + _exit_table(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,  # an NVRTC option is never read as an abbreviation of ours
        )
        c.set_defaults(nvrtc=nvrtc)
        return c

    d = command("deps", "print the header closure, like nvcc -M")
    d.add_argument("file")
    d.add_argument("--why", action="store_true", help="show the include chain of each header")
    d.add_argument("--exact", action="store_true", help="evaluate conditions (pcpp)")
    d.add_argument("--arch", help="target for exact mode (default: the -arch option, else sm_90)")
    d.set_defaults(func=_cmd_deps)
    k = command("key", "print the cache key")
    k.add_argument("file")
    k.add_argument("--arch", required=True)
    k.add_argument("--target", default="cubin", choices=("cubin", "ptx", "ltoir"))
    k.add_argument("--verbose", action="store_true", help="also print the header count")
    k.set_defaults(func=_cmd_key)
    e = command("env", "print the toolchain and the header search order")
    e.set_defaults(func=_cmd_env)
    c = command("compile", "compile through the cache, reporting what it did")
    c.add_argument("file")
    c.add_argument("--arch", required=True)
    c.add_argument("--target", default="cubin", choices=("cubin", "ptx", "ltoir"))
    c.add_argument("--name-expression", action="append")
    c.add_argument("-o", "--output")
    c.set_defaults(func=_cmd_compile)
    ca = command("cache", "inspect and trim the cache directory")
    ca.add_argument("action", choices=("stats", "list", "clear", "prune"))
    ca.add_argument(
        "--max-size",
        help="prune: the size to trim the cache to (e.g. 500M; 0 means no bound, as "
        "CUPY_RAWCODE_CACHE_MAX_SIZE=0; default: the configured bound)",
    )
    ca.add_argument("-l", "--long", action="store_true", help="list: arch, target, NVRTC")
    ca.add_argument(
        "-z", "--zero", action="store_true", help="stats: then zero the hit and miss counts"
    )
    ca.set_defaults(func=_cmd_cache)
    pb = command(
        "prebuild", "compile kernels (files or JSON manifests) for every arch into the cache"
    )
    pb.add_argument("paths", nargs="*", help="CUDA files or JSON manifests")
    pb.add_argument(
        "--manifest",
        action="append",
        metavar="RECORD",
        help="a record of what an application compiled (cupy_rawcode.record, "
        "CUPY_RAWCODE_RECORD): every entry, CuPy's own compiles included; repeatable",
    )
    pb.add_argument(
        "--root",
        action="append",
        metavar="DIR",
        help="a directory that manifests and records may name paths in, beside their own "
        "(absolute paths in them need one); repeatable",
    )
    pb.add_argument("--arch", required=True, help="comma-separated, e.g. sm_80,sm_90")
    pb.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        help="worker processes (default: CUPY_RAWCODE_WORKERS, else what the "
        "machine can take: cores, and memory at ~400 MB per compile)",
    )
    pb.set_defaults(func=_cmd_prebuild)
    b = command("bundle", "write cache entries to one file, or check a bundle")
    b.add_argument("action", choices=("export", "info"))
    b.add_argument("out", help="the bundle file")
    b.add_argument(
        "--prebuilt",
        action="store_true",
        help="export: only the entries prebuild made (default: all)",
    )
    b.set_defaults(func=_cmd_bundle)
    p.subcommands = sub.choices  # type: ignore[attr-defined]  # name -> its parser
    return p


# ccache and sccache options -> what does it here ({} is the option's value)
CCACHE_OPTIONS = {
    "-s": "cache stats",
    "--show-stats": "cache stats",
    "--print-stats": "cache stats",
    "--show-adv-stats": "cache stats",
    "-z": "cache stats -z",
    "--zero-stats": "cache stats -z",
    "-C": "cache clear",
    "--clear": "cache clear",
    "-c": "cache prune",
    "--cleanup": "cache prune",
    "-M": "cache prune --max-size {}",
    "--max-size": "cache prune --max-size {}",
    "-p": "env",
    "--show-config": "env",
}


_CACHE_OWN = ("-z", "--zero", "-l", "--long", "--max-size")  # cache's own: never a hint


def _ccache_flag(item: str) -> tuple[str | None, str]:
    """(the ccache option ``item`` is, its value if joined), or (None, "")."""
    flag, _, value = item.partition("=")
    if flag not in CCACHE_OPTIONS and item.startswith("-M") and len(item) > 2:
        flag, value = "-M", item[2:]
    return (flag, value) if flag in CCACHE_OPTIONS else (None, "")


def ccache_hint(argv: list[str]) -> str | None:
    """The message for a ccache/sccache option given before any subcommand or to ``cache``,
    naming our equivalent (those users type ``-s``, ``-M 5G``); None for other command lines."""
    sub = None
    for n, item in enumerate(argv):
        if not item.startswith("-"):
            sub = sub or item
            if sub != "cache":
                return None  # another subcommand: its own parser judges its options
            continue
        if sub == "cache" and item.partition("=")[0] in _CACHE_OWN:
            continue
        flag, value = _ccache_flag(item)
        if flag is None:
            continue
        sized = "{}" in CCACHE_OPTIONS[flag]
        if sized and not value:
            following = argv[n + 1] if n + 1 < len(argv) else "-"
            value = "SIZE" if following.startswith("-") else following
        ours = CCACHE_OPTIONS[flag].format(value)
        note = f" (CUPY_RAWCODE_CACHE_MAX_SIZE={value} sets a lasting bound)" if sized else ""
        return f"unknown option {item} (a ccache option); did you mean `cupy-rawcode {ours}`?{note}"
    return None


def _parse(argv: list[str] | None):
    """(args, NVRTC options): argparse's SystemExit(2) for what the subcommand cannot take."""
    parser = build_parser()
    hint = ccache_hint(sys.argv[1:] if argv is None else list(argv))
    if hint:
        parser.error(hint)
    args, extra = parser.parse_known_args(argv)
    here = parser.subcommands[args.cmd]  # type: ignore[attr-defined]
    if extra and not args.nvrtc:
        here.error(f"unrecognized arguments: {' '.join(extra)} ({args.cmd} takes no NVRTC options)")
    if extra:
        from .headers.options import NotAnOptionError, parse_options

        try:
            opts = parse_options(extra)
        except NotAnOptionError as e:  # an extra FILE, say
            here.error(f"unrecognized arguments: {e.item}")
        except ValueError as e:
            here.error(str(e))
        from .compiler.nvrtc import refused_option

        refused = refused_option(opts.passthrough)  # NVRTC knows the rest: -I, -D, -std...
        if refused:
            here.error(
                f"{refused}: neither an option of 'cupy-rawcode {args.cmd}' nor one NVRTC accepts"
            )
    return args, tuple(extra)


def _report(message: str) -> None:
    print(message, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status (EXIT_CODES), never raises for bad input."""
    try:
        try:
            args, options = _parse(argv)
        except SystemExit as e:  # argparse: usage error (2), or --help / --version (0)
            return e.code if isinstance(e.code, int) else EXIT_USAGE
        return _run(args, options)
    except KeyboardInterrupt:
        _quiet_interrupts()
        _report("cupy-rawcode: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: flushing it at exit would fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _quiet_interrupts() -> None:
    """A second Ctrl-C while exiting prints nothing either."""
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass


def _run(args, options) -> int:
    from .headers.closure import MissingHeaderError, UnreadableHeaderError

    try:
        return args.func(args, options)
    except BrokenPipeError:
        raise  # main's: before OSError
    except MissingHeaderError as e:  # MissingHeaderCompileError too: before CompileError
        _report(f"cupy-rawcode: error: {e}")
        return EXIT_MISSING_HEADER
    except (UnreadableHeaderError, InputError, OSError) as e:  # before ValueError: one of them
        _report(f"cupy-rawcode: error: {e}")
        return EXIT_ERROR
    except ValueError as e:  # a bad option value, manifest, source: refused as given
        _report(f"cupy-rawcode: error: {e}")
        return EXIT_USAGE
    except Exception as e:
        if hasattr(e, "get_message"):  # errors.CompileError (a cupy CompileException)
            _report(f"cupy-rawcode: {e}")
            return EXIT_COMPILE
        import traceback

        traceback.print_exc()
        _report(f"cupy-rawcode: internal error: {type(e).__name__}: {e}")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
