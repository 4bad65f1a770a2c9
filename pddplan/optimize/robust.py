"""Plans that survive the day (`optimize --robust`): one purchase (GPUs, lines) that meets the
SLA in every required scenario of the workload, at the least cost, with its figures per scenario.

A scenario is the workload with its overrides applied and its hit shifted (`scenario_workloads`).
The search, per architecture:
1. optimize each scenario alone (the steady optimizer); scenario s's best costs C_s;
2. any plan that meets every required scenario costs at least L = max_s C_s over the required
   ones (it meets scenario s, whose cheapest plan costs C_s): a lower bound;
3. candidates, each checked in every required scenario at its own rate (closed form):
   - each scenario's plan;
   - the joint program's purchase (`pddplan.optimize.joint`: one integer program over every
     required scenario, the purchase shared, each scenario's capacities with the routing rule of
     its own optimum), grown greedily when the closed form finds it short and trimmed when it
     finds an instance to spare (the program's capacities are linear, as the steady program's
     are, and conservative where the closed form is not: the steady search trims too);
   - when none of these meets them all, the plan of the scenario with the highest rate grown
     greedily (as `pddplan.optimize.survive` grows: the addition leaving the fewest scenarios unmet, ties
     to the cheapest) until it does;
4. the cheapest candidate that meets every required scenario wins, and the note says which it
   is. When its cost equals the lower bound L it is optimal (as far as each scenario's own optimum
   is); otherwise L is shown beside it.
The price of robustness is the winner's cost over the steady plan's (the workload as written).
The objective is cost. The purchase is shared; each scenario makes its own operating decisions
(`_operate`):
- the routing rule (which requests go through PDD's relay) and the handoff mode, chosen among
  those the optimizer tries for that scenario's traffic: of the pairs that meet the SLA at the
  whole rate, the lowest TTFT P99;
- the served rate: the whole offered rate where some pair meets the SLA, else (a scenario whose
  SLA is not required) the most the plan serves within it with its own rule and mode, the rest shed;
- the active instances: the fewest of the bought ones, role by role (decode, relay, prefill), that
  still meet the scenario; the others may idle. `elastic_cost_usd_per_hour` is what the day costs
  per hour when idle instances cost nothing (GPUs rented by the hour and released):
  sum_s hours_s x active cost_s / sum_s hours_s.
Each scenario's goodput and BCR follow, and the time-weighted BCR is
sum_s hours_s goodput_s x 3600 / (sum_s hours_s x cost).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pddplan import architectures
from pddplan.errors import InputError
from pddplan.evaluate.analytic import Evaluation, evaluate
from pddplan.inputs.input_set import InputSet, load_input_set
from pddplan.optimize.joint import JointCase, joint_purchase
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.outputs import RobustArchitecture, RobustScenario
from pddplan.optimize.parallel import longest_first
from pddplan.optimize.run import optimize_variants
from pddplan.optimize.search import rule_text
from pddplan.optimize.survive import growths
from pddplan.scenarios.scenario import build_scenario
from pddplan.scenarios.variants import scenario_workloads
from pddplan.simulate.sequential import verify
from pddplan.specs.plan import Plan
from pddplan.specs.workload import TrafficScenario, Workload
from pddplan.support.forking import map_forked, worker_count

MAX_GROWTH = 32


def check_robust(workload: Workload, options: OptimizeOptions) -> None:
    """InputError when `--robust` cannot run: no scenarios, or a rate or budget that would override
    the scenarios' own rates."""
    if not workload.scenarios:
        raise InputError(f"workload {workload.name} has no scenarios: --robust needs `scenarios:` (docs/inputs.md)")
    if options.mode != "bcr" or options.min_served_fraction < 1:
        raise InputError("--robust sizes for each scenario's own rate: leave out --rate, --budget and --min-served")


