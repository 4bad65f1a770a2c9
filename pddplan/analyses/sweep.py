"""`pddplan sweep`: the bathtub's machinery over any numeric input of a workload file.

A parameter is a path into the workload file, dots between keys and [i] for list items, e.g.
`arrival.rate_rps`, `deployment.wan_lines[0].capacity_gbps`, `deployment.wan_lines[0].rtt_ms`,
`deployment.datacenters[1].gpus[0].usd_per_gpu_hour`, `serving.chunk_tokens`, `sla.ttft_p99_s`.
At each value the workload is re-validated, and each architecture is sized (fast greedy sizing,
`--optimize` for the integer program without verification). `bcr` and `revenue_per_cost` are
the plan's at the offered rate in both modes; without `--optimize`, `fluid_bcr`,
`fluid_revenue_per_cost` and `throughput_per_gpu_hour` are the sized plan's capacity view (fluid
economics: every role at its capacity), which an optimized plan leaves null.
Points run through `pddplan.support.distribute`: one after another, forked workers (the default),
loky processes, threads, a dask cluster or a ray runtime, always in input order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pddplan import architectures as registry
from pddplan.errors import InfeasibleError, InputError, PddplanError
from pddplan.inputs import check_workload
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.command import architecture_names
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.search import optimize_architecture
from pddplan.optimize.sizing import choose_shape, relay_on_prefill_if_cheaper, size_plan
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.scenarios.variants import set_path
from pddplan.specs.plan import ArchitectureName
from pddplan.specs.workload import Workload
from pddplan.support import catalog
from pddplan.support.distribute import Execution, map_in_order
from pddplan.support.images import check_image_outputs
from pddplan.support.limits import check_jobs
from pddplan.support.loading import read_data, validate
from pddplan.support.outputs import Output


class Sweep(Output):
    """`sweep --json`: per value, each architecture's figures under its name."""

    workload: str
    param: str
    architectures: list[str]
    points: list[dict[str, Any]]


if TYPE_CHECKING:
    from pddplan.inputs.input_set import InputSet


#: Points one sweep evaluates at most: each is an evaluation (or an optimization) of every
#: architecture, about a second; 1,000 is a quarter of an hour on two cores.
MAX_SWEEP_POINTS = 1000


def parse_values(values: str | None, span: str | None) -> list[float]:
    """`--values 1,2,4` or `--range START:STOP:NUM` (NUM evenly spaced values, both ends included)."""
    if (values is None) == (span is None):
        raise InputError("give --values V1,V2,... or --range START:STOP:NUM")
    if values is not None:
        try:
            out = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise InputError(f"--values {values!r}: expected numbers separated by commas") from None
        if not out:
            raise InputError("--values: no values")
        if len(out) > MAX_SWEEP_POINTS:
            raise InputError(f"--values: {len(out)} values, more than {MAX_SWEEP_POINTS} (each is a whole evaluation)")
        return out
    assert span is not None
    try:
        start, stop, num = span.split(":")
        count = int(num)
        first, last = float(start), float(stop)
    except ValueError:
        raise InputError(f"--range {span!r}: expected START:STOP:NUM, e.g. 10:100:10") from None
    if not 1 <= count <= MAX_SWEEP_POINTS:
        raise InputError(f"--range {span!r}: NUM must be 1 to {MAX_SWEEP_POINTS} (each point is a whole evaluation)")
    if count == 1:
        return [first]
    # The last point is STOP exactly (the formula can land one ulp off, e.g. 0.1 + 0.8 * 1.0).
    return [first + (last - first) * i / (count - 1) for i in range(count - 1)] + [last]


@dataclass(frozen=True)
class SweepTask:
    """One point: the workload with the parameter set and the files it names, loaded once for the
    whole sweep (no worker re-reads a catalog), and what to compute."""

    inputs: InputSet
    architectures: tuple[ArchitectureName, ...]
    optimize: bool


@dataclass(frozen=True)
class PointResult:
    """One point: each architecture's figures (the JSON view, by architecture name) and the WAN
    options its plans lease (what tells a swept line no plan uses, `unused_param`)."""

    figures: dict[str, Any]
    wan_options: frozenset[str]


