"""Issue 33's done-when on the shipped workloads: every plan optimize picks is physically possible
(each of its instances holds the longest prompt's KV) and has no one-instance-smaller or
one-width-narrower variant, nor one with its dedicated relay moved onto the prefill instances,
that passes `evaluate` and two 20,000-request simulations; and the bathtub's findings name the
shape its own curve has."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pddplan.analyses.bathtub import BathtubOptions, bathtub
from pddplan.evaluate import evaluate
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize import optimize
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.problem import build_setup
from pddplan.optimize.search import narrower_plans
from pddplan.perf.memory import prompt_room
from pddplan.scenarios import build_scenario
from pddplan.simulate import simulate
from pddplan.specs.plan import Plan
from pddplan.support.curve_shape import curve_shape

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p.stem for p in (ROOT / "workloads").glob("*.yaml"))


def _smaller(plan: Plan, setup: object) -> list[Plan]:
    out = []
    for role in ("prefill", "relay", "decode"):
        spec = getattr(plan, role)
        if spec is not None and spec.count > 1:
            out.append(plan.with_count(role, spec.count - 1))
        out += narrower_plans(plan, role, setup)  # type: ignore[arg-type]
    if plan.relay is not None:
        out.append(plan.model_copy(update={"relay": None, "relay_on_prefill": True}))
    return out


@pytest.mark.parametrize("name", SHIPPED)
def test_optimized_plans_hold_the_longest_prompt_and_no_smaller_variant_passes(name: str) -> None:
    workload = load_workload(name)
    folder = workload_dir(name)
    report = optimize(workload, folder, OptimizeOptions(jobs=1))
    inputs = load_input_set(workload, folder)
    longest = workload.prompt_tokens.largest()
    checked = 0
    for result in report.feasible:
        assert result.plan is not None and result.scenario is not None
        for role in result.scenario.roles.values():
            room = prompt_room(role.kv_capacity_bytes, role.instance, longest, workload.serving.page_tokens)
            assert room >= 1, (name, result.name, role.name)
        setup = build_setup(inputs, result.name, workload.arrival.rate_rps)
        for variant in _smaller(result.plan, setup):
            try:
                scenario = build_scenario(variant, inputs, source="variant")
            except Exception:  # the model or the longest prompt does not fit the narrower instance
                continue
            checked += 1
            if not evaluate(scenario).sla_met:
                continue
            runs = [simulate(scenario, 20_000, seed).summary.sla_met for seed in (0, 1)]
            assert not all(runs), f"{name}: {result.name}'s plan has a smaller variant that passes: {variant}"
    assert checked > 0


@pytest.mark.parametrize("name", SHIPPED)
def test_the_bathtub_findings_name_the_shape_of_their_own_curve(name: str) -> None:
    result = bathtub(load_workload(name), workload_dir(name), options=BathtubOptions(points=21))
    for arch, entry in result.findings["architectures"].items():
        if not entry.get("feasible_points"):
            assert entry["no_plan_reason"], arch  # says why there is no plan
            continue
        curve = result.figures[arch]["revenue_per_cost"]
        assert entry["shape"] == curve_shape(result.hits, curve).kind
        if entry["shape"] in ("rising", "falling"):
            finite = curve[np.isfinite(curve)]
            assert (finite[-1] > finite[0]) == (entry["shape"] == "rising")
    note = result.findings["no_valley_note"] or ""
    assert "moves one way" not in note
