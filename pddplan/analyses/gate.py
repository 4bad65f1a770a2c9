"""`pddplan gate`: re-optimize committed scenarios and fail when the deployment got worse.

Objective values are compared, not configurations (solvers break ties differently):
  regression   cost_usd_per_hour rose by more than its tolerance, BCR fell by more than its
               tolerance, or the scenario no longer has a feasible plan that meets its SLA;
  improvement  cost fell or BCR rose by more than the tolerance (passes; refresh the baseline);
  unchanged    otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from pddplan.errors import InputError
from pddplan.inputs import load_workload
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.run import OptimizeReport, architecture_output, optimize_each
from pddplan.specs.baseline import MAX_TOLERANCE, OLD_NAMES, Baseline, Metric, ScenarioResult
from pddplan.specs.baseline import GateScenario as ScenarioSpec
from pddplan.specs.workload import Workload
from pddplan.support import catalog
from pddplan.support.jsontext import to_json
from pddplan.support.loading import load, write_atomic
from pddplan.support.outputs import Output

Verdict = Literal["regression", "improvement", "unchanged"]


class MetricChange(Output):
    """One metric before and after, and its verdict."""

    before: float | None
    after: float | None
    change: float | None
    verdict: Verdict


class GateScenario(Output):
    name: str
    verdict: Verdict = Field(description="regression, improvement or unchanged")
    reasons: list[str]
    best_before: str | None
    best_after: str | None
    metrics: dict[Metric, MetricChange]
    gpus_before: dict[str, int]
    gpus_after: dict[str, int]


class Gate(Output):
    """`gate --json`."""

    passed: bool
    improved: bool
    scenarios: list[GateScenario]


#: a verdict in the Markdown report: its mark, then the JSON report's word
MARKS = {"regression": "❌", "improvement": "✅", "unchanged": "="}


@dataclass(frozen=True)
class ScenarioCheck:
    """A scenario's re-run and verdict."""

    name: str
    before: ScenarioResult
    after: ScenarioResult
    metrics: dict[Metric, MetricChange]
    verdict: Verdict
    reasons: list[str]


def result_of(report: OptimizeReport) -> ScenarioResult:
    """The baseline record of an optimize report: the best architecture's objective values."""
    best = report.best
    if best is None:
        return ScenarioResult(best=None, feasible=False)
    figures = architecture_output(best)
    return ScenarioResult(
        best=best.name,
        feasible=True,
        cost_usd_per_hour=round(float(figures.cost_usd_per_hour or 0.0), 6),
        bcr=round(float(figures.bcr or 0.0), 6),
        goodput_rps=round(float(figures.goodput_rps), 6),
        gpus={gpu: int(n) for gpu, n in figures.gpus.items()},
        wan_gbps=float(figures.wan_gbps),
        ttft_p90_s=round(float(figures.ttft_p90_s or 0.0), 6),
        ttft_p99_s=round(float(figures.ttft_p99_s or 0.0), 6),
    )


def scenario_request(scenario: ScenarioSpec, base_dir: Path) -> tuple[Workload, Path, OptimizeOptions]:
    """What re-optimizing a scenario runs: its workload (a shipped name, or a path from the
    baseline's folder), the folder the workload names its files from, and its committed options."""
    workload_ref = scenario.workload
    if workload_ref not in catalog.entries("workloads"):
        path = Path(workload_ref)
        workload_ref = str(path if path.is_absolute() else base_dir / path)
    workload = load_workload(workload_ref)
    opts = scenario.options
    options = OptimizeOptions(
        mode=opts.mode,
        rate=opts.rate_rps,
        budget_per_hour=opts.budget_usd_per_hour,
        min_served_fraction=opts.min_served_fraction,
        verify_requests=opts.requests,
        seed=opts.seed,
        diagnose=False,  # a baseline records the best plan's figures, never why another has none
    )
    return workload, catalog.resolve("workloads", workload_ref, "workload").resolve().parent, options


