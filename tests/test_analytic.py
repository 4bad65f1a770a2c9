"""The closed-form evaluator (pddplan.evaluate.analytic, pddplan.evaluate.classes).

Hand checks on deterministic workloads (one prompt length, a hit bucket 0.0001 wide, one output
length), where TTFT is a fixed sum of stage times plus a prefill wait of known form; then the
money (cost, revenue, BCR), the WAN figures, the relay figures, instability, and monotonicity in
rate, decode instances and lines.
"""

from __future__ import annotations

import copy
import math
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pddplan.cache.sessions import CacheKind
from pddplan.errors import InputError
from pddplan.evaluate.analytic import _weighted_quantiles, decoder_max_batch, evaluate
from pddplan.evaluate.classes import request_classes
from pddplan.evaluate.verdict import revenue_per_request
from pddplan.inputs.input_set import load_input_set
from pddplan.net.fluctuation import mean_fraction
from pddplan.perf.kv import incremental_kv_bytes, new_tokens, request_kv_bytes
from pddplan.perf.roofline import decode_step_time, linear_step_s, prefill_cost, prefill_time
from pddplan.scenarios.scenario import Scenario, build_scenario
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Workload
from pddplan.support.loading import validate

PLANS = Path(__file__).resolve().parent / "data" / "plans"
BASE_WORKLOAD: dict[str, Any] = yaml.safe_load((PLANS / "small-workload.yaml").read_text(encoding="utf-8"))

# Bisection in mixture_quantiles stops at 1 ms or 0.1% (whichever is larger).
QUANTILE_TOL = 1.1e-3


def near(expected: float) -> Any:
    """pytest.approx with the quantile bisection's tolerance."""
    return pytest.approx(expected, abs=QUANTILE_TOL, rel=QUANTILE_TOL)


def slack(value: float) -> float:
    """How far two bisected quantiles of the same true value may differ."""
    return 2 * QUANTILE_TOL * max(1.0, value)


# One request kind. Its sessions return within a millisecond (turn_gap_s), so the prefix caches
# hold next to nothing and find every prefix: the stage sums below are the step times' alone
# (tests/test_prefix_caches.py prices the caches).
DETERMINISTIC = {
    "prompt_tokens": {"kind": "fixed", "tokens": 8192},
    "output_tokens": {"kind": "fixed", "tokens": 200},
    "hit_rate": {"buckets": [{"low": 0.5, "high": 0.5001, "share": 1.0}]},
    "serving": {**BASE_WORKLOAD["serving"], "turn_gap_s": 1e-3},
}


def workload(**changes: Any) -> Workload:
    data = copy.deepcopy(BASE_WORKLOAD)
    data.update(copy.deepcopy(changes))
    return validate(Workload, data, "workload.yaml")


def plan_data(name: str, **changes: Any) -> dict[str, Any]:
    data = yaml.safe_load((PLANS / f"{name}.yaml").read_text(encoding="utf-8"))
    data.update(copy.deepcopy(changes))
    return data


def scenario(plan: dict[str, Any], w: Workload | None = None) -> Scenario:
    return build_scenario(validate(Plan, plan, "plan.yaml"), load_input_set(w or workload(), PLANS))


# -- hand checks on a deterministic workload ------------------------------------------------------------


def test_pd_intra_ttft_is_the_sum_of_its_stages_at_low_load() -> None:
    """TTFT = prefill S + RDMA (full KV / (tp NIC) + 24.5 ms) + one decode step, with no waiting."""
    s = scenario(plan_data("small-pd-intra", rate_rps=0.001), workload(**DETERMINISTIC))
    result = evaluate(s)
    prefill_s = float(prefill_time(s.prefill.instance, 4096, 4096, 8192))
    full_kv = float(request_kv_bytes(s.model, 8192, 64))
    rdma = full_kv / (1 * s.prefill.instance.hardware.nic_bytes_per_s) + 0.0245
    tau = float(decode_step_time(s.decode.instance, 1.0, 8192 + 100))
    expected = prefill_s + rdma + tau
    for value in (result.ttft.p50_s, result.ttft.p90_s):
        assert value == near(expected)
    assert result.tpot.p50_s == pytest.approx(tau, rel=1e-9)
    assert result.sla_met
    assert result.goodput_rps == pytest.approx(0.001)


