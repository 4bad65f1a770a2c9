"""Plans that survive the day (`optimize --robust`): one purchase (GPUs, lines) that meets the
SLA in every required scenario of the workload, at the least cost, with its figures per scenario.

A scenario is the workload with its overrides applied and its hit shifted (`scenario_workloads`).
The search, per architecture:
1. optimize each scenario alone (the steady optimizer); scenario s's best costs C_s;
2. any plan that meets every required scenario costs at least L = max_s C_s over the required
   ones (it meets scenario s, whose cheapest plan costs C_s): a lower bound;
3. candidates: each scenario's plan, evaluated in every required scenario at its own rate (closed
   form); when none meets them all, the plan of the scenario with the highest rate grown greedily
   (as `pddplan.survive` grows: the addition leaving the fewest scenarios unmet, ties to the
   cheapest) until it does;
4. the cheapest candidate that meets every required scenario wins. When its cost equals the lower
   bound L it is optimal (as far as each scenario's own optimum is); otherwise the result says it
   is a heuristic's, with L beside it.
The price of robustness is the winner's cost over the steady plan's (the workload as written).
The objective is cost. The purchase is shared; each scenario makes its own operating decision,
the routing rule (which requests go through PDD's relay), chosen among those the optimizer tries
for that scenario's traffic (`_figures`). Each scenario's goodput and BCR follow, and the
time-weighted BCR is sum_s hours_s goodput_s x 3600 / (sum_s hours_s x cost). Not decided per
scenario: the handoff mode, a served rate below the offered one, idling bought instances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pddplan.errors import InputError
from pddplan.input_set import InputSet, load_input_set
from pddplan.optimize.options import OptimizeOptions
from pddplan.scenario import build_scenario
from pddplan.specs.plan import Plan
from pddplan.specs.workload import TrafficScenario, Workload

MAX_GROWTH = 32


def check_robust(workload: Workload, options: OptimizeOptions) -> None:
    """InputError when `--robust` cannot run: no scenarios, or a rate or budget that would override
    the scenarios' own rates."""
    if not workload.scenarios:
        raise InputError(f"workload {workload.name} has no scenarios: --robust needs `scenarios:` (docs/inputs.md)")
    if options.mode != "bcr" or options.min_served_fraction < 1:
        raise InputError("--robust sizes for each scenario's own rate: leave out --rate, --budget and --min-served")


def scenario_workloads(workload: Workload) -> list[tuple[TrafficScenario, Workload]]:
    """Each scenario's workload: overrides set (dotted paths), hit shifted, validated as a file is."""
    from pddplan.bathtub import with_hit
    from pddplan.loading import validate
    from pddplan.sweep import set_path

    out = []
    for spec in workload.scenarios:
        data = workload.model_dump(mode="json", exclude_none=True)
        data["scenarios"] = []
        for path, value in spec.overrides.items():
            try:
                data = set_path(data, path, value)
            except InputError as error:
                message = str(error).replace("--param ", "")
                raise InputError(f"scenario {spec.name}: overrides: {message}") from None
        changed = validate(Workload, data, f"scenario {spec.name}")
        if spec.hit_shift:
            target = min(max(changed.hit_rate.mean() + spec.hit_shift, 0.0), 1.0)
            changed = changed.model_copy(update=with_hit(changed, target, "shift"))
        out.append((spec, changed))
    return out


@dataclass(frozen=True)
class ScenarioFigures:
    name: str
    hours_per_day: float
    required: bool
    rate_rps: float
    figures: dict[str, Any] | None  # closed form of the robust plan in this scenario

    @property
    def met(self) -> bool:
        f = self.figures
        return bool(f and f["sla_met"] and f["goodput_rps"] >= self.rate_rps * (1 - 1e-9))


@dataclass(frozen=True)
class RobustResult:
    architecture: str
    plan: Plan | None
    cost_usd_per_hour: float | None
    lower_bound_usd_per_hour: float | None
    at_lower_bound: bool
    steady_cost_usd_per_hour: float | None
    scenarios: list[ScenarioFigures] = field(default_factory=list)
    note: str = ""

    @property
    def price_of_robustness(self) -> float | None:
        if self.cost_usd_per_hour is None or not self.steady_cost_usd_per_hour:
            return None
        return self.cost_usd_per_hour / self.steady_cost_usd_per_hour - 1.0

    @property
    def time_weighted_bcr(self) -> float | None:
        if self.cost_usd_per_hour is None or not self.scenarios:
            return None
        hours = sum(s.hours_per_day for s in self.scenarios)
        served = sum(s.hours_per_day * (s.figures["goodput_rps"] if s.figures else 0.0) for s in self.scenarios)
        return served * 3600 / (hours * self.cost_usd_per_hour)

    def to_dict(self) -> dict[str, Any]:
        return {
            "architecture": self.architecture,
            "feasible": self.plan is not None,
            "cost_usd_per_hour": self.cost_usd_per_hour,
            "lower_bound_usd_per_hour": self.lower_bound_usd_per_hour,
            "at_lower_bound": self.at_lower_bound,
            "steady_cost_usd_per_hour": self.steady_cost_usd_per_hour,
            "price_of_robustness": self.price_of_robustness,
            "time_weighted_bcr": self.time_weighted_bcr,
            "scenarios": [
                {
                    "name": s.name,
                    "hours_per_day": s.hours_per_day,
                    "required": s.required,
                    "rate_rps": s.rate_rps,
                    "sla_met": s.met,
                    "goodput_rps": s.figures["goodput_rps"] if s.figures else 0.0,
                    "ttft_p90_s": s.figures["ttft_p90_s"] if s.figures else None,
                    "ttft_p99_s": s.figures["ttft_p99_s"] if s.figures else None,
                    "bcr": s.figures["bcr"] if s.figures else None,
                    "routing_rule": s.figures.get("routing_rule") if s.figures else None,
                }
                for s in self.scenarios
            ],
            "plan": self.plan.model_dump(mode="json") if self.plan is not None else None,
            "note": self.note,
        }


