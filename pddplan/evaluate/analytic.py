"""Closed-form evaluation of a deployment: TTFT/TPOT percentiles, goodput, cost and BCR (answers in ms).

The model, stage by stage (docs/model.md has the full derivation):

prefill    G/G/c queue, c = prefill instances, service S = chunked-prefill time of the class;
           wait ~ 0 w.p. 1 - P_w, else exponential (Allen-Cunneen, see `queueing`).
WAN        processor sharing with a per-flow TCP cap (see `pddplan.net.transfer`); the line's
           available fraction f ranges over the stationary fluctuation distribution.
RDMA       x / (tp * NIC) + 24.5 ms copy overhead (article's microbenchmark).
decoders   continuous batching: each instance runs B sequences with step time tau(B); B solves
           B = (arrival rate per instance) * (tokens per request) * tau(B) (Little's law), and must
           stay below the memory limit (KV of the batch plus the MD's radix cache).
relay      a P-RLD-MD request decodes on the relay for the eager window: its WAN transfer, half
           an RTT to stop, plus catch-up rounds (`handoff`); the MD recomputes the eager tokens
           chunk by chunk in extend steps (stalls of the MD instance; the user's hiccup is the
           last chunk's); a request whose output ends within the window is finished by the relay
           (singular traffic). Relay and MD are solved together by fixed-point iteration.
TTFT       wait + S + the architecture's path to the first token (`Architecture.first_token_delay`):
           RDMA + tau_D, WAN + tau_D, or for pdd P-MD: WAN + tau_MD, P-RLD-MD: RDMA + tau_RLD.
goodput,   as `pddplan.evaluate.verdict` defines them, shared with the simulation's summary.
revenue, BCR
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from pddplan.cache.outputs import CacheTier, PrefixCache
from pddplan.cache.sessions import CacheKind
from pddplan.evaluate import outputs
from pddplan.evaluate.classes import RequestClasses, request_classes
from pddplan.evaluate.colocated import mixed_steps, operating_point
from pddplan.evaluate.handoff import catch_up_rounds, wants_catch_up
from pddplan.evaluate.outputs import Capacity as CapacityOutput
from pddplan.evaluate.prefill_queue import prefill_queue
from pddplan.evaluate.queueing import WaitedDelays, allen_cunneen, mixture_quantiles, pools_quantiles, wait_survival
from pddplan.evaluate.verdict import Tails, Verdict, judge, revenue_per_request, tpot_target
from pddplan.net.tcp import rdma_time_s
from pddplan.net.transfer import wan_transfer_time
from pddplan.perf.kv import incremental_kv_bytes, request_kv_bytes
from pddplan.perf.memory import sequences_that_fit
from pddplan.perf.mixed import busy_step_s, colocated_token_s, relay_marginal_step_s
from pddplan.perf.roofline import decode_step_time, extend_time
from pddplan.scenarios.scenario import Role, Scenario
from pddplan.scenarios.split import pool_figure_name, pool_parts
from pddplan.support.kept import kept_by_identity
from pddplan.support.limits import check_rate

QUANTILES = (0.5, 0.9, 0.99)
# The relay/main-decoder fixed point stops when tau_RLD, tau_MD and the offered WAN bytes each move
# by at most this much (relative) in one iteration.
FIXED_POINT_RTOL = 1e-6
FIXED_POINT_MAX_ITERATIONS = 50
#: the longest circle of the relay fixed point recognised as one (`_decode_with_relay`)
FIXED_POINT_CYCLE = 12
#: evaluations kept by their scenario's identity (`evaluate`)
RECENT_EVALUATIONS = 8


@dataclass(frozen=True)
class Percentiles:
    p50_s: float
    p90_s: float
    p99_s: float


@dataclass(frozen=True)
class StageReport:
    """Load of one stage."""

    instances: int
    utilization: float
    batch_per_instance: float = 0.0
    max_batch: int = 0
    step_s: float = 0.0
    stable: bool = True


@dataclass(frozen=True)
class PoolMixture:
    """One pool's distributions as the closed form finds them: TTFT is W + D over `ttft`'s points;
    TPOT and the worst gap take `tpot` and `worst_gap` with `weights`; the share of requests that
    meet both P99 TTFT and TPOT targets, the mean revenue per request, and why it is unstable."""

    ttft: WaitedDelays
    tpot: np.ndarray
    worst_gap: np.ndarray
    weights: np.ndarray
    attainment: float
    revenue_per_request_usd: float
    instability: str | None


@dataclass(frozen=True)
class Evaluation:
    """Figures of one deployment under one workload (SI units, $ per hour)."""

    architecture: str
    rate_rps: float
    ttft: Percentiles
    tpot: Percentiles
    worst_gap_p99_s: float
    goodput_rps: float
    sla_met: bool
    sla_violations: list[str]
    cost_per_hour: float
    revenue_per_hour: float
    bcr: float
    rld_token_share: float
    singular_share: float
    relay_share: float
    link_utilization: float
    wan_bytes_per_request: float
    wan_gbps_offered: float
    stages: dict[str, StageReport]
    pipelines: dict[str, dict[str, float]] = field(default_factory=dict)
    fixed_point_iterations: int = 1
    request_overhead_s: float = 0.0  # the serving stack's, in every TTFT above (off the engine)
    caches: list[PrefixCache] = field(default_factory=list)  # `cache_reports`
    notes: list[str] = field(default_factory=list)  # a decode batch cap that holds a pool below its memory
    # what the TTFT and TPOT distributions are made of, for the mixture of a split plan's pools
    mixture: PoolMixture | None = field(default=None, compare=False, repr=False)
    # the relay's handoff: catch-up (True) or one-shot (False), as decided at each fixed-point
    # iteration; an adaptive plan that decided one way throughout evaluates as that mode's plan
    handoff_choices: frozenset[bool] = field(default=frozenset(), compare=False, repr=False)

    def to_output(self, capacity: CapacityOutput | None = None) -> outputs.Evaluation:
        """The typed result `evaluate --json` prints (ttft_p90_s, goodput_rps, bcr, ...); its
        `capacity` only where given (an evaluation embedded elsewhere leaves it out)."""
        result = outputs.Evaluation(
            architecture=self.architecture,
            rate_rps=self.rate_rps,
            ttft_p50_s=self.ttft.p50_s,
            ttft_p90_s=self.ttft.p90_s,
            ttft_p99_s=self.ttft.p99_s,
            tpot_p50_s=self.tpot.p50_s,
            tpot_p90_s=self.tpot.p90_s,
            tpot_p99_s=self.tpot.p99_s,
            worst_gap_p99_s=self.worst_gap_p99_s,
            goodput_rps=self.goodput_rps,
            sla_met=self.sla_met,
            sla_violations=self.sla_violations,
            cost_usd_per_hour=self.cost_per_hour,
            revenue_usd_per_hour=self.revenue_per_hour,
            bcr=self.bcr,
            rld_token_share=self.rld_token_share,
            singular_share=self.singular_share,
            relayed_request_share=self.relay_share,
            link_utilization=self.link_utilization,
            wan_bytes_per_request=self.wan_bytes_per_request,
            wan_gbps_offered=self.wan_gbps_offered,
            stages={name: outputs.Stage(**asdict(stage)) for name, stage in self.stages.items()},
            utilization={name: stage.utilization for name, stage in self.stages.items()},
            pipelines=[outputs.Pipeline(pipeline=name, **figures) for name, figures in self.pipelines.items()],
            fixed_point_iterations=self.fixed_point_iterations,
            request_overhead_s=self.request_overhead_s,
            caches=self.caches,
            notes=self.notes,
        )
        if capacity is not None:
            result.capacity = capacity
        return result


@dataclass(frozen=True)
class _Decoder:
    """Operating point of a decoder pool."""

    batch: float
    max_batch: float
    step_s: float
    stable: bool


def decoder_max_batch(scenario: Scenario, role: Role, context_tokens: float, reserved_bytes: float) -> float:
    """Sequences one instance can hold: min(max_decode_batch, (KV capacity - reserved) / KV(context))."""
    per_sequence = float(request_kv_bytes(scenario.model, context_tokens, scenario.workload.serving.page_tokens))
    by_memory = float(sequences_that_fit(role.kv_capacity_bytes - reserved_bytes, per_sequence, role.instance.kv_pools))
    return float(min(scenario.max_decode_batch, by_memory))


def _operating_point(
    role: Role, arrivals_per_s: float, busy_s_per_step: float, context_tokens: float, max_batch: float, stall: float
) -> _Decoder:
    """Solve B = (arrivals per instance) * (steps per request) * tau(B) / (1 - stall) for B.

    `busy_s_per_step` is the mean number of decode steps a request stays (its tokens there).
    tau is tabulated for every whole batch up to the limit and interpolated in between.
    """
    if max_batch < 1 or stall >= 1:
        return _Decoder(batch=math.inf, max_batch=max_batch, step_s=math.inf, stable=False)
    per_instance = arrivals_per_s / role.count
    demand = per_instance * busy_s_per_step
    batches = np.arange(1.0, max_batch + 1.0)
    steps = decode_step_time(role.instance, batches, context_tokens) / (1.0 - stall)
    if demand <= 0:
        return _Decoder(batch=0.0, max_batch=max_batch, step_s=float(steps[0]), stable=True)
    residual = demand * steps - batches
    if residual[-1] > 0:
        return _Decoder(batch=demand * float(steps[-1]), max_batch=max_batch, step_s=float(steps[-1]), stable=False)
    if residual[0] <= 0:  # less than one sequence on average: the step of a lone sequence
        return _Decoder(batch=demand * float(steps[0]), max_batch=max_batch, step_s=float(steps[0]), stable=True)
    index = int(np.argmax(residual <= 0))
    r0, r1 = residual[index - 1], residual[index]
    batch = float(batches[index - 1] + r0 / (r0 - r1))
    step = float(np.interp(batch, batches, steps))
    return _Decoder(batch=batch, max_batch=max_batch, step_s=step, stable=True)


@dataclass(frozen=True)
class _Prefill:
    """The prefill pool's queue at the evaluated rate (the shares and `own_extra_s`, per class, as
    `pddplan.evaluate.prefill_queue.PrefillQueue` has them)."""

    mean_s: float
    utilization: float
    p_wait: float
    wait_mean_s: float
    own_extra_s: np.ndarray
    busy_share: float
    loaded_share: float
    work_left_share: float


@dataclass(frozen=True)
class _LinkStates:
    """The line's available capacity per fluctuation state and each state's probability
    (one state of infinite capacity without a line)."""

    capacity_bytes_per_s: np.ndarray
    prob: np.ndarray


@dataclass(frozen=True)
class _Decoding:
    """Decoders' operating points and what the relay does, per (input class, output length,
    fluctuation state); the WAN transfer time per (input class, fluctuation state)."""

    md: _Decoder
    relay: _Decoder | None
    offered_bytes_per_s: float
    wan_s: np.ndarray
    eager_tokens: np.ndarray
    finishes_on_relay: np.ndarray
    gap_s: np.ndarray
    iterations: int
    relay_longest_step_s: float = 0.0  # a co-located relay's mixed step (its tokens' longest gap)
    catch_up_choices: frozenset[bool] = frozenset()  # the handoff's catch-up decision at each iteration
    md_longest_step_s: float = 0.0  # a co-located decoder's full-chunk mixed step (agg)
    # a co-located decoder's first token (the relay's, or agg's): after a mixed step (probability
    # p), else a decode step: (p, mixed step, decode step); None: after the pool's step_s
    first_steps: tuple[float, float, float] | None = None


def _prefill_stage(scenario: Scenario, classes: RequestClasses, lam: float) -> _Prefill:
    """G/G/c wait of the prefill pool (Allen-Cunneen) on the work a request brings, packed as often
    as work waits (`pddplan.evaluate.prefill_queue`), and its utilization lam E[W] / c; `mean_s` is
    the mean of a request's own prefill time (longer under load with data-parallel attention)."""
    queue = prefill_queue(classes, scenario.prefill.count, lam, scenario.workload.arrival.cv**2)
    mean_s = float((classes.prefill_s + queue.own_extra_s) @ classes.input_prob)
    return _Prefill(
        mean_s,
        float(queue.utilization),
        float(queue.p_wait),
        float(queue.wait_mean_s),
        queue.own_extra_s,
        float(queue.busy_share),
        float(queue.loaded_share),
        float(queue.work_left_share),
    )