@dataclass(frozen=True)
class Operated:
    """A plan's closed form in one scenario, with the routing rule and handoff mode it runs (None
    without a relay) and the rate it serves."""

    evaluation: Evaluation
    routing_rule: str | None
    handoff_mode: str | None
    served_rps: float


@dataclass(frozen=True)
class ScenarioFigures:
    name: str
    hours_per_day: float
    required: bool
    rate_rps: float
    figures: Operated | None  # closed form of the robust plan in this scenario
    active: Plan | None = None  # the bought instances this scenario keeps busy (`_active`)
    active_cost_usd_per_hour: float | None = None

    @property
    def met(self) -> bool:
        f = self.figures
        return bool(f and f.evaluation.sla_met and f.evaluation.goodput_rps >= self.rate_rps * (1 - 1e-9))


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
    def elastic_cost_usd_per_hour(self) -> float | None:
        """The day's mean cost per hour when idle instances cost nothing (module docstring)."""
        if self.cost_usd_per_hour is None or not self.scenarios:
            return None
        hours = sum(s.hours_per_day for s in self.scenarios)
        spent = sum(
            s.hours_per_day
            * (s.active_cost_usd_per_hour if s.active_cost_usd_per_hour is not None else self.cost_usd_per_hour)
            for s in self.scenarios
        )
        return spent / hours

    @property
    def time_weighted_bcr(self) -> float | None:
        if self.cost_usd_per_hour is None or not self.scenarios:
            return None
        hours = sum(s.hours_per_day for s in self.scenarios)
        served = sum(s.hours_per_day * (s.figures.evaluation.goodput_rps if s.figures else 0.0) for s in self.scenarios)
        return served * 3600 / (hours * self.cost_usd_per_hour)

    def to_output(self) -> RobustArchitecture:
        """The typed result `optimize --robust --json` prints per architecture."""
        return RobustArchitecture(
            architecture=self.architecture,
            feasible=self.plan is not None,
            cost_usd_per_hour=self.cost_usd_per_hour,
            lower_bound_usd_per_hour=self.lower_bound_usd_per_hour,
            at_lower_bound=self.at_lower_bound,
            steady_cost_usd_per_hour=self.steady_cost_usd_per_hour,
            price_of_robustness=self.price_of_robustness,
            time_weighted_bcr=self.time_weighted_bcr,
            elastic_cost_usd_per_hour=self.elastic_cost_usd_per_hour,
            scenarios=[_scenario_output(s) for s in self.scenarios],
            plan=self.plan.model_dump(mode="json") if self.plan is not None else None,
            note=self.note,
        )


def _scenario_output(s: ScenarioFigures) -> RobustScenario:
    f = s.figures
    return RobustScenario(
        name=s.name,
        hours_per_day=s.hours_per_day,
        required=s.required,
        rate_rps=s.rate_rps,
        sla_met=s.met,
        goodput_rps=f.evaluation.goodput_rps if f else 0.0,
        ttft_p90_s=f.evaluation.ttft.p90_s if f else None,
        ttft_p99_s=f.evaluation.ttft.p99_s if f else None,
        bcr=f.evaluation.bcr if f else None,
        routing_rule=f.routing_rule if f else None,
        handoff_mode=f.handoff_mode if f else None,
        served_rps=f.served_rps if f else 0.0,
        active_gpus=_gpus(s.active) if s.active is not None else None,
        active_cost_usd_per_hour=s.active_cost_usd_per_hour,
    )


def _gpus(plan: Plan) -> int:
    return sum(spec.gpus for spec in plan.roles().values())


