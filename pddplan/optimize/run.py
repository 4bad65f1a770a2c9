"""`pddplan optimize`: the best plan per architecture, verified, side by side, and PDD's gains."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pddplan import architectures
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.candidates import instance_widths
from pddplan.optimize.frontier import PlanOption
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.parallel import optimize_cases
from pddplan.optimize.search import ArchitectureResult
from pddplan.scenarios.describe import scenario_roles, scenario_wan
from pddplan.specs.plan import ArchitectureName
from pddplan.specs.workload import Workload


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
            return min(self.feasible, key=lambda r: architecture_figures(r)["cost_usd_per_hour"])
        if self.options.mode == "budget":
            return max(self.feasible, key=lambda r: architecture_figures(r)["goodput_rps"])
        return max(self.feasible, key=lambda r: architecture_figures(r)["bcr"])

    def result(self, name: str) -> ArchitectureResult | None:
        return next((r for r in self.results if r.name == name), None)

    def gains(self) -> dict[str, dict[str, float]]:
        """PDD against each baseline with a plan: cost, BCR and TTFT P90/P99 changes (fractions)."""
        subject = self.result(architectures.subject().name)
        if subject is None or not subject.feasible:
            return {}
        mine = architecture_figures(subject)
        out: dict[str, dict[str, float]] = {}
        for other in self.results:
            if other is subject or other.plan is None:
                continue
            theirs = architecture_figures(other)
            out[other.name] = {
                "cost_change": mine["cost_usd_per_hour"] / theirs["cost_usd_per_hour"] - 1,
                "bcr_change": mine["bcr"] / theirs["bcr"] - 1 if theirs["bcr"] > 0 else float("inf"),
                "ttft_p90_change": mine["ttft_p90_s"] / theirs["ttft_p90_s"] - 1,
                "ttft_p99_change": mine["ttft_p99_s"] / theirs["ttft_p99_s"] - 1,
                "baseline_feasible": other.feasible,
            }
        return out

    def disaggregation(self) -> dict[str, Any] | None:
        """Should the workload disaggregate at all: the best co-located plan against the best
        disaggregated one (by the mode's measure, as `best`), with the disaggregated one's cost and
        BCR change over it (None unless both have a feasible plan)."""
        colocated = OptimizeReport(self.workload, self.options, [r for r in self.feasible if _colocated(r)]).best
        split = OptimizeReport(self.workload, self.options, [r for r in self.feasible if not _colocated(r)]).best
        if colocated is None or split is None:
            return None
        mine, theirs = architecture_figures(split), architecture_figures(colocated)
        return {
            "colocated": colocated.name,
            "disaggregated": split.name,
            "winner": (self.best or colocated).name,
            "cost_change": mine["cost_usd_per_hour"] / theirs["cost_usd_per_hour"] - 1,
            "bcr_change": mine["bcr"] / theirs["bcr"] - 1 if theirs["bcr"] > 0 else float("inf"),
        }

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "workload": self.workload.name,
            "mode": self.options.mode,
            "rate_rps": self.options.rate if self.options.mode == "rate" else self.workload.arrival.rate_rps,
            "budget_usd_per_hour": self.options.budget_per_hour,
            "best": best.name if best else None,
            "architectures": [architecture_figures(r) for r in self.results],
            "gains": self.gains(),
            "disaggregation": self.disaggregation(),
            "instance_widths": {"by_gpu": self.widths, "narrowed_by_workload": self.widths_narrowed},
        }


def _colocated(result: ArchitectureResult) -> bool:
    return architectures.get(result.name).colocated


def architecture_figures(result: ArchitectureResult) -> dict[str, Any]:
    """The JSON view of one architecture: GPUs, roles, lines, money and verified tails."""
    out: dict[str, Any] = {"name": result.name, "feasible": result.feasible}
    if result.scenario is None or result.evaluation is None:
        out.update(
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
        return out
    scenario, evaluation = result.scenario, result.evaluation
    verified = result.simulation or {}
    wan = scenario_wan(scenario)
    out.update(
        gpus=scenario.gpus_by_type(),
        roles=scenario_roles(scenario),
        wan_lines=[{"option": lease.option, "count": lease.count} for lease in scenario.plan.wan],
        wan_gbps=wan["gbps"] if wan else 0.0,
        cost_usd_per_hour=evaluation.cost_per_hour,
        goodput_rps=verified.get("goodput_rps", evaluation.goodput_rps),
        bcr=verified.get("bcr", evaluation.bcr),
        ttft_p50_s=verified.get("ttft_p50_s", evaluation.ttft.p50_s),
        ttft_p90_s=verified.get("ttft_p90_s", evaluation.ttft.p90_s),
        ttft_p99_s=verified.get("ttft_p99_s", evaluation.ttft.p99_s),
        tpot_p50_s=verified.get("tpot_p50_s", evaluation.tpot.p50_s),
        tpot_p90_s=verified.get("tpot_p90_s", evaluation.tpot.p90_s),
        tpot_p99_s=verified.get("tpot_p99_s", evaluation.tpot.p99_s),
        rld_token_share=verified.get("rld_token_share", evaluation.rld_token_share),
        link_utilization=verified.get("link_utilization", evaluation.link_utilization),
        routing_threshold=result.routing_threshold,
        routing_rule=result.routing_rule,
        handoff_mode=result.handoff_mode,
        verified=bool(verified),
        verification_rounds=result.rounds,
        solves=result.solves,
        evaluated=evaluation.to_dict(),
        simulated=verified or None,
        infeasibility=result.infeasibility,
        plan=scenario.plan.model_dump(mode="json", exclude_defaults=False),
    )
    if result.plans is not None and result.top is not None and result.frontier is not None:
        out.update(
            plans_compared=len(result.plans),
            top=[option_figures(o) for o in result.top],
            frontier=[option_figures(p.option) | {"on": list(p.on)} for p in result.frontier],
        )
    return out


def option_figures(option: PlanOption) -> dict[str, Any]:
    """The JSON view of one plan `--top` lists: its rank, closed-form figures, and whether the
    simulation verified it (only the chosen plan, rank 1, is simulated)."""
    return {
        "rank": option.rank,
        "checked": "verified" if option.verified else "closed form",
        "found_by": option.found_by,
        "cost_usd_per_hour": option.cost_usd_per_hour,
        "goodput_rps": option.goodput_rps,
        "bcr": option.bcr,
        "ttft_p90_s": option.ttft_p90_s,
        "ttft_p99_s": option.ttft_p99_s,
        "tpot_p90_s": option.tpot_p90_s,
        "tpot_p99_s": option.tpot_p99_s,
        "gpus": option.gpus,
        "roles": option.roles,
        "wan_lines": [{"option": lease.option, "count": lease.count} for lease in option.plan.wan],
        "routing_rule": option.routing_rule,
        "handoff_mode": option.handoff_mode,
        "plan": option.plan.model_dump(mode="json", exclude_defaults=False),
    }


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
    chosen = names if names is not None else architectures.names()
    inputs = [load_input_set(workload, base_dir) for workload, _ in variants]
    cases = [(loaded, options) for loaded, (_, options) in zip(inputs, variants, strict=True)]
    results = optimize_cases(cases, chosen, progress)
    return [
        OptimizeReport(workload=workload, options=options, results=found, widths=instance_widths(loaded))
        for (workload, options), loaded, found in zip(variants, inputs, results, strict=True)
    ]
