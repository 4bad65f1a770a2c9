"""The workload as a finite set of request classes, for closed-form evaluation.

Each distribution is replaced by its support points (see `support()` on the distributions); a
class is one (prompt length, hit rate) pair, weighted by the product of probabilities, with the
output-length distribution kept as a second axis. Per class the per-request quantities are
computed once: new and cached tokens, incremental KV bytes, prefill service time, route.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pddplan.cache.accounting import found_probability
from pddplan.cache.sessions import CacheKind
from pddplan.cache.tiers import instance_tiers
from pddplan.evaluate.moments import WorkloadMoments, workload_moments
from pddplan.perf.kv import cached_tokens, incremental_kv_bytes, new_tokens, request_kv_bytes
from pddplan.perf.roofline import Instance, linear_step_s, prefill_cost
from pddplan.scenarios.scenario import Scenario
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import Routing
from pddplan.specs.workload import Workload


@dataclass(frozen=True)
class RequestClasses:
    """Input classes (axis 0) and output lengths (axis 1), each with its probabilities (the joint
    probability of a pair is input_prob[i] * output_prob[j]).

    `prefill_s` is a request's own prefill latency (its chunks' engine time alone, `prefill_alone_s`,
    plus, with pipeline stages, its last chunk's crossing of the stages after the first alone,
    `PrefillCost.fill_s`, plus the request overhead); `prefill_stages` the pipeline's stages and
    `prefill_full_step_s` a full chunk's stage step, T_lin(C) + C x attention per new token (what
    the later stages may still be busy with, `pddplan.evaluate.prefill_queue`); `prefill_work_s`
    the share of a prefill instance's time it takes when the pool is saturated: chunked prefill
    packs requests into full steps, and under data-parallel attention every rank is busy
    (`pddplan.perf.roofline.prefill_cost`).
    `prefill_ranks` is r, the ranks of an instance that prefill apart (1 without data-parallel
    attention) and `prefill_loaded_s` a request's own engine time with every rank busy (its
    `prefill_alone_s` when r = 1), `prefill_chunk_s` its chunks' steps alone (a second axis; 0
    past its last chunk). `load_s` is the time to read its cached KV from a slower cache
    tier first: it delays its first token only (added where TTFT is formed, never to the prefill
    instance's work)."""

    prompt_tokens: np.ndarray
    hit: np.ndarray
    new_tokens: np.ndarray
    cached_tokens: np.ndarray
    wan_bytes: np.ndarray
    prefill_s: np.ndarray
    prefill_alone_s: np.ndarray
    prefill_work_s: np.ndarray
    prefill_attention_s: np.ndarray
    chunk_tokens: int
    prefill_ranks: int
    prefill_loaded_s: np.ndarray
    prefill_chunk_s: np.ndarray
    relay: np.ndarray
    output_tokens: np.ndarray
    input_prob: np.ndarray
    output_prob: np.ndarray
    moments: WorkloadMoments
    load_s: np.ndarray
    md_load_s: np.ndarray
    prefill_stages: int = 1
    prefill_full_step_s: float = 0.0
    prefill_fill_s: np.ndarray | float = 0.0  # per class, its lone fill (`PrefillCost.fill_s`)

    def attention_s_per_new_token(self) -> float:
        """Prefill attention per new token, token-weighted: E[A] / E[n] (0 with no new tokens)."""
        tokens = float(self.new_tokens @ self.input_prob)
        return float(self.prefill_attention_s @ self.input_prob) / tokens if tokens > 0 else 0.0

    def alone_s_per_chunk(self) -> float:
        """A request's own chunk step on average: E[prefill alone] / E[chunks] (0 with no new token)."""
        chunks = float(np.ceil(self.new_tokens / self.chunk_tokens) @ self.input_prob)
        return float(self.prefill_alone_s @ self.input_prob) / chunks if chunks > 0 else 0.0

    def with_prefill_slowed(self, factor: float) -> RequestClasses:
        """These classes with every prefill engine time multiplied by `factor` (>= 1: steps that
        also carry a co-located relay's tokens); the request overhead is not engine time."""
        overhead = self.prefill_s - self.prefill_alone_s
        alone = self.prefill_alone_s * factor
        return replace(
            self,
            prefill_s=alone + overhead,
            prefill_alone_s=alone,
            prefill_work_s=self.prefill_work_s * factor,
            prefill_attention_s=self.prefill_attention_s * factor,
            prefill_loaded_s=self.prefill_loaded_s * factor,
            prefill_chunk_s=self.prefill_chunk_s * factor,
        )

    @property
    def mean_output_tokens(self) -> float:
        return self.moments.output_tokens

    @property
    def mean_context_tokens(self) -> float:
        """Mean context of a decoding sequence: prompt + half the output (see `moments`)."""
        return self.moments.context_tokens


def relayed(rule: Routing | None, hit: np.ndarray, wan_bytes: np.ndarray) -> np.ndarray:
    """Which requests go through the relay: hit < threshold (kind hit) or incremental KV bytes >
    threshold (kind bytes); none without a rule (architectures without a relay)."""
    if rule is None:
        return np.zeros(np.shape(hit), dtype=bool)
    if rule.kind == "hit":
        return np.asarray(hit < rule.hit_threshold)
    return np.asarray(wan_bytes > rule.incremental_bytes_threshold)


@dataclass(frozen=True)
class CacheEffects:
    """What the prefix caches do to a request (`pddplan.cache`): the probability that prefill still
    finds the prefix the workload's hit rate promises (else the whole prompt is prefilled), the
    probability the main decoder's radix cache still holds it (else the whole prompt's KV crosses
    the WAN), and the seconds per byte of a hit each loads from the tiers below HBM."""

    prefill_kept: float = 1.0
    prefill_load_s_per_byte: float = 0.0
    md_kept: float = 1.0
    md_load_s_per_byte: float = 0.0

    @classmethod
    def of_workload(cls, workload: Workload) -> CacheEffects:
        """Every prefix held, in HBM; the radix cache by its retention (`cache.sessions`)."""
        return cls(md_kept=found_probability(CacheKind.DECODE, workload))


def planning_effects(workload: Workload, prefill: Instance) -> CacheEffects:
    """The caches' effects as the optimizer plans them on a `prefill` instance kind: every prefix
    held (the program gives the caches their room, `define_prefill_cache`), each hit loaded from
    the first tier below HBM when the workload's caches may use one (write-through placement puts
    every cached byte there first), the radix cache by its retention."""
    serving = workload.serving
    tiers, _ = instance_tiers(prefill, serving.cache_tiers, serving.host_memory_utilization)
    load = 1.0 / tiers[0].request_bytes_per_s if tiers else 0.0
    return CacheEffects(prefill_load_s_per_byte=load, md_kept=found_probability(CacheKind.DECODE, workload))


def _split(kept: float, *columns: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """Each column twice (kept, then lost), or None when `kept` is 0 or 1 (no split needed)."""
    if kept <= 0 or kept >= 1:
        return None
    return tuple(np.concatenate([c, c]) for c in columns)


def workload_classes(
    workload: Workload,
    model: ModelArchitecture,
    prefill: Instance,
    chunk_tokens: int,
    relay_rule: Routing | None,
    effects: CacheEffects | None = None,
) -> RequestClasses:
    """Discretize `workload`; prefill times on `prefill`; relay marks by `relay_rule` (None: no relay).

    With the caches' `effects`, a (prompt, hit) class splits in two when prefill finds its prefix
    with probability 0 < p < 1 (found: x p; lost: hit 0, x (1 - p)), and again when the main
    decoder's radix cache holds a found prefix with probability 0 < q < 1: held (x q, the
    incremental KV crosses the WAN) and missed (x (1 - q), the whole prompt's KV crosses). A
    hit's load time is its cached KV bytes times the seconds per byte of its tiers (a request
    mix that carries its own, replayed through a trace's tiers, keeps those)."""
    effects = effects or CacheEffects.of_workload(workload)
    page = workload.serving.page_tokens
    prompt, hit, input_prob = workload.prompt_hit_support()
    load = workload.request_load_s()
    own_loads = bool(np.any(load > 0))
    split = _split(effects.prefill_kept, prompt, hit, load)
    if split is not None:
        prompt, hit, load = split
        n = len(input_prob)
        hit = np.where(np.arange(2 * n) < n, hit, 0.0)
        load = np.where(np.arange(2 * n) < n, load, 0.0)
        input_prob = np.concatenate([input_prob * effects.prefill_kept, input_prob * (1 - effects.prefill_kept)])
    elif effects.prefill_kept <= 0:
        hit, load = np.zeros_like(hit), np.zeros_like(load)
    full = request_kv_bytes(model, prompt, page)
    incremental = incremental_kv_bytes(model, prompt, hit, page)
    cached_bytes = full - incremental
    if not own_loads:
        load = cached_bytes * effects.prefill_load_s_per_byte
    held = effects.md_kept
    md_load = cached_bytes * effects.md_load_s_per_byte
    if held >= 1:
        wan_bytes = incremental
    elif held <= 0:
        wan_bytes, md_load = full, np.zeros_like(md_load)
    else:
        n = len(input_prob)
        prompt, hit, load = np.concatenate([prompt, prompt]), np.concatenate([hit, hit]), np.concatenate([load, load])
        input_prob = np.concatenate([input_prob * held, input_prob * (1 - held)])
        wan_bytes = np.concatenate([incremental, full])
        md_load = np.concatenate([md_load, np.zeros(n)])
    fresh = new_tokens(prompt, hit, page)
    cached = cached_tokens(prompt, hit, page)
    relay = relayed(relay_rule, hit, wan_bytes)
    cost = prefill_cost(prefill, fresh, cached, chunk_tokens)
    overhead = prefill.efficiency.request_overhead_s
    outputs, output_probs = workload.output_tokens.support()
    full_step = 0.0
    if prefill.pp > 1:  # a full chunk's stage step, at the classes' mean packed attention per token
        tokens = float(fresh @ input_prob)
        per_token = float(cost.packed_attention_s @ input_prob) / tokens if tokens > 0 else 0.0
        full_step = float(linear_step_s(prefill, chunk_tokens)) + chunk_tokens * per_token
    return RequestClasses(
        prompt_tokens=prompt,
        hit=hit,
        new_tokens=fresh,
        cached_tokens=cached,
        wan_bytes=wan_bytes,
        prefill_s=np.where(fresh > 0, cost.alone_s + cost.fill_s + overhead, 0.0),
        prefill_alone_s=cost.alone_s,
        prefill_work_s=cost.batched_s,
        prefill_attention_s=cost.packed_attention_s,
        chunk_tokens=chunk_tokens,
        prefill_ranks=prefill.attention_ranks,
        prefill_loaded_s=cost.loaded_s,
        prefill_chunk_s=cost.chunk_s,
        relay=relay,
        output_tokens=outputs,
        input_prob=input_prob,
        output_prob=output_probs,
        moments=workload_moments(workload),
        load_s=load,
        md_load_s=md_load,
        prefill_stages=prefill.pp,
        prefill_full_step_s=full_step,
        prefill_fill_s=cost.fill_s,
    )


def with_relay_rule(classes: RequestClasses, relay_rule: Routing | None) -> RequestClasses:
    """`classes` with the relay marks of `relay_rule` (the rest does not depend on the rule)."""
    return replace(classes, relay=relayed(relay_rule, classes.hit, classes.wan_bytes))


def cache_effects(scenario: Scenario, rate_rps: float | None = None) -> CacheEffects:
    """The caches' effects on a scenario's requests at `rate_rps` (default: the plan's rate): each
    cache placed over its pool (`Scenario.cache`)."""
    prefill = scenario.cache(CacheKind.PREFILL, rate_rps)
    decode = scenario.cache(CacheKind.DECODE, rate_rps)
    return CacheEffects(
        prefill_kept=prefill.kept if prefill is not None else 1.0,
        prefill_load_s_per_byte=prefill.placement.load_s_per_byte() if prefill is not None else 0.0,
        md_kept=decode.kept if decode is not None else found_probability(CacheKind.DECODE, scenario.workload),
        md_load_s_per_byte=decode.placement.load_s_per_byte() if decode is not None else 0.0,
    )


def request_classes(scenario: Scenario, rate_rps: float | None = None) -> RequestClasses:
    """The classes of a scenario's workload at `rate_rps`, with its prefill instance, routing and caches."""
    plan = scenario.plan
    return workload_classes(
        scenario.workload,
        scenario.model,
        scenario.prefill.instance,
        scenario.chunk_tokens,
        scenario.architecture.relay_rule(plan.routing),
        cache_effects(scenario, rate_rps),
    )
