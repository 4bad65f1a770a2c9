"""More than one plan per architecture (`optimize --top N`): the plans the search evaluated, ranked,
and the cost-latency frontier among them.

The plans are those the search evaluates in closed form anyway (every routing rule x relay placement
x handoff mode of the program's solution, and the trimmed ones), plus a few found for the listing
(see `pddplan.optimize.search.more_plans`). Only plans that meet the SLA in closed form are listed,
one per deployment: the plan but its routing rule and handoff mode, which are operating choices on
the same GPUs and lines, so a deployment is listed once, with the rule and mode that score best.
The first is the plan the optimizer chose, verified by simulation; the others are ranked by the
mode's score in closed form and were not simulated.

A plan is on the frontier of cost against a latency when no other listed plan is at most as costly
and at most as slow, and strictly better on one of the two (Pareto); plans equal on both are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pddplan.specs.plan import Plan

#: the latencies the frontier weighs cost against: the key in `PlanOption` and the words shown
FRONTIERS: dict[str, str] = {"ttft_p99_s": "TTFT P99", "tpot_p90_s": "TPOT P90"}


@dataclass(frozen=True)
class PlanOption:
    """One plan the search evaluated: its closed-form figures, how it was found, and its rank (1:
    the plan the optimizer chose, the only one a simulation verified, when it verified at all)."""

    plan: Plan
    key: tuple[float, float, float]  # the search's (`search._key`): the mode's score, then its ties
    cost_usd_per_hour: float
    goodput_rps: float
    bcr: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    gpus: dict[str, int]
    roles: dict[str, dict[str, Any]]
    routing_rule: str | None
    handoff_mode: str | None
    found_by: str
    verified: bool = False
    rank: int = 0

    def latency(self, name: str) -> float:
        """The figure `name` of FRONTIERS (seconds)."""
        return float(getattr(self, name))


@dataclass(frozen=True)
class FrontierPoint:
    """A plan on the frontier of cost against one or both latencies (`on`: keys of FRONTIERS)."""

    option: PlanOption
    on: tuple[str, ...]


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates, lower being better on both coordinates: q
    dominates p when q <= p on both and q != p (then q < p on one). Equal points are both kept."""
    return [i for i, p in enumerate(points) if not any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points)]


def ranked(chosen: PlanOption, others: Sequence[PlanOption]) -> list[PlanOption]:
    """`chosen` first (rank 1), then the other deployments by their key, best first: a deployment
    seen more than once counts once, with its best key (its best routing rule and handoff mode);
    the chosen plan's deployment is left out of the others."""
    best: dict[str, PlanOption] = {}
    for option in others:
        name = deployment(option.plan)
        if name not in best or option.key > best[name].key:
            best[name] = option
    best.pop(deployment(chosen.plan), None)
    rest = sorted(best.values(), key=lambda o: o.key, reverse=True)
    return [replace(option, rank=i) for i, option in enumerate([chosen, *rest], start=1)]


def frontier(options: Sequence[PlanOption]) -> list[FrontierPoint]:
    """The plans on the frontier of cost against any latency of FRONTIERS, cheapest first (ties:
    by rank), each with the latencies it is on the frontier of."""
    on: dict[int, list[str]] = {}
    for name in FRONTIERS:
        for i in pareto([(o.cost_usd_per_hour, o.latency(name)) for o in options]):
            on.setdefault(i, []).append(name)
    order = sorted(on, key=lambda i: (options[i].cost_usd_per_hour, options[i].rank))
    return [FrontierPoint(options[i], tuple(on[i])) for i in order]


def deployment(plan: Plan) -> str:
    """What makes two plans the same deployment: every field but the routing rule and the handoff
    mode (the GPUs, the lines, where the relay decodes, the served rate and serving limits)."""
    return plan.model_dump_json(exclude={"routing", "handoff"})
