"""One integer program across scenarios: the purchase (instances of each kind, the line pool) is
shared, each scenario serves its whole rate with its own capacities (`optimize --robust`).

Scenario s's program is the steady one at its rate (mode `rate`) with its own routing rule: its
prefill capacities, decode and relay capacities, path loads and memory needs. The joint program
keeps one set of purchase variables (prefill kind and pool size z(c, n), decode and relay kinds and
counts, the relay on prefill or not, the line pool) and gives every scenario its own served-rate
variables and its own copy of every capacity constraint:

    minimize  cost(z, count, pool)
    s.t.      for every scenario s: the steady program's constraints at rate_s over the shared purchase.

The scenarios' programs must describe the same purchase options (the same instance kinds at the
same prices and the same line pools, in the same order); when an override changes them (an
inventory, a price, a line option) the joint program is not built and None says so. The optimum is
of the linear capacities, as the steady program's is; `pddplan.optimize.robust` checks it in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pulp

from pddplan.inputs.input_set import InputSet
from pddplan.optimize import model as milp
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.problem import Headroom, ProblemBuilder, build_setup
from pddplan.optimize.search import plan_of_solution
from pddplan.optimize.solver import solve
from pddplan.specs.plan import ArchitectureName, Plan, Routing


@dataclass(frozen=True)
class JointCase:
    """One scenario of the joint program: its inputs and the routing rule it runs."""

    inputs: InputSet
    routing: Routing | None


class _Scoped:
    """The joint program as one scenario's constraint builders see it: every constraint they add is
    named with the scenario's suffix, so the same builders fill it once per scenario."""

    def __init__(self, model: pulp.LpProblem, suffix: str) -> None:
        self.model, self.suffix = model, suffix

    def __iadd__(self, other: Any) -> _Scoped:
        constraint, name = other if isinstance(other, tuple) else (other, None)
        self.model += (constraint, f"{name}-{self.suffix}") if name else constraint
        return self


def _options_of(data: milp.ProblemData) -> tuple[Any, ...]:
    """What the purchase variables stand for: kinds with prices, line pools with prices."""
    prefill = tuple((c.key, c.usd_per_hour) for c in data.prefill)
    decode = tuple((d.candidate.key, d.candidate.usd_per_hour) for d in data.decode)
    relay = tuple((r.candidate.key, r.candidate.usd_per_hour) for r in data.relay)
    pools = tuple(
        None if p.line is None else (tuple((o.name, n) for o, n in p.line.leases), p.line.usd_per_hour)
        for p in data.pools
    )
    return prefill, decode, relay, pools, bool(data.colocated_relay)


def _pad_prefill_capacities(datas: list[milp.ProblemData]) -> None:
    """Give every scenario's prefill capacities the same pool sizes 1..N (N the most any scenario
    sized): a scenario that sized fewer credits the larger pools with its largest pool's capacity,
    a lower bound, since more instances never serve less."""
    sizes = max((len(caps) for data in datas for caps in data.prefill_caps.values()), default=0)
    for data in datas:
        data.prefill_caps = {
            key: np.pad(caps, (0, sizes - len(caps)), mode="edge") if 0 < len(caps) < sizes else caps
            for key, caps in data.prefill_caps.items()
        }


def _scenario_variables(model: pulp.LpProblem, shared: milp.Variables, s: int) -> milp.Variables:
    """Scenario s's variables: the shared purchase, its own served rates (and relay supply on prefill)."""
    v = replace(shared, pool_rate={}, slack={}, inventory_slack={})
    v.pool_rate = {k: model.add_variable(f"pool_rate_{k}_s{s}", 0) for k in shared.pool}
    v.rate = model.add_variable(f"served_rate_s{s}", 0)
    if shared.relay_on_prefill is not None:
        v.colocated_supply = model.add_variable(f"colocated_relay_supply_s{s}", 0)
    return v


def joint_purchase(cases: list[JointCase], architecture: ArchitectureName, options: OptimizeOptions) -> Plan | None:
    """The cheapest purchase whose linear capacities serve every case's whole rate (module
    docstring), as a plan with the first case's routing; None when the cases' purchase options
    differ or no purchase serves them all."""
    datas: list[milp.ProblemData] = []
    setups = []
    for case in cases:
        rate = case.inputs.workload.arrival.rate_rps
        setup = build_setup(case.inputs, architecture, rate)
        if not setup.candidates or (setup.architecture.uses_wan and not setup.lines):
            return None
        at_rate = OptimizeOptions(
            mode="rate", rate=rate, solver=options.solver, verify=False, relay_placement=options.relay_placement
        )
        datas.append(ProblemBuilder(setup, at_rate).build(case.routing, Headroom()))
        setups.append(setup)
    if len({_options_of(data) for data in datas}) != 1:
        return None
    _pad_prefill_capacities(datas)
    for data in datas:  # one purchase for every scenario: one co-located pool (a split's share would vary)
        data.colocated_pools = 1
    model = pulp.LpProblem("pddplan-joint", pulp.LpMinimize)
    shared = milp.define_variables(model, datas[0])
    # a decode or relay kind that some scenario cannot use (its longest prompt does not fit) is not bought
    for family, picks, counts in (
        ("decode", shared.decode_pick, shared.decode_count),
        ("relay", shared.relay_pick, shared.relay_count),
    ):
        for i in picks:
            if not all(getattr(data, family)[i].usable for data in datas):
                picks[i].upBound = counts[i].upBound = 0
    for s, data in enumerate(datas):
        v = shared if s == 0 else _scenario_variables(model, shared, s)
        scoped: Any = _Scoped(model, f"s{s}")
        milp.define_served_rate(scoped, data, v)
        milp.define_prefill_capacity(scoped, data, v)
        milp.define_decode_capacity(scoped, data, v)
        milp.define_decode_memory(scoped, data, v)
        milp.define_prefill_cache(scoped, data, v)
        milp.define_architecture_constraints(scoped, data, v)
        milp.define_wan_bandwidth(scoped, data, v)
        milp.define_inventory(scoped, data, v)
        milp.define_rate(scoped, data, v)
    model.setObjective(milp.cost_expression(datas[0], shared))
    if solve(model, options.solver) == "infeasible":
        return None
    solution = milp.read_solution(datas[0], shared)
    return plan_of_solution(setups[0], datas[0], solution, cases[0].routing)
