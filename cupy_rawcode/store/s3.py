"""A shared store in an S3 bucket (``s3://bucket/prefix``): one object ``prefix/<key>`` per
entry. The endpoint, region and credentials come the way the AWS command line takes them
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE``, ``~/.aws/config``, instance roles), since boto3 reads them itself. One attempt
per call, the whole call within the timeout (remote.within) and its answer read up to
remote.LIMIT: a failure raises, and the Levels holding the store skips it. A GetObject denied
(403 AccessDenied) is a miss: S3 answers so for a missing object when the credentials may not
list the bucket (a read-only CI credential with s3:GetObject alone). The store's objects are
``prefix/<key>`` only: counting and clearing leave every other object alone. Bulk calls send up
to ``remote.WORKERS`` requests at once (boto3's client is thread-safe). Needs ``boto3`` (extra
``s3``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..ground import deferred
from ..ground.errors import RawcodeValueError
from .directory import is_key
from .remote import (
    WORKERS,
    Parallel,
    ParallelStore,
    RemoteError,
    checked_key,
    missing_extra,
    read_bounded,
    redacted,
    within,
)

log = deferred("cupy_rawcode.ground.log")  # the note on a denied GetObject only
T = TypeVar("T")
MISSING = ("NoSuchKey", "404", "NotFound")  # error codes of an object that is not there
DENIED = ("AccessDenied", "403")  # ...and of one S3 will not say is there (no s3:ListBucket)


class S3Store(ParallelStore):
    """Entries as objects ``<prefix>/<key>`` of one bucket."""

    name = "s3"

    def __init__(self, url: str, *, timeout: float = 2.0):
        parts = urlsplit(url)
        if not parts.netloc:
            raise RawcodeValueError(
                f"store URL {redacted(url)!r}: s3:// needs a bucket (s3://bucket/prefix)"
            )
        self.bucket, self.prefix, self.timeout = parts.netloc, parts.path.strip("/"), timeout
        self.url = url  # its password's pieces are masked in a warning (remote.url_of)
        try:
            import boto3  # noqa: F401  (the error now, not at the first call)
        except ImportError:
            raise missing_extra("boto3", "s3", "s3://") from None
        self._client = None
        self._lock = threading.Lock()
        self.parallel = Parallel()

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def _object(self, key: str) -> str:
        """The object name of ``key`` (a cache key only: checked_key)."""
        checked_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, call: Callable[[], T], abort: Callable[[], None] = lambda: None) -> T:
        """``call()`` within the timeout (remote.within): botocore's timeouts are per socket
        operation."""
        return within(self.timeout, call, abort)

    @property
    def client(self):
        """The boto3 client, made on first use (making one takes a while)."""
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config

                config = Config(
                    connect_timeout=self.timeout,
                    read_timeout=self.timeout,
                    retries={"total_max_attempts": 1},
                    max_pool_connections=WORKERS,
                )
                self._client = boto3.session.Session().client("s3", config=config)
            return self._client

    def get(self, key: str) -> bytes | None:
        name = self._object(key)
        bodies: list[Any] = []  # the answer's body, once there: what a deadline wakes

        def call() -> bytes | None:
            from botocore.exceptions import ClientError

            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=name)
            except ClientError as e:
                code = e.response.get("Error", {}).get("Code")
                if code in DENIED:
                    self._denied(e)
                if code in MISSING or code in DENIED:
                    return None
                raise
            with answer["Body"] as body:
                bodies.append(body)
                what = f"GET {self.location}/{key[:16]}..."
                return read_bounded(body.read, answer.get("ContentLength"), what)

        def abort() -> None:  # the body's next read times out at once
            for body in bodies:
                body.set_socket_timeout(0.001)

        return self._call(call, abort)

    def _denied(self, error: Exception) -> None:
        """Say once that a denied GetObject counts as a miss (the credentials may be wrong)."""
        log.warn_once(
            ("s3 access denied", self.location),
            "cupy-rawcode: the s3 store %s denies reading an entry (%s); counted as a miss, as "
            "S3 answers so for a missing object when the credentials may not list the bucket "
            "(s3:ListBucket); if every look-up misses, check the credentials",
            self.location,
            redacted(str(error)),
        )

    def _length(self, key: str) -> int | None:
        from botocore.exceptions import ClientError

        name = self._object(key)
        try:
            head = self._call(lambda: self.client.head_object(Bucket=self.bucket, Key=name))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in MISSING + DENIED:
                return None
            raise
        return int(head["ContentLength"])

    def put(self, key: str, data: bytes) -> None:
        name = self._object(key)
        self._call(lambda: self.client.put_object(Bucket=self.bucket, Key=name, Body=data))

    def delete(self, key: str) -> None:
        name = self._object(key)
        self._call(lambda: self.client.delete_object(Bucket=self.bucket, Key=name))

    def _keys(self) -> list[str]:
        """Every entry's object name: ``prefix/<key>`` only (no sub-folder, no other name),
        a page of the listing per call."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        names: list[str] = []
        asked: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": "/"}
        while True:
            page = self._call(lambda: self.client.list_objects_v2(**asked))
            for item in page.get("Contents", ()):
                name = item["Key"]
                if is_key(name[len(prefix) :]):
                    names.append(name)
            if not page.get("IsTruncated"):
                return names
            asked["ContinuationToken"] = page["NextContinuationToken"]

    def clear(self) -> int:
        """Remove every entry under the prefix (every user's: the store is shared), and
        nothing else; a removal the server refuses raises."""
        names, removed = self._keys(), 0
        for start in range(0, len(names), 1000):
            batch = [{"Key": name} for name in names[start : start + 1000]]
            delete = functools.partial(
                self.client.delete_objects,
                Bucket=self.bucket,
                Delete={"Objects": batch, "Quiet": False},
            )
            answer = self._call(delete)
            removed += len(answer.get("Deleted", ()))
            refused = answer.get("Errors", ())
            if refused:
                first = refused[0]
                raise RemoteError(
                    f"{self.location}: {len(refused)} entries were not removed "
                    f"({first.get('Key')}: {first.get('Code')} {first.get('Message')})"
                )
        return removed

    def __len__(self) -> int:
        return len(self._keys())

    def close(self) -> None:
        """Forget the client (and its connections) and end the bulk threads; the next call
        makes another."""
        self.parallel.close()
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
