"""`pddplan whatif`: a plan's figures under one change, beside its figures as planned.

Changes (any combination):
- rate: `x1.5` (a factor of the plan's rate) or `6` (requests/s);
- hit shift: the mean prefix hit moved by a signed amount, the distribution shifted as the
  bathtub's `shift` mode moves it (`bathtub.with_hit`), clipped to [0, 1];
- one failure:
  - `line:OPTION`: one leased line of that WAN option fails. With lines left, the pool shrinks.
    With none left the datacenters are cut apart: the main decoders are unreachable, so PDD's
    dedicated relay instances decode every request to the end in datacenter A (the plan becomes
    intra-datacenter PD with the relay instances as its decoders); a relay on the prefill
    instances, pd-cross and pd-hetero's remote decoders have nothing to fall back to, and all
    traffic is shed (goodput 0), which the result says;
  - `instance:ROLE` (prefill, relay or decode): one instance of that role fails. A role left with
    none: no prefill or no decoder sheds everything, except PDD's main decoders, whose requests
    the relay then finishes as above; no relay means every request goes P -> MD (threshold 0; the
    failed relay's GPUs are still paid for).
The figures come from the closed form and, with `simulate`, from the simulator too; cost is the
purchase's (what failed is still paid for), so BCR falls with what is no longer served. What happens
while queues drain after a failure (the transient) is not modelled: these are the steady figures
of the degraded deployment.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from pddplan.errors import InputError
from pddplan.input_set import InputSet
from pddplan.scenario import Scenario, build_scenario

ROLES = ("prefill", "relay", "decode")


@dataclass(frozen=True)
class Change:
    """What changes: a rate (factor or absolute), a hit shift, a failure ("line:NAME" or "instance:ROLE")."""

    rate: str | None = None
    hit_shift: float = 0.0
    fail: str | None = None

    def describe(self) -> str:
        parts = []
        if self.rate:
            parts.append(f"rate {self.rate}")
        if self.hit_shift:
            parts.append(f"hit {self.hit_shift:+.2f}")
        if self.fail:
            parts.append(f"fail {self.fail}")
        return ", ".join(parts) or "no change"


@dataclass(frozen=True)
class WhatIf:
    """The plan's figures before and after, how the deployment degraded, and what was shed."""

    change: Change
    mode: str  # how the deployment runs after the change, in words
    before: dict[str, Any]
    after: dict[str, Any] | None  # None: nothing is served
    simulated_before: dict[str, Any] | None = None
    simulated_after: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "change": self.change.describe(),
            "mode": self.mode,
            "before": self.before,
            "after": self.after,
            "simulated_before": self.simulated_before,
            "simulated_after": self.simulated_after,
        }


def parse_rate(text: str, planned_rps: float) -> float:
    """`x1.5` -> 1.5 x the planned rate; `6` -> 6 requests/s; InputError otherwise."""
    match = re.fullmatch(r"\s*(x?)\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*", text)
    if match is None:
        raise InputError(f"--rate = {text!r}: expected a factor like x1.5 or requests/s like 6")
    value = float(match.group(2))
    rate = planned_rps * value if match.group(1) else value
    if not (math.isfinite(rate) and 0 < rate <= 1e6):
        raise InputError(f"--rate = {text!r}: gives {rate:g} requests/s; expected above 0 and at most 1e6")
    return rate


def _without_line(inputs: InputSet, scenario: Scenario, option: str) -> tuple[Scenario | None, str]:
    plan = scenario.plan
    leases = {lease.option: lease for lease in plan.wan}
    if option not in leases:
        known = ", ".join(leases) or "none"
        raise InputError(f"--fail line:{option}: the plan leases no line of option {option!r} (it leases: {known})")
    left = [
        lease.model_copy(update={"count": lease.count - 1}) if lease.option == option else lease for lease in plan.wan
    ]
    left = [lease for lease in left if lease.count > 0]
    if left:
        return _rebuilt(
            inputs, plan.model_copy(update={"wan": left})
        ), f"one {option} line down, {len(left)} option(s) left"
    return _datacenters_cut(inputs, scenario, "the WAN is down")


def _datacenters_cut(inputs: InputSet, scenario: Scenario, why: str) -> tuple[Scenario | None, str]:
    """The main decoders are unreachable: PDD's dedicated relays finish every request, else shed."""
    plan = scenario.plan
    relay = plan.relay
    if scenario.architecture.has_relay and relay is not None and relay.count > 0:
        intra = plan.model_copy(
            update={"architecture": "pd-intra", "relay": None, "decode": relay, "wan": [], "relay_on_prefill": False}
        )
        return _rebuilt(
            inputs, intra
        ), f"{why}: the {relay.count} relay instance(s) decode every request in {relay.datacenter}"
    return None, f"{why}: no decoder is reachable, all traffic is shed"


