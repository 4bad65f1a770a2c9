"""Whether this process may fork workers: only where fork exists and no other thread runs (the
optimizer's parallel architectures, the trace reader's prefetch, `map_forked`'s independent
simulations); and workers that die with it."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


def die_with_parent(parent_pid: int) -> None:
    """Run in a forked worker first: have the kernel kill it when its parent dies (Linux's
    prctl(PR_SET_PDEATHSIG, SIGKILL)), so a parent killed by SIGKILL leaves no worker computing
    on; and exit at once if the parent `parent_pid` is already gone (it died before the call).
    Elsewhere a no-op: the pool's own shutdown is all there is."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


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
    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return False
    deadline = time.monotonic() + settle_s
    while threads_in_process() > 1:
        if threading.active_count() > 1 or time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


@contextmanager
def forked_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of `workers` forked processes that die with this one (`die_with_parent`); when the
    block is left by an exception (SIGTERM's SystemExit, Ctrl-C, an error), the workers are
    killed first, so the pool's shutdown does not wait for the tasks they are running.

    What this process holds is frozen out of the cyclic collector while the pool lives
    (`gc.freeze`, as the gc module's documentation advises before a fork): the workers' collections
    then skip the inherited objects (the modules, the inputs) instead of walking, and so copying,
    every page of them."""
    gc.freeze()
    pool = ProcessPoolExecutor(
        workers, multiprocessing.get_context("fork"), initializer=die_with_parent, initargs=(os.getpid(),)
    )
    try:
        yield pool
    except BaseException:
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        gc.unfreeze()


#: what `map_forked`'s workers run: the function and its items, inherited through the fork
_CALL: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _call(index: int) -> Any:
    assert _CALL is not None
    func, items = _CALL
    return func(items[index])


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def worker_count(requested: int | None, tasks: int) -> int:
    """Workers to use: `requested` (None: one per CPU this process may use), at most one per task."""
    return max(1, min(requested or usable_cpus(), tasks))


def map_forked(
    func: Callable[[ItemT], ResultT],
    items: Sequence[ItemT],
    workers: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[ResultT]:
    """[func(item) for item in items], on up to `workers` forked processes where forking is safe
    (`fork_is_safe`), else in this one; `progress(done, total)` as the results come in, in order.
    The workers inherit `func` and `items` (a closure, scenarios too large or too odd to pickle):
    only an index goes out and the result comes back."""
    global _CALL
    workers = min(workers, len(items))
    if workers <= 1 or not fork_is_safe():
        return reported((func(item) for item in items), len(items), progress)
    _CALL = (func, items)
    try:
        with forked_pool(workers) as pool:
            return reported(pool.map(_call, range(len(items))), len(items), progress)
    finally:
        _CALL = None


def reported(results: Iterable[ResultT], total: int, progress: Callable[[int, int], None] | None) -> list[ResultT]:
    """`results` as a list, calling `progress(done, total)` after each one."""
    out = []
    for result in results:
        out.append(result)
        if progress:
            progress(len(out), total)
    return out


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """SIGKILL every worker of `pool` (Python 3.14's `kill_workers`; before it, the pool's process
    table, which the standard library keeps in `_processes`)."""
    kill = getattr(pool, "kill_workers", None)
    if kill is not None:
        kill()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()
