"""Request-level discrete-event simulation of a deployment.

Requests arrive (Poisson or Gamma), queue FIFO for the prefill pool (chunked prefill packs them
into steps of up to C tokens, `pddplan.simulate.prefill`), then go where the plan's architecture
(`pddplan.architectures`) sends them:
RDMA to a decoder in the same datacenter, a WAN transfer of the incremental KV to a decoder in the
other one, or both at once through a relay decoder (P-RLD-MD): the relay decodes eager tokens at
once while the WAN transfer runs; when the KV lands, the relay is told (RTT/2) and hands the request
over by its eager token IDs (`pddplan.evaluate.handoff`): one-shot, it stops and sends them all;
catch-up, it keeps decoding and sends them chunk by chunk, each chunk's IDs reaching the main
decoder RTT/2 after they leave. The main decoder recomputes each chunk in an extend step when its
IDs arrive, a stall of its instance (every sequence there waits); the request is pinned to that
instance, which holds its earlier chunks, and its own hiccup at the switch is the last chunk's
extend. It then continues there. A relayed request that finishes on the relay first cancels its WAN transfer
(singular-traffic filtering, if on). A relay on the prefill instances (`relay_on_prefill`) takes a
request where its prefill ran, with no RDMA, and decodes in that instance's prefill steps while they
run (`ColocatedRelay`).

Decoders batch continuously within a memory limit (the main decoder's limit leaves room for its
radix cache); requests beyond it wait in the instance's queue. Everything random comes from one
seeded generator, drawn in a fixed order, so the same seed gives the same output byte for byte.

The simulation is a state object (`_Simulation`) and an event loop: each event kind (`Event`) has
one handler method; prefill completions, known in advance, are a sorted stream merged with the
event heap. Where no decoder can stop a transfer, the link runs first, on its own (the same calls in
the same order), and the KV landings join that stream. The main decoders act back on nothing else
(a relay only cancels a transfer; they never do), so what reaches them (joins, handovers, chunk
extends) is kept in the order the loop meets it, and they run in a second loop of their own, each
instance's next completion kept beside it rather than on a heap.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import IntEnum
from functools import partial
from itertools import count as counter

import numpy as np

from pddplan.architectures import Pipeline
from pddplan.errors import InputError
from pddplan.evaluate.analytic import colocated_relay_max_batch, decoder_max_batch, evaluate
from pddplan.evaluate.classes import cache_effects, relayed
from pddplan.evaluate.handoff import catch_up_chunks, wants_catch_up
from pddplan.evaluate.moments import workload_moments
from pddplan.net.fluctuation import CapacityPath, SteppedPath
from pddplan.net.tcp import rdma_time_s
from pddplan.perf.kv import cached_tokens, incremental_kv_bytes, new_tokens, request_kv_bytes
from pddplan.perf.mixed import relay_marginal_step_s
from pddplan.perf.roofline import (
    Instance,
    PrefillCost,
    decode_step_time,
    extend_time,
    linear_step_s,
    prefill_cost,
    rank_linear_step_s,
    step_time,
)
from pddplan.scenarios.scenario import Role, Scenario
from pddplan.scenarios.split import pool_parts
from pddplan.simulate.prefill import PrefillPool, PrefillRun, run_prefill_pool
from pddplan.simulate.servers import ColocatedRelay, DecodeInstance, Link
from pddplan.support.limits import check_requests, check_seed
from pddplan.trace.replay import TraceReplay


class Event(IntEnum):
    """What happens at an event; its target is a request or a decode instance. (The link's next
    event is kept beside the heap: `_Simulation.link_due_s`.)"""

    PREFILL_DONE = 0  # a request's prefill finished (from the sorted stream, not the heap)
    DECODER_STEP = 1  # a decode instance's next sequence may have finished (target: instance)
    JOIN_DECODE = 2  # the RDMA copy reached a (main) decoder
    JOIN_RELAY = 3  # the RDMA copy reached the relay
    KV_LANDED = 4  # the WAN transfer's last byte reached the main decoder (RTT/2 after sending)
    RELAY_NOTICE = 5  # the relay hears that the main decoder has the KV
    RELAY_FINAL = 6  # the relay's last catch-up round ends: hand over the last chunk
    MD_ARRIVAL = 7  # work sent to a main decoder over the WAN (token IDs or a plain start) arrives
    CHUNK_EXTEND = 8  # an earlier catch-up chunk's IDs reach the main decoder (version: chunk index)
    PIN = 9  # a catch-up pins its request to the least-loaded main decoder (decoders' loop only)
    UNPIN = 10  # ... and the request finished on the relay instead (decoders' loop only)
    JOIN_IN_PLACE = 11  # a request decodes where its prefill ran (decoders' loop only)


# An event on the heap: (time, sequence number, kind, target, version). The sequence number breaks
# ties in push order, so the kind is never compared; the version drops superseded server events.
_Entry = tuple[float, int, Event, int, int]
# An event known before a loop runs: (time, kind, target, version).
_Known = tuple[float, Event, int, int]


@dataclass(frozen=True)
class _KnownEvents:
    """The events known before the main loop, in time order, as columns (their version is 0)."""

    times_s: list[float]
    kinds: list[Event]
    targets: list[int]


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
    pool: np.ndarray | None = None  # a split plan's: the role of the pool that served each request

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
    link_timeline: list[tuple[float, int]] | None = None  # (t, transfers in flight), when recorded
    pools: tuple[tuple[str, SimulationStats], ...] = ()  # a split plan's pools by role, each its own


def _kept(probability: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """Which of `count` requests find their prefix, each with `probability` (drawn only when it is
    strictly between 0 and 1, so other draws keep their order)."""
    if probability >= 1:
        return np.ones(count, dtype=bool)
    if probability <= 0:
        return np.zeros(count, dtype=bool)
    return rng.random(count) < probability


def _arrivals(scenario: Scenario, count: int, rng: np.random.Generator) -> np.ndarray:
    arrival = scenario.workload.arrival
    mean_gap = 1.0 / scenario.rate_rps
    if arrival.process == "poisson":
        gaps = rng.exponential(mean_gap, count)
    else:
        shape = 1.0 / arrival.cv**2
        gaps = rng.gamma(shape, mean_gap / shape, count)
    times = np.cumsum(gaps)
    if arrival.rate_profile is None:
        return times
    return profile_time(times, np.asarray(arrival.rate_profile, dtype=np.float64), arrival.profile_step_s)


def profile_time(operational_s: np.ndarray, profile: np.ndarray, step_s: float) -> np.ndarray:
    """Arrival times under a repeating rate profile, by time change: a process drawn at the mean
    rate runs in operational time u, and real time t solves U(t) = u with U(t) = integral_0^t m(s) ds,
    m the profile scaled to mean 1 (piecewise constant over steps of `step_s`). Where m is high,
    real time passes slowly and arrivals crowd; a step with m = 0 gets none."""
    m = profile / profile.mean()
    edges_u = np.concatenate([[0.0], np.cumsum(m * step_s)])  # operational time at each step's start
    cycle_u = edges_u[-1]  # = len(profile) x step_s, as m has mean 1
    cycles, within = np.divmod(operational_s, cycle_u)
    step = np.clip(np.searchsorted(edges_u, within, side="right") - 1, 0, len(m) - 1)
    rate = m[step]
    offset = np.divide(within - edges_u[step], rate, out=np.zeros_like(within), where=rate > 0)
    return cycles * len(m) * step_s + step * step_s + offset


def _run_prefill_after_loads(
    pool: PrefillPool, ready_s: np.ndarray, fresh: np.ndarray, attention_s: np.ndarray, packed_s: np.ndarray
) -> PrefillRun:
    """`run_prefill_pool` on requests that become ready (arrival + load from a slower cache tier)
    out of arrival order: run in ready order, results back in request order."""
    order = np.argsort(ready_s, kind="stable")
    if np.array_equal(order, np.arange(len(order))):
        return run_prefill_pool(pool, ready_s, fresh, attention_s, packed_s)
    run = run_prefill_pool(pool, ready_s[order], fresh[order], attention_s[order], packed_s[order])
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return replace(run, start_s=run.start_s[back], end_s=run.end_s[back], instance=run.instance[back])


def _prefill_costs(instance: Instance, fresh: np.ndarray, cached: np.ndarray, chunk_tokens: int) -> PrefillCost:
    """`prefill_cost` per request, computed once per distinct (new, cached) pair: cached tokens are
    whole pages, so a hundred thousand requests share a few thousand pairs (each element is the
    same arithmetic either way)."""
    pairs, back = _distinct_pairs(fresh, cached)
    cost = prefill_cost(instance, pairs[:, 0], pairs[:, 1], chunk_tokens)
    return PrefillCost(**{f.name: getattr(cost, f.name)[back] for f in fields(cost)})


def _distinct_pairs(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique of the (first, second) rows and the inverse: the distinct pairs in lexicographic
    order, and each row's index among them. Token counts (whole numbers below 2^31) are packed into
    one int64 key, first x 2^32 + second, which sorts as the pairs do and is a tenth of the time of
    a row-wise unique; other values take the row-wise one."""
    whole = (first >= 0) & (first < 2**31) & (second >= 0) & (second < 2**31)
    if whole.all() and np.array_equal(first, np.floor(first)) and np.array_equal(second, np.floor(second)):
        keys, back = np.unique(first.astype(np.int64) * 2**32 + second.astype(np.int64), return_inverse=True)
        return np.stack([(keys >> 32).astype(np.float64), (keys & (2**32 - 1)).astype(np.float64)], axis=1), back
    pairs, back = np.unique(np.stack([first, second], axis=1), axis=0, return_inverse=True)
    return pairs, back.reshape(-1)