def run_point(task: SweepTask) -> PointResult:
    """Figures of every architecture at one parameter value (runs in a worker). Without
    `optimize` an architecture's figures are its greedy-sized plan's, and a failure is that plan's
    (the reason says so): a search (`--optimize`) may still find a plan."""
    out: dict[str, Any] = {}
    leased: set[str] = set()
    for arch in task.architectures:
        try:
            scenario, figures = _optimized(task.inputs, arch) if task.optimize else _sized(task.inputs, arch)
        except PddplanError as exc:
            reason = str(exc) if task.optimize else f"greedy sizing (one plan, not a search) found none: {exc}"
            out[arch] = {"feasible": False, "reason": reason}
            continue
        out[arch] = figures
        leased.update(lease.option for lease in scenario.plan.wan)
    return PointResult(out, frozenset(leased))


def _sized(inputs: InputSet, arch: ArchitectureName) -> tuple[Scenario, dict[str, Any]]:

    workload = inputs.workload
    sized = relay_on_prefill_if_cheaper(size_plan(workload, choose_shape(inputs, arch)), inputs)
    scenario = build_scenario(sized.plan, inputs, source="sized plan")
    view = sized.view
    return scenario, {
        "feasible": True,
        "cost_usd_per_hour": scenario.cost_per_hour,
        "fluid_bcr": view.bcr,
        "bcr": workload.arrival.rate_rps * 3600 / scenario.cost_per_hour,
        "throughput_per_gpu_hour": view.throughput_per_gpu_hour,
        "fluid_revenue_per_cost": view.revenue_per_cost,
        # the plan at the workload's rate, as bcr (fluid_revenue_per_cost is the fluid view's)
        "revenue_per_cost": view.revenue_per_request_usd * workload.arrival.rate_rps * 3600 / scenario.cost_per_hour,
        "gpus": scenario.gpus_by_type(),
        "wan_gbps": scenario.link.gbps if scenario.link else 0.0,
    }


def _optimized(inputs: InputSet, arch: ArchitectureName) -> tuple[Scenario, dict[str, Any]]:

    result = optimize_architecture(inputs, arch, OptimizeOptions(verify=False))
    if not result.feasible or result.evaluation is None or result.scenario is None:
        raise InfeasibleError("; ".join(item["message"] for item in result.infeasibility) or "infeasible")
    scenario = result.scenario
    return scenario, {
        "feasible": True,
        "cost_usd_per_hour": scenario.cost_per_hour,
        "fluid_bcr": None,  # an optimized plan is judged at its rate; the fluid view is the sized plans'
        "bcr": result.evaluation.bcr,
        "throughput_per_gpu_hour": result.evaluation.goodput_rps * 3600 / sum(scenario.gpus_by_type().values()),
        "fluid_revenue_per_cost": None,
        "revenue_per_cost": result.evaluation.revenue_per_hour / scenario.cost_per_hour,
        "gpus": scenario.gpus_by_type(),
        "wan_gbps": scenario.link.gbps if scenario.link else 0.0,
    }