def compare(name: str, before: ScenarioResult, after: ScenarioResult, tolerances: Baseline) -> ScenarioCheck:
    """Verdict per metric and for the scenario (a regression anywhere fails it)."""
    tol = tolerances.tolerances
    metrics: dict[Metric, MetricChange] = {}
    reasons: list[str] = []
    if before.feasible and not after.feasible:
        reasons.append("no feasible plan meets the SLA any more")
    directions: tuple[tuple[Metric, bool], ...] = (("cost_usd_per_hour", True), ("bcr", False), ("goodput_rps", False))
    for metric, worse_if_higher in directions:
        old = getattr(before, metric)
        new = getattr(after, metric)
        if old is None or new is None:
            verdict: Verdict = "regression" if old is not None else "unchanged"
            metrics[metric] = MetricChange(before=old, after=new, change=None, verdict=verdict)
            continue
        change = (new - old) / old if old else (0.0 if new == old else float("inf"))
        limit = tol.of(metric)
        worse = change > limit if worse_if_higher else change < -limit
        better = change < -limit if worse_if_higher else change > limit
        verdict = "regression" if worse else ("improvement" if better else "unchanged")
        if worse and metric != "goodput_rps":
            reasons.append(f"{metric} {old:,.4g} -> {new:,.4g} ({change:+.2%}, tolerance {limit:.2%})")
        metrics[metric] = MetricChange(before=old, after=new, change=change, verdict=verdict)
    gating = [m for name, m in metrics.items() if name != "goodput_rps"]
    if reasons:
        verdict_all: Verdict = "regression"
    elif any(m.verdict == "improvement" for m in gating) or (not before.feasible and after.feasible):
        verdict_all = "improvement"
    else:
        verdict_all = "unchanged"
    return ScenarioCheck(name, before, after, metrics, verdict_all, reasons)


def load_baseline(path: Path) -> Baseline:
    """Read and validate a baseline; InputError (exit 2) when missing or corrupt."""
    if not path.exists():
        raise InputError(f"{path}: baseline not found (create one with `pddplan gate {path} --update --init WORKLOAD`)")
    return load(Baseline, path)


def gate(
    path: Path,
    progress: Callable[[str], None] | None = None,
    tolerances: dict[Metric, float] | None = None,
    rtol: float | None = None,
) -> tuple[Baseline, list[ScenarioCheck]]:
    """Re-run every scenario of the baseline at `path` and compare."""
    baseline = load_baseline(path)
    judged_by = baseline
    if rtol is not None or tolerances:
        # Flag overrides judge this run only; the returned baseline keeps the committed tolerances,
        # so `--update` never writes a one-off override back to the file.
        per_metric = {**baseline.tolerances.per_metric, **(tolerances or {})}
        judged_by = baseline.model_copy(
            update={
                "tolerances": baseline.tolerances.model_copy(
                    update={"rtol": baseline.tolerances.rtol if rtol is None else rtol, "per_metric": per_metric}
                )
            }
        )
    reports = _rerun_all(baseline.scenarios, path, progress)
    checks = [
        compare(scenario.name, scenario.result, result_of(report), judged_by)
        for scenario, report in zip(baseline.scenarios, reports, strict=True)
    ]
    return baseline, checks


