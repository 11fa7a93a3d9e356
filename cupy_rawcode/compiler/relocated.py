"""Headers that moved (headers/moved.py): an include of an old location is answered by a header
that includes the new one, with one warning saying what to write instead. Code of CuPy 12's
era compiled with or without ``jitify=True``; here it compiles too, against the CUB the search
finds.
"""

from __future__ import annotations

import warnings

from ..ground.errors import RawcodeWarning
from ..ground.fsutil import process_header_dir
from ..headers.moved import new_name


class RelocatedIncludeWarning(RawcodeWarning, UserWarning):
    """An include named a header's old location; it was answered by the new one."""


def forwarding_dir(missing) -> str | None:
    """A directory (for -isystem) of headers that include each moved header's new name, after
    one warning naming them; None when any missing include is not a moved one."""
    moves = {m.name: new_name(m.name) for m in missing}
    if not moves or None in moves.values():
        return None
    listed = ", ".join(f"<{old}> as <{new}>" for old, new in sorted(moves.items()))
    warnings.warn(
        f"cupy-rawcode: CuPy 13 and later have no <cupy/cub/...> headers (CuPy 12's copy of "
        f"CUB): answered {listed}; include the latter to silence this",
        RelocatedIncludeWarning,
        stacklevel=6,
    )
    forwarding = {
        old: f"// cupy-rawcode: <{old}> moved to <{new}>\n#include <{new}>\n"
        for old, new in moves.items()
    }
    return process_header_dir(forwarding, "cupy-rawcode-moved-")
