"""Multi-token prediction: tokens per step, the per-token decode time, the workload fields and the
estimate flags."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_results import one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.evaluate import evaluate
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.roofline import Instance, decode_step_time, step_time
from pddplan.specs.workload import Mtp, ServingOptions


def instance(mtp: Mtp | None) -> Instance:
    return Instance(load_model("deepseek-v3.2"), load_hardware("gpu-b"), 16, mtp=mtp)


def test_tokens_per_step_by_hand() -> None:
    assert Mtp(1, 0.8).tokens_per_step() == pytest.approx(1.8)
    assert Mtp(2, 0.5).tokens_per_step() == pytest.approx(1.75)  # 1 + 0.5 + 0.25
    assert Mtp(3, 1.0).tokens_per_step() == pytest.approx(4.0)
    assert Mtp(0, 0.9).tokens_per_step() == pytest.approx(1.0)


def test_decode_time_per_token_by_hand() -> None:
    """(step(K + 1 tokens) + K * step(1 token) / L) / (1 + a + ... + a^K) at K = 2, a = 0.5."""
    with_mtp = instance(Mtp(2, 0.5))
    # both are decode steps (decode=True): their dispatch and combine run DeepEP's low-latency
    # kernels, one copy per routed expert, not the prefill kernels' one per destination rank
    verify = float(step_time(with_mtp, 3.0, 60_000.0, 32.0, decode=True).total_s)
    one = float(step_time(with_mtp, 1.0, 60_000.0, 32.0, decode=True).total_s)
    expected = (verify + 2 * one / with_mtp.model.num_layers) / 1.75
    assert float(decode_step_time(with_mtp, 32.0, 60_000.0)) == pytest.approx(expected, rel=1e-12)
    assert float(decode_step_time(instance(None), 32.0, 60_000.0)) == pytest.approx(one, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 256), low=st.floats(0.01, 1.0), high=st.floats(0.01, 1.0))
def test_more_acceptance_never_slows_a_token(batch: int, low: float, high: float) -> None:
    low, high = sorted((low, high))
    slow = float(decode_step_time(instance(Mtp(1, low)), float(batch), 30_000.0))
    fast = float(decode_step_time(instance(Mtp(1, high)), float(batch), 30_000.0))
    assert fast <= slow * (1 + 1e-12)


def test_workload_mtp_needs_an_acceptance() -> None:
    with pytest.raises(ValueError, match="needs mtp_acceptance"):
        ServingOptions(mtp_draft_tokens=1)
    assert ServingOptions().mtp() is None
    assert ServingOptions(mtp_draft_tokens=1, mtp_acceptance=0.85).mtp() == Mtp(1, 0.85)


def test_a_workload_with_mtp_decodes_faster(tmp_path: Any) -> None:
    """The shipped PDD plan on pdd-agent-64k with MTP 1 at 85% acceptance: TPOT falls."""
    from pathlib import Path

    import yaml

    from pddplan.api import scenario_of

    root = Path(__file__).resolve().parent.parent
    plan = root / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"
    spec = yaml.safe_load((root / "workloads" / "pdd-agent-64k.yaml").read_text())
    spec["serving"] = {**spec.get("serving", {}), "mtp_draft_tokens": 1, "mtp_acceptance": 0.85}
    path = tmp_path / "pdd-agent-64k-mtp.yaml"
    path.write_text(yaml.safe_dump(spec))
    base = evaluate(scenario_of(plan, root / "workloads" / "pdd-agent-64k.yaml"))
    mtp = evaluate(scenario_of(plan, path))
    assert mtp.tpot.p90_s < base.tpot.p90_s
    assert mtp.stages["decode"].step_s < base.stages["decode"].step_s


def test_estimate_mtp_flags(cli: Any) -> None:
    args = ("estimate", "--model", "deepseek-v3.2", "--gpu", "gpu-b", "--tp", "16", "--decode-batch", "64")
    plain = json.loads(cli(*args, "--context", "65000", "--json").stdout)
    mtp = json.loads(cli(*args, "--context", "65000", "--mtp", "1", "--accept", "0.85", "--json").stdout)
    assert plain["tokens_per_step"] == 1.0 and mtp["tokens_per_step"] == pytest.approx(1.85)
    assert mtp["tokens_per_s"] > plain["tokens_per_s"]
    assert mtp["decode_step_s"] > plain["decode_step_s"]  # a verify step does more work...
    assert mtp["time_per_output_token_s"] < plain["time_per_output_token_s"]  # ...for more tokens
    one_error_line(cli(*args, "--context", "65000", "--mtp", "1"), "--mtp K and --accept A go together")
    one_error_line(cli(*args, "--context", "65000", "--mtp", "1", "--accept", "1.5"), "--accept = 1.5")
    one_error_line(cli(*args, "--context", "65000", "--mtp", "99", "--accept", "0.5"), "--mtp = 99")
