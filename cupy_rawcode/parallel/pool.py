"""The parent's side of the worker processes that compile through the cache, for warmup() and
prebuild: ``run`` starts workers, feeds them tasks, collects their outcomes and stops them.
NVRTC runs one compile at a time per process (facts.md: threads gave 0.7-0.8x), so using the
cores needs processes. Each worker is ``python -m cupy_rawcode.parallel.worker`` (worker.py),
started with ``subprocess``: never ``fork`` (it would copy the parent's CUDA context and locks)
and never multiprocessing's ``spawn`` (it re-imports the user's ``__main__``, so a script
without an ``if __name__ == "__main__"`` guard would run again in every worker). Workers run in
a process group of their own (Python >= 3.11; before, they ignore SIGINT once started), so
Ctrl-C reaches only the parent, which stops them: no worker prints a traceback, and no task
they drop is reported as failed. Workers still running are killed at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from ..store import Levels, default_store
from . import stores
from .task import Outcome, Task

_OWN_GROUP: dict = {"process_group": 0} if sys.version_info >= (3, 11) else {}
_STDERR_TAIL = 2000
_live: set = set()  # Popen objects of running workers, killed at exit
_live_lock = threading.Lock()
_atexit_registered = False


def _kill_live() -> None:
    with _live_lock:
        procs = list(_live)
    for p in procs:
        _stop(p, wait=0.5)


def _stop(proc: subprocess.Popen, wait: float = 2.0) -> None:
    """Close the worker's stdin (it exits at once), then kill it if it does not."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for f in (proc.stdout,):
        try:
            if f is not None:
                f.close()
        except OSError:
            pass
    with _live_lock:
        _live.discard(proc)


def _package_parent() -> str:
    # the directory holding cupy_rawcode/ (this file is cupy_rawcode/parallel/pool.py)
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _hello(store: Levels, scratch: str | None) -> dict:
    """What a worker needs to compile as this process would: its module path, and this
    process's store (set_store's, or the environment's) as stores.hello_fields describes it;
    ``scratch``: where a worker writes what a compile writes beside its entries (toolchain
    record, manifests, warm index) when the store has no cache directory of its own."""
    hello: dict = {"sys_path": [p for p in sys.path if isinstance(p, str)]}
    hello.update(stores.hello_fields(store))
    hello["scratch_dir"] = scratch
    return hello


def _scratch(store: Levels) -> str | None:
    """A private scratch directory for the workers, when ``store`` has no writable cache
    directory (stores.plain_disk): never the environment's directory, which the program did
    not point at. Removed when the pool ends."""
    if stores.plain_disk(store) is not None:
        return None
    import tempfile

    return tempfile.mkdtemp(prefix="cupy-rawcode-pool-")


class _Worker:
    """One worker process and the file its stderr goes to (read back when it dies)."""

    def __init__(self, hello: dict):
        import tempfile

        global _atexit_registered
        self.errfile = tempfile.TemporaryFile()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_package_parent()] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cupy_rawcode.parallel.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errfile,
            env=env,
            close_fds=True,
            **_OWN_GROUP,  # Ctrl-C is the parent's to handle (module docstring)
        )
        with _live_lock:
            _live.add(self.proc)
            if not _atexit_registered:
                import atexit

                atexit.register(_kill_live)
                _atexit_registered = True
        self.send(hello)

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None  # started with stdin=PIPE
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> dict | None:
        assert self.proc.stdout is not None  # started with stdout=PIPE
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def death(self) -> str:
        """Why the worker stopped answering: its exit status and the end of its stderr."""
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.errfile.seek(0)
        tail = self.errfile.read().decode(errors="replace")[-_STDERR_TAIL:].strip()
        return (
            f"WorkerError: the worker process (pid {self.proc.pid}) exited with status "
            f"{code}" + (f":\n{tail}" if tail else "")
        )

    def close(self) -> None:
        _stop(self.proc)
        self.errfile.close()