@dataclass(frozen=True)
class _StepTables:
    """A prefill instance kind's T_lin(T) for T = 0..C (`linear`, `alone` for one sequence), or
    under data-parallel attention L(k, T) for k = 1..ranks busy ranks (`ranks`)."""

    linear: list[float]
    alone: list[float] | None
    ranks: list[list[float]] | None


#: the step tables of the last few (instance kind, chunk) pairs simulated: a verification simulates
#: the same kind again (a longer run, one more instance, another architecture's plan), and a table
#: is a roofline evaluation of up to C + 1 token counts per busy rank (0.1 s for an EP16 instance)
_TABLES: list[tuple[Instance, int, _StepTables]] = []
REMEMBERED_TABLES = 8


def _step_tables(instance: Instance, chunk: int) -> _StepTables:
    """`_StepTables` of `instance` at chunk budget `chunk`, computed once per equal instance kind
    (equal fields and efficiency override) among the last REMEMBERED_TABLES."""
    for known, known_chunk, tables in _TABLES:
        if known_chunk == chunk and known == instance and known.efficiency_override == instance.efficiency_override:
            return tables
    tokens = np.arange(chunk + 1, dtype=np.float64)
    if instance.attention_ranks > 1:  # lockstep ranks: L(k, T) for k busy ranks of T tokens each
        busy_ranks = np.arange(1.0, instance.attention_ranks + 1.0)[:, None]
        tables = _StepTables([], None, rank_linear_step_s(instance, busy_ranks, tokens[None, :]).tolist())
    else:
        alone = step_time(instance, np.maximum(tokens, 1.0), 0.0, 1.0)  # one sequence: not spread over DP ranks
        alone_linear = np.maximum(alone.total_s - alone.attention_s, 0.0).tolist()
        tables = _StepTables(linear_step_s(instance, tokens).tolist(), alone_linear, None)
    _TABLES.append((instance, chunk, tables))
    del _TABLES[:-REMEMBERED_TABLES]
    return tables


