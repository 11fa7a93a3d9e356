"""A shared store in an S3 bucket (``s3://bucket/prefix``): one object ``prefix/<key>`` per
entry. The endpoint, region and credentials come the way the AWS command line takes them
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE``, ``~/.aws/config``, instance roles), since boto3 reads them itself. One attempt
per call within the timeout: a failure raises, and the Levels holding the store skips it. Bulk
calls send up to ``remote.WORKERS`` requests at once (boto3's client is thread-safe). Needs
``boto3`` (extra ``s3``).
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from ..ground.errors import RawcodeValueError
from .remote import WORKERS, Parallel, ParallelStore, missing_extra


class S3Store(ParallelStore):
    """Entries as objects ``<prefix>/<key>`` of one bucket."""

    name = "s3"

    def __init__(self, url: str, *, timeout: float = 2.0):
        parts = urlsplit(url)
        if not parts.netloc:
            raise RawcodeValueError(f"store URL {url!r}: s3:// needs a bucket (s3://bucket/prefix)")
        self.bucket, self.prefix, self.timeout = parts.netloc, parts.path.strip("/"), timeout
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
        return f"{self.prefix}/{key}" if self.prefix else key

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
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._object(key))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        with answer["Body"] as body:
            return body.read()

    def _length(self, key: str) -> int | None:
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self._object(key))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        return int(head["ContentLength"])

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._object(key), Body=data)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._object(key))

    def _keys(self) -> list[str]:
        """Every entry's object name under the prefix."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        return [item["Key"] for page in pages for item in page.get("Contents", ())]

    def clear(self) -> int:
        """Remove every object under the prefix (every user's: the store is shared)."""
        names = self._keys()
        for start in range(0, len(names), 1000):
            batch = [{"Key": name} for name in names[start : start + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch})
        return len(names)

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
