"""`pddplan optimize` as one library call: a checked request (what to optimize and which further
analyses to run) and its outcome (the report, the further analyses, and the plan `--output` writes).

    request = OptimizeRequest.of("pdd-agent-64k", rate=None, robustness=True)
    outcome = run_request(request)
    outcome.report.best, outcome.robustness.verdict, outcome.chosen

Every check is here, so a library caller gets the errors the command line gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pddplan import architectures
from pddplan.errors import InfeasibleError, InputError
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.inputs.plan_files import plan_yaml
from pddplan.optimize.options import OptimizeOptions, RelayPlacement
from pddplan.optimize.outputs import ArchitectureSurvival, Optimize
from pddplan.optimize.robust import RobustResult, check_robust, robust_optimize
from pddplan.optimize.robustness import RobustnessReport, robustness
from pddplan.optimize.run import OptimizeReport, optimize
from pddplan.optimize.solver import SolverOptions
from pddplan.optimize.survive import survive, survive_kinds
from pddplan.specs.plan import ArchitectureName, Plan
from pddplan.specs.workload import Workload
from pddplan.support.limits import check_budget
from pddplan.support.loading import write_atomic


def architecture_names(given: Sequence[str] | None) -> list[ArchitectureName]:
    """`given` checked against the registry (default: every architecture)."""
    for name in given or []:
        if name not in architectures.names():
            raise InputError(f"--architecture = {name!r}: expected one of {', '.join(architectures.names())}")
    return list(given) if given else list(architectures.names())


def optimize_options(
    rate: float | None = None,
    budget: float | None = None,
    solver: SolverOptions | None = None,
    relay: str = "auto",
    **rest: Any,
) -> OptimizeOptions:
    """The options of one optimize run: the mode from `rate` (the cheapest plan for it) or `budget`
    (the most goodput for it), never both; the rest as `OptimizeOptions` takes them."""
    if rate is not None and budget is not None:
        raise InputError("give --rate or --budget, not both")
    if budget is not None:
        check_budget(budget)
    mode = "rate" if rate else ("budget" if budget else "bcr")
    placement: RelayPlacement = relay  # type: ignore[assignment]  # checked by OptimizeOptions
    return OptimizeOptions(
        mode=mode,  # type: ignore[arg-type]
        rate=rate,
        budget_per_hour=budget,
        solver=solver or SolverOptions(),
        relay_placement=placement,
        **rest,
    )


@dataclass(frozen=True)
class OptimizeRequest:
    """What `optimize` is asked: the workload, the options, the architectures, and the further
    analyses (`--robustness`, `--robust`, `--survive`)."""

    workload: str
    spec: Workload
    options: OptimizeOptions
    architectures: list[ArchitectureName]
    robustness: bool = False
    robust_day: bool = False
    survive: frozenset[str] | None = None

    @classmethod
    def of(
        cls,
        workload: str,
        options: OptimizeOptions | None = None,
        architectures: Sequence[str] | None = None,
        further: tuple[bool, bool, str | None] = (False, False, None),
    ) -> OptimizeRequest:
        """The request, checked before any work: the workload read, the architectures known, the
        day's scenarios present for `--robust`, the N+1 kinds known. `further` = (robustness,
        robust day, survive kinds as `--survive` writes them)."""
        options = options or OptimizeOptions()
        robust, robust_day, survive_text = further
        spec = load_workload(workload)
        if robust_day:
            check_robust(spec, options)
        return cls(
            workload, spec, options, architecture_names(architectures), robust, robust_day, survive_kinds(survive_text)
        )


@dataclass(frozen=True)
class OptimizeFlags:
    """Every option of `pddplan optimize`, by the command's own parameter names: what a caller (the
    command line or a library user) fills in, checked when it becomes a request (`request`)."""

    workload: str
    rate: float | None = None
    budget: float | None = None
    architecture: list[str] | None = None
    solver: str = "highs"
    time_limit: float | None = None
    mip_gap: float = 1e-6
    requests: int = 10_000
    seed: int = 0
    verify: bool = True
    jobs: int | None = None
    early_stop: bool = True
    min_served: float = 1.0
    relay: str = "auto"
    robust: bool = False
    survive_kinds: str | None = None
    robust_day: bool = False
    output_plan: Path | None = None
    report_path: Path | None = None
    json_out: bool = False
    top: int | None = None

    def request(self) -> OptimizeRequest:
        """The checked request these options ask for."""
        further = (self.robust, self.robust_day, self.survive_kinds)
        return OptimizeRequest.of(self.workload, self.options(), self.architecture, further)

    def options(self) -> OptimizeOptions:
        """The optimize options these flags give, checked (all but the workload's): a workload built
        from flags is written only once they pass."""
        solver = SolverOptions(name=self.solver, time_limit_s=self.time_limit, mip_gap=self.mip_gap)  # type: ignore[arg-type]
        architecture_names(self.architecture)
        survive_kinds(self.survive_kinds)
        return optimize_options(
            self.rate,
            self.budget,
            solver,
            self.relay,
            min_served_fraction=self.min_served,
            verify_requests=self.requests,
            seed=self.seed,
            verify=self.verify,
            early_stop=self.early_stop,
            jobs=self.jobs,
            top=self.top,
        )


@dataclass(frozen=True)
class OptimizeOutcome:
    """What `optimize` found: the report, and the further analyses asked for."""

    report: OptimizeReport
    robustness: RobustnessReport | None = None
    day: list[RobustResult] | None = None
    survival: list[ArchitectureSurvival] | None = None
    chosen: tuple[Plan, str] | None = field(default=None)  # the plan `--output` writes, and which it is

    def to_output(self, written: str | None = None) -> Optimize:
        """The typed result `optimize --json` prints: the report's, and each further analysis asked
        for; `written`, the words `--output` reported for the plan it wrote."""
        result = self.report.to_output()
        if self.robustness is not None:
            result.robustness = self.robustness.to_output()
        if written is not None:
            result.output_plan = written
        if self.day is not None:
            result.robust = [r.to_output() for r in self.day]
        if self.survival is not None:
            result.survive = self.survival
        return result

    def write_plan(self, path: Path | None, workload_name: str) -> str | None:
        """Write the plan `--output` asks for (`chosen`) to `path`; the words saying which plan it
        is (None: nothing written)."""
        if path is None or self.chosen is None:
            return None
        plan, which = self.chosen
        write_atomic(path, plan_yaml(plan, workload_name))
        return which

    def raise_if_infeasible(self) -> None:
        """InfeasibleError (exit 3) naming why each architecture failed, when none has a plan."""
        if self.report.best is None:
            raise InfeasibleError(f"no architecture meets the constraints. {infeasible_reasons(self.report.results)}")


def run_request(request: OptimizeRequest, progress: Callable[[str], None] | None = None) -> OptimizeOutcome:
    """Optimize, then run the further analyses the request asks for."""
    base_dir = workload_dir(request.workload)
    spec, options, names = request.spec, request.options, request.architectures
    report = optimize(spec, base_dir, options, names, progress=progress)
    further = replace(options, top=None)  # the further analyses re-optimize for one plan each
    moves = robustness(spec, base_dir, further, report, names, progress=progress) if request.robustness else None
    day = robust_optimize(spec, base_dir, further, list(names), progress=progress) if request.robust_day else None
    survival = survival_of(spec, base_dir, report, request.survive) if request.survive is not None else None
    return OptimizeOutcome(report, moves, day, survival, chosen_plan(report, day, survival))


def survival_of(
    spec: Workload, base_dir: Path | None, report: OptimizeReport, kinds: frozenset[str]
) -> list[ArchitectureSurvival]:
    """`optimize --survive`: each architecture's plan grown to N+1 (`pddplan.optimize.survive`)."""
    inputs = load_input_set(spec, base_dir)
    out = []
    for result in report.results:
        if result.plan is None:
            continue
        try:
            grown = survive(inputs, result.plan, set(kinds)).to_output().json_data()
            out.append(ArchitectureSurvival(architecture=result.name, feasible=True, reason=None, **grown))
        except InfeasibleError as error:
            out.append(ArchitectureSurvival(architecture=result.name, feasible=False, reason=str(error)))
    return out


def chosen_plan(
    report: OptimizeReport, day: list[RobustResult] | None, survival: list[ArchitectureSurvival] | None
) -> tuple[Plan, str] | None:
    """The plan `--output` writes, with words saying which it is: with `--robust`, the cheapest
    purchase that meets every required scenario of the day; with `--survive`, the best
    architecture's plan grown to N+1; else the best plan."""
    if day is not None:
        robust = [r for r in day if r.plan is not None and r.cost_usd_per_hour is not None]
        if not robust:
            return None
        winner = min(robust, key=lambda r: r.cost_usd_per_hour or 0.0)
        assert winner.plan is not None and winner.cost_usd_per_hour is not None
        return winner.plan, (
            f"the robust purchase ({winner.architecture}, ${winner.cost_usd_per_hour:,.2f}/h, every required "
            "scenario of the day met)"
        )
    best = report.best
    if best is None or best.plan is None:
        return None
    if survival is not None:
        grown = next((s for s in survival if s.architecture == best.name and s.feasible), None)
        if grown is None or grown.plan is None or grown.cost_usd_per_hour is None:
            return None
        plan = Plan.model_validate(grown.plan)
        return plan, f"the N+1 plan ({best.name}, ${grown.cost_usd_per_hour:,.2f}/h, grown to survive a loss)"
    return best.plan, f"the best plan ({best.name})"


def infeasible_reasons(results: Sequence[Any]) -> str:
    """Why each architecture failed, one clause per distinct reason naming the architectures it
    stops ("pd-intra, pdd: ..."), so a reason they share is said once."""
    by_reason: dict[str, list[str]] = {}
    for r in results:
        reason = "; ".join(dict.fromkeys(item["message"] for item in r.infeasibility)) or "no feasible plan"
        by_reason.setdefault(reason, []).append(r.name)
    if len(by_reason) == 1 and len(results) > 1:
        return f"all architectures: {next(iter(by_reason))}"
    return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
