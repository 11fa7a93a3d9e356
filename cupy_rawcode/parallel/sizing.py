"""How many workers a pool starts: CUPY_RAWCODE_WORKERS when set, else no more than the usable
cores (the process's CPU affinity), than the memory available holds compiles of
``PER_COMPILE_BYTES`` (the kernel's MemAvailable from /proc/meminfo, or less under a cgroup
limit from /sys/fs/cgroup), or than there are tasks; at least one. A ``workers`` argument is
checked here too (a clear ValueError).
"""

from __future__ import annotations

import os

PER_COMPILE_BYTES = 400 << 20  # what one NVRTC compile of a CUB kernel holds, roughly


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
