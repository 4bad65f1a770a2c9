"""N+1: grow a plan until it meets its SLA after any single failure (`pddplan survive`).

Failures considered: one instance of each role the plan has (`instance`), and one leased line of
each WAN option (`line`), each degraded as `pddplan.analyses.whatif` models it. A failure survives when the
degraded deployment serves the whole offered rate within the SLA (closed form), or within a
degraded SLA: `degraded_sla` = k multiplies every target (TTFT P90, P99, TPOT P90) after a
failure, the SLA an operator may promise for the hours a part is down (k = 1: the full SLA).

The growth is greedy: while some failure does not survive, every single addition is tried (one
more instance of a role, one more line of a leased option, within the workload's inventory and
line limits) and the one that leaves the fewest failures unsurvived wins, ties to the cheapest.
Greedy is not optimal: the result is a plan that survives, and its price, not the cheapest such
plan; the price of N+1 is its cost over the plan's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from pddplan.errors import InfeasibleError, InputError
from pddplan.evaluate.analytic import evaluate
from pddplan.evaluate.capacity_view import rebalanced
from pddplan.inputs import load_plan
from pddplan.inputs.input_set import InputSet
from pddplan.optimize import outputs
from pddplan.scenarios.failures import Change, apply
from pddplan.scenarios.files import workload_inputs
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.specs.plan import Plan
from pddplan.support.loading import write_atomic

KINDS = ("instance", "line")
MAX_STEPS = 64
MAX_STALLED = 3


@dataclass(frozen=True)
class Survival:
    """The grown plan, what was added, and each failure's verdict on it."""

    plan: Plan
    original_cost_usd_per_hour: float
    cost_usd_per_hour: float
    added: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # failure -> mode, on the grown plan
    degraded_sla: float = 1.0  # the SLA's targets after a failure, as a multiple of the full SLA's

    @property
    def price_of_survival(self) -> float:
        """Extra cost over the original plan, as a share of it."""
        return self.cost_usd_per_hour / self.original_cost_usd_per_hour - 1.0

    def to_output(self) -> outputs.Survive:
        """The typed result `survive --json` prints."""
        return outputs.Survive(
            original_cost_usd_per_hour=self.original_cost_usd_per_hour,
            cost_usd_per_hour=self.cost_usd_per_hour,
            price_of_survival=self.price_of_survival,
            degraded_sla=self.degraded_sla,
            added=self.added,
            failures=[outputs.FailureMode(failure=k, mode=v) for k, v in self.failures.items()],
            plan=self.plan.model_dump(mode="json"),
        )


def failures_of(plan: Plan, kinds: set[str]) -> list[str]:
    """The single failures `kinds` name, for this plan's roles and leased lines."""
    out = []
    if "instance" in kinds:
        out += [f"instance:{role}" for role, spec in plan.roles().items() if spec.count > 0]
    if "line" in kinds:
        out += [f"line:{lease.option}" for lease in plan.wan]
    return out


def check_degraded_sla(factor: float) -> None:
    """InputError unless 1 <= factor <= 100 (a degraded SLA relaxes the targets, never tightens them)."""
    if not (math.isfinite(factor) and 1.0 <= factor <= 100.0):
        raise InputError(f"--degraded-sla = {factor:g}: expected a factor from 1 (the full SLA) to 100")


def relaxed(scenario: Scenario, factor: float) -> Scenario:
    """`scenario` with every SLA target multiplied by `factor`."""
    if factor == 1.0:
        return scenario
    looser = scenario.workload.sla.scaled(factor)
    return replace(scenario, workload=scenario.workload.model_copy(update={"sla": looser}))


def survives(inputs: InputSet, scenario: Scenario, failure: str, degraded_sla: float = 1.0) -> tuple[bool, str]:
    """Whether the deployment still serves its whole rate within the SLA (its targets times
    `degraded_sla`) after `failure`."""

    changed, rate, mode = apply(inputs, scenario, Change(fail=failure))
    if changed is None:
        return False, mode
    changed, moved = rebalanced(changed)  # a split plan's router moves requests off the pool that lost one
    mode = f"{mode}; {moved}" if moved else mode
    figures = evaluate(relaxed(changed, degraded_sla), rate)
    return bool(figures.sla_met and figures.goodput_rps >= rate * (1 - 1e-9)), mode


def _unsurvived(inputs: InputSet, plan: Plan, kinds: set[str], degraded_sla: float) -> list[str]:
    scenario = build_scenario(plan, inputs, source="survive")
    return [f for f in failures_of(plan, kinds) if not survives(inputs, scenario, f, degraded_sla)[0]]


