"""The command's contract: its exit statuses, the same for every subcommand (listed in --help
and in the README), and the two errors that choose one."""

from __future__ import annotations

from ..ground.errors import RawcodeError

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
        "compiled but not stored (a full or read-only cache); cache pull: an entry fetched but "
        "not stored",
    ),
    (
        EXIT_USAGE,
        "usage error or bad input, refused before NVRTC runs: an unknown subcommand or "
        "flag, a bad option value, a bad manifest, a source or header NVRTC would misread "
        "(not UTF-8, a NUL byte); cache pull/push with no remote level configured",
    ),
    (EXIT_MISSING_HEADER, "missing header: an #include matched no file"),
    (
        EXIT_ERROR,
        "a file that cannot be read: missing, no permission, not a regular file (a FIFO, a "
        "device); a cache file another process holds locked; a broken bundle; an internal "
        "error",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (
        EXIT_BROKEN_PIPE,
        "the output pipe closed early (piped into head, say): nothing more is printed",
    ),
)


class UsageError(RawcodeError, ValueError):
    """A command line that cannot be carried out as given (exit status 2)."""


class InputError(RawcodeError):
    """An input file that cannot be used (exit status 4)."""
