"""The package's logger: warnings go to the 'cupy_rawcode' logger. ``logging`` is imported only
when a warning is due, so a cache hit never loads it."""

from __future__ import annotations


def warn(msg: str, *args) -> None:
    """Log a warning on the 'cupy_rawcode' logger."""
    import logging

    logging.getLogger("cupy_rawcode").warning(msg, *args)
