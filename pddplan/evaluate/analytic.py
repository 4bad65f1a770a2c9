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
           an RTT to stop, plus catch-up rounds; it hands over k eager tokens, which the MD
           recomputes in one extend step (a stall of the MD instance); a request whose output ends
           within the window is finished by the relay (singular traffic).
TTFT       P-MD: wait + S + WAN + tau_MD.  P-RLD-MD: wait + S + RDMA + tau_RLD.
           pd-intra: wait + S + RDMA + tau_D.  pd-cross: wait + S + WAN + tau_D.
goodput    the rate when every SLA percentile holds; otherwise rate * P(TTFT <= the P99 target and
           TPOT <= the TPOT target), the share of requests that individually meet it; 0 if unstable.
BCR        goodput requests per dollar: goodput_rps * 3600 / cost_per_hour.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pddplan.evaluate.classes import RequestClasses, request_classes
from pddplan.evaluate.queueing import allen_cunneen, mixture_quantiles, wait_survival
from pddplan.net.tcp import rdma_time_s
from pddplan.net.transfer import wan_transfer_time
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.memory import sequences_that_fit
from pddplan.perf.roofline import decode_step_time, extend_time
from pddplan.scenario import Role, Scenario
from pddplan.specs.workload import Workload

QUANTILES = (0.5, 0.9, 0.99)
MAX_CATCHUP_ROUNDS = 6


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
    max_batch: float = 0.0
    step_s: float = 0.0
    stable: bool = True


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

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON view with the documented keys (ttft_p90_s, goodput_rps, bcr, ...)."""
        out: dict[str, Any] = {
            "architecture": self.architecture,
            "rate_rps": self.rate_rps,
            "ttft_p50_s": self.ttft.p50_s,
            "ttft_p90_s": self.ttft.p90_s,
            "ttft_p99_s": self.ttft.p99_s,
            "tpot_p50_s": self.tpot.p50_s,
            "tpot_p90_s": self.tpot.p90_s,
            "tpot_p99_s": self.tpot.p99_s,
            "worst_gap_p99_s": self.worst_gap_p99_s,
            "goodput_rps": self.goodput_rps,
            "sla_met": self.sla_met,
            "sla_violations": self.sla_violations,
            "cost_per_hour": self.cost_per_hour,
            "revenue_per_hour": self.revenue_per_hour,
            "bcr": self.bcr,
            "rld_token_share": self.rld_token_share,
            "singular_share": self.singular_share,
            "relay_share": self.relay_share,
            "link_utilization": self.link_utilization,
            "wan_bytes_per_request": self.wan_bytes_per_request,
            "wan_gbps_offered": self.wan_gbps_offered,
            "stages": {name: asdict(stage) for name, stage in self.stages.items()},
            "pipelines": self.pipelines,
        }
        return out


@dataclass(frozen=True)
class _Decoder:
    """Operating point of a decoder pool."""

    batch: float
    max_batch: float
    step_s: float
    stable: bool


def revenue_per_request(workload: Workload, classes: RequestClasses) -> float:
    """Mean $ a request pays: uncached input, cached input (discounted) and output tokens."""
    prices = workload.prices
    input_usd = (
        classes.new_tokens * prices.input_usd_per_mtok + classes.cached_tokens * prices.cached_input_usd_per_mtok
    ) / 1e6
    return float(input_usd @ classes.input_prob + classes.mean_output_tokens * prices.output_usd_per_mtok / 1e6)


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


def evaluate(scenario: Scenario, rate_rps: float | None = None) -> Evaluation:
    """Evaluate `scenario` at `rate_rps` (default: the workload's rate)."""
    workload = scenario.workload
    plan = scenario.plan
    lam = rate_rps if rate_rps is not None else scenario.rate_rps
    classes = request_classes(scenario)
    p_in = classes.input_prob
    outputs = classes.output_tokens
    p_out = classes.output_prob
    context = classes.mean_context_tokens
    cv2_arrival = workload.arrival.cv**2

    # prefill -------------------------------------------------------------------------------------
    prefill = scenario.prefill
    mean_s = float(classes.prefill_s @ p_in)
    cv2_s = float((classes.prefill_s**2) @ p_in) / mean_s**2 - 1.0 if mean_s > 0 else 0.0
    p_wait_arr, wait_mean_arr = allen_cunneen(prefill.count, lam, mean_s, cv2_s, cv2_arrival)
    p_wait, wait_mean = float(p_wait_arr), float(wait_mean_arr)
    rho_prefill = lam * mean_s / prefill.count

    # transfers -------------------------------------------------------------------------------------
    nic = prefill.instance.hardware.nic_bytes_per_s
    link = scenario.link
    if link is not None:
        capacity_f, prob_f = link.capacity_support()
    else:
        capacity_f, prob_f = np.array([math.inf]), np.array([1.0])
    relay = classes.relay
    relay_role = scenario.relay

    cancel_fraction = np.zeros((len(p_in), len(outputs), len(prob_f)))
    decoder_relay: _Decoder | None = None
    wan_time = np.zeros((len(p_in), len(prob_f)))
    offered = 0.0
    eager_tokens = np.zeros_like(cancel_fraction)
    relay_hold = np.zeros_like(cancel_fraction)
    gap = np.zeros_like(cancel_fraction)
    md_decoder: _Decoder | None = None
    extend_s = np.zeros_like(cancel_fraction)
    drc = scenario.drc_bytes_per_decode_instance(lam)
    decode_max_batch = decoder_max_batch(scenario, scenario.decode, context, drc)
    relay_max_batch = decoder_max_batch(scenario, relay_role, context, 0.0) if relay_role else 0.0
    relay_batches = np.arange(1.0, max(relay_max_batch, 1.0) + 1.0)
    relay_steps = (
        decode_step_time(relay_role.instance, relay_batches, context) if relay_role else np.ones_like(relay_batches)
    )
    for _ in range(4 if plan.architecture == "pdd" else 1):
        if link is not None:
            sent = classes.wan_bytes[:, None, None] * (1.0 - cancel_fraction)
            offered = lam * float(np.einsum("iof,i,o,f->", sent, p_in, p_out, prob_f))
            wan_time = wan_transfer_time(classes.wan_bytes, capacity_f, offered, link.flow_cap_bytes_per_s, link.rtt_s)
        if plan.architecture != "pdd" or relay_role is None:
            break
        assert link is not None
        tau_r = (
            decoder_relay.step_s
            if decoder_relay and decoder_relay.stable
            else float(decode_step_time(relay_role.instance, max(relay_max_batch / 2, 1.0), context))
        )
        tau_m = (
            md_decoder.step_s
            if md_decoder and md_decoder.stable
            else float(decode_step_time(scenario.decode.instance, max(decode_max_batch / 2, 1.0), context))
        )
        utilization_r = decoder_relay.batch / max(relay_max_batch, 1e-9) if decoder_relay else 0.0
        catch_up = plan.handoff.mode == "catch-up" or (
            plan.handoff.mode == "adaptive" and utilization_r < plan.handoff.adaptive_load_threshold
        )
        window = wan_time + link.rtt_s / 2  # RLD stops half an RTT after the KV lands at the MD
        k0 = window / tau_r
        extra, k_last = _catch_up(scenario, k0, tau_r, link.rtt_s, catch_up, context)
        window_total = window + extra
        eager = np.minimum(outputs[None, :, None], k0[:, None, :] + (extra / tau_r)[:, None, :])
        finishes_on_relay = relay[:, None, None] & (outputs[None, :, None] <= eager)
        eager_tokens = np.where(relay[:, None, None], eager, 0.0)
        relay_hold = np.where(
            relay[:, None, None],
            np.minimum(window_total[:, None, :], outputs[None, :, None] * tau_r),
            0.0,
        )
        if plan.routing.singular_filter:
            done_fraction = np.minimum(1.0, outputs[None, :, None] * tau_r / np.maximum(wan_time[:, None, :], 1e-9))
            cancel_fraction = np.where(finishes_on_relay, 1.0 - done_fraction, 0.0)
        handoffs = relay[:, None, None] & ~finishes_on_relay
        extend_s = np.where(handoffs, extend_time(scenario.decode.instance, k_last[:, None, :], context), 0.0)
        gap = np.where(handoffs, link.rtt_s / 2 + extend_s + tau_m, 0.0)
        weights = np.einsum("i,o,f->iof", p_in, p_out, prob_f)
        relay_batch = lam * float((relay_hold * weights).sum()) / relay_role.count
        decoder_relay = _Decoder(
            batch=relay_batch,
            max_batch=relay_max_batch,
            step_s=float(np.interp(relay_batch, relay_batches, relay_steps)),
            stable=relay_batch <= relay_max_batch,
        )
        stall = lam / scenario.decode.count * float((extend_s * weights).sum())
        md_tokens = float(((outputs[None, :, None] - eager_tokens) * ~finishes_on_relay * weights).sum())
        md_rate = lam * float((~finishes_on_relay * weights).sum())
        md_decoder = _operating_point(
            scenario.decode, md_rate, md_tokens / max(md_rate / lam, 1e-12), context, decode_max_batch, stall
        )

    weights = np.einsum("i,o,f->iof", p_in, p_out, prob_f)
    if plan.architecture != "pdd":
        md_decoder = _operating_point(scenario.decode, lam, classes.mean_output_tokens, context, decode_max_batch, 0.0)
        finishes_on_relay = np.zeros(weights.shape, dtype=bool)
    assert md_decoder is not None
    tau_m = md_decoder.step_s

    # TTFT ------------------------------------------------------------------------------------------
    if plan.architecture == "pd-intra":
        full_kv = request_kv_bytes(scenario.model, classes.prompt_tokens, workload.serving.page_tokens)
        to_decoder = rdma_time_s(full_kv, prefill.instance.kv_senders, nic)[:, None] + 0 * prob_f[None, :]
        first = to_decoder + tau_m
    elif plan.architecture == "pd-cross":
        first = wan_time + tau_m
    else:
        assert decoder_relay is not None and relay_role is not None
        full_kv = request_kv_bytes(scenario.model, classes.prompt_tokens, workload.serving.page_tokens)
        rdma = rdma_time_s(full_kv, prefill.instance.kv_senders, nic)
        first = np.where(relay[:, None], (rdma + decoder_relay.step_s)[:, None], wan_time + tau_m)
    delays = (classes.prefill_s[:, None] + first).ravel()
    slot_p, slot_mean = _slot_waits(scenario, classes, lam, md_decoder, decoder_relay, finishes_on_relay, weights)
    slot_p = np.broadcast_to(slot_p[:, None], first.shape).ravel()
    slot_mean = np.broadcast_to(slot_mean[:, None], first.shape).ravel()
    ttft_weights = np.outer(p_in, prob_f).ravel()
    stable = rho_prefill < 1 and md_decoder.stable and (decoder_relay is None or decoder_relay.stable)
    link_utilization = offered / link.mean_capacity_bytes_per_s() if link is not None else 0.0
    stable = stable and link_utilization < 1
    if stable:
        ttft_q = mixture_quantiles(QUANTILES, delays, ttft_weights, p_wait, wait_mean, slot_p, slot_mean)
    else:
        ttft_q = np.full(3, math.inf)

    # TPOT ------------------------------------------------------------------------------------------
    tau_r_final = decoder_relay.step_s if decoder_relay is not None else 0.0
    o = outputs[None, :, None]
    relayed = eager_tokens > 0
    with np.errstate(invalid="ignore"):  # inf * 0 in entries np.where discards (an unstable relay)
        handed_over = (eager_tokens * tau_r_final + gap + np.maximum(o - eager_tokens - 1, 0) * tau_m) / np.maximum(
            o - 1, 1
        )
    tpot = np.where(finishes_on_relay, tau_r_final, np.where(relayed, handed_over, tau_m))
    tpot = np.broadcast_to(tpot, weights.shape)
    tpot_q = _weighted_quantiles(tpot.ravel(), weights.ravel(), QUANTILES)
    worst_gap = np.where(
        relayed & ~finishes_on_relay, np.maximum(gap, tau_m), np.where(finishes_on_relay, tau_r_final, tau_m)
    )
    worst_gap = np.broadcast_to(worst_gap, weights.shape)
    worst_gap_p99 = float(_weighted_quantiles(worst_gap.ravel(), weights.ravel(), (0.99,))[0])

    # SLA, goodput, money ---------------------------------------------------------------------------
    sla = workload.sla
    violations = []
    if not stable:
        violations.append(_instability(rho_prefill, md_decoder, decoder_relay, link_utilization))
    if ttft_q[1] > sla.ttft_p90_s:
        violations.append(f"TTFT P90 {ttft_q[1]:.2f} s > {sla.ttft_p90_s:g} s")
    if ttft_q[2] > sla.ttft_p99_s:
        violations.append(f"TTFT P99 {ttft_q[2]:.2f} s > {sla.ttft_p99_s:g} s")
    if sla.tpot_p90_s is not None and tpot_q[1] > sla.tpot_p90_s:
        violations.append(f"TPOT P90 {tpot_q[1] * 1e3:.1f} ms > {sla.tpot_p90_s * 1e3:g} ms")
    if stable:
        ttft_ok = 1.0 - wait_survival(sla.ttft_p99_s - delays, p_wait, wait_mean, slot_p, slot_mean)
        ttft_ok = ttft_ok.reshape(len(p_in), 1, len(prob_f))
        tpot_ok = tpot <= (sla.tpot_p90_s if sla.tpot_p90_s is not None else math.inf)
        attainment = float((ttft_ok * tpot_ok * weights).sum())
    else:
        attainment = 0.0
    goodput = lam if stable and not violations else lam * attainment
    cost = scenario.cost_per_hour
    revenue = lam * revenue_per_request(workload, classes) * 3600 if stable else 0.0

    relay_prob = float(relay @ p_in)
    singular = float((finishes_on_relay * weights).sum())
    rld_tokens = float((np.minimum(eager_tokens, o) * weights).sum())
    wan_per_request = offered / lam if lam > 0 else 0.0
    stages = {
        "prefill": StageReport(instances=prefill.count, utilization=rho_prefill, step_s=mean_s, stable=rho_prefill < 1),
        "decode": StageReport(
            instances=scenario.decode.count,
            utilization=md_decoder.batch / max(md_decoder.max_batch, 1e-9),
            batch_per_instance=md_decoder.batch,
            max_batch=md_decoder.max_batch,
            step_s=md_decoder.step_s,
            stable=md_decoder.stable,
        ),
    }
    if decoder_relay is not None and relay_role is not None:
        stages["relay"] = StageReport(
            instances=relay_role.count,
            utilization=decoder_relay.batch / max(decoder_relay.max_batch, 1e-9),
            batch_per_instance=decoder_relay.batch,
            max_batch=decoder_relay.max_batch,
            step_s=decoder_relay.step_s,
            stable=decoder_relay.stable,
        )
    pipelines = _pipelines(
        plan.architecture, relay, delays, p_in, prob_f, (p_wait, wait_mean, slot_p, slot_mean), stable
    )
    return Evaluation(
        architecture=plan.architecture,
        rate_rps=lam,
        ttft=Percentiles(*map(float, ttft_q)),
        tpot=Percentiles(*map(float, tpot_q)),
        worst_gap_p99_s=worst_gap_p99,
        goodput_rps=goodput,
        sla_met=not violations,
        sla_violations=violations,
        cost_per_hour=cost,
        revenue_per_hour=revenue,
        bcr=goodput * 3600 / cost if cost > 0 else 0.0,
        rld_token_share=rld_tokens / classes.mean_output_tokens,
        singular_share=singular,
        relay_share=relay_prob,
        link_utilization=link_utilization,
        wan_bytes_per_request=wan_per_request,
        wan_gbps_offered=offered * 8 / 1e9,
        stages=stages,
        pipelines=pipelines,
    )


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
    output lengths. P-RLD-MD requests wait for a relay slot, the others for a decode slot.
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

    md_arrivals = lam * float(((~finishes_on_relay) * weights).sum())
    md_p, md_m = pool_wait(md, scenario.decode.count, md_arrivals)
    direct = ~classes.relay
    p[direct], mean[direct] = md_p, md_m
    if relay is not None and scenario.relay is not None:
        relay_arrivals = lam * float(classes.relay @ classes.input_prob)
        r_p, r_m = pool_wait(relay, scenario.relay.count, relay_arrivals)
        p[classes.relay], mean[classes.relay] = r_p, r_m
    return p, mean


def _catch_up(
    scenario: Scenario, k0: np.ndarray, tau_r: float, rtt_s: float, catch_up: bool, context: float
) -> tuple[np.ndarray, np.ndarray]:
    """(extra relay time beyond the first handoff, eager tokens in the final handoff chunk).

    One-shot: no extra time, the final chunk is all k0 eager tokens. Catch-up: while the MD
    recomputes chunk k_i (extend time e_i) and the IDs make a round trip, the relay produces
    k_{i+1} = (RTT + e_i) / tau_RLD more; stop when k_{i+1} <= the threshold.
    """
    if not catch_up:
        return np.zeros_like(k0), k0
    threshold = scenario.plan.handoff.catchup_threshold_tokens
    extra = np.zeros_like(k0)
    chunk = k0
    active = k0 > threshold
    for _ in range(MAX_CATCHUP_ROUNDS):
        if not active.any():
            break
        round_s = rtt_s + extend_time(scenario.decode.instance, np.maximum(chunk, 1.0), context)
        extra = np.where(active, extra + round_s, extra)
        chunk = np.where(active, round_s / tau_r, chunk)
        active = active & (chunk > threshold)
    return extra, chunk


def _weighted_quantiles(values: np.ndarray, weights: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """Quantiles of a discrete distribution (values with weights)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    cumulative /= cumulative[-1]
    index = np.searchsorted(cumulative, np.asarray(quantiles) - 1e-12)
    return values[order][np.minimum(index, len(values) - 1)]


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
    architecture: str,
    relay: np.ndarray,
    delays: np.ndarray,
    p_in: np.ndarray,
    prob_f: np.ndarray,
    waits: tuple[float, float, np.ndarray, np.ndarray],
    stable: bool,
) -> dict[str, dict[str, float]]:
    """TTFT percentiles per pipeline (P-MD and P-RLD-MD for pdd; one pipeline otherwise)."""
    names = {"pd-intra": "P-D (RDMA)", "pd-cross": "P-D (WAN)"}
    groups: dict[str, np.ndarray]
    if architecture == "pdd":
        groups = {"P-MD": ~relay, "P-RLD-MD": relay}
    else:
        groups = {names[architecture]: np.ones(relay.shape, dtype=bool)}
    out = {}
    for name, mask in groups.items():
        share = float(p_in[mask].sum())
        if share <= 0:
            continue
        w = (np.where(mask, p_in, 0.0)[:, None] * prob_f[None, :]).ravel()
        q = mixture_quantiles(QUANTILES, delays, w, *waits) if stable else np.full(3, math.inf)
        out[name] = {"share": share, "ttft_p50_s": float(q[0]), "ttft_p90_s": float(q[1]), "ttft_p99_s": float(q[2])}
    return out
