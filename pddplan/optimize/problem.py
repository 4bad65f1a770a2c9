"""The numbers one architecture's integer programs are built from, and solving them.

`build_setup` resolves what every solve of an architecture shares (model, instance candidates,
line pools); a `ProblemBuilder` turns it into `ProblemData` for one routing rule and one amount
of headroom, keeping the prefill capacities it computed (they depend on the routing rule and the
SLA scale only); `solve_program` solves one program, `solve_bcr` runs Dinkelbach on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pddplan import architectures
from pddplan.architectures import Architecture
from pddplan.cache.accounting import decode_cache_bytes_per_rps, prefill_cache_bytes_per_rps
from pddplan.cache.tiers import instance_tiers
from pddplan.errors import InputError
from pddplan.evaluate.analytic import Evaluation, evaluate
from pddplan.evaluate.capacity import (
    RDMA_PATH,
    DecoderCapacity,
    Downstream,
    PathLoad,
    SearchFloor,
    colocated_capacity,
    decoder_capacity,
    path_loads,
    pool_size_estimate,
    prefill_capacity_by_line,
    slowest_extender,
    unloaded_ttft_s,
)
from pddplan.evaluate.classes import RequestClasses, planning_effects, with_relay_rule, workload_classes
from pddplan.evaluate.moments import WorkloadMoments, workload_moments
from pddplan.inputs.input_set import InputSet
from pddplan.net.lines import LinePool
from pddplan.optimize import model as milp
from pddplan.optimize.candidates import (
    Candidate,
    holds_longest_prompt,
    instance_candidates,
    wan_configs,
)
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.solver import solve
from pddplan.perf.kv import request_kv_bytes
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import ArchitectureName, Handoff, Plan, RoleName, Routing
from pddplan.specs.workload import Workload

DINKELBACH_ITERATIONS = 12
#: routing rules searched together for one prefill kind while rules x lines x pool sizes x request
#: classes stays at most this (pdd-agent-64k: all six, 80,640; the 10,000-GPU fleet: one at a time,
#: whose arrays already outgrow the caches)
BATCHED_ELEMENTS = 200_000
# A pool size a simulation saw miss the SLA at rate r is credited with at most this share of r: the
# program may still serve less on it, not r again.
MISS_SHARE = 0.85
# Capacities use the adaptive handoff, which holds the relay at least as long as one-shot.
CAPACITY_HANDOFF = Handoff(mode="adaptive")


@dataclass(frozen=True)
class OptimizeSetup:
    """What every solve of one architecture shares."""

    inputs: InputSet
    architecture: Architecture
    candidates: list[Candidate]  # the prefill role's (and a co-located pool's)
    lines: list[LinePool]
    moments: WorkloadMoments
    rate_ceiling: float
    #: the decode and relay roles' candidates where the workload's `role_weights` store the model
    #: otherwise than for prefill (None: `candidates`)
    role_candidates: dict[RoleName, list[Candidate]] | None = None

    def candidates_for(self, role: RoleName) -> list[Candidate]:
        """The instance kinds `role` may take, its instances storing the model as that role does;
        pipeline stages only for prefill: a decoder receiving KV from prefill runs without them
        (vLLM's NIXL connectors take pipelined prefill only, vLLM #45880; SGLang's decode pp must
        be 1 or the prefill's)."""
        kinds = (self.role_candidates or {}).get(role, self.candidates)
        return kinds if role == "prefill" else [c for c in kinds if c.pp == 1]

    @property
    def workload(self) -> Workload:
        return self.inputs.workload

    @property
    def model(self) -> ModelArchitecture:
        return self.inputs.model

    @property
    def chunk(self) -> int:
        return self.workload.serving.chunk_tokens


def prune_lines(lines: list[LinePool]) -> list[LinePool]:
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


def build_setup(inputs: InputSet, architecture: ArchitectureName, rate_ceiling: float) -> OptimizeSetup:
    """Instance candidates and (for architectures over the WAN) the undominated line pools leaving
    the home datacenter."""
    workload = inputs.workload
    arch = architectures.get(architecture)
    chunk = workload.serving.chunk_tokens
    candidates = instance_candidates(inputs, chunk)
    roles: tuple[RoleName, ...] = ("decode", "relay")
    own: dict[RoleName, list[Candidate]] = {
        role: instance_candidates(inputs, chunk, role) for role in roles if role in (workload.role_weights or {})
    }
    lines: list[LinePool] = []
    if arch.uses_wan:
        home = workload.deployment.home
        lines = [line for line in prune_lines(wan_configs(inputs)) if line.source == home]
    return OptimizeSetup(
        inputs=inputs,
        architecture=arch,
        candidates=candidates,
        lines=lines,
        moments=workload_moments(workload),
        rate_ceiling=rate_ceiling,
        role_candidates=own or None,
    )


@dataclass(frozen=True)
class Headroom:
    """How much a failed verification asks of the next program (all neutral at first).

    sla_scale   shrinks the TTFT targets prefill pools are sized for;
    decode_scale shrinks the rate and concurrency a decode or relay instance is credited with;
    rate_cap_rps bounds the rate the program may serve below the offered rate (budget mode, after a
                plan failed verification at a higher rate)."""

    sla_scale: float = 1.0
    decode_scale: float = 1.0
    rate_cap_rps: float = math.inf
    #: what verification learned: (candidate key, n, rate) when n instances of that kind missed the
    #: SLA at `rate` in simulation; fewer of them serve less, so every pool of at most n of that kind
    #: is credited with less than `rate` (`limited_prefill_caps`)
    prefill_misses: tuple[tuple[str, int, float], ...] = ()

    def prefill_allowed(self, key: str, count: int, rate_rps: float) -> bool:
        """Whether `count` instances of kind `key` may serve `rate_rps`: not when a simulation saw
        as many or more of them miss the SLA at that rate or less."""
        return not any(k == key and count <= n and rate_rps >= r * (1 - 1e-9) for k, n, r in self.prefill_misses)


@dataclass
class ProblemBuilder:
    """Builds one architecture's programs; `beyond_inventory` sizes prefill pools past the offer's
    max_count (for the elastic diagnosis, which asks how many GPUs would be needed)."""

    setup: OptimizeSetup
    options: OptimizeOptions
    beyond_inventory: bool = False
    _prefill_memo: dict[tuple[Any, ...], dict[tuple[int, int], np.ndarray]] = field(default_factory=dict)
    _classes_memo: dict[str | None, dict[int, RequestClasses]] = field(default_factory=dict)
    _decoders_memo: dict[tuple[float, float, str], list[DecoderCapacity[Candidate]]] = field(default_factory=dict)
    _colocated_memo: dict[float, dict[int, float]] = field(default_factory=dict)
    _cache_room_memo: dict[int, float] | None = None
    _one_instance: dict[str, list[DecoderCapacity[Candidate]]] = field(default_factory=dict)
    _pooled: dict[tuple[str, int, int], DecoderCapacity[Candidate]] = field(default_factory=dict)
    _evaluations: dict[str, tuple[Scenario, Evaluation] | None] = field(default_factory=dict)

    def evaluated(self, plan: Plan) -> tuple[Scenario, Evaluation] | None:
        """`plan`'s scenario and its closed-form figures; None when the inputs cannot hold it (more
        instances than a datacenter offers, a width the model or the longest prompt does not fit).
        Each plan is evaluated once: later rounds and trims come back to plans met before, and the
        figures depend on the plan and the inputs alone."""
        key = plan.model_dump_json()
        if key not in self._evaluations:
            try:
                scenario = build_scenario(plan, self.setup.inputs, source="optimized plan")
            except InputError:
                self._evaluations[key] = None
            else:
                self._evaluations[key] = (scenario, evaluate(scenario))
        return self._evaluations[key]

    def beyond(self) -> ProblemBuilder:
        """This builder sizing prefill pools past the inventory (`beyond_inventory`), sharing every
        memo that does not depend on it (request classes, decoders, cache room)."""
        return replace(self, beyond_inventory=True, _prefill_memo={})

    def decoders(
        self, decode_scale: float = 1.0, pooled_rps: float = 0.0, role: RoleName = "decode"
    ) -> list[DecoderCapacity[Candidate]]:
        """Capacity of every candidate of `role` (decode or relay) as a decoder, credited
        `decode_scale` of its rate and concurrency; a kind that cannot hold the longest prompt's KV
        gets none (batch 0). With `pooled_rps` > 0, a kind's slot wait is pooled over the fewest
        instances that could carry that rate (`pool_size_estimate`), else taken on one instance's
        slots."""
        key = (decode_scale, pooled_rps, role)
        if key not in self._decoders_memo:
            self._decoders_memo[key] = self._decoders(decode_scale, pooled_rps, role)
        return self._decoders_memo[key]

    def _decoders(self, decode_scale: float, pooled_rps: float, role: RoleName) -> list[DecoderCapacity[Candidate]]:
        moments = self.setup.moments
        workload, model = self.setup.workload, self.setup.model
        candidates = self.setup.candidates_for(role)
        if role not in self._one_instance:  # each candidate on one instance's slots: the same at every scale
            self._one_instance[role] = [
                decoder_capacity(candidate, workload, model, moments.context_tokens, moments.output_tokens)
                for candidate in candidates
            ]
        out = []
        for i, (candidate, d) in enumerate(zip(candidates, self._one_instance[role], strict=True)):
            pool = pool_size_estimate(pooled_rps, d.batch, d.step_s, moments.output_tokens)
            if pool > 1:
                if (role, i, pool) not in self._pooled:
                    self._pooled[(role, i, pool)] = decoder_capacity(
                        candidate, workload, model, moments.context_tokens, moments.output_tokens, pool
                    )
                d = self._pooled[(role, i, pool)]
            if not holds_longest_prompt(candidate, workload):
                d = replace(d, batch=0, requests_per_s=0.0, occupancy=0.0)
            out.append(replace(d, requests_per_s=d.requests_per_s * decode_scale, occupancy=d.occupancy * decode_scale))
        return out

    def _largest_pool(self, candidate: Candidate, classes: RequestClasses) -> int:
        """The most instances of `candidate` a pool is sized up to: what the whole rate would keep
        busy 1.5 times over (plus 4), within the datacenter's offer (unless beyond the inventory)."""
        mean_s = float(classes.prefill_s @ classes.input_prob)
        by_rate = math.ceil(self.setup.rate_ceiling * mean_s * 1.5) + 4
        return max(by_rate if self.beyond_inventory else min(candidate.max_count, by_rate), 1)

    def _least_rates(self, classes: dict[int, RequestClasses], usable: list[bool], tops: list[int]) -> list[float]:
        """The least rate each candidate's pool may serve: all the program serves, or, where
        co-located pools may split the requests, what the largest pool of another GPU type in its
        datacenter cannot carry (n instances of kind k carry less than n / E[P_k], P_k a request's
        fully packed work). A diagnosis (beyond the inventory) asks what one pool lacks."""
        setup = self.setup
        least = self.options.least_rate(setup.rate_ceiling)
        if not self.colocated_split or self.beyond_inventory:
            return [least] * len(setup.candidates)
        most = []
        for i, top in enumerate(tops):
            work_s = float(classes[i].prefill_work_s @ classes[i].input_prob)
            most.append(top / work_s if usable[i] and work_s > 0 else (math.inf if usable[i] else 0.0))
        out = []
        for c in setup.candidates:
            beside = [k for k, o in enumerate(setup.candidates) if o.datacenter == c.datacenter and o.gpu != c.gpu]
            out.append(max(least - max((most[k] for k in beside), default=0.0), 0.0))
        return out

    @property
    def colocated_split(self) -> bool:
        """Whether co-located serving may split the requests over two pools: some datacenter offers
        instance kinds of two GPU types."""
        return self.setup.architecture.colocated and _two_types_in_a_datacenter(self.setup.candidates)

    def colocated_relay(self, decode_scale: float) -> dict[int, float]:
        """Per prefill candidate, the relay sequences one instance keeps running (u* B*) in the
        KV room its longest prompt leaves, when the options let the relay run on prefill."""
        if self.options.relay_placement == "dedicated":
            return {}
        if decode_scale not in self._colocated_memo:
            self._colocated_memo[decode_scale] = self._colocated_relay(decode_scale)
        return self._colocated_memo[decode_scale]

    def _colocated_relay(self, decode_scale: float) -> dict[int, float]:
        setup = self.setup
        workload, model, moments = setup.workload, setup.model, setup.moments
        page = workload.serving.page_tokens
        longest = float(request_kv_bytes(model, workload.prompt_tokens.largest(), page))
        out = {}
        for i, candidate in enumerate(setup.candidates):
            if not holds_longest_prompt(candidate, workload) or candidate.pp > 1:  # no mixed pipelined steps
                continue
            room = replace(candidate, kv_capacity_bytes=candidate.kv_capacity_bytes - longest)
            d = decoder_capacity(room, workload, model, moments.context_tokens, moments.output_tokens)
            if d.usable:
                out[i] = d.occupancy * decode_scale
        return out

    def build(self, routing: Routing | None, headroom: Headroom = Headroom()) -> milp.ProblemData:
        """Capacities of every candidate for one routing rule (the program's numbers)."""
        setup, options = self.setup, self.options
        arch, workload = setup.architecture, setup.workload
        # a relay pool's size is not known: one instance's slots
        relays = self.decoders(headroom.decode_scale, role="relay")
        md_step = max((d.step_s for d in relays if d.usable), default=math.inf)
        routing_key, classes = self._routing_classes(routing)
        any_classes = next(iter(classes.values()))
        datacenters = self._datacenters()
        downstream = Downstream(arch, None, md_step, md_step)
        # the handoff's extend cost comes from the slowest decoder kind: found once, not per line
        slowest = (
            [slowest_extender([c.instance for c in setup.candidates_for("decode")], any_classes.mean_context_tokens)]
            if arch.uses_wan
            else []
        )
        pools: list[PathLoad] = (
            path_loads(
                [replace(downstream, line=line) for line in setup.lines],
                any_classes,
                setup.rate_ceiling,
                slowest,
                CAPACITY_HANDOFF,
            )
            if arch.uses_wan
            else [RDMA_PATH for _ in datacenters]
        )
        # the least main-decoder load the program may place: the least rate it may serve, times the
        # smallest share of output work the main decoders do on any line pool
        least_md_rps = options.least_rate(setup.rate_ceiling) * min(load.md_load_fraction for load in pools)
        decoders = self.decoders(headroom.decode_scale, least_md_rps)
        memo_key = (routing_key, headroom.sla_scale)
        if memo_key not in self._prefill_memo:
            self.prepare([routing], headroom)
        inventory = {
            (dc.name, offer.type): offer.max_count for dc in workload.deployment.datacenters for offer in dc.gpus
        }
        return milp.ProblemData(
            architecture=arch,
            prefill=setup.candidates,
            prefill_caps=limited_prefill_caps(self._prefill_memo[memo_key], setup.candidates, headroom),
            decode=[] if arch.colocated else decoders,
            relay=relays if arch.has_relay and options.relay_placement != "prefill" else [],
            pools=pools,
            datacenters=datacenters,
            decode_cache_bytes_per_rps=decode_cache_bytes_per_rps(workload, setup.model, arch.caches),
            mean_output_tokens=setup.moments.output_tokens,
            inventory=inventory,
            rate_ceiling=min(setup.rate_ceiling, headroom.rate_cap_rps),
            mode=options.mode,
            target_rate=options.rate,
            budget_per_hour=options.budget_per_hour,
            min_served_fraction=options.min_served_fraction,
            colocated_relay=self.colocated_relay(headroom.decode_scale) if arch.has_relay else {},
            prefill_cache_bytes_per_rps=prefill_cache_bytes_per_rps(workload, setup.model),
            prefill_cache_room=self.prefill_cache_room(),
            colocated_pools=2 if self.colocated_split else 1,
        )

    def _routing_classes(self, routing: Routing | None) -> tuple[str | None, dict[int, RequestClasses]]:
        """(memo key, per prefill candidate the request classes) of one routing rule."""
        setup = self.setup
        workload = setup.workload
        routing_key = routing.model_dump_json() if routing else None
        if routing_key not in self._classes_memo:
            if None not in self._classes_memo:  # prefill times do not depend on the routing: computed once
                self._classes_memo[None] = {
                    i: workload_classes(
                        workload, setup.model, c.instance, setup.chunk, None, planning_effects(workload, c.instance)
                    )
                    for i, c in enumerate(setup.candidates)
                }
            relay_rule = setup.architecture.relay_rule(routing) if routing is not None else None
            self._classes_memo[routing_key] = {
                i: with_relay_rule(base, relay_rule) for i, base in self._classes_memo[None].items()
            }
        return routing_key, self._classes_memo[routing_key]

    def _datacenters(self) -> list[str]:
        """Where the program's pools without a line sit: over RDMA the home datacenter; co-located
        pools in any."""
        workload = self.setup.workload
        if self.setup.architecture.colocated:
            return [dc.name for dc in workload.deployment.datacenters]
        return [workload.deployment.home]

    def prepare(self, routings: Sequence[Routing | None], headroom: Headroom = Headroom()) -> None:
        """Size the prefill pools of every rule in `routings` at `headroom`'s SLA scale that `build`
        has not yet: one capacity search per candidate over every (rule, line) row, so that a round
        over many routing rules pays the search's per-call overhead once."""
        relays = self.decoders(headroom.decode_scale, role="relay")
        md_step = max((d.step_s for d in relays if d.usable), default=math.inf)
        todo: dict[str | None, dict[int, RequestClasses]] = {}
        for routing in routings:
            key, classes = self._routing_classes(routing)
            if (key, headroom.sla_scale) not in self._prefill_memo:
                todo[key] = classes
        if not todo:
            return
        downstream = Downstream(self.setup.architecture, None, md_step, md_step)
        by_rule = self._prefill_capacities(todo, downstream, headroom.sla_scale)
        for key, caps in by_rule.items():
            self._prefill_memo[(key, headroom.sla_scale)] = caps

    def unloaded_ttft(self, routing: Routing | None) -> tuple[np.ndarray, Candidate, LinePool | None] | None:
        """The prefill kind and line (None: RDMA) whose TTFT comes closest to the SLA's TTFT targets
        when nothing queues and the line is idle (the largest ratio of quantile to target the
        least), with those quantiles in the targets' order (`unloaded_ttft_s`); None without a
        kind that holds the longest prompt."""
        setup = self.setup
        data = self.build(routing)
        classes = self._classes_memo[routing.model_dump_json() if routing else None]
        relays = self.decoders(role="relay")
        md_step = max((d.step_s for d in relays if d.usable), default=math.inf)
        targets = setup.workload.sla.targets("ttft")
        target_s = np.array([t.target_s for t in targets])
        best: tuple[float, np.ndarray, Candidate, LinePool | None] | None = None
        for i, candidate in enumerate(setup.candidates):
            if not holds_longest_prompt(candidate, setup.workload):
                continue
            if setup.architecture.colocated and candidate.pp > 1:  # never a co-located pool's kind
                continue
            lines = [
                load.line
                for k, load in enumerate(data.pools)
                if (load.line.source if load.line is not None else data.datacenters[k]) == candidate.datacenter
            ]
            if not lines:
                continue
            downstreams = [Downstream(setup.architecture, line, md_step, md_step) for line in lines]
            floors = unloaded_ttft_s(candidate, classes[i], downstreams, setup.workload, [t.quantile for t in targets])
            for line, row in zip(lines, floors, strict=True):
                score = float(np.max(row / target_s))
                if best is None or score < best[0]:
                    best = (score, row, candidate, line)
        return None if best is None else best[1:]

    def prefill_cache_room(self) -> dict[int, float]:
        """Per prefill candidate, the bytes one instance holds for the prefix cache: its KV room
        beside the longest prompt in flight, plus its tiers below HBM (`pddplan.cache.tiers`)."""
        if self._cache_room_memo is None:
            setup = self.setup
            workload = setup.workload
            serving = workload.serving
            longest = float(request_kv_bytes(setup.model, workload.prompt_tokens.largest(), serving.page_tokens))
            room = {}
            for i, candidate in enumerate(setup.candidates):
                tiers, _ = instance_tiers(candidate.instance, serving.cache_tiers, serving.host_memory_utilization)
                lower = sum(t.capacity_bytes for t in tiers)
                room[i] = max(candidate.kv_capacity_bytes - longest, 0.0) + lower
            self._cache_room_memo = room
        return self._cache_room_memo

    def _prefill_capacities(
        self,
        classes_by_rule: dict[str | None, dict[int, RequestClasses]],
        downstream: Downstream,
        sla_scale: float,
    ) -> dict[str | None, dict[tuple[int, int], np.ndarray]]:
        """Per routing rule, (prefill candidate, pool) -> the rate each pool size 1..N sustains
        within the TTFT SLA; pool k is the k-th of `setup.lines` over the WAN, else it sits in the
        k-th of `_datacenters()`. The rules differ only in which requests take the relay: one search
        per candidate covers every (rule, distinct line) row."""
        setup = self.setup
        arch = setup.architecture
        datacenters = self._datacenters()
        lines: list[LinePool | None] = list(setup.lines) if arch.uses_wan else [None] * len(datacenters)
        rules = list(classes_by_rule)
        out: dict[str | None, dict[tuple[int, int], np.ndarray]] = {key: {} for key in rules}
        base = next(iter(classes_by_rule.values()))
        usable = [
            holds_longest_prompt(c, setup.workload) and not (arch.colocated and c.pp > 1)  # pipelined decode
            for c in setup.candidates
        ]
        tops = [self._largest_pool(c, base[i]) for i, c in enumerate(setup.candidates)]
        least_rates = self._least_rates(base, usable, tops)
        whole = self.options.least_rate(setup.rate_ceiling)
        for i, candidate in enumerate(setup.candidates):
            if not usable[i]:
                continue
            classes = base[i]  # every rule's classes but for the relay marks
            top, least = tops[i], least_rates[i]
            # a pool of n instances serves less than n / E[P], P a request's work when fully packed (its
            # least, `pddplan.evaluate.prefill_queue`; far below its time alone under data-parallel
            # attention): smaller pools cannot reach the least rate the pool may serve, so their
            # capacity is left at 0 without computing it
            least_work_s = float(classes.prefill_work_s @ classes.input_prob)
            lowest = min(max(math.floor(least * least_work_s), 1), top)
            # what one pool needs to carry all the program serves: smaller ones only split it
            alone = min(max(math.floor(whole * least_work_s), 1), top)
            sizes = np.arange(lowest, top + 1)
            # one row per distinct line (pools of equal lines share it)
            rows: dict[Any, int] = {}
            line_rows: list[LinePool | None] = []
            pool_row: dict[int, int] = {}
            for k, line in enumerate(lines):
                source = line.source if line is not None else datacenters[k]
                if source != candidate.datacenter:
                    continue
                link_key = (
                    (line.capacity_bytes_per_s, line.flow_cap_bytes_per_s, line.rtt_s, line.fluctuation)
                    if line is not None
                    else None
                )
                if link_key not in rows:
                    rows[link_key] = len(line_rows)
                    line_rows.append(line)
                pool_row[k] = rows[link_key]
            if not line_rows:
                continue
            if arch.colocated:  # the pool also decodes: one row, no line, no relay
                floor = SearchFloor(least, alone)
                rates = colocated_capacity(
                    candidate, classes, setup.workload, sizes, setup.rate_ceiling, sla_scale, floor
                )[None, :]
            else:  # rows rule-major: rule r's line j is row r * len(line_rows) + j
                # as many rules per search as keep its arrays small: beyond, one call per rule is faster
                per_rule = len(line_rows) * len(sizes) * len(classes.input_prob)
                group = max(1, min(len(rules), BATCHED_ELEMENTS // max(per_rule, 1)))
                parts = []
                for start in range(0, len(rules), group):
                    downstreams = [
                        replace(downstream, line=line, relayed=classes_by_rule[key][i].relay)
                        for key in rules[start : start + group]
                        for line in line_rows
                    ]
                    parts.append(
                        prefill_capacity_by_line(
                            candidate, classes, downstreams, setup.workload, sizes, setup.rate_ceiling, sla_scale
                        )
                    )
                rates = np.concatenate(parts)
            padded = np.concatenate([np.zeros((len(rates), lowest - 1)), rates], axis=1)
            for r, key in enumerate(rules):
                offset = r * len(line_rows) if not arch.colocated else 0
                for k, row in pool_row.items():
                    out[key][(i, k)] = padded[offset + row]
        return out


def limited_prefill_caps(
    caps: dict[tuple[int, int], np.ndarray], candidates: list[Candidate], headroom: Headroom
) -> dict[tuple[int, int], np.ndarray]:
    """`caps` with every pool of at most n instances of a kind that a simulation saw miss the SLA at
    rate r credited with at most MISS_SHARE * r: cap[size] <= MISS_SHARE * r for size <= n."""
    if not headroom.prefill_misses:
        return caps
    limited = dict(caps)
    for (i, k), row in caps.items():
        misses = [(n, rate) for key, n, rate in headroom.prefill_misses if key == candidates[i].key]
        if misses:
            row = row.copy()  # the memo's row stays as computed
            for n, rate in misses:
                row[:n] = np.minimum(row[:n], MISS_SHARE * rate)
            limited[(i, k)] = row
    return limited


def solve_program(data: milp.ProblemData, options: OptimizeOptions, bcr_price: float = 0.0) -> milp.Solution | None:
    """Solve one program; None when infeasible."""
    model, variables = milp.build(data, bcr_price)
    if solve(model, options.solver) == "infeasible":
        return None
    return milp.read_solution(data, variables)


def solve_bcr(
    data: milp.ProblemData, options: OptimizeOptions, start_ratio: float = 0.0
) -> tuple[milp.Solution | None, int]:
    """(best solution, solves). Rate and budget modes: one solve. BCR: Dinkelbach,
    q <- rate / cost until rate - q * cost ~ 0.

    Starting from a ratio another feasible plan already achieved (`start_ratio`) skips the first
    iterations; if no plan beats it, the loop restarts from 0 so a solution is always returned.
    """
    nothing = 1e-9 * data.rate_ceiling  # a served rate this small serves nothing (relative: rates may be tiny)
    if data.mode != "bcr":
        solution = solve_program(data, options)
        if solution is None or solution.rate <= nothing:  # budget mode: the budget buys nothing that serves
            return None, 1
        return solution, 1
    solves = 0
    ratio = start_ratio
    best: milp.Solution | None = None
    # one program; each iteration only sets its objective anew (the constraints do not depend on q)
    model, variables = milp.build(data, ratio)
    for _ in range(DINKELBACH_ITERATIONS):
        milp.define_objective(model, data, variables, ratio)
        solved = solve(model, options.solver) != "infeasible"
        solution = milp.read_solution(data, variables) if solved else None
        solves += 1
        if solution is None:
            return best, solves
        if solution.rate <= nothing or solution.cost_per_hour <= 0:
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


def _two_types_in_a_datacenter(candidates: list[Candidate]) -> bool:
    """Whether some datacenter offers instance kinds of two GPU types (where co-located serving may
    split the requests over a pool of each)."""
    types: dict[str, set[str]] = {}
    for c in candidates:
        types.setdefault(c.datacenter, set()).add(c.gpu)
    return any(len(gpus) > 1 for gpus in types.values())