def test_pd_cross_ttft_adds_the_wan_transfer() -> None:
    """TTFT = S + RTT/2 + x / min(F, C - L) + one decode step; x the incremental KV (half the prompt)."""
    s = scenario(plan_data("small-pd-cross", rate_rps=0.001), workload(**DETERMINISTIC))
    result = evaluate(s)
    assert s.link is not None
    x = float(incremental_kv_bytes(s.model, 8192, 0.50005, 64))
    assert x == pytest.approx(float(request_kv_bytes(s.model, 4096, 64)))
    load = 0.001 * x
    rate = min(s.link.flow_cap_bytes_per_s, s.link.capacity_bytes_per_s - load)
    prefill_s = float(prefill_time(s.prefill.instance, 4096, 4096, 8192))
    tau = float(decode_step_time(s.decode.instance, 1.0, 8192 + 100))
    expected = prefill_s + 0.020 / 2 + x / rate + tau
    assert result.ttft.p50_s == near(expected)
    assert result.wan_bytes_per_request == pytest.approx(x)
    assert result.link_utilization == pytest.approx(load / s.link.capacity_bytes_per_s)


def test_pdd_relayed_ttft_skips_the_wan() -> None:
    """A P-RLD-MD request's first token: S + RDMA + one relay step; the WAN is off the TTFT path."""
    w = workload(**{**DETERMINISTIC, "hit_rate": {"buckets": [{"low": 0.1, "high": 0.1001, "share": 1.0}]}})
    s = scenario(plan_data("small-pdd", rate_rps=0.001), w)
    result = evaluate(s)
    assert s.relay is not None
    fresh = float(new_tokens(8192, 0.10005, 64))
    prefill_s = float(prefill_time(s.prefill.instance, fresh, 8192 - fresh, 8192))
    rdma = float(request_kv_bytes(s.model, 8192, 64)) / s.prefill.instance.hardware.nic_bytes_per_s + 0.0245
    tau_r = float(decode_step_time(s.relay.instance, 1.0, 8192 + 100))
    assert result.relay_share == 1.0
    assert result.ttft.p50_s == near(prefill_s + rdma + tau_r)
    assert set(result.pipelines) == {"P-RLD-MD"}
    assert 0 < result.rld_token_share <= 1


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_prefill_wait_is_allen_cunneen_md1(rho: float) -> None:
    """One prefill instance, one request kind, Poisson arrivals. A request of n = 4096 new tokens
    (r/C = 1/2) occupies the instance for A alone and P packed (half an 8192-token step's linear part
    plus its attention). F = (A - P) / (1 - r/C) and v = A - F; a busy instance's steps last
    T = F / (1 - lam v), mu = lam T others share a waiting request's step, E[1/k] = (1 - e^-mu) / mu,
    g = (E[1/k] - r/C) / (1 - r/C) clipped to [0, 1], and it is packed with probability
    p = P(wait) = rho (M/D/1): W = A - rho (A - P) (1 - g), rho = lam W. A wait is exponential with
    mean W / (2 (1 - rho)) (Allen-Cunneen's M/D/1 mean), so the TTFT P90 is D + m ln(rho / 0.1)
    (for rho > 0.1) and the P99 D + m ln(rho / 0.01), D the fixed stage sum. Decode has 8 instances
    of 32 slots and stays nearly idle, so slot waits are below 1%."""
    base = scenario(plan_data("small-pd-intra", rate_rps=0.001), workload(**DETERMINISTIC))
    instance = base.prefill.instance
    cost = prefill_cost(instance, 4096, 4096, 8192)
    packed = 0.5 * float(linear_step_s(instance, 8192)) + float(cost.packed_attention_s)
    alone = float(cost.alone_s)
    assert float(cost.batched_s) == pytest.approx(packed, rel=1e-12)
    fixed = (alone - packed) / 0.5
    variable = alone - fixed

    def work(lam: float) -> float:
        mu = lam * fixed / (1 - lam * variable)
        g = min(max(((1 - math.exp(-mu)) / mu - 0.5) / 0.5, 0.0), 1.0)
        return alone - rho * (alone - packed) * (1 - g)

    rate = rho / alone
    for _ in range(60):  # rho = lam W(lam): a contraction here
        rate = rho / work(rate)
    service = work(rate)
    assert rate * service == pytest.approx(rho, rel=1e-9)
    p = plan_data("small-pd-intra", rate_rps=rate)
    p["prefill"]["count"] = 1
    p["decode"]["count"] = 8
    s = scenario(p, workload(**DETERMINISTIC))
    result = evaluate(s)
    assert result.stages["prefill"].utilization == pytest.approx(rho, rel=1e-3)
    low = evaluate(s, rate_rps=1e-6)
    fixed_s = low.ttft.p50_s
    mean = service / (2 * (1 - rho))
    assert result.ttft.p90_s == pytest.approx(fixed_s + mean * math.log(rho / 0.1), rel=0.01)
    assert result.ttft.p99_s == pytest.approx(fixed_s + mean * math.log(rho / 0.01), rel=0.01)


