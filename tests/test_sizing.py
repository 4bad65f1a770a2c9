"""`pddplan.optimize.sizing`: the fast sizer's plans and capacity views.

`size_plan(workload, choose_shape(...))` must return a plan whose `view` is exactly the capacity
view `evaluate` reports for that plan, with minimal counts: one instance fewer of any role makes
that role's capacity fall below the workload's rate.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from pddplan.errors import InfeasibleError
from pddplan.evaluate.capacity import WAN_MAX_UTILIZATION, decoder_capacity
from pddplan.evaluate.capacity_view import capacity_view
from pddplan.evaluate.classes import request_classes
from pddplan.evaluate.moments import workload_moments
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.candidates import instance_candidates
from pddplan.optimize.search import OptimizeOptions, optimize_architecture
from pddplan.optimize.sizing import SizedPlan, choose_shape, relay_on_prefill_if_cheaper, size_counts, size_plan
from pddplan.scenarios import build_scenario
from pddplan.specs.plan import Plan

CASES = [
    ("pdd-agent-64k", "pd-intra"),
    ("pdd-agent-64k", "pdd"),
    ("chat-short-lowhit", "pd-intra"),
    ("chat-short-lowhit", "pdd"),
]
ROLES = ("prefill", "decode", "relay")


@pytest.fixture(scope="module")
def shapes() -> dict[tuple[str, str], Any]:
    return {
        (name, arch): choose_shape(load_input_set(load_workload(name), workload_dir(name)), arch)
        for name, arch in CASES
    }


@pytest.fixture(scope="module")
def sized(shapes: dict[tuple[str, str], Any]) -> dict[tuple[str, str], tuple[Any, SizedPlan]]:
    out = {}
    for name, arch in CASES:
        workload = load_workload(name)
        out[(name, arch)] = (workload, size_plan(workload, shapes[(name, arch)]))
    return out


def view_of(plan: Plan, workload: Any, name: str) -> Any:
    return capacity_view(build_scenario(plan, load_input_set(workload, workload_dir(name))))


# Sizing and the capacity view run the same capacity functions on separately assembled inputs, so
# they agree to rounding, not bit for bit: 1e-9 relative is far below any figure a user reads.
VIEW_RTOL = 1e-9


@pytest.mark.parametrize(("name", "arch"), CASES)
def test_view_equals_capacity_view_of_the_plan(sized: Any, name: str, arch: str) -> None:
    workload, result = sized[(name, arch)]
    assert result.plan.architecture == arch
    mine, theirs = result.view.to_output().json_data(), view_of(result.plan, workload, name).to_output().json_data()
    assert mine.keys() == theirs.keys()
    assert mine["bottleneck"] == theirs["bottleneck"]
    assert mine["per_instance_rps"].keys() == theirs["per_instance_rps"].keys()
    for role, rate in mine["per_instance_rps"].items():
        assert math.isclose(rate, theirs["per_instance_rps"][role], rel_tol=VIEW_RTOL), role
    for key, value in mine.items():
        if isinstance(value, float):
            assert math.isclose(value, theirs[key], rel_tol=VIEW_RTOL, abs_tol=1e-12), key


@pytest.mark.parametrize(("name", "arch"), CASES)
def test_sized_plan_carries_the_rate(sized: Any, name: str, arch: str) -> None:
    workload, result = sized[(name, arch)]
    rate = workload.arrival.rate_rps
    view = result.view
    assert view.max_rate_rps >= rate * (1 - 1e-9), view
    for role in ROLES:
        spec = getattr(result.plan, role)
        if spec is None:
            assert role not in view.per_instance_rps
            continue
        assert spec.count * view.per_instance_rps[role] >= rate * (1 - 1e-9), role


@pytest.mark.parametrize(("name", "arch"), CASES)
@pytest.mark.parametrize("role", ROLES)
def test_counts_are_minimal(sized: Any, name: str, arch: str, role: str) -> None:
    workload, result = sized[(name, arch)]
    spec = getattr(result.plan, role)
    if spec is None:
        assert arch != "pdd" and role == "relay"
        return
    rate = workload.arrival.rate_rps
    if spec.count == 1:
        return  # zero instances carry nothing
    smaller = result.plan.model_copy(update={role: spec.model_copy(update={"count": spec.count - 1})})
    view = view_of(smaller, workload, name)
    assert (spec.count - 1) * view.per_instance_rps[role] < rate, (role, spec.count, view.per_instance_rps)


def test_pd_cross_sizing_reports_the_ttft_wall() -> None:
    """Cross-datacenter PD sends every request's incremental KV over the WAN before the first
    token: no prefill pool of any kind meets chat-short-lowhit's TTFT targets (the optimizer
    agrees), nor pdd-agent-64k's, where the cheapest kind per request/s is TP16 and no wider one
    prefills a lone request faster (its attention and dense layers stay on one rank, or its
    all-reduces cross more of the NIC): sizing reports the first kind's error. Where some kinds'
    own prefill misses the SLA, the chosen kind is one that meets it, its pool no dearer than any
    other kind's that does: pdd-agent-64k's traffic on gpt-oss-120b (one GPU-A holds it) under a
    TTFT SLA of 4.6 s / 9.2 s, which one GPU prefilling a lone 64K prompt cannot meet and a wider
    instance can."""
    workload = load_workload("chat-short-lowhit")
    shape = choose_shape(load_input_set(workload, workload_dir("chat-short-lowhit")), "pd-cross")
    with pytest.raises(InfeasibleError, match="TTFT"):
        size_plan(workload, shape)
    agent = load_workload("pdd-agent-64k")
    shape = choose_shape(load_input_set(agent, workload_dir("pdd-agent-64k")), "pd-cross")
    assert shape.prefill.tp == 16 and shape.prefill_fallbacks
    with pytest.raises(InfeasibleError, match=f"{shape.prefill.key} meets the TTFT SLA"):
        size_plan(agent, shape)
    sla = agent.sla.model_copy(update={"ttft_p90_s": 4.6, "ttft_p99_s": 9.2})
    small = agent.model_copy(update={"model": "gpt-oss-120b", "sla": sla})
    shape = choose_shape(load_input_set(small, workload_dir("pdd-agent-64k")), "pd-cross")
    chosen = size_counts(small, shape).plan.prefill
    assert chosen.tp > 1
    for kind in shape.prefill_fallbacks:
        try:
            other = size_counts(small, replace(shape, prefill=kind)).plan.prefill
        except InfeasibleError as error:
            assert "TTFT" in str(error)
            continue
        assert other.count * kind.usd_per_hour >= chosen.count * shape.prefill.usd_per_hour - 1e-9
    lone = next(kind for kind in shape.prefill_fallbacks if kind.tp == 1)
    with pytest.raises(InfeasibleError, match="TTFT"):
        size_counts(small, replace(shape, prefill=lone))


@pytest.mark.parametrize(("name", "arch"), [c for c in CASES if c[1] == "pdd"])
def test_pdd_line_is_the_cheapest_that_carries_the_bytes(shapes: Any, sized: Any, name: str, arch: str) -> None:
    """0.9 * E[available capacity] >= rate * E[incremental KV bytes], and no cheaper pool of the
    shape's direction does that."""
    workload, result = sized[(name, arch)]
    scenario = build_scenario(result.plan, load_input_set(workload, workload_dir(name)))
    assert scenario.link is not None
    classes = request_classes(scenario)
    need = workload.arrival.rate_rps * float(classes.wan_bytes @ classes.input_prob)

    def carries(pool: Any) -> bool:
        return WAN_MAX_UTILIZATION * pool.mean_capacity_bytes_per_s() >= need

    assert carries(scenario.link)
    shape = shapes[(name, arch)]
    for pool in shape.line_options or (shape.line,):
        if pool.usd_per_hour < scenario.link.usd_per_hour - 1e-9:
            assert not carries(pool), pool.key
    assert result.plan.relay is not None
    assert result.plan.relay.datacenter == result.plan.prefill.datacenter == workload.deployment.home


