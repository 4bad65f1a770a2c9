"""Optimize several architectures at once, one forked worker process each (up to the CPU count).

Each architecture's search is independent of the others' (own program, own verification
simulation with its own seed), so running them side by side changes no figure; it divides the
wall time by up to the number of cores. Workers are forked so that they share the loaded inputs
without pickling them. Where fork is unavailable (Windows), another thread runs in this process
(a Python thread, or a native one such as a BLAS thread pool: a fork beside it can deadlock, see
pddplan/support/blas.py), or one core is all there is, the architectures run one after another here. A
worker that dies (killed, out of memory) fails the run with a message instead of hanging it; a
worker whose parent dies (even by SIGKILL) is killed with it (`die_with_parent`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool

from pddplan import architectures
from pddplan.inputs.input_set import InputSet
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.search import ArchitectureResult, optimize_architecture
from pddplan.specs.plan import ArchitectureName
from pddplan.support.forking import fork_is_safe, forked_pool, worker_count

# What the forked workers read: set just before the pool forks, cleared after it closes.
_SHARED: list[tuple[InputSet, OptimizeOptions]] | None = None


def _one(task: tuple[int, ArchitectureName]) -> ArchitectureResult:
    assert _SHARED is not None, "a worker runs only inside optimize_cases' pool"
    case, name = task
    inputs, options = _SHARED[case]
    return optimize_architecture(inputs, name, options)


def longest_first(names: Sequence[ArchitectureName]) -> list[int]:
    """Indices of `names` in the order to hand them to the workers: an architecture with a relay
    searches the most (routing rules x relay placements x handoff modes), then one over the WAN
    (line sizes), then the rest. The longest task starting first bounds the wall time by it."""

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
    return optimize_cases([(inputs, options)], names, progress)[0]


def optimize_cases(
    cases: Sequence[tuple[InputSet, OptimizeOptions]],
    names: Sequence[ArchitectureName],
    progress: Callable[[str], None] | None = None,
) -> list[list[ArchitectureResult]]:
    """`optimize_all` of each case (a workload variant and its options), every (case, architecture)
    pair one task for the same pool, so that one case's long search does not leave a core idle
    while the next case waits (up to the first case's `jobs` workers)."""
    global _SHARED
    tasks = [(case, name) for case in range(len(cases)) for name in names]
    workers = worker_count(cases[0][1].jobs if cases else 1, len(tasks))
    if workers == 1 or not fork_is_safe():
        return [[optimize_architecture(inputs, name, options, progress) for name in names] for inputs, options in cases]
    if progress:
        progress(f"optimizing {', '.join(names)} on {workers} workers")
    _SHARED = list(cases)
    try:
        within = longest_first(names)  # the longest searches first, case by case
        order = [(case, names[i]) for i in within for case in range(len(cases))]
        with forked_pool(workers) as pool:
            done = dict(zip(order, pool.map(_one, order), strict=True))
        return [[done[(case, name)] for name in names] for case in range(len(cases))]
    except BrokenProcessPool as error:
        raise RuntimeError(
            f"an optimizer worker process died ({error}); rerun with --jobs 1 to optimize in one process"
        ) from error
    finally:
        _SHARED = None