def test_decoder_max_batch_by_hand() -> None:
    s = scenario(plan_data("small-pd-intra"), workload(**DETERMINISTIC))
    per_sequence = float(request_kv_bytes(s.model, 8292, 64))
    by_memory = math.floor((s.decode.kv_capacity_bytes - 1e9) / per_sequence)
    assert decoder_max_batch(s, s.decode, 8292, 1e9) == min(32, by_memory)
    assert decoder_max_batch(s, s.decode, 8292, s.decode.kv_capacity_bytes * 2) == 0


def test_revenue_per_request_by_hand() -> None:
    """4096 uncached x 0.28 + 4096 cached x 0.028 + 200 output x 0.42, per million tokens."""
    w = workload(**DETERMINISTIC)
    s = scenario(plan_data("small-pd-intra"), w)
    classes = request_classes(s)
    expected = (4096 * 0.28 + 4096 * 0.028 + 200 * 0.42) / 1e6
    assert revenue_per_request(w, classes) == pytest.approx(expected, rel=1e-12)
    result = evaluate(s)
    assert result.revenue_per_hour == pytest.approx(s.rate_rps * expected * 3600, rel=1e-12)


# -- money and the JSON view ----------------------------------------------------------------------------


def test_cost_bcr_and_goodput() -> None:
    s = scenario(plan_data("small-pdd"))
    result = evaluate(s)
    assert result.cost_per_hour == pytest.approx(s.cost_per_hour)
    assert result.bcr == pytest.approx(result.goodput_rps * 3600 / result.cost_per_hour)
    assert result.sla_met
    assert result.goodput_rps == pytest.approx(s.rate_rps)
    assert result.rate_rps == s.rate_rps


def test_to_dict_has_the_documented_keys() -> None:
    out = evaluate(scenario(plan_data("small-pdd"))).to_output().json_data()
    for key in (
        "ttft_p50_s",
        "ttft_p90_s",
        "ttft_p99_s",
        "tpot_p90_s",
        "goodput_rps",
        "cost_usd_per_hour",
        "bcr",
        "rld_token_share",
        "singular_share",
        "link_utilization",
        "stages",
        "pipelines",
    ):
        assert key in out
    assert set(out["stages"]) == {"prefill", "relay", "decode"}
    assert out["ttft_p50_s"] <= out["ttft_p90_s"] <= out["ttft_p99_s"]


def test_rate_argument_overrides_the_plan() -> None:
    s = scenario(plan_data("small-pdd"))
    assert evaluate(s, rate_rps=0.5).rate_rps == 0.5
    p = plan_data("small-pdd")
    p["rate_rps"] = 0.5
    at_half = evaluate(s, rate_rps=0.5).stages["prefill"].utilization
    assert at_half == evaluate(scenario(p)).stages["prefill"].utilization
    # a quarter of the rate: a quarter of the load or a little more (less of the work is packed)
    quarter = at_half / (evaluate(s).stages["prefill"].utilization / 4)
    assert 1.0 <= quarter < 1.1


def test_rate_argument_sizes_the_radix_cache_at_that_rate() -> None:
    """Guards evaluate(scenario, rate_rps): the main decoder's radix-cache (DRC) reservation must be
    sized at rate_rps, not at the plan's rate. With a 300 s retention and the cache in HBM only,
    the cache at the plan's 2 req/s takes all of the decoders' KV memory, at 0.5 req/s it does
    not: evaluating at 0.5 must give exactly what the same plan with rate_rps 0.5 gives."""
    serving = {**BASE_WORKLOAD["serving"], "max_decode_batch": 256, "drc_retention_s": 300}
    w = workload(serving=serving)
    s = scenario(plan_data("small-pdd"), w)
    assert s.rate_rps == 2.0
    full = s.decode.kv_capacity_bytes
    assert s.cache_hbm_bytes_per_instance(CacheKind.DECODE) == full  # the cache at 2 req/s takes it all
    assert s.cache_hbm_bytes_per_instance(CacheKind.DECODE, 0.5) < full
    at_rate = evaluate(s, rate_rps=0.5)
    in_plan = evaluate(scenario(plan_data("small-pdd", rate_rps=0.5), w))
    assert in_plan.sla_met and in_plan.stages["decode"].stable
    assert at_rate.stages == in_plan.stages
    assert at_rate.ttft == in_plan.ttft and at_rate.tpot == in_plan.tpot
    assert at_rate.sla_met and at_rate.sla_violations == []
    assert at_rate.to_output() == in_plan.to_output()