def test_sizing_matches_the_program_on_pdd_agent() -> None:
    """The sizer picks each role's kind by the cost of its smallest pool carrying the rate, the
    program by the whole count (unverified: pd-intra one TP16 EP prefill instance with
    data-parallel attention and one TP32 decoder, 48 GPU-A; pdd 16 GPU-A and 16 GPU-B with the
    relay on the prefill instances): the program's plan is never dearer than the sizer's, here
    they cost the same (picking by $ per request/s alone took TP16 prefill under tensor-parallel
    attention and a TP64 decoder: pd-intra at 2.3 and pdd at 3.4 times the program's cost), and
    given the program's kinds (layouts included) the sizer picks the program's counts."""
    workload = load_workload("pdd-agent-64k")
    inputs = load_input_set(workload, workload_dir("pdd-agent-64k"))
    kinds = instance_candidates(inputs, workload.serving.chunk_tokens)
    moments = workload_moments(workload)
    for arch in ("pd-intra", "pdd"):
        shape = choose_shape(inputs, arch)
        sized_plan = size_plan(workload, shape).plan
        result = optimize_architecture(inputs, arch, OptimizeOptions(verify=False))
        assert result.plan is not None and result.scenario is not None
        sized_cost = build_scenario(relay_on_prefill_if_cheaper(size_plan(workload, shape), inputs).plan, inputs)
        assert result.scenario.cost_per_hour <= sized_cost.cost_per_hour * (1 + 1e-9), arch
        assert sized_cost.cost_per_hour == pytest.approx(result.scenario.cost_per_hour, rel=1e-9), arch
        if arch != "pd-intra":
            continue
        program = result.plan
        assert program.relay is None and sized_plan.relay is None

        def kind_of(spec: Any) -> Any:  # the candidate a role was sized from: datacenter, GPU, width, layout
            return next(c for c in kinds if c.role(spec.count) == spec)

        decode = kind_of(program.decode)
        same_kinds = replace(
            shape,
            prefill=kind_of(program.prefill),
            decode=decoder_capacity(decode, workload, inputs.model, moments.context_tokens, moments.output_tokens),
        )
        resized = size_counts(workload, same_kinds).plan
        for role in ("prefill", "decode"):
            assert getattr(resized, role) == getattr(program, role), (arch, role)
        assert resized.wan == program.wan == sized_plan.wan