def _operate(inputs: InputSet, plan: Plan, first_met: bool = False) -> tuple[Plan, Operated] | None:
    """The scenario's operating decision for the purchase `plan` and its closed form, at that
    scenario's rate (not a rate the plan carries from being optimized for another). First the
    routing rule, among those the optimizer tries (the plan's own first) with the plan's handoff
    mode; then, on that rule, the handoff mode: each time the choice that meets the SLA at the whole
    rate with the lowest TTFT P99 (`first_met`: the first that meets, enough to know it can be).
    When none meets, the plan's own rule and mode at the most it serves within the SLA (module
    docstring). None when the plan does not fit the scenario's deployment."""

    arch = architectures.get(plan.architecture)
    base = plan.model_copy(update={"rate_rps": None})
    rules = dict.fromkeys([base.routing] + [r for r in arch.routings(inputs.workload) if r is not None])
    modes = dict.fromkeys([base.handoff.mode, *arch.handoff_modes()])
    best: tuple[Plan, Operated] | None = None
    choices = [base.model_copy(update={"routing": rule}) for rule in rules]
    for stage in ("rule", "mode"):
        if stage == "mode":  # on the chosen rule, the other handoff modes
            assert best is not None
            chosen = best[0]
            choices = [
                chosen.model_copy(update={"handoff": chosen.handoff.model_copy(update={"mode": mode})})
                for mode in list(modes)[1:]
            ]
        for operated in choices:
            out = _evaluated(inputs, operated)
            if out is None:  # the plan does not fit this scenario's deployment (inventory, a line option)
                return None
            if best is None:
                best = operated, out  # the plan's own rule and mode: the fallback
            if _meets(out, inputs) and (
                not _meets(best[1], inputs) or out.evaluation.ttft.p99_s < best[1].evaluation.ttft.p99_s
            ):
                best = operated, out
                if first_met:
                    return best
    if best is not None and not first_met and not _meets(best[1], inputs):
        served = _most_served(inputs, base)
        if served is not None:
            best = base, served
    return best


def _evaluated(inputs: InputSet, plan: Plan, rate_rps: float | None = None) -> Operated | None:
    """The closed form of `plan` at `rate_rps` (default: the scenario's), with its rule, mode and
    served rate; None when it does not fit the scenario's deployment."""

    try:
        scenario = build_scenario(plan, inputs, source="robust")
    except InputError:
        return None
    rate = inputs.workload.arrival.rate_rps if rate_rps is None else rate_rps
    relay = architectures.get(plan.architecture).has_relay
    return Operated(
        evaluate(scenario, rate),
        routing_rule=rule_text(plan.routing) if relay else None,
        handoff_mode=plan.handoff.mode if relay else None,
        served_rps=rate,
    )


#: bisection steps of the most a plan serves within the SLA: to 2^-12 of the offered rate
SERVED_RATE_STEPS = 12


def _most_served(inputs: InputSet, plan: Plan) -> Operated | None:
    """The closed form at the largest rate <= the scenario's at which `plan` meets the SLA (the rest
    shed), by bisection; None when even the least rate tried misses it."""
    low, high, best = 0.0, inputs.workload.arrival.rate_rps, None
    for _ in range(SERVED_RATE_STEPS):
        rate = (low + high) / 2
        out = _evaluated(inputs, plan, rate)
        if out is not None and out.evaluation.sla_met:
            low, best = rate, out
        else:
            high = rate
    return best


def _active(inputs: InputSet, operated: Plan) -> Plan:
    """The fewest of the operated plan's instances that still meet the scenario: each role lowered
    one instance at a time (decode, relay, prefill, a split's second pool) while the closed form says
    it does."""
    for role in ("decode", "relay", "prefill", "split"):
        while (spec := getattr(operated, role)) is not None and spec.count > 1:
            smaller = operated.with_count(role, spec.count - 1)
            out = _evaluated(inputs, smaller)
            if out is None or not _meets(out, inputs):
                break
            operated = smaller
    return operated


