"""The integer program, built by named `define_*` functions (variables, constraints, objective).

Sets: P prefill candidates c with pool sizes n; D decode and R relay candidates; K WAN line pools
(directed datacenter pairs with line counts); over RDMA, datacenters h instead of pools.
Every constraint is named after what it means, so an infeasibility report points at its builder.
What only some architectures need (a relay, a rule on the decode GPU type) follows from what the
architecture is (`define_architecture_constraints`), never from its name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pulp

from pddplan.architectures import DecodeGpu
from pddplan.optimize.linear import plain_sum, weighted_sum
from pddplan.optimize.options import Mode

if TYPE_CHECKING:
    from pddplan.architectures import Architecture
    from pddplan.evaluate.capacity import DecoderCapacity, PathLoad
    from pddplan.net.lines import LinePool
    from pddplan.optimize.candidates import Candidate

SLACK_FAMILIES = (
    "prefill-capacity",
    "decode-capacity",
    "decode-memory",
    "prefill-cache",
    "relay-capacity",
    "wan-bandwidth",
    "inventory",
    "budget",
)


@dataclass
class ProblemData:
    """Numbers the program is built from (see `pddplan.evaluate.capacity`)."""

    architecture: Architecture
    prefill: list[Candidate]
    prefill_caps: dict[tuple[int, int], np.ndarray]  # (prefill candidate, pool) -> rate per pool size 1..N
    decode: list[DecoderCapacity[Candidate]]
    relay: list[DecoderCapacity[Candidate]]
    pools: list[PathLoad]  # one per line pool; a single entry without a line for pd-intra
    datacenters: list[str]
    decode_cache_bytes_per_rps: float  # the main decoders' radix cache (`pddplan.cache`); 0 without one
    mean_output_tokens: float
    inventory: dict[tuple[str, str], int]
    rate_ceiling: float
    mode: Mode = "bcr"
    target_rate: float | None = None
    budget_per_hour: float | None = None
    min_served_fraction: float = 1.0
    # prefill candidate -> relay sequences one of its instances holds beside a prefill in flight
    # (u* B*): the relay may run on the prefill instances instead (empty: it may not)
    colocated_relay: dict[int, float] = field(default_factory=dict)
    # the prefill instances' prefix cache: bytes per request/s, and per prefill candidate the bytes
    # one instance holds for it (HBM beside the prompt in flight, plus its tiers below HBM)
    prefill_cache_bytes_per_rps: float = 0.0
    prefill_cache_room: dict[int, float] = field(default_factory=dict)
    # co-located serving: how many pools (of different GPU types in the pool's datacenter) may split
    # the requests (each at most its capacity; `pddplan.scenarios.split`)
    colocated_pools: int = 1
    # Elastic diagnosis: a slack on each named family (weighted in the objective by
    # `slack_weights`, default 1 per unit), and instance counts no longer capped by `max_count`
    # (the inventory constraint, with its own slack per GPU type, stands for the offer instead).
    elastic: bool = False
    elastic_families: tuple[str, ...] = SLACK_FAMILIES
    slack_weights: dict[str, float] = field(default_factory=dict)

    @property
    def rate_unit(self) -> float:
        """The unit of the program's rate variables (req/s): the largest rate it may serve. Rates
        are solved as fractions of it, so a tiny rate (1e-9 req/s) is not lost in the solver's
        absolute feasibility tolerance."""
        return max(self.rate_ceiling, self.target_rate or 0.0)

    def pool_location(self, k: int) -> tuple[str, str]:
        """(prefill/relay datacenter, decode datacenter) of pool k."""
        line = self.pools[k].line
        if line is None:
            return self.datacenters[k], self.datacenters[k]
        return line.source, line.target

    def count_bound(self, cap: DecoderCapacity[Candidate]) -> int:
        """Most instances of one decode or relay kind: its offer's max_count; when elastic, also enough
        to carry the whole rate alone, ceil(rate * max(1 / r_d, memory per req/s / M_d, hold / occupancy)) + 1."""
        if not self.elastic:
            return cap.candidate.max_count
        rate = self.rate_unit
        hold = max((load.relay_hold_s for load in self.pools), default=0.0)
        memory_rate = cap.memory_rate(self.mean_output_tokens, self.decode_cache_bytes_per_rps)
        per_rps = [
            1 / cap.requests_per_s if cap.requests_per_s > 0 else 0.0,
            1 / memory_rate if memory_rate > 0 else 0.0,
            hold / cap.occupancy if cap.occupancy > 0 else 0.0,
        ]
        return max(cap.candidate.max_count, math.ceil(rate * max(per_rps)) + 1)


@dataclass
class Variables:
    """Decision variables by family."""

    prefill: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)  # (c, n) binary
    decode_count: dict[int, pulp.LpVariable] = field(default_factory=dict)
    decode_pick: dict[int, pulp.LpVariable] = field(default_factory=dict)
    relay_count: dict[int, pulp.LpVariable] = field(default_factory=dict)
    relay_pick: dict[int, pulp.LpVariable] = field(default_factory=dict)
    relay_on_prefill: Any = None  # binary: the relay runs on the prefill instances
    colocated_supply: Any = None  # the relay sequences they then offer
    pool: dict[int, pulp.LpVariable] = field(default_factory=dict)  # line pool or datacenter chosen
    pool_rate: dict[int, pulp.LpVariable] = field(default_factory=dict)
    rate: Any = None  # served rate / data.rate_unit, as are the pool rates
    slack: dict[str, Any] = field(default_factory=dict)  # family -> slack variable (or sum, for inventory)
    inventory_slack: dict[tuple[str, str], pulp.LpVariable] = field(default_factory=dict)

    def slack_of(self, family: str) -> Any:
        """The elastic slack of a constraint family (0 when not elastic)."""
        return self.slack.get(family, 0)


def define_variables(model: pulp.LpProblem, data: ProblemData) -> Variables:
    """Binaries for the prefill pool size, decode and relay type and the WAN pool; integers for
    decode and relay counts; continuous served rates per pool."""
    v = Variables()
    for (c, _pool), caps in data.prefill_caps.items():
        for n, cap in enumerate(caps, start=1):
            if cap > 0 and (c, n) not in v.prefill:
                v.prefill[(c, n)] = model.add_variable(f"prefill_{c}_n{n}", cat="Binary")
    for d, cap in enumerate(data.decode):
        if cap.usable:
            v.decode_pick[d] = model.add_variable(f"decode_pick_{d}", cat="Binary")
            v.decode_count[d] = model.add_variable(f"decode_count_{d}", 0, data.count_bound(cap), cat="Integer")
    if data.architecture.has_relay:
        for r, cap in enumerate(data.relay):
            if cap.usable:
                v.relay_pick[r] = model.add_variable(f"relay_pick_{r}", cat="Binary")
                v.relay_count[r] = model.add_variable(f"relay_count_{r}", 0, data.count_bound(cap), cat="Integer")
        if data.colocated_relay:
            v.relay_on_prefill = model.add_variable("relay_on_prefill", cat="Binary")
            v.colocated_supply = model.add_variable("colocated_relay_supply", 0)
    for k in range(len(data.pools)):
        v.pool[k] = model.add_variable(f"pool_{k}", cat="Binary")
        v.pool_rate[k] = model.add_variable(f"pool_rate_{k}", 0)
    v.rate = model.add_variable("served_rate", 0)
    if data.elastic:
        for name in data.elastic_families:
            if name == "inventory":
                for dc, gpu in data.inventory:
                    v.inventory_slack[(dc, gpu)] = model.add_variable(f"slack_inventory_{dc}_{gpu}", 0)
                v.slack[name] = pulp.lpSum(v.inventory_slack.values())
            else:
                v.slack[name] = model.add_variable(f"slack_{name.replace('-', '_')}", 0)
    return v


def pool_rps(data: ProblemData, v: Variables, k: int) -> Any:
    """Pool k's served rate in req/s (the variable holds it in units of `data.rate_unit`)."""
    return data.rate_unit * v.pool_rate[k]


