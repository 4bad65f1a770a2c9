"""Co-located serving (agg) on two GPU types: a plan's `split` sends a share of the requests to a
second pool; evaluation, simulation, the program, export and the CLI treat the plan as the
mixture of two one-pool deployments (`pddplan.scenarios.split`)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from pddplan.cli import app
from pddplan.evaluate.analytic import evaluate
from pddplan.evaluate.capacity_view import capacity_view, rebalanced
from pddplan.evaluate.queueing import WaitedDelays, pools_quantiles
from pddplan.export import export_plan
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.run import optimize
from pddplan.scenarios.failures import Change, apply
from pddplan.scenarios.scenario import build_scenario
from pddplan.scenarios.split import pool_parts, thinned_arrival
from pddplan.simulate.engine import simulate_requests
from pddplan.simulate.summary import request_records, simulate
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Arrival

WORKLOAD = "pdd-agent-64k-hetero"  # datacenter A offers GPU-A and GPU-B
POOL_B = {"datacenter": "dc-a", "gpu": "gpu-b", "tp": 8, "count": 5, "expert_parallel": True}
POOL_A = {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 4, "expert_parallel": True}


def _plan(split: dict[str, object] | None, prefill: dict[str, object] = POOL_B, **fields: object) -> Plan:
    return Plan.model_validate(
        {"name": "split", "architecture": "agg", "prefill": prefill, **({"split": split} if split else {}), **fields}
    )


@pytest.fixture(scope="module")
def inputs():  # type: ignore[no-untyped-def]
    return load_input_set(load_workload(WORKLOAD), workload_dir(WORKLOAD))


def test_a_random_split_of_the_arrivals_keeps_poisson_and_thins_a_gamma_stream() -> None:
    """rate x s; c^2 -> s c^2 + 1 - s: Poisson stays Poisson, a gamma stream of cv 2 split 1/4
    has c^2 = 0.25 x 4 + 0.75 = 1.75."""
    poisson = thinned_arrival(Arrival(rate_rps=4.0), 0.25)
    assert (poisson.process, poisson.cv, poisson.rate_rps) == ("poisson", 1.0, 1.0)
    gamma = thinned_arrival(Arrival(rate_rps=8.0, process="gamma", cv=2.0), 0.25)
    assert gamma.rate_rps == pytest.approx(2.0, rel=1e-12)
    assert gamma.cv == pytest.approx(math.sqrt(1.75), rel=1e-12)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (
            {"architecture": "pd-intra", "decode": {**POOL_B, "count": 1}, "split": {**POOL_A, "share": 0.5}},
            "`split` (a second co-located pool) is for co-located serving",
        ),
        ({"split": {**POOL_A, "share": 0.0}}, "greater than 0"),
        ({"split": {**POOL_A, "share": 1.0}}, "less than 1"),
        ({"split": {**POOL_A, "count": 0, "share": 0.5}}, "split.count = 0"),
        ({"split": {**POOL_A, "datacenter": "dc-b", "share": 0.5}}, "must sit with the first"),
    ],
)
def test_a_split_is_refused_where_it_cannot_be(plan: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        Plan.model_validate({"name": "p", "architecture": "agg", "prefill": POOL_B, **plan})


def test_a_plan_without_split_writes_none() -> None:
    """Plans written before `split` existed read and write alike."""
    assert "split" not in _plan(None).model_dump(mode="json")
    assert _plan({**POOL_A, "share": 0.25}).model_dump(mode="json")["split"]["share"] == 0.25


def test_pools_quantiles_by_hand() -> None:
    """A request is pool 1's (no wait, 1 s) w.p. 0.7, pool 2's (3 s) w.p. 0.3: P50 = 1 s, P90 = 3 s.
    Pool 2 waiting Exp(2 s) always, from 0 s: P(T > t) = 0.3 e^{-t/2} beyond pool 1's 1 s, so
    P90 solves 0.3 e^{-t/2} = 0.1: t = 2 ln 3."""
    one = WaitedDelays(np.array([1.0]), np.array([1.0]), 0.0, 0.0, np.zeros(1), np.zeros(1))
    three = WaitedDelays(np.array([3.0]), np.array([1.0]), 0.0, 0.0, np.zeros(1), np.zeros(1))
    q = pools_quantiles([0.5, 0.9], [(0.7, one), (0.3, three)])
    np.testing.assert_allclose(q, [1.0, 3.0], atol=2e-3)
    waiting = WaitedDelays(np.array([0.0]), np.array([1.0]), 1.0, 2.0, np.zeros(1), np.zeros(1))
    q90 = pools_quantiles([0.9], [(0.7, one), (0.3, waiting)])[0]
    assert q90 == pytest.approx(2 * math.log(3), abs=3e-3)
    unstable = WaitedDelays(np.array([0.0]), np.array([1.0]), 1.0, math.inf, np.zeros(1), np.zeros(1))
    assert np.all(np.isinf(pools_quantiles([0.5], [(0.5, one), (0.5, unstable)])))


def test_two_identical_pools_are_one_pool_at_half_the_rate(inputs) -> None:  # type: ignore[no-untyped-def]
    """The same kind and count on both sides of a 50/50 split: TTFT and TPOT as one such pool at
    half the rate (the mixture of two equal distributions), twice its cost, the whole rate served."""
    split = build_scenario(_plan({**POOL_B, "share": 0.5}), inputs)
    half = inputs.workload.model_copy(update={"arrival": thinned_arrival(inputs.workload.arrival, 0.5)})
    one = build_scenario(_plan(None), inputs.with_workload(half))
    both, alone = evaluate(split), evaluate(one)
    for figure in ("p50_s", "p90_s", "p99_s"):
        assert getattr(both.ttft, figure) == pytest.approx(getattr(alone.ttft, figure), abs=2e-3, rel=2e-3)
        assert getattr(both.tpot, figure) == pytest.approx(getattr(alone.tpot, figure), rel=1e-9)
    assert both.cost_per_hour == pytest.approx(2 * alone.cost_per_hour, rel=1e-12)
    assert both.goodput_rps == pytest.approx(inputs.workload.arrival.rate_rps, rel=1e-12)
    assert set(both.stages) == {"prefill", "decode", "split", "split-decode"}


def test_a_split_evaluates_as_the_mixture_of_its_pools(inputs) -> None:  # type: ignore[no-untyped-def]
    """Cost adds up; every TTFT quantile lies between the pools' own; the capacity of the plan as
    written is the pool that fills first, cap_i / s_i."""
    scenario = build_scenario(_plan({**POOL_A, "share": 0.4}), inputs)
    parts = pool_parts(scenario)
    assert [p.role for p in parts] == ["prefill", "split"]
    assert [p.share for p in parts] == pytest.approx([0.6, 0.4])
    whole = evaluate(scenario)
    pools = [evaluate(p.scenario) for p in parts]
    assert whole.cost_per_hour == pytest.approx(sum(e.cost_per_hour for e in pools), rel=1e-12)
    for figure in ("p50_s", "p90_s", "p99_s"):
        values = [getattr(e.ttft, figure) for e in pools]
        assert min(values) - 2e-3 <= getattr(whole.ttft, figure) <= max(values) + 2e-3
    view = capacity_view(scenario)
    carried = [capacity_view(p.scenario).max_rate_rps / p.share for p in parts]
    assert view.max_rate_rps == pytest.approx(min(carried), rel=1e-12)
    assert view.bottleneck == ("prefill", "split")[int(np.argmin(carried))]


def test_a_split_simulates_both_pools_and_agrees_with_its_closed_form(inputs) -> None:  # type: ignore[no-untyped-def]
    """Both pools' requests in one table in arrival order, each pool's utilization under its role;
    the closed form's P90 TTFT within 15% of the simulation's (as for one pool); the same seed
    gives the same figures."""
    scenario = build_scenario(_plan({**POOL_A, "share": 0.4}), inputs)
    run = simulate(scenario, 6000, 3)
    assert len(run.table.arrival_s) == 6000
    assert np.all(np.diff(run.table.arrival_s) >= 0)
    assert set(run.summary.utilization) == {"prefill", "decode", "split", "split-decode"}
    closed = evaluate(scenario)
    assert closed.ttft.p90_s == pytest.approx(run.summary.ttft_p90_s, rel=0.15)
    assert simulate(scenario, 6000, 3).summary == run.summary
    assert run.table.pool is not None and int((run.table.pool == "split").sum()) == round(0.4 * 6000)
    assert request_records(run.table)[0]["pool"] in ("prefill", "split")
    assert "pool" not in request_records(simulate(pool_parts(scenario)[0].scenario, 50, 3).table)[0]
    table, stats = simulate_requests(scenario, 1, 3)  # too short for both pools: only one runs
    assert len(table.arrival_s) == 1 and len(stats.pools) == 1


def test_the_program_splits_the_requests_when_no_one_type_carries_them(tmp_path: Path) -> None:
    """Datacenter A offers 40 GPU-B and plenty of GPU-A, B only 8 GPU-B: the cheapest agg plan
    puts pools of both types in A, the requests split by their capacities, and meets the SLA."""
    text = (Path(workload_dir(WORKLOAD)) / f"{WORKLOAD}.yaml").read_text()
    data = yaml.safe_load(text)
    data["name"] = "split-by-inventory"
    for dc in data["deployment"]["datacenters"]:
        for offer in dc["gpus"]:
            if offer["type"] == "gpu-b":
                offer["max_count"] = 40 if dc["name"] == "dc-a" else 8
    path = tmp_path / "split-by-inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    report = optimize(load_workload(str(path)), tmp_path, OptimizeOptions(verify_requests=2500), ["agg"])
    result = report.results[0]
    assert result.plan is not None
    plan, split = result.plan, result.plan.split
    assert split is not None
    assert {plan.prefill.gpu, split.gpu} == {"gpu-a", "gpu-b"}
    assert plan.prefill.datacenter == split.datacenter == "dc-a"
    assert 0 < split.share < 1
    assert result.evaluation is not None and result.evaluation.sla_met


def test_export_writes_both_pools_and_their_shares(inputs) -> None:  # type: ignore[no-untyped-def]
    scenario = build_scenario(_plan({**POOL_A, "share": 0.4}), inputs)
    files = export_plan(scenario, "sglang").files
    names = set(files)
    assert {f"prefill-{i}.sh" for i in range(5)} | {f"split-{i}.sh" for i in range(4)} <= names
    router = files["router.sh"]
    assert "SPLIT_3_ADDR" in router and "PREFILL_4_ADDR" in router
    assert "60% to the prefill-* servers (gpu-b)" in files["README.md"]
    assert "40% to the split-* servers (gpu-a)" in files["README.md"]


def test_cli_evaluates_a_split_plan_and_refuses_one_it_cannot_run(tmp_path: Path) -> None:
    plan = tmp_path / "split.yaml"
    plan.write_text(yaml.safe_dump(_plan({**POOL_A, "share": 0.4}).model_dump(mode="json")))
    runner = CliRunner()
    out = runner.invoke(app, ["evaluate", str(plan), WORKLOAD, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert set(data["utilization"]) == {"prefill", "decode", "split", "split-decode"}
    assert set(data["capacity"]["limits"]) == {"prefill", "split"}
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        yaml.safe_dump(
            {
                "architecture": "pd-intra",
                "prefill": POOL_B,
                "decode": {**POOL_B, "count": 1},
                "split": {**POOL_A, "share": 0.4},
            }
        )
    )
    bad = runner.invoke(app, ["evaluate", str(wrong), WORKLOAD])
    assert bad.exit_code == 2
    assert "is for co-located serving (agg)" in bad.output
    assert "Traceback" not in bad.output


def test_losing_a_pools_only_instance_sends_its_requests_to_the_other(inputs) -> None:  # type: ignore[no-untyped-def]
    """`--fail instance:split` on a one-instance second pool leaves a one-pool plan of the first;
    the first pool's only instance down leaves the second pool serving everything; one instance
    of a larger pool down keeps the split, one instance smaller."""
    scenario = build_scenario(_plan({**POOL_A, "count": 1, "share": 0.2}, {**POOL_B, "count": 1}), inputs)
    first, _, mode = apply(inputs, scenario, Change(fail="instance:split"))
    assert first is not None and first.plan.split is None and first.plan.prefill.gpu == "gpu-b"
    assert "first pool serves every request" in mode
    second, _, _ = apply(inputs, scenario, Change(fail="instance:prefill"))
    assert second is not None and second.plan.split is None and second.plan.prefill.gpu == "gpu-a"
    larger = build_scenario(_plan({**POOL_A, "share": 0.2}), inputs)
    shrunk, _, _ = apply(inputs, larger, Change(fail="instance:split"))
    assert shrunk is not None and shrunk.plan.split is not None
    assert (shrunk.plan.split.count, shrunk.plan.split.share) == (POOL_A["count"] - 1, 0.2)  # type: ignore[operator]


def test_a_one_line_plan_splits_when_neither_gpu_offer_alone_carries_the_rate(tmp_path: Path) -> None:
    """8 x H200 and 16 x H100 for Qwen3-32B at 8 req/s: neither offer alone carries it (agg was
    infeasible before a pool could serve part of the rate); the plan uses both."""
    args = ["optimize", "--model", "qwen3-32b", "--gpu", "h200:8", "--gpu", "h100-sxm:16", "--isl", "16000"]
    args += ["--prefix", "14000", "--osl", "1000", "--ttft-p90", "2", "--ttft-p99", "5", "--tpot-p99", "0.05"]
    args += ["--rate", "8", "-a", "agg", "--json", "--write-workload", str(tmp_path / "w.yaml")]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    agg = json.loads(out.stdout)["architectures"][0]
    assert agg["feasible"] and agg["verified"]
    assert {role["gpu"] for role in agg["roles"].values()} == {"h200", "h100-sxm"}
    assert 0 < agg["roles"]["split"]["share"] < 1


def test_after_a_pool_loses_an_instance_the_requests_move_by_capacity(inputs) -> None:  # type: ignore[no-untyped-def]
    """A router that balances by load moves requests off the pool that lost an instance: the share
    becomes cap_split / (cap_prefill + cap_split), so the split pool takes more, and the plan does
    better than at the old share."""
    scenario = build_scenario(_plan({**POOL_A, "share": 0.4}), inputs)
    down, rate, _ = apply(inputs, scenario, Change(fail="instance:prefill"))
    assert down is not None and down.plan.split is not None
    moved, words = rebalanced(down)
    assert moved.plan.split is not None
    caps = {p.role: capacity_view(p.scenario).max_rate_rps for p in pool_parts(moved)}
    assert moved.plan.split.share == pytest.approx(caps["split"] / (caps["prefill"] + caps["split"]), rel=1e-9)
    assert moved.plan.split.share > 0.4 and "40% ->" in words
    assert evaluate(moved, rate).ttft.p99_s < evaluate(down, rate).ttft.p99_s
    assert rebalanced(build_scenario(_plan(None), inputs))[1] == ""