def _rerun_all(
    scenarios: list[ScenarioSpec], path: Path, progress: Callable[[str], None] | None = None
) -> list[OptimizeReport]:
    """Every scenario re-optimized, the scenarios that compare the same architectures in one pool of
    workers (`optimize_each`: the reports one by one would give, without one scenario's long search
    leaving a core idle). A scenario that cannot be read or run, or a pool that crashes, is an
    InputError (exit 2) naming the scenarios: a scenario that cannot run is not a regression (exit 1)
    and not a pass."""
    requests = []
    for scenario in scenarios:
        try:
            requests.append(scenario_request(scenario, path.resolve().parent))
        except InputError as error:
            raise InputError(f"{path}: scenario {scenario.name!r}: {error}") from error
    groups: dict[tuple[str, ...] | None, list[int]] = {}
    for i, scenario in enumerate(scenarios):
        chosen = scenario.options.architectures
        groups.setdefault(tuple(chosen) if chosen is not None else None, []).append(i)
    reports: dict[int, OptimizeReport] = {}
    for names, members in groups.items():
        if progress:
            progress(f"optimizing {', '.join(scenarios[i].name for i in members)}")
        try:
            found = optimize_each([requests[i] for i in members], names, progress)
        except InputError as error:
            raise InputError(f"{path}: {_names(scenarios, members)}: {error}") from error
        except Exception as error:  # a crash is reported as the scenarios', not as a gate verdict
            crash = f"{type(error).__name__}: {error}".splitlines()[0]
            raise InputError(f"{path}: {_names(scenarios, members)} crashed: {crash}") from error
        reports |= dict(zip(members, found, strict=True))
    return [reports[i] for i in range(len(scenarios))]


def _names(scenarios: list[ScenarioSpec], members: list[int]) -> str:
    """`scenario 'a'`, or `scenarios 'a', 'b'`."""
    named = ", ".join(repr(scenarios[i].name) for i in members)
    return f"scenario {named}" if len(members) == 1 else f"scenarios {named}"


def updated(baseline: Baseline, checks: list[ScenarioCheck], allow_infeasible: bool = False) -> Baseline:
    """The baseline with every scenario's result replaced by its re-run; an infeasible re-run is
    recorded only with `allow_infeasible` (or where the scenario already allowed it)."""
    fresh = {check.name: check.after for check in checks}
    scenarios = []
    for s in baseline.scenarios:
        result = fresh.get(s.name, s.result)
        allowed = s.allow_infeasible or allow_infeasible
        if not result.feasible and not allowed:
            raise InputError(
                f"scenario {s.name!r} has no feasible plan: not recorded (nothing to gate against); "
                "pass --allow-infeasible to record it on purpose"
            )
        scenarios.append(s.model_copy(update={"result": result, "allow_infeasible": allowed and not result.feasible}))
    return baseline.model_copy(update={"scenarios": scenarios})


def write_baseline(path: Path, baseline: Baseline) -> None:
    """Write a baseline atomically (a temporary file, then a rename)."""
    write_atomic(path, to_json(baseline.model_dump(mode="json")) + "\n")


def init_baseline(
    path: Path, workloads: list[str], progress: Callable[[str], None] | None = None, allow_infeasible: bool = False
) -> Baseline:
    """A new baseline with one default scenario per workload, results from a fresh run (a workload
    with no feasible plan is refused unless `allow_infeasible`)."""
    placeholders = []
    for name in workloads:
        reference = name
        if name not in catalog.entries("workloads"):
            # A file named on the command line is relative to the working directory; the baseline
            # stores it relative to its own folder so the gate runs from anywhere.
            reference = os.path.relpath(Path(name).resolve(), path.resolve().parent)
        placeholders.append(
            ScenarioSpec(
                name=Path(name).stem,
                workload=reference,
                allow_infeasible=True,
                result=ScenarioResult(best=None, feasible=False),
            )
        )
    scenarios = []
    for name, placeholder, report in zip(
        workloads, placeholders, _rerun_all(placeholders, path, progress), strict=True
    ):
        result = result_of(report)
        if not result.feasible and not allow_infeasible:
            raise InputError(
                f"{name}: no feasible plan: not recorded (nothing to gate against); "
                "pass --allow-infeasible to record it on purpose"
            )
        scenarios.append(placeholder.model_copy(update={"result": result, "allow_infeasible": not result.feasible}))
    return Baseline(scenarios=scenarios)


