"""The workload as a finite set of request classes, for closed-form evaluation.

Each distribution is replaced by its support points (see `support()` on the distributions); a
class is one (prompt length, hit rate) pair, weighted by the product of probabilities, with the
output-length distribution kept as a second axis. Per class the per-request quantities are
computed once: new and cached tokens, incremental KV bytes, prefill service time, route.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pddplan.evaluate.drc import md_prefix_hit_probability
from pddplan.evaluate.moments import WorkloadMoments, workload_moments
from pddplan.perf.kv import cached_tokens, incremental_kv_bytes, new_tokens, request_kv_bytes
from pddplan.perf.roofline import Instance, prefill_cost
from pddplan.scenario import Scenario
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import Routing
from pddplan.specs.workload import Workload


@dataclass(frozen=True)
class RequestClasses:
    """Input classes (axis 0) and output lengths (axis 1), each with its probabilities (the joint
    probability of a pair is input_prob[i] * output_prob[j]).

    `prefill_s` is a request's own prefill latency (its chunks' engine time alone, `prefill_alone_s`,
    plus the request overhead); `prefill_work_s` the engine time it occupies a busy prefill instance for, when
    chunked prefill packs requests into full steps (`pddplan.perf.roofline.prefill_cost`). `load_s`
    is the time to read its cached KV from a slower cache tier first: it delays its first token
    only (added where TTFT is formed, never to the prefill instance's work)."""

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
    relay: np.ndarray
    output_tokens: np.ndarray
    input_prob: np.ndarray
    output_prob: np.ndarray
    moments: WorkloadMoments
    load_s: np.ndarray

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


def workload_classes(
    workload: Workload,
    model: ModelArchitecture,
    prefill: Instance,
    chunk_tokens: int,
    relay_rule: Routing | None,
) -> RequestClasses:
    """Discretize `workload`; prefill times on `prefill`; relay marks by `relay_rule` (None: no relay).

    When the main decoder's radix cache holds a prefill hit's prefix with probability 0 < q < 1
    (`pddplan.evaluate.drc`), each (prompt, hit) class splits in two: held (probability x q, the
    incremental KV crosses the WAN) and missed (x (1 - q), the whole prompt's KV crosses)."""
    page = workload.serving.page_tokens
    prompt, hit, input_prob = workload.prompt_hit_support()
    load = workload.request_load_s()
    incremental = incremental_kv_bytes(model, prompt, hit, page)
    held = md_prefix_hit_probability(workload.serving)
    if held >= 1:
        wan_bytes = incremental
    elif held <= 0:
        wan_bytes = request_kv_bytes(model, prompt, page)
    else:
        full = request_kv_bytes(model, prompt, page)
        prompt, hit, load = np.concatenate([prompt, prompt]), np.concatenate([hit, hit]), np.concatenate([load, load])
        input_prob = np.concatenate([input_prob * held, input_prob * (1 - held)])
        wan_bytes = np.concatenate([incremental, full])
    fresh = new_tokens(prompt, hit, page)
    cached = cached_tokens(prompt, hit, page)
    relay = relayed(relay_rule, hit, wan_bytes)
    cost = prefill_cost(prefill, fresh, cached, chunk_tokens)
    overhead = prefill.efficiency.request_overhead_s
    outputs, output_probs = workload.output_tokens.support()
    return RequestClasses(
        prompt_tokens=prompt,
        hit=hit,
        new_tokens=fresh,
        cached_tokens=cached,
        wan_bytes=wan_bytes,
        prefill_s=np.where(fresh > 0, cost.alone_s + overhead, 0.0),
        prefill_alone_s=cost.alone_s,
        prefill_work_s=cost.batched_s,
        prefill_attention_s=cost.packed_attention_s,
        chunk_tokens=chunk_tokens,
        relay=relay,
        output_tokens=outputs,
        input_prob=input_prob,
        output_prob=output_probs,
        moments=workload_moments(workload),
        load_s=load,
    )


def with_relay_rule(classes: RequestClasses, relay_rule: Routing | None) -> RequestClasses:
    """`classes` with the relay marks of `relay_rule` (the rest does not depend on the rule)."""
    return replace(classes, relay=relayed(relay_rule, classes.hit, classes.wan_bytes))


def request_classes(scenario: Scenario) -> RequestClasses:
    """The classes of a scenario's workload, with its prefill instance and routing."""
    plan = scenario.plan
    return workload_classes(
        scenario.workload,
        scenario.model,
        scenario.prefill.instance,
        scenario.chunk_tokens,
        scenario.architecture.relay_rule(plan.routing),
    )
