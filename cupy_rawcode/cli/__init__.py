"""The ``cupy-rawcode`` command: deps, key, env, compile, cache, prebuild, bundle.

codes.py holds the exit statuses, parser.py the command line, commands.py what each subcommand
prints, dispatch.py the run of one; the policy behind them is in the modules they call
(maintenance.py, parallel/).
"""

from __future__ import annotations

import sys

from .codes import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_COMPILE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_MISSING_HEADER,
    EXIT_OK,
    EXIT_USAGE,
)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status (EXIT_CODES), never raises for bad input.

    The command's modules (~0.1 s) load here, so a Ctrl-C while they do exits 130 quietly too."""
    try:
        from .dispatch import main as dispatch
    except KeyboardInterrupt:
        sys.stderr.write("cupy-rawcode: interrupted\n")
        return EXIT_INTERRUPTED
    return dispatch(argv)


__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES",
    "EXIT_COMPILE",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_MISSING_HEADER",
    "EXIT_OK",
    "EXIT_USAGE",
    "main",
]
