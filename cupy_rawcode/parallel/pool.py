"""Worker processes that compile through the cache, for warmup() and prebuild.

NVRTC runs one compile at a time per process (facts.md: threads gave 0.7-0.8x), so using the
cores needs processes. Each worker is ``python -m cupy_rawcode.parallel.pool``, started with
``subprocess``: never ``fork`` (it would copy the parent's CUDA context and locks) and never
multiprocessing's ``spawn`` (it re-imports the user's ``__main__``, so a script without an
``if __name__ == "__main__"`` guard would run again in every worker).

Parent and worker speak JSON lines, never pickle: the worker reads tasks on stdin and answers on
a private copy of its stdout (fd 1 itself goes to stderr, so nothing a library prints can break
the protocol). A worker exits as soon as its stdin closes, mid-compile too, so a parent that
ends, crashes or is killed leaves no worker behind. Workers run in a process group of their
own (Python >= 3.11; before, they ignore SIGINT once started), so Ctrl-C reaches only the
parent, which stops them: no worker prints a traceback, and no task they drop is reported as
failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

_OWN_GROUP: dict = {"process_group": 0} if sys.version_info >= (3, 11) else {}
PER_COMPILE_BYTES = 400 << 20  # what one NVRTC compile of a CUB kernel holds, roughly
_STDERR_TAIL = 2000


@dataclass(frozen=True)
class Task:
    """One compile, as a first launch would do it. Either ``arch`` (with ``target``, default
    from the arch) or ``device`` (a compute capability: the worker chooses arch and target as a
    launch on that device does). ``options`` as the kernel holds them; ``index_id``: record the
    key in the warm index under this id; ``source_name``: the .cu file's name, for messages;
    ``jitify``: compile as Jitify did (jitify_compat.compile_as_jitify); ``cupy``: a compile
    CuPy makes, compiled by CuPy into the store (cupy_compiles.compile_ahead), as
    (extra_source: "cupy" for CuPy's header text or the text itself, cooperative)."""

    source: str
    options: tuple[str, ...] = ()
    arch: str | None = None
    target: str | None = None
    device: int | None = None
    name_expressions: tuple[str, ...] = ()
    source_dir: str | None = None
    index_id: str | None = None
    source_name: str | None = None
    jitify: bool = False
    cupy: tuple | None = None

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "options": list(self.options),
            "arch": self.arch,
            "target": self.target,
            "device": self.device,
            "name_expressions": list(self.name_expressions),
            "source_dir": self.source_dir,
            "index_id": self.index_id,
            "source_name": self.source_name,
            "jitify": self.jitify,
            "cupy": list(self.cupy) if self.cupy is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict) -> Task:
        return cls(
            d["source"],
            tuple(d["options"]),
            d["arch"],
            d["target"],
            d["device"],
            tuple(d["name_expressions"]),
            d["source_dir"],
            d["index_id"],
            d.get("source_name"),
            bool(d.get("jitify")),
            tuple(d["cupy"]) if d.get("cupy") is not None else None,
        )


@dataclass
class Outcome:
    """What one task gave: the cache ``key`` and whether the cache already held it (``hit``),
    the arch and target compiled, the seconds it took, or the ``error`` text. ``max_rss``: the
    worker's peak resident memory (bytes) after this task, when known. ``stored``: False when a
    compile's entry did not reach a lasting layer of the store (a full or read-only disk)."""

    key: str | None = None
    hit: bool = False
    arch: str | None = None
    target: str | None = None
    seconds: float = 0.0
    error: str | None = None
    max_rss: int | None = None
    stored: bool = True

    @classmethod
    def from_json(cls, d: dict) -> Outcome:
        return cls(
            d.get("key"),
            bool(d.get("hit")),
            d.get("arch"),
            d.get("target"),
            float(d.get("seconds", 0.0)),
            d.get("error"),
            d.get("max_rss"),
            bool(d.get("stored", True)),
        )


def run_task(task: Task) -> Outcome:
    """Compile one task through the default store (in a worker, or in-process for prebuild -j1).
    Any failure becomes the outcome's error text: one kernel never stops the others."""
    t0 = time.perf_counter()
    if task.cupy is not None:
        return _run_cupy(task, t0)
    try:
        from ..compiler.program import compile_parsed
        from ..kernel.building import _arch_target, _device_target
        from ..kernel.checks import parse_options

        opts = parse_options(task.options)
        if task.device is not None:
            arch, target = _device_target(opts.arch, task.device)
        else:
            assert task.arch is not None  # a task names a device or an arch
            arch, target = task.arch, task.target or _arch_target(task.arch)[1]
        if task.jitify:
            from ..compiler.jitify import compile_as_jitify as compile_with
        else:
            compile_with = compile_parsed
        req, result = compile_with(
            task.source,
            task.options,
            arch,
            target,
            task.name_expressions,
            task.source_dir,
            task.index_id,
            task.source_name,
        )
        seconds = time.perf_counter() - t0
        return Outcome(result.key, result.hit, req.arch, req.target, seconds, stored=_kept(result))
    except Exception as e:
        return Outcome(error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)


