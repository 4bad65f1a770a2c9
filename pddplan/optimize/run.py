"""`pddplan optimize`: the best plan per architecture, verified, side by side, and PDD's gains."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pddplan import architectures
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize import outputs
from pddplan.optimize.candidates import instance_widths
from pddplan.optimize.frontier import PlanOption
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.parallel import optimize_cases
from pddplan.optimize.search import ArchitectureResult
from pddplan.scenarios.describe import scenario_roles, scenario_wan
from pddplan.specs.plan import ArchitectureName, Plan
from pddplan.specs.workload import Workload
from pddplan.support.outputs import number


@dataclass
class OptimizeReport:
    """Every architecture's result and the best one."""

    workload: Workload
    options: OptimizeOptions
    results: list[ArchitectureResult]
    widths: dict[str, list[int]] = field(default_factory=dict)  # instance widths tried, per GPU type

    @property
    def widths_narrowed(self) -> bool:
        """Whether the workload narrowed the widths (deployment.tp_options) below the default."""
        return bool(self.workload.deployment.tp_options)

    @property
    def feasible(self) -> list[ArchitectureResult]:
        return [r for r in self.results if r.feasible]

    @property
    def best(self) -> ArchitectureResult | None:
        """Highest BCR (or lowest cost for `--rate`, most goodput for `--budget`) among feasible ones."""
        if not self.feasible:
            return None
        if self.options.mode == "rate":
            return min(self.feasible, key=lambda r: headline(r).cost_usd_per_hour)
        if self.options.mode == "budget":
            return max(self.feasible, key=lambda r: headline(r).goodput_rps)
        return max(self.feasible, key=lambda r: headline(r).bcr)

    def result(self, name: str) -> ArchitectureResult | None:
        return next((r for r in self.results if r.name == name), None)

    def gains(self) -> dict[str, outputs.Gain]:
        """PDD against each baseline with a plan: cost, BCR and TTFT P90/P99 changes (fractions)."""
        subject = self.result(architectures.subject().name)
        if subject is None or not subject.feasible:
            return {}
        mine = headline(subject)
        out: dict[str, outputs.Gain] = {}
        for other in self.results:
            if other is subject or other.plan is None:
                continue
            theirs = headline(other)
            out[other.name] = outputs.Gain(
                cost_change=mine.cost_usd_per_hour / theirs.cost_usd_per_hour - 1,
                bcr_change=mine.bcr / theirs.bcr - 1 if theirs.bcr > 0 else float("inf"),
                ttft_p90_change=mine.ttft_p90_s / theirs.ttft_p90_s - 1,
                ttft_p99_change=mine.ttft_p99_s / theirs.ttft_p99_s - 1,
                baseline_feasible=other.feasible,
            )
        return out

    def disaggregation(self) -> outputs.Disaggregation | None:
        """Should the workload disaggregate at all: the best co-located plan against the best
        disaggregated one (by the mode's measure, as `best`), with the disaggregated one's cost and
        BCR change over it (None unless both have a feasible plan)."""
        colocated = OptimizeReport(self.workload, self.options, [r for r in self.feasible if _colocated(r)]).best
        split = OptimizeReport(self.workload, self.options, [r for r in self.feasible if not _colocated(r)]).best
        if colocated is None or split is None:
            return None
        mine, theirs = headline(split), headline(colocated)
        return outputs.Disaggregation(
            colocated=colocated.name,
            disaggregated=split.name,
            winner=(self.best or colocated).name,
            cost_change=mine.cost_usd_per_hour / theirs.cost_usd_per_hour - 1,
            bcr_change=mine.bcr / theirs.bcr - 1 if theirs.bcr > 0 else float("inf"),
        )

    def to_output(self) -> outputs.Optimize:
        """The typed result `optimize --json` prints (without the further analyses': see
        `pddplan.optimize.command.OptimizeOutcome.to_output`)."""
        best = self.best
        return outputs.Optimize(
            workload=self.workload.name,
            mode=self.options.mode,
            rate_rps=self.options.rate if self.options.mode == "rate" else self.workload.arrival.rate_rps,
            budget_usd_per_hour=self.options.budget_per_hour,
            best=best.name if best else None,
            architectures=[architecture_output(r) for r in self.results],
            gains=self.gains(),
            disaggregation=self.disaggregation(),
            instance_widths=outputs.InstanceWidths(by_gpu=self.widths, narrowed_by_workload=self.widths_narrowed),
        )


def _colocated(result: ArchitectureResult) -> bool:
    return architectures.get(result.name).colocated


@dataclass(frozen=True)
class Headline:
    """An architecture's figures that rank it: the simulation's where it verified the plan, else
    the closed form's (no plan: no cost, no BCR)."""

    cost_usd_per_hour: float
    goodput_rps: float
    bcr: float
    ttft_p90_s: float
    ttft_p99_s: float


def headline(result: ArchitectureResult) -> Headline:
    """`result`'s ranking figures (`Headline`); nan for an architecture without a plan."""
    evaluation, verified = result.evaluation, result.simulation
    if evaluation is None:
        nan = float("nan")
        return Headline(nan, 0.0, nan, nan, nan)
    if verified is None:
        return Headline(
            evaluation.cost_per_hour,
            evaluation.goodput_rps,
            evaluation.bcr,
            evaluation.ttft.p90_s,
            evaluation.ttft.p99_s,
        )
    return Headline(
        evaluation.cost_per_hour,
        verified.goodput_rps,
        verified.bcr,
        number(verified.ttft_p90_s),
        number(verified.ttft_p99_s),
    )