def _scenario_figures(spec: TrafficScenario, inputs: InputSet, plan: Plan) -> ScenarioFigures:
    """The purchase `plan` in one scenario: its operating decision, figures and active instances."""
    rate = inputs.workload.arrival.rate_rps
    operated = _operate(inputs, plan)
    if operated is None:
        return ScenarioFigures(spec.name, spec.hours_per_day, spec.required, rate, None)
    chosen, figures = operated
    if not _meets(figures, inputs):
        return ScenarioFigures(spec.name, spec.hours_per_day, spec.required, rate, figures)
    active = _active(inputs, chosen)
    cost = build_scenario(active, inputs, source="robust").cost_per_hour
    return ScenarioFigures(spec.name, spec.hours_per_day, spec.required, rate, figures, active, cost)


def _meets(figures: Operated, inputs: InputSet) -> bool:
    rate = inputs.workload.arrival.rate_rps
    return bool(figures.evaluation.sla_met and figures.evaluation.goodput_rps >= rate * (1 - 1e-9))


def _unmet(plan: Plan, cases: list[tuple[TrafficScenario, InputSet]]) -> list[str]:
    out = []
    for spec, inputs in cases:
        if not spec.required:
            continue
        operated = _operate(inputs, plan, first_met=True)
        if not (operated and _meets(operated[1], inputs)):
            out.append(spec.name)
    return out


def _grow(plan: Plan, cases: list[tuple[TrafficScenario, InputSet]], inputs: InputSet) -> Plan | None:
    """Greedy growth until every required scenario is met (module docstring), or None."""

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


def _trimmed(plan: Plan, cases: list[tuple[TrafficScenario, InputSet]]) -> Plan:
    """`plan` with each role's count lowered one instance at a time, decode, relay, prefill, then a
    split's second pool, as
    long as every required scenario is still met in closed form (`pddplan.optimize.search._trimmed`
    does the same to the steady program's pick)."""

    for role in ("decode", "relay", "prefill", "split"):
        while (spec := getattr(plan, role)) is not None and spec.count > 1:
            smaller = plan.with_count(role, spec.count - 1)
            if _unmet(smaller, cases):
                break
            plan = smaller
    return plan


def _verified(plan: Plan, cases: list[tuple[TrafficScenario, InputSet]], options: OptimizeOptions) -> bool:
    """Whether `plan`, operated as each required scenario chooses (`_operate`), meets that scenario's
    SLA in simulation too (`pddplan.simulate.sequential.verify`, as the steady optimizer checks)."""

    for spec, inputs in cases:
        if not spec.required:
            continue
        operated = _operate(inputs, plan)
        if operated is None or not _meets(operated[1], inputs):
            return False
        scenario = build_scenario(operated[0], inputs, source="robust")
        if not verify(scenario, options.verify_requests, options.seed, options.early_stop).summary.sla_met:
            return False
    return True


def _joint_candidates(
    arch: str,
    per_scenario: list[tuple[TrafficScenario, Any]],
    cases: list[tuple[TrafficScenario, InputSet]],
    home: InputSet,
    options: OptimizeOptions,
) -> list[tuple[Plan, str]]:
    """The joint program's purchase (`pddplan.optimize.joint`, each required scenario with the
    routing rule of its own optimum) if it meets every required scenario in closed form, and that
    purchase trimmed (`_trimmed`) when the closed form needs less of it; else the purchase grown
    greedily until it does; none when the program cannot be built or solved."""

    joint_cases = []
    for (spec, report), (_, inputs) in zip(per_scenario, cases, strict=True):
        result = report.result(arch)
        if spec.required:
            joint_cases.append(JointCase(inputs, result.plan.routing if result and result.plan else None))
    if not joint_cases:
        return []
    plan = joint_purchase(joint_cases, arch, options)
    if plan is None:
        return []
    plan = plan.model_copy(update={"name": f"{home.workload.name}-{arch}-robust", "rate_rps": None})
    if not _unmet(plan, cases):
        trimmed = _trimmed(plan, cases)
        if trimmed == plan:
            return [(plan, "the joint program's purchase")]
        # the untrimmed purchase stays a candidate: the trimmed one may fail its simulations
        return [(trimmed, "the joint program's purchase, trimmed"), (plan, "the joint program's purchase")]
    grown = _grow(plan, cases, home)
    return [(grown, "grown greedily from the joint program's purchase")] if grown is not None else []


