"""Fast sizing of a plan without the integer program: pick each role's instance kind by the cost of
its smallest pool that carries the workload's rate within the SLA (ties: by cost per request/s),
then the smallest counts that carry the rate within the SLA.

It applies the same capacity functions as the program (`pddplan.evaluate.capacity`) one role at a
time, so it is quick enough for curves of hundreds of points (`bathtub`, `sweep`) and gives the
program's answer whenever one instance kind per role is optimal and roles do not share inventory.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from pddplan import architectures
from pddplan.architectures import Architecture
from pddplan.cache.accounting import decode_cache_bytes_per_rps, prefill_cache_bytes_per_rps
from pddplan.cache.tiers import instance_tiers
from pddplan.errors import InfeasibleError, InputError
from pddplan.evaluate.analytic import evaluate
from pddplan.evaluate.capacity import (
    RDMA_PATH,
    WAN_MAX_UTILIZATION,
    DecoderCapacity,
    Downstream,
    PathLoad,
    colocated_capacity,
    decoder_capacity,
    path_load,
    path_loads,
    pool_size_estimate,
    prefill_capacity,
)
from pddplan.evaluate.capacity_view import (
    UNBOUNDED_RATE,
    CapacityView,
    RolePool,
    capacity_view,
    decoder_rate,
    fluid_view,
    prefill_token_throughputs,
    relay_rate,
)
from pddplan.evaluate.classes import RequestClasses, planning_effects, workload_classes
from pddplan.evaluate.moments import workload_moments
from pddplan.evaluate.verdict import revenue_per_request
from pddplan.inputs.input_set import InputSet
from pddplan.net.lines import LinePool
from pddplan.optimize.candidates import (
    Candidate,
    holds_longest_prompt,
    instance_candidates,
    wan_configs,
)
from pddplan.optimize.placement import relay_placements
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.roofline import Instance
from pddplan.scenarios.scenario import build_scenario
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import ArchitectureName, Handoff, Plan, RoleName, RoleSpec, Routing, WanLease
from pddplan.specs.workload import Workload

MAX_POOL = 4096


@dataclass(frozen=True)
class Shape:
    """Instance kinds per role and the WAN lines: what sizing keeps fixed while counts change.

    The decoders' capacities depend on the context length and the TPOT target, not on the hit
    rate, so a shape computed for a workload is reused across a hit-rate sweep of it.
    """

    architecture: Architecture
    model: ModelArchitecture
    prefill: Candidate
    decode: DecoderCapacity[Candidate] | None  # None: the prefill instances decode (co-located)
    relay: DecoderCapacity[Candidate] | None
    line: LinePool | None
    routing: Routing | None
    line_options: tuple[LinePool, ...] = ()
    # the other prefill kinds of the home datacenter, in the order sizing falls back on them when no
    # pool of `prefill` meets the TTFT SLA (a WAN transfer can leave too little time for a narrow one)
    prefill_fallbacks: tuple[Candidate, ...] = ()


@dataclass(frozen=True)
class SizedPlan:
    """A sized plan and its capacity view (equal to `capacity_view` of the plan's scenario)."""

    plan: Plan
    view: CapacityView


def choose_shape(inputs: InputSet, architecture: ArchitectureName, routing: Routing | None = None) -> Shape:
    """Per role, the instance kind whose smallest pool carrying the workload's rate within the SLA
    costs least (count x $/h; ties by $ per request/s: whole instances, not a fluid share of one,
    decide at a few requests a second), and the cheapest sufficient line pool; co-located serving:
    the kind whose smallest pool carrying the rate costs least, in any datacenter.

    The line and the decoders are chosen with the prefill kind cheapest per request/s, the prefill
    kind then with them downstream, among the kinds the decoder may pair with; the other such
    kinds are the fallbacks, by the same order."""
    arch = architectures.get(architecture)
    workload, model = inputs.workload, inputs.model
    chunk = workload.serving.chunk_tokens
    moments = workload_moments(workload)
    home = workload.deployment.home
    candidates = instance_candidates(inputs, chunk)
    if arch.colocated:  # decoding in pipelined steps is not modelled
        return _colocated_shape(inputs, arch, [c for c in candidates if c.pp == 1])
    at_home = [c for c in candidates if c.datacenter == home]
    if not at_home:
        raise InfeasibleError(f"model '{model.name}' fits no GPU offered in the home datacenter {home}")
    at_home = [c for c in at_home if holds_longest_prompt(c, workload)]
    if not at_home:
        raise InfeasibleError(
            f"no prefill instance kind in {home} holds the KV of the longest prompt "
            f"({workload.prompt_tokens.largest():,} tokens)"
        )
    routing = routing or arch.default_routing()
    relay_rule = arch.relay_rule(routing) if routing is not None else None
    classes = {
        id(c): workload_classes(workload, model, c.instance, chunk, relay_rule, planning_effects(workload, c.instance))
        for c in at_home
    }

    def usd_per_rps(c: Candidate) -> float:
        return c.usd_per_hour * float(classes[id(c)].prefill_s @ classes[id(c)].input_prob)

    provisional = min(at_home, key=usd_per_rps)
    drc = decode_cache_bytes_per_rps(workload, model, arch.caches)
    usable = _usable_decoders(inputs, "decode", candidates)
    if not usable:
        raise InfeasibleError("no decode instance kind holds the longest prompt and meets the TPOT SLA at batch 1")
    step = max(d.step_s for d in usable)
    line, load, line_options = _choose_line(
        inputs,
        Downstream(arch, None, step, step),
        classes[id(provisional)],
        [d.candidate.instance for d in usable],
    )
    decode_dc = line.target if line is not None else home
    options = [
        d
        for d in usable
        if d.candidate.datacenter == decode_dc and arch.decode_gpu_allowed(provisional.gpu, d.candidate.gpu)
    ]
    if not options:
        raise InfeasibleError(f"no decode instance kind for {arch.name} is offered where decode must run ({decode_dc})")
    mean_output = moments.output_tokens
    rate = workload.arrival.rate_rps

    def decode_cost(d: DecoderCapacity[Candidate]) -> tuple[float, float]:
        try:
            pool_usd = (
                _decode_count(d, workload, model, classes[id(provisional)], load, drc, rate) * d.candidate.usd_per_hour
            )
        except InfeasibleError:
            pool_usd = math.inf
        return pool_usd, d.candidate.usd_per_hour / max(decoder_rate(d, load, mean_output, drc), 1e-12)

    decode = min(options, key=decode_cost)
    relay = None
    if arch.has_relay:
        relays = [d for d in _usable_decoders(inputs, "relay", candidates) if d.candidate.datacenter == home]
        if not relays:
            raise InfeasibleError(f"no relay instance kind fits in the home datacenter {home}")

        def relay_cost(d: DecoderCapacity[Candidate]) -> tuple[float, float]:
            try:
                pool_usd = _relay_count(d, load, rate) * d.candidate.usd_per_hour
            except InfeasibleError:
                pool_usd = math.inf
            return pool_usd, d.candidate.usd_per_hour / max(d.occupancy, 1e-12)

        relay = min(relays, key=relay_cost)
    relay_step = relay.step_s if relay is not None else decode.step_s

    # the prefill kinds the chosen decoder may pair with (pd-hetero: another GPU type)
    pairing = [c for c in at_home if arch.decode_gpu_allowed(c.gpu, decode.candidate.gpu)]
    kinds = _prefill_kinds_by_pool_cost(
        pairing, classes, Downstream(arch, line, decode.step_s, relay_step), workload, model, usd_per_rps
    )
    return Shape(arch, model, kinds[0], decode, relay, line, routing, line_options, tuple(kinds[1:]))


def _usable_decoders(inputs: InputSet, role: RoleName, prefill: list[Candidate]) -> list[DecoderCapacity[Candidate]]:
    """`role`'s candidates (the prefill ones unless the workload's `role_weights` store the model
    otherwise there) as decoders, those without pipeline stages (`OptimizeSetup.candidates_for`)
    that hold the longest prompt and meet the TPOT target."""
    workload, model = inputs.workload, inputs.model
    moments = workload_moments(workload)
    own = role in (workload.role_weights or {})
    kinds = instance_candidates(inputs, workload.serving.chunk_tokens, role) if own else prefill
    candidates = [c for c in kinds if c.pp == 1]
    decoders = [decoder_capacity(c, workload, model, moments.context_tokens, moments.output_tokens) for c in candidates]
    return [d for d in decoders if d.usable and holds_longest_prompt(d.candidate, workload)]


def _colocated_shape(inputs: InputSet, arch: Architecture, candidates: list[Candidate]) -> Shape:
    """Co-located serving's shape: every kind that holds the longest prompt, cheapest sized pool
    first (the rest are the fallbacks `size_plan` tries)."""
    workload = inputs.workload
    kinds = [c for c in candidates if holds_longest_prompt(c, workload)]
    if not kinds:
        raise InfeasibleError(
            f"no instance kind holds the KV of the longest prompt ({workload.prompt_tokens.largest():,} tokens)"
        )
    costs = {id(c): _colocated_pool_cost(workload, inputs.model, c) for c in kinds}
    kinds.sort(key=lambda c: costs[id(c)])
    return Shape(arch, inputs.model, kinds[0], None, None, None, None, (), tuple(kinds[1:]))


def _colocated_pool_cost(workload: Workload, model: ModelArchitecture, candidate: Candidate) -> float:
    """$/h of the smallest co-located pool of `candidate` carrying the workload's rate (inf if none)."""
    try:
        count, _ = _colocated_count(workload, model, candidate)
    except InfeasibleError:
        return math.inf
    return count * candidate.usd_per_hour


def _colocated_count(workload: Workload, model: ModelArchitecture, candidate: Candidate) -> tuple[int, float]:
    """The fewest co-located instances of `candidate` that carry the workload's rate within the SLA
    (`colocated_capacity`) and hold its prefix cache (`prefill_cache_count`), and the rate that
    pool carries within the SLA."""
    rate = workload.arrival.rate_rps
    classes = workload_classes(
        workload,
        model,
        candidate.instance,
        workload.serving.chunk_tokens,
        None,
        planning_effects(workload, candidate.instance),
    )
    mean_s = float(classes.prefill_s @ classes.input_prob)
    top = min(MAX_POOL, max(math.ceil(rate * mean_s * 2) + 8, 8), max(candidate.max_count, 1))
    sizes = np.arange(1, top + 1)
    caps = colocated_capacity(candidate, classes, workload, sizes, UNBOUNDED_RATE, 1.0)
    enough = np.nonzero(caps >= rate * (1 - 1e-9))[0]
    if len(enough) == 0:
        raise InfeasibleError(f"no pool of up to {top} x {candidate.key} meets the SLA at {rate:g} req/s")
    count = max(int(sizes[enough[0]]), prefill_cache_count(candidate, workload, model, rate))
    return count, float(caps[min(count, top) - 1])


def _choose_line(
    inputs: InputSet,
    downstream: Downstream,
    classes: RequestClasses,
    decoders: list[Instance],
) -> tuple[LinePool | None, PathLoad, tuple[LinePool, ...]]:
    """(line pool, its path load, the pools of its direction): the cheapest pool leaving the home
    datacenter whose bytes capacity carries the rate, else the largest; none over RDMA."""
    if not downstream.architecture.uses_wan:
        return None, RDMA_PATH, ()
    workload = inputs.workload
    home, rate = workload.deployment.home, workload.arrival.rate_rps
    lines = [pool for pool in wan_configs(inputs) if pool.source == home]
    if not lines:
        raise InfeasibleError(f"no WAN line option leaves the home datacenter {home}")
    handoff = Handoff(mode="adaptive")
    loads = path_loads([replace(downstream, line=pool) for pool in lines], classes, rate, decoders, handoff)
    enough = [(pool, ld) for pool, ld in zip(lines, loads, strict=True) if ld.max_rate >= rate]
    line, load = (
        min(enough, key=lambda pair: pair[0].usd_per_hour)
        if enough
        else max(zip(lines, loads, strict=True), key=lambda pair: pair[1].max_rate)
    )
    return line, load, tuple(pool for pool in lines if pool.target == line.target)


def _cheapest_line(shape: Shape, classes: RequestClasses, rate: float) -> LinePool | None:
    """The cheapest line pool of the shape's direction whose capacity carries the rate's bytes
    (0.9 * E[available capacity] >= rate * E[bytes]); the largest when none does."""
    if shape.line is None:
        return None
    options = shape.line_options or (shape.line,)
    need = rate * float(classes.wan_bytes @ classes.input_prob)
    enough = [pool for pool in options if WAN_MAX_UTILIZATION * pool.mean_capacity_bytes_per_s() >= need]
    if enough:
        return min(enough, key=lambda pool: (pool.usd_per_hour, -pool.capacity_bytes_per_s))
    return max(options, key=lambda pool: pool.capacity_bytes_per_s)


def size_plan(workload: Workload, shape: Shape, name: str | None = None) -> SizedPlan:
    """The smallest instance counts of `shape` that carry the workload's rate within the SLA
    (`size_counts`); when no pool of its prefill kind meets the TTFT SLA, of its next prefill kind
    (`Shape.prefill_fallbacks`), and so on; the first kind's error when none does."""
    try:
        return size_counts(workload, shape, name)
    except InfeasibleError as first:
        for kind in shape.prefill_fallbacks:
            try:
                return size_counts(workload, replace(shape, prefill=kind), name)
            except InfeasibleError:
                continue
        raise first from None


def size_counts(workload: Workload, shape: Shape, name: str | None = None) -> SizedPlan:
    """The smallest instance counts of `shape` that carry the workload's rate within the SLA.

    decode: ceil(rate / per-instance rate), the slot wait pooled over the fewest instances that
    could carry the main decoders' load; relay: ceil(rate / per-instance rate) on one instance's
    slots; prefill: the smallest pool whose TTFT-limited capacity reaches the rate. The view is
    the plan's capacity view (each role's slot wait pooled over its count).
    """
    model = shape.model
    rate = workload.arrival.rate_rps
    arch = shape.architecture
    if shape.decode is None:  # co-located: one role
        count, carried = _colocated_count(workload, model, shape.prefill)
        plan = Plan(
            name=name or f"{workload.name}-{arch.name}-sized", architecture=arch.name, prefill=shape.prefill.role(count)
        )
        _check_inventory(plan, workload)
        classes = workload_classes(
            workload,
            model,
            shape.prefill.instance,
            workload.serving.chunk_tokens,
            None,
            planning_effects(workload, shape.prefill.instance),
        )
        view = fluid_view(
            {"prefill": RolePool(carried / count, count, shape.prefill.gpus_per_instance, shape.prefill.usd_per_hour)},
            None,
            revenue_per_request(workload, classes),
            prefill_token_throughputs(classes, shape.prefill.gpus_per_instance),
        )
        return SizedPlan(plan, view)
    relay_rule = arch.relay_rule(shape.routing) if shape.routing is not None else None
    effects = planning_effects(workload, shape.prefill.instance)
    classes = workload_classes(
        workload, model, shape.prefill.instance, workload.serving.chunk_tokens, relay_rule, effects
    )
    mean_output = classes.mean_output_tokens
    decode, relay = shape.decode, shape.relay
    handoff = Handoff(mode="adaptive")
    relay_step = relay.step_s if relay is not None else decode.step_s
    line = _cheapest_line(shape, classes, rate)
    downstream = Downstream(arch, line, decode.step_s, relay_step)
    load = path_load(downstream, classes, rate, [decode.candidate.instance], handoff)
    drc = decode_cache_bytes_per_rps(workload, model, arch.caches)
    context = classes.mean_context_tokens

    def pooled(cap: DecoderCapacity[Candidate], instances: int) -> DecoderCapacity[Candidate]:
        return decoder_capacity(cap.candidate, workload, model, context, mean_output, instances)

    prefill_count, carried = _prefill_pool(shape.prefill, classes, downstream, workload, model, rate)
    counts = {"prefill": prefill_count, "decode": _decode_count(decode, workload, model, classes, load, drc, rate)}
    rates = {
        "prefill": carried / prefill_count,
        "decode": decoder_rate(pooled(decode, counts["decode"]), load, mean_output, drc),
    }
    kinds = {"prefill": shape.prefill, "decode": decode.candidate}
    if relay is not None:
        counts["relay"] = _relay_count(relay, load, rate)
        kinds["relay"] = relay.candidate
        rates["relay"] = relay_rate(pooled(relay, counts["relay"]), load)
    wan = [WanLease(option=option.name, count=count) for option, count in line.leases] if line else []

    def role(key: str) -> RoleSpec:
        return kinds[key].role(counts[key])

    plan = Plan(
        name=name or f"{workload.name}-{arch.name}-sized",
        architecture=arch.name,
        prefill=role("prefill"),
        relay=role("relay") if relay is not None else None,
        decode=role("decode"),
        wan=wan,
        routing=shape.routing or Routing(),
        handoff=handoff,
    )
    _check_inventory(plan, workload)
    view = fluid_view(
        {
            key: RolePool(rates[key], counts[key], kinds[key].gpus_per_instance, kinds[key].usd_per_hour)
            for key in ("prefill", "decode", "relay")
            if key in rates
        },
        (load.max_rate, line.usd_per_hour) if line is not None else None,
        revenue_per_request(workload, classes),
        prefill_token_throughputs(classes, shape.prefill.gpus_per_instance),
    )
    return SizedPlan(plan, view)


def _prefill_pool(
    kind: Candidate,
    classes: RequestClasses,
    downstream: Downstream,
    workload: Workload,
    model: ModelArchitecture,
    rate: float,
    least: int = 1,
) -> tuple[int, float]:
    """(count, rate within the TTFT SLA): the smallest pool of `kind` whose TTFT-limited capacity
    (`prefill_capacity`) reaches `rate`, at least as many as hold the prefix cache
    (`prefill_cache_count`), and the capacity of that smallest pool; InfeasibleError when no
    pool of up to top = max(2 rate E[prefill s] + 8, 8) instances (at most MAX_POOL) reaches it.
    Pools below `least` (known to fall short) are not sized."""
    mean_s = float(classes.prefill_s @ classes.input_prob)
    top = min(MAX_POOL, max(math.ceil(rate * mean_s * 2) + 8, 8))
    sizes = np.arange(min(least, top), top + 1)
    caps = prefill_capacity(kind, classes, downstream, workload, sizes, UNBOUNDED_RATE, 1.0)
    enough = np.nonzero(caps >= rate * (1 - 1e-9))[0]
    if len(enough) == 0:
        raise InfeasibleError(f"no pool of up to {top} x {kind.key} meets the TTFT SLA at {rate:g} req/s")
    return max(int(sizes[enough[0]]), prefill_cache_count(kind, workload, model, rate)), float(caps[enough[0]])


def _prefill_kinds_by_pool_cost(
    kinds: list[Candidate],
    classes: dict[int, RequestClasses],
    downstream: Downstream,
    workload: Workload,
    model: ModelArchitecture,
    usd_per_rps: Callable[[Candidate], float],
) -> list[Candidate]:
    """`kinds` (classes by `id`) by the $/h of their smallest pool carrying the workload's rate
    within the TTFT SLA (`_prefill_pool`), ties and pools that none carries by `usd_per_rps`. A
    pool of n instances serves less than n / E[P], P a request's work fully packed
    (`pddplan.evaluate.prefill_queue`), so a kind's pool has at least max(floor(rate E[P]), 1)
    instances, and at least as many as hold the prefix cache: kinds are sized in the order of
    that floor's cost until it exceeds the cheapest pool found; the rest follow by `usd_per_rps`."""
    rate = workload.arrival.rate_rps
    floors: dict[int, int] = {}
    for c in kinds:
        least_work_s = float(classes[id(c)].prefill_work_s @ classes[id(c)].input_prob)
        with contextlib.suppress(InfeasibleError):  # no room for the prefix cache: no pool
            floors[id(c)] = max(math.floor(rate * least_work_s), 1, prefill_cache_count(c, workload, model, rate))

    def floor_usd(c: Candidate) -> float:
        return floors[id(c)] * c.usd_per_hour if id(c) in floors else math.inf

    costs: dict[int, tuple[float, float]] = {}
    for c in sorted(kinds, key=lambda c: (floor_usd(c), usd_per_rps(c))):
        if costs and floor_usd(c) > min(costs.values())[0]:
            break  # no pool of this kind, or of the kinds after it, undercuts the cheapest found
        try:
            count, _ = _prefill_pool(c, classes[id(c)], downstream, workload, model, rate, floors.get(id(c), 1))
            pool_usd = count * c.usd_per_hour
        except InfeasibleError:
            pool_usd = math.inf
        costs[id(c)] = (pool_usd, usd_per_rps(c))
    return sorted(kinds, key=lambda c: (id(c) not in costs, costs.get(id(c), (math.inf, usd_per_rps(c)))))


def _decode_count(
    decode: DecoderCapacity[Candidate],
    workload: Workload,
    model: ModelArchitecture,
    classes: RequestClasses,
    load: PathLoad,
    drc: float,
    rate: float,
) -> int:
    """ceil(rate / per-instance rate), the slot wait pooled over the fewest instances that could
    carry the main decoders' load (`pool_size_estimate`); InfeasibleError when an instance
    carries nothing within the TPOT SLA."""
    mean_output, context = classes.mean_output_tokens, classes.mean_context_tokens
    least = pool_size_estimate(rate * load.md_load_fraction, decode.batch, decode.step_s, mean_output)
    pooled = decoder_capacity(decode.candidate, workload, model, context, mean_output, least)
    per_instance = decoder_rate(pooled, load, mean_output, drc)
    if per_instance <= 0:
        raise InfeasibleError(f"{decode.candidate.key} cannot decode within the TPOT SLA")
    return max(math.ceil(rate / per_instance - 1e-9), 1)


def _relay_count(relay: DecoderCapacity[Candidate], load: PathLoad, rate: float) -> int:
    """ceil(rate / per-instance rate) relay instances, each on its own slots (`relay_rate`);
    InfeasibleError when an instance carries nothing."""
    per_instance = relay_rate(relay, load)
    if per_instance <= 0:
        raise InfeasibleError(f"{relay.candidate.key} cannot relay within the TPOT SLA")
    return max(math.ceil(rate / per_instance - 1e-9), 1)


def prefill_cache_count(candidate: Candidate, workload: Workload, model: ModelArchitecture, rate: float) -> int:
    """The fewest prefill instances of `candidate` whose room holds the prefix cache at `rate`
    (`define_prefill_cache`): ceil(rate x bytes per req/s / bytes one instance holds)."""
    serving = workload.serving
    tiers, _ = instance_tiers(candidate.instance, serving.cache_tiers, serving.host_memory_utilization)
    longest = float(request_kv_bytes(model, workload.prompt_tokens.largest(), serving.page_tokens))
    room = max(candidate.kv_capacity_bytes - longest, 0.0) + sum(t.capacity_bytes for t in tiers)
    need = rate * prefill_cache_bytes_per_rps(workload, model)
    if need <= 0:
        return 1
    if room <= 0:
        raise InfeasibleError(f"{candidate.key} has no room for the prefix cache")
    return max(math.ceil(need / room - 1e-9), 1)


def _check_inventory(plan: Plan, workload: Workload) -> None:
    """InfeasibleError when the plan uses more GPUs of a type in a datacenter than it offers."""
    used: dict[tuple[str, str], int] = {}
    for spec in plan.roles().values():
        used[(spec.datacenter, spec.gpu)] = used.get((spec.datacenter, spec.gpu), 0) + spec.gpus
    for (dc, gpu), gpus in used.items():
        offered = next(o.max_count for o in workload.deployment.datacenter(dc).gpus if o.type == gpu)
        if gpus > offered:
            raise InfeasibleError(f"the sized plan needs {gpus} x {gpu} in {dc}, which offers {offered}")


def relay_on_prefill_if_cheaper(sized: SizedPlan, inputs: InputSet) -> SizedPlan:
    """`sized` with its dedicated relay moved onto the prefill instances (with as few more of them
    as `relay_placements` tries, cheapest first) when the closed form says that plan meets the SLA
    at no higher cost; otherwise `sized` as it is."""

    groups = relay_placements(sized.plan)
    if len(groups) < 2:
        return sized
    try:
        dedicated_usd_per_hour = build_scenario(sized.plan, inputs, source="sized plan").cost_per_hour
    except InputError as error:  # more GPUs than a datacenter offers: no plan of this shape
        raise InfeasibleError(str(error)) from None
    for plan in groups[-1]:
        try:
            scenario = build_scenario(plan, inputs, source="sized plan")
        except InputError:  # more prefill instances than the datacenter offers
            return sized
        if scenario.cost_per_hour > dedicated_usd_per_hour:
            return sized
        if evaluate(scenario).sla_met:
            return SizedPlan(plan, capacity_view(scenario))
    return sized
