"""Compiles started before keying (the orchestrator's overlap), and the NVRTC calls signals.py runs
off the waiting thread, each on a daemon thread of its own, and how the process exits while one
still runs.

Nobody may wait for such a compile any more (the resolver failed, or the store had the entry):
it must neither keep the process alive (a ThreadPoolExecutor's workers are joined at exit: the
process ended 1.5 s after its error, and never when NVRTC blocked on a FIFO) nor crash it. A
daemon thread is not joined; but the C library's ``exit`` then runs NVRTC's static destructors
while the thread is still inside ``nvrtcCompileProgram``, and the process dies of SIGSEGV (seen
here, 2 runs in 30). So at exit, while one still runs, the process ends with ``_exit(status)``
as the first of the C library's exit handlers: glibc's ``on_exit``, registered at that moment,
runs before every handler registered earlier (NVRTC's destructors included) and is given
``exit``'s status. Python's own exit work (atexit functions, flushing sys.stdout) is done by
then. Where ``on_exit`` is missing (not glibc), the exit waits for the compile instead.
"""

from __future__ import annotations

import contextvars
import threading

AT_ONCE = 4  # compiles started early at once, at most (each holds 300-400 MB)
STEP = 0.05  # seconds: the longest a wait for a compile sleeps before it looks at signals

_slots = threading.BoundedSemaphore(AT_ONCE)
_guard = threading.Lock()
_running: set[Early] = set()
_exit_hook = False  # atexit.register(_before_exit) done


class Early:
    """One call started on a daemon thread: ``result()`` waits for it (Ctrl-C interrupts the
    wait) and returns its value or raises its exception."""

    __slots__ = ("_done", "_error", "_limited", "_value")

    def __init__(self, limited: bool = True):
        self._done = threading.Event()
        self._value: object = None
        self._error: BaseException | None = None
        self._limited = limited  # holds one of the AT_ONCE slots

    def result(self):
        # in steps, each a return to Python's loop, where a signal's handler runs: one long
        # wait sleeps through Ctrl-C when NVRTC's handler (set with SA_RESTART) took it
        while not self._done.wait(STEP):
            pass
        if self._error is not None:
            raise self._error
        return self._value

    def wait(self, seconds: float) -> bool:
        """Wait at most ``seconds`` for the call to end; True when it has."""
        return self._done.wait(seconds)


def start(fn, *args) -> Early | None:
    """``fn(*args)`` on a daemon thread, or None when AT_ONCE calls are running already."""
    if not _slots.acquire(blocking=False):
        return None
    return _spawn(Early(), fn, args, "cupy-rawcode-nvrtc")


def spawn(fn, *args) -> Early:
    """``fn(*args)`` on a daemon thread whatever else runs (signals.guarded's NVRTC calls)."""
    return _spawn(Early(limited=False), fn, args, "cupy-rawcode-call")


def _spawn(early: Early, fn, args, name: str) -> Early:
    """Start ``early``'s thread; it runs in a copy of the caller's context (config's cache
    directory of the compile, say), and the exit knows it runs."""
    global _exit_hook
    with _guard:
        _running.add(early)
        if not _exit_hook:
            import atexit

            atexit.register(_before_exit)
            _exit_hook = True
    try:
        context = contextvars.copy_context()
        threading.Thread(
            target=context.run, args=(_run, early, fn, args), name=name, daemon=True
        ).start()
    except BaseException:
        _finish(early)
        raise
    return early


def _run(early: Early, fn, args) -> None:
    try:
        early._value = fn(*args)
    except BaseException as e:  # handed to the waiter, if any
        early._error = e
    finally:
        _finish(early)


def _finish(early: Early) -> None:
    with _guard:
        _running.discard(early)
    if early._limited:
        _slots.release()
    early._done.set()


def running() -> int:
    """How many calls are still running."""
    with _guard:
        return len(_running)


def _before_exit() -> None:
    """atexit: while a call still runs, make the C library's exit end at once (module
    docstring); where that cannot be arranged, wait for the calls."""
    if not running():
        return
    if _exit_first():
        return
    with _guard:
        waiting = list(_running)
    for early in waiting:
        early._done.wait()


def _exit_first() -> bool:
    """Register ``_exit`` with glibc's ``on_exit``: the first exit handler to run, given the
    exit status (``_exit`` takes it; the extra argument is ignored by the C calling
    convention). False where the C library has no ``on_exit``."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        on_exit, quick_exit = libc.on_exit, libc._exit
    except (OSError, AttributeError, ImportError):
        return False
    on_exit.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    on_exit.restype = ctypes.c_int
    return on_exit(ctypes.cast(quick_exit, ctypes.c_void_p), None) == 0