def test_tight_sla_is_reported_and_cuts_goodput() -> None:
    w = workload(sla={"ttft_p90_s": 0.05, "ttft_p99_s": 0.1, "tpot_p90_s": 0.1})
    result = evaluate(scenario(plan_data("small-pdd"), w))
    assert not result.sla_met
    assert any(v.startswith("TTFT P90") for v in result.sla_violations)
    assert 0 <= result.goodput_rps < result.rate_rps


# -- WAN and relay figures ----------------------------------------------------------------------------------


def test_pd_cross_wan_figures_by_hand() -> None:
    s = scenario(plan_data("small-pd-cross"))
    result = evaluate(s)
    classes = request_classes(s)
    mean_bytes = float(classes.wan_bytes @ classes.input_prob)
    assert result.wan_bytes_per_request == pytest.approx(mean_bytes, rel=1e-12)
    assert result.wan_gbps_offered == pytest.approx(2.0 * mean_bytes * 8 / 1e9)
    assert s.link is not None
    assert result.link_utilization == pytest.approx(2.0 * mean_bytes / s.link.capacity_bytes_per_s)
    assert result.rld_token_share == 0 and result.singular_share == 0 and result.relay_share == 0


def test_fluctuation_raises_link_utilization() -> None:
    """Against the mean available capacity C E[f]: the trace line has E[f] < 1."""
    steady = evaluate(scenario(plan_data("small-pd-cross")))
    traced_plan = plan_data("small-pd-cross", wan=[{"option": "line-trace", "count": 4}])
    s = scenario(traced_plan)
    traced = evaluate(s)
    assert s.link is not None
    f = mean_fraction(s.link.fluctuation, s.link.trace)
    assert f < 1
    assert traced.link_utilization == pytest.approx(steady.link_utilization / f, rel=1e-9)
    assert traced.ttft.p90_s >= steady.ttft.p90_s


def test_pd_intra_has_no_wan() -> None:
    result = evaluate(scenario(plan_data("small-pd-intra")))
    assert result.link_utilization == 0
    assert result.wan_bytes_per_request == 0
    assert set(result.pipelines) == {"P-D (RDMA)"}


def test_pdd_relay_figures() -> None:
    s = scenario(plan_data("small-pdd"))
    result = evaluate(s)
    classes = request_classes(s)
    assert result.relay_share == pytest.approx(0.3)  # the [0, 0.5) hit bucket, below the 0.9 threshold
    assert result.relay_share == pytest.approx(float(classes.relay @ classes.input_prob))
    assert 0 <= result.singular_share <= result.relay_share
    assert 0 < result.rld_token_share < 1
    assert set(result.pipelines) == {"P-MD", "P-RLD-MD"}
    assert sum(p["share"] for p in result.pipelines.values()) == pytest.approx(1.0)
    # P-MD pays the WAN on its TTFT path; the relayed pipeline does not
    assert result.pipelines["P-RLD-MD"]["ttft_p50_s"] < result.ttft.p99_s


def test_singular_filter_cancels_wan_bytes() -> None:
    on = evaluate(scenario(plan_data("small-pdd")))
    off = evaluate(scenario(plan_data("small-pdd", routing={"kind": "hit", "singular_filter": False})))
    assert on.singular_share > 0
    assert on.wan_bytes_per_request < off.wan_bytes_per_request
    assert on.link_utilization < off.link_utilization


