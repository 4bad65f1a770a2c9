"""Capacities of instance kinds, from the evaluator's model: what the optimizer sizes with and what
`evaluate` reports as a plan's capacity view (throughput per GPU-hour, cost per request).

decoders   an instance runs at most B* sequences: the largest batch whose step keeps TPOT within
           the SLA, and that fits its memory. Its B* slots are servers of a queue, filled to the
           utilization u* at which a request waits for a slot with probability <= 5% (Erlang C on
           one instance's slots, so larger pools have margin). It serves
           r = u* B* / (tau(B*) * E[O]) requests/s of full-length outputs; the main decoder's load
           per request is a fraction a <= 1 of a full output (eager tokens done by the relay, plus
           the extend step as equivalent tokens).
relay      an instance holds u* B*_R sequences at once; by Little's law it serves a request stream
           of rate g if sum(n * u* B*_R) >= g * E[relay hold time].
memory     the main decoders hold the running sequences in HBM (M) and their radix cache in the
           tiers below (L) first, then HBM: a request/s takes E[tokens here] * tau(B*) * KV_seq
           (Little) of HBM, and E[min(gap, retention)] * E[prompt KV] of cache (`pddplan.cache`).
prefill    for a pool of n instances and a WAN pool, the largest rate at which the TTFT mixture
           (wait + prefill + transfer or RDMA + first decode step) meets the P90 and P99 targets:
           P(TTFT > T90) <= 0.10 and P(TTFT > T99) <= 0.01, found by bisection on the rate.
WAN        a pool carries g * E[incremental KV bytes] <= rho_max * E[available capacity].
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import numpy as np

from pddplan.cache.accounting import demand_bytes_per_rps
from pddplan.cache.sessions import CacheKind
from pddplan.cache.tiers import instance_tiers
from pddplan.evaluate.classes import RequestClasses
from pddplan.evaluate.colocated import MixedSteps, mixed_steps, operating_point
from pddplan.evaluate.handoff import catch_up_rounds, wants_catch_up
from pddplan.evaluate.prefill_queue import prefill_queue
from pddplan.evaluate.queueing import erlang_c, tail_shares
from pddplan.net.lines import LinePool
from pddplan.net.tcp import rdma_time_s
from pddplan.net.transfer import wan_transfer_time
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.memory import sequences_that_fit
from pddplan.perf.roofline import Instance, decode_step_time, extend_time
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import Handoff
from pddplan.specs.workload import Workload

if TYPE_CHECKING:
    from pddplan.architectures import Architecture

WAN_MAX_UTILIZATION = 0.9
#: the capacity search tries this many evenly spaced rates per pool size at once, then narrows to
#: the bracket between the last feasible and first infeasible one: each round divides the bracket
#: by GRID_POINTS + 1, so GRID_ROUNDS rounds leave at most 5^-6 = 6.4e-5 of the ceiling unresolved
#: (the feasible end is kept). Six calls four rates wide took 15% less time than 14 bisection
#: steps on pdd-agent-64k (per-call overhead dominates; 16 rates wide took 30% more).
GRID_POINTS = 4
GRID_ROUNDS = 6
BOUND_GRID = 512  # rates tried for a co-located instance's bound (`colocated_rate_bound`)
EXACT_SIZES = 32  # pools searched at every size up to this, then every SIZE_STEP
SIZE_STEP = 1.05
#: the pool sizes above EXACT_SIZES a capacity is searched at (`_sampled`)
SAMPLED_SIZES = np.unique(np.round(EXACT_SIZES * SIZE_STEP ** np.arange(0, 400)))
#: the same for pool sizes only a split of the requests over two co-located pools uses
COARSE_EXACT_SIZES = 8
COARSE_SIZE_STEP = 1.25
COARSE_SIZES = np.unique(np.round(COARSE_EXACT_SIZES * COARSE_SIZE_STEP ** np.arange(0, 100)))
UNBOUNDED_RPS = 1e9


class InstanceKind(Protocol):
    """What capacities need of an instance kind (an optimizer candidate or a plan's role)."""

    @property
    def instance(self) -> Instance: ...

    @property
    def kv_capacity_bytes(self) -> float: ...

    @property
    def tp(self) -> int: ...


K = TypeVar("K", bound=InstanceKind)


@dataclass(frozen=True)
class DecoderCapacity(Generic[K]):
    """What one decode (or relay) instance of kind `candidate` can carry."""

    candidate: K
    batch: int
    step_s: float
    occupancy: float
    requests_per_s: float
    memory_bytes: float
    sequence_bytes: float
    lower_tier_bytes: float = 0.0  # what the tiers below HBM hold for its cache (`pddplan.cache.tiers`)

    @property
    def usable(self) -> bool:
        return self.batch >= 1

    def running_bytes_per_rps(self, output_tokens_here: float) -> float:
        """HBM one request/s of running sequences occupies (Little): tokens_here * tau(B*) * KV_seq."""
        return output_tokens_here * self.step_s * self.sequence_bytes

    def memory_rate(self, output_tokens_here: float, cache_bytes_per_rps: float) -> float:
        """Requests/s one instance's memory carries: its running sequences in HBM, its radix cache
        in the tiers below first and in HBM for the rest (`pddplan.cache.tiers.place`):
        min(M / running, (M + L) / (running + cache)), M HBM, L the lower tiers."""
        running = self.running_bytes_per_rps(output_tokens_here)
        hbm = self.memory_bytes / running if running > 0 else math.inf
        total = running + cache_bytes_per_rps
        both = (self.memory_bytes + self.lower_tier_bytes) / total if total > 0 else math.inf
        return min(hbm, both)


SLOT_WAIT_PROBABILITY = 0.05


SLOT_GRID = 1000  # slot utilizations are found on the grid u = k / 1000


@functools.lru_cache(maxsize=4096)
def slot_utilization(slots: int) -> float:
    """Largest u = k / 1000 with Erlang C(slots, u * slots) <= 5%: how full a pool of `slots` batch
    slots may run. P(wait) rises with u, so bisection on k finds it in O(log 1000) Erlang C calls
    of O(sqrt(slots)) terms each (a pool of thousands of instances has hundreds of thousands of
    slots). Kept by `slots`: every decode and relay candidate of a search asks it again."""
    if erlang_c(slots, 0.0) > SLOT_WAIT_PROBABILITY:
        return 0.0
    low, high = 0, SLOT_GRID  # u = low / 1000 meets the bound; u = high / 1000 does not (u = 1 never does)
    while high - low > 1:
        mid = (low + high) // 2
        if float(erlang_c(slots, mid / SLOT_GRID * slots)) <= SLOT_WAIT_PROBABILITY:
            low = mid
        else:
            high = mid
    return low / SLOT_GRID


def pool_size_estimate(rate_rps: float, batch: int, step_s: float, mean_output: float) -> int:
    """The fewest instances that could carry `rate_rps` even with every slot busy:
    max(1, floor(rate * E[O] * tau(B*) / B*)). Any plan has at least this many, so pooling the slot
    wait over them (see `decoder_capacity`) never credits more than the plan will have."""
    if batch < 1 or not math.isfinite(step_s):
        return 1
    return max(1, math.floor(rate_rps * mean_output * step_s / batch))


def decoder_capacity(
    candidate: K,
    workload: Workload,
    model: ModelArchitecture,
    context: float,
    mean_output: float,
    pool_instances: int = 1,
) -> DecoderCapacity[K]:
    """B*, tau(B*) and full-output request rate of one decode instance candidate in a pool of
    `pool_instances`: the slots run at the utilization u* where a request waits for one of the
    pool's pool_instances * B* slots with probability <= 5% (Erlang C), r = u* B* / (tau(B*) E[O])."""
    limit = workload.serving.decode_batch_limit
    per_sequence = float(request_kv_bytes(model, context, workload.serving.page_tokens))
    pools = candidate.instance.kv_pools
    by_memory = int(sequences_that_fit(candidate.kv_capacity_bytes, per_sequence, pools))
    # the optimizer budgets memory in bytes: leave out what whole sequences per rank cannot use.
    # Under `pools` ranks at most pools - 1 sequences more than one shared memory are lost, and the
    # whole sequences that do fit (by_memory) are usable exactly: the larger of the two bounds.
    memory = max(candidate.kv_capacity_bytes - (pools - 1) * per_sequence, by_memory * per_sequence, 0.0)
    serving = workload.serving
    tiers, _ = instance_tiers(candidate.instance, serving.cache_tiers, serving.host_memory_utilization)
    lower = sum(t.capacity_bytes for t in tiers)
    batches = np.arange(1, max(min(limit, by_memory), 1) + 1, dtype=np.float64)
    steps = decode_step_time(candidate.instance, batches, context)
    target = workload.sla.tpot_step_limit_s()
    ok = steps <= target
    if by_memory < 1 or not ok.any():
        return DecoderCapacity(candidate, 0, math.inf, 0.0, 0.0, memory, per_sequence, lower)
    best = int(batches[ok].max())
    step = float(steps[best - 1])
    usable = slot_utilization(best * max(pool_instances, 1))
    return DecoderCapacity(
        candidate=candidate,
        batch=best,
        step_s=step,
        occupancy=usable * best,
        requests_per_s=usable * best / (step * mean_output),
        memory_bytes=memory,
        sequence_bytes=per_sequence,
        lower_tier_bytes=lower,
    )


@dataclass(frozen=True)
class Downstream:
    """What a request meets after prefill: the architecture's path, the WAN pool it crosses (None
    over RDMA), the step times of the main decoder and the relay, and (when given) which request
    classes take the relay, a routing rule's marks (None: the classes' own)."""

    architecture: Architecture
    line: LinePool | None
    md_step_s: float
    relay_step_s: float
    relay_on_prefill: bool = False  # the relay decodes where prefill left the KV: no RDMA
    relayed: np.ndarray | None = None


@dataclass(frozen=True)
class PathLoad:
    """Per-request demands of one architecture over one WAN pool (or none over RDMA)."""

    line: LinePool | None
    wan_bytes_per_request: float
    md_load_fraction: float
    relay_hold_s: float
    max_rate: float


RDMA_PATH = PathLoad(None, 0.0, 1.0, 0.0, math.inf)


def slowest_extender(instances: list[Instance], context_tokens: float) -> Instance:
    """The instance whose 64-token extend step at `context_tokens` takes longest (the handoff
    chunks' cost is taken from it, to be safe for every decoder the program may pick)."""
    return max(instances, key=lambda instance: float(extend_time(instance, 64.0, context_tokens)))


def path_load(
    downstream: Downstream,
    classes: RequestClasses,
    rate: float,
    md_candidates: list[Instance],
    handoff: Handoff,
) -> PathLoad:
    """Bytes over the WAN, the main decoder's share of output work and the relay hold time, per
    request, at `rate` requests/s over the downstream's line (transfer times at that load).

    The relay holds a relayed request for min(window + catch-up rounds, O tau_RLD), window = WAN
    transfer + RTT/2; the main decoder's work is its remaining tokens plus every handoff chunk's
    extend time in tokens (sum_i e_i / tau_MD), e from the slowest decoder candidate. Capacities
    take catch-up whenever the mode allows it (`wants_catch_up` at zero relay load): the longer hold.
    """
    return path_loads([downstream], classes, rate, md_candidates, handoff)[0]


def path_loads(
    downstreams: Sequence[Downstream],
    classes: RequestClasses,
    rate: float,
    md_candidates: list[Instance],
    handoff: Handoff,
) -> list[PathLoad]:
    """`path_load` of each of `downstreams` (which differ only in their line), the extend times
    computed once for all."""
    context = classes.mean_context_tokens
    outputs = classes.output_tokens
    extend: tuple[np.ndarray, np.ndarray] | None = None

    def extend_s(tokens: np.ndarray) -> np.ndarray:
        nonlocal extend
        if extend is None:  # tabulated on first use, on a log grid of output lengths
            slowest = md_candidates[0] if len(md_candidates) == 1 else slowest_extender(md_candidates, context)
            grid = np.unique(np.geomspace(1.0, max(float(outputs.max()), 2.0), 48).round())
            extend = grid, extend_time(slowest, grid, context)
        return np.interp(tokens, *extend)

    return [_path_load(downstream, classes, rate, handoff, extend_s) for downstream in downstreams]


def _path_load(
    downstream: Downstream,
    classes: RequestClasses,
    rate: float,
    handoff: Handoff,
    extend_s: Callable[[np.ndarray], np.ndarray],
) -> PathLoad:
    line = downstream.line
    if line is None:
        return RDMA_PATH
    p_in, p_out, outputs = classes.input_prob, classes.output_prob, classes.output_tokens
    wan_bytes = float(classes.wan_bytes @ p_in)
    capacity_f, prob_f = line.capacity_support()
    max_rate = WAN_MAX_UTILIZATION * line.mean_capacity_bytes_per_s() / max(wan_bytes, 1.0)
    if not downstream.architecture.has_relay:
        return PathLoad(line, wan_bytes, 1.0, 0.0, max_rate)
    relay_step_s, md_step_s = downstream.relay_step_s, downstream.md_step_s
    offered = min(rate, max_rate) * wan_bytes
    transfer = wan_transfer_time(classes.wan_bytes, capacity_f, offered, line.flow_cap_bytes_per_s, line.rtt_s)
    window = transfer + line.rtt_s / 2
    k0 = window / relay_step_s
    rounds = catch_up_rounds(
        k0, relay_step_s, line.rtt_s, handoff.catchup_threshold_tokens, extend_s, wants_catch_up(handoff, 0.0)
    )
    o = outputs[None, :, None]
    eager = np.minimum(o, (k0 + rounds.extra_relay_s / relay_step_s)[:, None, :])
    relay = classes.relay[:, None, None]
    weights = np.einsum("i,o,f->iof", p_in, p_out, prob_f)
    finishes = relay & (o <= eager)
    hold = np.where(relay, np.minimum((window + rounds.extra_relay_s)[:, None, :], o * relay_step_s), 0.0)
    stall = np.where(relay & ~finishes, rounds.md_stall_s(extend_s)[:, None, :], 0.0)
    md_tokens = np.where(finishes, 0.0, o - np.where(relay, eager, 0.0)) + stall / md_step_s
    return PathLoad(
        line=line,
        wan_bytes_per_request=wan_bytes,
        md_load_fraction=float((md_tokens * weights).sum()) / classes.mean_output_tokens,
        relay_hold_s=float((hold * weights).sum()),
        max_rate=max_rate,
    )


def prefill_capacity(
    candidate: InstanceKind,
    classes: RequestClasses,
    downstream: Downstream,
    workload: Workload,
    pool_sizes: np.ndarray,
    rate_ceiling: float,
    sla_scale: float,
) -> np.ndarray:
    """Largest rate each pool size of `candidate` sustains within the TTFT SLA (0 if none).

    TTFT = wait + prefill + the architecture's first-token path (RDMA or WAN transfer, relay or
    decode step), the wait from the G/G/c approximation at that rate; feasible when
    P(TTFT > T90) <= 0.1 and P(TTFT > T99) <= 0.01 with the targets scaled by `sla_scale` (< 1 when
    verification asked for headroom).
    """
    return prefill_capacity_by_line(candidate, classes, [downstream], workload, pool_sizes, rate_ceiling, sla_scale)[0]


def _line_supports(lines: Sequence[LinePool | None]) -> tuple[np.ndarray, np.ndarray]:
    """(capacity points, probabilities), one row per line, padded to one width with the row's
    last point at probability 0; an RDMA path (None) is one point of infinite capacity."""
    rdma = (np.array([math.inf]), np.array([1.0]))
    supports = [line.capacity_support() if line is not None else rdma for line in lines]
    width = max(len(capacity) for capacity, _ in supports)
    capacity = np.empty((len(supports), width))
    prob = np.zeros((len(supports), width))
    for row, (c, q) in enumerate(supports):
        capacity[row, : len(c)] = c
        capacity[row, len(c) :] = c[-1]
        prob[row, : len(q)] = q
    return capacity, prob


@dataclass(frozen=True)
class _FirstTokenPaths:
    """What a request of each input class spends before its first token apart from the queue, on
    each of some downstreams (rows: a line, None for RDMA, and the relay marks of a routing rule):
    its own prefill and load, then the architecture's path (`first_token_delay`: RDMA or a WAN
    transfer at the line's load, and a decode or relay step)."""

    classes: RequestClasses
    downstream: Downstream
    service_s: np.ndarray  # per class: prefill + load
    rdma_s: np.ndarray  # per class
    wan_bytes: float  # mean bytes a request sends
    capacity_lf: np.ndarray  # line x state capacity, bytes/s
    flow_cap_l: np.ndarray
    rtt_l: np.ndarray
    weights_l: np.ndarray  # line x (class, state): probabilities
    relay_l: np.ndarray  # line x class: relayed

    @property
    def states(self) -> int:
        """Line states per class in `delays` (its columns are class-major)."""
        return self.capacity_lf.shape[1]

    def delays(self, rows: np.ndarray, rate: np.ndarray) -> np.ndarray:
        """(row, class x state): the time before the first token but the wait, at `rate` req/s."""
        classes = self.classes
        offered = (rate * self.wan_bytes)[:, None]
        wan = wan_transfer_time(
            classes.wan_bytes,
            self.capacity_lf[rows],
            offered,
            self.flow_cap_l[rows, None],
            self.rtt_l[rows, None, None],
        )
        downstream = self.downstream
        path = downstream.architecture.first_token_delay(
            self.rdma_s[None, :, None], wan, downstream.md_step_s, downstream.relay_step_s, self.relay_l[rows, :, None]
        )
        return (self.service_s[None, :, None] + path).reshape(len(rows), -1)


def _first_token_paths(
    candidate: InstanceKind, classes: RequestClasses, downstreams: Sequence[Downstream], workload: Workload
) -> _FirstTokenPaths:
    """`_FirstTokenPaths` of `candidate` on each of `downstreams` (which differ only in their line
    and relay marks)."""
    downstream = downstreams[0]
    full_kv = request_kv_bytes(candidate.instance.model, classes.prompt_tokens, workload.serving.page_tokens)
    rdma = rdma_time_s(full_kv, candidate.instance.kv_senders, candidate.instance.hardware.nic_bytes_per_s)
    if downstream.relay_on_prefill:
        rdma = np.zeros_like(rdma)
    lines = [d.line for d in downstreams]
    capacity_lf, prob_lf = _line_supports(lines)
    return _FirstTokenPaths(
        classes=classes,
        downstream=downstream,
        service_s=classes.prefill_s + classes.load_s,
        rdma_s=rdma,
        wan_bytes=float(classes.wan_bytes @ classes.input_prob),
        capacity_lf=capacity_lf,
        flow_cap_l=np.array([line.flow_cap_bytes_per_s if line is not None else math.inf for line in lines]),
        rtt_l=np.array([line.rtt_s if line is not None else 0.0 for line in lines]),
        weights_l=(classes.input_prob[None, :, None] * prob_lf[:, None, :]).reshape(len(lines), -1),
        relay_l=np.stack([classes.relay if d.relayed is None else d.relayed for d in downstreams]),
    )


def prefill_capacity_by_line(
    candidate: InstanceKind,
    classes: RequestClasses,
    downstreams: Sequence[Downstream],
    workload: Workload,
    pool_sizes: np.ndarray,
    rate_ceiling: float,
    sla_scale: float,
) -> np.ndarray:
    """`prefill_capacity` for each of `downstreams` (one row each), which differ only in their line
    and which requests take the relay (a row per routing rule and line): every (row, pool size)
    pair is searched at once, the per-call overhead paid once."""
    lines = [d.line for d in downstreams]
    sla = workload.sla
    cv2_a = workload.arrival.cv**2
    paths = _first_token_paths(candidate, classes, downstreams, workload)
    sizes = pool_sizes.astype(np.float64)
    # rows: every (line, pool size) pair, line-major
    line_of_row = np.repeat(np.arange(len(lines)), len(sizes))
    ttft_targets = sla.targets("ttft")
    targets = np.array([t.target_s for t in ttft_targets]) * sla_scale
    allowed = np.array([1.0 - t.quantile for t in ttft_targets])

    def feasible(rows: np.ndarray, n: np.ndarray, rate: np.ndarray) -> np.ndarray:
        queue = prefill_queue(classes, n, rate, cv2_a)
        p_wait, wait_mean = queue.p_wait, queue.wait_mean_s
        delays = paths.delays(rows, rate) + np.repeat(queue.own_extra_s, paths.states, axis=1)
        shares = tail_shares(delays, paths.weights_l[rows], p_wait, wait_mean, targets)
        return np.all(shares <= allowed, axis=1)

    packed_s = float(classes.prefill_work_s @ classes.input_prob)  # the least work a request can bring
    mean_capacity = np.array([line.mean_capacity_bytes_per_s() if line is not None else math.inf for line in lines])
    wan_ceiling = WAN_MAX_UTILIZATION * mean_capacity / max(paths.wan_bytes, 1.0)
    all_sizes = np.tile(sizes, len(lines))
    ceiling = np.minimum(np.minimum(all_sizes / packed_s * 0.999, rate_ceiling), wan_ceiling[line_of_row])
    sampled = _sampled(sizes)
    searched = np.tile(sampled, len(lines))
    found = np.zeros(len(all_sizes))
    found[searched] = largest_feasible_rate(feasible, line_of_row[searched], all_sizes[searched], ceiling[searched])
    out = found.reshape(len(lines), len(sizes))
    ceilings = ceiling.reshape(len(lines), len(sizes))
    every = np.ones(len(sizes), dtype=bool)
    for k, line in enumerate(lines):
        # a shared line's transfers slow as the rate grows: only "more instances never carry less"
        out[k] = _filled_in(sizes, out[k], sampled, every, ceilings[k], per_instance=line is None)
    return out


def unloaded_ttft_s(
    candidate: InstanceKind,
    classes: RequestClasses,
    downstreams: Sequence[Downstream],
    workload: Workload,
    quantiles: Sequence[float],
) -> np.ndarray:
    """(line, quantile): TTFT quantiles when nothing queues and the line is idle, the least any
    pool of `candidate` reaches: the `quantiles` of the mixture over classes and line states of a
    request's own prefill + load + first-token path (`_FirstTokenPaths.delays` at rate 0)."""
    paths = _first_token_paths(candidate, classes, downstreams, workload)
    rows = np.arange(len(downstreams))
    delays = paths.delays(rows, np.zeros(len(rows)))
    out = np.empty((len(rows), len(quantiles)))
    for r in rows:
        order = np.argsort(delays[r], kind="stable")
        cumulative = np.cumsum(paths.weights_l[r][order])
        for k, q in enumerate(quantiles):
            index = min(int(np.searchsorted(cumulative, q * cumulative[-1] - 1e-12)), len(order) - 1)
            out[r, k] = delays[r][order[index]]
    return out


def largest_feasible_rate(
    feasible: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    rows: np.ndarray,
    sizes: np.ndarray,
    ceiling: np.ndarray,
) -> np.ndarray:
    """Per (row, pool size), the largest rate in [0, ceiling] that `feasible(rows, sizes, rates)`
    accepts, feasibility falling with the rate: the ceiling when it is feasible, else a grid search
    (GRID_POINTS rates per round, GRID_ROUNDS rounds; the feasible end of the bracket is kept)."""
    out = ceiling.copy()
    # only the pool sizes that cannot carry their ceiling need the search
    searched = np.flatnonzero(~feasible(rows, sizes, ceiling))
    out[searched] = 0.0
    if len(searched):
        # the least rate the grid would try: a size that cannot carry it ends at 0 after every
        # round (feasibility falls with the rate), so one evaluation settles it
        least = ceiling[searched] * (1.0 / (GRID_POINTS + 1)) ** GRID_ROUNDS
        searched = searched[feasible(rows[searched], sizes[searched], least)]
    rows, n, high = rows[searched], sizes[searched], ceiling[searched]
    low = np.zeros(len(n))
    steps = np.arange(1, GRID_POINTS + 1) / (GRID_POINTS + 1)
    index = np.arange(len(n))
    for _ in range(GRID_ROUNDS if len(n) else 0):
        rates = low[:, None] + (high - low)[:, None] * steps[None, :]
        ok = feasible(np.repeat(rows, GRID_POINTS), np.repeat(n, GRID_POINTS), rates.ravel())
        ok = ok.reshape(len(n), GRID_POINTS)
        # feasibility falls with the rate: the bracket is [last of the leading feasible, next]
        leading = np.cumprod(ok, axis=1).sum(axis=1)
        low, high = (
            np.where(leading > 0, rates[index, np.maximum(leading - 1, 0)], low),
            np.where(leading < GRID_POINTS, rates[index, np.minimum(leading, GRID_POINTS - 1)], high),
        )
    out[searched] = low
    return out


@dataclass(frozen=True)
class SearchFloor:
    """Where a co-located pool's capacity search starts: the least rate the pool may serve (sizes
    whose bound is below it are left at 0), and the size below which only a split of the requests
    over two pools would use the pool (searched on a coarser grid)."""

    rate_rps: float = 0.0
    coarse_below: int = 0


def colocated_capacity(
    candidate: InstanceKind,
    classes: RequestClasses,
    workload: Workload,
    pool_sizes: np.ndarray,
    rate_ceiling: float,
    sla_scale: float,
    floor: SearchFloor | None = None,
) -> np.ndarray:
    """Largest rate each pool size of co-located instances of `candidate` sustains within the SLA
    (0 if none, and with a search `floor`, 0 without a search for a size whose bound
    (`colocated_rate_bound`) is below its rate, the least the program may serve; sizes below its
    `coarse_below`, which only a split of the requests over two pools uses, searched on the coarser
    grid of `_sampled`), by the closed form's equations
    (`pddplan.evaluate.colocated`): the running batch fits the KV room beside the longest prompt
    and the prefix cache's HBM share (lower tiers hold first) at the slot utilization u* of one
    instance's slots (a request decodes where it prefilled), the mean token time keeps the
    tightest TPOT target, and TTFT = wait + slowed prefill + one step meets every TTFT target;
    every target scaled by `sla_scale`."""
    instance, model, serving = candidate.instance, candidate.instance.model, workload.serving
    page, pools = serving.page_tokens, instance.kv_pools
    sequence = float(request_kv_bytes(model, classes.mean_context_tokens, page))
    beside = candidate.kv_capacity_bytes - float(request_kv_bytes(model, workload.prompt_tokens.largest(), page))
    tiers, _ = instance_tiers(instance, serving.cache_tiers, serving.host_memory_utilization)
    lower = sum(t.capacity_bytes for t in tiers)
    cache_per_rps = demand_bytes_per_rps(CacheKind.PREFILL, workload, model)
    limit = serving.decode_batch_limit
    largest = int(min(limit, float(sequences_that_fit(beside, sequence, pools))))
    if largest < 1:
        return np.zeros(len(pool_sizes))
    steps = mixed_steps(instance, classes.chunk_tokens, classes, largest)
    # the closed form knows the mean token time only; a verification that finds the TPOT tail over
    # its target tightens it with the TTFT targets (`sla_scale`)
    tpot_limit = workload.sla.tpot_step_limit_s() * sla_scale
    ttft_targets = workload.sla.targets("ttft")
    targets = np.array([t.target_s for t in ttft_targets]) * sla_scale
    allowed = np.array([1.0 - t.quantile for t in ttft_targets])
    cv2_a = workload.arrival.cv**2
    p_in = classes.input_prob
    overhead = classes.prefill_s - classes.prefill_alone_s + classes.load_s

    def feasible(_rows: np.ndarray, n: np.ndarray, rate: np.ndarray) -> np.ndarray:
        unslowed = prefill_queue(classes, n, rate, cv2_a)
        cache_hbm = np.maximum(cache_per_rps * rate / n - lower, 0.0)
        room = np.minimum(limit, sequences_that_fit(beside - cache_hbm, sequence, pools))
        share = np.array([slot_utilization(int(s)) for s in room])  # a request decodes where it prefilled
        point = operating_point(
            steps, rate / n, unslowed.busy_share, classes.mean_output_tokens, share * room, unslowed.loaded_share
        )
        ok = point.stable & (point.token_s <= tpot_limit)
        f = point.slowdown
        queue = prefill_queue(classes, n, rate * f, cv2_a)  # time scaling: waits f times longer
        p_wait, wait_mean = queue.p_wait, queue.wait_mean_s * f
        service = overhead[None, :] + f[:, None] * (classes.prefill_alone_s[None, :] + queue.own_extra_s)
        packed = steps.next_busy_step_s(unslowed.loaded_share) + point.marginal_s  # the step after prefill
        first = np.stack([packed, point.alone_s], axis=1)  # (rows, 2)
        delays = (service[:, :, None] + first[:, None, :]).reshape(len(n), -1)
        busy = np.clip(queue.work_left_share, 0.0, 1.0)  # the instance keeps prefilling after a departure
        weights = (p_in[None, :, None] * np.stack([busy, 1.0 - busy], axis=1)[:, None, :]).reshape(len(n), -1)
        return ok & np.all(tail_shares(delays, weights, p_wait, wait_mean, targets) <= allowed, axis=1)

    sizes = pool_sizes.astype(np.float64)
    per_instance = colocated_rate_bound(steps, classes, tpot_limit, float(largest))
    ceiling = np.minimum(sizes * per_instance, rate_ceiling)
    out = np.zeros(len(sizes))
    start = floor or SearchFloor()
    reach = (ceiling > 0) & (ceiling >= start.rate_rps)
    searched = reach & _sampled(sizes, start.coarse_below)
    if searched.any():
        rows = np.zeros(int(searched.sum()), dtype=int)
        out[searched] = largest_feasible_rate(feasible, rows, sizes[searched], ceiling[searched])
    return _filled_in(sizes, out, searched, reach, ceiling)


def _sampled(sizes: np.ndarray, coarse_below: int = 0) -> np.ndarray:
    """The pool sizes a capacity is searched at: every one up to EXACT_SIZES, then about every
    SIZE_STEP (5%) more, and the largest (an Erlang C over thousands of servers per row is what
    costs); below `coarse_below`, every one up to COARSE_EXACT_SIZES, then about every
    COARSE_SIZE_STEP (25%) more. The sizes between are filled in conservatively (`_filled_in`)."""
    fine = (sizes <= EXACT_SIZES) | np.isin(sizes, SAMPLED_SIZES) | (sizes == sizes.max(initial=0))
    if coarse_below <= 0:
        return fine
    coarse = (sizes <= COARSE_EXACT_SIZES) | np.isin(sizes, COARSE_SIZES)
    return np.where(sizes < coarse_below, coarse, fine)


def _filled_in(
    sizes: np.ndarray,
    caps: np.ndarray,
    searched: np.ndarray,
    reach: np.ndarray,
    ceiling: np.ndarray,
    per_instance: bool = True,
) -> np.ndarray:
    """Capacities of the sizes not searched (`sizes` ascending), from the nearest smaller searched
    size m: n x its per-instance rate cap(m) / m when `per_instance` (pooling only raises what an
    instance carries when nothing else is shared), else cap(m) (more instances never carry less);
    at most the size's ceiling. Neither overstates."""
    out = caps.copy()
    known = np.nonzero(searched)[0]
    fill = np.nonzero(reach & ~searched)[0]
    if not len(known) or not len(fill):
        return out
    below = np.searchsorted(sizes[known], sizes[fill], side="left") - 1
    has = below >= 0
    i, j = fill[has], known[below[has]]
    scale = sizes[i] / sizes[j] if per_instance else 1.0
    out[i] = np.minimum(caps[j] * scale, ceiling[i])
    return out


def colocated_rate_bound(steps: MixedSteps, classes: RequestClasses, tpot_limit: float, room: float) -> float:
    """An upper bound on what one co-located instance carries within the TPOT target and its room:
    the largest r whose operating point is stable at the least prefill utilization r may bring
    (rho_0 = r P, P a request's fully packed work, `prefill_work_s`) with either busy step (a lone
    chunk's or a full one's), searched on a grid of r up to 1 / P. No queueing enters, so a pool
    of n carries at most n times it (the search's ceiling)."""
    packed_s = float(classes.prefill_work_s @ classes.input_prob)
    top = 0.999 / packed_s if packed_s > 0 else UNBOUNDED_RPS
    rates = top * np.arange(1, BOUND_GRID + 1) / BOUND_GRID
    ok = np.zeros(len(rates), dtype=bool)
    for waiting in (0.0, 1.0):  # the busy step ranges from a lone chunk's to a full one's
        point = operating_point(steps, rates, rates * packed_s, classes.mean_output_tokens, room, waiting)
        ok |= point.stable & (point.token_s <= tpot_limit)
    if not ok.any():
        return 0.0
    last = int(np.nonzero(ok)[0].max())
    return float(rates[min(last + 1, BOUND_GRID - 1)])  # the next grid point: still an upper bound