def _kept(result) -> bool:
    """Whether a compile's entry is in the store to stay (a hit was there already)."""
    return result.hit or _kept_key(result.key)


def _kept_key(key: str) -> bool:
    from ..store import default_store

    return default_store().kept(key)


def _run_cupy(task: Task, t0: float) -> Outcome:
    """A compile CuPy makes, compiled by CuPy into the store for task.arch (no GPU needed)."""
    try:
        from ..hook.compiles import call_for, compile_ahead

        assert task.arch is not None and task.cupy is not None  # record jobs name an arch
        call = call_for(task.source, task.options, task.arch, task.name_expressions, *task.cupy)
        key, hit = compile_ahead(call)
        seconds = time.perf_counter() - t0
        return Outcome(key, hit, task.arch, "cubin", seconds, stored=hit or _kept_key(key))
    except Exception as e:
        return Outcome(error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)


# -- how many workers ------------------------------------------------------------------------


def workers_for(
    cores: int, available: int | None, tasks: int, per_task: int = PER_COMPILE_BYTES
) -> int:
    """Workers the machine can take: no more than its cores, than the memory available holds
    compiles of ``per_task`` bytes, or than there are tasks; at least one."""
    n = min(cores, tasks)
    if available is not None:
        n = min(n, available // per_task)
    return max(1, n)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """Bytes of memory a new process can use without swapping: the kernel's MemAvailable, or
    less under a cgroup (container) limit; None where neither can be read."""
    found = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            room = max(0, int(limit) - used)
            found = room if found is None else min(found, room)
    except (OSError, ValueError):
        pass
    return found


def default_workers(tasks: int) -> int:
    """CUPY_RAWCODE_WORKERS when set, else what the machine can take (workers_for), never
    more than there are tasks."""
    from ..ground import config

    configured = config.workers()
    if configured is not None:
        return max(1, min(configured, tasks))
    return workers_for(usable_cores(), available_memory(), tasks)


def resolve_workers(workers, tasks: int) -> int:
    """The ``workers`` argument checked (a clear ValueError), or the default when None."""
    if workers is None:
        return default_workers(tasks)
    from ..ground.config import check_workers

    return max(1, min(check_workers("workers", workers), max(tasks, 1)))


# -- the parent's side -----------------------------------------------------------------------

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


def _hello() -> dict:
    """What a worker needs to compile as this process would: its module path, and the cache
    directory of this process's store (set_store's, or the environment's)."""
    hello: dict = {"sys_path": [p for p in sys.path if isinstance(p, str)]}
    from ..store import default_store

    disk = default_store().level("disk")
    if disk is not None:
        hello["cache_dir"] = str(disk.root)
        hello["max_size"] = disk.max_bytes or 0  # 0: no bound
    return hello


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
            [sys.executable, "-m", "cupy_rawcode.parallel.pool"],
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


def run(
    tasks: list[Task], workers: int, on_result=None, memory: Memory | None = None
) -> list[Outcome]:
    """Run every task in ``workers`` worker processes; ``on_result(i, outcome)`` is called (from
    a pool thread) as each ends. A worker that dies fails its task with its exit status and
    stderr, and a new one takes the next task. The workers end before this returns, also when
    it raises."""
    import queue

    outcomes: list[Outcome | None] = [None] * len(tasks)
    todo: queue.Queue = queue.Queue()
    for i in range(len(tasks)):
        todo.put(i)
    hello = _hello()
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
                    out = Outcome.from_json(reply)
                    memory.worker(out.max_rss)
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


# -- the worker's side -----------------------------------------------------------------------


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
    """The worker: a hello line (module path, cache directory), then one task per line."""
    import queue
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's (module docstring)
    out = os.fdopen(os.dup(1), "wb")  # the protocol's channel
    os.dup2(2, 1)  # anything printed to fd 1 (by us or a library) goes to stderr instead
    sys.stdout = sys.stderr
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_stdin, args=(lines,), daemon=True).start()
    hello = json.loads(lines.get())
    sys.path[:] = hello.get("sys_path") or sys.path
    if hello.get("cache_dir"):
        from ..store import make_store, set_store

        set_store(make_store(hello["cache_dir"], max_size=hello.get("max_size")))
    while True:
        message = json.loads(lines.get())
        outcome = run_task(Task.from_json(message["task"]))
        reply = {"id": message["id"], **outcome.__dict__, "max_rss": _max_rss()}
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
