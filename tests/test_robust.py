"""`optimize --robust`: one purchase that meets every required scenario of the day."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pddplan.errors import InputError
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.robust import _unmet, robust_optimize
from pddplan.report.schemas import validate_output
from pddplan.scenarios import build_scenario
from pddplan.scenarios.variants import scenario_workloads
from pddplan.specs.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = OptimizeOptions(verify=False)


def _small(scenarios: list[dict[str, Any]]) -> Workload:
    """chat-short-lowhit, one instance width (so brute force covers every plan of the family)."""
    data = load_workload("chat-short-lowhit").model_dump(mode="json", exclude_none=True)
    data["deployment"]["tp_options"] = [4]
    data["scenarios"] = scenarios
    return Workload.model_validate(data)


def _robust(workload: Workload) -> Any:
    return robust_optimize(workload, workload_dir("chat-short-lowhit"), OPTIONS, ["pd-intra"])[0]


def test_one_scenario_as_written_gives_the_steady_plan() -> None:
    result = _robust(_small([{"name": "all-day", "hours_per_day": 24}]))
    assert result.cost_usd_per_hour == pytest.approx(result.steady_cost_usd_per_hour)
    assert result.price_of_robustness == pytest.approx(0.0) and result.at_lower_bound


def test_adding_a_scenario_never_lowers_the_cost() -> None:
    one = _robust(_small([{"name": "base", "hours_per_day": 12}]))
    two = _robust(
        _small(
            [
                {"name": "base", "hours_per_day": 12},
                {"name": "peak", "hours_per_day": 4, "overrides": {"arrival.rate_rps": 30}},
            ]
        )
    )
    assert two.cost_usd_per_hour >= one.cost_usd_per_hour - 1e-9


def test_brute_force_finds_nothing_cheaper() -> None:
    """Every pd-intra plan of 1-6 prefill and 1-6 decode instances at the one width: none that meets
    every required scenario (closed form) costs less than the robust plan."""
    workload = _small(
        [
            {"name": "peak", "hours_per_day": 6, "overrides": {"arrival.rate_rps": 30}},
            {"name": "drift", "hours_per_day": 6, "hit_shift": -0.2},
        ]
    )
    result = _robust(workload)
    assert result.plan is not None
    cases = [(spec, load_input_set(w, workload_dir("chat-short-lowhit"))) for spec, w in scenario_workloads(workload)]
    home = load_input_set(workload, workload_dir("chat-short-lowhit"))
    cheapest = float("inf")
    for p, d in itertools.product(range(1, 7), range(1, 7)):
        plan = result.plan.model_copy(
            update={
                "prefill": result.plan.prefill.model_copy(update={"count": p}),
                "decode": result.plan.decode.model_copy(update={"count": d}),
            }
        )
        try:
            cost = build_scenario(plan, home).cost_per_hour
        except InputError:
            continue
        if not _unmet(plan, cases):
            cheapest = min(cheapest, cost)
    assert result.cost_usd_per_hour <= cheapest + 1e-9


def test_the_joint_program_buys_for_scenarios_no_single_plan_covers() -> None:
    """A prompt-heavy and an answer-heavy scenario: the first's own optimum has many prefill and
    one decode instance, the second's the reverse, and neither meets the other. The joint program
    buys for both at once (trimmed where the closed form needs less: its capacities are linear and
    conservative, by one prefill instance here); brute force over every pd-intra plan of 1-8 prefill
    and 1-8 decode instances of either GPU kind (H100 in dc-a, H20 in dc-b) finds nothing cheaper
    that meets both."""
    workload = _small(
        [
            {
                "name": "prompts",
                "hours_per_day": 6,
                "overrides": {
                    "arrival.rate_rps": 25,
                    "prompt_tokens.median_tokens": 4000,
                    "output_tokens.median_tokens": 60,
                },
            },
            {
                "name": "answers",
                "hours_per_day": 6,
                "overrides": {
                    "arrival.rate_rps": 25,
                    "prompt_tokens.median_tokens": 300,
                    "output_tokens.median_tokens": 1000,
                },
            },
        ]
    )
    result = _robust(workload)
    assert result.plan is not None and result.cost_usd_per_hour is not None
    assert result.note.startswith("the joint program's purchase")
    here = workload_dir("chat-short-lowhit")
    cases = [(spec, load_input_set(w, here)) for spec, w in scenario_workloads(workload)]
    home = load_input_set(workload, here)
    assert not _unmet(result.plan, cases)
    cheapest = float("inf")
    kinds = [("dc-a", "h100-sxm"), ("dc-b", "h20")]
    for (dc, gpu), p, d in itertools.product(kinds, range(1, 9), range(1, 9)):
        role = {"datacenter": dc, "gpu": gpu, "tp": 4}
        plan = result.plan.model_copy(
            update={
                "prefill": result.plan.prefill.model_copy(update=role | {"count": p}),
                "decode": result.plan.decode.model_copy(update=role | {"count": d}),
            }
        )
        try:
            cost = build_scenario(plan, home).cost_per_hour
        except InputError:
            continue
        if cost < cheapest and not _unmet(plan, cases):
            cheapest = cost
    assert result.cost_usd_per_hour == pytest.approx(cheapest, rel=1e-9)


def test_scenario_files_are_checked() -> None:
    with pytest.raises(ValueError, match="more than 24"):
        _small([{"name": "a", "hours_per_day": 20}, {"name": "b", "hours_per_day": 10}])
    with pytest.raises(ValueError, match="scenario names repeat"):
        _small([{"name": "a", "hours_per_day": 2}, {"name": "a", "hours_per_day": 2}])
    with pytest.raises(InputError, match=r"scenario x: arrival\.nope: unknown field"):
        scenario_workloads(_small([{"name": "x", "hours_per_day": 2, "overrides": {"arrival.nope": 3}}]))


def test_the_day_workload_robustly(cli: Any, tmp_path: Path) -> None:
    written = tmp_path / "robust.yaml"
    args = ("pdd-agent-64k-day", "--robust", "-a", "pdd", "-a", "pd-intra", "--no-verify", "--json")
    result = cli("optimize", *args, "--output", str(written))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    # --output writes the cheapest purchase that meets every required scenario, not the steady winner
    cheapest = min((r for r in data["robust"] if r["plan"]), key=lambda r: r["cost_usd_per_hour"])
    assert yaml.safe_load(written.read_text())["architecture"] == cheapest["architecture"]
    assert {k: v for k, v in yaml.safe_load(written.read_text()).items() if k != "name"} == {
        k: v for k, v in cheapest["plan"].items() if k != "name"
    }
    assert data["output_plan"].startswith("the robust purchase") and "wrote the robust purchase" in result.stderr
    data["robust"] = [r for r in data["robust"] if r["architecture"] == "pdd"]
    validate_output("optimize", data)
    robust = data["robust"][0]
    assert robust["feasible"] and robust["price_of_robustness"] >= 0
    assert {s["name"] for s in robust["scenarios"]} == {"peak", "off-peak", "line-degraded", "hit-drift"}
    assert all(s["sla_met"] for s in robust["scenarios"] if s["required"])
    assert all(s["routing_rule"].startswith("hit < ") for s in robust["scenarios"])  # each scenario's own rule
    assert all(s["handoff_mode"] in ("adaptive", "catch-up", "one-shot") for s in robust["scenarios"])
    bought = sum(role["tp"] * role["count"] for role in (robust["plan"]["prefill"], robust["plan"]["decode"]) if role)
    assert all(0 < s["active_gpus"] <= bought for s in robust["scenarios"] if s["required"])
    assert robust["elastic_cost_usd_per_hour"] <= robust["cost_usd_per_hour"] + 1e-9
    bad = cli("optimize", "pdd-agent-64k", "--robust", "-a", "pdd", "--no-verify")
    assert bad.exit_code == 2 and "has no scenarios" in bad.stderr


def test_each_scenario_operates_the_purchase_its_own_way() -> None:
    """Per scenario: the fewest bought instances that meet it stay active (one fewer in any role
    misses it), an optional scenario beyond the purchase serves what it can within the SLA and sheds
    the rest, and the idle-free cost is the hours-weighted mean of the active costs."""
    workload = _small(
        [
            {"name": "quiet", "hours_per_day": 12, "overrides": {"arrival.rate_rps": 2}},
            {"name": "peak", "hours_per_day": 10, "overrides": {"arrival.rate_rps": 30}},
            {"name": "surge", "hours_per_day": 2, "required": False, "overrides": {"arrival.rate_rps": 400}},
        ]
    )
    result = _robust(workload)
    assert result.plan is not None and result.cost_usd_per_hour is not None
    by_name = {s.name: s for s in result.scenarios}
    specs = {spec.name: spec for spec, _ in scenario_workloads(workload)}
    here = workload_dir("chat-short-lowhit")
    cases = {spec.name: load_input_set(w, here) for spec, w in scenario_workloads(workload)}
    quiet_case = [(specs["quiet"], cases["quiet"])]
    bought = build_scenario(result.plan, cases["peak"]).cost_per_hour
    quiet = by_name["quiet"]
    assert quiet.active is not None and quiet.active_cost_usd_per_hour is not None
    assert quiet.active_cost_usd_per_hour < bought  # the quiet hours leave instances idle
    assert not _unmet(quiet.active, quiet_case)
    for role in ("prefill", "decode"):
        spec = getattr(quiet.active, role)
        if spec.count > 1:
            fewer = quiet.active.model_copy(update={role: spec.model_copy(update={"count": spec.count - 1})})
            assert _unmet(fewer, quiet_case) == ["quiet"], role
    surge = by_name["surge"]
    assert surge.figures is not None and not surge.met
    assert 0 < surge.figures.served_rps < 400 and surge.figures.evaluation.sla_met
    hours = sum(s.hours_per_day for s in result.scenarios)
    expected = (
        sum(
            s.hours_per_day
            * (s.active_cost_usd_per_hour if s.active_cost_usd_per_hour is not None else result.cost_usd_per_hour)
            for s in result.scenarios
        )
        / hours
    )
    assert result.elastic_cost_usd_per_hour == pytest.approx(expected, rel=1e-12)
    assert result.elastic_cost_usd_per_hour < result.cost_usd_per_hour
