"""The worker process: ``python -m cupy_rawcode.parallel.worker``, started by the pool
(pool.py). It reads a hello line (module path, the parent's store: stores.py) and then one task
per line on stdin, compiles each (task.run_task) and answers on a private copy of its stdout,
in JSON lines, never pickle (an entry it sends the parent to store is its bytes in base64); fd
1 itself goes to stderr, so nothing a library prints can break the protocol.
It exits as soon as its stdin closes, mid-compile too, so a parent that ends, crashes or is
killed leaves no worker behind; it ignores SIGINT, since Ctrl-C is the parent's to handle.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from ..store import set_store
from ..store.layout import using_cache_dir
from .stores import encode_entries, worker_store
from .task import Task, run_task


def _max_rss() -> int | None:
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return kb if sys.platform == "darwin" else kb * 1024
    except (ImportError, OSError):
        return None


def _watch_stdin(lines) -> None:
    """Hand each line to the main thread; when stdin closes (the parent finished, crashed or was
    killed), end the process at once, mid-compile too."""
    for line in sys.stdin.buffer:
        lines.put(line)
    os._exit(0)


def main() -> None:
    """The worker: a hello line (module path, the parent's store), then one task per line."""
    import queue
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's (pool.py's docstring)
    out = os.fdopen(os.dup(1), "wb")  # the protocol's channel
    os.dup2(2, 1)  # anything printed to fd 1 (by us or a library) goes to stderr instead
    sys.stdout = sys.stderr
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_stdin, args=(lines,), daemon=True).start()
    hello = json.loads(lines.get())
    sys.path[:] = hello.get("sys_path") or sys.path
    store, collecting = worker_store(hello)
    set_store(store)
    # what a compile writes beside its entries goes to the parent's cache directory, else to
    # the pool's scratch directory: never to one the parent's store does not name
    with using_cache_dir(hello.get("cache_dir") or hello.get("scratch_dir")):
        while True:
            message = json.loads(lines.get())
            outcome = run_task(Task.from_json(message["task"]))
            reply = {"id": message["id"], **outcome.__dict__, "max_rss": _max_rss()}
            if collecting is not None:  # the parent stores what this compile stored
                entries = collecting.drain()
                reply["entries"] = {} if outcome.hit else encode_entries(entries)
            out.write(json.dumps(reply).encode() + b"\n")
            out.flush()


if __name__ == "__main__":
    main()