@dataclass
class Memory:
    """Peak memory of a pool: ``peak`` is the largest sum of the workers' resident memory seen
    (sampled every ``interval`` seconds, Linux only), ``worker_peak`` the largest single worker's
    peak as the workers report it (bytes; None when unknown)."""

    peak: int | None = None
    worker_peak: int | None = None
    samples: int = 0
    interval: float = 0.05
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def sample(self, pids: list[int]) -> None:
        total, seen = 0, False
        for pid in pids:
            rss = _rss(pid)
            if rss is not None:
                total, seen = total + rss, True
        if seen:
            self.peak = max(self.peak or 0, total)
            self.samples += 1

    def worker(self, max_rss: int | None) -> None:
        if isinstance(max_rss, int):
            self.worker_peak = max(self.worker_peak or 0, max_rss)


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _outcome(reply: dict, store) -> Outcome:
    """A worker's reply as an Outcome, the entries it sent put into ``store`` (stores.land)."""
    sent = reply.pop("entries", None)
    out = Outcome.from_json(reply)
    if sent is not None:  # the worker compiled for this process to store
        kept = stores.land(store, out.key, sent)
        if out.error is None and not out.hit:
            out.stored = kept
    return out


def run(
    tasks: list[Task], workers: int, on_result=None, memory: Memory | None = None
) -> list[Outcome]:
    """Run every task in ``workers`` worker processes; ``on_result(i, outcome)`` is called (from
    a pool thread) as each ends. A worker that dies fails its task with its exit status and
    stderr, and a new one takes the next task. The workers end before this returns, also when
    it raises. Each worker compiles into this process's store (stores.py): the environment's
    stack it writes itself, any other one this process fills with the entries it sends."""
    store = default_store()
    scratch = _scratch(store)
    try:
        return _run(tasks, workers, on_result, memory, store, _hello(store, scratch))
    finally:
        if scratch is not None:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


def _run(
    tasks: list[Task], workers: int, on_result, memory: Memory | None, store: Levels, hello: dict
) -> list[Outcome]:
    """run's work, with the hello the workers get; what a worker sends back is put into
    ``store`` (stores.land) before its outcome is reported."""
    import queue

    outcomes: list[Outcome | None] = [None] * len(tasks)
    todo: queue.Queue = queue.Queue()
    for i in range(len(tasks)):
        todo.put(i)
    memory = memory if memory is not None else Memory()
    current: list[_Worker] = []
    guard = threading.Lock()
    failure: list[BaseException] = []
    stopping = threading.Event()  # set when the caller stops the pool (Ctrl-C): report nothing

    def serve() -> None:
        worker = None
        try:
            while not stopping.is_set():
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                if worker is None:
                    worker = _Worker(hello)
                    with guard:
                        current.append(worker)
                try:
                    worker.send({"id": i, "task": tasks[i].to_json()})
                    reply = worker.receive()
                except (OSError, ValueError):
                    reply = None
                if stopping.is_set():
                    return  # the task was dropped, not failed
                if reply is None:
                    out = Outcome(error=worker.death())
                    worker.close()
                    worker = None
                else:
                    try:
                        out = _outcome(reply, store)
                        memory.worker(out.max_rss)
                    except Exception as e:  # a reply of another shape: this task fails alone
                        out = Outcome(error=f"WorkerError: a malformed reply ({e!r:.200})")
                outcomes[i] = out
                if on_result is not None:
                    on_result(i, out)
        except BaseException as e:
            failure.append(e)
        finally:
            if worker is not None:
                worker.close()

    threads = [
        threading.Thread(target=serve, name=f"cupy-rawcode-pool-{n}", daemon=True)
        for n in range(max(1, min(workers, len(tasks))))
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                with guard:
                    pids = [w.proc.pid for w in current if w.proc.poll() is None]
                memory.sample(pids)
                t.join(memory.interval)
    except BaseException:
        stopping.set()
        with guard:
            for w in current:
                _stop(w.proc, wait=0.5)
        raise
    if failure:
        raise failure[0]
    return [o if o is not None else Outcome(error="WorkerError: not run") for o in outcomes]