def _prefill_pool(scenario: Scenario, extra_step_s: float) -> PrefillPool:
    """The scenario's prefill pool: its instances, chunk budget and T_lin(T) for T = 0..C, each step
    `extra_step_s` longer (a co-located relay's tokens)."""
    chunk = scenario.chunk_tokens
    instance = scenario.prefill.instance
    tables = _step_tables(instance, chunk)
    if tables.ranks is not None:
        return PrefillPool(
            instances=scenario.prefill.count,
            chunk_tokens=chunk,
            linear_s=[],
            extra_step_s=extra_step_s,
            ranks=instance.attention_ranks,
            rank_linear_s=tables.ranks,
        )
    return PrefillPool(
        instances=scenario.prefill.count,
        chunk_tokens=chunk,
        linear_s=tables.linear,
        extra_step_s=extra_step_s,
        alone_linear_s=tables.alone,
        stages=instance.pp,
    )


def _colocated_extra_step_s(scenario: Scenario, context: float) -> float:
    """m(B): what decode rows on the prefill instances (a relay's, or agg's) add to each prefill
    step, at the closed form's mean batch B (0 without such rows)."""
    pool = scenario.colocated_pool
    if pool is None:
        return 0.0
    batch = evaluate(scenario).stages[pool].batch_per_instance
    if not math.isfinite(batch):
        batch = colocated_relay_max_batch(scenario, context)
    instance = scenario.prefill.instance
    return float(relay_marginal_step_s(instance, batch, context, instance.full_step_tokens(scenario.chunk_tokens)))


def _colocated_relays(scenario: Scenario, run: PrefillRun, context: float) -> list[DecodeInstance]:
    """One decoder per prefill instance (a relay, or agg's), decoding in that instance's steps
    (`ColocatedRelay`)."""
    limit = max(int(colocated_relay_max_batch(scenario, context)), 1)
    batches = np.arange(0, limit + 1, dtype=np.float64)
    table = decode_step_time(scenario.prefill.instance, np.maximum(batches, 1.0), context).tolist()
    return [ColocatedRelay(k, table, limit, starts, ends) for k, (starts, ends) in enumerate(run.steps)]


def _decode_pool(scenario: Scenario, role: Role, context: float, reserved_bytes: float) -> list[DecodeInstance]:
    limit = int(decoder_max_batch(scenario, role, context, reserved_bytes))
    limit = max(limit, 1)
    batches = np.arange(0, limit + 1, dtype=np.float64)
    table = decode_step_time(role.instance, np.maximum(batches, 1.0), context).tolist()
    return [DecodeInstance(index=i, step_table=table, max_batch=limit) for i in range(role.count)]


def interpolate(x: float, xp: list[float], fp: list[float]) -> float:
    """np.interp(x, xp, fp) for one x, by its arithmetic: fp's ends outside xp, fp[j] at a grid
    point, else slope * (x - xp[j]) + fp[j] with slope = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j])."""
    if x >= xp[-1]:
        return fp[-1]
    if x < xp[0]:
        return fp[0]
    j = bisect.bisect_right(xp, x) - 1
    if xp[j] == x:
        return fp[j]
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    return slope * (x - xp[j]) + fp[j]


class _Paths:
    """A `Dispatch` that sends nothing and records, per request, whether an architecture sends it
    over the WAN and whether anywhere else (RDMA, a relay, its own prefill instance)."""

    def __init__(self, simulation: _Simulation, count: int) -> None:
        self.simulation = simulation
        self.wan = [False] * count
        self.elsewhere = [False] * count

    def relayed(self, request: int) -> bool:
        return self.simulation.relayed(request)

    def wan_to_decoder(self, request: int, t: float) -> None:
        self.wan[request] = True

    def rdma_to_decoder(self, request: int, t: float) -> None:
        self.elsewhere[request] = True

    def rdma_to_relay(self, request: int, t: float) -> None:
        self.elsewhere[request] = True

    def decode_in_place(self, request: int, t: float) -> None:
        self.elsewhere[request] = True


def _least_loaded(pool: list[DecodeInstance]) -> DecodeInstance:
    if len(pool) == 1:  # most plans' main decoder pool: no key to compute
        return pool[0]
    return min(pool, key=lambda inst: (inst.batch + len(inst.queue), inst.index))