def _link_states(scenario: Scenario) -> _LinkStates:
    if scenario.link is None:
        return _LinkStates(np.array([math.inf]), np.array([1.0]))
    return _LinkStates(*scenario.link.capacity_support())


def _wan_times(
    scenario: Scenario, classes: RequestClasses, lam: float, states: _LinkStates, sent_fraction: np.ndarray | float
) -> tuple[float, np.ndarray]:
    """(offered bytes/s, transfer time per input class and state) when a request of each class sends
    `sent_fraction` of its incremental KV (singular filtering cancels the rest): offered =
    lam * E[bytes sent]; the transfer time is processor sharing at that load (zero without a line)."""
    link = scenario.link
    if link is None:
        return 0.0, np.zeros((len(classes.input_prob), len(states.prob)))
    sent = classes.wan_bytes[:, None, None] * sent_fraction
    offered = lam * float(np.einsum("iof,i,o,f->", sent, classes.input_prob, classes.output_prob, states.prob))
    wan = wan_transfer_time(
        classes.wan_bytes, states.capacity_bytes_per_s, offered, link.flow_cap_bytes_per_s, link.rtt_s
    )
    # the main decoder loads the prefix it holds from its tier while the increment crosses
    return offered, np.maximum(wan, classes.md_load_s[:, None])


