"""A shared store on an HTTP server (``http(s)://host[:port]/prefix``): GET, PUT and DELETE of
``<url>/<key>``, as ccache's HTTP storage does, so a plain WebDAV server or nginx with
``dav_methods PUT DELETE`` serves it. Counting and clearing use WebDAV's PROPFIND (a server
without it cannot count: ``len`` raises). Credentials in the URL (``https://user:pass@host/``)
go as HTTP basic authentication. Standard library only (``urllib``): nothing to install.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from .base import Store
from .remote import RemoteError, redacted

_KEY = re.compile(r"[0-9a-f]{16,128}")  # an entry's name: a key as the key stage makes them
_PROPFIND = (
    b'<?xml version="1.0" encoding="utf-8"?>'
    b'<propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>'
)


class HttpStore(Store):
    """Entries as the resources ``<url>/<key>`` of a WebDAV or plain HTTP server."""

    name = "http"

    def __init__(self, url: str, *, timeout: float = 2.0):
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:  # an IPv6 address
            netloc = f"[{netloc}]"
        if parts.port:
            netloc += f":{parts.port}"
        self.url, self.timeout = url, timeout
        self.base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.headers: dict[str, str] = {}
        if parts.username is not None:
            auth = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(auth).decode()

    @property
    def location(self) -> str:
        return redacted(self.url.rstrip("/"))

    def _request(
        self, method: str, url: str, body: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, bytes]:
        """(status, body) of one request; HTTP errors are statuses, other failures raise."""
        import urllib.error
        import urllib.request

        req = urllib.request.Request(
            url, data=body, method=method, headers={**self.headers, **(headers or {})}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, b""

    def _url(self, key: str) -> str:
        return f"{self.base}/{quote(key)}"

    def get(self, key: str) -> bytes | None:
        status, body = self._request("GET", self._url(key))
        if status in (404, 410):
            return None
        if status != 200:
            raise RemoteError(f"GET {self.location}/{key[:16]}...: HTTP {status}")
        return body

    def put(self, key: str, data: bytes) -> None:
        status, _ = self._request("PUT", self._url(key), data)
        if status in (404, 409):  # WebDAV: the collection the entry goes in does not exist yet
            self._make_collections()
            status, _ = self._request("PUT", self._url(key), data)
        if not 200 <= status < 300:
            raise RemoteError(f"PUT {self.location}/{key[:16]}...: HTTP {status}")

    def _make_collections(self) -> None:
        """MKCOL each collection of the URL's path, outermost first (existing ones answer 405)."""
        parts = urlsplit(self.base)
        path = ""
        for segment in [s for s in parts.path.split("/") if s]:
            path += "/" + segment
            self._request("MKCOL", urlunsplit((parts.scheme, parts.netloc, path + "/", "", "")))

    def delete(self, key: str) -> None:
        status, _ = self._request("DELETE", self._url(key))
        if not (200 <= status < 300 or status == 404):
            raise RemoteError(f"DELETE {self.location}/{key[:16]}...: HTTP {status}")

    def _keys(self) -> list[str]:
        """The entries' names in the collection (WebDAV PROPFIND, depth 1)."""
        import xml.etree.ElementTree as ET

        status, body = self._request(
            "PROPFIND",
            self.base + "/",
            _PROPFIND,
            {"Depth": "1", "Content-Type": "application/xml"},
        )
        if status == 404:
            return []
        if status != 207:
            raise RemoteError(
                f"{self.location} cannot list its entries (PROPFIND: HTTP {status}); "
                "counting and clearing need a WebDAV server"
            )
        names = []
        for href in ET.fromstring(body).iter("{DAV:}href"):
            name = unquote((href.text or "").rstrip("/").rpartition("/")[2])
            if _KEY.fullmatch(name):
                names.append(name)
        return names

    def clear(self) -> int:
        """Remove every entry in the collection (every user's: the store is shared)."""
        keys = self._keys()
        for key in keys:
            self.delete(key)
        return len(keys)

    def __len__(self) -> int:
        return len(self._keys())
