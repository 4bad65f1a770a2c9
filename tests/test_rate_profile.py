"""A repeating rate profile on the arrivals (`arrival.rate_profile`): the time change by hand,
the simulator following it, and the profile a trace writes."""

from __future__ import annotations

import numpy as np
import pytest

from pddplan.simulate.engine import profile_time
from pddplan.specs.workload import Arrival
from pddplan.trace.workload import rate_profile


def test_the_time_change_by_hand() -> None:
    """Profile [1, 3] over 60 s steps is m = [0.5, 1.5]: operational time runs at half speed for
    the first minute (30 s of it) and at 1.5x for the second (90 s). u = 15 -> t = 30; u = 30 -> t =
    60; u = 75 -> 60 + 45 / 1.5 = 90; u = 130 -> the next cycle, 120 + 10 / 0.5 = 140."""
    t = profile_time(np.array([15.0, 30.0, 75.0, 130.0]), np.array([1.0, 3.0]), 60.0)
    assert t.tolist() == pytest.approx([30.0, 60.0, 90.0, 140.0])


def test_a_step_at_zero_gets_no_arrival() -> None:
    """[0, 1]: m = [0, 2]; the first minute takes no operational time, so u = 0 lands at t = 60 and
    u = 30 at 60 + 30 / 2 = 75."""
    t = profile_time(np.array([0.0, 30.0]), np.array([0.0, 1.0]), 60.0)
    assert t.tolist() == pytest.approx([60.0, 75.0])


def test_the_simulated_arrivals_follow_the_profile() -> None:
    """Three quarters of the requests arrive in the busy minutes of a [1, 3] profile, and the mean
    rate stays rate_rps."""
    from dataclasses import replace

    from pddplan.api import scenario_of
    from pddplan.simulate.engine import _arrivals

    scenario = scenario_of("tests/data/export/pdd-agent-64k-pd-intra.yaml", "pdd-agent-64k")
    arrival = scenario.workload.arrival.model_copy(update={"rate_profile": [1.0, 3.0], "profile_step_s": 60.0})
    shaped = replace(scenario, workload=scenario.workload.model_copy(update={"arrival": arrival}))
    times = _arrivals(shaped, 40_000, np.random.default_rng(0))
    busy = (np.floor(times / 60) % 2 == 1).mean()
    assert busy == pytest.approx(0.75, abs=0.01)
    assert len(times) / times[-1] == pytest.approx(scenario.rate_rps, rel=0.02)


def test_the_profile_a_trace_writes() -> None:
    """A last minute covering 5 s is dropped; one covering 30 s is scaled to a full minute's rate
    (3 requests in half a minute: 6); with more minutes than allowed they are averaged in groups."""
    assert rate_profile([10, 20, 3], 125.0) == {"rate_profile": [10.0, 20.0], "profile_step_s": 60.0}
    assert rate_profile([10, 20, 3], 150.0) == {"rate_profile": [10.0, 20.0, 6.0], "profile_step_s": 60.0}
    assert rate_profile([1, 2, 3, 4], 240.0, most=2) == {"rate_profile": [1.5, 3.5], "profile_step_s": 120.0}
    assert rate_profile([7], 50.0) == {}


def test_an_all_zero_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="every step is 0"):
        Arrival(rate_rps=1.0, rate_profile=[0.0, 0.0])
