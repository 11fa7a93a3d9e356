"""Hiding the secrets a store URL carries in every message that quotes one: the remote levels'
warnings and errors (store/remote.py) and a bad CUPY_RAWCODE_REMOTE's ConfigError (config.py)."""

from __future__ import annotations

import re

# a URL's userinfo (user:password@, or a token alone: TOKEN@), after its scheme:// or from the
# start of a word (one given without a scheme), up to the LAST @ before a space or a quote (a
# generated password may hold / ? # @: masking an e-mail's name or an @ of a path too is the
# safe way to err), and a password in its query (redis://host/0?password=)
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://|(?<![^\s'\"(=,]))([^\s'\"]*)@")
_SECRET_QUERY = re.compile(r"([?&](?:password|passwd|pwd|token|secret)=)[^&#\s'\"]*", re.I)


_USER = re.compile(r"[\w.~+-]*")  # a user name shown as it is: no / ? # @ nor space in it


def _hide_userinfo(match: re.Match) -> str:
    """``user:***@`` (the user: up to the first colon, shown when it is a plain name), else
    ``***@`` (a token alone, or a user part that is no plain name: all of it is masked)."""
    user, colon, _ = match.group(2).partition(":")
    shown = colon and _USER.fullmatch(user)
    return f"{match.group(1)}{user}:***@" if shown else f"{match.group(1)}***@"


def secrets_of(url: str) -> list[str]:
    """The password (or token alone) of ``url``'s user part, whole and in the pieces a URL
    parser may cut it into at / ? # @ : (3 characters or more), longest first: what a client
    library's error may quote of it (the "port" or "bucket" it could not read)."""
    match = _USERINFO.search(url)
    if match is None:
        return []
    user, colon, secret = match.group(2).partition(":")
    secret = secret if colon and _USER.fullmatch(user) else match.group(2)
    pieces = {secret, *re.split(r"[/?#@:]", secret)}
    return sorted((p for p in pieces if len(p) >= 3), key=len, reverse=True)


def redacted(text: str, url: str = "") -> str:
    """``text`` (a URL, or a message quoting URLs) with every URL's secrets shown as ``***``:
    ``scheme://user:***@host``, ``scheme://***@host`` (a token alone), ``?password=***``; and
    every piece of ``url``'s password too (``secrets_of``), wherever ``text`` quotes it."""
    text = _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(_hide_userinfo, text))
    for piece in secrets_of(url):
        text = text.replace(piece, "***")
    return text
