"""Request-level discrete-event simulation of a deployment.

Requests arrive (Poisson or Gamma), queue FIFO for a prefill instance (each runs one request's
chunks back to back), then, by architecture:
  pd-intra  RDMA to a decoder in the same datacenter;
  pd-cross  WAN transfer of the incremental KV to a decoder in the other datacenter;
  pdd       P-MD: WAN transfer to the main decoder. P-RLD-MD: RDMA to a relay that decodes eager
            tokens at once while the WAN transfer runs; when the KV lands, the relay is told
            (RTT/2), stops (one-shot) or keeps going for catch-up rounds, and sends the eager
            token IDs (RTT/2); the main decoder recomputes them in an extend step (a stall of its
            instance) and continues. A relayed request that finishes on the relay first cancels
            its WAN transfer (singular-traffic filtering, if on).
Decoders batch continuously within a memory limit (the main decoder's limit leaves room for its
radix cache); requests beyond it wait in the instance's queue. Everything random comes from one
seeded generator, drawn in a fixed order, so the same seed gives the same output byte for byte.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from pddplan.evaluate.analytic import decoder_max_batch
from pddplan.evaluate.classes import relayed
from pddplan.net.fluctuation import CapacityPath
from pddplan.net.tcp import rdma_time_s
from pddplan.perf.kv import cached_tokens, incremental_kv_bytes, new_tokens, request_kv_bytes
from pddplan.perf.roofline import decode_step_time, extend_time, prefill_time
from pddplan.scenario import Role, Scenario
from pddplan.simulate.servers import DecodeInstance, Link

MAX_CATCHUP_ROUNDS = 6
PIPELINES = ("P-D (RDMA)", "P-D (WAN)", "P-MD", "P-RLD-MD", "P-RLD")  # P-RLD: singular, finished by the relay


@dataclass(frozen=True)
class RequestTable:
    """Per-request inputs and outcomes (numpy arrays, one entry per request)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    hit: np.ndarray
    output_tokens: np.ndarray
    new_tokens: np.ndarray
    prefill_start_s: np.ndarray
    prefill_end_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    worst_gap_s: np.ndarray
    relay_tokens: np.ndarray
    wan_bytes: np.ndarray
    cancelled: np.ndarray
    pipeline: np.ndarray

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(finish - first token) / (output - 1); 0 for one-token outputs."""
        spans = self.finish_s - self.first_token_s
        return np.where(self.output_tokens > 1, spans / np.maximum(self.output_tokens - 1, 1), 0.0)


@dataclass(frozen=True)
class SimulationStats:
    """Busy figures of the servers over the simulated span."""

    span_s: float
    prefill_busy_s: float
    prefill_instances: int
    link_bytes: float
    link_capacity_integral: float
    decoder_batch_integral: dict[str, float]
    decoder_max_batch: dict[str, int]
    decoder_instances: dict[str, int]


def _arrivals(scenario: Scenario, count: int, rng: np.random.Generator) -> np.ndarray:
    arrival = scenario.workload.arrival
    mean_gap = 1.0 / scenario.rate_rps
    if arrival.process == "poisson":
        gaps = rng.exponential(mean_gap, count)
    else:
        shape = 1.0 / arrival.cv**2
        gaps = rng.gamma(shape, mean_gap / shape, count)
    return np.cumsum(gaps)


def _decode_pool(scenario: Scenario, role: Role, context: float, reserved_bytes: float) -> list[DecodeInstance]:
    limit = int(decoder_max_batch(scenario, role, context, reserved_bytes))
    limit = max(limit, 1)
    batches = np.arange(0, limit + 1, dtype=np.float64)
    table = decode_step_time(role.instance, np.maximum(batches, 1.0), context).tolist()
    return [DecodeInstance(index=i, step_table=table, max_batch=limit) for i in range(role.count)]


def _least_loaded(pool: list[DecodeInstance]) -> DecodeInstance:
    return min(pool, key=lambda inst: (inst.batch + len(inst.queue), inst.index))


def simulate_requests(scenario: Scenario, count: int, seed: int) -> tuple[RequestTable, SimulationStats]:
    """Simulate `count` requests; return the per-request table and server statistics."""
    workload = scenario.workload
    plan = scenario.plan
    arch = plan.architecture
    rng = np.random.default_rng(seed)
    page = workload.serving.page_tokens
    arrival = _arrivals(scenario, count, rng)
    prompt = workload.prompt_tokens.sample(rng, count)
    hit = workload.hit_rate.sample(rng, count)
    output = workload.output_tokens.sample(rng, count)
    fresh = new_tokens(prompt, hit, page)
    cached = cached_tokens(prompt, hit, page)
    wan_size = incremental_kv_bytes(scenario.model, prompt, hit, page)
    full_kv = request_kv_bytes(scenario.model, prompt, page)
    prefill = scenario.prefill.instance
    service = prefill_time(prefill, fresh, cached, scenario.chunk_tokens)
    rdma = rdma_time_s(full_kv, prefill.kv_senders, prefill.hardware.nic_bytes_per_s)
    relay = relayed(plan.routing if arch == "pdd" else None, hit, wan_size)

    # prefill: FIFO over c identical instances, with known service times
    start = np.empty(count)
    end = np.empty(count)
    free = [0.0] * scenario.prefill.count
    heapq.heapify(free)
    arrival_list, service_list = arrival.tolist(), service.tolist()
    for i in range(count):
        earliest = heapq.heappop(free)
        begin = max(arrival_list[i], earliest)
        start[i] = begin
        end[i] = begin + service_list[i]
        heapq.heappush(free, end[i])

    mean_context = float(np.mean(prompt) + np.mean(output) / 2)
    drc = scenario.drc_bytes_per_decode_instance()
    pools: dict[str, list[DecodeInstance]] = {"decode": _decode_pool(scenario, scenario.decode, mean_context, drc)}
    if scenario.relay is not None:
        pools["relay"] = _decode_pool(scenario, scenario.relay, mean_context, 0.0)
    link: Link | None = None
    if scenario.link is not None:
        path = CapacityPath(scenario.link.fluctuation, rng, scenario.link.base_dir)
        link = Link(scenario.link.capacity_bytes_per_s, scenario.link.flow_cap_bytes_per_s, path)
    rtt = scenario.link.rtt_s if scenario.link else 0.0
    half_rtt = rtt / 2

    first_token = np.full(count, math.nan)
    finish = np.full(count, math.nan)
    worst_gap = np.zeros(count)
    relay_tokens = np.zeros(count)
    wan_sent = np.zeros(count)
    cancelled = np.zeros(count, dtype=bool)
    direct = {"pd-intra": "P-D (RDMA)", "pd-cross": "P-D (WAN)", "pdd": "P-MD"}[arch]
    pipeline = np.array([direct] * count, dtype=object)
    pipeline[relay] = "P-RLD-MD"
    output_list = output.astype(np.float64).tolist()
    wan_list = wan_size.tolist()
    relay_instance: dict[int, DecodeInstance] = {}
    handoff_mode = plan.handoff
    decode_instance = scenario.decode.instance

    events: list[tuple[float, int, int, int, int]] = []  # (time, seq, kind, request or instance, version)
    seq = 0
    kinds = {
        "decoder": 0,
        "link": 1,
        "join_decode": 2,
        "join_relay": 3,
        "kv_landed": 4,
        "relay_notice": 5,
        "relay_final": 6,
        "md_arrival": 7,
    }

    def push(t: float, kind: int, target: int, version: int = 0) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, target, version))

    instances: list[tuple[str, DecodeInstance]] = [(name, inst) for name, pool in pools.items() for inst in pool]
    instance_id = {id(inst): n for n, (_, inst) in enumerate(instances)}
    owner: dict[int, dict[int, str]] = {n: {} for n in range(len(instances))}

    def reschedule(inst: DecodeInstance) -> None:
        inst.version += 1
        t_next = inst.next_finish()
        if t_next < math.inf:
            push(t_next, kinds["decoder"], instance_id[id(inst)], inst.version)

    def reschedule_link() -> None:
        assert link is not None
        link.version += 1
        t_next = link.next_event()
        if t_next < math.inf:
            push(t_next, kinds["link"], 0, link.version)

    # handed-over requests waiting for a main-decoder slot: request -> when the relay stopped
    handed_over_at: dict[int, float] = {}

    def started(request: int, first: float, step_s: float) -> None:
        """`request`'s first token here is at `first`: its TTFT if it has none yet; after a handoff,
        the gap since the relay stopped."""
        if math.isnan(first_token[request]):
            first_token[request] = first
        gap = first - handed_over_at.pop(request) if request in handed_over_at else step_s
        worst_gap[request] = max(worst_gap[request], gap)

    def join(inst: DecodeInstance, request: int, tokens: float, t: float, stall_s: float, role: str) -> None:
        owner[instance_id[id(inst)]][request] = role
        if inst.batch >= inst.max_batch:
            inst.queue.append((request, tokens, stall_s))
            return
        started(request, inst.admit(request, tokens, t, stall_s), inst.step_s())
        reschedule(inst)

    def admit_queued(inst: DecodeInstance, t: float) -> None:
        while inst.queue and inst.batch < inst.max_batch:
            request, tokens, stall_s = inst.queue.popleft()
            started(request, inst.admit(request, tokens, t, stall_s), inst.step_s())
        reschedule(inst)

    def on_link_done(request: int, t: float) -> None:
        wan_sent[request] = wan_list[request]
        push(t + half_rtt, kinds["kv_landed"], request)

    pending: dict[int, tuple[float, float]] = {}
    # Work sent to a main decoder over the WAN joins it when it arrives, by an event at that time:
    # joining "in the future" would move the decoder's clock past events still to be processed.
    arrivals: dict[int, tuple[float, float, float | None]] = {}  # request -> (tokens, stall, handoff time)
    relay_joined: set[int] = set()
    relay_skipped: set[int] = set()

    def send_to_md(request: int, t: float, tokens: float, stall_s: float, handoff_t: float | None) -> None:
        arrivals[request] = (tokens, stall_s, handoff_t)
        push(t + half_rtt, kinds["md_arrival"], request)

    def md_arrival(request: int, t: float) -> None:
        tokens, stall_s, handoff_t = arrivals.pop(request)
        if handoff_t is not None:
            handed_over_at[request] = handoff_t
        join(_least_loaded(pools["decode"]), request, tokens, t, stall_s, "main")

    # Extend steps are looked up, not recomputed per handoff: a log-spaced table up to the longest
    # output, interpolated (the step time is smooth in the token count).
    extend_grid = np.unique(np.geomspace(1.0, max(float(output.max()), 2.0), 96))
    extend_table = extend_time(decode_instance, extend_grid, mean_context)

    def extend_of(tokens: float) -> float:
        return float(np.interp(max(tokens, 1.0), extend_grid, extend_table))

    def relay_notice(request: int, t: float) -> None:
        """The relay learns (at t) that the main decoder has the KV: hand over now, or catch up."""
        inst = relay_instance[request]
        inst.advance(t)
        if request not in inst.joined_at:  # still queued for a relay slot: go straight to the MD
            inst.queue = deque(entry for entry in inst.queue if entry[0] != request)
            owner[instance_id[id(inst)]].pop(request, None)
            relay_instance.pop(request)
            send_to_md(request, t, output_list[request], 0.0, None)
            return
        utilization = inst.batch / inst.max_batch
        catch_up = handoff_mode.mode == "catch-up" or (
            handoff_mode.mode == "adaptive" and utilization < handoff_mode.adaptive_load_threshold
        )
        chunk = inst.tokens_done(request)
        if not catch_up or chunk <= handoff_mode.catchup_threshold_tokens:
            switch(request, t, chunk, 0.0)
            return
        tau_r = inst.step_s()
        earlier_stalls = 0.0
        extra = 0.0
        for _ in range(MAX_CATCHUP_ROUNDS):
            if chunk <= handoff_mode.catchup_threshold_tokens:
                break
            extend_s = extend_of(chunk)
            earlier_stalls += extend_s
            extra += rtt + extend_s
            chunk = (rtt + extend_s) / tau_r
        pending[request] = (earlier_stalls, chunk)
        push(t + extra, kinds["relay_final"], request)

    def switch(request: int, t: float, last_chunk: float, earlier_stalls: float) -> None:
        """Stop the relay at t, send the eager token IDs, and let the main decoder extend them."""
        inst = relay_instance.pop(request)
        inst.advance(t)
        done = inst.tokens_done(request)
        inst.remove(request)
        owner[instance_id[id(inst)]].pop(request, None)
        relay_tokens[request] = done
        admit_queued(inst, t)
        send_to_md(request, t, output_list[request] - done, earlier_stalls + extend_of(last_chunk), t)

    prefill_order = np.argsort(end, kind="stable").tolist()
    end_list = end.tolist()
    pointer = 0
    while pointer < count or events:
        next_prefill = end_list[prefill_order[pointer]] if pointer < count else math.inf
        if events and events[0][0] <= next_prefill:
            t, _, kind, target, version = heapq.heappop(events)
        else:
            t, kind, target, version = next_prefill, -1, prefill_order[pointer], 0
            pointer += 1
        if kind == -1:  # prefill done
            request = target
            if arch == "pd-intra":
                push(t + rdma[request], kinds["join_decode"], request)
                continue
            assert link is not None
            if relay[request]:
                push(t + rdma[request], kinds["join_relay"], request)
            link.start(request, wan_list[request], t)
            reschedule_link()
        elif kind == kinds["link"]:
            assert link is not None
            if version != link.version:
                continue
            link.pop_finished(t, on_link_done)
            reschedule_link()
        elif kind == kinds["join_decode"]:
            join(_least_loaded(pools["decode"]), target, output_list[target], t, 0.0, "main")
        elif kind == kinds["join_relay"]:
            if target in relay_skipped:  # the main decoder had the KV before the relay had its copy
                continue
            relay_joined.add(target)
            inst = _least_loaded(pools["relay"])
            relay_instance[target] = inst
            join(inst, target, output_list[target], t, 0.0, "relay")
        elif kind == kinds["kv_landed"]:
            request = target
            if not relay[request]:
                join(_least_loaded(pools["decode"]), request, output_list[request], t, 0.0, "main")
            elif request in relay_instance or request not in relay_joined:
                push(t + half_rtt, kinds["relay_notice"], request)
        elif kind == kinds["relay_notice"]:
            if target in relay_instance:
                relay_notice(target, t)
            elif target not in relay_joined:
                # the RDMA copy has not reached the relay yet: it stays in P-RLD-MD (as routed) but the
                # relay produces no token and the main decoder starts as soon as it hears
                relay_skipped.add(target)
                send_to_md(target, t, output_list[target], 0.0, None)
        elif kind == kinds["md_arrival"]:
            md_arrival(target, t)
        elif kind == kinds["relay_final"]:
            earlier_stalls, chunk = pending.pop(target)
            if target in relay_instance:
                switch(target, t, chunk, earlier_stalls)
        else:  # a decoder instance's next completion
            _, inst = instances[target]
            if version != inst.version:
                continue
            inst.advance(t)
            # finished: due within a token-clock rounding error of now (relative to t, so that long
            # simulated spans, where t's resolution exceeds a fixed tolerance, still terminate)
            due = inst.clock + max(1e-9, 64 * math.ulp(t) / inst.step_s())
            while inst.heap and inst.heap[0][0] <= due:
                _, request = heapq.heappop(inst.heap)
                if request not in inst.joined_at:
                    continue
                inst.remove(request)
                role = owner[target].pop(request)
                if role == "relay":
                    relay_tokens[request] = output_list[request]
                    relay_instance.pop(request, None)
                    pipeline[request] = "P-RLD"
                    finish[request] = t
                    if link is not None and request in link.flows and plan.routing.singular_filter:
                        link.advance(t)
                        wan_sent[request] = link.sent(request)
                        cancelled[request] = True
                        link.stop(request)
                        reschedule_link()
                else:
                    finish[request] = t
            admit_queued(inst, t)

    span = float(np.nanmax(finish)) if count else 0.0
    stats = SimulationStats(
        span_s=span,
        prefill_busy_s=float(service.sum()),
        prefill_instances=scenario.prefill.count,
        link_bytes=link.bytes_delivered if link else 0.0,
        link_capacity_integral=link.capacity_integral if link else 0.0,
        decoder_batch_integral={name: sum(inst.batch_time_integral for inst in pool) for name, pool in pools.items()},
        decoder_max_batch={name: pool[0].max_batch for name, pool in pools.items()},
        decoder_instances={name: len(pool) for name, pool in pools.items()},
    )
    table = RequestTable(
        arrival_s=arrival,
        prompt_tokens=prompt,
        hit=hit,
        output_tokens=output,
        new_tokens=fresh,
        prefill_start_s=start,
        prefill_end_s=end,
        first_token_s=first_token,
        finish_s=finish,
        worst_gap_s=worst_gap,
        relay_tokens=relay_tokens,
        wan_bytes=np.where(relay & cancelled, wan_sent, wan_size) if arch != "pd-intra" else np.zeros(count),
        cancelled=cancelled,
        pipeline=pipeline.astype(str),
    )
    return table, stats