def _figures(inputs: InputSet, plan: Plan) -> dict[str, Any] | None:
    """The plan's closed form in the scenario of `inputs`, at that scenario's rate (not a rate the
    plan carries from being optimized for another), with the scenario's own operating decision:
    of the routing rules the optimizer tries for this scenario's traffic (the plan's own among
    them), the one that meets the SLA at the whole rate with the lowest TTFT P99, else the plan's."""
    from pddplan import architectures
    from pddplan.evaluate.analytic import evaluate
    from pddplan.optimize.search import rule_text

    base = plan.model_copy(update={"rate_rps": None})
    rules = [base.routing] + [
        r for r in architectures.get(plan.architecture).routings(inputs.workload) if r is not None
    ]
    best: dict[str, Any] | None = None
    for rule in dict.fromkeys(rules):  # in order, each rule once
        try:
            figures = evaluate(build_scenario(base.model_copy(update={"routing": rule}), inputs, source="robust"))
        except InputError:  # the plan does not fit this scenario's deployment (inventory, a line option)
            return None
        out = figures.to_dict() | {
            "routing_rule": rule_text(rule) if architectures.get(plan.architecture).has_relay else None
        }
        if best is None:
            best = out  # the plan's own rule: the fallback
        if _meets(out, inputs) and (not _meets(best, inputs) or out["ttft_p99_s"] < best["ttft_p99_s"]):
            best = out
    return best


def _meets(figures: dict[str, Any], inputs: InputSet) -> bool:
    rate = inputs.workload.arrival.rate_rps
    return bool(figures["sla_met"] and figures["goodput_rps"] >= rate * (1 - 1e-9))


def _unmet(plan: Plan, cases: list[tuple[TrafficScenario, InputSet]]) -> list[str]:
    out = []
    for spec, inputs in cases:
        if not spec.required:
            continue
        figures = _figures(inputs, plan)
        if not (figures and _meets(figures, inputs)):
            out.append(spec.name)
    return out


def _grow(plan: Plan, cases: list[tuple[TrafficScenario, InputSet]], inputs: InputSet) -> Plan | None:
    """Greedy growth until every required scenario is met (module docstring), or None."""
    from pddplan.survive import growths

    unmet = _unmet(plan, cases)
    for _ in range(MAX_GROWTH):
        if not unmet:
            return plan
        options = []
        for _label, grown, cost in growths(inputs, plan):
            options.append((len(_unmet(grown, cases)), cost, grown))
        if not options:
            return None
        _, _, plan = min(options, key=lambda o: (o[0], o[1]))
        unmet = _unmet(plan, cases)
    return plan if not unmet else None


def robust_optimize(
    workload: Workload,
    base_dir: Path | None,
    options: OptimizeOptions,
    architectures: list[str],
    progress: Any = None,
) -> list[RobustResult]:
    """One robust plan per architecture (module docstring)."""
    from pddplan.optimize.run import optimize

    check_robust(workload, options)
    pairs = scenario_workloads(workload)
    cases = [(spec, load_input_set(w, base_dir)) for spec, w in pairs]
    if progress:
        progress("optimizing the workload as written")
    steady = optimize(workload, base_dir, options, architectures)
    per_scenario = []
    for spec, w in pairs:
        if progress:
            progress(f"optimizing scenario {spec.name}")
        per_scenario.append((spec, optimize(w, base_dir, options, architectures)))
    home = load_input_set(workload, base_dir)
    results = []
    for arch in architectures:
        steady_result = steady.result(arch)
        steady_cost = steady_result.scenario.cost_per_hour if steady_result and steady_result.scenario else None
        plans: list[tuple[TrafficScenario | None, Plan]] = []
        bound = 0.0
        for spec, report in per_scenario:
            result = report.result(arch)
            if result is None or result.plan is None or result.scenario is None:
                if spec.required:
                    bound = float("inf")
                continue
            plans.append((spec, result.plan))
            if spec.required:
                bound = max(bound, result.scenario.cost_per_hour)
        if steady_result is not None and steady_result.plan is not None:
            plans.append((None, steady_result.plan))
        candidates = [plan for _, plan in plans if not _unmet(plan, cases)]
        note = ""
        if not candidates and plans:
            peak = max(pairs, key=lambda p: p[1].arrival.rate_rps)[0].name
            start = next((plan for spec, plan in plans if spec is not None and spec.name == peak), plans[0][1])
            grown = _grow(start, cases, home)
            if grown is not None:
                candidates = [grown]
                note = f"grown greedily from scenario {peak}'s plan"
        if not candidates:
            results.append(
                RobustResult(
                    arch,
                    None,
                    None,
                    None if bound == float("inf") else bound,
                    False,
                    steady_cost,
                    note="no plan meets every required scenario",
                )
            )
            continue
        priced = [(build_scenario(p, home, source="robust").cost_per_hour, p) for p in candidates]
        cost, plan = min(priced, key=lambda item: item[0])
        figures = [
            ScenarioFigures(
                spec.name, spec.hours_per_day, spec.required, inputs.workload.arrival.rate_rps, _figures(inputs, plan)
            )
            for spec, inputs in cases
        ]
        at_bound = bound != float("inf") and cost <= bound * (1 + 1e-9)
        results.append(
            RobustResult(
                arch, plan, cost, bound if bound != float("inf") else None, at_bound, steady_cost, figures, note
            )
        )
    return results
