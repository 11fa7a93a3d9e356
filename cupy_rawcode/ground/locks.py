"""Advisory file locks (flock) of the cache, taken within a deadline and never carried into a
forked child.

Another process may hold one of the cache's locks as long as it likes (stopped in a debugger, a
child forked while its parent held one): a wait for it ends after ``SHORT`` or ``LONG`` seconds
with RawcodeTimeoutError (an OSError: the callers' "busy" or best-effort path), in small sleeps that
Ctrl-C interrupts. A lock held across work (``hold(..., keep=True)``: the prune lock, the
ledger's, a record's) is closed in a child made by ``fork``, which would otherwise hold its
parent's lock for its whole life, after the parent let go or exited; closing the child's copy
leaves the parent's lock as it is."""

from __future__ import annotations

import errno
import os
import time

from . import deferred

errors = deferred("cupy_rawcode.ground.errors")  # RawcodeTimeoutError: a lock not had in time

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

SHORT = 2.0  # seconds: a read's shared lock, the ledger's (held for microseconds by the cache)
LONG = 10.0  # seconds: another process's prune (a count of the whole directory), a record

_kept: set[int] = set()  # fds locked with keep=True, to close in a forked child


def _close_in_child() -> None:
    for fd in list(_kept):
        try:
            os.close(fd)  # the child's copy only: the parent's lock stays
        except OSError:
            pass
    _kept.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def hold(fd: int, *, shared: bool = False, seconds: float = LONG, keep: bool = False) -> None:
    """flock ``fd`` (exclusive, or ``shared``) within ``seconds`` (0: one try), else raise
    RawcodeTimeoutError; ``keep``: close it in a forked child (release() closes it here)."""
    if fcntl is None:
        return
    how = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    deadline = time.monotonic() + seconds
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, how)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise errors.RawcodeTimeoutError(
                    errno.EWOULDBLOCK, f"locked by another process for {seconds:g} s"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    if keep:
        _kept.add(fd)


def release(fd: int) -> None:
    """Close ``fd``, which releases its lock (and forget it for a fork)."""
    _kept.discard(fd)
    os.close(fd)
