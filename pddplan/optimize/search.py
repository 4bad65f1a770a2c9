"""Optimize one architecture: capacities, the integer program (Dinkelbach for BCR), the outer search
over routing threshold and handoff mode, and verification by simulation with tightening."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pddplan.errors import InfeasibleError
from pddplan.evaluate.analytic import Evaluation, evaluate
from pddplan.evaluate.capacity import (
    PathLoad,
    decoder_capacity,
    path_load,
    prefill_capacity,
)
from pddplan.evaluate.classes import RequestClasses, workload_classes
from pddplan.inputs import load_model
from pddplan.net.lines import LinePool
from pddplan.optimize import model as milp
from pddplan.optimize.candidates import Candidate, instance_candidates, serves_prefill, wan_configs
from pddplan.optimize.solver import SolverOptions, solve
from pddplan.scenario import Scenario, build_scenario, drc_bytes_per_rps
from pddplan.simulate.summary import simulate
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import Architecture, Handoff, HandoffMode, Plan, Routing, WanLease
from pddplan.specs.workload import Workload

HIT_THRESHOLDS = (0.5, 0.8, 0.9, 0.95)
HANDOFF_MODES: tuple[HandoffMode, ...] = ("adaptive", "catch-up", "one-shot")  # ties: smaller hiccups first
TIGHTEN = 0.85
# A decode pool the verifying simulation found at least this busy (time-average batch / max batch)
# is treated as the cause of a missed TTFT: its slot waits grow without bound near saturation, and
# the closed form's Erlang-C slot wait is the least exact near there.
SATURATED_DECODE = 0.8
MAX_ROUNDS = 4
DINKELBACH_ITERATIONS = 12


@dataclass(frozen=True)
class OptimizeOptions:
    """How to optimize."""

    mode: milp.Mode = "bcr"
    rate: float | None = None
    budget_per_hour: float | None = None
    min_served_fraction: float = 1.0
    solver: SolverOptions = field(default_factory=SolverOptions)
    verify_requests: int = 10_000
    seed: int = 0
    verify: bool = True


@dataclass
class ArchitectureResult:
    """The best plan of one architecture, verified, or why there is none."""

    name: Architecture
    feasible: bool
    plan: Plan | None = None
    scenario: Scenario | None = None
    evaluation: Evaluation | None = None
    simulation: dict[str, Any] | None = None
    rounds: int = 0
    solves: int = 0
    routing_threshold: float | None = None
    handoff_mode: str | None = None
    infeasibility: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Setup:
    """What every solve of one architecture shares."""

    workload: Workload
    base_dir: Path | None
    model: ModelArchitecture
    architecture: Architecture
    candidates: list[Candidate]
    lines: list[LinePool]
    chunk: int
    context: float
    mean_output: float
    rate_ceiling: float


def _prune_lines(lines: list[LinePool]) -> list[LinePool]:
    """Drop line pools another pool of the same direction beats outright: at least the capacity and
    per-flow cap, at most the RTT and price, the same fluctuation, and strictly better on one.
    (Capacity and price alone are not enough: RTT and the per-flow cap set the transfer tail.)"""

    def no_worse(other: LinePool, line: LinePool) -> bool:
        return (
            (other.source, other.target) == (line.source, line.target)
            and other.fluctuation == line.fluctuation
            and other.capacity_bytes_per_s >= line.capacity_bytes_per_s
            and other.flow_cap_bytes_per_s >= line.flow_cap_bytes_per_s
            and other.rtt_s <= line.rtt_s
            and other.usd_per_hour <= line.usd_per_hour
        )

    kept = []
    for line in lines:
        dominated = any(other is not line and no_worse(other, line) and not no_worse(line, other) for other in lines)
        if not dominated:
            kept.append(line)
    return kept


def _setup(workload: Workload, base_dir: Path | None, architecture: Architecture, rate_ceiling: float) -> _Setup:
    model = load_model(workload.model, workload.kv_dtype)
    chunk = workload.serving.chunk_tokens
    candidates = instance_candidates(workload, model, chunk)
    home = workload.deployment.home
    lines = [line for line in _prune_lines(wan_configs(workload, base_dir)) if line.source == home]
    if architecture == "pd-intra":
        lines = []
    prompts, prompt_probs = workload.prompt_tokens.support()
    outputs, output_probs = workload.output_tokens.support()
    mean_output = float(outputs @ output_probs)
    return _Setup(
        workload=workload,
        base_dir=base_dir,
        model=model,
        architecture=architecture,
        candidates=candidates,
        lines=lines,
        chunk=chunk,
        context=float(prompts @ prompt_probs) + mean_output / 2,
        mean_output=mean_output,
        rate_ceiling=rate_ceiling,
    )


def _problem(
    setup: _Setup,
    routing: Routing | None,
    handoff: Handoff,
    sla_scale: float,
    options: OptimizeOptions,
    memo: dict[tuple[Any, ...], Any] | None = None,
    decode_scale: float = 1.0,
    beyond_inventory: bool = False,
    rate_cap: float = math.inf,
) -> tuple[milp.ProblemData, dict[int, RequestClasses]]:
    """Capacities of every candidate for one routing rule and handoff mode.

    `sla_scale` shrinks the TTFT targets prefill pools are sized for and `decode_scale` the rate
    and concurrency a decode or relay instance is credited with (both 1 until a verification fails).
    `memo` carries the prefill capacities between calls: they depend on the routing rule and the
    SLA scale, not on the handoff mode. `beyond_inventory` sizes prefill pools past the offer's
    max_count (for the elastic diagnosis, which asks how many GPUs would be needed). `rate_cap`
    bounds the rate the program may serve below the offered rate (budget mode, after a plan
    failed verification at a higher rate).
    """
    workload, model, arch = setup.workload, setup.model, setup.architecture
    decoders = [
        replace(d, requests_per_s=d.requests_per_s * decode_scale, occupancy=d.occupancy * decode_scale)
        for d in (decoder_capacity(c, workload, model, setup.context, setup.mean_output) for c in setup.candidates)
    ]
    usable = [d for d in decoders if d.usable]
    md_step = max((d.step_s for d in usable), default=math.inf)
    relay_step = md_step
    pools: list[PathLoad]
    datacenters = [workload.deployment.home]
    prefill_classes = {
        i: workload_classes(workload, model, c.instance, setup.chunk, routing) for i, c in enumerate(setup.candidates)
    }
    any_classes = next(iter(prefill_classes.values()))
    if arch == "pd-intra":
        pools = [PathLoad(None, 0.0, 1.0, 0.0, math.inf) for _ in datacenters]
    else:
        pools = [
            path_load(
                arch,
                any_classes,
                line,
                setup.rate_ceiling,
                relay_step,
                [candidate.instance for candidate in setup.candidates],
                md_step,
                handoff,
                setup.context,
            )
            for line in setup.lines
        ]
    memo_key = (routing.hit_threshold if routing else None, sla_scale)
    if memo is not None and memo_key in memo:
        prefill_caps = memo[memo_key]
        candidates_done = True
    else:
        prefill_caps = {}
        candidates_done = False
    for i, candidate in enumerate(setup.candidates if not candidates_done else []):
        if not serves_prefill(candidate):
            continue
        classes = prefill_classes[i]
        mean_s = float(classes.prefill_s @ classes.input_prob)
        by_rate = math.ceil(setup.rate_ceiling * mean_s * 1.5) + 4
        top = max(by_rate if beyond_inventory else min(candidate.max_count, by_rate), 1)
        # a pool of n instances serves less than n / E[S]: smaller pools cannot reach the least rate
        # the program may serve, so their capacity is left at 0 without computing it
        lowest = min(max(math.floor(_least_rate(setup, options) * mean_s), 1), top)
        sizes = np.arange(lowest, top + 1)
        same_link: dict[Any, np.ndarray] = {}
        for k, load in enumerate(pools):
            source = load.line.source if load.line is not None else datacenters[k]
            if source != candidate.datacenter:
                continue
            line = load.line
            link_key = (
                (line.capacity_bytes_per_s, line.flow_cap_bytes_per_s, line.rtt_s, line.fluctuation)
                if line is not None
                else None
            )
            if link_key in same_link:
                prefill_caps[(i, k)] = same_link[link_key]
                continue
            caps = prefill_capacity(
                candidate,
                classes,
                arch,
                load.line,
                md_step,
                relay_step,
                workload,
                sizes,
                setup.rate_ceiling,
                sla_scale,
            )
            padded = np.concatenate([np.zeros(lowest - 1), caps])
            same_link[link_key] = padded
            prefill_caps[(i, k)] = padded
    if memo is not None:
        memo[memo_key] = prefill_caps
    drc = drc_bytes_per_rps(workload, model, arch)
    inventory = {(dc.name, offer.type): offer.max_count for dc in workload.deployment.datacenters for offer in dc.gpus}
    data = milp.ProblemData(
        architecture=arch,
        prefill=setup.candidates,
        prefill_caps=prefill_caps,
        decode=decoders,
        relay=decoders if arch == "pdd" else [],
        pools=pools,
        datacenters=datacenters,
        drc_bytes_per_rps=drc,
        mean_output_tokens=setup.mean_output,
        inventory=inventory,
        rate_ceiling=min(setup.rate_ceiling, rate_cap),
        mode=options.mode,
        target_rate=options.rate,
        budget_per_hour=options.budget_per_hour,
        min_served_fraction=options.min_served_fraction,
    )
    return data, prefill_classes


def _least_rate(setup: _Setup, options: OptimizeOptions) -> float:
    """The least rate a plan may serve: the target (--rate), min_served x offered (BCR), else 0."""
    if options.mode == "rate":
        return setup.rate_ceiling
    if options.mode == "bcr":
        return options.min_served_fraction * setup.rate_ceiling
    return 0.0


def _solve(
    data: milp.ProblemData, options: OptimizeOptions, start_ratio: float = 0.0
) -> tuple[milp.Solution | None, int]:
    """Solve the program; for BCR run Dinkelbach: q <- rate / cost until rate - q * cost ~ 0.

    Starting from a ratio another feasible plan already achieved (`start_ratio`) skips the first
    iterations; if no plan beats it, the loop restarts from 0 so a solution is always returned.
    """
    solves = 0
    if data.mode != "bcr":
        model, variables = milp.build(data)
        solves += 1
        if solve(model, options.solver) == "infeasible":
            return None, solves
        solution = milp.read_solution(data, variables)
        if solution.rate <= 1e-9:  # budget mode: the budget buys nothing that serves
            return None, solves
        return solution, solves
    ratio = start_ratio
    best: milp.Solution | None = None
    for _ in range(DINKELBACH_ITERATIONS):
        model, variables = milp.build(data, ratio)
        solves += 1
        if solve(model, options.solver) == "infeasible":
            return best, solves
        solution = milp.read_solution(data, variables)
        if solution.rate <= 1e-9 or solution.cost_per_hour <= 0:
            if best is None and ratio > 0:
                ratio = 0.0
                continue
            return best, solves
        gap = solution.rate - ratio * solution.cost_per_hour
        best = solution
        if abs(gap) <= 1e-7 * solution.cost_per_hour and ratio > 0:
            break
        ratio = solution.rate / solution.cost_per_hour
    return best, solves


def _plan(
    setup: _Setup, data: milp.ProblemData, solution: milp.Solution, routing: Routing | None, handoff: Handoff
) -> Plan:
    """The plan file a solution describes."""
    c, n = solution.prefill
    prefill = data.prefill[c]
    decode = data.decode[solution.decode[0]].candidate
    relay = None
    if solution.relay is not None:
        relay = data.relay[solution.relay[0]].candidate.role(max(solution.relay[1], 1))
    line = milp.line_of(data, solution)
    wan = [WanLease(option=option.name, count=count) for option, count in line.leases] if line else []
    offered = setup.workload.arrival.rate_rps
    served = None if abs(solution.rate - offered) <= 1e-9 * offered else solution.rate
    return Plan(
        name=f"{setup.workload.name}-{setup.architecture}",
        rate_rps=served,
        architecture=setup.architecture,
        prefill=prefill.role(n),
        relay=relay,
        decode=decode.role(max(solution.decode[1], 1)),
        wan=wan,
        routing=routing or Routing(),
        handoff=handoff,
    )


def _routings(setup: _Setup) -> list[Routing | None]:
    if setup.architecture != "pdd":
        return [None]
    hits, _ = setup.workload.hit_rate.support()
    out: list[Routing | None] = []
    seen: set[int] = set()
    for threshold in HIT_THRESHOLDS:
        relayed = int((hits < threshold).sum())
        if relayed == 0 or relayed in seen:
            continue
        seen.add(relayed)
        out.append(Routing(kind="hit", hit_threshold=threshold))
    return out or [Routing(kind="hit", hit_threshold=HIT_THRESHOLDS[0])]


def _score(evaluation: Evaluation, options: OptimizeOptions) -> float:
    if options.mode == "rate":
        return -evaluation.cost_per_hour if evaluation.sla_met else -math.inf
    if options.mode == "budget":
        return evaluation.goodput_rps if evaluation.sla_met else -math.inf
    return evaluation.bcr if evaluation.sla_met else -math.inf


def optimize_architecture(
    workload: Workload,
    base_dir: Path | None,
    architecture: Architecture,
    options: OptimizeOptions,
    progress: Callable[[str], None] | None = None,
) -> ArchitectureResult:
    """Best verified plan of `architecture` for `workload`, or a report of what binds."""
    ceiling = options.rate if options.mode == "rate" and options.rate else workload.arrival.rate_rps
    setup = _setup(workload, base_dir, architecture, ceiling)
    result = ArchitectureResult(name=architecture, feasible=False)
    if not setup.candidates:
        result.infeasibility = [
            {
                "constraint": "memory",
                "message": f"model '{setup.model.name}' fits no offered GPU "
                f"at any TP degree; offer larger GPUs or more GPUs per instance",
            }
        ]
        return result
    if architecture != "pd-intra" and not setup.lines:
        result.infeasibility = [{"constraint": "wan-bandwidth", "message": "the workload offers no WAN line option"}]
        return result
    sla_scale = decode_scale = 1.0
    rate_cap = math.inf
    chosen: list[Routing | None] | None = None
    memo: dict[tuple[Any, ...], Any] = {}
    ratio = 0.0
    for round_number in range(1, MAX_ROUNDS + 1):
        result.rounds = round_number
        best: tuple[tuple[float, float, float], Plan, Evaluation, Scenario, Routing | None] | None = None
        for routing in chosen if chosen is not None else _routings(setup):
            if progress:
                progress(f"{architecture}: routing {routing.hit_threshold if routing else '-'}, round {round_number}")
            # Capacities use the adaptive handoff, which holds the relay at least as long as one-shot.
            data, _ = _problem(
                setup, routing, Handoff(mode="adaptive"), sla_scale, options, memo, decode_scale, rate_cap=rate_cap
            )
            solution, solves = _solve(data, options, ratio)
            result.solves += solves
            if solution is None:
                continue
            if options.mode == "bcr" and solution.cost_per_hour > 0:
                ratio = max(ratio, solution.rate / solution.cost_per_hour)
            plan = _plan(setup, data, solution, routing, Handoff(mode="adaptive"))
            for mode in HANDOFF_MODES if architecture == "pdd" else ("adaptive",):
                candidate_plan = plan.model_copy(update={"handoff": Handoff(mode=mode)})
                scenario = build_scenario(candidate_plan, workload, base_dir, source="optimized plan")
                evaluation = evaluate(scenario)
                key = (float(f"{_score(evaluation, options):.9g}"), -evaluation.ttft.p99_s, -evaluation.worst_gap_p99_s)
                if best is None or key > best[0]:
                    best = (key, candidate_plan, evaluation, scenario, routing)
        if best is None:
            break
        key, plan, evaluation, scenario, routing = best
        chosen = [routing]
        result.plan, result.evaluation, result.scenario = plan, evaluation, scenario
        result.simulation = None
        result.routing_threshold = routing.hit_threshold if routing else None
        result.handoff_mode = plan.handoff.mode if architecture == "pdd" else None
        if key[0] == -math.inf:  # the closed form already misses the SLA: ask for headroom and re-solve
            sla_scale *= TIGHTEN
            if options.mode == "budget":  # see below: the budget may be what binds
                rate_cap = TIGHTEN * (plan.rate_rps or setup.rate_ceiling)
            continue
        if not options.verify:
            result.feasible = True
            return result
        verified = simulate(scenario, options.verify_requests, options.seed).summary
        result.simulation = verified
        if verified["sla_met"]:
            result.feasible = True
            return result
        sla_scale *= TIGHTEN
        decoders_busy = [u for name, u in verified["utilization"].items() if name != "prefill"]
        if max(decoders_busy, default=0.0) >= SATURATED_DECODE:
            decode_scale *= TIGHTEN
        if options.mode == "budget":
            # The budget, not a capacity, may be what binds: then tighter capacities leave the same
            # plan at the same rate, so ask for less traffic on the same money instead.
            rate_cap = TIGHTEN * evaluation.goodput_rps
    if not result.feasible:
        from pddplan.optimize.diagnose import diagnose

        simulated = result.simulation is not None
        result.infeasibility = diagnose(
            setup, options, lambda r, h, s: _problem(setup, r, h, s, options, beyond_inventory=True)[0], simulated
        )
        if not simulated:  # keep only a plan the simulation tried (and report what it measured)
            result.plan = result.scenario = result.evaluation = None
    return result


def require_feasible(result: ArchitectureResult) -> None:
    """Raise InfeasibleError with the binding constraints of an infeasible result."""
    if not result.feasible:
        reasons = "; ".join(item["message"] for item in result.infeasibility) or "no plan meets the constraints"
        raise InfeasibleError(f"{result.name}: {reasons}")


__all__ = ["ArchitectureResult", "OptimizeOptions", "optimize_architecture", "replace"]
