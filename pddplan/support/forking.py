"""Whether this process may fork workers: only where fork exists and no other thread runs (the
optimizer's parallel architectures, the trace reader's prefetch)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time


def threads_in_process() -> int:
    """Threads of this process, native ones included (Linux's /proc/self/task); elsewhere the
    Python threads only."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def fork_is_safe(settle_s: float = 0.05) -> bool:
    """Fork only where it exists and no other thread runs: a thread holding a lock (a logger's, a
    console's, a BLAS pool's) at the fork would leave that lock held forever in the child. A
    Python thread just joined can linger natively for a moment, so a native-only surplus is given
    `settle_s` to go."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    deadline = time.monotonic() + settle_s
    while threads_in_process() > 1:
        if threading.active_count() > 1 or time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True