def robust_optimize(
    workload: Workload,
    base_dir: Path | None,
    options: OptimizeOptions,
    architectures: list[str],
    progress: Any = None,
) -> list[RobustResult]:
    """One robust plan per architecture (module docstring)."""

    check_robust(workload, options)
    pairs = scenario_workloads(workload)
    cases = [(spec, load_input_set(w, base_dir)) for spec, w in pairs]
    if progress:
        progress(f"optimizing the workload as written and its scenarios {', '.join(spec.name for spec, _ in pairs)}")
    # every (variant, architecture) search one task of the same pool: the same reports as one by one
    steady, *reports = optimize_variants(
        [(workload, options)] + [(w, options) for _, w in pairs], base_dir, architectures, progress
    )
    per_scenario = [(spec, report) for (spec, _), report in zip(pairs, reports, strict=True)]
    home = load_input_set(workload, base_dir)
    # each architecture's purchase is independent of the others': side by side on forked workers
    # (up to `jobs`), the longest first
    order = longest_first(architectures)
    if progress:
        progress(f"choosing each architecture's purchase: {', '.join(architectures[i] for i in order)}")
    chosen = map_forked(
        lambda i: _robust_plan(architectures[i], steady, per_scenario, cases, (home, options)),
        order,
        worker_count(options.jobs, len(order)),
    )
    by_index = dict(zip(order, chosen, strict=True))
    return [by_index[i] for i in range(len(architectures))]


def _robust_plan(
    arch: str,
    steady: Any,
    per_scenario: list[tuple[TrafficScenario, Any]],
    cases: list[tuple[TrafficScenario, InputSet]],
    context: tuple[InputSet, OptimizeOptions],
) -> RobustResult:
    """One architecture's robust purchase: its candidates (module docstring), the cheapest that
    meets every required scenario (in simulation too when optimize verifies)."""
    home, options = context
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
    candidates = [(plan, "") for _, plan in plans if not _unmet(plan, cases)]
    if bound != float("inf"):
        candidates += _joint_candidates(arch, per_scenario, cases, home, options)
    if not candidates and plans:
        peak = max(cases, key=lambda case: case[1].workload.arrival.rate_rps)[0].name
        start = next((plan for spec, plan in plans if spec is not None and spec.name == peak), plans[0][1])
        grown = _grow(start, cases, home)
        if grown is not None:
            candidates = [(grown, f"grown greedily from scenario {peak}'s plan")]
    known_bound = None if bound == float("inf") else bound
    if not candidates:
        return RobustResult(
            arch, None, None, known_bound, False, steady_cost, note="no plan meets every required scenario"
        )
    priced = sorted((build_scenario(p, home, source="robust").cost_per_hour, i) for i, (p, _) in enumerate(candidates))
    chosen = next(
        ((cost, i) for cost, i in priced if not options.verify or _verified(candidates[i][0], cases, options)), None
    )
    if chosen is None:
        why = "no candidate that meets every required scenario in closed form passes its simulations"
        return RobustResult(arch, None, None, known_bound, False, steady_cost, note=why)
    cost, best = chosen
    plan, note = candidates[best]
    figures = [_scenario_figures(spec, inputs, plan) for spec, inputs in cases]
    if cost < bound * (1 - 1e-9):
        # a scenario's own search returned a dearer plan than this one, which meets it too: that
        # search missed its optimum, so its cost bounds nothing
        note = (note + "; " if note else "") + (
            f"cheaper than a scenario's own optimum (${bound:,.2f}/h, which its search missed): no lower bound"
        )
        bound = float("inf")
    at_bound = bound != float("inf") and cost <= bound * (1 + 1e-9)
    return RobustResult(
        arch, plan, cost, bound if bound != float("inf") else None, at_bound, steady_cost, figures, note
    )
