"""The ``cupy-rawcode`` command: deps, key, env, compile."""
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
        raise SystemExit(f"cupy-rawcode: cannot read {path}: {e.strerror}")
    except UnicodeDecodeError as e:
        raise SystemExit(f"cupy-rawcode: {path}: not UTF-8 text ({e})")


def _cmd_deps(args, options) -> int:
    from .closure import resolve
    src = _read_source(args.file)
    closure = resolve(src, options, exact=args.exact, arch=args.arch,
                      source_dir=os.path.dirname(os.path.abspath(args.file)))
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
    from .request import cache_key
    src = _read_source(args.file)
    print(cache_key(src, arch=args.arch, options=options, target=args.target,
                    source_dir=os.path.dirname(os.path.abspath(args.file))))
    return 0


def _cmd_env(args, options) -> int:
    from .closure import make_context
    ctx = make_context(options)
    tc = ctx.toolchain
    print(f"cupy-rawcode {__import__('cupy_rawcode').__version__}")
    print(f"NVRTC           {tc.nvrtc_version_str}")
    print(f"CCCL            {tc.cccl_version or 'not found'}")
    print(f"header sources  {','.join(tc.sources)}")
    print("search order (after the including file's own directory for quoted includes):")
    for i, d in enumerate(ctx.dirs):
        print(f"  {i:2d}. {d.tag:7s} {d.path}  ({d.origin})")
    from . import config
    print(f"cache           {config.cache_dir()}")
    return 0


def _cmd_compile(args, options) -> int:
    from .program import compile_request
    from .request import make_request
    src = _read_source(args.file)
    req = make_request(src, arch=args.arch, options=options, target=args.target,
                       name_expressions=args.name_expression or (),
                       source_dir=os.path.dirname(os.path.abspath(args.file)))
    t0 = time.perf_counter()
    result = compile_request(req)
    total = time.perf_counter() - t0
    code = result.object_code.code
    print(f"{args.file}: {'hit' if result.hit else 'miss'} ({result.hit_layer or 'compiled'})")
    print(f"  key       {result.key}")
    print(f"  headers   {result.header_count}")
    print(f"  target    {req.target} for {req.arch}, {len(code)} bytes")
    print(f"  times     key {result.key_seconds * 1e3:.1f} ms, compile "
          f"{result.compile_seconds * 1e3:.1f} ms, total {total * 1e3:.1f} ms")
    if args.output:
        with open(args.output, "wb") as f:
            f.write(code)
        print(f"  wrote     {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cupy-rawcode", description=__doc__,
                                epilog="Options the command does not know (-I, -D, -std=...) "
                                       "are NVRTC options, as CuPy users pass them.")
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
    return p


def main(argv: list[str] | None = None) -> int:
    from .closure import ResolveError
    args, options = build_parser().parse_known_args(argv)
    try:
        return args.func(args, tuple(options))
    except (ResolveError, ValueError) as e:
        print(f"cupy-rawcode: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # CompileError and friends carry their own message
        if type(e).__name__ == "CompileError":
            print(f"cupy-rawcode: {e}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
