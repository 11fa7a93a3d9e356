"""Running one subcommand: parse, dispatch, and turn each kind of failure into its exit status
(codes.py); the package's ``main`` loads this module inside its own Ctrl-C guard."""

from __future__ import annotations

import os
import sys

from ..ground.errors import MissingHeaderError, UnreadableHeaderError
from .codes import (
    EXIT_BROKEN_PIPE,
    EXIT_COMPILE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_MISSING_HEADER,
    EXIT_USAGE,
    InputError,
)
from .commands import _report
from .parser import _parse


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
