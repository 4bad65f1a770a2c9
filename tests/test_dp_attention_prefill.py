"""Prefill under data-parallel attention: each rank prefills its own requests, up to the chunk
budget each per step, in lockstep steps (`pddplan.perf.roofline.prefill_cost`,
`pddplan.evaluate.prefill_queue`, `pddplan.simulate.prefill`, the SGLang export)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.evaluate.classes import RequestClasses
from pddplan.evaluate.moments import workload_moments
from pddplan.evaluate.prefill_queue import prefill_queue
from pddplan.inputs import load_hardware, load_model, load_workload
from pddplan.perf.roofline import Instance, prefill_cost, rank_linear_step_s, step_time
from pddplan.simulate.prefill import PrefillPool, run_prefill_pool


def dp_instance() -> Instance:
    """DeepSeek-V3.2 on 16 x gpu-a, experts expert-parallel, attention data-parallel (16 ranks)."""
    return Instance(load_model("deepseek-v3.2"), load_hardware("gpu-a"), 16, expert_parallel=True)


def test_the_ranks_prefill_apart_only_under_data_parallel_attention() -> None:
    model, gpu = load_model("deepseek-v3.2"), load_hardware("gpu-a")
    assert dp_instance().attention_ranks == 16
    assert Instance(model, gpu, 16, expert_parallel=True, tp_attention=True).attention_ranks == 1
    assert Instance(model, gpu, 8, expert_parallel=False).attention_ranks == 1


def test_a_lone_rank_step_is_the_lone_sequence_step_and_busy_ranks_add_expert_tokens() -> None:
    """L_1(T) is one sequence's step without attention; L_k(T) is k sequences of T tokens, one per
    rank (each rank's dense layers on T rows, the experts on k T tokens)."""
    instance = dp_instance()
    lone = step_time(instance, 2048.0, 0.0, 1.0)
    assert float(rank_linear_step_s(instance, 1, 2048)) == pytest.approx(lone.total_s - lone.attention_s, rel=1e-12)
    four = step_time(instance, 2048.0, 0.0, 4.0)
    assert float(rank_linear_step_s(instance, 4, 2048)) == pytest.approx(four.total_s - four.attention_s, rel=1e-12)
    steps = rank_linear_step_s(instance, np.arange(1.0, 17.0), 2048.0)
    assert np.all(np.diff(steps) >= -1e-12)  # more busy ranks never shorten a step
    assert steps[-1] > steps[0]


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=15), st.integers(min_value=1, max_value=8192))
def test_one_more_busy_rank_never_shortens_a_step(busy: int, tokens: int) -> None:
    instance = dp_instance()
    assert float(rank_linear_step_s(instance, busy + 1, tokens)) >= float(rank_linear_step_s(instance, busy, tokens))


def test_a_request_with_every_rank_busy_pays_what_the_busy_ranks_add_to_each_chunk() -> None:
    """loaded = alone + sum_j (L_16 - L_1)(size_j); batched = loaded / 16; the chunk steps add up to
    the time alone. 20,000 new tokens in chunks of 8,192: 8,192, 8,192 and 3,616."""
    instance = dp_instance()
    cost = prefill_cost(instance, np.array([20_000.0]), np.array([40_000.0]), 8192)
    added = sum(
        float(rank_linear_step_s(instance, 16, size) - rank_linear_step_s(instance, 1, size))
        for size in (8192, 8192, 3616)
    )
    assert float(cost.loaded_s[0]) == pytest.approx(float(cost.alone_s[0]) + added, rel=1e-12)
    assert float(cost.batched_s[0]) == pytest.approx(float(cost.loaded_s[0]) / 16, rel=1e-12)
    assert cost.chunk_s.shape == (1, 3)
    assert float(cost.chunk_s.sum()) == pytest.approx(float(cost.alone_s[0]), rel=1e-12)


def test_without_data_parallel_attention_nothing_changes() -> None:
    instance = Instance(load_model("qwen3-32b"), load_hardware("h200"), 4)
    cost = prefill_cost(instance, np.array([20_000.0]), np.array([0.0]), 8192)
    assert np.array_equal(cost.loaded_s, cost.alone_s)
    assert float(rank_linear_step_s(instance, 4, 1000)) == float(rank_linear_step_s(instance, 1, 1000))