def weighted_pool_rps(data: ProblemData, v: Variables, weight: Callable[[PathLoad], float]) -> Any:
    """sum_k w(load_k) * rate_k: the pools' served rates in req/s, each weighted by a figure of its load."""
    return weighted_sum((v.pool_rate[k], weight(data.pools[k]) * data.rate_unit) for k in v.pool)


def define_served_rate(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """One pool (line configuration, or datacenter over RDMA) carries the whole served rate:
    sum_k pool_k = 1;  rate = sum_k rate_k;  rate_k <= ceiling * pool_k."""
    model += pulp.lpSum(v.pool.values()) == 1, "one-pool"
    model += v.rate == pulp.lpSum(v.pool_rate.values()), "served-rate"
    for k in v.pool:
        model += v.pool_rate[k] <= data.rate_ceiling / data.rate_unit * v.pool[k], f"pool-rate-{k}"


def define_prefill_capacity(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """Prefill within the TTFT SLA: for every pool k, sum_{c,n} cap(c, n, k) * z(c, n) >= rate_k,
    one prefill kind and size (sum z = 1), placed at the pool's prefill datacenter. Co-located
    serving with `colocated_pools` P > 1 may split the requests over up to P pools, at most one
    per GPU type in a datacenter (1 <= sum z <= P): each pool serves at most its capacity, so each
    meets the SLA at its share, and so does their mixture (P(T > t) = sum_i s_i P(T_i > t))."""
    pools = data.colocated_pools if data.architecture.colocated else 1
    if pools == 1:
        model += plain_sum(v.prefill.values()) == 1, "one-prefill-pool"
    else:
        model += plain_sum(v.prefill.values()) >= 1, "a-prefill-pool"
        model += plain_sum(v.prefill.values()) <= pools, "co-located-pools"
        by_type: dict[tuple[str, str], list[pulp.LpVariable]] = {}
        for (c, _), z in v.prefill.items():
            by_type.setdefault((data.prefill[c].datacenter, data.prefill[c].gpu), []).append(z)
        for (dc, gpu), picks in by_type.items():
            if len(picks) > 1:
                model += pulp.lpSum(picks) <= 1, f"one-pool-of-{dc}-{gpu}"
    for k in v.pool:
        supply = weighted_sum(
            (z, float(data.prefill_caps[(c, k)][n - 1]))
            for (c, n), z in v.prefill.items()
            if (c, k) in data.prefill_caps and n <= len(data.prefill_caps[(c, k)])
        )
        model += supply + v.slack_of("prefill-capacity") >= pool_rps(data, v, k), f"prefill-capacity-{k}"
    homes: dict[str, Any] = {}  # datacenter -> the sum of the pools whose prefill sits there
    for (c, n), z in v.prefill.items():
        datacenter = data.prefill[c].datacenter
        if datacenter not in homes:
            homes[datacenter] = plain_sum(v.pool[k] for k in v.pool if data.pool_location(k)[0] == datacenter)
        model += z <= homes[datacenter], f"prefill-location-{c}-{n}"


def define_decode_capacity(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """Main decode within the TPOT SLA: sum_d r_d * count_d >= sum_k a_k * rate_k, r_d the full-output
    request rate of one instance at its TPOT-limited batch, a_k its share of the output work
    (eager tokens done by the relay, extend steps counted as tokens); one decode type, placed at
    the pool's decode datacenter."""
    if data.architecture.colocated:  # the prefill pool decodes too: its capacity holds both
        return
    model += pulp.lpSum(v.decode_pick.values()) == 1, "one-decode-kind"
    supply = pulp.lpSum(data.decode[d].requests_per_s * count for d, count in v.decode_count.items())
    demand = weighted_pool_rps(data, v, lambda load: load.md_load_fraction)
    model += supply + v.slack_of("decode-capacity") >= demand, "decode-capacity"
    for d, count in v.decode_count.items():
        candidate = data.decode[d].candidate
        model += count <= data.count_bound(data.decode[d]) * v.decode_pick[d], f"decode-pick-{d}"
        home = [k for k in v.pool if data.pool_location(k)[1] == candidate.datacenter]
        model += v.decode_pick[d] <= pulp.lpSum(v.pool[k] for k in home), f"decode-location-{d}"


def _running_gb_per_rps(cap: DecoderCapacity[Any], load: PathLoad, mean_output: float) -> float:
    """GB of running sequences per req/s of a pool's requests on decode kind `cap`."""
    return cap.running_bytes_per_rps(load.md_load_fraction * mean_output) / 1e9


def define_decode_memory(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """The chosen decode kind d holds its running sequences in HBM M_d, and its radix cache in the
    tiers below L_d first, then in HBM (`pddplan.cache.tiers.place`), when d is picked (a big-M
    term relaxes both for the kinds not picked), with running_k = rate_k a_k E[O] tau_d KV_seq:
        count_d * M_d >= sum_k running_k                                         (decode-memory)
        count_d * (M_d + L_d) >= sum_k running_k + rate * E[min(gap, R)] E[prompt KV]  (decode-cache)"""
    mean_output = data.mean_output_tokens
    cache = data.decode_cache_bytes_per_rps
    for d, count in v.decode_count.items():
        cap = data.decode[d]
        running = weighted_pool_rps(data, v, partial(_running_gb_per_rps, cap, mean_output=mean_output))
        not_picked = 1 - v.decode_pick[d]
        big = data.rate_ceiling * cap.running_bytes_per_rps(mean_output) / 1e9
        supply = cap.memory_bytes / 1e9 * count
        model += supply + v.slack_of("decode-memory") >= running - big * not_picked, f"decode-memory-{d}"
        if cache > 0:
            big_cache = big + data.rate_ceiling * cache / 1e9
            with_tiers = (cap.memory_bytes + cap.lower_tier_bytes) / 1e9 * count
            need = running + cache / 1e9 * data.rate_unit * v.rate
            model += (
                with_tiers + v.slack_of("decode-memory") >= need - big_cache * not_picked,
                f"decode-cache-{d}",
            )


def define_prefill_cache(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """The prefill instances hold the prefix cache the workload's hit rate needs: with z(c, n) the
    prefill pool choice and C_c what one instance of kind c holds for it (HBM beside the prompt in
    flight, plus its tiers below HBM),
        sum_{c,n} n C_c z(c, n) >= rate * E[min(gap, R)] E[prompt KV]             (prefill-cache)"""
    per_rps = data.prefill_cache_bytes_per_rps
    if per_rps <= 0 or not data.prefill_cache_room:
        return
    supply = weighted_sum((z, n * data.prefill_cache_room.get(c, 0.0) / 1e9) for (c, n), z in v.prefill.items())
    need = per_rps / 1e9 * data.rate_unit * v.rate
    model += supply + v.slack_of("prefill-cache") >= need, "prefill-cache"


def define_architecture_constraints(model: Any, data: ProblemData, v: Variables) -> None:
    """The constraints `data.architecture` has beyond every architecture's."""
    architecture = data.architecture
    if architecture.decode_gpu is not DecodeGpu.ANY:
        define_decode_gpu(model, data, v, same=architecture.decode_gpu is DecodeGpu.SAME)
    if architecture.has_relay:
        define_relay_capacity(model, data, v)


def define_decode_gpu(model: Any, data: Any, v: Any, same: bool) -> None:
    """Decode on prefill's GPU type (same) or on another (not same):
    pick_d <= sum of the prefill choices z(c, n) whose GPU type is (or is not) d's."""
    for d in v.decode_count:
        gpu = data.decode[d].candidate.gpu
        allowed = plain_sum(z for (c, _), z in v.prefill.items() if (data.prefill[c].gpu == gpu) == same)
        label = "homogeneous" if same else "heterogeneous"
        model += v.decode_pick[d] <= allowed, f"{label}-{d}"


def define_relay_capacity(model: Any, data: Any, v: Any) -> None:
    """Relay concurrency by Little's law: sum_r u* B*_r * count_r + s >= sum_k E[hold_k] * rate_k; one
    relay type, at the prefill datacenter (it is fed over RDMA), or the prefill instances themselves
    (y = 1): then s <= sum_{c,n} u* B*_c n z(c, n) and s <= y * max (s = 0 when y = 0)."""
    picks = [*v.relay_pick.values(), *([v.relay_on_prefill] if v.relay_on_prefill is not None else [])]
    model += pulp.lpSum(picks) == 1, "one-relay-kind"
    supply = pulp.lpSum(data.relay[r].occupancy * count for r, count in v.relay_count.items())
    if v.relay_on_prefill is not None:
        room = {(c, n): data.colocated_relay.get(c, 0.0) * n for (c, n) in v.prefill}
        model += (
            v.colocated_supply <= weighted_sum((z, room[key]) for key, z in v.prefill.items()),
            "relay-on-prefill-room",
        )
        model += v.colocated_supply <= max(room.values(), default=0.0) * v.relay_on_prefill, "relay-on-prefill-pick"
        supply = supply + v.colocated_supply
    demand = weighted_pool_rps(data, v, lambda load: load.relay_hold_s)
    model += supply + v.slack_of("relay-capacity") >= demand, "relay-capacity"
    for r, count in v.relay_count.items():
        candidate = data.relay[r].candidate
        model += count <= data.count_bound(data.relay[r]) * v.relay_pick[r], f"relay-pick-{r}"
        model += count >= v.relay_pick[r], f"relay-nonempty-{r}"
        home = [k for k in v.pool if data.pool_location(k)[0] == candidate.datacenter]
        model += v.relay_pick[r] <= pulp.lpSum(v.pool[k] for k in home), f"relay-location-{r}"


def define_wan_bandwidth(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """WAN lines with headroom for the P-MD tail: rate_k * E[bytes] <= 0.9 * E[available capacity_k]."""
    for k, load in enumerate(data.pools):
        if load.line is None:
            continue
        model += pool_rps(data, v, k) <= load.max_rate * v.pool[k] + v.slack_of("wan-bandwidth"), f"wan-bandwidth-{k}"


def define_inventory(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """GPUs of each type per datacenter: sum over roles of tp * instances <= what the datacenter offers."""
    for (dc, gpu), limit in data.inventory.items():
        used = [
            (z, n * data.prefill[c].gpus_per_instance)
            for (c, n), z in v.prefill.items()
            if (data.prefill[c].datacenter, data.prefill[c].gpu) == (dc, gpu)
        ]
        used += [
            (count, data.decode[d].candidate.gpus_per_instance)
            for d, count in v.decode_count.items()
            if (data.decode[d].candidate.datacenter, data.decode[d].candidate.gpu) == (dc, gpu)
        ]
        used += [
            (count, data.relay[r].candidate.gpus_per_instance)
            for r, count in v.relay_count.items()
            if (data.relay[r].candidate.datacenter, data.relay[r].candidate.gpu) == (dc, gpu)
        ]
        if used:
            model += weighted_sum(used) <= limit + v.inventory_slack.get((dc, gpu), 0), f"inventory-{dc}-{gpu}"


def _line_cost(load: PathLoad) -> float:
    return load.line.usd_per_hour if load.line is not None else 0.0


def cost_expression(data: ProblemData, v: Variables) -> Any:
    """$ per hour: instances of every role plus the chosen line pool."""
    return weighted_sum(
        [
            *((z, n * data.prefill[c].usd_per_hour) for (c, n), z in v.prefill.items()),
            *((count, data.decode[d].candidate.usd_per_hour) for d, count in v.decode_count.items()),
            *((count, data.relay[r].candidate.usd_per_hour) for r, count in v.relay_count.items()),
            *((v.pool[k], _line_cost(data.pools[k])) for k in v.pool),
        ]
    )


def define_budget(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """Optional spending cap: cost <= budget."""
    if data.budget_per_hour is not None:
        model += cost_expression(data, v) <= data.budget_per_hour + v.slack_of("budget"), "budget"


def define_rate(model: pulp.LpProblem, data: ProblemData, v: Variables) -> None:
    """Served rate: exactly the target (`--rate`); else at most the offered rate and, for BCR, at
    least `min_served_fraction` of it (1 by default: serve the whole workload)."""
    unit = data.rate_unit
    if data.mode == "rate":
        assert data.target_rate is not None
        model += v.rate == data.target_rate / unit, "target-rate"
        return
    model += v.rate <= data.rate_ceiling / unit, "offered-rate"
    if data.mode == "bcr" and data.min_served_fraction > 0:
        model += v.rate >= data.min_served_fraction * data.rate_ceiling / unit, "min-served-rate"


ELASTIC_PENALTY = 1e6


def define_objective(model: pulp.LpProblem, data: ProblemData, v: Variables, bcr_price: float) -> None:
    """bcr: maximize rate - q * cost (one Dinkelbach step at ratio q); rate: minimize cost;
    budget: maximize rate (1e-6 req/s per $/h of cost as a tie-breaker). Slack (elastic diagnosis) is
    penalized. Rate objectives are divided by `data.rate_unit`, as the rate variables are."""
    cost = cost_expression(data, v)
    penalty = ELASTIC_PENALTY * pulp.lpSum(data.slack_weights.get(name, 1.0) * s for name, s in v.slack.items())
    if data.mode == "rate":
        model.sense = pulp.LpMinimize
        model.setObjective(cost + penalty)
    elif data.mode == "budget":
        model.sense = pulp.LpMaximize
        model.setObjective(v.rate - 1e-6 / data.rate_unit * cost - penalty)
    else:
        model.sense = pulp.LpMaximize
        model.setObjective(v.rate - bcr_price / data.rate_unit * cost - penalty)


def build(data: ProblemData, bcr_price: float = 0.0) -> tuple[pulp.LpProblem, Variables]:
    """The whole program: variables, then constraints by meaning, then the objective."""
    model = pulp.LpProblem("pddplan", pulp.LpMaximize)
    v = define_variables(model, data)
    define_served_rate(model, data, v)
    define_prefill_capacity(model, data, v)
    define_decode_capacity(model, data, v)
    define_decode_memory(model, data, v)
    define_prefill_cache(model, data, v)
    define_architecture_constraints(model, data, v)
    define_wan_bandwidth(model, data, v)
    define_inventory(model, data, v)
    define_budget(model, data, v)
    define_rate(model, data, v)
    define_objective(model, data, v, bcr_price)
    return model, v


@dataclass(frozen=True)
class Solution:
    """The chosen integers, read back from a solved program."""

    prefill: tuple[int, int]
    decode: tuple[int, int] | None  # None: the prefill instances decode (co-located serving)
    relay: tuple[int, int] | None
    pool: int
    rate: float
    cost_per_hour: float
    slack: dict[str, float]
    inventory_short: dict[tuple[str, str], float] = field(default_factory=dict)  # GPUs beyond the offer
    relay_on_prefill: bool = False
    split: tuple[int, int] | None = None  # co-located serving's second pool, when the requests split


def read_solution(data: ProblemData, v: Variables) -> Solution:
    """Which candidate, how many, which pool; rounding guards against solver tolerances."""
    prefill = max(v.prefill, key=lambda key: v.prefill[key].value() or 0.0)
    split = None
    picked = [key for key, z in v.prefill.items() if (z.value() or 0.0) > 0.5]
    if len(picked) == 2:  # the pool that carries more first
        pool = max(v.pool, key=lambda k: v.pool[k].value() or 0.0)
        picked.sort(key=lambda key: -float(data.prefill_caps[(key[0], pool)][key[1] - 1]))
        prefill, split = picked
    decode = max(v.decode_pick, key=lambda d: v.decode_pick[d].value() or 0.0) if v.decode_pick else None
    relay = None
    on_prefill = v.relay_on_prefill is not None and (v.relay_on_prefill.value() or 0.0) > 0.5
    if v.relay_pick and not on_prefill:
        r = max(v.relay_pick, key=lambda key: v.relay_pick[key].value() or 0.0)
        relay = (r, round(v.relay_count[r].value() or 0))
    pool = max(v.pool, key=lambda k: v.pool[k].value() or 0.0)
    return Solution(
        prefill=prefill,
        decode=(decode, round(v.decode_count[decode].value() or 0)) if decode is not None else None,
        relay=relay,
        pool=pool,
        rate=data.rate_unit * float(v.rate.value() or 0.0),
        cost_per_hour=float(pulp.value(cost_expression(data, v)) or 0.0),
        slack={name: float(pulp.value(var) or 0.0) for name, var in v.slack.items()},
        inventory_short={key: float(var.value() or 0.0) for key, var in v.inventory_slack.items()},
        relay_on_prefill=on_prefill,
        split=split,
    )


def line_of(data: ProblemData, solution: Solution) -> LinePool | None:
    """The line pool a solution leases."""
    return data.pools[solution.pool].line
