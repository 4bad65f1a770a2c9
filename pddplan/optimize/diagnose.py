"""Why no plan meets the constraints: which constraint binds, by how much, and what would fix it.

The program is solved again at the required rate with an elastic slack on every constraint
family, each slack heavily penalized: the slacks that stay positive are the constraints that bind,
and their size is the shortfall. Checks that need no solve (no decoder meets TPOT at batch 1,
no prefill pool meets the TTFT targets at any rate) come first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pddplan.optimize import model as milp
from pddplan.optimize.solver import solve
from pddplan.perf.roofline import decode_step_time
from pddplan.specs.plan import Handoff, Routing

if TYPE_CHECKING:
    from pddplan.optimize.search import OptimizeOptions, _Setup

FIXES = {
    "prefill-capacity": "loosen the TTFT SLA, add prefill inventory, or use faster prefill GPUs",
    "decode-capacity": "add decode inventory, loosen the TPOT SLA, or use decode GPUs with more bandwidth",
    "decode-memory": "add decode inventory or GPUs with more memory, or shorten drc_retention_s",
    "relay-capacity": "add relay inventory in the prefill datacenter or raise the routing threshold's WAN capacity",
    "wan-bandwidth": "lease more or faster WAN lines (raise max_lines or add an option)",
    "inventory": "raise max_count for the GPU types the plan needs",
    "budget": "raise the budget",
}
UNITS = {
    "prefill-capacity": "req/s",
    "decode-capacity": "req/s of full-length outputs",
    "decode-memory": "GB",
    "relay-capacity": "concurrent sequences",
    "wan-bandwidth": "req/s",
    "inventory": "GPUs",
    "budget": "$/h",
}


def diagnose(
    setup: _Setup,
    options: OptimizeOptions,
    problem: Callable[[Routing | None, Handoff, float], milp.ProblemData],
) -> list[dict[str, Any]]:
    """The binding constraints of an infeasible architecture, each with shortfall and fix."""
    findings: list[dict[str, Any]] = []
    routing = Routing(kind="hit", hit_threshold=0.9) if setup.architecture == "pdd" else None
    data = problem(routing, Handoff(mode="adaptive"), 1.0)
    sla = setup.workload.sla
    if not any(d.usable for d in data.decode):
        best = min(
            (float(decode_step_time(d.candidate.instance, 1.0, setup.context)) for d in data.decode),
            default=float("inf"),
        )
        findings.append(
            {
                "constraint": "decode-capacity",
                "shortfall": best - (sla.tpot_p90_s or 0.0),
                "message": f"no decode candidate meets TPOT P90 {(sla.tpot_p90_s or 0) * 1e3:g} ms even at batch "
                f"1 (best step {best * 1e3:.1f} ms); loosen the TPOT SLA or offer faster decode GPUs",
            }
        )
        return findings
    if not any((caps > 0).any() for caps in data.prefill_caps.values()):
        findings.append(
            {
                "constraint": "prefill-capacity",
                "shortfall": setup.rate_ceiling,
                "message": f"no prefill pool meets TTFT P90 {sla.ttft_p90_s:g} s / P99 {sla.ttft_p99_s:g} s at "
                "any rate (the prefill and transfer of the slowest requests alone exceed it); loosen the TTFT "
                "SLA, use faster prefill GPUs, a smaller chunk, or more WAN bandwidth",
            }
        )
        return findings
    target = setup.rate_ceiling if options.mode != "rate" or options.rate is None else options.rate
    elastic = replace(data, elastic=True, mode="rate", target_rate=target)
    model, variables = milp.build(elastic)
    if solve(model, options.solver) == "infeasible":
        return [
            {
                "constraint": "unknown",
                "shortfall": None,
                "message": "the elastic program found no solution either; check the workload's deployment options",
            }
        ]
    solution = milp.read_solution(elastic, variables)
    for name, amount in sorted(solution.slack.items(), key=lambda item: -item[1]):
        if amount <= 1e-6:
            continue
        findings.append(
            {
                "constraint": name,
                "shortfall": amount,
                "message": f"{name} binds: short by {amount:,.3g} {UNITS[name]} at {target:g} req/s; {FIXES[name]}",
            }
        )
    if not findings:
        findings.append(
            {
                "constraint": "sla",
                "shortfall": None,
                "message": "the program found plans, but none met the SLA when verified by simulation even after "
                f"tightening; loosen TTFT P90/P99 ({sla.ttft_p90_s:g} s / {sla.ttft_p99_s:g} s)",
            }
        )
    return findings
