"""What the search and the simulator compute once and reuse gives the numbers computing it again
would: an adaptive handoff that chose one mode at every fixed-point iteration evaluates as that
mode's plan, and a prefill kind's step tables serve every simulation of an equal kind."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pddplan.api import scenario_of
from pddplan.evaluate.analytic import evaluate
from pddplan.scenarios.scenario import Scenario
from pddplan.simulate import engine
from pddplan.simulate.summary import simulate
from pddplan.specs.plan import Handoff

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_of(PLAN, "pdd-agent-64k")


def _with_mode(scenario: Scenario, mode: str) -> Scenario:
    plan = scenario.plan.model_copy(update={"handoff": Handoff(mode=mode)})  # type: ignore[arg-type]
    return replace(scenario, plan=plan)


def test_an_adaptive_handoff_that_chose_one_mode_throughout_evaluates_as_that_mode(scenario: Scenario) -> None:
    adaptive = evaluate(_with_mode(scenario, "adaptive"))
    assert len(adaptive.handoff_choices) == 1
    fixed = "catch-up" if True in adaptive.handoff_choices else "one-shot"
    assert evaluate(_with_mode(scenario, fixed)) == adaptive
    other = "one-shot" if fixed == "catch-up" else "catch-up"
    assert evaluate(_with_mode(scenario, other)) != adaptive  # the comparison can fail


def test_step_tables_are_shared_by_equal_kinds_only(scenario: Scenario) -> None:
    engine._TABLES.clear()
    instance = scenario.prefill.instance
    tables = engine._step_tables(instance, 4096)
    assert engine._step_tables(replace(instance), 4096) is tables  # an equal kind, another object
    assert engine._step_tables(instance, 2048) is not tables
    assert engine._step_tables(replace(instance, tp=instance.tp // 2), 4096) is not tables


def test_a_simulation_is_the_same_with_its_tables_remembered_or_not(scenario: Scenario) -> None:
    engine._TABLES.clear()
    cold = simulate(scenario, 1500, 7).summary
    warm = simulate(scenario, 1500, 7).summary
    assert engine._TABLES and cold == warm