def outcome(checks: list[ScenarioCheck]) -> Gate:
    """What `gate --json` prints: per scenario, before/after/change/verdict, and the overall outcome."""
    return Gate(
        passed=all(c.verdict != "regression" for c in checks),
        improved=any(c.verdict == "improvement" for c in checks),
        scenarios=[
            GateScenario(
                name=c.name,
                verdict=c.verdict,
                reasons=c.reasons,
                best_before=c.before.best,
                best_after=c.after.best,
                metrics=c.metrics,
                gpus_before=c.before.gpus,
                gpus_after=c.after.gpus,
            )
            for c in checks
        ],
    )


def parse_tolerances(tol: list[str] | None, rtol: float | None) -> dict[Metric, float]:
    """`--tol METRIC=NUMBER` (repeatable; metrics by their current or old names) as per-metric
    tolerances, and `--rtol` checked: every tolerance a finite number >= 0."""
    overrides: dict[Metric, float] = {}
    for item in tol or []:
        name, _, value = item.partition("=")
        name = OLD_NAMES.get(name, name)
        if name not in ("cost_usd_per_hour", "bcr", "goodput_rps"):
            raise InputError(f"--tol {item!r}: metric must be cost_usd_per_hour, bcr or goodput_rps")
        metric: Metric = name  # type: ignore[assignment]
        try:
            overrides[metric] = float(value)
        except ValueError:
            raise InputError(f"--tol {item!r}: expected METRIC=NUMBER") from None
        if not 0 <= overrides[metric] <= MAX_TOLERANCE:
            raise InputError(f"--tol {item!r}: tolerance must be from 0 to {MAX_TOLERANCE:g} (a relative change)")
    if rtol is not None and not 0 <= rtol <= MAX_TOLERANCE:
        raise InputError(f"--rtol = {rtol}: must be from 0 to {MAX_TOLERANCE:g} (a relative change)")
    return overrides


@dataclass(frozen=True)
class GateFlags:
    """Every option of `pddplan gate`, by the command's parameter names."""

    baseline: Path
    update: bool = False
    init: list[str] | None = None
    rtol: float | None = None
    tol: list[str] | None = None
    markdown_path: Path | None = None
    allow_infeasible: bool = False
    accept: bool = False
    json_out: bool = False

    def tolerances(self) -> dict[Metric, float]:
        return parse_tolerances(self.tol, self.rtol)

    def check_init(self) -> None:
        """InputError when `--init` would overwrite an existing baseline, or for `--accept` without
        `--update` (it would be ignored: without --update a regression fails the gate)."""
        if self.accept and not self.update:
            raise InputError("--accept goes with --update: it records regressions in the rewritten baseline")
        if self.init and self.baseline.exists():
            raise InputError(f"{self.baseline}: exists; --init creates a new baseline, use --update to refresh it")


def conclude(flags: GateFlags, spec: Baseline, checks: list[ScenarioCheck]) -> tuple[list[str], str | None]:
    """After a gate: (the notices to print, the failure to exit 1 with, or None). `--update` rewrites
    the baseline only when no regression is left unaccepted: without `--accept` the baseline keeps
    its figures, so the next gate fails again instead of passing on the regressed ones."""
    failed = [c.name for c in checks if c.verdict == "regression"]
    if flags.update:
        if failed and not flags.accept:
            return [], (
                f"regressions in {', '.join(failed)}: {flags.baseline} not updated; pass --accept to record them"
            )
        write_baseline(flags.baseline, updated(spec, checks, flags.allow_infeasible))
        return [f"updated {flags.baseline}"], None
    if failed:
        return [], f"cost gate failed for {', '.join(failed)}"
    if any(c.verdict == "improvement" for c in checks):
        return [f"results improved: refresh the baseline with `pddplan gate {flags.baseline} --update`"], None
    return [], None


def create_baseline(flags: GateFlags, progress: Callable[[str], None] | None = None) -> str:
    """`gate --init`: optimize each workload, write the new baseline; the notice to print."""
    assert flags.init
    fresh = init_baseline(flags.baseline, flags.init, progress=progress, allow_infeasible=flags.allow_infeasible)
    write_baseline(flags.baseline, fresh)
    return f"wrote {flags.baseline} with {len(fresh.scenarios)} scenario(s)"
