"""Entries per second that ``store.transfer.pull`` brings from each remote backend into an empty
local directory, against the real servers the tests use on loopback (tests/store/servers.py,
tests/conftest.py): Redis, memcached, WebDAV (wsgidav) and S3 (moto's server mode). For each
server, --entries small entries are put there; then, --rounds times each, interleaved: a pull
into a new directory (fetch, validation and the local writes), and the fetch alone, once with the
bulk call (``get_many`` in the pull's chunks) and once one ``get`` per key. Prints medians and
the versions; measures only (nothing is asserted). Runs on CPU.

    python bench/pull_throughput.py [--entries 500] [--rounds 3] [--size 2048]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent / "tests" / "store")]


def _servers(tmp: Path) -> list[tuple[str, object, str]]:
    """(backend, server, store URL) for each server that can be started here."""
    import servers
    from conftest import RedisServer

    made: list[tuple[str, object, str]] = []
    for backend, start in (
        ("redis", lambda: RedisServer(tmp / "redis")),
        ("memcached", servers.Memcached),
        ("http", lambda: servers.WebDav(tmp / "dav")),
        ("s3", servers.MotoS3),
    ):
        try:
            (tmp / "redis").mkdir(exist_ok=True)
            server = start()
        except Exception as e:  # not installed here: said, and left out
            print(f"{backend}: not measured ({type(e).__name__}: {e})")
            continue
        if backend == "s3":
            os.environ.update(server.env)  # the store reads them as the AWS tools do
        url = server.url if backend in ("redis", "memcached") else server.namespace()
        made.append((backend, server, url))
    return made


def _versions() -> str:
    names = ("redis", "pymemcache", "boto3", "moto", "wsgidav", "cheroot")
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    for binary in ("redis-server", "memcached"):
        try:
            out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
            found.append(out.strip().splitlines()[0])
        except (OSError, IndexError):
            found.append(f"{binary} absent")
    return ", ".join(found)


def _timed(call, *args) -> float:
    t0 = time.monotonic()
    call(*args)
    return time.monotonic() - t0


def _bulk_fetch(store, keys, chunk: int) -> None:
    for start in range(0, len(keys), chunk):
        store.get_many(keys[start : start + chunk])


def _single_fetch(store, keys) -> None:
    for key in keys:
        store.get(key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=2048, help="bytes of code per entry")
    args = parser.parse_args()

    from cupy_rawcode.store import open_remote, transfer
    from cupy_rawcode.store.directory import DirectoryStore
    from cupy_rawcode.store.entry import encode

    print(f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(_versions())
    print(f"{args.entries} entries of {args.size} B code each; medians of {args.rounds} rounds")
    print(f"pull: transfer.pull into a new directory; fetch: chunks of {transfer.CHUNK} keys")
    print("by get_many (bulk) or one get per key, nothing written\n")
    keys = [f"{i:064x}" for i in range(1, args.entries + 1)]
    payload = os.urandom(args.size)
    entries = {key: encode(key, payload, {"arch": "sm_90"}) for key in keys}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        running = _servers(tmp)
        try:
            rows = []
            for backend, _, url in running:
                store = open_remote(url, timeout=5.0)
                store.put_many(entries)
                pulls, bulk, single = [], [], []
                for r in range(args.rounds):
                    disk = DirectoryStore(tmp / f"{backend}-{r}", max_bytes=0)
                    summary = transfer.pull(keys, [store], disk)
                    assert summary.fetched[store.location] == len(keys), summary
                    pulls.append(summary.seconds)
                    bulk.append(_timed(_bulk_fetch, store, keys, transfer.CHUNK))
                    single.append(_timed(_single_fetch, store, keys))
                store.close()
                rows.append(
                    (backend, *(len(keys) / statistics.median(t) for t in (pulls, bulk, single)))
                )
        finally:
            for _, server, _ in running:
                getattr(server, "stop", getattr(server, "kill", None))()
    print("entries per second (median)")
    print(f"{'server':<10} {'pull':>8} {'fetch bulk':>11} {'fetch one by one':>17}")
    for backend, p, b, s in rows:
        print(f"{backend:<10} {p:>8.0f} {b:>11.0f} {s:>17.0f}")


if __name__ == "__main__":
    main()
