"""Optimize one architecture: the integer program (Dinkelbach for BCR) per routing rule, the handoff
modes compared in closed form, and verification by simulation with tightening; with `top`, the
other plans it evaluated ranked beside the chosen one (`pddplan.optimize.frontier`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pddplan import architectures
from pddplan.cache.sessions import CacheKind
from pddplan.errors import InfeasibleError, InputError
from pddplan.evaluate.analytic import Evaluation
from pddplan.inputs.input_set import InputSet
from pddplan.optimize import model as milp
from pddplan.optimize.candidates import Candidate, refused_tps
from pddplan.optimize.diagnose import diagnose
from pddplan.optimize.frontier import FrontierPoint, PlanOption, deployment, frontier, ranked
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.placement import relay_placements
from pddplan.optimize.problem import (
    CAPACITY_HANDOFF,
    Headroom,
    OptimizeSetup,
    ProblemBuilder,
    build_setup,
    solve_bcr,
)
from pddplan.scenarios.describe import scenario_roles
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.simulate.outputs import Simulation as SimulationOutput
from pddplan.simulate.sequential import verify
from pddplan.specs.plan import ArchitectureName, Handoff, HandoffMode, Plan, RoleName, Routing, SplitPool, WanLease
from pddplan.support.limits import MAX_RATE_RPS

TIGHTEN = 0.85
# A decode pool the verifying simulation found at least this busy (time-average batch / max batch)
# is treated as the cause of a missed TTFT: its slot waits grow without bound near saturation, and
# the closed form's Erlang-C slot wait is the least exact near there.
SATURATED_DECODE = 0.8
MAX_ROUNDS = 4


@dataclass
class ArchitectureResult:
    """The best plan of one architecture, verified, or why there is none."""

    name: ArchitectureName
    feasible: bool
    plan: Plan | None = None
    scenario: Scenario | None = None
    evaluation: Evaluation | None = None
    simulation: SimulationOutput | None = None
    rounds: int = 0
    solves: int = 0
    routing_threshold: float | None = None  # of a hit rule
    routing_rule: str | None = None  # the rule, as words: 'hit < 0.95', 'WAN bytes > 1.2 GB'
    handoff_mode: str | None = None
    infeasibility: list[dict[str, Any]] = field(default_factory=list)
    # with `top`: every deployment meeting the SLA in closed form that the search evaluated, the
    # chosen plan first, then by score (`pddplan.optimize.frontier.ranked`); None without `top`
    plans: list[PlanOption] | None = None
    top_count: int = 0

    @property
    def top(self) -> list[PlanOption] | None:
        """The `top` best plans (None without `top`)."""
        return None if self.plans is None else self.plans[: self.top_count]

    @property
    def frontier(self) -> list[FrontierPoint] | None:
        """The cost-latency frontier of the plans (None without `top`)."""
        return None if self.plans is None else frontier(self.plans)


@dataclass(frozen=True)
class _Pick:
    """A plan evaluated in closed form (the best of a round, once chosen), with its key."""

    key: tuple[float, float, float]
    plan: Plan
    evaluation: Evaluation
    scenario: Scenario
    routing: Routing | None
    untrimmed: _Pick | None = None  # the program's own plan, when trimming shrank it
    runner_up: _Pick | None = None  # the best plan of another prefill kind, when the round had one
    found_by: str = "program"  # how the search came to it, as `--top` lists it


def _key(evaluation: Evaluation, options: OptimizeOptions) -> tuple[float, float, float]:
    """What plans are compared by: the mode's score, then P99 TTFT, then the P99 hiccup; with a
    budget (score: goodput), the cheaper plan before P99 TTFT: the same goodput for less money
    (among plans that meet the SLA; those that miss it rank as in the other modes)."""
    score = float(f"{_score(evaluation, options):.9g}")
    if options.mode == "budget" and score > -math.inf:
        return (score, -float(f"{evaluation.cost_per_hour:.9g}"), -evaluation.ttft.p99_s)
    return (score, -evaluation.ttft.p99_s, -evaluation.worst_gap_p99_s)


def _trimmed(
    pick: _Pick,
    builder: ProblemBuilder,
    seen: list[_Pick] | None = None,
    headroom: Headroom | None = None,
) -> _Pick:
    """`pick` with each role's count lowered one instance at a time, decode, relay, then prefill, and
    then each role one width narrower (half the GPUs per instance, the same count), as long as the
    closed form says the smaller plan still meets the SLA and scores at least as well, and no
    simulation saw its prefill pool miss (`Headroom.prefill_allowed`). Every plan tried is added to
    `seen` (when given).

    The program's linear capacities are conservative where the closed form is not: the radix cache
    is reserved for every request though a cancelled singular transfer never lands, a pool's tail
    is cut at the program's piecewise points, and a prefill pool's TTFT capacity is taken at the
    line the program sized it for. The simulation then verifies the trimmed plan.
    """
    setup, options = builder.setup, builder.options
    best = pick

    def better(plan: Plan) -> _Pick | None:
        kind = _prefill_key(plan, setup.candidates)
        served = plan.rate_rps if plan.rate_rps is not None else setup.rate_ceiling
        if headroom is not None and kind is not None and not headroom.prefill_allowed(kind, plan.prefill.count, served):
            return None
        evaluated = builder.evaluated(plan)
        if evaluated is None:  # a narrower instance the model or the longest prompt does not fit
            return None
        scenario, evaluation = evaluated
        key = _key(evaluation, options)
        found = _Pick(key, plan, evaluation, scenario, pick.routing, untrimmed=pick, found_by="trimmed")
        if seen is not None:
            seen.append(found)
        score = _score(evaluation, options)
        if score == -math.inf or score < best.key[0]:
            return None
        return found

    for role in ("decode", "relay", "prefill", "split"):
        while (spec := getattr(best.plan, role)) is not None and spec.count > 1:
            smaller = better(best.plan.with_count(role, spec.count - 1))
            if smaller is None:
                break
            best = smaller
    roles: tuple[RoleName, ...] = ("decode", "relay", "prefill", "split")
    for role in roles:
        for narrower in narrower_plans(best.plan, role, setup):
            found = better(narrower)
            if found is not None:
                best = found
                break
    return best


def narrower_plans(plan: Plan, role: RoleName, setup: OptimizeSetup) -> list[Plan]:
    """`plan` with `role` one width narrower: the candidates of its datacenter and GPU type at half
    its GPUs per instance that may serve the role (its own layout first), at the same count."""
    spec = getattr(plan, role)
    if spec is None or spec.count == 0 or spec.gpus_per_instance % 2:
        return []
    half = (spec.datacenter, spec.gpu, spec.gpus_per_instance // 2)
    kinds = [c for c in setup.candidates if (c.datacenter, c.gpu, c.gpus_per_instance) == half]
    kinds.sort(
        key=lambda c: (
            c.expert_parallel != spec.expert_parallel,
            c.tp_attention != spec.tp_attention,
            (c.pp > 1) != (spec.pp > 1),
        )
    )
    if isinstance(spec, SplitPool):  # the second pool keeps its share of the requests
        return [
            plan.model_copy(update={role: SplitPool(**c.role(spec.count).model_dump(), share=spec.share)})
            for c in kinds
        ]
    return [plan.model_copy(update={role: c.role(spec.count)}) for c in kinds]


def plan_of_solution(
    setup: OptimizeSetup, data: milp.ProblemData, solution: milp.Solution, routing: Routing | None
) -> Plan:
    """The plan file a solution describes."""
    c, n = solution.prefill
    decode = None
    if solution.decode is not None:
        picked, count = solution.decode
        decode = data.decode[picked].candidate.role(max(count, 1))
    relay = None
    if solution.relay is not None:
        relay = data.relay[solution.relay[0]].candidate.role(max(solution.relay[1], 1))
    split = None
    if solution.split is not None:  # requests divided in proportion to the pools' capacities
        c2, n2 = solution.split
        first = float(data.prefill_caps[(c, solution.pool)][n - 1])
        second = float(data.prefill_caps[(c2, solution.pool)][n2 - 1])
        role = data.prefill[c2].role(n2)
        split = SplitPool(**role.model_dump(), share=second / (first + second))
    line = milp.line_of(data, solution)
    wan = [WanLease(option=option.name, count=count) for option, count in line.leases] if line else []
    offered = setup.workload.arrival.rate_rps
    served = None if abs(solution.rate - offered) <= 1e-9 * offered else solution.rate
    return Plan(
        name=f"{setup.workload.name}-{setup.architecture.name}",
        rate_rps=served,
        architecture=setup.architecture.name,
        prefill=data.prefill[c].role(n),
        split=split,
        relay=relay,
        relay_on_prefill=solution.relay_on_prefill,
        decode=decode,
        wan=wan,
        routing=routing or Routing(),
        handoff=CAPACITY_HANDOFF,
    )


def rule_text(routing: Routing | None) -> str:
    """A routing rule in words: which requests take the relay."""
    if routing is None:
        return "-"
    if routing.kind == "hit":
        return f"hit < {routing.hit_threshold:g}"
    return f"WAN bytes > {routing.incremental_bytes_threshold / 1e9:.3g} GB"


def _score(evaluation: Evaluation, options: OptimizeOptions) -> float:
    if not evaluation.sla_met:
        return -math.inf
    if options.mode == "rate":
        return -evaluation.cost_per_hour
    if options.mode == "budget":
        # a relay moved onto more prefill instances may cost more than the program's plan
        over = options.budget_per_hour is not None and evaluation.cost_per_hour > options.budget_per_hour * (1 + 1e-9)
        return -math.inf if over else evaluation.goodput_rps
    return evaluation.bcr


def _placed_plans(builder: ProblemBuilder, plan: Plan, routing: Routing | None) -> Iterator[_Pick]:
    """`plan` (a solution's) at each relay placement, cheapest first within a group of placements
    until one meets the SLA, and in each of the architecture's handoff modes, evaluated in closed form."""
    setup, options = builder.setup, builder.options
    for placements in relay_placements(plan, options.relay_placement):
        for placed in placements:  # cheapest first: stop at the first that meets the SLA
            met = False
            settled: dict[HandoffMode, Evaluation] = {}  # a fixed mode the adaptive one matched throughout
            for mode in setup.architecture.handoff_modes():
                candidate = placed.model_copy(update={"handoff": Handoff(mode=mode)})
                if mode in settled:
                    try:
                        scenario = build_scenario(candidate, setup.inputs, source="optimized plan")
                    except InputError:  # more prefill instances than the datacenter offers
                        continue
                    evaluation = settled[mode]
                elif (evaluated := builder.evaluated(candidate)) is None:
                    continue
                else:
                    scenario, evaluation = evaluated
                if mode == "adaptive" and len(evaluation.handoff_choices) == 1:
                    # the same arithmetic as the fixed mode it chose at every iteration
                    settled["catch-up" if True in evaluation.handoff_choices else "one-shot"] = evaluation
                met = met or evaluation.sla_met
                yield _Pick(_key(evaluation, options), candidate, evaluation, scenario, routing)
            if met:
                break


def _best_of_round(
    builder: ProblemBuilder,
    routings: list[Routing | None],
    headroom: Headroom,
    result: ArchitectureResult,
    progress: Callable[[str], None] | None,
    ratio: float,
    seen: list[_Pick] | None = None,
) -> tuple[_Pick | None, float]:
    """Solve the program per routing rule, then compare the architecture's handoff modes on each
    solution in closed form; the best by score, then P99 TTFT, then P99 hiccup. `ratio` is the best
    BCR a solved program reached so far (Dinkelbach's warm start); the new one is returned too.
    Every plan evaluated is added to `seen` (when given)."""
    setup, options = builder.setup, builder.options
    arch = setup.architecture
    best: _Pick | None = None
    builder.prepare(routings, headroom)  # every rule's prefill pools sized in one search
    for routing in routings:
        if progress:
            progress(f"{arch.name}: routing {rule_text(routing)}, round {result.rounds}")
        data = builder.build(routing, headroom)
        solution, solves = solve_bcr(data, options, ratio)
        result.solves += solves
        if solution is None:
            continue
        if options.mode == "bcr" and solution.cost_per_hour > 0:
            ratio = max(ratio, solution.rate / solution.cost_per_hour)
        plan = plan_of_solution(setup, data, solution, routing)
        for pick in _placed_plans(builder, plan, routing):
            if seen is not None:
                seen.append(pick)
            if best is None or pick.key > best.key:
                best = pick
    if best is not None and best.key[0] > -math.inf:
        best = _trimmed(best, builder, seen, headroom)
        rival = _rival(builder, best, headroom, ratio, result, seen)
        if rival is not None:
            best, loser = (rival, best) if rival.key > best.key else (best, rival)
            best = replace(best, runner_up=loser)
    return best, ratio


def _fallbacks(pick: _Pick) -> list[_Pick]:
    """What to verify, best key first, when the simulation finds `pick` missing the SLA: the
    program's plan it was trimmed from, and the round's runner-up of another prefill kind with its
    own program plan; each deployment once, none that misses in closed form."""
    runner_up = pick.runner_up
    others = [pick.untrimmed, runner_up, runner_up.untrimmed if runner_up is not None else None]
    found: dict[str, _Pick] = {}
    for other in others:
        if other is not None and other.key[0] > -math.inf:
            found.setdefault(deployment(other.plan), other)
    found.pop(deployment(pick.plan), None)
    return sorted(found.values(), key=lambda other: other.key, reverse=True)


def _prefill_kinds(pick: _Pick, candidates: list[Candidate]) -> set[int]:
    """The candidates (by index) whose instances `pick`'s prefill role uses, before and after its trim."""
    return {
        i
        for i, c in enumerate(candidates)
        for p in (pick, pick.untrimmed)
        if p is not None and c.role(p.plan.prefill.count) == p.plan.prefill
    }


def _solved_without(
    builder: ProblemBuilder,
    routing: Routing | None,
    headroom: Headroom,
    ratio: float,
    spent: set[int],
    result: ArchitectureResult,
) -> tuple[int, list[_Pick]] | None:
    """The program solved for `routing` at `headroom` without the prefill candidates in `spent` (a
    no-good cut on the prefill choice): the prefill candidate it chose, and its plan at each relay
    placement and handoff mode in closed form; None when no other kind serves. Its solves are
    counted in `result.solves`."""
    data = builder.build(routing, headroom)
    caps = {key: cap for key, cap in data.prefill_caps.items() if key[0] not in spent}
    if not caps:
        return None
    data = replace(data, prefill_caps=caps)
    solution, count = solve_bcr(data, builder.options, ratio)
    result.solves += count
    if solution is None:
        return None
    plan = plan_of_solution(builder.setup, data, solution, routing)
    return solution.prefill[0], list(_placed_plans(builder, plan, routing))


def _rival(
    builder: ProblemBuilder,
    best: _Pick,
    headroom: Headroom,
    ratio: float,
    result: ArchitectureResult,
    seen: list[_Pick] | None,
) -> _Pick | None:
    """The best plan of another prefill instance kind, trimmed as `best` was: the program solved
    once more without `best`'s prefill kinds (`_solved_without`).

    The program's capacities are conservative, and by different margins for different kinds: the
    kind the program prefers can lose to another once both are trimmed (112 GPU-A instead of 56
    GPU-B at $3.00 a GPU-B hour, while the program priced the GPU-A plan at 128). Every plan
    evaluated is added to `seen` (when given)."""
    spent = _prefill_kinds(best, builder.setup.candidates)
    solved = _solved_without(builder, best.routing, headroom, ratio, spent, result)
    if solved is None:
        return None
    rival: _Pick | None = None
    for pick in solved[1]:
        if seen is not None:
            seen.append(replace(pick, found_by="re-solved"))
        if rival is None or pick.key > rival.key:
            rival = pick
    if rival is None or rival.key[0] == -math.inf:
        return None
    return _trimmed(replace(rival, found_by="re-solved"), builder, seen, headroom)


def _after_miss(
    headroom: Headroom,
    pick: _Pick,
    verified: SimulationOutput | None,
    options: OptimizeOptions,
    ceiling: float,
    candidates: list[Candidate],
) -> Headroom:
    """The headroom the next round asks for after `pick` missed the SLA (in closed form when
    `verified` is None, else in the simulation)."""
    sla_scale = headroom.sla_scale * TIGHTEN
    decode_scale = headroom.decode_scale
    rate_cap = headroom.rate_cap_rps
    if verified is None:
        if options.mode == "budget":  # the budget may be what binds (see below)
            rate_cap = TIGHTEN * (pick.plan.rate_rps or ceiling)
        stages = pick.evaluation.stages
        if max((s.utilization for name, s in stages.items() if name != "prefill"), default=0.0) >= SATURATED_DECODE:
            decode_scale *= TIGHTEN  # a decoder the closed form finds (near) saturated: fewer credited slots
        return Headroom(sla_scale, decode_scale, rate_cap, headroom.prefill_misses)
    misses = headroom.prefill_misses
    if _decoders_saturated(verified):
        decode_scale *= TIGHTEN
    elif (miss := _prefill_miss(pick, verified, ceiling, candidates)) is not None:
        # the prefill pool missed: no pool of as few instances of its kind serves this rate again,
        # and the others keep the capacities they had (a tighter SLA scale would shrink them all)
        misses = (*misses, miss)
        sla_scale = headroom.sla_scale
    if options.mode == "budget":
        # The budget, not a capacity, may be what binds: then tighter capacities leave the same
        # plan at the same rate, so ask for less traffic on the same money instead.
        rate_cap = TIGHTEN * pick.evaluation.goodput_rps
    return Headroom(sla_scale, decode_scale, rate_cap, misses)


def _after_misses(
    headroom: Headroom,
    failed: list[tuple[_Pick, SimulationOutput]],
    options: OptimizeOptions,
    ceiling: float,
    candidates: list[Candidate],
) -> Headroom:
    """The headroom the next round asks for after the simulation rejected each of a round's plans
    in `failed` (best key first): `_after_miss` of the best (its decoders, its budget rate), with
    every other plan's prefill miss added and the decoders tightened (once) when any of them
    saturated its decoders."""
    (best, verified), *others = failed
    out = _after_miss(headroom, best, verified, options, ceiling, candidates)
    misses = [m for p, v in others if (m := _prefill_miss(p, v, ceiling, candidates)) is not None]
    decode_scale = out.decode_scale
    if not _decoders_saturated(verified) and any(_decoders_saturated(v) for _, v in others):
        decode_scale *= TIGHTEN
    return replace(out, decode_scale=decode_scale, prefill_misses=(*out.prefill_misses, *misses))


def _decoders_saturated(verified: SimulationOutput) -> bool:
    """Whether a decode or relay pool of the simulation was at least SATURATED_DECODE busy."""
    return max((u for name, u in verified.utilization.items() if name != "prefill"), default=0.0) >= SATURATED_DECODE


def _prefill_miss(
    pick: _Pick, verified: SimulationOutput, ceiling: float, candidates: list[Candidate]
) -> tuple[str, int, float] | None:
    """(prefill kind, count, rate) when `verified` saw `pick` miss with its decoders not saturated,
    so its prefill pool is the cause (`Headroom.prefill_misses`); None otherwise, or when the plan's
    prefill has no single kind (`_prefill_key`)."""
    if _decoders_saturated(verified) or (key := _prefill_key(pick.plan, candidates)) is None:
        return None
    served = pick.plan.rate_rps if pick.plan.rate_rps is not None else ceiling
    return key, pick.plan.prefill.count, served


def _prefill_key(plan: Plan, candidates: list[Candidate]) -> str | None:
    """The candidate key of `plan`'s prefill role (None when no candidate has its layout, or the
    requests split over two pools: a simulated miss does not say which pool missed)."""
    if plan.split is not None:
        return None
    spec = plan.prefill
    for c in candidates:
        if (c.datacenter, c.gpu, c.tp, c.pp, c.expert_parallel, c.tp_attention) == (
            spec.datacenter,
            spec.gpu,
            spec.tp,
            spec.pp,
            spec.expert_parallel,
            spec.tp_attention,
        ):
            return c.key
    return None


def _adopt(result: ArchitectureResult, pick: _Pick, has_relay: bool) -> None:
    """`pick` as the architecture's answer so far: its plan, figures, routing rule and handoff mode,
    not yet simulated."""
    result.plan, result.evaluation, result.scenario = pick.plan, pick.evaluation, pick.scenario
    result.simulation = None
    by_hit = pick.routing is not None and pick.routing.kind == "hit"
    result.routing_threshold = pick.routing.hit_threshold if by_hit and pick.routing else None
    result.routing_rule = rule_text(pick.routing) if pick.routing else None
    result.handoff_mode = pick.plan.handoff.mode if has_relay else None


def _search(builder: ProblemBuilder, result: ArchitectureResult, progress: Callable[[str], None] | None) -> None:
    """Rounds of solve -> closed form -> simulation, tightening after each miss (at most MAX_ROUNDS);
    with `options.top`, then the plans of the last round ranked beside the chosen one (`_list_plans`).

    A round's plans are simulated best key first (the chosen one, then `_fallbacks`) until one
    meets the SLA. When that one is not the round's best, the next round, which knows the misses,
    looks for a better one; the best plan the simulation accepted is the answer."""
    setup, options = builder.setup, builder.options
    routings = setup.architecture.routings(setup.workload)
    headroom = Headroom()
    ratio = 0.0
    seen: list[_Pick] | None = [] if options.top else None  # the round's plans, for `top`
    rejected: set[str] = set()  # deployments the simulation found missing the SLA
    accepted: tuple[_Pick, SimulationOutput] | None = None  # the best plan a simulation accepted
    pick: _Pick | None = None
    for round_number in range(1, MAX_ROUNDS + 1):
        result.rounds = round_number
        if seen is not None:
            seen.clear()
        found, ratio = _best_of_round(builder, routings, headroom, result, progress, ratio, seen)
        if found is None or (accepted is not None and found.key <= accepted[0].key):
            break
        pick, routings = found, [found.routing]
        _adopt(result, pick, setup.architecture.has_relay)
        if pick.key[0] == -math.inf:  # the closed form already misses the SLA: ask for headroom, re-solve
            headroom = _after_miss(headroom, pick, None, options, setup.rate_ceiling, setup.candidates)
            continue
        if not options.verify:
            result.feasible = True
            break
        failed: list[tuple[_Pick, SimulationOutput]] = []
        for candidate in [pick, *_fallbacks(pick)]:
            if accepted is not None and candidate.key <= accepted[0].key:
                break
            if deployment(candidate.plan) in rejected:  # simulated before (a trim can come back to it)
                continue
            verified = verify(candidate.scenario, options.verify_requests, options.seed, options.early_stop).summary
            if verified.sla_met:
                accepted = (candidate, verified)
                break
            rejected.add(deployment(candidate.plan))
            failed.append((candidate, verified))
        if not failed:  # the round's best met the SLA, or the round brought nothing new to simulate
            break
        headroom = _after_misses(headroom, failed, options, setup.rate_ceiling, setup.candidates)
        pick, verified = failed[0]
        _adopt(result, pick, setup.architecture.has_relay)
        result.simulation = verified
    if accepted is not None:
        pick = accepted[0]
        _adopt(result, pick, setup.architecture.has_relay)
        result.simulation, result.feasible = accepted[1], True
    if result.feasible and pick is not None and seen is not None and options.top is not None:
        more = more_plans(builder, pick, headroom, ratio, options.top - 1, result)
        _list_plans(result, pick, [*seen, *more], rejected, options.top)


def _option(pick: _Pick, has_relay: bool, verified: bool = False) -> PlanOption:
    """`pick` as `--top` lists it: its closed-form figures."""
    evaluation, scenario = pick.evaluation, pick.scenario
    return PlanOption(
        plan=pick.plan,
        key=pick.key,
        cost_usd_per_hour=evaluation.cost_per_hour,
        goodput_rps=evaluation.goodput_rps,
        bcr=evaluation.bcr,
        ttft_p90_s=evaluation.ttft.p90_s,
        ttft_p99_s=evaluation.ttft.p99_s,
        tpot_p90_s=evaluation.tpot.p90_s,
        tpot_p99_s=evaluation.tpot.p99_s,
        gpus=scenario.gpus_by_type(),
        roles=scenario_roles(scenario),
        routing_rule=rule_text(pick.routing) if pick.routing else None,
        handoff_mode=pick.plan.handoff.mode if has_relay else None,
        found_by=pick.found_by,
        verified=verified,
    )


def _list_plans(result: ArchitectureResult, chosen: _Pick, seen: list[_Pick], rejected: set[str], top: int) -> None:
    """`result.plans`: the chosen plan first (verified when the simulation ran), then every other
    deployment in `seen` that meets the SLA in closed form, by key; a deployment the simulation
    rejected is left out."""
    has_relay = architectures.get(result.name).has_relay
    others = [
        _option(p, has_relay)
        for p in seen
        if p.evaluation.sla_met and p.key[0] > -math.inf and deployment(p.plan) not in rejected
    ]
    result.plans = ranked(_option(chosen, has_relay, verified=result.simulation is not None), others)
    result.top_count = top


def more_plans(
    builder: ProblemBuilder, pick: _Pick, headroom: Headroom, ratio: float, solves: int, result: ArchitectureResult
) -> list[_Pick]:
    """Plans beside `pick` for `--top`, evaluated in closed form (none simulated):

    - the program solved again up to `solves` times for `pick`'s routing rule at the last round's
      `headroom`, each time without the prefill instance kinds (GPU type, width, layout) of the
      plans before it (a no-good cut on the prefill choice), each solution at its relay
      placements and handoff modes as the search compares them;
    - `pick` with one more instance of each of its roles (more money for a shorter queue).

    Their program solves are counted in `result.solves`."""
    options = builder.options
    found: list[_Pick] = []
    spent = _prefill_kinds(pick, builder.setup.candidates)
    for _ in range(solves):
        solved = _solved_without(builder, pick.routing, headroom, ratio, spent, result)
        if solved is None:
            break
        spent.add(solved[0])
        found += [replace(p, found_by="re-solved") for p in solved[1]]
    roles: tuple[RoleName, ...] = ("prefill", "split", "relay", "decode")
    for role in roles:
        spec = getattr(pick.plan, role)
        if spec is None or spec.count == 0:
            continue
        bigger = pick.plan.with_count(role, spec.count + 1)
        evaluated = builder.evaluated(bigger)
        if evaluated is None:  # more instances than the datacenter offers
            continue
        scenario, evaluation = evaluated
        key = _key(evaluation, options)
        found.append(_Pick(key, bigger, evaluation, scenario, pick.routing, found_by=f"+1 {role}"))
    return found


def optimize_architecture(
    inputs: InputSet,
    architecture: ArchitectureName,
    options: OptimizeOptions,
    progress: Callable[[str], None] | None = None,
) -> ArchitectureResult:
    """Best verified plan of `architecture` for the workload of `inputs`, or a report of what binds.

    With a budget (`mode="budget"`) the workload's rate is only where the search starts: while the
    budget buys a plan that serves all of the ceiling, the ceiling doubles (up to MAX_RATE_RPS), so
    the answer is the most the money serves, not the workload's rate (a higher ceiling's answer is
    kept only when it serves more).
    """
    workload = inputs.workload
    choices = workload.serving.drc_retention_choices
    if choices and CacheKind.DECODE in architectures.get(architecture).caches:
        return _best_retention(inputs, architecture, options, choices, progress)
    ceiling = options.rate if options.mode == "rate" and options.rate else workload.arrival.rate_rps
    result = _optimize_at(inputs, architecture, options, ceiling, progress)
    while options.mode == "budget" and ceiling < MAX_RATE_RPS and _serves_all_of(result, ceiling):
        ceiling = min(2.0 * ceiling, MAX_RATE_RPS)
        wider = _optimize_at(inputs, architecture, options, ceiling, progress)
        if not wider.feasible or not _serves_more(wider, result):
            break
        result = wider
    return result


def _best_retention(
    inputs: InputSet,
    architecture: ArchitectureName,
    options: OptimizeOptions,
    choices: list[float],
    progress: Callable[[str], None] | None,
) -> ArchitectureResult:
    """The best plan over the radix-cache retentions the workload offers (`drc_retention_choices`):
    each optimized as if it were `drc_retention_s`, the best score kept (ties: the shorter), and its
    retention written into the plan."""
    best: tuple[float, ArchitectureResult] | None = None
    for retention in sorted(set(choices)):
        serving = inputs.workload.serving.model_copy(
            update={"drc_retention_s": retention, "drc_retention_choices": None}
        )
        variant = inputs.with_workload(inputs.workload.model_copy(update={"serving": serving}))
        result = optimize_architecture(variant, architecture, options, progress)
        score = _score(result.evaluation, options) if result.feasible and result.evaluation else -math.inf
        if best is None or score > best[0]:
            best = score, result
    assert best is not None
    result = best[1]
    if result.plan is not None and result.scenario is not None:
        chosen = result.scenario.workload.serving.drc_retention_s
        result.plan = result.plan.model_copy(update={"drc_retention_s": chosen})
        if result.plans is not None:
            retained = {"drc_retention_s": chosen}
            result.plans = [replace(o, plan=o.plan.model_copy(update=retained)) for o in result.plans]
    return result


def _serves_more(wider: ArchitectureResult, result: ArchitectureResult) -> bool:
    """Whether `wider` (optimized at a doubled ceiling) serves more than `result`: the search at a
    higher ceiling can verify less (its tightened rounds end below the plan found before)."""
    assert wider.evaluation is not None and result.evaluation is not None
    return wider.evaluation.goodput_rps > result.evaluation.goodput_rps


def _serves_all_of(result: ArchitectureResult, ceiling: float) -> bool:
    """Whether a feasible plan serves the whole ceiling (to 0.1%): then a higher one may buy more."""
    served = result.evaluation.goodput_rps if result.feasible and result.evaluation is not None else 0.0
    return served >= (1.0 - 1e-3) * ceiling


def _optimize_at(
    inputs: InputSet,
    architecture: ArchitectureName,
    options: OptimizeOptions,
    ceiling: float,
    progress: Callable[[str], None] | None,
) -> ArchitectureResult:
    """Best plan serving at most `ceiling` requests/s (exactly it with `mode="rate"`)."""
    workload = inputs.workload
    setup = build_setup(inputs, architecture, ceiling)
    result = ArchitectureResult(name=architecture, feasible=False)
    if not setup.candidates:
        offered = sum(offer.max_count for dc in workload.deployment.datacenters for offer in dc.gpus)
        if offered == 0:
            message = "no GPUs are offered: every deployment.datacenters[*].gpus[*].max_count is 0"
            result.infeasibility = [{"constraint": "inventory", "message": message}]
        else:
            message = f"model '{setup.model.name}' fits no offered GPU at any TP degree"
            if refused := refused_tps(inputs):
                heads = setup.model.num_heads
                message += (
                    f" the engines start: tensor-parallel attention over {' or '.join(map(str, refused))} ranks "
                    f"does not split its {heads} attention heads; offer widths that divide {heads} "
                    "(deployment.tp_options), larger GPUs or more GPUs per instance"
                )
            else:
                message += "; offer larger GPUs or more GPUs per instance"
            result.infeasibility = [{"constraint": "memory", "message": message}]
        return result
    unavailable = setup.architecture.why_unavailable(workload, len(setup.lines))
    if unavailable is not None:
        constraint = "wan-bandwidth" if setup.architecture.uses_wan else "deployment"
        result.infeasibility = [{"constraint": constraint, "message": unavailable}]
        return result
    builder = ProblemBuilder(setup, options)
    _search(builder, result, progress)
    if not result.feasible:
        simulated = result.simulation is not None
        if options.diagnose:
            result.infeasibility = diagnose(builder.beyond(), simulated)
        if not simulated:  # keep only a plan the simulation tried (and report what it measured)
            result.plan = result.scenario = result.evaluation = None
    return result


def require_feasible(result: ArchitectureResult) -> None:
    """Raise InfeasibleError with the binding constraints of an infeasible result."""
    if not result.feasible:
        reasons = "; ".join(item["message"] for item in result.infeasibility) or "no plan meets the constraints"
        raise InfeasibleError(f"{result.name}: {reasons}")


__all__ = ["ArchitectureResult", "OptimizeOptions", "optimize_architecture", "replace"]
