"""Real servers on loopback for the remote stores: memcached (the system's package), an S3
server (moto's server mode) and a WebDAV server (wsgidav), each started by a fixture and
skipped with a reason where it is not installed (.ci/run installs memcached; the Python ones
come with the ``test`` extra). ``*_server`` fixtures give a server of the test's own (it may be
stopped); ``shared_*`` ones a server for the whole test run, with a fresh namespace per test."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import free_port  # tests/conftest.py

_names = itertools.count()


def _wait_for_port(port: int, proc: subprocess.Popen, what: str, seconds: float = 30) -> None:
    """Return once something accepts connections on ``port``; fail when ``proc`` exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before it served")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{what} did not start within {seconds} s")


class Server:
    """A server process on a loopback port; ``stop`` kills it (a server gone mid-run)."""

    url = ""

    def __init__(self, argv: list[str], what: str, cwd: Path | None = None):
        self.port = free_port()
        argv = [a.replace("{port}", str(self.port)) for a in argv]
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_for_port(self.port, self.proc, what)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Memcached(Server):
    def __init__(self) -> None:
        argv = ["memcached", "-l", "127.0.0.1", "-p", "{port}", "-U", "0", "-m", "64"]
        if os.geteuid() == 0:
            argv += ["-u", "root"]  # memcached refuses to run as root unless told whom to be
        super().__init__(argv, "memcached")
        self.url = f"memcached://127.0.0.1:{self.port}"
        from pymemcache.client.base import Client

        # a write waits for the server's answer: damage done here is seen by the next read
        self.client = Client(("127.0.0.1", self.port), timeout=5, default_noreply=False)

    def namespace(self) -> str:
        return self.url  # a server of its own per test: nothing to separate


class WebDav(Server):
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "wsgidav.server.server_cli", "-H", "127.0.0.1"]
        # cheroot queues 5 connections by default: a bulk call opens several at once
        config = root.parent / f"{root.name}-wsgidav.json"
        config.write_text('{"server_args": {"request_queue_size": 128}}')
        argv += ["-p", "{port}", "-r", str(root), "--auth", "anonymous", "-c", str(config), "-q"]
        super().__init__(argv, "wsgidav", cwd=root)
        self.url = f"http://127.0.0.1:{self.port}"

    def namespace(self) -> str:
        """A URL under a collection of its own (not made yet: the store makes it)."""
        return f"{self.url}/cache/t{next(_names)}"


class MotoS3(Server):
    def __init__(self) -> None:
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "{port}"]
        super().__init__(argv, "moto_server")
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }
        import boto3

        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        self.client.create_bucket(Bucket="kernels")
        self.url = "s3://kernels/cache"

    def namespace(self) -> str:
        return f"s3://kernels/t{next(_names)}"


def _need(binary: str | None = None, module: str | None = None, extra: str = "test") -> None:
    if binary and shutil.which(binary) is None:
        pytest.skip(f"{binary} is not installed (.ci/run installs it from the system packages)")
    if module:
        pytest.importorskip(module, reason=f"{module} is not installed (extra '{extra}')")


def memcached_server_factory() -> Memcached:
    _need("memcached", "pymemcache")
    return Memcached()


@pytest.fixture
def memcached_server():
    server = memcached_server_factory()
    yield server
    server.stop()


@pytest.fixture
def webdav_server(tmp_path):
    _need(None, "wsgidav")
    _need(None, "cheroot")
    server = WebDav(tmp_path / "dav")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def shared_webdav(tmp_path_factory):
    _need(None, "wsgidav")
    _need(None, "cheroot")
    server = WebDav(tmp_path_factory.mktemp("dav"))
    yield server
    server.stop()


def _s3(monkeypatch):
    _need(None, "moto")
    _need(None, "boto3", "s3")
    server = MotoS3()
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)  # the store reads them as the AWS tools do
    return server


@pytest.fixture
def s3_server(monkeypatch):
    server = _s3(monkeypatch)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def shared_s3():
    with pytest.MonkeyPatch.context() as mp:
        server = _s3(mp)
        yield server
        server.stop()