def growths(inputs: InputSet, plan: Plan) -> list[tuple[str, Plan, float]]:
    """Every plan one addition larger that the workload's inventory and line limits allow, with
    what was added and its cost in $/h."""
    out = []
    for role, spec in plan.roles().items():
        grown = plan.with_count(role, spec.count + 1)
        out.append((f"+1 {role} instance ({spec.gpus_per_instance} x {spec.gpu})", grown))
    limits = {line.name: line.max_lines for line in inputs.workload.deployment.wan_lines}
    for i, lease in enumerate(plan.wan):
        if lease.count < limits.get(lease.option, 0):
            leases = list(plan.wan)
            leases[i] = lease.model_copy(update={"count": lease.count + 1})
            out.append((f"+1 {lease.option} line", plan.model_copy(update={"wan": leases})))
    valid = []
    for label, grown in out:
        try:
            valid.append((label, grown, build_scenario(grown, inputs, source="survive").cost_per_hour))
        except InputError:  # over the datacenter's inventory
            continue
    return valid


def survive_kinds(text: str | None) -> frozenset[str] | None:
    """`--survive instance,line` (or `both`) as a set of failure kinds (None: no N+1)."""
    if text is None:
        return None
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    if kinds == {"both"}:
        kinds = frozenset(KINDS)
    if not kinds or kinds - set(KINDS):
        raise InputError(f"--survive = {text!r}: expected instance, line or both")
    return kinds


def survive(inputs: InputSet, plan: Plan, kinds: set[str], degraded_sla: float = 1.0) -> Survival:
    """`plan` grown until every failure of `kinds` survives within the SLA times `degraded_sla`
    (module docstring); InfeasibleError when no addition helps or the inventory runs out first."""
    unknown = kinds - set(KINDS)
    if unknown or not kinds:
        raise InputError(f"--survive = {','.join(sorted(kinds)) or '(nothing)'}: expected instance, line or both")
    check_degraded_sla(degraded_sla)
    original = build_scenario(plan, inputs, source="survive").cost_per_hour
    added: list[str] = []
    left = _unsurvived(inputs, plan, kinds, degraded_sla)
    stalled = 0  # additions in a row that fixed no failure (two may be needed together)
    for _ in range(MAX_STEPS):
        if not left or stalled > MAX_STALLED:
            break
        options = []
        for label, grown, cost in growths(inputs, plan):
            options.append((len(_unsurvived(inputs, grown, kinds, degraded_sla)), cost, label, grown))
        if not options:
            raise InfeasibleError(f"cannot survive {', '.join(left)}: the inventory and line limits allow no more")
        best_left, _, label, grown = min(options, key=lambda o: (o[0], o[1]))
        stalled = stalled + 1 if best_left >= len(left) else 0
        plan, left = grown, _unsurvived(inputs, grown, kinds, degraded_sla)
        added.append(label)
    if left:
        raise InfeasibleError(f"after {len(added)} additions, {', '.join(left)} still breaks the SLA")
    final = build_scenario(plan, inputs, source="survive")
    modes = {f: survives(inputs, final, f, degraded_sla)[1] for f in failures_of(plan, kinds)}
    return Survival(plan, original, final.cost_per_hour, added, modes, degraded_sla)


@dataclass(frozen=True)
class SurviveFlags:
    """Every option of `pddplan survive`, by the command's parameter names; the degraded SLA is
    checked when the flags are made, the failure kinds by `survive`."""

    plan: str
    workload: str
    kinds: str = "instance,line"
    output_path: Path | None = None
    degraded_sla: float = 1.0
    json_out: bool = False

    def __post_init__(self) -> None:
        """InputError for a degraded SLA factor out of bounds (`check_degraded_sla`)."""
        check_degraded_sla(self.degraded_sla)

    def run(self, progress: Callable[[str], None] | None = None) -> Survival:
        """The plan grown to survive every single failure of the comma-separated `kinds`
        (`survive`), on the workload's inputs."""
        inputs = workload_inputs(self.workload)
        if progress is not None:
            progress("checking every single failure...")
        kinds = survive_kinds(self.kinds) or frozenset()
        return survive(inputs, load_plan(self.plan), set(kinds), self.degraded_sla)

    def write_plan(self, result: Survival) -> Path | None:
        """Write the grown plan to `output_path` (YAML, under a comment saying what it was grown
        from and how), atomically; the path written, or None without one."""
        if self.output_path is None:
            return None
        grown_by = f"`pddplan survive --survive {self.kinds}`"
        header = f"# {Path(self.plan).name} grown by {grown_by} to survive any single failure.\n"
        write_atomic(self.output_path, header + yaml.safe_dump(result.plan.model_dump(mode="json"), sort_keys=False))
        return self.output_path
