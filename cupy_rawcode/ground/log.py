"""The package's logger and its one warn-once. Warnings go to the 'cupy_rawcode' logger;
``logging`` is imported only when a warning is due, so a cache hit never loads it. Every
"say it once per process" goes through ``first_time``, keyed by a tuple whose first item names
the warning ('standard raised', 'nvjitlink', ...), so a test can forget them all in one place."""

from __future__ import annotations

import threading

_said: set[tuple] = set()  # the keys already warned about, in this process
_said_lock = threading.Lock()


def warn(msg: str, *args) -> None:
    """Log a warning on the 'cupy_rawcode' logger."""
    import logging

    logging.getLogger("cupy_rawcode").warning(msg, *args)


def first_time(key: tuple) -> bool:
    """True only the first time ``key`` is asked about in this process (thread-safe): whether a
    warn-once should speak. A caller with a ``warnings.warn`` of its own asks this first."""
    with _said_lock:
        if key in _said:
            return False
        _said.add(key)
        return True


def said(key: tuple) -> bool:
    """Whether ``first_time(key)`` has answered True already in this process."""
    return key in _said


def warn_once(key: tuple, msg: str, *args) -> None:
    """``warn(msg, *args)`` the first time ``key`` is seen in this process, else nothing."""
    if first_time(key):
        warn(msg, *args)


def forget() -> None:
    """Forget every key: each warning speaks once more (for tests)."""
    with _said_lock:
        _said.clear()
