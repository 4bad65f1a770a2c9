"""Optimize several architectures at once, one forked worker process each (up to the CPU count).

Each architecture's search is independent of the others' (own program, own verification
simulation with its own seed), so running them side by side changes no figure; it divides the
wall time by up to the number of cores. Workers are forked so that they share the loaded inputs
without pickling them. Where fork is unavailable (Windows), another thread runs in this process
(a Python thread, or a native one such as a BLAS thread pool: a fork beside it can deadlock, see
pddplan/support/blas.py), or one core is all there is, the architectures run one after another here. A
worker that dies (killed, out of memory) fails the run with a message instead of hanging it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pddplan.inputs.input_set import InputSet
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.search import ArchitectureResult, optimize_architecture
from pddplan.specs.plan import ArchitectureName

# What the forked workers read: set just before the pool forks, cleared after it closes.
_SHARED: tuple[InputSet, OptimizeOptions] | None = None


def _one(name: ArchitectureName) -> ArchitectureResult:
    assert _SHARED is not None, "a worker runs only inside optimize_all's pool"
    inputs, options = _SHARED
    return optimize_architecture(inputs, name, options)


def threads_in_process() -> int:
    """Threads of this process, native ones included (Linux's /proc/self/task); elsewhere the
    Python threads only."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _fork_is_safe(settle_s: float = 0.05) -> bool:
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


def worker_count(requested: int | None, tasks: int) -> int:
    """Workers to use: `requested` (None: one per CPU this process may use), at most one per task."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(requested or available, tasks))


def longest_first(names: Sequence[ArchitectureName]) -> list[int]:
    """Indices of `names` in the order to hand them to the workers: an architecture with a relay
    searches the most (routing rules x relay placements x handoff modes), then one over the WAN
    (line sizes), then the rest. The longest task starting first bounds the wall time by it."""
    from pddplan import architectures

    def work(index: int) -> tuple[int, int]:
        arch = architectures.get(names[index])
        return (-int(arch.has_relay), -int(arch.uses_wan))

    return sorted(range(len(names)), key=work)


def optimize_all(
    inputs: InputSet,
    names: Sequence[ArchitectureName],
    options: OptimizeOptions,
    progress: Callable[[str], None] | None = None,
) -> list[ArchitectureResult]:
    """`optimize_architecture` for each of `names`, in that order, on up to `options.jobs` workers."""
    global _SHARED
    workers = worker_count(options.jobs, len(names))
    if workers == 1 or not _fork_is_safe():
        return [optimize_architecture(inputs, name, options, progress) for name in names]
    if progress:
        progress(f"optimizing {', '.join(names)} on {workers} workers")
    _SHARED = (inputs, options)
    try:
        order = longest_first(names)
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            done = dict(zip(order, pool.map(_one, [names[i] for i in order]), strict=True))
        return [done[i] for i in range(len(names))]
    except BrokenProcessPool as error:
        raise RuntimeError(
            f"an optimizer worker process died ({error}); rerun with --jobs 1 to optimize in one process"
        ) from error
    finally:
        _SHARED = None
