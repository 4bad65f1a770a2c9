"""The main decoder's radix cache decides how much KV crosses the WAN: the incremental KV when it
still holds the prefix, the whole prompt's when it does not."""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import numpy as np
import pytest
from test_analytic import BASE_WORKLOAD, plan_data, scenario

from pddplan.cache.sessions import kept_probability
from pddplan.evaluate import evaluate
from pddplan.evaluate.classes import request_classes
from pddplan.perf.kv import incremental_kv_bytes, request_kv_bytes
from pddplan.simulate import simulate
from pddplan.specs.workload import Workload
from pddplan.support.loading import validate


def test_hit_probability_by_hand() -> None:
    assert kept_probability(0.0, None) == 0.0
    assert kept_probability(60.0, None) == 1.0  # no turn gap given: the bound
    assert kept_probability(60.0, 60.0) == pytest.approx(1 - math.exp(-1), rel=1e-12)
    assert kept_probability(30.0, 120.0) == pytest.approx(1 - math.exp(-0.25), rel=1e-12)


def workload(**serving_changes: Any) -> Workload:
    data = copy.deepcopy(BASE_WORKLOAD)
    data["serving"].update(serving_changes)
    return validate(Workload, data, "workload.yaml")


def test_classes_split_into_held_and_missed() -> None:
    """q = 1 - e^-1: each class twice, probabilities q and 1 - q of the original, the held half
    sends the incremental KV, the missed half the whole prompt's."""
    held = scenario(plan_data("small-pdd"), workload(turn_gap_s=60.0, drc_retention_s=60.0))
    always = scenario(plan_data("small-pdd"), workload(drc_retention_s=60.0))
    split, plain = request_classes(held), request_classes(always)
    n = len(plain.input_prob)
    q = 1 - math.exp(-1)
    assert len(split.input_prob) == 2 * n
    np.testing.assert_allclose(split.input_prob[:n], plain.input_prob * q, rtol=1e-12)
    np.testing.assert_allclose(split.input_prob[n:], plain.input_prob * (1 - q), rtol=1e-12)
    page = held.workload.serving.page_tokens
    np.testing.assert_allclose(
        split.wan_bytes[:n], incremental_kv_bytes(held.model, plain.prompt_tokens, plain.hit, page), rtol=1e-12
    )
    np.testing.assert_allclose(split.wan_bytes[n:], request_kv_bytes(held.model, plain.prompt_tokens, page), rtol=1e-12)
    assert split.input_prob.sum() == pytest.approx(1.0, rel=1e-12)


def test_shorter_retention_sends_more_bytes() -> None:
    """Retention 0 sends every prompt whole; longer retention never sends more."""
    sent = [
        evaluate(scenario(plan_data("small-pdd"), workload(drc_retention_s=r, turn_gap_s=30.0))).wan_bytes_per_request
        for r in (0.0, 10.0, 30.0, 120.0)
    ]
    assert all(a >= b for a, b in itertools.pairwise(sent)), sent
    assert sent[0] > sent[-1] * 1.5
    without_gap = evaluate(scenario(plan_data("small-pdd"), workload(drc_retention_s=120.0)))
    radix = next(c for c in without_gap.caches if c.cache == "decode")
    assert radix.found_share == 1.0  # no gap given: every next turn within the retention


def test_simulation_draws_the_same_share_of_misses() -> None:
    """The simulated mean WAN bytes per request match the closed form's expectation within 3%
    (relayed requests the relay finishes first cancel part of theirs in both)."""
    s = scenario(plan_data("small-pdd"), workload(drc_retention_s=30.0, turn_gap_s=30.0))
    expected = evaluate(s).wan_bytes_per_request
    simulated = simulate(s, 20_000, 3).summary.wan_bytes_per_request
    assert simulated == pytest.approx(expected, rel=0.03)


def test_the_optimizer_chooses_the_radix_cache_retention() -> None:
    """With `drc_retention_choices` PDD's optimizer tries each retention and writes the one it
    picked into the plan; the plan then evaluates with that retention (retention 0 would send every
    prompt whole, so with room for the cache a longer one never scores worse)."""
    from test_analytic import PLANS

    from pddplan.inputs.input_set import load_input_set
    from pddplan.optimize import optimize_architecture
    from pddplan.optimize.options import OptimizeOptions

    w = workload(turn_gap_s=30.0, drc_retention_s=60.0, drc_retention_choices=[0.0, 120.0])
    result = optimize_architecture(load_input_set(w, PLANS), "pdd", OptimizeOptions(verify=False))
    assert result.feasible and result.plan is not None
    assert result.plan.drc_retention_s in (0.0, 120.0)
    assert result.scenario is not None
    assert result.scenario.workload.serving.drc_retention_s == result.plan.drc_retention_s
    fixed = optimize_architecture(
        load_input_set(workload(turn_gap_s=30.0, drc_retention_s=0.0), PLANS), "pdd", OptimizeOptions(verify=False)
    )
    assert fixed.evaluation is not None and result.evaluation is not None
    assert result.evaluation.bcr >= fixed.evaluation.bcr * (1 - 1e-9)


def test_retention_choices_need_turn_gaps() -> None:
    from pddplan.errors import InputError

    with pytest.raises(InputError, match="drc_retention_choices needs turn_gap_s"):
        workload(drc_retention_choices=[30.0, 60.0])
