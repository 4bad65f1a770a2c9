"""One change to a deployment, as `whatif` and N+1 survival apply it: a rate (a factor or
requests/s), a shift of the mean prefix hit, one failure (a leased line of a WAN option, or one
instance of a role), each degraded as `pddplan.analyses.whatif`'s docstring describes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, cast

from pddplan.errors import InputError
from pddplan.inputs.input_set import InputSet
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.scenarios.variants import with_hit
from pddplan.specs.plan import RoleName

ROLES = ("prefill", "relay", "decode", "split")


@dataclass(frozen=True)
class Change:
    """What changes: a rate (factor or absolute), a hit shift, a failure ("line:NAME" or "instance:ROLE")."""

    rate: str | None = None
    hit_shift: float = 0.0
    fail: str | None = None
    at_s: float | None = None  # with a line failure and a simulation: when it fails (the transient)

    def describe(self) -> str:
        parts = []
        if self.rate:
            parts.append(f"rate {self.rate}")
        if self.hit_shift:
            parts.append(f"hit {self.hit_shift:+.2f}")
        if self.fail:
            parts.append(f"fail {self.fail}" + (f" at {self.at_s:g} s" if self.at_s is not None else ""))
        return ", ".join(parts) or "no change"


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
        ), f"one {option} line down, {len(left)} line option{'' if len(left) == 1 else 's'} left"
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
        shrunk = plan.with_count(cast(RoleName, role), left)  # a name of ROLES, checked above
        return _rebuilt(inputs, shrunk), f"one {role} instance down, {left} left"
    if role == "split":  # the router sends the second pool's requests to the first
        return _rebuilt(inputs, plan.model_copy(update={"split": None})), (
            "the second pool's only instance is down: the first pool serves every request"
        )
    if role == "prefill" and plan.split is not None:
        whole = plan.model_copy(update={"prefill": plan.split.as_role(), "split": None})
        return _rebuilt(inputs, whole), "the first pool's only instance is down: the second pool serves every request"
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
