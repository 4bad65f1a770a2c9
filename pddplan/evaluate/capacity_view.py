"""A plan's capacity view: how many requests/s each role's instances sustain within the SLA, which
role binds, and the fluid economics (what a request costs when every role runs at its SLA limit).

Per instance, within the SLA (see `pddplan.evaluate.capacity`):
  prefill   cap(n) / n, cap the largest rate a pool of the plan's n instances sustains with the
            TTFT targets met;
  decode    min(r / a, M / (a E[O] tau KV_seq + retention E[prompt KV])): compute (r requests/s of
            full outputs, a the share of output work done here) or memory (running KV and radix
            cache), whichever binds;
  relay     u* B*_R / E[hold per request] (Little's law); on the prefill instances, B*_R is what
            their KV room holds beside the prefill in flight, and prefill is slowed by its tokens;
  WAN       0.9 * E[available capacity] / E[bytes per request] for the plan's lines.
Plan capacity = min over roles of count * per-instance capacity. Fluid economics:
  gpus_per_rps = sum over roles of GPUs per instance (tp x pp) / per-instance capacity;
  cost_per_request = (sum over roles of $/h per instance / capacity + $/h of lines / WAN capacity) / 3600;
  throughput per GPU-hour = 3600 / gpus_per_rps;  BCR = 1 / cost_per_request (requests per $);
  revenue per cost = revenue per request / cost per request;
  prefill tokens per GPU-second = E[new tokens] / E[prefill time] / GPUs per instance (service physics,
  no queue).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from pddplan.cache.accounting import decode_cache_bytes_per_rps
from pddplan.cache.sessions import CacheKind
from pddplan.evaluate.analytic import colocated_load, colocated_relay_max_batch
from pddplan.evaluate.capacity import (
    DecoderCapacity,
    Downstream,
    K,
    PathLoad,
    colocated_capacity,
    decoder_capacity,
    path_load,
    prefill_capacity,
)
from pddplan.evaluate.classes import RequestClasses, request_classes
from pddplan.evaluate.outputs import Capacity
from pddplan.evaluate.verdict import revenue_per_request
from pddplan.perf.kv import request_kv_bytes
from pddplan.scenarios.scenario import Scenario
from pddplan.scenarios.split import PoolPart, pool_parts

UNBOUNDED_RATE = 1e9


@dataclass(frozen=True)
class CapacityView:
    """Capacities and fluid economics of one plan under one workload."""

    max_rate_rps: float
    bottleneck: str
    per_instance_rps: dict[str, float]
    prefill_tokens_per_gpu_s: float
    prefill_tokens_per_gpu_s_alone: float
    throughput_per_gpu_hour: float
    cost_per_request_usd: float
    bcr: float
    revenue_per_request_usd: float
    revenue_per_cost: float
    margin_per_request_usd: float
    limits: dict[str, str] = field(default_factory=dict)  # per role, the term that sets its capacity

    def to_output(self) -> Capacity:
        """The typed capacity view `evaluate --json` prints under `capacity`."""
        return Capacity(
            limits=self.limits,
            max_rate_rps=self.max_rate_rps,
            bottleneck=self.bottleneck,
            per_instance_rps=self.per_instance_rps,
            prefill_tokens_per_gpu_s=self.prefill_tokens_per_gpu_s,
            prefill_tokens_per_gpu_s_alone=self.prefill_tokens_per_gpu_s_alone,
            throughput_per_gpu_hour=self.throughput_per_gpu_hour,
            cost_per_request_usd=self.cost_per_request_usd,
            fluid_bcr=self.bcr,
            revenue_per_request_usd=self.revenue_per_request_usd,
            revenue_per_cost=self.revenue_per_cost,
            margin_per_request_usd=self.margin_per_request_usd,
        )


#: the terms that may bind a role's capacity, as `limits` names them
DECODE_COMPUTE = "decode steps within the TPOT target"
DECODE_MEMORY = "HBM for the running sequences"
DECODE_CACHE = "radix cache beyond the tiers below HBM"
PREFILL_TTFT = "prefill within the TTFT targets"
PREFILL_CACHE = "room for the prefix cache"
COLOCATED_SLA = "prefill and decode together within the TTFT and TPOT targets"


def decoder_limits(
    cap: DecoderCapacity[K], load: PathLoad, mean_output: float, cache_bytes_per_rps: float
) -> dict[str, float]:
    """Requests/s one decode instance carries by each term (0 if unusable): compute r / a; its HBM
    M / running; HBM and the tiers below for running sequences and the radix cache,
    (M + L) / (running + cache) (`DecoderCapacity.memory_rate`)."""
    if not cap.usable:
        return {DECODE_COMPUTE: 0.0}
    here = load.md_load_fraction * mean_output
    running = cap.running_bytes_per_rps(here)
    terms = {
        DECODE_COMPUTE: cap.requests_per_s / max(load.md_load_fraction, 1e-12),
        DECODE_MEMORY: cap.memory_bytes / running if running > 0 else math.inf,
    }
    if cache_bytes_per_rps > 0:
        terms[DECODE_CACHE] = (cap.memory_bytes + cap.lower_tier_bytes) / (running + cache_bytes_per_rps)
    return terms


def decoder_rate(cap: DecoderCapacity[K], load: PathLoad, mean_output: float, cache_bytes_per_rps: float) -> float:
    """Requests/s one decode instance carries: the least of its `decoder_limits`."""
    return min(decoder_limits(cap, load, mean_output, cache_bytes_per_rps).values())


def relay_rate(cap: DecoderCapacity[K], load: PathLoad) -> float:
    """Requests/s (of all traffic) one relay instance carries: u* B*_R / E[hold per request]."""
    return cap.occupancy / load.relay_hold_s if load.relay_hold_s > 0 else math.inf


@dataclass(frozen=True)
class RolePool:
    """One role's instances for the fluid view: per-instance capacity (req/s), count, GPUs per
    instance and $ per instance-hour."""

    rate_rps: float
    count: int
    gpus_per_instance: int
    usd_per_hour: float


def fluid_view(
    roles: dict[str, RolePool],
    wan: tuple[float, float] | None,
    revenue: float,
    prefill_tokens_per_gpu_s: tuple[float, float],
) -> CapacityView:
    """Bottleneck and fluid economics from per-instance capacities (the module docstring's formulas);
    `wan` = (the lines' capacity in req/s, their $ per hour), None without lines;
    `prefill_tokens_per_gpu_s` = (packed, alone), see `prefill_token_throughputs`."""
    rates = {name: pool.rate_rps for name, pool in roles.items()}
    counts = {name: pool.count for name, pool in roles.items()}
    gpus = {name: pool.gpus_per_instance for name, pool in roles.items()}
    usd_per_instance_hour = {name: pool.usd_per_hour for name, pool in roles.items()}
    wan_rate, wan_usd_per_hour = wan if wan is not None else (None, 0.0)
    totals = {name: counts[name] * rate for name, rate in rates.items()}
    if wan_rate is not None:
        totals["wan"] = wan_rate
    bottleneck = min(totals, key=lambda name: totals[name])
    gpus_per_rps = 0.0
    cost_per_second = 0.0
    for name, rate in rates.items():
        gpus_per_rps += gpus[name] / rate if rate > 0 else math.inf
        cost_per_second += usd_per_instance_hour[name] / rate if rate > 0 else math.inf
    if wan_rate is not None:
        cost_per_second += wan_usd_per_hour / wan_rate if wan_rate > 0 else math.inf
    cost = cost_per_second / 3600.0
    return CapacityView(
        max_rate_rps=float(totals[bottleneck]),
        bottleneck=bottleneck,
        per_instance_rps=dict(rates),
        prefill_tokens_per_gpu_s=prefill_tokens_per_gpu_s[0],
        prefill_tokens_per_gpu_s_alone=prefill_tokens_per_gpu_s[1],
        throughput_per_gpu_hour=3600.0 / gpus_per_rps if gpus_per_rps > 0 else 0.0,
        cost_per_request_usd=cost,
        bcr=1.0 / cost if cost > 0 else 0.0,
        revenue_per_request_usd=revenue,
        revenue_per_cost=revenue / cost if cost > 0 else 0.0,
        margin_per_request_usd=revenue - cost,
    )


def capacity_view(scenario: Scenario, classes: RequestClasses | None = None) -> CapacityView:
    """The capacity view of `scenario` (see the module docstring)."""
    if scenario.plan.split is not None:
        return _split_view(scenario)
    workload, model, plan = scenario.workload, scenario.model, scenario.plan
    classes = classes or request_classes(scenario)
    if scenario.architecture.colocated:
        return _colocated_view(scenario, classes)
    mean_output = classes.mean_output_tokens
    context = classes.mean_context_tokens
    decode = decoder_capacity(scenario.decode, workload, model, context, mean_output, scenario.decode.count)
    relay_role = scenario.relay
    if relay_role is not None and scenario.relay_colocated:
        # room beside the prefill in flight; prefill slowed by the relay's tokens at the plan's rate
        room = colocated_relay_max_batch(scenario, context) * float(
            request_kv_bytes(model, context, workload.serving.page_tokens)
        )
        relay_role = replace(relay_role, kv_capacity_bytes=room)
        classes, colocated_step = colocated_load(scenario, classes, scenario.rate_rps)
    relay = (
        decoder_capacity(relay_role, workload, model, context, mean_output, relay_role.count)
        if relay_role is not None
        else None
    )
    relay_step = relay.step_s if relay is not None else decode.step_s
    if scenario.relay_colocated:
        relay_step = colocated_step
    downstream = Downstream(scenario.architecture, scenario.link, decode.step_s, relay_step, scenario.relay_colocated)
    load = path_load(downstream, classes, scenario.rate_rps, [scenario.decode.instance], plan.handoff)
    pool = prefill_capacity(
        scenario.prefill, classes, downstream, workload, np.array([scenario.prefill.count]), UNBOUNDED_RATE, 1.0
    )
    decode_terms = decoder_limits(
        decode, load, mean_output, decode_cache_bytes_per_rps(workload, model, scenario.architecture.caches)
    )
    prefill_terms = {PREFILL_TTFT: float(pool[0]) / scenario.prefill.count}
    cache_rate = prefill_cache_rate(scenario)
    if cache_rate is not None:
        prefill_terms[PREFILL_CACHE] = cache_rate
    limits = {
        "prefill": min(prefill_terms, key=prefill_terms.__getitem__),
        "decode": min(decode_terms, key=decode_terms.__getitem__),
    }
    rates = {"prefill": prefill_terms[limits["prefill"]], "decode": decode_terms[limits["decode"]]}
    if relay is not None:
        rates["relay"] = relay_rate(relay, load)
    pools: dict[str, RolePool] = {}
    for name, role in scenario.roles.items():
        pools[name] = RolePool(rates[name], role.count, role.gpus_per_instance, role.usd_per_hour / role.count)
    if "relay" in rates and "relay" not in pools:  # on the prefill instances: their GPUs, priced there
        pools["relay"] = RolePool(rates["relay"], scenario.prefill.count, 0, 0.0)
    link = scenario.link
    view = fluid_view(
        pools,
        (load.max_rate, link.usd_per_hour) if link is not None else None,
        revenue_per_request(workload, classes),
        prefill_token_throughputs(classes, scenario.prefill.gpus_per_instance),
    )
    return replace(view, limits=limits)


def prefill_cache_rate(scenario: Scenario) -> float | None:
    """Requests/s whose prefix cache one prefill instance has room for: (its tiers below HBM + its
    KV room beside the longest prompt) / bytes per request/s (None without a cache to hold)."""
    prefix = scenario.cache(CacheKind.PREFILL, 1.0)  # per request/s
    if prefix is None or prefix.placement.demand_bytes <= 0:
        return None
    room = sum(t.capacity_bytes for t in prefix.placement.tiers) + max(
        scenario.prefill.kv_capacity_bytes - scenario.longest_prompt_kv_bytes, 0.0
    )
    return room / prefix.placement.demand_bytes


def _colocated_view(scenario: Scenario, classes: RequestClasses) -> CapacityView:
    """Co-located serving: one role does both, its capacity `colocated_capacity` of its pool (the
    TTFT and TPOT targets and its KV room together), or its room for the prefix cache."""
    prefill = scenario.prefill
    pool = colocated_capacity(prefill, classes, scenario.workload, np.array([prefill.count]), UNBOUNDED_RATE, 1.0)
    terms = {COLOCATED_SLA: float(pool[0]) / prefill.count}
    cache_rate = prefill_cache_rate(scenario)
    if cache_rate is not None:
        terms[PREFILL_CACHE] = cache_rate
    limit = min(terms, key=terms.__getitem__)
    view = fluid_view(
        {
            "prefill": RolePool(
                terms[limit], prefill.count, prefill.gpus_per_instance, prefill.usd_per_hour / prefill.count
            )
        },
        None,
        revenue_per_request(scenario.workload, classes),
        prefill_token_throughputs(classes, prefill.gpus_per_instance),
    )
    return replace(view, limits={"prefill": limit})


def _pool_views(scenario: Scenario) -> list[tuple[PoolPart, CapacityView]]:
    """Each pool of a split plan with its own view (`_colocated_view` at its share)."""
    return [(part, _colocated_view(part.scenario, request_classes(part.scenario))) for part in pool_parts(scenario)]


def _split_view(scenario: Scenario) -> CapacityView:
    """A plan split over two co-located pools at shares s_i: each pool's own view (`_colocated_view`
    at its share); the plan as written carries min_i cap_i / s_i (the pool that fills first binds);
    the fluid economics run every pool at its limit, sum_i cap_i requests/s for the pools' summed
    cost and GPUs; revenue per request and prefill token rates are the s_i-weighted means."""
    views = _pool_views(scenario)
    carried = {part.role: view.max_rate_rps / part.share for part, view in views}
    bottleneck = min(carried, key=carried.__getitem__)
    rate = sum(view.max_rate_rps for _, view in views)
    usd_per_hour = sum(part.scenario.cost_per_hour for part, _ in views)
    gpus = sum(part.scenario.prefill.gpus for part, _ in views)
    cost = usd_per_hour / 3600.0 / rate if rate > 0 else math.inf
    revenue = sum(part.share * view.revenue_per_request_usd for part, view in views)

    def mean(figure: str) -> float:
        return float(sum(part.share * getattr(view, figure) for part, view in views))

    return CapacityView(
        max_rate_rps=carried[bottleneck],
        bottleneck=bottleneck,
        per_instance_rps={part.role: view.per_instance_rps["prefill"] for part, view in views},
        prefill_tokens_per_gpu_s=mean("prefill_tokens_per_gpu_s"),
        prefill_tokens_per_gpu_s_alone=mean("prefill_tokens_per_gpu_s_alone"),
        throughput_per_gpu_hour=3600.0 * rate / gpus if gpus > 0 else 0.0,
        cost_per_request_usd=cost,
        bcr=1.0 / cost if cost > 0 else 0.0,
        revenue_per_request_usd=revenue,
        revenue_per_cost=revenue / cost if cost > 0 else 0.0,
        margin_per_request_usd=revenue - cost,
        limits={part.role: view.limits["prefill"] for part, view in views},
    )


def rebalanced(scenario: Scenario) -> tuple[Scenario, str]:
    """A split plan with its requests divided in proportion to its pools' capacities within the SLA,
    s = cap_split / (cap_prefill + cap_split), as `optimize` divides them and as a router that
    balances by load moves them after a pool loses an instance, with the move in words; a plan
    without a split as it is (and no words)."""
    split = scenario.plan.split
    if split is None:
        return scenario, ""
    caps = {part.role: view.max_rate_rps for part, view in _pool_views(scenario)}
    total = caps["prefill"] + caps["split"]
    if not total > 0:
        return scenario, ""
    share = min(max(caps["split"] / total, 1e-9), 1.0 - 1e-9)
    pool = split.model_copy(update={"share": share})
    roles = {**scenario.roles, "split": replace(scenario.roles["split"], spec=pool)}
    before, after = f"{split.share:.0%}", f"{share:.0%}"
    moved = f"the split pool's share of requests {before} -> {after}" if before != after else ""
    return replace(scenario, plan=scenario.plan.model_copy(update={"split": pool}), roles=roles), moved


def prefill_token_throughputs(classes: RequestClasses, gpus: int) -> tuple[float, float]:
    """(packed, alone) prefill throughputs of `prefill_token_throughput`."""
    return prefill_token_throughput(classes, gpus, packed=True), prefill_token_throughput(classes, gpus, packed=False)


def prefill_token_throughput(classes: RequestClasses, gpus: int, packed: bool = True) -> float:
    """New tokens a prefill GPU processes per second when busy: E[new tokens] / E[engine time] / GPUs
    per instance.

    The step-time physics alone, before queueing. `packed`: chunked prefill packs requests into full
    steps (`RequestClasses.prefill_work_s`), so a small tail chunk shares a step's weight reads with
    the next request's tokens (under data-parallel attention each rank still steps its own
    request's chunks, in lockstep with the others, so there the tail chunk keeps its cost). Not
    packed: one request at a time (`prefill_alone_s`), where a small tail chunk pays a whole step
    for few tokens, which shows as a dip just before each hit rate where the tail chunk vanishes."""
    engine_s = classes.prefill_work_s if packed else classes.prefill_alone_s
    mean_s = float(engine_s @ classes.input_prob)
    return float(classes.new_tokens @ classes.input_prob) / mean_s / gpus if mean_s > 0 else 0.0