def _decode_without_relay(scenario: Scenario, classes: RequestClasses, lam: float, states: _LinkStates) -> _Decoding:
    """Every request decodes on the decode pool from its first token: B solves Little's law at E[O]."""
    offered, wan = _wan_times(scenario, classes, lam, states, 1.0)
    context = classes.mean_context_tokens
    max_batch = decoder_max_batch(
        scenario, scenario.decode, context, scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE, lam)
    )
    md = _operating_point(scenario.decode, lam, classes.mean_output_tokens, context, max_batch, 0.0)
    zeros = np.zeros((len(classes.input_prob), len(classes.output_tokens), len(states.prob)))
    return _Decoding(md, None, offered, wan, zeros, zeros.astype(bool), zeros, 1)


def _decode_with_relay(
    scenario: Scenario,
    classes: RequestClasses,
    lam: float,
    states: _LinkStates,
    colocated: _ColocatedRelay | None = None,
) -> _Decoding:
    """Relay and main decoder together, by fixed-point iteration on (tau_RLD, tau_MD, offered bytes):
    the step times set the eager window and the handoff work, which set the batches, which set the
    step times. Stops when each moved by at most FIXED_POINT_RTOL (relative) in one iteration, or
    came back within it to where it was up to FIXED_POINT_CYCLE iterations before: the map may
    circle its fixed point instead of reaching it (whole handoff rounds and finished-or-not
    requests make it a step function; seen on plans whose main decoders are overloaded), and
    every turn of the circle gives the same figures again.
    A relay on the prefill instances (`colocated`) has their room and its mixed-step token times."""
    relay_role, link = scenario.relay, scenario.link
    assert relay_role is not None and link is not None
    handoff, context = scenario.plan.handoff, classes.mean_context_tokens
    md_max = decoder_max_batch(
        scenario, scenario.decode, context, scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE, lam)
    )
    if colocated is None:
        relay_max = decoder_max_batch(scenario, relay_role, context, 0.0)
        relay_batches = np.arange(1.0, max(relay_max, 1.0) + 1.0)
        relay_steps = decode_step_time(relay_role.instance, relay_batches, context)
    else:
        relay_max, relay_batches = colocated.max_batch, colocated.batches
        relay_steps = colocated.token_s(0.0)
    weights = np.einsum("i,o,f->iof", classes.input_prob, classes.output_prob, states.prob)
    length_count = len(classes.output_tokens)
    # the (class, output length, line state) arrays are built whole and changed in place: a
    # broadcast operation over the short last axis costs several times a contiguous one
    o_full = np.broadcast_to(classes.output_tokens[None, :, None], weights.shape).copy()
    direct = ~classes.relay
    prompt_kv = request_kv_bytes(scenario.model, classes.prompt_tokens, scenario.workload.serving.page_tokens)[
        :, None, None
    ]
    weighted_kv = weights * prompt_kv
    total_kv = max(float(weighted_kv.sum()), 1.0)

    def extend_s(tokens: np.ndarray) -> np.ndarray:
        return extend_time(scenario.decode.instance, tokens, context)

    relay: _Decoder | None = None
    md: _Decoder | None = None
    choices: set[bool] = set()
    cancel = np.zeros(weights.shape)
    recent: list[tuple[float, float, float]] = []  # the last iterations' states, the latest first
    iterations = 0
    while iterations < FIXED_POINT_MAX_ITERATIONS:
        iterations += 1
        offered, wan = _wan_times(scenario, classes, lam, states, 1.0 - cancel)
        tau_r = _step_or_half_full(relay, relay_role, relay_max, context, colocated)
        tau_m = _step_or_half_full(md, scenario.decode, md_max, context)
        utilization = relay.batch / max(relay_max, 1e-9) if relay else 0.0
        window = wan + link.rtt_s / 2  # the relay stops half an RTT after the KV lands at the MD
        k0 = window / tau_r
        catch_up = wants_catch_up(handoff, utilization)
        choices.add(catch_up)
        rounds = catch_up_rounds(k0, tau_r, link.rtt_s, handoff.catchup_threshold_tokens, extend_s, catch_up)
        # eager tokens: min(o, k0 + extra / tau_R) for a relayed class, 0 for a direct one
        eager_tokens = np.minimum(o_full, _over_lengths(k0 + rounds.extra_relay_s / tau_r, length_count))
        finishes = o_full <= eager_tokens
        finishes[direct] = False
        eager_tokens[direct] = 0.0
        # the relay holds a sequence min(window + extra, o tau_R); a direct one, never
        hold = np.minimum(_over_lengths(window + rounds.extra_relay_s, length_count), o_full * tau_r)
        hold[direct] = 0.0
        if scenario.plan.routing.singular_filter:
            # a request the relay finishes cancels 1 - min(1, o tau_R / wan) of its transfer
            cancel = o_full * tau_r
            cancel /= _over_lengths(np.maximum(wan, 1e-9), length_count)
            np.minimum(1.0, cancel, out=cancel)
            np.subtract(1.0, cancel, out=cancel)
            cancel[~finishes] = 0.0
            # a cancelled transfer never lands: its prefix takes no room in the main decoders' cache
            kept = 1.0 - float((weighted_kv * (cancel > 0)).sum()) / total_kv
            md_max = decoder_max_batch(
                scenario, scenario.decode, context, scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE, lam, kept)
            )
        continuing = ~finishes
        handoffs = continuing.copy()
        handoffs[direct] = False
        md_stall = _over_lengths(rounds.md_stall_s(extend_s), length_count)
        md_stall[~handoffs] = 0.0
        relay_batch = lam * float((hold * weights).sum()) / relay_role.count
        if colocated is not None:  # prefill's busy share, and so the token time, follow the batch
            relay_steps = colocated.token_s(relay_batch)
        relay = _Decoder(
            batch=relay_batch,
            max_batch=relay_max,
            step_s=float(np.interp(relay_batch, relay_batches, relay_steps)),
            stable=relay_batch <= relay_max,
        )
        stall = lam / scenario.decode.count * float((md_stall * weights).sum())
        left = o_full - eager_tokens
        left *= continuing
        left *= weights
        md_tokens = float(left.sum())
        md_rate = lam * float((continuing * weights).sum())
        md = _operating_point(scenario.decode, md_rate, md_tokens / max(md_rate / lam, 1e-12), context, md_max, stall)
        current = (relay.step_s, md.step_s, offered)
        if any(_same_state(current, earlier) for earlier in recent):
            break  # converged (the state of the last iteration), or circling (of one before)
        recent = [current, *recent[: FIXED_POINT_CYCLE - 1]]
    assert md is not None
    # the last iteration's handoff gap (only the fixed point's is reported)
    last_extend = extend_s(np.maximum(rounds.last_chunk_tokens, 1.0))[:, None, :]
    gap = np.where(handoffs, link.rtt_s / 2 + last_extend + tau_m, 0.0)
    return _Decoding(
        md, relay, offered, wan, eager_tokens, finishes, gap, iterations, catch_up_choices=frozenset(choices)
    )