def architecture_output(result: ArchitectureResult) -> outputs.ArchitectureResult:
    """One architecture as `optimize --json` prints it: GPUs, roles, lines, money and verified tails."""
    if result.scenario is None or result.evaluation is None:
        return outputs.ArchitectureResult(
            name=result.name,
            feasible=result.feasible,
            gpus={},
            roles={},
            wan_lines=[],
            wan_gbps=0.0,
            cost_usd_per_hour=None,
            goodput_rps=0.0,
            bcr=None,  # no plan: no benefit-cost ratio (0 would read as a plan that earns nothing)
            ttft_p50_s=None,
            ttft_p90_s=None,
            ttft_p99_s=None,
            infeasibility=result.infeasibility,
        )
    scenario, evaluation, verified = result.scenario, result.evaluation, result.simulation
    closed = evaluation.to_output()
    shown = verified if verified is not None else closed
    wan = scenario_wan(scenario)
    out = outputs.ArchitectureResult(
        name=result.name,
        feasible=result.feasible,
        gpus=scenario.gpus_by_type(),
        roles=scenario_roles(scenario),
        wan_lines=_leases(scenario.plan),
        wan_gbps=wan["gbps"] if wan else 0.0,
        cost_usd_per_hour=evaluation.cost_per_hour,
        goodput_rps=shown.goodput_rps,
        bcr=shown.bcr,
        ttft_p50_s=shown.ttft_p50_s,
        ttft_p90_s=shown.ttft_p90_s,
        ttft_p99_s=shown.ttft_p99_s,
        tpot_p50_s=shown.tpot_p50_s,
        tpot_p90_s=shown.tpot_p90_s,
        tpot_p99_s=shown.tpot_p99_s,
        rld_token_share=shown.rld_token_share,
        link_utilization=shown.link_utilization,
        routing_threshold=result.routing_threshold,
        routing_rule=result.routing_rule,
        handoff_mode=result.handoff_mode,
        verified=verified is not None,
        verification_rounds=result.rounds,
        solves=result.solves,
        evaluated=closed,
        simulated=verified,
        infeasibility=result.infeasibility,
        plan=scenario.plan.model_dump(mode="json", exclude_defaults=False),
    )
    if result.plans is not None and result.top is not None and result.frontier is not None:
        out.plans_compared = len(result.plans)
        out.top = [option_output(o) for o in result.top]
        out.frontier = [
            outputs.FrontierPlan(**option_output(p.option).json_data(), on=list(p.on)) for p in result.frontier
        ]
    return out


def _leases(plan: Plan) -> list[outputs.WanLease]:
    return [outputs.WanLease(option=lease.option, count=lease.count) for lease in plan.wan]


def option_output(option: PlanOption) -> outputs.PlanChoice:
    """One plan `--top` lists: its rank, closed-form figures, and whether the simulation verified
    it (only the chosen plan, rank 1, is simulated)."""
    return outputs.PlanChoice(
        rank=option.rank,
        checked="verified" if option.verified else "closed form",
        found_by=option.found_by,
        cost_usd_per_hour=option.cost_usd_per_hour,
        goodput_rps=option.goodput_rps,
        bcr=option.bcr,
        ttft_p90_s=option.ttft_p90_s,
        ttft_p99_s=option.ttft_p99_s,
        tpot_p90_s=option.tpot_p90_s,
        tpot_p99_s=option.tpot_p99_s,
        gpus=option.gpus,
        roles=option.roles,
        wan_lines=_leases(option.plan),
        routing_rule=option.routing_rule,
        handoff_mode=option.handoff_mode,
        plan=option.plan.model_dump(mode="json", exclude_defaults=False),
    )


def optimize(
    workload: Workload,
    base_dir: Path | None,
    options: OptimizeOptions,
    names: Sequence[ArchitectureName] | None = None,
    progress: Callable[[str], None] | None = None,
) -> OptimizeReport:
    """Optimize each architecture (default: every registered one) under the same SLA and prices.

    The files the workload names are read once, here (see `pddplan.inputs.input_set`)."""
    return optimize_variants([(workload, options)], base_dir, names, progress)[0]


def optimize_variants(
    variants: Sequence[tuple[Workload, OptimizeOptions]],
    base_dir: Path | None,
    names: Sequence[ArchitectureName] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[OptimizeReport]:
    """`optimize` of each (workload, options) variant, their architectures' searches sharing one
    pool of workers (`pddplan.optimize.parallel.optimize_cases`): the same reports as one by one."""
    return optimize_each([(workload, base_dir, options) for workload, options in variants], names, progress)


def optimize_each(
    requests: Sequence[tuple[Workload, Path | None, OptimizeOptions]],
    names: Sequence[ArchitectureName] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[OptimizeReport]:
    """`optimize` of each (workload, the folder its files are named from, options), their
    architectures' searches sharing one pool of workers: the same reports as one by one."""
    chosen = names if names is not None else architectures.names()
    inputs = [load_input_set(workload, base_dir) for workload, base_dir, _ in requests]
    cases = [(loaded, options) for loaded, (_, _, options) in zip(inputs, requests, strict=True)]
    results = optimize_cases(cases, chosen, progress)
    return [
        OptimizeReport(workload=workload, options=options, results=found, widths=instance_widths(loaded))
        for (workload, _, options), loaded, found in zip(requests, inputs, results, strict=True)
    ]
