"""Ctrl-C and SIGTERM during an NVRTC or nvJitLink call reach Python: every such call in
compiler/ goes through ``guarded``.

What NVRTC 12.9 does (strace, and the handlers read with sigaction through ctypes while it
compiled): ``nvrtcCompileProgram`` installs its own SIGINT and SIGTERM handlers for the whole
process when it starts and puts the previous ones back (with other flags) when it returns. A
signal in between, on any thread, ends the process at once with status 4: no traceback, no
``finally``, no ``atexit``, and the command line's 130 never comes. nvJitLink 12.9 leaves the
handlers alone, but it too runs in C for as long as ptxas takes, where Python's handler cannot
run.

So ``guarded(fn, *args)`` runs the call on a daemon thread of its own (early.spawn: the exit
never waits for it) that starts with SIGINT and SIGTERM blocked, so neither handler ever runs
there. ``fn`` is a library object's whole life, creation to destruction: an nvJitLink handle
created on one thread and completed on another made a later ``nvJitLinkCreate`` crash
(SIGSEGV) or hang here. The calling thread waits in short steps, and after each step puts back
the handlers that were in force when the first guarded call began, wherever NVRTC replaced
them. The main thread waits with the two signals blocked too, in ``signal.sigtimedwait``: a
signal is taken there, the handlers are put back, and the signal is raised again in the main
thread, so Python's own handler runs (KeyboardInterrupt; SIGTERM's default ends the process by
SIGTERM; a program's handler runs as written). The call it was waiting for is left to finish on
its thread. Another thread waits without taking signals: Python handles them in the main
thread.

A thread that is not waiting here takes signals through the process-wide disposition. So
while any guarded call runs, a keeper thread puts the kept handlers back every KEEPER_STEP:
NVRTC's handler stays in force at most that long after it installs it. The keeper waits for
the two signals in ``sigtimedwait`` between its steps, so that a signal no other thread can
take comes to it: it hands it to Python's handler in the main thread
(``_thread.interrupt_main``), or, for SIG_DFL or a handler set outside Python, puts the kept
disposition back and raises the signal again in its own thread.

The main thread scans headers while an early compile runs (orchestrator/compiling.py): it does
so inside ``taken_by_keeper()``, with the two signals blocked, so a signal then goes to the
keeper, never through NVRTC's handler, and still interrupts the scan as Python's would.

What stays open: a thread of the program's that takes signals, in the instant between NVRTC
installing its handler and the keeper's next step (a few milliseconds under heavy load: the
keeper needs the GIL), still meets NVRTC's.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import functools
import os
import signal
import sys
import threading
from collections.abc import Iterator

from . import early

SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
FIRST_STEP = 0.001  # seconds: the first wait is short, NVRTC replaces the handlers as it starts
LONGEST_STEP = 0.02  # seconds: how late a signal taken by the main thread is handled, at most
KEEPER_STEP = 0.002  # seconds: how long NVRTC's handler stays in force, at most (docstring)


class _Sigaction(ctypes.Structure):
    """glibc's ``struct sigaction`` on Linux (x86-64 and aarch64): only copied and compared."""

    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ulong * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


_lock = threading.Lock()
_callers = 0  # guarded calls running now
_kept: dict[int, bytes] = {}  # signal -> the sigaction in force when the first of them began
_keeper: list[threading.Thread] = []  # the keeper thread while one runs