def _over_lengths(per_state: np.ndarray, length_count: int) -> np.ndarray:
    """A (class, line state) array repeated over `length_count` output lengths: (class, length, state)."""
    return np.repeat(per_state[:, None, :], length_count, axis=1)


def _same_state(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether two states of the relay fixed point agree to FIXED_POINT_RTOL in every figure."""
    return all(math.isclose(x, y, rel_tol=FIXED_POINT_RTOL) for x, y in zip(a, b, strict=True))


def _step_or_half_full(
    decoder: _Decoder | None, role: Role, max_batch: float, context: float, colocated: _ColocatedRelay | None = None
) -> float:
    """A pool's step time: at its operating point when stable, else at half its largest batch
    (the fixed point's starting guess, and its fallback while a pool is overloaded)."""
    if decoder is not None and decoder.stable:
        return decoder.step_s
    if colocated is not None:
        return float(np.interp(max(max_batch / 2, 1.0), colocated.batches, colocated.token_s(0.0)))
    return float(decode_step_time(role.instance, max(max_batch / 2, 1.0), context))


@dataclass(frozen=True)
class _ColocatedRelay:
    """A relay on the prefill instances: the sequences an instance holds beside a prefill in
    flight, and tau_co per whole batch 1..max at the prefill utilization a relay batch leaves
    (`token_s(batch)`, `pddplan.perf.mixed`)."""

    max_batch: float
    batches: np.ndarray
    token_s: Callable[[float], np.ndarray]


def colocated_relay_max_batch(scenario: Scenario, context_tokens: float, rate_rps: float | None = None) -> float:
    """Relay sequences one prefill instance holds: its KV room less the longest prompt's KV (the
    prefill in flight) and the HBM its prefix cache takes, in sequences of `context_tokens`, at
    most the decode batch limit."""
    reserved = scenario.longest_prompt_kv_bytes + scenario.cache_hbm_bytes_per_instance(CacheKind.PREFILL, rate_rps)
    return decoder_max_batch(scenario, scenario.prefill, context_tokens, reserved)


def colocated_load(scenario: Scenario, classes: RequestClasses, lam: float) -> tuple[RequestClasses, float]:
    """For a relay on the prefill instances at `lam` requests/s: the classes with prefill slowed by
    the relay's tokens, and the relay's mean time per token tau_co (`_colocated_stages`)."""
    slowed, _, decoding = _colocated_stages(scenario, classes, lam, _link_states(scenario))
    assert decoding.relay is not None
    return slowed, decoding.relay.step_s


def _colocated_stages(
    scenario: Scenario, classes: RequestClasses, lam: float, states: _LinkStates
) -> tuple[RequestClasses, _Prefill, _Decoding]:
    """Prefill and a relay sharing its instances. The relay batch B_R slows prefill by the factor
    f = 1 + m(B_R) / s_C, which sets prefill's utilization rho, which sets the relay's token time
    tau_co (`pddplan.perf.mixed`); the relay/main-decoder fixed point iterates over it as well."""
    instance, chunk = scenario.prefill.instance, scenario.chunk_tokens
    context = classes.mean_context_tokens
    max_batch = colocated_relay_max_batch(scenario, context, lam)
    batches = np.arange(1.0, max(max_batch, 1.0) + 1.0)
    with_zero = np.concatenate([[0.0], batches])
    unslowed = _prefill_stage(scenario, classes, lam)
    attention = classes.attention_s_per_new_token()
    lone_s = busy_step_s(instance, chunk, attention, classes.alone_s_per_chunk())
    full_chunk_s = busy_step_s(instance, chunk, attention, 0.0, classes.prefill_ranks)
    busy_s = lone_s + (full_chunk_s - lone_s) * unslowed.loaded_share if classes.prefill_ranks > 1 else lone_s
    marginal = relay_marginal_step_s(instance, with_zero, context, instance.full_step_tokens(chunk))
    mixed = busy_s + marginal[1:]
    alone = decode_step_time(instance, batches, context)

    def slowed_by(relay_batch: float) -> tuple[float, RequestClasses, _Prefill]:
        extra_s = float(np.interp(min(relay_batch, float(batches[-1])), with_zero, marginal))
        slowed = classes.with_prefill_slowed(1.0 + extra_s / busy_s)
        return extra_s, slowed, _prefill_stage(scenario, slowed, lam)

    def token_s(relay_batch: float) -> np.ndarray:
        # rho ~ rho(f = 1) * f: to first order (the packing's wait probability held), which the
        # fixed point needs only to find B_R; the stage reported is solved at the final f
        extra_s = float(np.interp(min(relay_batch, float(batches[-1])), with_zero, marginal))
        return colocated_token_s(unslowed.busy_share * (1.0 + extra_s / busy_s), mixed, alone)

    decoding = _decode_with_relay(scenario, classes, lam, states, _ColocatedRelay(max_batch, batches, token_s))
    assert decoding.relay is not None
    extra_s, slowed, prefill = slowed_by(decoding.relay.batch)
    relay_batch = min(decoding.relay.batch, float(batches[-1]))
    alone_s = float(np.interp(max(relay_batch, 1.0), batches, alone))
    leaves_work = min(max(prefill.work_left_share, 0.0), 1.0)
    mixed_s = busy_s + extra_s
    # A relayed request's first token comes after one whole step of whichever kind runs next: a
    # mixed step if its instance has prefill work left, else a decode step; a two-point mixture,
    # not tau_co (the harmonic mix of token rates). Departures see what arrivals see: the instance
    # keeps prefilling when a request waits in the pool's queue, probability P(wait) (rho for one
    # instance, less for a pool).
    # the longest gap: a full chunk's mixed step
    full_s = full_chunk_s + extra_s
    longest = full_s if prefill.utilization > 0 else decoding.relay.step_s
    first = (leaves_work, mixed_s, alone_s)
    return slowed, prefill, replace(decoding, relay_longest_step_s=longest, first_steps=first)


def _agg_stages(
    scenario: Scenario, classes: RequestClasses, lam: float, states: _LinkStates
) -> tuple[RequestClasses, _Prefill, _Decoding]:
    """Co-located serving (`pddplan.evaluate.colocated`): the running batch B per instance from
    Little's law at the token time its own rows and prefill's busy share set; prefill's engine
    times slowed by f(B); TPOT tau(B), the longest gap a full chunk's mixed step; the first token
    one step after prefill (mixed w.p. P(wait) of the slowed prefill queue, else a decode step)."""
    count, context = scenario.prefill.count, classes.mean_context_tokens
    room = colocated_relay_max_batch(scenario, context, lam)
    steps = mixed_steps(scenario.prefill.instance, scenario.chunk_tokens, classes, int(room))
    unslowed = _prefill_stage(scenario, classes, lam)
    point = operating_point(
        steps, lam / count, unslowed.busy_share, classes.mean_output_tokens, room, unslowed.loaded_share
    )
    slowdown = float(point.slowdown[0])
    slowed = classes.with_prefill_slowed(slowdown)
    prefill = _prefill_stage(scenario, slowed, lam)
    batch, stable = float(point.batch[0]), bool(point.stable[0])
    decoder = _Decoder(batch=batch, max_batch=room, step_s=float(point.token_s[0]), stable=stable)
    shape = (len(classes.input_prob), len(classes.output_tokens), len(states.prob))
    zeros = np.zeros(shape)
    # a step formed while requests wait is packed to the chunk budget
    full_mixed_s = steps.full_chunk_s + float(point.marginal_s[0])
    next_mixed_s = float(steps.next_busy_step_s(unslowed.loaded_share)) + float(point.marginal_s[0])
    return (
        slowed,
        prefill,
        _Decoding(
            md=decoder,
            relay=None,
            offered_bytes_per_s=0.0,
            wan_s=np.zeros((shape[0], shape[2])),
            eager_tokens=zeros,
            finishes_on_relay=zeros.astype(bool),
            gap_s=zeros,
            iterations=1,
            md_longest_step_s=full_mixed_s if prefill.utilization > 0 else 0.0,
            first_steps=(min(max(prefill.work_left_share, 0.0), 1.0), next_mixed_s, float(point.alone_s[0])),
        ),
    )


def _first_token_delays(
    scenario: Scenario, classes: RequestClasses, decoding: _Decoding, states: _LinkStates, own_extra_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Prefill (its time alone plus `own_extra_s`, what the load adds) plus the architecture's path
    to the first token, per (input class, state), and the states' probabilities. A co-located
    decoder's first step (the relay's on prefill instances, or agg's) is a two-point mixture
    (`_Decoding.first_steps`): the states are then (mixed step, state f) and (decode step, state f),
    stacked along the state axis."""
    prefill = scenario.prefill
    full_kv = request_kv_bytes(scenario.model, classes.prompt_tokens, scenario.workload.serving.page_tokens)
    rdma = rdma_time_s(full_kv, prefill.instance.kv_senders, prefill.instance.hardware.nic_bytes_per_s)
    if scenario.colocated_pool is not None:  # the decoder is where the KV already is
        rdma = np.zeros_like(rdma)

    def after(first_step: float | None) -> np.ndarray:
        decode_step = decoding.md.step_s
        relay_step = decoding.relay.step_s if decoding.relay is not None else 0.0
        if first_step is not None and scenario.colocated_pool == "decode":
            decode_step = first_step
        elif first_step is not None:
            relay_step = first_step
        first = scenario.architecture.first_token_delay(
            rdma[:, None], decoding.wan_s, decode_step, relay_step, classes.relay[:, None]
        )
        return (classes.prefill_s + own_extra_s)[:, None] + classes.load_s[:, None] + first

    if decoding.first_steps is None:
        return after(None), states.prob
    busy, mixed_s, alone_s = decoding.first_steps
    delays = np.concatenate([after(mixed_s), after(alone_s)], axis=1)
    return delays, np.concatenate([busy * states.prob, (1.0 - busy) * states.prob])


def _tpot_and_gaps(decoding: _Decoding, outputs: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(TPOT, worst inter-token gap) per (input class, output length, state).

    Handed over: (k tau_RLD + gap + (O - k - 1) tau_MD) / (O - 1); finished on the relay: tau_RLD;
    otherwise tau_MD. The worst gap of a handed-over request is max(gap, tau_MD)."""
    tau_m = decoding.md.step_s
    tau_r = decoding.relay.step_s if decoding.relay is not None else 0.0
    relay_worst = max(tau_r, decoding.relay_longest_step_s)
    md_worst = max(tau_m, decoding.md_longest_step_s)
    o = outputs[None, :, None]
    eager, finishes, gap = decoding.eager_tokens, decoding.finishes_on_relay, decoding.gap_s
    relayed = eager > 0
    with np.errstate(invalid="ignore"):  # inf * 0 in entries np.where discards (an unstable relay)
        handed_over = (eager * tau_r + gap + np.maximum(o - eager - 1, 0) * tau_m) / np.maximum(o - 1, 1)
    tpot = np.where(finishes, tau_r, np.where(relayed, handed_over, tau_m))
    worst = np.where(
        relayed & ~finishes,
        np.maximum(np.maximum(gap, tau_m), relay_worst),
        np.where(finishes, relay_worst, md_worst),
    )
    return np.broadcast_to(tpot, shape), np.broadcast_to(worst, shape)


@kept_by_identity(RECENT_EVALUATIONS)
def evaluate(scenario: Scenario, rate_rps: float | None = None) -> Evaluation:
    """Evaluate `scenario` at `rate_rps` (default: the plan's rate), stage by stage (module docstring).
    The last evaluations are kept by the scenario's identity (`kept_by_identity`): a search
    evaluates a plan, then the plan's verification asks the same scenario again."""
    if rate_rps is not None:
        check_rate(rate_rps)
    lam = rate_rps if rate_rps is not None else scenario.rate_rps
    if scenario.plan.split is not None:
        return _evaluate_split(scenario, lam)
    return _evaluate_pool(scenario, lam)


def _evaluate_pool(scenario: Scenario, lam: float) -> Evaluation:
    """`evaluate` of a plan with one pool per role at `lam` requests/s."""
    workload = scenario.workload
    classes = request_classes(scenario, lam)
    p_in, outputs, p_out = classes.input_prob, classes.output_tokens, classes.output_prob
    states = _link_states(scenario)
    if scenario.architecture.colocated:
        classes, prefill, decoding = _agg_stages(scenario, classes, lam, states)
    elif scenario.relay_colocated:
        classes, prefill, decoding = _colocated_stages(scenario, classes, lam, states)
    else:
        prefill = _prefill_stage(scenario, classes, lam)
        decode_stages = _decode_with_relay if scenario.relay is not None else _decode_without_relay
        decoding = decode_stages(scenario, classes, lam, states)
    md, relay = decoding.md, decoding.relay
    weights = np.einsum("i,o,f->iof", p_in, p_out, states.prob)

    first, first_prob = _first_token_delays(scenario, classes, decoding, states, prefill.own_extra_s)
    delays = first.ravel()
    slot_p, slot_mean = _slot_waits(scenario, classes, lam, md, relay, decoding.finishes_on_relay, weights)
    slot_p = np.broadcast_to(slot_p[:, None], first.shape).ravel()
    slot_mean = np.broadcast_to(slot_mean[:, None], first.shape).ravel()
    waits = (prefill.p_wait, prefill.wait_mean_s, slot_p, slot_mean)
    ttft_weights = np.outer(p_in, first_prob).ravel()
    link = scenario.link
    link_utilization = decoding.offered_bytes_per_s / link.mean_capacity_bytes_per_s() if link else 0.0
    stable = prefill.utilization < 1 and md.stable and (relay is None or relay.stable) and link_utilization < 1
    ttft_q = mixture_quantiles(QUANTILES, delays, ttft_weights, *waits) if stable else np.full(3, math.inf)

    tpot, worst_gap = _tpot_and_gaps(decoding, outputs, weights.shape)
    tpot_q = _weighted_quantiles(tpot.ravel(), weights.ravel(), QUANTILES)
    worst_gap_p99 = float(_weighted_quantiles(worst_gap.ravel(), weights.ravel(), (0.99,))[0])

    sla = workload.sla
    attainment = 0.0
    if stable:
        ttft_ok = 1.0 - wait_survival(sla.ttft_p99_s - delays, *waits)
        tpot_ok = tpot <= tpot_target(sla)
        # over the first-token mixture (if any), per (input class, line state)
        split = first_prob.reshape(-1, len(states.prob)) / states.prob
        ttft_ok = (ttft_ok.reshape(len(p_in), -1, len(states.prob)) * split).sum(axis=1)
        attainment = float((ttft_ok[:, None, :] * tpot_ok * weights).sum())
    instability = None if stable else _instability(prefill.utilization, md, relay, link_utilization)
    cost = scenario.cost_per_hour
    revenue = revenue_per_request(workload, classes)
    verdict = judge(sla, Tails.of(ttft_q, tpot_q), lam, attainment, (revenue, cost), instability)
    finishes = decoding.finishes_on_relay
    return Evaluation(
        **_judged(scenario, lam, ttft_q, tpot_q, verdict, cost),
        worst_gap_p99_s=worst_gap_p99,
        rld_token_share=float((np.minimum(decoding.eager_tokens, outputs[None, :, None]) * weights).sum())
        / classes.mean_output_tokens,
        singular_share=float((finishes * weights).sum()),
        relay_share=float(classes.relay @ p_in),
        link_utilization=link_utilization,
        wan_bytes_per_request=decoding.offered_bytes_per_s / lam if lam > 0 else 0.0,
        wan_gbps_offered=decoding.offered_bytes_per_s * 8 / 1e9,
        stages=_stage_reports(scenario, prefill, decoding),
        pipelines=_pipelines(scenario, classes.relay, delays, ttft_weights, waits, stable),
        fixed_point_iterations=decoding.iterations,
        request_overhead_s=scenario.prefill.instance.efficiency.request_overhead_s,
        caches=cache_reports(scenario, lam),
        notes=_cap_notes(scenario, decoding, context=classes.mean_context_tokens, rate_rps=lam),
        handoff_choices=decoding.catch_up_choices,
        mixture=PoolMixture(
            ttft=WaitedDelays(delays, ttft_weights, *waits),
            tpot=tpot.ravel(),
            worst_gap=worst_gap.ravel(),
            weights=weights.ravel(),
            attainment=attainment,
            revenue_per_request_usd=revenue,
            instability=instability,
        ),
    )


def _judged(
    scenario: Scenario, lam: float, ttft_q: np.ndarray, tpot_q: np.ndarray, verdict: Verdict, cost: float
) -> dict[str, Any]:
    """The fields every evaluation states alike: the rate, the TTFT and TPOT quantiles, and the
    verdict's goodput, violations, revenue and BCR at `cost` $/h."""
    return {
        "architecture": scenario.plan.architecture,
        "rate_rps": lam,
        "ttft": Percentiles(*map(float, ttft_q)),
        "tpot": Percentiles(*map(float, tpot_q)),
        "goodput_rps": verdict.goodput_rps,
        "sla_met": verdict.sla_met,
        "sla_violations": verdict.violations,
        "cost_per_hour": cost,
        "revenue_per_hour": verdict.revenue_per_hour,
        "bcr": verdict.bcr,
    }


def _evaluate_split(scenario: Scenario, lam: float) -> Evaluation:
    """A plan whose requests split over two co-located pools (`pddplan.scenarios.split`): each pool
    evaluated at its share s_i of `lam`, the request a mixture of theirs. TTFT quantiles solve
    sum_i s_i P(T_i > t) = 1 - q; TPOT and gap quantiles are over both pools' points, weighted by
    s_i; attainment and revenue per request are the s_i-weighted means; cost adds up. A pool's
    stages are named by its role (`split`, `split-decode` for the second pool)."""
    parts = pool_parts(scenario)
    pools = [(part, _evaluate_pool(part.scenario, lam * part.share)) for part in parts]
    mixtures: list[tuple[float, PoolMixture]] = []
    for part, evaluation in pools:
        assert evaluation.mixture is not None  # every one-pool evaluation carries its mixture
        mixtures.append((part.share, evaluation.mixture))
    unstable = [
        f"{part.role} pool: {m.instability.removeprefix('unstable: ')}"
        for part, (_, m) in zip(parts, mixtures, strict=True)
        if m.instability
    ]
    ttft_q = np.full(3, math.inf) if unstable else pools_quantiles(QUANTILES, [(s, m.ttft) for s, m in mixtures])
    weights = np.concatenate([s * m.weights for s, m in mixtures])
    tpot_q = _weighted_quantiles(np.concatenate([m.tpot for _, m in mixtures]), weights, QUANTILES)
    gaps = np.concatenate([m.worst_gap for _, m in mixtures])
    attainment = sum(s * m.attainment for s, m in mixtures)
    revenue = sum(s * m.revenue_per_request_usd for s, m in mixtures)
    cost = scenario.cost_per_hour
    instability = "unstable: " + "; ".join(unstable) if unstable else None
    verdict = judge(scenario.workload.sla, Tails.of(ttft_q, tpot_q), lam, attainment, (revenue, cost), instability)
    stages: dict[str, StageReport] = {}
    caches: list[PrefixCache] = []
    notes: list[str] = []
    for part, evaluation in pools:
        first = part.role == "prefill"
        for name, stage in evaluation.stages.items():
            stages[pool_figure_name(part.role, name)] = stage
        caches += [c if first else c.model_copy(update={"cache": "split"}) for c in evaluation.caches]
        notes += [note if first else f"split pool: {note}" for note in evaluation.notes]
    # co-located serving has one pipeline, which every request of either pool takes
    figures = {"share": 1.0, **{f"ttft_p{round(q * 100)}_s": float(v) for q, v in zip(QUANTILES, ttft_q, strict=True)}}
    pipelines = dict.fromkeys(pools[0][1].pipelines, figures)

    def mean(figure: Callable[[Evaluation], float]) -> float:
        return float(sum(part.share * figure(evaluation) for part, evaluation in pools))

    return Evaluation(
        **_judged(scenario, lam, ttft_q, tpot_q, verdict, cost),
        worst_gap_p99_s=float(_weighted_quantiles(gaps, weights, (0.99,))[0]),
        rld_token_share=mean(lambda e: e.rld_token_share),
        singular_share=mean(lambda e: e.singular_share),
        relay_share=mean(lambda e: e.relay_share),
        link_utilization=0.0,
        wan_bytes_per_request=mean(lambda e: e.wan_bytes_per_request),
        wan_gbps_offered=sum(e.wan_gbps_offered for _, e in pools),
        stages=stages,
        pipelines=pipelines,
        fixed_point_iterations=max(e.fixed_point_iterations for _, e in pools),
        request_overhead_s=mean(lambda e: e.request_overhead_s),
        caches=caches,
        notes=notes,
    )


def _cap_notes(scenario: Scenario, decoding: _Decoding, context: float, rate_rps: float) -> list[str]:
    """A note per decoder pool whose batch a fixed cap (`max_decode_batch`, the plan's or the
    workload's) holds below what its KV memory allows: "binds" when the pool runs at 90% of the cap
    or more, or cannot carry its load."""
    cap = scenario.fixed_decode_batch
    if cap is None:
        return []
    notes = []
    reserve = scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE, rate_rps)
    pools = [("decode", scenario.decode, decoding.md, reserve), ("relay", scenario.relay, decoding.relay, 0.0)]
    for name, role, decoder, reserved in pools:
        if role is None or decoder is None or name == scenario.colocated_pool:
            continue
        per_sequence = float(request_kv_bytes(scenario.model, context, scenario.workload.serving.page_tokens))
        room = float(sequences_that_fit(role.kv_capacity_bytes - reserved, per_sequence, role.instance.kv_pools))
        if room <= cap:
            continue
        busy = not decoder.stable or decoder.batch >= 0.9 * cap
        verb = "binds" if busy else "holds it below memory"
        label = scenario.architecture.decode_label if name == "decode" else "RLD"
        notes.append(
            f"decode batch cap {cap} {verb} on {label} ({role.instance.hardware.name} TP{role.tp}"
            f"{f' PP{role.spec.pp}' if role.spec.pp > 1 else ''}): memory allows "
            f"{room:,.0f} sequences, the pool runs {decoder.batch:,.0f} per instance"
        )
    return notes


def cache_reports(scenario: Scenario, rate_rps: float) -> list[PrefixCache]:
    """Per cache the architecture keeps (`pddplan.cache`): what the traffic asks it to hold, where
    its bytes are (HBM, each lower tier, lost for room), the share of next turns that find their
    prefix, a mean hit's load time, each lower tier's read bandwidth in use, and notes (a tier the
    profile leaves unknown). Lower tiers come with the servers: they cost nothing beyond the GPUs."""
    workload, page = scenario.workload, scenario.workload.serving.page_tokens
    prompts, hits, probs = workload.prompt_hit_support()
    hit_bytes = float(
        (request_kv_bytes(scenario.model, prompts, page) - incremental_kv_bytes(scenario.model, prompts, hits, page))
        @ probs
    )
    out = []
    for kind in scenario.architecture.caches:
        site = scenario.cache(kind, rate_rps)
        assert site is not None
        placement = site.placement
        utilization = placement.tier_utilization(rate_rps * hit_bytes * site.kept)
        out.append(
            PrefixCache(
                cache=kind.value,
                holds_gb=placement.demand_bytes / 1e9,
                hbm_gb=placement.hbm_bytes / 1e9,
                tiers=[
                    CacheTier(
                        tier=t.name,
                        gb=b / 1e9,
                        capacity_gb=t.capacity_bytes * placement.count / 1e9,
                        read_utilization=u,
                    )
                    for t, b, u in zip(placement.tiers, placement.tier_bytes, utilization, strict=True)
                ],
                lost_share=1.0 - placement.kept_share,
                found_share=site.kept,
                mean_hit_load_s=hit_bytes * placement.load_s_per_byte(),
                notes=list(site.notes),
            )
        )
    return out


def _stage_reports(scenario: Scenario, prefill: _Prefill, decoding: _Decoding) -> dict[str, StageReport]:
    """Instances, utilization, batch and step of each stage."""
    stages = {
        "prefill": StageReport(
            instances=scenario.prefill.count,
            utilization=prefill.utilization,
            step_s=prefill.mean_s,
            stable=prefill.utilization < 1,
        )
    }
    pools = [("decode", scenario.decode, decoding.md), ("relay", scenario.relay, decoding.relay)]
    for name, role, decoder in pools:
        if role is None or decoder is None:
            continue
        stages[name] = StageReport(
            instances=role.count,
            utilization=decoder.batch / max(decoder.max_batch, 1e-9),
            batch_per_instance=decoder.batch,
            max_batch=int(decoder.max_batch),
            step_s=decoder.step_s,
            stable=decoder.stable,
        )
    return stages


def _slot_waits(
    scenario: Scenario,
    classes: RequestClasses,
    lam: float,
    md: _Decoder,
    relay: _Decoder | None,
    finishes_on_relay: np.ndarray,
    weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per input class, (P(wait), conditional mean) for a batch slot on the first decoder it meets.

    Slots of a pool are servers of a G/G/c queue: c = instances * max batch, service = the time a
    sequence holds its slot (Little: batch * instances / arrival rate), service cv^2 that of the
    output lengths. P-RLD-MD requests wait for a relay slot, the others for a decode slot. A decoder
    on the prefill instances (agg's, or a relay there) holds a request where its prefill ran: its
    queue is one instance's, c = max batch at the instance's share of the arrivals.
    """
    outputs, p_out = classes.output_tokens, classes.output_prob
    mean_o = float(outputs @ p_out)
    cv2_out = float((outputs**2) @ p_out) / mean_o**2 - 1.0
    cv2_arrival = scenario.workload.arrival.cv**2
    p = np.zeros(len(classes.input_prob))
    mean = np.zeros(len(classes.input_prob))

    def pool_wait(decoder: _Decoder, instances: int, arrivals: float) -> tuple[float, float]:
        if not decoder.stable or not math.isfinite(decoder.batch):
            return 1.0, math.inf
        if arrivals <= 0 or decoder.batch <= 0:
            return 0.0, 0.0
        hold = decoder.batch * instances / arrivals
        p_arr, m_arr = allen_cunneen(instances * decoder.max_batch, arrivals, hold, cv2_out, cv2_arrival)
        return float(p_arr), float(m_arr)

    def slots_wait(name: str, decoder: _Decoder, instances: int, arrivals: float) -> tuple[float, float]:
        # a decoder on the prefill instances takes a request where its prefill ran: its slots
        # are one instance's, not the pool's
        if name == scenario.colocated_pool:
            return pool_wait(decoder, 1, arrivals / instances)
        return pool_wait(decoder, instances, arrivals)

    md_arrivals = lam * float(((~finishes_on_relay) * weights).sum())
    md_p, md_m = slots_wait("decode", md, scenario.decode.count, md_arrivals)
    direct = ~classes.relay
    p[direct], mean[direct] = md_p, md_m
    if relay is not None and scenario.relay is not None:
        relay_arrivals = lam * float(classes.relay @ classes.input_prob)
        r_p, r_m = slots_wait("relay", relay, scenario.relay.count, relay_arrivals)
        p[classes.relay], mean[classes.relay] = r_p, r_m
    return p, mean


def _weighted_quantiles(values: np.ndarray, weights: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """Quantiles of a discrete distribution (values with weights)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    cumulative /= cumulative[-1]
    index = np.searchsorted(cumulative, np.asarray(quantiles) - 1e-12)
    return values[order[np.minimum(index, len(values) - 1)]]


def _instability(rho_prefill: float, md: _Decoder, relay: _Decoder | None, link_utilization: float) -> str:
    parts = []
    if rho_prefill >= 1:
        parts.append(f"prefill utilization {rho_prefill:.2f} >= 1")
    if not md.stable:
        parts.append(f"decode needs {md.batch:.0f} sequences per instance, holds {md.max_batch:.0f}")
    if relay is not None and not relay.stable:
        parts.append(f"relay needs {relay.batch:.0f} sequences per instance, holds {relay.max_batch:.0f}")
    if link_utilization >= 1:
        parts.append(f"WAN utilization {link_utilization:.2f} >= 1")
    return "unstable: " + "; ".join(parts)


def _pipelines(
    scenario: Scenario,
    relay: np.ndarray,
    delays: np.ndarray,
    ttft_weights: np.ndarray,
    waits: tuple[float, float, np.ndarray, np.ndarray],
    stable: bool,
) -> dict[str, dict[str, float]]:
    """TTFT percentiles per pipeline of the architecture (P-MD and P-RLD-MD for pdd; one otherwise)."""
    states = len(ttft_weights) // len(relay)
    out = {}
    for pipeline, mask in scenario.architecture.pipelines(relay).items():
        w = np.where(np.repeat(mask, states), ttft_weights, 0.0)
        share = float(w.sum())
        if share <= 0:
            continue
        q = mixture_quantiles(QUANTILES, delays, w, *waits) if stable else np.full(3, math.inf)
        out[pipeline.value] = {
            "share": share,
            "ttft_p50_s": float(q[0]),
            "ttft_p90_s": float(q[1]),
            "ttft_p99_s": float(q[2]),
        }
    return out