class _Simulation:
    """The state of one simulation: the drawn requests, their outcomes so far, the servers and the
    event heap. It is the `pddplan.architectures.Dispatch` an architecture routes a request with."""

    def __init__(
        self,
        scenario: Scenario,
        count: int,
        rng: np.random.Generator,
        replay: TraceReplay | None = None,
        link_change: tuple[float, float] | None = None,
        record_link: bool = False,
    ) -> None:
        self.scenario = scenario
        self.architecture = scenario.architecture
        self.routing = scenario.plan.routing
        self.handoff = scenario.plan.handoff
        workload = scenario.workload
        page = workload.serving.page_tokens
        # the requests, drawn in a fixed order (arrivals, prompts, hits, outputs; then the line)
        self.load = np.zeros(count)  # reading cached KV from a slower tier, before prefill
        if replay is not None:  # a trace's own requests, as recorded
            self.arrival = replay.arrival_s[:count]
            self.prompt, self.hit = replay.prompt_tokens[:count], replay.hit[:count]
            self.output = replay.output_tokens[:count]
        else:
            self.arrival = _arrivals(scenario, count, rng)
            if workload.request_mix is None:
                self.prompt = workload.prompt_tokens.sample(rng, count)
                self.hit = workload.hit_rate.sample(rng, count)
            else:  # prompt and hit drawn together (a trace's joint distribution)
                self.prompt, self.hit, self.load = workload.request_mix.sample(rng, count)
            self.output = workload.output_tokens.sample(rng, count)
        # the caches (`pddplan.cache`): a prefix prefill lost for room is prefilled whole; one the
        # main decoder no longer holds crosses whole; hits held below HBM load before they are used
        effects = cache_effects(scenario)
        if replay is None:  # a trace's hits are its own cache's
            self.hit = np.where(_kept(effects.prefill_kept, count, rng), self.hit, 0.0)
        self.fresh = new_tokens(self.prompt, self.hit, page)
        full_kv = request_kv_bytes(scenario.model, self.prompt, page)
        incremental = incremental_kv_bytes(scenario.model, self.prompt, self.hit, page)
        md_held = _kept(effects.md_kept, count, rng)
        self.wan_size = np.where(md_held, incremental, full_kv)
        if not np.any(self.load > 0):
            self.load = (full_kv - incremental) * effects.prefill_load_s_per_byte
        md_load = np.where(md_held, (full_kv - incremental) * effects.md_load_s_per_byte, 0.0)
        prefill = scenario.prefill.instance
        cost = _prefill_costs(prefill, self.fresh, cached_tokens(self.prompt, self.hit, page), scenario.chunk_tokens)
        self.rdma = rdma_time_s(full_kv, prefill.kv_senders, prefill.hardware.nic_bytes_per_s).tolist()
        if scenario.colocated_pool is not None:  # the relay (or agg's decoder) is where prefill left the KV
            self.rdma = [0.0] * count
        self.relay = relayed(self.architecture.relay_rule(self.routing), self.hit, self.wan_size)
        context = workload_moments(workload).context_tokens
        extra_s = _colocated_extra_step_s(scenario, context)
        run = _run_prefill_after_loads(
            _prefill_pool(scenario, extra_s),
            self.arrival + self.load,
            self.fresh,
            cost.attention_s,
            cost.packed_attention_s,
        )
        self.prefill_start, engine_end, self.prefill_busy_s = run.start_s, run.end_s, run.busy_s
        self.prefill_instance: list[int] = run.instance.tolist()
        # the request overhead (scheduling, tokenization, returning the first token) is the serving
        # stack's, off the engine: it delays the request, not the instance
        self.prefill_end = np.where(self.fresh > 0, engine_end + prefill.efficiency.request_overhead_s, engine_end)
        # the main decoder starts loading the prefix it holds when the increment starts across
        self.md_ready: list[float] = (self.prefill_end + md_load).tolist()
        self.output_list: list[float] = self.output.astype(np.float64).tolist()
        self.wan_list: list[float] = self.wan_size.tolist()

        # the servers; step times at the mean context of the closed form (the same float)
        if scenario.architecture.colocated:  # decoding in the prefill instances' own steps
            decoders = _colocated_relays(scenario, run, context)
        else:
            decoders = _decode_pool(scenario, scenario.decode, context, 0.0)
        self.pools: dict[str, list[DecodeInstance]] = {"decode": decoders}
        if scenario.architecture.decode_keeps_prefix_cache:
            # The main decoders reserve their radix cache's budget as planned: Little's law over the
            # prefixes that land (a singular transfer the filter cancels never does), which the
            # closed form solves with the relay (`evaluate`'s decode max batch).
            limit = max(int(evaluate(scenario).stages["decode"].max_batch), 1)
            for inst in self.pools["decode"]:
                inst.max_batch = min(inst.max_batch, limit)
        if scenario.relay_colocated:
            self.pools["relay"] = _colocated_relays(scenario, run, context)
        elif scenario.relay is not None:
            self.pools["relay"] = _decode_pool(scenario, scenario.relay, context, 0.0)
        self.instances: list[tuple[str, DecodeInstance]] = [
            (name, inst) for name, pool in self.pools.items() for inst in pool
        ]
        self.instance_id = {id(inst): n for n, (_, inst) in enumerate(self.instances)}
        self.link: Link | None = None
        if scenario.link is not None:
            base = CapacityPath(scenario.link.fluctuation, rng, scenario.link.trace)
            # a line of the pool fails at link_change[0]
            path = base if link_change is None else SteppedPath(base, *link_change)
            self.link = Link(scenario.link.capacity_bytes_per_s, scenario.link.flow_cap_bytes_per_s, path)
            if record_link:
                self.link.timeline = [(0.0, 0)]
        self.rtt_s = scenario.link.rtt_s if scenario.link else 0.0
        self.link_ran_ahead = False  # the link's run was done before the loop (`_known_events`)
        self.link_due_s = math.inf  # the link's next event in the loop (`reschedule_link`)
        # Extend steps are looked up, not recomputed per handoff: a log-spaced table up to the longest
        # output, interpolated (the step time is smooth in the token count).
        extend_grid = np.unique(np.geomspace(1.0, max(float(self.output.max()), 2.0), 96))
        self.extend_grid_list = extend_grid.tolist()
        self.extend_table_list = extend_time(scenario.decode.instance, extend_grid, context).tolist()

        # the outcomes, as lists while the loops write them one at a time (a numpy element is a
        # tenth of a microsecond slower to read or write, several times an event); arrays in `table`
        self.first_token = [math.nan] * count
        self.finish = [math.nan] * count
        self.worst_gap = [0.0] * count
        self.relay_tokens = [0.0] * count
        self.wan_sent = [0.0] * count
        self.relay_list: list[bool] = self.relay.tolist()
        self.cancelled = np.zeros(count, dtype=bool)
        self.pipeline = np.array([self.architecture.direct_pipeline.value] * count, dtype=object)
        self.pipeline[self.relay] = Pipeline.P_RLD_MD.value

        # requests in flight between servers
        self.relay_instance: dict[int, DecodeInstance] = {}  # relayed request -> its relay instance
        self.relay_joined: set[int] = set()  # relayed requests whose RDMA copy reached the relay
        self.relay_skipped: set[int] = set()  # ... whose main decoder had the KV first
        self.handed_over_at: dict[int, float] = {}  # request waiting for an MD slot -> when the relay stopped
        self.last_chunk: dict[int, float] = {}  # catching up: eager tokens the final chunk will carry
        self.chunk_extend_s: dict[int, list[float]] = {}  # catching up: the earlier chunks' extend times
        self.pinned: dict[int, DecodeInstance] = {}  # catching up: the main decoder extending the chunks
        # Work sent to a main decoder over the WAN joins it when it arrives, by an event at that time:
        # joining "in the future" would move the decoder's clock past events still to be processed.
        self.md_bound: dict[int, tuple[float, float, float | None]] = {}  # (tokens, stall, handoff time)

        self.events: list[_Entry] = []
        self.next_seq = counter(1).__next__  # events' sequence numbers: 1, 2, ...
        self.handlers: dict[Event, Callable[[int, float, int], None]] = {
            Event.PREFILL_DONE: self._on_prefill_done,
            Event.DECODER_STEP: self._on_decoder_step,
            Event.JOIN_DECODE: partial(self._to_decoders, kind=Event.JOIN_DECODE),
            Event.JOIN_RELAY: self._on_join_relay,
            Event.KV_LANDED: self._on_kv_landed,
            Event.RELAY_NOTICE: self._on_relay_notice,
            Event.RELAY_FINAL: self._on_relay_final,
            Event.MD_ARRIVAL: partial(self._to_decoders, kind=Event.MD_ARRIVAL),
            Event.CHUNK_EXTEND: partial(self._to_decoders, kind=Event.CHUNK_EXTEND),
        }
        # The main decoders act on nothing else (the link, the prefill pool, a relay): what reaches
        # them is kept, in the order the loop meets it, and they run in a loop of their own after
        self.decode_inputs: list[_Known] = []
        self.decoder_due_s: list[float] | None = None  # in their loop: each main decoder's next completion
        self.decode_handlers: dict[Event, Callable[[int, float, int], None]] = {
            Event.JOIN_DECODE: self._decode_join,
            Event.KV_LANDED: self._decode_join,
            Event.MD_ARRIVAL: self._on_md_arrival,
            Event.CHUNK_EXTEND: self._on_chunk_extend,
            Event.PIN: self._decode_pin,
            Event.UNPIN: self._decode_unpin,
            Event.JOIN_IN_PLACE: self._decode_in_place,
        }

    # the event loop -------------------------------------------------------------------------------

    def run(self) -> None:
        """Every event but the main decoders' in time order, then theirs (`decode_inputs` and their
        completions): the main decoders act back on nothing the first loop runs."""
        self._loop(self._known_events(), self.handlers)
        self._run_decoders()

    def _loop(self, known: _KnownEvents, handlers: dict[Event, Callable[[int, float, int], None]]) -> None:
        """Process `known` (events known before, in time order), the heap's and the link's next
        event (`link_due_s`, kept beside the heap: it changes at every transfer's start) in time order;
        at one time the heap's first, then the link's, then a known one."""
        # locals: this loop runs once per event (half a million for 100,000 requests); handlers push onto
        # the same list `events` names. The next known time changes only when one is taken.
        events, pop, inf, on_link = self.events, heapq.heappop, math.inf, self._on_link
        known_s, kinds, targets = [*known.times_s, inf], known.kinds, known.targets
        pointer, next_known = 0, known_s[0]
        while True:
            next_heap = events[0][0] if events else inf
            link_t = self.link_due_s
            if link_t < next_heap and link_t <= next_known:
                on_link(link_t)
            elif next_heap <= next_known:
                if next_heap == inf:
                    return
                t, _, kind, target, version = pop(events)
                handlers[kind](target, t, version)
            else:
                handlers[kinds[pointer]](targets[pointer], next_known, 0)
                pointer += 1
                next_known = known_s[pointer]

    def _run_decoders(self) -> None:
        """The main decoders' loop, after the first: their inputs in the order that loop met them,
        each instance's next completion kept beside it (`decoder_due_s`, which `reschedule` sets; no
        heap, so no superseded events), a completion before an input at the same time, and of two
        instances' at one time the lower index's first."""
        pool = self.pools["decode"]
        due = self.decoder_due_s = [math.inf] * len(pool)
        inputs, handlers, finish_due = self.decode_inputs, self.decode_handlers, self._finish_due
        count, pointer, single, inf = len(inputs), 0, len(pool) == 1, math.inf
        next_input = inputs[0][0] if count else inf  # changes only when an input is taken
        while True:
            t_step = due[0] if single else min(due)
            if t_step <= next_input:
                if t_step == inf:
                    return
                index = 0 if single else due.index(t_step)
                due[index] = inf
                finish_due("decode", pool[index], t_step)
            else:
                _, kind, target, version = inputs[pointer]
                pointer += 1
                handlers[kind](target, next_input, version)
                next_input = inputs[pointer][0] if pointer < count else inf

    def _known_events(self) -> _KnownEvents:
        """The events known before the loop, in time order: every prefill completion; or, when
        nothing the decoders do can stop a transfer (no relayed request whose routing cancels
        singular traffic), the link's whole run first (`_run_link`), then the KV landings it gives
        and the prefill completions that send a request anywhere but the WAN (a landing first at a
        tie, as a heap event came before a prefill completion)."""
        order = np.argsort(self.prefill_end, kind="stable")
        if not self._link_runs_ahead():
            return _KnownEvents(self.prefill_end[order].tolist(), [Event.PREFILL_DONE] * len(order), order.tolist())
        paths = _Paths(self, len(order))
        end = self.prefill_end.tolist()
        for request in order.tolist():
            self.architecture.after_prefill(paths, request, end[request])
        wan, elsewhere = np.array(paths.wan, dtype=bool), np.array(paths.elsewhere, dtype=bool)
        landed_s, landed = self._run_link(order[wan[order]])
        self.link_ran_ahead = True
        done = order[elsewhere[order]]
        times = np.concatenate([landed_s, self.prefill_end[done]])
        first = np.arange(len(times)) >= len(landed)  # landings before completions at a tie
        merged = np.lexsort((np.arange(len(times)), first, times))
        kinds = [Event.KV_LANDED] * len(landed) + [Event.PREFILL_DONE] * len(done)
        targets = np.concatenate([landed, done])[merged].tolist()
        return _KnownEvents(times[merged].tolist(), [kinds[i] for i in merged.tolist()], targets)

    def _link_runs_ahead(self) -> bool:
        """Whether the link's run can be done before the loop: there is a link, and no relayed
        request whose routing cancels its transfer when the relay finishes it first (the only way
        a decoder acts on the link)."""
        return self.link is not None and not (self.routing.singular_filter and bool(self.relay.any()))

    def _run_link(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The link's whole run before the decoders': the transfers of `starts` begin at their prefill
        completions (in that order), and a completion at the time of a start comes first (the same
        calls on the link, in the same order, as the event loop makes). Returns the KV landing
        times, max(done + RTT/2, the main decoder ready), and their requests, in completion order."""
        link = self.link
        assert link is not None
        end, size, ready, half = self.prefill_end.tolist(), self.wan_list, self.md_ready, self.rtt_s / 2
        sent = self.wan_sent
        landed_s: list[float] = []
        landed: list[int] = []

        def transferred(request: int, t: float) -> None:
            sent[request] = size[request]
            landed.append(request)
            arrives, decoder_ready = t + half, ready[request]
            landed_s.append(decoder_ready if decoder_ready > arrives else arrives)

        pending = starts.tolist()
        count, pointer, next_t = len(pending), 0, math.inf
        while pointer < count or next_t < math.inf:
            start_t = end[pending[pointer]] if pointer < count else math.inf
            if next_t <= start_t:
                link.pop_finished(next_t, transferred)
            else:
                request = pending[pointer]
                link.start(request, size[request], start_t)
                pointer += 1
            next_t = link.next_event()
        return np.array(landed_s, dtype=np.float64), np.array(landed, dtype=np.int64)

    def push(self, t: float, kind: Event, target: int, version: int = 0) -> None:
        heapq.heappush(self.events, (t, self.next_seq(), kind, target, version))

    def reschedule(self, inst: DecodeInstance) -> None:
        """Replace `inst`'s pending completion event by one at its next completion (in the main
        decoders' loop, the next completion kept beside it)."""
        if self.decoder_due_s is not None:
            self.decoder_due_s[inst.index] = inst.next_finish()
            return
        inst.version += 1
        t_next = inst.next_finish()
        if t_next < math.inf:
            self.push(t_next, Event.DECODER_STEP, self.instance_id[id(inst)], inst.version)

    def reschedule_link(self) -> None:
        """The link's next event: its next completion or capacity change."""
        assert self.link is not None
        self.link_due_s = self.link.next_event()

    # Dispatch: where an architecture sends a request whose prefill finished -------------------------

    def relayed(self, request: int) -> bool:
        return self.relay_list[request]

    def rdma_to_decoder(self, request: int, t: float) -> None:
        self.push(t + self.rdma[request], Event.JOIN_DECODE, request)

    def rdma_to_relay(self, request: int, t: float) -> None:
        self.push(t + self.rdma[request], Event.JOIN_RELAY, request)

    def decode_in_place(self, request: int, t: float) -> None:
        """Decode on the instance that prefilled the request, from now (co-located serving)."""
        self.decode_inputs.append((t, Event.JOIN_IN_PLACE, request, 0))

    def wan_to_decoder(self, request: int, t: float) -> None:
        link = self.link
        assert link is not None
        if self.link_ran_ahead:  # the transfer is done: its landing is a known event
            return
        link.start(request, self.wan_list[request], t)
        self.link_due_s = link.next_event()  # reschedule_link(), inline: once per transfer

    # decoders -------------------------------------------------------------------------------------

    def started(self, request: int, first: float, step_s: float) -> None:
        """`request`'s first token here is at `first`: its TTFT if it has none yet; after a handoff,
        the gap since the relay stopped (else one step)."""
        if math.isnan(self.first_token[request]):
            self.first_token[request] = first
        handed_over = self.handed_over_at.pop(request, None)
        gap = step_s if handed_over is None else first - handed_over
        worst = self.worst_gap[request]
        self.worst_gap[request] = gap if gap > worst else worst

    def join(self, inst: DecodeInstance, request: int, tokens: float, t: float, stall_s: float) -> None:
        """`request` joins `inst`'s batch at t to decode `tokens` tokens after a stall (or queues)."""
        if inst.batch >= inst.max_batch:
            inst.queue.append((request, tokens, stall_s))
            return
        self.started(request, inst.admit(request, tokens, t, stall_s), inst.step_s())
        self.reschedule(inst)

    def admit_queued(self, inst: DecodeInstance, t: float) -> None:
        while inst.queue and inst.batch < inst.max_batch:
            request, tokens, stall_s = inst.queue.popleft()
            self.started(request, inst.admit(request, tokens, t, stall_s), inst.step_s())
        self.reschedule(inst)

    def send_to_md(self, request: int, t: float, tokens: float, stall_s: float, handoff_t: float | None) -> None:
        """Send work to a main decoder at t; it arrives RTT/2 later."""
        self.md_bound[request] = (tokens, stall_s, handoff_t)
        self.push(t + self.rtt_s / 2, Event.MD_ARRIVAL, request)

    def extend_one_s(self, tokens: float) -> float:
        """The main decoder's extend step over `tokens` eager tokens (at least one), interpolated in
        its table with np.interp's arithmetic but without numpy's per-call cost."""
        return interpolate(max(tokens, 1.0), self.extend_grid_list, self.extend_table_list)

    def switch(self, request: int, t: float, last_chunk: float) -> None:
        """Stop the relay at t and send the last chunk's token IDs: the main decoder extends them
        (the request's hiccup) and decodes the rest."""
        inst = self.relay_instance.pop(request)
        inst.advance(t)
        done = inst.tokens_done(request)
        inst.remove(request)
        self.relay_tokens[request] = done
        self.admit_queued(inst, t)
        stall_s = self.extend_one_s(last_chunk)
        self.send_to_md(request, t, self.output_list[request] - done, stall_s, t)

    def finished_on_relay(self, request: int, t: float) -> None:
        """The relay produced every token (singular traffic): P-RLD; cancel the WAN transfer if the
        routing filters singular traffic."""
        self.relay_tokens[request] = self.output_list[request]
        self.relay_instance.pop(request, None)
        self.pipeline[request] = Pipeline.P_RLD.value
        link = self.link
        if link is not None and request in link.flows and self.routing.singular_filter:
            link.advance(t)
            self.wan_sent[request] = link.sent(request)
            self.cancelled[request] = True
            link.stop(request)
            self.reschedule_link()

    # handlers, one per event kind -------------------------------------------------------------------

    def _on_prefill_done(self, request: int, t: float, version: int) -> None:
        self.architecture.after_prefill(self, request, t)

    def _on_link(self, t: float) -> None:
        link = self.link
        assert link is not None
        link.pop_finished(t, self._on_transfer_done)
        self.link_due_s = link.next_event()  # reschedule_link(), inline: once per transfer

    def _on_transfer_done(self, request: int, t: float) -> None:
        self.wan_sent[request] = self.wan_list[request]
        landed, ready = t + self.rtt_s / 2, self.md_ready[request]
        self.push(ready if ready > landed else landed, Event.KV_LANDED, request)

    def _to_decoders(self, request: int, t: float, version: int, kind: Event) -> None:
        """An event for the main decoders, kept for their own loop (`_run_decoders`)."""
        self.decode_inputs.append((t, kind, request, version))

    def _on_join_relay(self, request: int, t: float, version: int) -> None:
        if request in self.relay_skipped:  # the main decoder had the KV before the relay had its copy
            return
        self.relay_joined.add(request)
        relays = self.pools["relay"]
        colocated = self.scenario.relay_colocated
        inst = relays[self.prefill_instance[request]] if colocated else _least_loaded(relays)
        self.relay_instance[request] = inst
        self.join(inst, request, self.output_list[request], t, 0.0)

    def _on_kv_landed(self, request: int, t: float, version: int) -> None:
        if not self.relay_list[request]:
            self.decode_inputs.append((t, Event.KV_LANDED, request, 0))
        elif request in self.relay_instance or request not in self.relay_joined:
            self.push(t + self.rtt_s / 2, Event.RELAY_NOTICE, request)

    def _on_relay_notice(self, request: int, t: float, version: int) -> None:
        """The relay learns (at t) that the main decoder has the KV: hand over now, or catch up."""
        inst = self.relay_instance.get(request)
        if inst is None:
            if request not in self.relay_joined:
                # the RDMA copy has not reached the relay yet: it stays in P-RLD-MD (as routed) but the
                # relay produces no token and the main decoder starts as soon as it hears
                self.relay_skipped.add(request)
                self.send_to_md(request, t, self.output_list[request], 0.0, None)
            return
        inst.advance(t)
        if request not in inst.joined_at:  # still queued for a relay slot: go straight to the MD
            inst.queue = deque(entry for entry in inst.queue if entry[0] != request)
            self.relay_instance.pop(request)
            self.send_to_md(request, t, self.output_list[request], 0.0, None)
            return
        if not wants_catch_up(self.handoff, inst.batch / inst.max_batch):  # one chunk: stop now
            self.switch(request, t, inst.tokens_done(request))
            return
        earlier_extend_s, last_chunk = catch_up_chunks(
            inst.tokens_done(request),
            inst.step_s(),
            self.rtt_s,
            self.handoff.catchup_threshold_tokens,
            self.extend_one_s,
            True,
        )
        if not earlier_extend_s:  # one chunk: stop now
            self.switch(request, t, last_chunk)
            return
        self.catch_up(request, t, earlier_extend_s, last_chunk)

    def catch_up(self, request: int, t: float, earlier_extend_s: list[float], last_chunk: float) -> None:
        """Hand over in chunks from t: chunk i leaves the relay at t + sum_{j<i} (RTT + e_j) and stalls
        the (pinned) main decoder for e_i when it lands, RTT/2 later; the last chunk leaves when
        every earlier round is over."""
        self.decode_inputs.append((t, Event.PIN, request, 0))
        self.chunk_extend_s[request] = earlier_extend_s
        sent = t
        for chunk, extend in enumerate(earlier_extend_s):
            self.push(sent + self.rtt_s / 2, Event.CHUNK_EXTEND, request, chunk)
            sent += self.rtt_s + extend
        self.last_chunk[request] = last_chunk
        self.push(sent, Event.RELAY_FINAL, request)

    # the main decoders' handlers (their own loop) ---------------------------------------------------

    def _decode_join(self, request: int, t: float, version: int) -> None:
        self.join(_least_loaded(self.pools["decode"]), request, self.output_list[request], t, 0.0)

    def _decode_in_place(self, request: int, t: float, version: int) -> None:
        self.join(self.pools["decode"][self.prefill_instance[request]], request, self.output_list[request], t, 0.0)

    def _decode_pin(self, request: int, t: float, version: int) -> None:
        self.pinned[request] = _least_loaded(self.pools["decode"])

    def _decode_unpin(self, request: int, t: float, version: int) -> None:
        self.pinned.pop(request)

    def _on_chunk_extend(self, request: int, t: float, chunk: int) -> None:
        """An earlier chunk's IDs reach the main decoder: it extends them, stalling its batch (unless
        the relay finished the request before the chunk left, and so never sent it)."""
        extends = self.chunk_extend_s[request]
        if chunk == len(extends) - 1:
            del self.chunk_extend_s[request]
        if self.finish[request] < t - self.rtt_s / 2:
            return
        md = self.pinned[request]
        md.stall(t, extends[chunk])
        self.reschedule(md)

    def _on_relay_final(self, request: int, t: float, version: int) -> None:
        chunk = self.last_chunk.pop(request)
        if request in self.relay_instance:
            self.switch(request, t, chunk)
        else:  # finished on the relay while catching up
            self.decode_inputs.append((t, Event.UNPIN, request, 0))

    def _on_md_arrival(self, request: int, t: float, version: int) -> None:
        tokens, stall_s, handoff_t = self.md_bound.pop(request)
        if handoff_t is not None:
            self.handed_over_at[request] = handoff_t
        md = self.pinned.pop(request, None)
        self.join(_least_loaded(self.pools["decode"]) if md is None else md, request, tokens, t, stall_s)

    def _on_decoder_step(self, target: int, t: float, version: int) -> None:
        """Finish every sequence of the instance that is due now, then admit queued ones."""
        role, inst = self.instances[target]
        if version == inst.version:
            self._finish_due(role, inst, t)

    def _finish_due(self, role: str, inst: DecodeInstance, t: float) -> None:
        """At t, `inst` (of `role`) finishes every sequence due, then admits queued ones."""
        inst.advance(t)
        # finished: due within a token-clock rounding error of now (relative to t, so that long
        # simulated spans, where t's resolution exceeds a fixed tolerance, still terminate)
        resolution = 64 * math.ulp(t) / inst.step_s()
        due = inst.clock + (resolution if resolution > 1e-9 else 1e-9)
        heap, joined, finish, relay = inst.heap, inst.joined_at, self.finish, role == "relay"
        while heap and heap[0][0] <= due:
            _, request = heapq.heappop(heap)
            if request not in joined:
                continue
            inst.remove(request)
            finish[request] = t
            if relay:
                self.finished_on_relay(request, t)
        self.admit_queued(inst, t)

    # results --------------------------------------------------------------------------------------

    def table(self) -> RequestTable:
        if self.link is None:
            wan_bytes = np.zeros(len(self.arrival))
        else:
            wan_bytes = np.where(self.relay & self.cancelled, np.array(self.wan_sent), self.wan_size)
        return RequestTable(
            arrival_s=self.arrival,
            prompt_tokens=self.prompt,
            hit=self.hit,
            output_tokens=self.output,
            new_tokens=self.fresh,
            prefill_start_s=self.prefill_start,
            prefill_end_s=self.prefill_end,
            first_token_s=np.array(self.first_token),
            finish_s=np.array(self.finish),
            worst_gap_s=np.array(self.worst_gap),
            relay_tokens=np.array(self.relay_tokens),
            wan_bytes=wan_bytes,
            cancelled=self.cancelled,
            pipeline=self.pipeline.astype(str),
        )

    def stats(self) -> SimulationStats:
        link = self.link
        return SimulationStats(
            span_s=float(np.nanmax(np.array(self.finish))) if self.finish else 0.0,
            prefill_busy_s=self.prefill_busy_s,
            prefill_instances=self.scenario.prefill.count,
            link_bytes=link.bytes_delivered if link else 0.0,
            link_capacity_integral=link.capacity_integral if link else 0.0,
            link_timeline=link.timeline if link else None,
            decoder_batch_integral={
                name: sum(inst.batch_time_integral for inst in pool) for name, pool in self.pools.items()
            },
            decoder_max_batch={name: pool[0].max_batch for name, pool in self.pools.items()},
            decoder_instances={name: len(pool) for name, pool in self.pools.items()},
        )


def simulate_requests(
    scenario: Scenario,
    count: int,
    seed: int,
    replay: TraceReplay | None = None,
    link_change: tuple[float, float] | None = None,
    record_link: bool = False,
) -> tuple[RequestTable, SimulationStats]:
    """Simulate `count` requests (drawn from the workload, or the first `count` of `replay`);
    return the per-request table and server statistics.

    `link_change` = (t, share): from t the line pool keeps `share` of its capacity (a line fails);
    `record_link` keeps the transfers in flight at each change (`SimulationStats.link_timeline`)."""
    check_requests(count)
    check_seed(seed)
    if scenario.plan.split is not None:
        if replay is not None:
            raise InputError(
                "a trace replayed through a plan with a `split`: not supported (the trace's sessions would need "
                "dividing between the pools); simulate the plan on its workload, or replay a one-pool plan"
            )
        return _simulate_split(scenario, count, seed)
    if replay is not None:
        count = min(count, len(replay))
    simulation = _Simulation(scenario, count, np.random.default_rng(seed), replay, link_change, record_link)
    simulation.run()
    return simulation.table(), simulation.stats()


def _simulate_split(scenario: Scenario, count: int, seed: int) -> tuple[RequestTable, SimulationStats]:
    """A plan whose requests split over two co-located pools (`pddplan.scenarios.split`): each pool
    simulated on its own arrivals, round(s_i count) requests (a pool with none is not run) at s_i of the rate with
    its own seed drawn from `seed`, over the same span; the tables merged in arrival order. The
    statistics add up, each pool's kept in `pools`."""
    parts = pool_parts(scenario)
    first = round(count * parts[0].share)
    counts = [first, count - first]
    runs = []
    simulated = []
    for index, (part, n) in enumerate(zip(parts, counts, strict=True)):
        if n == 0:  # a run too short for a request of this pool
            continue
        pool_seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
        runs.append(simulate_requests(part.scenario, n, pool_seed))
        simulated.append(part)
    columns = {
        f.name: np.concatenate([getattr(t, f.name) for t, _ in runs]) for f in fields(RequestTable) if f.name != "pool"
    }
    served = [np.full(len(t.arrival_s), part.role) for part, (t, _) in zip(simulated, runs, strict=True)]
    columns["pool"] = np.concatenate(served)
    order = np.argsort(columns["arrival_s"], kind="stable")
    table = RequestTable(**{name: values[order] for name, values in columns.items()})
    pools = tuple((part.role, stats) for part, (_, stats) in zip(simulated, runs, strict=True))
    all_stats = [stats for _, stats in runs]
    return table, SimulationStats(
        span_s=max(stats.span_s for stats in all_stats),
        prefill_busy_s=sum(stats.prefill_busy_s for stats in all_stats),
        prefill_instances=sum(stats.prefill_instances for stats in all_stats),
        link_bytes=0.0,
        link_capacity_integral=0.0,
        decoder_batch_integral={},
        decoder_max_batch={},
        decoder_instances={},
        pools=pools,
    )
