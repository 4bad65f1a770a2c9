"""Why no plan meets the constraints: which constraint binds, by how much, and what would fix it.

Checks that need no solve come first (no decoder meets TPOT at batch 1; no prefill pool meets the
TTFT targets at any rate). With a budget, the cheapest plan at the required rate is priced exactly:
if it costs more, the budget binds by the difference. Otherwise the program is solved again at the
required rate with elastic slacks, penalized per unit as a fraction of what the rate needs of them:
first on the resources only (GPUs offered per type, WAN lines), instance counts uncapped, so a
shortfall any GPUs could fix is reported as the GPUs missing; only if that is still infeasible, on
every capacity family. The slacks left positive are the binding constraints and their sizes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pddplan.net.lines import LinePool
from pddplan.optimize import model as milp
from pddplan.optimize.candidates import holds_longest_prompt
from pddplan.optimize.problem import OptimizeSetup, ProblemBuilder, solve_program
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.roofline import decode_step_time

FIXES = {
    "prefill-capacity": "loosen the TTFT SLA, add prefill inventory, or use faster prefill GPUs",
    "decode-capacity": "add decode inventory, loosen the TPOT SLA, or use decode GPUs with more bandwidth",
    "decode-memory": "add decode inventory or GPUs with more memory, let the radix cache spill to host memory "
    "(serving.cache_tiers), or shorten drc_retention_s",
    "prefill-cache": "add prefill instances or GPUs with more memory, or let the prefix cache spill to host memory "
    "(serving.cache_tiers: dram or ssd)",
    "relay-capacity": "add relay inventory in the prefill datacenter or raise the routing threshold's WAN capacity",
    "wan-bandwidth": "lease more or faster WAN lines (raise max_lines or add an option)",
    "inventory": "raise max_count for the GPU types the plan needs",
    "budget": "raise the budget",
}
RESOURCES = ("inventory", "wan-bandwidth")
CAPACITIES = tuple(family for family in milp.SLACK_FAMILIES if family != "budget")
UNITS = {
    "prefill-capacity": "req/s",
    "decode-capacity": "req/s of full-length outputs",
    "decode-memory": "GB",
    "prefill-cache": "GB",
    "relay-capacity": "concurrent sequences",
    "wan-bandwidth": "req/s",
    "inventory": "GPUs",
    "budget": "$/h",
}


def _ttft_floor_finding(builder: ProblemBuilder) -> dict[str, Any]:
    """No prefill pool meets the TTFT targets at any rate: the best TTFT reachable (the kind and
    line closest to the targets with nothing queued, `ProblemBuilder.unloaded_ttft`) against them."""
    setup = builder.setup
    targets = setup.workload.sla.targets("ttft")
    wanted = " / ".join(f"{t.name} {t.target_s:g} s" for t in targets)
    floor = builder.unloaded_ttft(setup.architecture.default_routing())
    finding: dict[str, Any] = {"constraint": "prefill-capacity", "shortfall": setup.rate_ceiling}
    reached, wan = "", "more WAN bandwidth" if setup.architecture.uses_wan else ""
    if floor is not None:
        quantiles, candidate, line = floor
        finding["best_ttft_s"] = {t.name: float(q) for t, q in zip(targets, quantiles, strict=True)}
        where = candidate.key + (f" over {line.key}, {line.gbps:g} Gbps" if line is not None else "")
        got = " / ".join(f"{t.name} {q:.3g} s" for t, q in zip(targets, quantiles, strict=True))
        reached = f"; even unloaded the closest ({where}) reaches {got}"
        if line is not None and line.flow_cap_bytes_per_s < line.capacity_bytes_per_s:
            wan = _flow_cap_advice(line)
    fixes = ["loosen the TTFT SLA", "use faster prefill GPUs", "a smaller chunk", *([wan] if wan else [])]
    finding["message"] = (
        f"no prefill pool meets {wanted} at any rate (the prefill and transfer of the slowest requests alone "
        f"exceed it){reached}; {', '.join(fixes[:-1])}, or {fixes[-1]}"
    )
    return finding


def _flow_cap_advice(line: LinePool) -> str:
    """What speeds up one transfer on `line` when TCP's per-transfer rate F, not the line's capacity
    C, bounds it (F < C; F = streams x min(window / RTT, the loss bound), `pddplan.net.tcp`): an
    idle line still moves one KV at F, so more capacity does not help."""
    return (
        f"a faster transfer: one KV crosses at {line.flow_cap_bytes_per_s * 8 / 1e9:.3g} Gbps of the line's "
        f"{line.gbps:g} (TCP's per-transfer bound: more streams in tcp.streams, less loss or a shorter RTT; "
        "more line bandwidth does not help)"
    )


def diagnose(builder: ProblemBuilder, simulated: bool = True) -> list[dict[str, Any]]:
    """The binding constraints of an infeasible architecture, each with shortfall and fix
    (`builder` sizes prefill pools beyond the inventory, see `ProblemBuilder`)."""
    setup, options = builder.setup, builder.options
    findings: list[dict[str, Any]] = []
    if not any(holds_longest_prompt(c, setup.workload) for c in setup.candidates):
        return [_prompt_memory_finding(setup)]
    data = builder.build(setup.architecture.default_routing())
    sla = setup.workload.sla
    if not setup.architecture.colocated and not any(d.usable for d in data.decode):
        if data.decode and all(d.memory_bytes < d.sequence_bytes for d in data.decode):
            roomiest = max(d.memory_bytes for d in data.decode)
            return [
                {
                    "constraint": "decode-memory",
                    "shortfall": (data.decode[0].sequence_bytes - roomiest) / 1e9,
                    "message": f"no decode candidate holds one sequence's KV ({data.decode[0].sequence_bytes / 1e9:.3g}"
                    f" GB at the mean context) in its KV budget (at most {roomiest / 1e9:.3g} GB); offer GPUs with "
                    "more memory, allow a larger TP degree, or use a smaller kv_dtype",
                }
            ]
        tightest = min(sla.targets("tpot"), key=lambda t: t.target_s)
        best = min(
            (float(decode_step_time(d.candidate.instance, 1.0, setup.moments.context_tokens)) for d in data.decode),
            default=float("inf"),
        )
        findings.append(
            {
                "constraint": "decode-capacity",
                "shortfall": best - sla.tpot_step_limit_s(),
                "message": f"no decode candidate meets {tightest.name} {tightest.target_s * 1e3:g} ms even at batch "
                f"1 (best step {best * 1e3:.1f} ms); loosen the TPOT SLA or offer faster decode GPUs",
            }
        )
        return findings
    if not any((caps > 0).any() for caps in data.prefill_caps.values()):
        findings.append(_ttft_floor_finding(builder))
        return findings
    target = setup.rate_ceiling  # the --rate target in rate mode, else the offered rate
    if options.mode == "bcr" and options.min_served_fraction > 0:
        target = options.min_served_fraction * setup.rate_ceiling  # the least rate BCR mode may serve
    at_target = replace(data, mode="rate", target_rate=target, budget_per_hour=None)
    budget = options.budget_per_hour
    if budget is not None:
        priced = solve_program(at_target, options)
        if priced is not None and priced.cost_per_hour > budget:
            return [_budget_finding(priced.cost_per_hour, budget, target)]
    weights = _weights(at_target, target)
    # Resources first (GPUs offered, WAN lines): with them unlimited, is the rate reachable?
    # Only if not does a capacity the program cannot buy its way out of (a TTFT floor) bind.
    solution = solve_program(
        replace(at_target, elastic=True, elastic_families=RESOURCES, slack_weights=weights), options
    )
    if solution is None:
        solution = solve_program(
            replace(at_target, elastic=True, elastic_families=CAPACITIES, slack_weights=weights), options
        )
    if solution is None:
        limit = options.solver.time_limit_s
        return [
            {
                "constraint": "unknown" if limit is None else "solver-time-limit",
                "shortfall": None,
                "message": "the elastic program found no solution either; check the workload's deployment options"
                if limit is None
                else f"the solver found no solution within --time-limit {limit:g} s, not even for the relaxed "
                "program; raise --time-limit (the constraints themselves may well be met)",
            }
        ]
    for name, amount in sorted(solution.slack.items(), key=lambda item: -item[1] * weights.get(item[0], 1.0)):
        if amount <= 1e-6:
            continue
        if name == "inventory":
            findings.append(_inventory_finding(at_target, solution, target))
            continue
        where = binding_pool(at_target, solution, name)
        findings.append(
            {
                "constraint": name,
                "pool": where,
                "shortfall": amount,
                "message": f"{name} binds{f' on {where}' if where else ''}: short by {amount:,.3g} {UNITS[name]} "
                f"at {target:g} req/s; {FIXES[name]}",
            }
        )
    if findings and budget is not None and solution.cost_per_hour > budget:
        findings.append(_budget_finding(solution.cost_per_hour, budget, target))
    if not findings:
        findings.append(
            {
                "constraint": "sla",
                "shortfall": None,
                "message": "the program found plans, but none met the SLA "
                + ("when verified by simulation" if simulated else "in closed form")
                + f" even after tightening; loosen TTFT P90/P99 ({sla.ttft_p90_s:g} s / {sla.ttft_p99_s:g} s)",
            }
        )
    return findings


def _prompt_memory_finding(setup: OptimizeSetup) -> dict[str, Any]:
    """No instance kind holds the KV of the longest prompt: by how much the roomiest one is short."""
    workload = setup.workload
    longest = workload.prompt_tokens.largest()
    need = float(request_kv_bytes(setup.model, longest, workload.serving.page_tokens))
    roomiest = max(setup.candidates, key=lambda c: c.kv_capacity_bytes / c.instance.kv_pools)
    room = roomiest.kv_capacity_bytes / roomiest.instance.kv_pools
    return {
        "constraint": "prompt-memory",
        "pool": roomiest.key,
        "shortfall": (need - room) / 1e9,
        "message": f"no instance kind holds the KV of the longest prompt ({longest:,} tokens, {need / 1e9:.3g} GB): "
        f"the roomiest, {roomiest.key}, keeps {room / 1e9:.3g} GB per sequence; allow a larger TP degree, offer "
        "GPUs with more memory, or use a smaller kv_dtype",
    }


def binding_pool(data: milp.ProblemData, solution: milp.Solution, family: str) -> str | None:
    """The instance kind or line pool whose constraint of `family` the least-short plan strains:
    the prefill, decode or relay kind it picked (`datacenter/gpu/tpN[/ep]`), or its line pool."""
    pool = data.pools[solution.pool]
    line = pool.line.key if pool.line is not None else None
    if family == "prefill-capacity":
        c, n = solution.prefill
        return f"{n} x {data.prefill[c].key}" + (f" over {line}" if line else "")
    if family == "prefill-cache":
        c, n = solution.prefill
        return f"{n} x {data.prefill[c].key}"
    if family in ("decode-capacity", "decode-memory") and solution.decode is not None:
        return data.decode[solution.decode[0]].candidate.key
    if family == "relay-capacity" and solution.relay is not None:
        return data.relay[solution.relay[0]].candidate.key
    if family == "wan-bandwidth":
        return line
    return None


def _weights(data: milp.ProblemData, target: float) -> dict[str, float]:
    """Penalty per unit of each slack: one over what the target rate needs of it, so shortfalls of
    different units weigh as fractions of the need (and the findings sort by that fraction)."""
    rate = max(target, 1e-9)
    memory_gb = min(
        (
            (d.running_bytes_per_rps(data.mean_output_tokens) + data.decode_cache_bytes_per_rps) / 1e9
            for d in data.decode
            if d.usable
        ),
        default=1.0,
    )
    hold_s = max((load.relay_hold_s for load in data.pools), default=0.0)
    offered = sum(data.inventory.values())
    return {
        "prefill-capacity": 1 / rate,
        "decode-capacity": 1 / rate,
        "wan-bandwidth": 1 / rate,
        "decode-memory": 1 / max(rate * memory_gb, 1e-9),
        "prefill-cache": 1 / max(rate * data.prefill_cache_bytes_per_rps / 1e9, 1e-9),
        "relay-capacity": 1 / max(rate * hold_s, 1e-9),
        "inventory": 1 / max(offered, 1),
    }


def _inventory_finding(data: milp.ProblemData, solution: milp.Solution, target: float) -> dict[str, Any]:
    """Which GPU types the least-short plan lacks, and by how many."""
    short = {key: amount for key, amount in solution.inventory_short.items() if amount > 1e-6}
    parts = [
        f"{gpu} in {dc} short by {amount:,.0f} GPUs (needs {data.inventory[(dc, gpu)] + amount:,.0f}, "
        f"offers {data.inventory[(dc, gpu)]:,})"
        for (dc, gpu), amount in sorted(short.items(), key=lambda item: -item[1])
    ]
    total = sum(short.values())
    return {
        "constraint": "inventory",
        "shortfall": total,
        "by_type": {f"{dc}/{gpu}": amount for (dc, gpu), amount in short.items()},
        "message": f"inventory binds: short by {total:,.0f} GPUs at {target:g} req/s ({'; '.join(parts)}); "
        f"{FIXES['inventory']}",
    }


def _budget_finding(cost_per_hour: float, budget_per_hour: float, target: float) -> dict[str, Any]:
    """The cheapest plan at the target rate costs more than the budget."""
    short = cost_per_hour - budget_per_hour
    return {
        "constraint": "budget",
        "shortfall": short,
        "message": f"budget binds: short by {short:,.4g} $/h at {target:g} req/s (the cheapest plan serving it "
        f"costs {cost_per_hour:,.4g} $/h); {FIXES['budget']}",
    }