@functools.cache
def _sigaction():
    """The C library's ``sigaction``, or None where it cannot be called (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sigaction
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    fn.restype = ctypes.c_int
    return fn


def usable() -> bool:
    """Whether calls can be guarded here: POSIX thread signal masks, sigtimedwait, sigaction."""
    return (
        hasattr(signal, "pthread_sigmask")
        and hasattr(signal, "sigtimedwait")
        and _sigaction() is not None
    )


def _read(signum: int) -> bytes:
    """The sigaction in force for ``signum``, as bytes."""
    action = _Sigaction()
    _sigaction()(signum, None, ctypes.byref(action))
    return bytes(action)


def _write(signum: int, raw: bytes) -> None:
    """Put the sigaction ``raw`` (from _read) in force for ``signum``."""
    action = _Sigaction.from_buffer_copy(raw)
    _sigaction()(signum, ctypes.byref(action), None)


def restore() -> None:
    """Put back the handlers kept when the first running guarded call began, where they were
    replaced (NVRTC's own, or Python's with NVRTC's flags)."""
    with _lock:
        _put_back()


def _put_back() -> None:
    """restore()'s work, with _lock held."""
    for signum, raw in _kept.items():
        if _read(signum) != raw:
            _write(signum, raw)


@contextlib.contextmanager
def _handlers_kept() -> Iterator[None]:
    """Keep the handlers in force when no other guarded call runs, and put them back at the end."""
    global _callers
    with _lock:
        if _callers == 0:
            _kept.clear()
            _kept.update((s, _read(s)) for s in SIGNALS)
        _callers += 1
        if not _keeper:
            _keeper.append(threading.Thread(target=_keep, name="cupy-rawcode-keeper", daemon=True))
            _keeper[0].start()
    try:
        yield
    finally:
        restore()
        with _lock:
            _callers -= 1


def _keep() -> None:
    """The keeper: while a guarded call runs, put the kept handlers back every KEEPER_STEP, for
    the threads that take signals outside the guard, and take a signal no other thread takes
    (module docstring)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    while True:
        with _lock:  # checked and put back at once: never after the last call ended
            if _callers == 0:
                _keeper.clear()
                return
            _put_back()
        signum = _taken(signal.sigtimedwait(SIGNALS, KEEPER_STEP), SIGNALS)
        if signum is not None:
            _forward(signum)


def _forward(signum: int) -> None:
    """A signal the keeper took, to where it would have gone: Python's handler runs in the main
    thread; SIG_IGN drops it; otherwise (SIG_DFL, a handler set outside Python) the kept
    disposition is put back and the signal raised again in this thread, where it acts."""
    handler = signal.getsignal(signum)
    if callable(handler):
        _thread.interrupt_main(signal.Signals(signum))
        return
    if handler == signal.SIG_IGN:
        return
    with _lock:
        _put_back()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    signal.pthread_kill(threading.get_ident(), signum)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signum})  # a handler set outside Python ran


@contextlib.contextmanager
def taken_by_keeper() -> Iterator[None]:
    """In the main thread: SIGINT and SIGTERM blocked while the block runs, and taken by the
    keeper instead, which hands them to Python's handler here (module docstring): for work
    done beside an early compile, which may put NVRTC's handler in force at any instant. Does
    nothing in another thread, or where calls are not guarded."""
    if not usable() or threading.current_thread() is not threading.main_thread():
        yield
        return
    with _handlers_kept():
        before = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            yield
        finally:
            restore()  # before unblocking: a pending signal meets Python's handler
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


def steps() -> Iterator[float]:
    """The waits between two looks at the handlers: doubling from FIRST_STEP to LONGEST_STEP."""
    step = FIRST_STEP
    while True:
        yield step
        step = min(step * 2, LONGEST_STEP)


def guarded(fn, *args):
    """``fn(*args)`` (an NVRTC or nvJitLink call) run so that SIGINT and SIGTERM reach Python's
    handlers while it runs, whatever handlers the call installs (module docstring)."""
    if not usable():
        return fn(*args)
    main = threading.current_thread() is threading.main_thread()
    with _handlers_kept():
        before = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            call = early.spawn(fn, *args)  # its thread starts with this thread's mask
            taken = SIGNALS - before if main else frozenset()
            return _wait(call, taken)
        finally:
            restore()  # before unblocking: a pending signal meets Python's handler
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _wait(call, taken: frozenset) -> object:
    """Wait for ``call`` (early.Early) in steps, putting the handlers back after each; a signal
    in ``taken`` (blocked in this thread) is handed to Python's handler as it comes."""
    for step in steps():
        signum = _taken(signal.sigtimedwait(taken, step), taken) if taken else None
        done = signum is None and call.wait(0 if taken else step)
        restore()
        if signum is not None:
            _raise_again(signum)
        if done:
            break
    return call.result()


def _taken(info, waited: frozenset) -> int | None:
    """The number of the signal sigtimedwait took, or None: it timed out, or its answer names
    none of the signals waited for (seen from 16 processes compiling at once: a signal number
    0, on which getsignal raised and the compile failed)."""
    signum = getattr(info, "si_signo", None)
    return signum if signum in waited else None


def _raise_again(signum: int) -> None:
    """Hand ``signum`` to Python's handler in this (the main) thread: KeyboardInterrupt for
    SIGINT, a program's handler runs as written, the process ends by the signal for SIG_DFL.
    A Python handler is called here directly, not through the process-wide disposition, which
    another thread's NVRTC compile may replace at any instant."""
    handler = signal.getsignal(signum)
    if callable(handler):
        handler(signum, sys._getframe(1))
        return
    if handler == signal.SIG_IGN:
        return
    signal.signal(signum, signal.SIG_DFL)  # end by the signal, as Python's default does
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    signal.raise_signal(signum)
    os._exit(128 + signum)  # only if NVRTC took over the disposition in between
