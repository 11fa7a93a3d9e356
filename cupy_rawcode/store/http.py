"""A shared store on an HTTP server (``http(s)://host[:port]/prefix``): GET, PUT and DELETE of
``<url>/<key>``, as ccache's HTTP storage does, so a plain WebDAV server or nginx with
``dav_methods PUT DELETE`` serves it. Counting and clearing use WebDAV's PROPFIND (a server
without it cannot count: ``len`` raises). Credentials in the URL (``https://user:pass@host/``)
go as HTTP basic authentication. Connections are kept open (keep-alive) between calls, and
bulk calls send up to ``remote.WORKERS`` requests at once. Each request has one deadline, the
timeout (remote.within), and an answer is read in pieces up to remote.LIMIT. Standard library
only (``http.client``): nothing to install.
"""

from __future__ import annotations

import base64
import http.client
import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from .remote import (
    Connections,
    Parallel,
    ParallelStore,
    RemoteError,
    checked_key,
    read_bounded,
    redacted,
    within,
)

# A kept-alive connection the server closed meanwhile fails with one of these at its next use:
# asked again once on a new connection (a refused connection is not among them: it raises).
_STALE: tuple[type[Exception], ...] = (http.client.CannotSendRequest, http.client.BadStatusLine)
_STALE += (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)


def _nothing() -> None:
    """No way to wake a call through urllib's proxy: it ends at its socket timeout."""


def _proxied(scheme: str, host: str) -> bool:
    """Whether the environment sends requests for ``host`` through a proxy (``http_proxy``,
    ``https_proxy``, less ``no_proxy``), as urllib reads it."""
    import urllib.request

    return scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host)


_KEY = re.compile(r"[0-9a-f]{16,128}")  # an entry's name: a key as the key stage makes them
_PROPFIND = (
    b'<?xml version="1.0" encoding="utf-8"?>'
    b'<propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>'
)


class HttpStore(ParallelStore):
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
        self.secure = parts.scheme == "https"
        self.host, self.port = parts.hostname or "", parts.port
        self.proxied = _proxied(parts.scheme, self.host)  # then urllib, which knows proxies
        self.headers: dict[str, str] = {}
        self.connections = Connections(self._connect)  # kept open between calls
        self.parallel = Parallel()
        if parts.username is not None:
            auth = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(auth).decode()

    @property
    def location(self) -> str:
        return redacted(self.url.rstrip("/"))

    def _connect(self) -> http.client.HTTPConnection:
        """A new connection to the server (it connects on its first request)."""
        kind = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=self.timeout)

    def _request(
        self, method: str, url: str, body: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, bytes]:
        """(status, body) of one request; HTTP errors are statuses, other failures raise."""
        status, data, _ = self._exchange(method, url, body, headers)
        return status, data

    def _exchange(
        self, method: str, url: str, body: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, bytes, str | None]:
        """(status, body, Content-Length) of one request, within the timeout, on a kept-alive
        connection (a stale one is tried again once on a new connection)."""
        target = urlsplit(url).path or "/"
        headers = {**self.headers, **(headers or {})}
        if self.proxied:
            return within(
                self.timeout, lambda: self._through_proxy(method, url, body, headers), _nothing
            )

        def call(conn: http.client.HTTPConnection, aborted) -> tuple[int, bytes, str | None]:
            try:
                return self._once(conn, method, target, body, headers)
            except _STALE:  # the server closed the kept-alive connection meanwhile
                if aborted.is_set():
                    raise
                conn.close()
                return self._once(conn, method, target, body, headers)

        return self.connections.use(self.timeout, call)

    def _once(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict,
    ) -> tuple[int, bytes, str | None]:
        """One request on ``conn``, closed when the server says it closes it (and, by the
        caller, after a failure: a half-read answer leaves it unusable)."""
        conn.request(method, target, body=body, headers=headers)
        answer = conn.getresponse()
        length = answer.getheader("Content-Length")
        declared = None if method == "HEAD" else length
        data = read_bounded(answer.read, declared, f"{method} {self.location}")
        if answer.will_close:
            conn.close()
        return answer.status, data, length

    def _through_proxy(
        self, method: str, url: str, body: bytes | None, headers: dict
    ) -> tuple[int, bytes, str | None]:
        """One request by urllib, through the proxy the environment names (a new connection
        each time: no keep-alive through a proxy)."""
        import urllib.error
        import urllib.request

        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as answer:
                length = answer.headers.get("Content-Length")
                declared = None if method == "HEAD" else length
                data = read_bounded(answer.read, declared, f"{method} {self.location}")
                return answer.status, data, length
        except urllib.error.HTTPError as e:
            with e:
                return e.code, b"", None

    def _url(self, key: str) -> str:
        """The entry's URL: a cache key only (checked_key), never a path out of the prefix."""
        return f"{self.base}/{quote(checked_key(key), safe='')}"

    def get(self, key: str) -> bytes | None:
        status, body = self._request("GET", self._url(key))
        if status in (404, 410):
            return None
        if status != 200:
            raise RemoteError(f"GET {self.location}/{key[:16]}...: HTTP {status}")
        return body

    def _length(self, key: str) -> int | None:
        """The size a HEAD of the entry gives, None when it is not there."""
        status, _, length = self._exchange("HEAD", self._url(key))
        if status in (404, 410):
            return None
        if status != 200 or not (length or "").isdigit():
            raise RemoteError(f"HEAD {self.location}/{key[:16]}...: HTTP {status}")
        return int(length or 0)

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

    def close(self) -> None:
        """Close the idle connections and end the bulk threads; the next call reconnects."""
        self.parallel.close()
        self.connections.close()