def _without_instance(inputs: InputSet, scenario: Scenario, role: str) -> tuple[Scenario | None, str]:
    plan = scenario.plan
    if role not in ROLES:
        raise InputError(f"--fail instance:{role}: expected a role, one of {', '.join(ROLES)}")
    spec = getattr(plan, role)
    if spec is None or spec.count == 0:
        raise InputError(f"--fail instance:{role}: the plan has no {role} instances")
    left = spec.count - 1
    if left > 0:
        shrunk = plan.model_copy(update={role: spec.model_copy(update={"count": left})})
        return _rebuilt(inputs, shrunk), f"one {role} instance down, {left} left"
    if role == "prefill":
        return None, "the only prefill instance is down: all traffic is shed"
    if role == "relay":
        direct = plan.model_copy(
            update={"routing": plan.routing.model_copy(update={"kind": "hit", "hit_threshold": 0.0})}
        )
        return _rebuilt(inputs, direct), "the only relay instance is down: every request goes P -> MD"
    return (
        _datacenters_cut(inputs, scenario, "the only main decoder is down")
        if scenario.architecture.has_relay
        else (
            None,
            "the only decode instance is down: all traffic is shed",
        )
    )


def _rebuilt(inputs: InputSet, plan: Any) -> Scenario:
    return build_scenario(plan, inputs, source="whatif")


def apply(inputs: InputSet, scenario: Scenario, change: Change) -> tuple[Scenario | None, float, str]:
    """The deployment after `change` (None: nothing served), the rate offered, and the mode in words."""
    from pddplan.bathtub import with_hit

    rate = parse_rate(change.rate, scenario.rate_rps) if change.rate else scenario.rate_rps
    modes = []
    changed: Scenario | None = scenario
    if change.hit_shift:
        if not -1 <= change.hit_shift <= 1:
            raise InputError(f"--hit-shift = {change.hit_shift}: expected -1 to 1")
        workload = scenario.workload
        target = min(max(workload.hit_rate.mean() + change.hit_shift, 0.0), 1.0)
        inputs = inputs.with_workload(workload.model_copy(update=with_hit(workload, target, "shift")))
        changed = build_scenario(scenario.plan, inputs, source="whatif")
        modes.append(f"mean hit {workload.hit_rate.mean():.1%} -> {target:.1%}")
    if change.fail:
        kind, _, name = change.fail.partition(":")
        if kind not in ("line", "instance") or not name:
            raise InputError(f"--fail = {change.fail!r}: expected line:OPTION or instance:ROLE")
        assert changed is not None
        if kind == "line":
            changed, mode = _without_line(inputs, changed, name)
        else:
            changed, mode = _without_instance(inputs, changed, name)
        modes.append(mode)
    return changed, rate, "; ".join(modes) or "as planned"


def whatif(inputs: InputSet, plan: Any, change: Change, simulate_requests: int = 0, seed: int = 0) -> WhatIf:
    """`plan`'s figures before and after `change` (module docstring), on `inputs`' workload."""
    from pddplan.evaluate.analytic import evaluate

    scenario = build_scenario(plan, inputs, source="plan")
    changed, rate, mode = apply(inputs, scenario, change)
    before = evaluate(scenario).to_dict()
    after = _paid_for(evaluate(changed, rate).to_dict(), scenario.cost_per_hour) if changed is not None else None
    sim_before = sim_after = None
    if simulate_requests:
        from pddplan.simulate.summary import simulate

        sim_before = simulate(scenario, simulate_requests, seed).summary
        if changed is not None:
            offered = changed.plan.model_copy(update={"rate_rps": None})
            workload = changed.workload.model_copy(
                update={"arrival": changed.workload.arrival.model_copy(update={"rate_rps": rate})}
            )
            sim_after = simulate(replace(changed, plan=offered, workload=workload), simulate_requests, seed).summary
    if sim_after is not None:
        sim_after = _paid_for(sim_after, scenario.cost_per_hour)
    return WhatIf(change, mode, before, after, sim_before, sim_after)


def _paid_for(figures: dict[str, Any], purchased_usd_per_hour: float) -> dict[str, Any]:
    """Figures of a degraded deployment at the purchase's cost: a failed instance or line is still
    paid for, so cost stays and BCR = goodput x 3600 / that cost."""
    goodput = figures["goodput_rps"]
    return figures | {
        "cost_usd_per_hour": purchased_usd_per_hour,
        "bcr": goodput * 3600 / purchased_usd_per_hour if purchased_usd_per_hour > 0 else 0.0,
    }
