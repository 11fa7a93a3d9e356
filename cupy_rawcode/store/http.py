"""A shared store on an HTTP server (``http(s)://host[:port]/prefix``): GET, PUT and DELETE of
``<url>/<key>``, as ccache's HTTP storage does, so a plain WebDAV server or nginx with
``dav_methods PUT DELETE`` serves it. Counting and clearing use WebDAV's PROPFIND (a server
without it cannot count: ``len`` raises). Credentials in the URL (``https://user:pass@host/``)
go as HTTP basic authentication. Each thread keeps one connection open (keep-alive), and bulk
calls send up to ``remote.WORKERS`` requests at once. Standard library only (``http.client``):
nothing to install.
"""

from __future__ import annotations

import base64
import http.client
import re
import threading
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from .remote import Parallel, ParallelStore, RemoteError, redacted

# A kept-alive connection the server closed meanwhile fails with one of these at its next use:
# asked again once on a new connection (a refused connection is not among them: it raises).
_STALE: tuple[type[Exception], ...] = (http.client.CannotSendRequest, http.client.BadStatusLine)
_STALE += (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)


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
        self._local = threading.local()  # each thread's connection
        self._open: list[http.client.HTTPConnection] = []  # every thread's, for close()
        self._lock = threading.Lock()
        self.parallel = Parallel()
        if parts.username is not None:
            auth = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(auth).decode()

    @property
    def location(self) -> str:
        return redacted(self.url.rstrip("/"))

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's connection to the server, made on first use."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
            conn = kind(self.host, self.port, timeout=self.timeout)
            self._local.conn = conn
            with self._lock:
                self._open.append(conn)
        return conn

    def _drop(self) -> None:
        """Close this thread's connection (broken, or the server is closing it)."""
        conn, self._local.conn = getattr(self._local, "conn", None), None
        if conn is not None:
            conn.close()
            with self._lock:
                if conn in self._open:
                    self._open.remove(conn)

    def _request(
        self, method: str, url: str, body: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, bytes]:
        """(status, body) of one request; HTTP errors are statuses, other failures raise."""
        status, data, _ = self._exchange(method, url, body, headers)
        return status, data

    def _exchange(
        self, method: str, url: str, body: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, bytes, str | None]:
        """(status, body, Content-Length) of one request on this thread's kept-alive
        connection (a stale one is tried again once on a new connection)."""
        target = urlsplit(url).path or "/"
        headers = {**self.headers, **(headers or {})}
        if self.proxied:
            return self._through_proxy(method, url, body, headers)
        try:
            return self._once(method, target, body, headers)
        except _STALE:  # the server closed the kept-alive connection meanwhile
            return self._once(method, target, body, headers)

    def _once(
        self, method: str, target: str, body: bytes | None, headers: dict
    ) -> tuple[int, bytes, str | None]:
        """One request on this thread's connection, closed after a failure (a timeout or a
        half-read answer leaves it unusable) or when the server says it closes it."""
        conn = self._connection()
        try:
            conn.request(method, target, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
        except BaseException:
            self._drop()
            raise
        if answer.will_close:
            self._drop()
        return answer.status, data, answer.getheader("Content-Length")

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
                return answer.status, answer.read(), answer.headers.get("Content-Length")
        except urllib.error.HTTPError as e:
            with e:
                return e.code, b"", None

    def _url(self, key: str) -> str:
        return f"{self.base}/{quote(key)}"

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
        """Close every thread's connection and end the bulk threads; the next call reconnects."""
        self.parallel.close()
        with self._lock:
            conns, self._open = self._open, []
        for conn in conns:
            conn.close()
        self._local = threading.local()
