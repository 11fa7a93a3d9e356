"""Hiding the secrets a store URL carries in every message that quotes one: the remote levels'
warnings and errors (store/remote.py) and a bad CUPY_RAWCODE_REMOTE's ConfigError (config.py)."""

from __future__ import annotations

import re

# a URL's userinfo (user:password@, or a token alone: TOKEN@), after its scheme:// or at the
# start of one given without a scheme, and a password in its query (redis://host/0?password=)
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://|^)([^/?#@\s'\"]*)@")
_SECRET_QUERY = re.compile(r"([?&](?:password|passwd|pwd|token|secret)=)[^&#\s'\"]*", re.I)


def _hide_userinfo(match: re.Match) -> str:
    user, colon, _ = match.group(2).partition(":")
    return f"{match.group(1)}{user}:***@" if colon else f"{match.group(1)}***@"


def redacted(text: str) -> str:
    """``text`` (a URL, or a message quoting URLs) with every URL's secrets shown as ``***``:
    ``scheme://user:***@host``, ``scheme://***@host`` (a token alone), ``?password=***``."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(_hide_userinfo, text))