def _two_classes(ranks: int) -> RequestClasses:
    """Two equally likely requests of one chunk each: 1 s and 3 s alone, 0.5 s more with every
    rank busy."""
    alone = np.array([1.0, 3.0])
    two = np.ones(2)
    return RequestClasses(
        prompt_tokens=1000.0 * two,
        hit=0.0 * two,
        new_tokens=1000.0 * two,
        cached_tokens=0.0 * two,
        wan_bytes=0.0 * two,
        prefill_s=alone,
        prefill_alone_s=alone,
        prefill_work_s=(alone + 0.5) / ranks,
        prefill_attention_s=0.0 * two,
        chunk_tokens=1000,
        prefill_ranks=ranks,
        prefill_loaded_s=alone + 0.5,
        prefill_chunk_s=alone[:, None],
        relay=np.zeros(2, dtype=bool),
        output_tokens=np.array([100.0]),
        input_prob=0.5 * two,
        output_prob=np.array([1.0]),
        moments=workload_moments(load_workload("pdd-agent-64k")),
        load_s=0.0 * two,
        md_load_s=0.0 * two,
    )


def test_the_rank_queue_by_hand() -> None:
    """r = 2 ranks, one instance, 0.2 req/s. The other rank is busy with probability rho, then
    with the 1 s or the 3 s step (each half the steps): the 1 s request's step stretches by
    rho * 0.5 * (3 - 1) = rho, the 3 s one's by nothing. W = (1 + 0.5 rho + rho, 3 + 0.5 rho),
    E[W] = 2 + rho, rho = 0.2 E[W] / 2: rho = 0.2 / 0.9. A request also waits for the step to end
    when the instance is busy (1 - (1 - rho)^2): the longest busy rank's step S is 3 s unless every
    busy rank runs a 1 s one, E[S^2] / (2 E[S])."""
    classes = _two_classes(2)
    queue = prefill_queue(classes, 1.0, 0.2, 1.0)
    rho = 0.2 / 0.9
    assert float(queue.utilization) == pytest.approx(rho, rel=1e-9)
    busy = 1.0 - (1.0 - rho) ** 2
    short_only = ((1.0 - rho + 0.5 * rho) ** 2 - (1.0 - rho) ** 2) / busy  # P(S = 1 | busy)
    mean_s = short_only * 1.0 + (1.0 - short_only) * 3.0
    second = short_only * 1.0 + (1.0 - short_only) * 9.0
    join = busy * second / (2.0 * mean_s)
    assert queue.own_extra_s == pytest.approx([1.5 * rho + join, 0.5 * rho + join], rel=1e-9)
    assert float(queue.work_s) == pytest.approx(2.0 + rho, rel=1e-9)
    assert float(queue.busy_share) == pytest.approx(busy, rel=1e-9)
    # one chunk each: the other rank's chunk ends with the step, leaving it no work for the next
    assert float(queue.work_left_share) == 0.0


def test_the_rank_queue_saturates_where_every_rank_is_busy() -> None:
    """Past c r / E[L] (2 ranks, E[L] = 2.5 s: 0.8 req/s) the pool cannot keep up."""
    classes = _two_classes(2)
    queue = prefill_queue(classes, 1.0, 0.81, 1.0)
    assert float(queue.utilization) >= 1.0 - 1e-9
    assert math.isinf(float(queue.wait_mean_s)) or float(queue.p_wait) >= 1.0 - 1e-9


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=0.01, max_value=0.7))
def test_more_traffic_never_shortens_a_request_s_own_prefill(rate: float) -> None:
    classes = _two_classes(4)
    low, high = prefill_queue(classes, 1.0, rate, 1.0), prefill_queue(classes, 1.0, rate * 1.1, 1.0)
    assert np.all(high.own_extra_s >= low.own_extra_s - 1e-12)
    assert float(high.utilization) >= float(low.utilization)


def test_the_lockstep_pool_by_hand() -> None:
    """Two ranks, chunk 4, L(k, T) = k + T, no attention. At 0 two requests of 8 and 4 tokens start
    on the two ranks: a step of 4 + 4 tokens, L(2, 4) = 6. A third of 2 tokens arrives at 1 and joins
    at the step's end, beside the first's second chunk: pieces 4 and 2, k' = 6 / 4 = 1.5 busy ranks,
    L = L(1, 4) + 0.5 (L(2, 4) - L(1, 4)) = 5.5: both end at 11.5."""
    table = [[float(1 + t) for t in range(5)], [float(2 + t) for t in range(5)]]
    pool = PrefillPool(instances=1, chunk_tokens=4, linear_s=table[-1], ranks=2, rank_linear_s=table)
    run = run_prefill_pool(pool, np.array([0.0, 0.0, 1.0]), np.array([8.0, 4.0, 2.0]), np.zeros(3))
    assert run.start_s.tolist() == [0.0, 0.0, 6.0]
    assert run.end_s.tolist() == [11.5, 6.0, 11.5]
    assert run.steps[0] == ([0.0, 6.0], [6.0, 11.5])
    assert run.busy_s == pytest.approx(6.0 * 2 / 2 + 5.5 * 2 / 2)  # rank-seconds over the ranks


