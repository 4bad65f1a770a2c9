"""Optimize several architectures at once, one forked worker process each (up to the CPU count).

Each architecture's search is independent of the others' (own program, own verification
simulation with its own seed), so running them side by side changes no figure; it divides the
wall time by up to the number of cores. Workers are forked so that they share the loaded inputs
without pickling them; where fork is unavailable (Windows), another Python thread runs (a fork
beside it can deadlock the child), or one core is all there is, the architectures run one after
another in this process.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence

from pddplan.input_set import InputSet
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.search import ArchitectureResult, optimize_architecture
from pddplan.specs.plan import ArchitectureName

# What the forked workers read: set just before the pool forks, cleared after it closes.
_SHARED: tuple[InputSet, OptimizeOptions] | None = None


def _one(name: ArchitectureName) -> ArchitectureResult:
    assert _SHARED is not None, "a worker runs only inside optimize_all's pool"
    inputs, options = _SHARED
    return optimize_architecture(inputs, name, options)


def _fork_is_safe() -> bool:
    """Fork only where it exists and no other Python thread runs: a thread holding a lock (a
    logger's, a console's) at the fork would leave that lock held forever in the child."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def worker_count(requested: int | None, tasks: int) -> int:
    """Workers to use: `requested` (None: one per CPU this process may use), at most one per task."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(requested or available, tasks))


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
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(_one, names, chunksize=1)
    finally:
        _SHARED = None