def test_a_weighted_quantile_is_the_first_value_whose_cumulative_weight_reaches_it() -> None:
    # sorted: 1 (0.5), 2 (0.3), 3 (0.2); cumulative 0.5, 0.8, 1.0 (weights scaled by 2: normalized)
    values, weights = np.array([3.0, 1.0, 2.0]), np.array([0.4, 1.0, 0.6])
    quantiles = (0.1, 0.5, 0.51, 0.8, 0.99, 1.0)
    assert list(_weighted_quantiles(values, weights, quantiles)) == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_a_relay_that_takes_no_request_leaves_the_main_decoders_as_pd_cross_has_them() -> None:
    # no request meets the relay, so none is held there, none cancels a transfer and none hands
    # over: the relay runs empty, the line carries what pd-cross's carries, the main decoders pay no
    # handoff stall, and their token times are pd-cross's on the same prefill, decoders and line
    nobody = evaluate(scenario(plan_data("small-pdd", routing={"kind": "hit", "hit_threshold": 0.0})))
    cross = evaluate(scenario(plan_data("small-pd-cross", wan=[{"option": "line-1g", "count": 2}])))
    assert nobody.relay_share == 0 and nobody.stages["relay"].batch_per_instance == 0
    assert nobody.wan_gbps_offered == pytest.approx(cross.wan_gbps_offered, rel=1e-12)
    assert (nobody.tpot.p50_s, nobody.tpot.p90_s) == pytest.approx((cross.tpot.p50_s, cross.tpot.p90_s), rel=1e-12)


def test_routing_by_bytes() -> None:
    s = scenario(plan_data("small-pdd", routing={"kind": "bytes", "incremental_bytes_threshold": 2e8}))
    classes = request_classes(s)
    result = evaluate(s)
    expected = float(classes.input_prob[classes.wan_bytes > 2e8].sum())
    assert 0 < expected < 1
    assert result.relay_share == pytest.approx(expected)


def test_relay_threshold_zero_sends_nothing_through_the_relay() -> None:
    result = evaluate(scenario(plan_data("small-pdd", routing={"kind": "hit", "hit_threshold": 0.0})))
    assert result.relay_share == 0
    assert result.rld_token_share == 0
    assert set(result.pipelines) == {"P-MD"}


# -- instability -------------------------------------------------------------------------------------------


def test_overloaded_line_is_unstable() -> None:
    result = evaluate(scenario(plan_data("small-pd-cross", wan=[{"option": "line-1g", "count": 1}])))
    assert result.link_utilization > 1
    assert not result.sla_met
    assert math.isinf(result.ttft.p50_s) and math.isinf(result.ttft.p99_s)
    assert result.goodput_rps == 0 and result.bcr == 0
    assert "WAN utilization" in result.sla_violations[0] and result.sla_violations[0].startswith("unstable")
    assert result.to_output().ttft_p90_s == math.inf  # the CLI turns this into null


def test_overloaded_prefill_and_decode_are_unstable() -> None:
    prefill = evaluate(scenario(plan_data("small-pd-intra", rate_rps=200.0)))
    assert "prefill utilization" in prefill.sla_violations[0]
    assert prefill.goodput_rps == 0
    decode = evaluate(scenario(plan_data("small-pd-intra", max_decode_batch=1)))
    assert not decode.stages["decode"].stable
    assert "decode needs" in decode.sla_violations[0]


def test_plan_whose_prefill_cannot_hold_the_longest_prompt_is_rejected() -> None:
    """A 500,000-token prompt's KV (~66 GB) exceeds gpu-a's KV budget (~55 GB): the plan's prefill
    instance could not keep the prompt it prefills, so the plan is refused with the role named."""
    w = workload(prompt_tokens={"kind": "fixed", "tokens": 500_000})
    with pytest.raises(InputError, match=r"prefill: one gpu-a TP1 instance keeps .* the longest prompt \(500,000"):
        scenario(plan_data("small-pdd"), w)


def test_relay_that_cannot_hold_one_sequence_is_unstable_not_a_crash() -> None:
    """Guards the relay's load in the closed form (batch / relay max batch): the prompt's KV just
    fits gpu-a's KV budget (so prefill and relay may receive it), but not with the output the
    relay decodes on top (the mean context, prompt + half the output, does not fit): the relay
    holds no sequence (max batch 0) while the gpu-b main decoder holds one. Evaluating must report
    an unstable relay and the SLA missed, not raise ZeroDivisionError."""
    probe = scenario(plan_data("small-pdd"))
    assert probe.relay is not None
    capacity, page = probe.relay.kv_capacity_bytes, probe.workload.serving.page_tokens
    tokens = np.arange(64, 2_000_000, 64)
    prompt = int(tokens[request_kv_bytes(probe.model, tokens, page) <= capacity].max())
    w = workload(
        prompt_tokens={"kind": "fixed", "tokens": prompt},
        arrival={"rate_rps": 0.01, "process": "poisson"},
        serving={**BASE_WORKLOAD["serving"], "drc_retention_s": 0},
    )
    s = scenario(plan_data("small-pdd"), w)
    assert s.relay is not None
    context = s.workload.prompt_tokens.mean() + s.workload.output_tokens.mean() / 2
    assert decoder_max_batch(s, s.relay, context, 0.0) == 0
    assert decoder_max_batch(s, s.decode, context, 0.0) >= 1
    result = evaluate(s)
    assert not result.stages["relay"].stable
    assert result.stages["decode"].stable
    assert not result.sla_met
    assert math.isinf(result.ttft.p90_s)
    assert result.goodput_rps == 0


