"""Sequential stopping of verification simulations: the batch-means interval of an SLA share,
and when the verifier stops after its first quarter."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import ROOT

from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.scenarios import build_scenario
from pddplan.simulate.sequential import T_QUANTILE, share_interval, verify


def test_clustered_exceedances_by_hand() -> None:
    """100 requests, the first 10 over the target: batches of 5, two at 1.0 and 18 at 0.
    mean 0.1; s^2 = (2 x 0.81 + 18 x 0.01) / 19; half width = 2.861 s / sqrt(20)."""
    values = np.zeros(100)
    values[:10] = 5.0
    interval = share_interval("ttft_p90", values, 1.0, 0.10)
    s = math.sqrt((2 * 0.81 + 18 * 0.01) / 19)
    half = T_QUANTILE * s / math.sqrt(20)
    assert interval.observed == pytest.approx(0.1, abs=1e-12)
    assert interval.low == 0.0
    assert interval.high == pytest.approx(0.1 + half, rel=1e-12)
    assert not interval.clearly_met and not interval.clearly_missed


def test_spread_exceedances_give_a_narrower_interval_than_clustered_ones() -> None:
    """Every 10th request over: batches of 5 alternate 0.2 and 0 (s^2 = 20 x 0.01 / 19). Queueing
    clusters slow requests; the interval must widen when they cluster, at the same share."""
    spread = np.zeros(100)
    spread[::10] = 5.0
    clustered = np.zeros(100)
    clustered[:10] = 5.0
    narrow = share_interval("x", spread, 1.0, 0.10)
    wide = share_interval("x", clustered, 1.0, 0.10)
    assert narrow.high == pytest.approx(0.1 + T_QUANTILE * math.sqrt(0.2 / 19) / math.sqrt(20), rel=1e-12)
    assert narrow.high < wide.high


def test_no_exceedance_is_not_certainty() -> None:
    """Zero requests over the target: the interval is at least the rule of three, [0, 3/n]."""
    interval = share_interval("ttft_p99", np.zeros(1000), 1.0, 0.01)
    assert interval.observed == interval.low == 0.0 and interval.high == pytest.approx(0.003)
    assert interval.clearly_met
    assert not share_interval("ttft_p99", np.zeros(200), 1.0, 0.01).clearly_met  # 3/200 > 1%


def test_every_request_over_is_clearly_missed() -> None:
    interval = share_interval("tpot_p90", np.full(400, 2.0), 1.0, 0.10)
    assert interval.observed == 1.0 and interval.clearly_missed


def _scenario() -> Any:
    workload = str(ROOT / "workloads" / "pdd-agent-64k.yaml")
    inputs = load_input_set(load_workload(workload), workload_dir(workload))
    return build_scenario(load_plan(str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml")), inputs)


def test_a_clear_verdict_stops_after_the_first_quarter() -> None:
    simulation = verify(_scenario(), 8_000, 0)
    sequential = simulation.summary.json_data()["sequential"]
    assert sequential["stopped_early"] is simulation.summary.sla_met is True
    assert simulation.summary.requests == sequential["requests_simulated"] == 2_000
    assert [share["metric"] for share in sequential["shares"]] == ["ttft_p90", "ttft_p99", "tpot_p90"]


def test_without_early_stop_every_request_is_simulated() -> None:
    simulation = verify(_scenario(), 8_000, 0, early_stop=False)
    assert simulation.summary.requests == 8_000
    assert simulation.summary.json_data()["sequential"]["stopped_early"] is False


def test_a_run_too_short_for_one_percent_tails_is_never_cut() -> None:
    """A quarter of 4,000 is below the 2,000 the first stage needs: the whole run is simulated."""
    assert verify(_scenario(), 4_000, 0).summary.requests == 4_000
