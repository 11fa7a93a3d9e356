"""The command line of ``cupy-rawcode``: its subcommands and flags, NVRTC options handed on,
and a hint for the ccache and sccache options its users type."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..ground import deferred
from .codes import EXIT_CODES
from .commands import (
    _cmd_bundle,
    _cmd_cache,
    _cmd_compile,
    _cmd_deps,
    _cmd_env,
    _cmd_key,
    _cmd_prebuild,
)

# NVRTC options on the command line only (ground/deferrals.py)
header_options = deferred("cupy_rawcode.headers.options")
nvrtc = deferred("cupy_rawcode.compiler.nvrtc")

# subcommands whose unknown options are NVRTC options (the others refuse them)
NVRTC_SUBCOMMANDS = ("deps", "key", "env", "compile", "prebuild")


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
    ca = command(
        "cache",
        "inspect and trim the cache directory; pull or push entries from or to the remote "
        "levels (CUPY_RAWCODE_REMOTE)",
    )
    ca.add_argument("action", choices=("stats", "list", "clear", "prune", "pull", "push"))
    ca.add_argument(
        "--max-size",
        help="prune: the size to trim the cache to (e.g. 500M; 0 means no bound, as "
        "CUPY_RAWCODE_CACHE_MAX_SIZE=0; default: the configured bound)",
    )
    ca.add_argument("-l", "--long", action="store_true", help="list: arch, target, NVRTC")
    ca.add_argument(
        "-z",
        "--zero",
        action="store_true",
        help="stats: then zero the hit and miss counts and every level's counts",
    )
    ca.add_argument(
        "--json",
        action="store_true",
        help="stats, pull, push: print them as one JSON object (as sccache's --stats-format json)",
    )
    ca.add_argument(
        "--manifest",
        action="append",
        metavar="RECORD",
        help="pull, push: the entries a record needs (cupy_rawcode.record, CUPY_RAWCODE_RECORD), "
        "keyed without compiling; repeatable (push without it: every local entry)",
    )
    ca.add_argument(
        "--arch",
        help="pull, push: the architectures of the record's entries, comma-separated, e.g. "
        "sm_80,sm_90 (default: the current device's)",
    )
    ca.add_argument(
        "--root",
        action="append",
        metavar="DIR",
        help="pull, push: a directory the records may name paths in, beside their own; repeatable",
    )
    ca.add_argument(
        "--verify",
        action="store_true",
        help="push: also read back the entries a level holds at the same size, and replace "
        "those that are damaged (without it, sizes alone are compared: nothing is downloaded)",
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


_CACHE_OWN = (
    "-z",
    "--zero",
    "-l",
    "--long",
    "--max-size",
    "--json",
    "--manifest",
    "--arch",
    "--root",
)  # cache's own: never a hint


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
        try:
            opts = header_options.parse_options(extra)
        except header_options.NotAnOptionError as e:  # an extra FILE, say
            here.error(f"unrecognized arguments: {e.item}")
        except ValueError as e:
            here.error(str(e))
        refused = nvrtc.refused_option(opts.passthrough)  # NVRTC knows the rest: -I, -D, -std...
        if refused:
            here.error(
                f"{refused}: neither an option of 'cupy-rawcode {args.cmd}' nor one NVRTC accepts"
            )
    return args, tuple(extra)