# -- monotonicity -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["small-pd-intra", "small-pd-cross", "small-pdd"])
def test_more_load_never_lowers_ttft(name: str) -> None:
    s = scenario(plan_data(name))
    rates = [0.1, 0.5, 1.0, 1.5, 2.0, 2.5]
    p90 = np.array([evaluate(s, rate_rps=r).ttft.p90_s for r in rates])
    p99 = np.array([evaluate(s, rate_rps=r).ttft.p99_s for r in rates])
    assert all(b >= a - slack(a) for a, b in pairwise(p90))
    assert all(b >= a - slack(a) for a, b in pairwise(p99))
    # the work per request falls as more of it is packed, between packed and alone
    utilization = np.array([evaluate(s, rate_rps=r).stages["prefill"].utilization for r in rates])
    assert (np.diff(utilization) > 0).all()
    classes = request_classes(s)
    alone = float(classes.prefill_alone_s @ classes.input_prob)
    packed = float(classes.prefill_work_s @ classes.input_prob)
    count = s.prefill.count
    assert (utilization <= np.array(rates) * alone / count * (1 + 1e-9)).all()
    assert (utilization >= np.array(rates) * packed / count * (1 - 1e-9)).all()


@pytest.mark.parametrize("name", ["small-pd-intra", "small-pd-cross", "small-pdd"])
def test_more_decode_instances_never_raise_ttft(name: str) -> None:
    results = []
    for count in (1, 2, 4):
        p = plan_data(name)
        p["decode"]["count"] = count
        results.append(evaluate(scenario(p)))
    for a, b in pairwise(results):
        assert b.ttft.p90_s <= a.ttft.p90_s + slack(a.ttft.p90_s)
        assert b.ttft.p99_s <= a.ttft.p99_s + slack(a.ttft.p99_s)
        assert b.stages["decode"].utilization <= a.stages["decode"].utilization
        assert b.cost_per_hour > a.cost_per_hour


def test_more_lines_never_raise_ttft() -> None:
    results = [
        evaluate(scenario(plan_data("small-pd-cross", wan=[{"option": "line-1g", "count": n}]))) for n in (2, 3, 4, 8)
    ]
    utilization = [r.link_utilization for r in results]
    assert utilization == sorted(utilization, reverse=True)
    stable = [r for r in results if r.link_utilization < 1]
    assert len(stable) >= 2
    for a, b in pairwise(stable):
        assert b.ttft.p50_s <= a.ttft.p50_s + slack(a.ttft.p50_s)
        assert b.ttft.p90_s <= a.ttft.p90_s + slack(a.ttft.p90_s)


def test_handoff_settings_move_the_closed_form() -> None:
    """The catch-up threshold and the adaptive load bound are not nominal: a smaller threshold
    keeps the relay longer (more relay tokens), an adaptive bound of 0 is one-shot (the relay is
    never below it) and a bound of 1 is catch-up (it is always below it)."""

    def figures(**handoff: Any) -> Any:
        return evaluate(scenario(plan_data("small-pdd", handoff=handoff)))

    loose, tight = (
        figures(mode="catch-up", catchup_threshold_tokens=64),
        figures(mode="catch-up", catchup_threshold_tokens=4),
    )
    assert tight.rld_token_share > loose.rld_token_share  # one more round on some classes
    one_shot, catch_up = figures(mode="one-shot"), figures(mode="catch-up", catchup_threshold_tokens=4)
    never = figures(mode="adaptive", adaptive_load_threshold=0.0, catchup_threshold_tokens=4)
    always = figures(mode="adaptive", adaptive_load_threshold=1.0, catchup_threshold_tokens=4)
    assert never.rld_token_share == pytest.approx(one_shot.rld_token_share, rel=1e-9)
    assert always.rld_token_share == pytest.approx(catch_up.rld_token_share, rel=1e-9)
    assert catch_up.rld_token_share > one_shot.rld_token_share
    assert catch_up.worst_gap_p99_s < one_shot.worst_gap_p99_s  # the last chunk is smaller than all of them
