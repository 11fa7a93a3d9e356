"""The ``cupy-rawcode`` command: deps, key, env, compile, cache, prebuild, bundle."""

from __future__ import annotations

import argparse
import os
import sys
import time


def _read_source(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise SystemExit(f"cupy-rawcode: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SystemExit(f"cupy-rawcode: {path}: not UTF-8 text ({e})") from None


def _cmd_deps(args, options) -> int:
    from .headers.resolver import resolve

    src = _read_source(args.file)
    closure = resolve(
        src,
        options,
        exact=args.exact,
        arch=args.arch,
        source_dir=os.path.dirname(os.path.abspath(args.file)),
    )
    if not args.exact:
        closure.raise_for_missing()
    print(f"{args.file}: {len(closure.headers)} headers ({closure.mode} mode)")
    for h in closure.headers:
        rel = h.logical.split(":", 1)[1]
        root = h.path[: -len(rel) - 1] if h.path.endswith(os.sep + rel) else os.path.dirname(h.path)
        print(f"  {h.logical}  [{root}]")
        if args.why:
            print(f"      via {h.why()}")
    return 0


def _cmd_key(args, options) -> int:
    from .key.request import cache_key

    src = _read_source(args.file)
    print(
        cache_key(
            src,
            arch=args.arch,
            options=options,
            target=args.target,
            source_dir=os.path.dirname(os.path.abspath(args.file)),
            source_name=os.path.basename(args.file),
        )
    )
    return 0


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
    return 0


def _cmd_compile(args, options) -> int:
    from .compiler.program import compile_request
    from .key.request import make_request

    src = _read_source(args.file)
    req = make_request(
        src,
        arch=args.arch,
        options=options,
        target=args.target,
        name_expressions=args.name_expression or (),
        source_dir=os.path.dirname(os.path.abspath(args.file)),
        source_name=os.path.basename(args.file),
    )
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
    return 0


def _human(n: float) -> str:
    """Bytes as B, KiB, MiB or GiB."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"


def _disk():
    from . import config
    from .store.directory import DirectoryStore

    return DirectoryStore(config.cache_dir())


def _cmd_cache(args, options) -> int:
    if options:
        raise ValueError(f"cache {args.action} takes no NVRTC options: {' '.join(options)}")
    disk = _disk()
    if args.action == "stats":
        entries = disk.entries()
        counts = disk.counts()
        print(f"location  {disk.root}")
        print(f"entries   {len(entries)}")
        print(f"size      {_human(sum(e.size for e in entries))} (bound {_human(disk.max_bytes)})")
        if counts is None:
            print("hits      not recorded")
        else:
            total = counts[0] + counts[1]
            rate = f" ({100 * counts[0] / total:.0f}% hits)" if total else ""
            print(f"hits      {counts[0]}\nmisses    {counts[1]}{rate}")
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

        bound = (
            disk.max_bytes
            if args.max_size is None
            else config.parse_size("--max-size", args.max_size)
        )
        removed, freed = disk.prune(bound)
        print(f"removed {removed} entries ({_human(freed)}); bound {_human(bound)}")
    return 0


def _cmd_prebuild(args, options) -> int:
    from .parallel.prebuild import jobs_for, prebuild

    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    if not archs:
        raise ValueError("--arch needs at least one architecture, e.g. sm_80,sm_90")
    if args.jobs is not None:
        from .config import check_workers

        check_workers("-j", args.jobs)
    jobs = jobs_for(args.paths, archs, tuple(options))
    outcomes = prebuild(jobs, workers=args.jobs)
    failed = [o for o in outcomes if o.error]
    for o in failed:
        print(
            f"cupy-rawcode: {o.job.label} ({o.job.arch}) failed:\n  "
            + str(o.error).replace("\n", "\n  "),
            file=sys.stderr,
        )
    keys = [o.key for o in outcomes if o.key]
    if keys:
        _record_prebuilt(keys)
    hits = sum(o.hit for o in outcomes if not o.error)
    print(
        f"prebuild: {len(outcomes) - len(failed)} of {len(outcomes)} succeeded "
        f"({len(keys) - hits} compiled, {hits} already cached), {len(failed)} failed"
    )
    return 1 if failed else 0


def _record_prebuilt(keys: list[str]) -> None:
    """Append to <cache>/prebuilt.keys, which ``bundle export --prebuilt`` reads."""
    disk = _disk()
    try:
        disk.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(disk.root / "prebuilt.keys", "a", encoding="ascii") as f:
            f.write("".join(k + "\n" for k in keys))
    except OSError as e:
        print(f"cupy-rawcode: cannot record prebuilt keys ({e})", file=sys.stderr)


def _cmd_bundle(args, options) -> int:
    from .store.bundle import BundleError, read_index, write_bundle
    from .store.entry import EntryError, decode

    if args.action == "export":
        disk = _disk()
        if args.prebuilt:
            try:
                wanted = (disk.root / "prebuilt.keys").read_text().split()
            except OSError:
                raise ValueError(
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
        return 0
    try:
        index, size = read_index(args.out)
    except BundleError as e:
        print(f"cupy-rawcode: {args.out}: {e}", file=sys.stderr)
        return 1
    from .store.bundle import BundleStore

    store, broken = BundleStore(args.out), 0
    for key in sorted(index):
        try:
            _code, meta = decode(key, store.get(key) or b"")
            print(f"{key}  {meta.get('arch', '?')} {meta.get('target', '?')}")
        except EntryError as e:
            broken += 1
            print(f"{key}  BROKEN ({e})")
    print(f"{len(index)} entries, {_human(size)}, {broken} broken")
    return 1 if broken else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cupy-rawcode",
        description=__doc__,
        epilog="Options the command does not know (-I, -D, -std=...) "
        "are NVRTC options, as CuPy users pass them.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("deps", help="print the header closure, like nvcc -M")
    d.add_argument("file")
    d.add_argument("--why", action="store_true", help="show the include chain of each header")
    d.add_argument("--exact", action="store_true", help="evaluate conditions (pcpp)")
    d.add_argument("--arch", default="sm_90", help="target for exact mode (default sm_90)")
    d.set_defaults(func=_cmd_deps)
    k = sub.add_parser("key", help="print the cache key")
    k.add_argument("file")
    k.add_argument("--arch", required=True)
    k.add_argument("--target", default="cubin", choices=("cubin", "ptx", "ltoir"))
    k.set_defaults(func=_cmd_key)
    e = sub.add_parser("env", help="print the toolchain and the header search order")
    e.set_defaults(func=_cmd_env)
    c = sub.add_parser("compile", help="compile through the cache, reporting what it did")
    c.add_argument("file")
    c.add_argument("--arch", required=True)
    c.add_argument("--target", default="cubin", choices=("cubin", "ptx", "ltoir"))
    c.add_argument("--name-expression", action="append")
    c.add_argument("-o", "--output")
    c.set_defaults(func=_cmd_compile)
    ca = sub.add_parser("cache", help="inspect and trim the cache directory")
    ca.add_argument("action", choices=("stats", "list", "clear", "prune"))
    ca.add_argument("--max-size", help="prune: the bound (e.g. 500M; default: the configured one)")
    ca.add_argument("-l", "--long", action="store_true", help="list: arch, target, NVRTC")
    ca.set_defaults(func=_cmd_cache)
    pb = sub.add_parser(
        "prebuild", help="compile kernels (files or JSON manifests) for every arch into the cache"
    )
    pb.add_argument("paths", nargs="+")
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
    b = sub.add_parser("bundle", help="write cache entries to one file, or check a bundle")
    b.add_argument("action", choices=("export", "info"))
    b.add_argument("out", help="the bundle file")
    b.add_argument(
        "--prebuilt",
        action="store_true",
        help="export: only the entries prebuild made (default: all)",
    )
    b.set_defaults(func=_cmd_bundle)
    return p


def main(argv: list[str] | None = None) -> int:
    from .headers.closure import ResolveError

    args, options = build_parser().parse_known_args(argv)
    try:
        return args.func(args, tuple(options))
    except (ResolveError, ValueError, OSError) as e:
        print(f"cupy-rawcode: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # CompileError and friends carry their own message
        if hasattr(e, "get_message"):  # errors.CompileError (a cupy CompileException)
            print(f"cupy-rawcode: {e}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
