"""The header sources a user can name (``CUPY_RAWCODE_HEADER_SOURCES``, ``header_sources=``):
the source names and root kinds toolkit/discovery.py knows, and a policy's text checked against
them. Apart from config.py: read only when a policy is given, or on a miss's discovery."""

from __future__ import annotations

from . import errors

HEADER_SOURCE_NAMES = ("cupy", "wheel", "nvrtc", "toolkit")  # toolkit/discovery.py's sources
HEADER_ROOT_KINDS = ("cccl", "cuda", "curand", "crt")  # the roots a KIND=DIR entry can name


def parse_header_sources(what: str, spec: str | tuple | list) -> tuple[str, ...]:
    """A header search policy (README "Header search order"): source names or ``KIND=DIR``
    entries, comma-separated in a string. ``what`` names the argument or variable in errors."""
    items = (
        [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s) for s in spec]
    )
    items = [s for s in items if s]
    accepted = (
        f"accepted: a comma-separated list of {', '.join(HEADER_SOURCE_NAMES)} and "
        f"KIND=DIR with KIND one of {', '.join(HEADER_ROOT_KINDS)}"
    )
    for item in items:
        kind, eq, path = item.partition("=")
        if eq and (kind not in HEADER_ROOT_KINDS or not path):
            raise errors.ConfigError(
                f"{what}={spec!r}: header source {item!r} is not KIND=DIR ({accepted})"
            )
        if not eq and item not in HEADER_SOURCE_NAMES:
            raise errors.ConfigError(
                f"{what}={spec!r}: unknown header source {item!r} ({accepted})"
            )
    return tuple(items)