def sweep(
    workload_path: Path,
    param: str,
    values: Sequence[float],
    architectures: Sequence[ArchitectureName] | None = None,
    execution: Execution | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every point (see `pddplan.support.distribute.Execution`; default: forked workers, one per CPU)."""
    execution = execution or Execution()
    names = tuple(architectures) if architectures is not None else registry.names()
    tasks = _tasks(workload_path, param, values, names, execution.optimize)
    return _points(values, map_in_order(run_point, tasks, execution, progress))


def _tasks(
    workload_path: Path, param: str, values: Sequence[float], names: Sequence[ArchitectureName], optimize: bool
) -> list[SweepTask]:
    """One task per value: the workload file with `param` set to it, re-validated."""
    raw = read_data(workload_path)
    name = catalog.shown("workloads", workload_path)
    if not isinstance(raw, dict):
        raise InputError(f"{name}: expected a mapping at the top level")

    tasks = []
    loaded: InputSet | None = None
    for value in values:
        data = set_path(raw, param, value, where="--param")
        workload = check_workload(validate(Workload, data, f"{name} with {param} = {value:g}"), workload_path)
        # a numeric field names no file: the model, profiles and traces read for the first point serve all
        loaded = loaded or load_input_set(workload, workload_path.resolve().parent)
        tasks.append(SweepTask(loaded.with_workload(workload), tuple(names), optimize))
    return tasks


def _points(values: Sequence[float], results: Sequence[PointResult]) -> list[dict[str, Any]]:

    return [{"value": value, **result.figures} for value, result in zip(values, results, strict=True)]


_WAN_LINE = re.compile(r"deployment\.wan_lines\[(\d+)\]")


def unused_param(param: str, workload: Workload, results: Sequence[PointResult]) -> str | None:
    """Why a sweep of two values or more draws flat lines, when it does because no plan uses
    `param`: a field of a WAN line option that no plan leases at any value; or, for any other
    field, every architecture's figures the same at every value. None otherwise, and when no
    architecture has a plan at all (the lines are missing, not flat)."""
    if len(results) < 2 or not any(entry.get("feasible") for r in results for entry in r.figures.values()):
        return None
    line = _WAN_LINE.match(param)
    if line and int(line.group(1)) < len(workload.deployment.wan_lines):
        name = workload.deployment.wan_lines[int(line.group(1))].name
        leased = sorted(set().union(*(result.wan_options for result in results)))
        if name in leased:
            return None
        others = f"they lease {', '.join(leased)}" if leased else "they lease no line"
        return f"{param}: no plan leases {line.group(0)} ({name}) at any value ({others}), so no figure moves"
    if all(result.figures == results[0].figures for result in results):
        return (
            f"{param} moved nothing: every architecture's plan and figures are the same at all {len(results)} "
            "values (a field of an option no plan takes, such as a GPU offer none of them uses)"
        )
    return None


def best_of(point: dict[str, Any], architectures: Sequence[str]) -> str | None:
    """The architecture with the highest plan BCR at a point."""
    feasible = [a for a in architectures if point.get(a, {}).get("feasible")]
    return max(feasible, key=lambda a: point[a]["bcr"]) if feasible else None


# -- `pddplan sweep` as one library call ---------------------------------------------------------
@dataclass(frozen=True)
class SweepRequest:
    """What `sweep` is asked, checked: the workload (as named, and its file), the parameter and its
    values, the architectures, where the points run."""

    workload: str
    path: Path
    param: str
    values: list[float]
    architectures: list[ArchitectureName]
    execution: Execution


@dataclass(frozen=True)
class SweepFlags:
    """Every option of `pddplan sweep`, by the command's own parameter names: what a caller (the
    command line or a library user) fills in, checked when it becomes a request (`request`)."""

    workload: str
    param: str
    values: str | None = None
    span: str | None = None
    architecture: list[str] | None = None
    jobs: int | None = None
    backend: str = "fork"
    scheduler: str | None = None
    exact: bool = False
    png: Path | None = None
    svg: Path | None = None
    html: Path | None = None
    csv_path: Path | None = None
    json_out: bool = False
    detail: bool = False

    def request(self) -> SweepRequest:
        """The checked request, before any work: the architectures, the workers, the images asked
        for (matplotlib installed), the values (`parse_values`), the workload file, the backend."""
        names = architecture_names(self.architecture)
        if self.jobs is not None:
            check_jobs(self.jobs)
        check_image_outputs(self.png, self.svg)
        values = parse_values(self.values, self.span)
        path = catalog.resolve("workloads", self.workload, "workload")
        execution = Execution(self.jobs, self.backend, self.exact, self.scheduler)
        return SweepRequest(self.workload, path, self.param, values, names, execution)


@dataclass(frozen=True)
class SweepResult:
    """A sweep's points (`sweep`), with what was swept."""

    workload: str
    param: str
    architectures: list[ArchitectureName]
    points: list[dict[str, Any]]
    #: why the lines are flat, when no plan uses the parameter (`unused_param`); not in the JSON
    unused: str | None = None

    def to_output(self) -> Sweep:
        """The typed result `sweep --json` prints."""
        return Sweep(workload=self.workload, param=self.param, architectures=self.architectures, points=self.points)


def run_request(request: SweepRequest, progress: Callable[[int, int], None] | None = None) -> SweepResult:
    """The sweep the request asks for (`sweep`)."""
    names = request.architectures
    tasks = _tasks(request.path, request.param, request.values, names, request.execution.optimize)
    results = map_in_order(run_point, tasks, request.execution, progress)
    unused = unused_param(request.param, tasks[0].inputs.workload, results)
    return SweepResult(request.workload, request.param, names, _points(request.values, results), unused)
