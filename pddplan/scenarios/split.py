"""A plan that splits its requests over two co-located pools (agg's `split`), as two one-pool plans.

The router sends each session to the second pool with probability s (the pool's `share`), to the
first otherwise, and keeps it there (its prefix cache holds it). Each pool is then an agg
deployment of its own, at its share of the traffic:

  rate        lam_i = s_i lam                (s_1 = 1 - s, s_2 = s)
  arrivals    a random split of a renewal process with inter-arrival mean m and coefficient of
              variation c is a renewal process whose gaps are a geometric number (mean 1 / s_i)
              of the original ones: mean m / s_i and
                  c_i^2 = s_i c^2 + (1 - s_i)
              (Poisson stays Poisson; a bursty stream becomes less bursty, a smooth one less smooth);
              a rate profile keeps its shape (every pool sees the same relative rate over time).

Evaluation and simulation judge the plan on the mixture of the two pools' requests: a request is
the first pool's with probability 1 - s. Cost adds up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pddplan.scenarios.scenario import Scenario
from pddplan.specs.plan import RoleName, RoleSpec
from pddplan.specs.workload import Arrival


@dataclass(frozen=True)
class PoolPart:
    """One pool of a split plan: its role in the plan, its share of the requests, and a one-pool
    scenario of it at that share."""

    role: RoleName
    share: float
    scenario: Scenario


def pool_figure_name(role: RoleName, name: str) -> str:
    """What a split plan calls one pool's stage or utilization `name`: the first pool's as they are,
    the second's by its role (`split` for its prefill, `split-decode` for its decode)."""
    if role == "prefill":
        return name
    return "split" if name == "prefill" else f"split-{name}"


def thinned_arrival(arrival: Arrival, share: float) -> Arrival:
    """The arrivals one pool sees when each request goes to it with probability `share` (module
    docstring): rate x share, c^2 -> share c^2 + 1 - share, the profile unchanged."""
    cv = math.sqrt(share * arrival.cv**2 + (1.0 - share))
    process = "poisson" if arrival.process == "poisson" else "gamma"
    return arrival.model_copy(
        update={"rate_rps": arrival.rate_rps * share, "process": process, "cv": 1.0 if process == "poisson" else cv}
    )


def pool_parts(scenario: Scenario) -> list[PoolPart]:
    """The pools of `scenario`: itself alone (share 1) without a `split`, else its two pools, each a
    one-pool scenario at its share of the requests (the plan's served rate split alike)."""
    plan = scenario.plan
    split = plan.split
    if split is None:
        return [PoolPart("prefill", 1.0, scenario)]
    parts = []
    pools: tuple[tuple[RoleName, float, RoleSpec], ...] = (
        ("prefill", 1.0 - split.share, plan.prefill),
        ("split", split.share, split.as_role()),
    )
    for role, share, spec in pools:
        workload = scenario.workload.model_copy(update={"arrival": thinned_arrival(scenario.workload.arrival, share)})
        one_pool = plan.model_copy(
            update={
                "split": None,
                "prefill": spec,
                "rate_rps": plan.rate_rps * share if plan.rate_rps is not None else None,
                "name": f"{plan.name} ({role} pool)",
            }
        )
        pool = replace(scenario.roles[role], name="prefill", spec=spec)
        one = replace(scenario, plan=one_pool, workload=workload, roles={"prefill": pool})
        parts.append(PoolPart(role, share, one))
    return parts
