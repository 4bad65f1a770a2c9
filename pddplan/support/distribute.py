"""Run independent work units on one process, a local pool, or a cluster, results in input order.

Sweeps and bathtubs are many independent points. `map_in_order(func, tasks, execution)` runs
`func` on each task: in this process (one job), on forked copies of it (the default: no start-up,
the inputs inherited), on joblib's loky processes or threads, on a dask cluster (`scheduler`
address, else a local cluster of `jobs` worker processes started for the call), or on ray
(`scheduler` address, else a local runtime of `jobs` CPUs). Whatever the backend, the results
come back in the order of `tasks`, so every backend gives the same output.
`func` must be a module-level function and each task picklable; a task should carry what its
point needs (loaded inputs, not paths to re-read on every worker).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pddplan.errors import InputError
from pddplan.support.forking import map_forked, reported, usable_cpus
from pddplan.support.limits import check_jobs

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")

BACKENDS = ("fork", "loky", "threading", "dask", "ray")
#: how long to try reaching a dask scheduler given by address before saying it cannot be reached
SCHEDULER_TIMEOUT_S = 5


@dataclass(frozen=True)
class Execution:
    """How points run: `jobs` workers (None: one per CPU this process may use) on `backend`: fork
    (forked copies of this process, or this process alone where forking is unsafe,
    `pddplan.support.forking.map_forked`), loky, threading, dask or ray; `optimize` (sweeps) solves
    the integer program at each point instead of the fast sizing."""

    jobs: int | None = None
    backend: str = "fork"
    optimize: bool = False
    #: dask: the scheduler's address (tcp://host:8786); ray: the cluster's (ray://host:10001 or
    #: host:6379). None starts a local cluster (dask) or runtime (ray) of `jobs` workers.
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if self.jobs is not None:
            check_jobs(self.jobs)
        if self.backend not in BACKENDS:
            raise InputError(f"--backend = {self.backend!r}: expected {', '.join(BACKENDS[:-1])} or {BACKENDS[-1]}")
        if self.scheduler is not None and self.backend not in ("dask", "ray"):
            raise InputError(f"--scheduler is for --backend dask or ray, not {self.backend}")

    @property
    def workers(self) -> int:
        """`jobs`, or one per CPU this process may use."""
        return self.jobs or usable_cpus()


def map_in_order(
    func: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    execution: Execution,
    progress: Callable[[int, int], None] | None = None,
) -> list[ResultT]:
    """[func(task) for task in tasks] on `execution`'s backend; `progress(done, total)` as they finish."""
    if execution.backend == "dask":
        return _on_dask(func, tasks, execution, progress)
    if execution.backend == "ray":
        return _on_ray(func, tasks, execution, progress)
    if execution.backend == "fork":
        return map_forked(func, tasks, execution.workers, progress)
    if execution.workers == 1 and execution.backend == "loky":
        return reported((func(task) for task in tasks), len(tasks), progress)
    import joblib  # loaded when points run in parallel: a serial sweep never pays its import

    with joblib.parallel_config(backend=execution.backend, n_jobs=execution.workers):
        generator = joblib.Parallel(return_as="generator")(joblib.delayed(func)(task) for task in tasks)
        return reported(generator, len(tasks), progress)


def _optional(module: str, extra: str, backend: str) -> Any:
    """An optional, untyped package, imported as a module object; one line when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"--backend {backend} needs {extra}: pip install 'pddplan[{backend}]'") from None


def _on_dask(
    func: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    execution: Execution,
    progress: Callable[[int, int], None] | None,
) -> list[ResultT]:
    """Every task on a dask cluster: the one at `scheduler`, else a local cluster of `jobs`
    single-threaded worker processes started (and stopped) for this call."""
    distributed = _optional("distributed", "dask[distributed]", "dask")
    cluster = None
    try:
        if execution.scheduler is None:
            cluster = distributed.LocalCluster(
                n_workers=execution.workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            client = distributed.Client(cluster)
        else:
            client = distributed.Client(execution.scheduler, timeout=SCHEDULER_TIMEOUT_S)
    except OSError as exc:
        raise InputError(f"--scheduler {execution.scheduler}: cannot reach a dask scheduler there ({exc})") from None
    try:
        futures = client.map(func, list(tasks), pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        out: list[Any] = [None] * len(tasks)
        for done, future in enumerate(distributed.as_completed(futures), start=1):
            out[index[future.key]] = future.result()
            if progress:
                progress(done, len(tasks))
        return out
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _on_ray(
    func: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    execution: Execution,
    progress: Callable[[int, int], None] | None,
) -> list[ResultT]:
    """Every task as a ray task: on the cluster at `scheduler`, else on a local runtime of `jobs`
    CPUs started for this call (and shut down after it)."""
    ray = _optional("ray", "ray", "ray")
    started = not ray.is_initialized()
    if started:
        try:
            if execution.scheduler is None:
                ray.init(
                    num_cpus=execution.workers,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
            else:
                ray.init(address=execution.scheduler, log_to_driver=False, logging_level=logging.ERROR)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"--scheduler {execution.scheduler}: cannot reach a ray cluster there ({exc})") from None
    try:
        remote = ray.remote(num_cpus=1)(func)
        pending = [remote.remote(task) for task in tasks]
        index = {ref: i for i, ref in enumerate(pending)}
        out: list[Any] = [None] * len(tasks)
        done = 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                out[index[ref]] = ray.get(ref)
                done += 1
                if progress:
                    progress(done, len(tasks))
        return out
    finally:
        if started:
            ray.shutdown()
