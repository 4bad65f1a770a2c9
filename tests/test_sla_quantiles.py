"""SLA targets at P50, P90 and P99 of TTFT and TPOT (issue 36, item 2): each is reported against
its target, checked in the closed form and in simulation, sizes the plan, and is named when it
binds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of, one_error_line

from pddplan.evaluate.verdict import Tails, sla_violations
from pddplan.specs.workload import Sla

ROOT = Path(__file__).resolve().parent.parent
CHAT = (ROOT / "workloads" / "chat-short-lowhit.yaml").read_text(encoding="utf-8")
CHAT_SLA = "sla: {ttft_p90_s: 2.0, ttft_p99_s: 5.0, tpot_p90_s: 0.05}"


def with_sla(tmp_path: Path, sla: str) -> Path:
    assert CHAT_SLA in CHAT
    path = tmp_path / "w.yaml"
    path.write_text(CHAT.replace(CHAT_SLA, sla, 1), encoding="utf-8")
    return path


def test_targets_in_quantile_order_with_their_names() -> None:
    sla = Sla(ttft_p50_s=0.5, ttft_p90_s=2.0, ttft_p99_s=5.0, tpot_p99_s=0.04, tpot_p50_s=0.02)
    assert [(t.name, t.key, t.target_s) for t in sla.targets()] == [
        ("TTFT P50", "ttft_p50_s", 0.5),
        ("TTFT P90", "ttft_p90_s", 2.0),
        ("TTFT P99", "ttft_p99_s", 5.0),
        ("TPOT P50", "tpot_p50_s", 0.02),
        ("TPOT P99", "tpot_p99_s", 0.04),
    ]
    # a sized decode step must meet the tightest TPOT target; a request counts toward goodput
    # within the loosest (as within TTFT's P99)
    assert (sla.tpot_step_limit_s(), sla.tpot_per_request_s()) == (0.02, 0.04)
    assert sla.scaled(2.0).tpot_p99_s == 0.08 and sla.scaled(2.0).tpot_p90_s is None
    assert Sla(ttft_p90_s=1, ttft_p99_s=2).tpot_step_limit_s() == float("inf")


def test_each_percentile_over_its_target_is_one_violation() -> None:
    sla = Sla(ttft_p50_s=0.5, ttft_p90_s=2.0, ttft_p99_s=5.0, tpot_p99_s=0.04)
    tails = Tails.of((0.6, 1.0, 4.0), (0.02, 0.03, 0.05))
    assert sla_violations(sla, tails) == ["TTFT P50 0.60 s > 0.5 s", "TPOT P99 50.0 ms > 40 ms"]


@pytest.mark.parametrize(
    ("sla", "message"),
    [
        ("{ttft_p50_s: 3, ttft_p90_s: 2.0, ttft_p99_s: 5.0}", "ttft_p90_s (2.0) is below ttft_p50_s (3.0)"),
        ("{ttft_p90_s: 2.0, ttft_p99_s: 5.0, tpot_p50_s: 0.05, tpot_p99_s: 0.04}", "tpot_p99_s (0.04) is below"),
        ("{ttft_p90_s: 2.0, ttft_p99_s: 5.0, tpot_p99_s: -1}", "sla.tpot_p99_s = -1"),
    ],
)
def test_disordered_or_negative_targets_are_one_line(cli: Any, tmp_path: Path, sla: str, message: str) -> None:
    path = with_sla(tmp_path, f"sla: {sla}")
    one_error_line(cli("workloads", "show", str(path)), str(path), message)


def test_a_p99_tpot_target_sizes_the_decoders_and_is_reported(cli: Any, tmp_path: Path) -> None:
    loose = json_of(cli("optimize", str(with_sla(tmp_path, CHAT_SLA)), "-a", "pd-intra", "--json"))
    tight_sla = "sla: {ttft_p90_s: 2.0, ttft_p99_s: 5.0, tpot_p99_s: 0.02}"
    tight = json_of(cli("optimize", str(with_sla(tmp_path, tight_sla)), "-a", "pd-intra", "--json"))
    loose_plan, tight_plan = loose["architectures"][0], tight["architectures"][0]
    assert tight_plan["feasible"] and tight_plan["tpot_p99_s"] <= 0.02 < loose_plan["tpot_p99_s"]
    assert tight_plan["cost_usd_per_hour"] > loose_plan["cost_usd_per_hour"]  # smaller batches cost more


def test_an_unreachable_p50_is_named_when_it_binds(cli: Any, tmp_path: Path) -> None:
    path = with_sla(tmp_path, "sla: {ttft_p50_s: 0.001, ttft_p90_s: 2.0, ttft_p99_s: 5.0}")
    result = cli("optimize", str(path), "-a", "pd-intra")
    assert result.exit_code == 3  # the report still shows the architecture table on stdout
    assert "SLA (TTFT P50 0.001 s, P90 2 s, P99 5 s)" in " ".join(result.stdout.split())
    [line] = result.stderr.strip().splitlines()
    assert "no prefill pool meets TTFT P50 0.001 s / TTFT P90 2 s / TTFT P99 5 s" in line