def test_a_third_request_waits_for_a_free_rank() -> None:
    """Both ranks busy with 8-token requests (two steps each): one of 4 tokens arriving at 0 starts
    at the second step's end. L(k, T) = k + T: steps of 6, 6, then 5."""
    table = [[float(1 + t) for t in range(5)], [float(2 + t) for t in range(5)]]
    pool = PrefillPool(instances=1, chunk_tokens=4, linear_s=table[-1], ranks=2, rank_linear_s=table)
    run = run_prefill_pool(pool, np.array([0.0, 0.0, 0.0]), np.array([8.0, 8.0, 4.0]), np.zeros(3))
    assert run.start_s.tolist() == [0.0, 0.0, 12.0]
    assert run.end_s.tolist() == [12.0, 12.0, 17.0]


def test_estimate_reports_a_prefill_beside_busy_ranks(cli: Any) -> None:
    """`estimate --json` under data-parallel attention: the prefill with every rank busy (prefill_cost's
    loaded_s) and its share of the instance (loaded / 16); neither rank figure without it."""
    args = ("estimate", "--model", "deepseek-v3.2", "--gpu", "gpu-a", "--tp", "16", "--prefill", "20000")
    out = json.loads(cli(*args, "--cached", "40000", "--chunk", "8192", "--json").stdout)
    cost = prefill_cost(dp_instance(), np.array([20_000.0]), np.array([40_000.0]), 8192)
    assert out["loaded_prefill_s"] == pytest.approx(float(cost.loaded_s[0]), rel=1e-12)
    assert out["packed_prefill_s"] == pytest.approx(out["loaded_prefill_s"] / 16, rel=1e-12)
    assert out["loaded_prefill_s"] > out["prefill_s"]
    plain = json.loads(
        cli("estimate", "--model", "qwen3-32b", "--gpu", "h200", "--tp", "4", "--prefill", "8192", "--json").stdout
    )
    assert "loaded_prefill_s" not in plain


def test_a_pool_with_nothing_to_prefill_waits_for_nothing() -> None:
    """Every prompt wholly cached: no chunk, no stretch, no join, no wait."""
    classes = _two_classes(2)
    none = replace(
        classes,
        new_tokens=0.0 * classes.new_tokens,
        prefill_alone_s=0.0 * classes.prefill_alone_s,
        prefill_loaded_s=0.0 * classes.prefill_loaded_s,
        prefill_chunk_s=0.0 * classes.prefill_chunk_s,
    )
    queue = prefill_queue(none, 1.0, 2.0, 1.0)
    assert float(queue.utilization) == 0.0 and np.all(queue.own_extra_s == 0.0)


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([1, 4]),
    st.lists(st.tuples(st.integers(1, 4), st.floats(0.01, 2.0) | st.just(math.inf)), min_size=1, max_size=6),
    st.lists(st.integers(0, 5), min_size=1, max_size=20),
)
def test_a_pool_asked_twice_at_one_rate_gets_one_answer(
    ranks: int, pairs: list[tuple[int, float]], picks: list[int]
) -> None:
    """`prefill_queue` computes each distinct (count, rate) pair once: asked with repeats (in any
    order, any shape) it gives, to the last bit, what the same distinct pairs give alone, and each
    pair what it gives asked by itself (to 1e-9: the root searches stop when every pair asked
    together has converged)."""
    classes = _two_classes(ranks)
    distinct = sorted(set(pairs))
    chosen = [distinct[k % len(distinct)] for k in picks] + distinct[::-1]  # every pair, some repeated
    count, rate = np.array([c for c, _ in chosen], dtype=float), np.array([r for _, r in chosen])
    asked = prefill_queue(classes, count.reshape(-1, 1), rate.reshape(-1, 1), 1.0)
    alone = prefill_queue(classes, np.array([c for c, _ in distinct], float), np.array([r for _, r in distinct]), 1.0)
    index = [distinct.index(pair) for pair in chosen]
    assert asked.p_wait.shape == (len(chosen), 1)
    assert asked.own_extra_s.shape == (len(chosen), 1, 2)
    for name in ("p_wait", "wait_mean_s", "work_s", "utilization", "busy_share", "loaded_share", "work_left_share"):
        assert np.array_equal(getattr(asked, name).ravel(), getattr(alone, name)[index], equal_nan=True), name
    assert np.array_equal(asked.own_extra_s.reshape(len(chosen), 2), alone.own_extra_s[index], equal_nan=True)
    for k, (c, r) in enumerate(distinct):
        single = prefill_queue(classes, float(c), r, 1.0)
        assert float(single.work_s) == pytest.approx(float(alone.work_s[k]), rel=1e-9)