# -- the capacity functions sizing and the program share (pddplan.evaluate.capacity) ----------------------
@pytest.fixture(scope="module")
def agent_setup() -> Any:
    from pddplan.optimize.problem import build_setup

    workload = load_workload("pdd-agent-64k")
    return build_setup(load_input_set(workload, workload_dir("pdd-agent-64k")), "pdd", workload.arrival.rate_rps)


@pytest.mark.parametrize("slots", [1, 2, 8, 64, 256])
def test_slot_utilization_is_the_largest_with_5_percent_wait(slots: int) -> None:
    from pddplan.evaluate.capacity import SLOT_WAIT_PROBABILITY, slot_utilization
    from pddplan.evaluate.queueing import erlang_c

    u = slot_utilization(slots)
    assert 0 < u < 1
    assert float(erlang_c(slots, u * slots)) <= SLOT_WAIT_PROBABILITY
    assert float(erlang_c(slots, (u + 0.001) * slots)) > SLOT_WAIT_PROBABILITY
    if slots > 1:
        assert u >= slot_utilization(slots // 2)  # pooling: more slots run fuller


def test_decoder_capacity_is_the_largest_batch_within_tpot_and_memory(agent_setup: Any) -> None:
    from pddplan.evaluate.capacity import decoder_capacity, slot_utilization
    from pddplan.perf import decode_step_time
    from pddplan.perf.kv import request_kv_bytes

    workload, model = agent_setup.workload, agent_setup.model
    context, mean_output = agent_setup.moments.context_tokens, agent_setup.moments.output_tokens
    tpot = workload.sla.tpot_p90_s
    layouts = set()
    for cand in agent_setup.candidates:
        cap = decoder_capacity(cand, workload, model, context, mean_output)
        per_sequence = float(request_kv_bytes(model, context, workload.serving.page_tokens))
        # data-parallel attention: a sequence lives on one of the tp ranks; tensor-parallel attention
        # (TP throughout, or EP under tp-attention) shards every sequence over all of them
        pools = cand.instance.kv_pools
        assert pools == (cand.tp if cand.instance.uses_dp_attention else 1)
        layouts.add((cand.instance.uses_ep, cand.tp_attention))
        by_memory = pools * int(cand.kv_capacity_bytes / pools // per_sequence)
        assert cap.usable
        assert cap.batch <= min(workload.serving.decode_batch_limit, by_memory)
        # the bytes the optimizer may fill: less what whole sequences per rank cannot use, but at least
        # the whole sequences that do fit
        lossy = cand.kv_capacity_bytes - (pools - 1) * per_sequence
        assert cap.memory_bytes == pytest.approx(max(lossy, by_memory * per_sequence), rel=1e-12)
        assert cap.step_s == pytest.approx(float(decode_step_time(cand.instance, float(cap.batch), context)))
        assert cap.step_s <= tpot
        if cap.batch < min(workload.serving.decode_batch_limit, by_memory):
            assert float(decode_step_time(cand.instance, float(cap.batch + 1), context)) > tpot
        assert cap.occupancy == pytest.approx(slot_utilization(cap.batch) * cap.batch)
        assert cap.requests_per_s == pytest.approx(cap.occupancy / (cap.step_s * mean_output))
        # pooled over four instances, the slots may run fuller (Erlang C on 4 B* servers)
        four = decoder_capacity(cand, workload, model, context, mean_output, 4)
        assert four.occupancy == pytest.approx(slot_utilization(4 * cap.batch) * cap.batch, rel=1e-12)
        assert four.requests_per_s >= cap.requests_per_s
        running = 100.0 * cap.step_s * cap.sequence_bytes
        assert cap.running_bytes_per_rps(100.0) == pytest.approx(running)
        # HBM carries the running sequences; HBM and the tiers below carry them and the cache
        both = (cap.memory_bytes + cap.lower_tier_bytes) / (running + 5.0)
        assert cap.memory_rate(100.0, 5.0) == pytest.approx(min(cap.memory_bytes / running, both))
        strict = workload.model_copy(update={"sla": workload.sla.model_copy(update={"tpot_p90_s": cap.step_s / 1000})})
        assert not decoder_capacity(cand, strict, model, context, mean_output).usable
    assert layouts == {(False, False), (True, False), (True, True)}  # TP, EP with DP attention, EP + tp-attention


def test_path_load_per_architecture(agent_setup: Any) -> None:
    from pddplan import architectures
    from pddplan.evaluate.capacity import RDMA_PATH, WAN_MAX_UTILIZATION, Downstream, decoder_capacity, path_load
    from pddplan.evaluate.classes import workload_classes
    from pddplan.specs.plan import Handoff, Routing

    workload, model = agent_setup.workload, agent_setup.model
    moments = agent_setup.moments
    cand = agent_setup.candidates[0]
    cap = decoder_capacity(cand, workload, model, moments.context_tokens, moments.output_tokens)
    rule = Routing(kind="hit", hit_threshold=0.9)
    classes = workload_classes(workload, model, cand.instance, agent_setup.chunk, rule)
    line = min(agent_setup.lines, key=lambda pool: pool.capacity_bytes_per_s)

    def load(name: str, over: Any, mode: str = "adaptive") -> Any:
        handoff = Handoff(mode=mode)  # type: ignore[arg-type]
        downstream = Downstream(architectures.get(name), over, cap.step_s, cap.step_s)
        return path_load(downstream, classes, 4.0, [cand.instance], handoff)

    for name in architectures.names():  # over RDMA every architecture's path costs nothing extra
        if not architectures.get(name).uses_wan:
            rdma = load(name, None)
            assert rdma == RDMA_PATH, name
            assert (rdma.line, rdma.wan_bytes_per_request, rdma.md_load_fraction, rdma.relay_hold_s) == (None, 0, 1, 0)
            assert rdma.max_rate == float("inf")
    cross = load("pd-cross", line)
    wan_bytes = float(classes.wan_bytes @ classes.input_prob)
    assert cross.wan_bytes_per_request == pytest.approx(wan_bytes)
    assert cross.md_load_fraction == 1.0 and cross.relay_hold_s == 0.0
    assert cross.max_rate == pytest.approx(WAN_MAX_UTILIZATION * line.mean_capacity_bytes_per_s() / wan_bytes)
    pdd = load("pdd", line)
    assert pdd.max_rate == cross.max_rate
    assert 0 < pdd.md_load_fraction < 1  # the relay's eager tokens take work off the main decoder
    assert pdd.relay_hold_s > 0
    one_shot = load("pdd", line, "one-shot")
    catch_up = load("pdd", line, "catch-up")
    # catch-up holds the relay for the window plus the catch-up rounds, one-shot releases it after
    # the window; capacities size adaptive as catch-up (its choice at an idle relay)
    assert 0 < one_shot.relay_hold_s < catch_up.relay_hold_s
    assert pdd.relay_hold_s == pytest.approx(catch_up.relay_hold_s, rel=1e-12)
    assert pdd.md_load_fraction == pytest.approx(catch_up.md_load_fraction, rel=1e-12)


def test_prefill_capacity_grows_with_the_pool_and_meets_the_ttft_targets(agent_setup: Any) -> None:
    from pddplan.evaluate.capacity import Downstream, prefill_capacity

    workload = agent_setup.workload
    cand, cap, classes = agent_capacities(agent_setup)
    line = max(agent_setup.lines, key=lambda pool: pool.capacity_bytes_per_s)
    sizes = np.arange(1, 9)

    def caps(scale: float, ceiling: float = 1e9) -> np.ndarray:
        downstream = Downstream(agent_setup.architecture, line, cap.step_s, cap.step_s)
        return prefill_capacity(cand, classes, downstream, workload, sizes, ceiling, scale)

    full = caps(1.0)
    packed_s = float(classes.prefill_work_s @ classes.input_prob)
    assert (full > 0).all()
    assert (np.diff(full) >= -1e-9).all(), full
    assert (full <= sizes / packed_s).all()  # below the pool's service capacity, fully packed
    assert (caps(0.7) <= full + 1e-9).all()  # tighter targets, less capacity
    assert (caps(1.0, ceiling=1.0) <= 1.0 + 1e-12).all()


def test_pool_size_estimate_is_the_fewest_instances_at_full_fill() -> None:
    """floor(rate E[O] tau / B*), at least 1: 4 req/s x 1,000 tokens x 50 ms / 48 slots = 4.17 -> 4."""
    from pddplan.evaluate.capacity import pool_size_estimate

    assert pool_size_estimate(4.0, 48, 0.05, 1000.0) == 4
    assert pool_size_estimate(0.01, 48, 0.05, 1000.0) == 1
    assert pool_size_estimate(4.0, 0, 0.05, 1000.0) == 1
    assert pool_size_estimate(4.0, 48, math.inf, 1000.0) == 1


def agent_capacities(agent_setup: Any) -> tuple[Any, Any, Any]:
    """(the first prefill candidate, its decoder capacity, its request classes under `hit < 0.9`)."""
    from pddplan.evaluate.capacity import decoder_capacity
    from pddplan.evaluate.classes import workload_classes
    from pddplan.specs.plan import Routing

    workload, model, moments = agent_setup.workload, agent_setup.model, agent_setup.moments
    cand = agent_setup.candidates[0]
    cap = decoder_capacity(cand, workload, model, moments.context_tokens, moments.output_tokens)
    rule = Routing(kind="hit", hit_threshold=0.9)
    return cand, cap, workload_classes(workload, model, cand.instance, agent_setup.chunk, rule)


def test_prefill_capacity_by_line_is_prefill_capacity_on_each_line(agent_setup: Any) -> None:
    """Searching every (line, pool size) pair at once gives each line's own search, to 1e-9 of the
    rate (the same bisection brackets; only summation order may differ), and a wider line never
    carries less (more bandwidth never slows a transfer) beyond the search's resolution: each
    line's bracket starts at its own ceiling, which the grid resolves to 5^-6 of it (GRID_POINTS,
    GRID_ROUNDS), so two lines' answers may cross by that much."""
    from pddplan.evaluate.capacity import (
        GRID_POINTS,
        GRID_ROUNDS,
        Downstream,
        prefill_capacity,
        prefill_capacity_by_line,
    )

    workload = agent_setup.workload
    cand, cap, classes = agent_capacities(agent_setup)
    lines = sorted(agent_setup.lines, key=lambda pool: pool.capacity_bytes_per_s)[:6]
    sizes = np.arange(1, 7)
    downstreams = [Downstream(agent_setup.architecture, line, cap.step_s, cap.step_s) for line in lines]
    together = prefill_capacity_by_line(cand, classes, downstreams, workload, sizes, 50.0, 1.0)
    assert together.shape == (len(lines), len(sizes))
    for row, downstream in zip(together, downstreams, strict=True):
        alone = prefill_capacity(cand, classes, downstream, workload, sizes, 50.0, 1.0)
        np.testing.assert_allclose(row, alone, rtol=1e-9, atol=1e-12)
    resolution = 50.0 / (GRID_POINTS + 1) ** GRID_ROUNDS  # of the highest ceiling, the rate ceiling
    assert (np.diff(together, axis=0) >= -resolution).all(), together
    assert together.max() > 0


def test_sizes_not_searched_are_filled_in_without_overstating() -> None:
    """Hand-computed: sizes 1..4 with 1 and 3 searched (capacities 2 and 9 req/s): per instance,
    size 2 gets 2 x 2/1 = 4 and size 4 gets 4 x 9/3 = 12, capped at its ceiling 11; behind a shared
    line only cap(m) itself: 2 and 9. Sizes outside `reach` keep what they had."""
    from pddplan.evaluate.capacity import _filled_in

    sizes = np.arange(1.0, 5.0)
    caps = np.array([2.0, 0.0, 9.0, 0.0])
    searched = np.array([True, False, True, False])
    ceiling = np.array([50.0, 50.0, 50.0, 11.0])
    every = np.ones(4, dtype=bool)
    np.testing.assert_allclose(_filled_in(sizes, caps, searched, every, ceiling), [2.0, 4.0, 9.0, 11.0])
    shared = _filled_in(sizes, caps, searched, every, ceiling, per_instance=False)
    np.testing.assert_allclose(shared, [2.0, 2.0, 9.0, 9.0])
    reach = np.array([True, False, True, True])
    np.testing.assert_allclose(_filled_in(sizes, caps, searched, reach, ceiling), [2.0, 0.0, 9.0, 11.0])


def test_large_prefill_pools_searched_at_sampled_sizes_never_overstate(agent_setup: Any) -> None:
    """Above EXACT_SIZES the capacity is searched about every 5% of pool size and filled in between:
    each filled-in size carries at most what its own search finds (to the grid's resolution), over
    RDMA (per-instance scaling) and over a WAN line (the smaller size's rate)."""
    from pddplan.evaluate.capacity import EXACT_SIZES, GRID_POINTS, GRID_ROUNDS, Downstream, prefill_capacity_by_line

    workload = agent_setup.workload
    cand, cap, classes = agent_capacities(agent_setup)
    line = max(agent_setup.lines, key=lambda pool: pool.capacity_bytes_per_s)
    downstreams = [Downstream(agent_setup.architecture, path, cap.step_s, cap.step_s) for path in (None, line)]
    sizes = np.arange(EXACT_SIZES - 1, EXACT_SIZES + 6)  # 33 and 34 lie between the sampled 32 and 35
    ceiling = 1e4
    filled = prefill_capacity_by_line(cand, classes, downstreams, workload, sizes, ceiling, 1.0)
    resolution = ceiling / (GRID_POINTS + 1) ** GRID_ROUNDS
    for row, downstream in zip(filled, downstreams, strict=True):
        for n, rate in zip(sizes, row, strict=True):
            own = prefill_capacity_by_line(cand, classes, [downstream], workload, np.array([n]), ceiling, 1.0)
            assert rate <= own[0, 0] + resolution, (n, rate, own)
        assert (np.diff(row) >= -resolution).all(), row


@pytest.mark.parametrize("name", ["pdd-agent-64k-hetero", "pdd-agent-64k"])
def test_every_prefill_kind_of_a_shape_pairs_with_its_decoder(name: str) -> None:
    """The prefill kind is now chosen after the decoder: it and each fallback must be a GPU type the
    architecture lets the decoder pair with (pd-intra the same, pd-hetero another)."""
    workload = load_workload(name)
    inputs = load_input_set(workload, workload_dir(name))
    for arch in ("pd-intra", "pd-hetero", "pdd"):
        try:
            shape = choose_shape(inputs, arch)
        except InfeasibleError:
            continue
        assert shape.decode is not None
        for kind in (shape.prefill, *shape.prefill_fallbacks):
            assert shape.architecture.decode_gpu_allowed(kind.gpu, shape.decode.candidate.gpu), (arch, kind.key)
