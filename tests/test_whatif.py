"""`pddplan whatif`: a plan under one change, degraded modes said plainly, and bad changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pddplan.errors import InputError
from pddplan.input_set import load_input_set
from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.whatif import Change, parse_rate, whatif

ROOT = Path(__file__).resolve().parent.parent
HAND = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"  # dedicated relay, two main decoders
OPTIMIZED = ROOT / "tests" / "data" / "export" / "pdd-agent-64k-pdd.yaml"  # relay on prefill


def _run(plan: Path, change: Change, **kw: Any) -> Any:
    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    return whatif(inputs, load_plan(str(plan)), change, **kw)


def test_rates() -> None:
    assert parse_rate("x1.5", 4.0) == pytest.approx(6.0)
    assert parse_rate("6", 4.0) == 6.0
    for bad in ("fast", "x0", "-3", "x1e9"):
        with pytest.raises(InputError):
            parse_rate(bad, 4.0)


def test_losing_a_decoder_never_lowers_the_ttft_tail() -> None:
    """Two main decoders -> one: every TTFT percentile and TPOT are at least as high."""
    result = _run(HAND, Change(fail="instance:decode"))
    assert result.mode == "one decode instance down, 1 left"
    for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p90_s"):
        assert result.after[key] >= result.before[key] - 1e-9, key


def test_losing_one_of_two_lines_never_speeds_the_transfer(tmp_path: Path) -> None:
    plan = yaml.safe_load(HAND.read_text())
    plan["wan"] = [{"option": "express-100g", "count": 2}]
    path = tmp_path / "two-lines.yaml"
    path.write_text(yaml.safe_dump(plan))
    result = _run(path, Change(fail="line:express-100g"))
    assert "one express-100g line down" in result.mode
    assert result.after["ttft_p99_s"] >= result.before["ttft_p99_s"] - 1e-9


def test_the_wan_down_leaves_the_relay_or_nothing() -> None:
    """With its only line down, a PDD plan with relay instances decodes everything on them in
    datacenter A (intra-datacenter PD on the relay's GPUs); with the relay on the prefill
    instances there is nothing to fall back to: all traffic is shed."""
    dedicated = _run(HAND, Change(fail="line:express-100g"))
    assert dedicated.after["architecture"] == "pd-intra" and "relay instance(s) decode every request" in dedicated.mode
    colocated = _run(OPTIMIZED, Change(fail="line:express-40g"))
    assert colocated.after is None and "shed" in colocated.mode


def test_the_only_relay_down_sends_everything_direct() -> None:
    result = _run(HAND, Change(fail="instance:relay"))
    assert result.after["rld_token_share"] == 0.0 and result.before["rld_token_share"] > 0


def test_simulated_figures_follow_the_change() -> None:
    result = _run(HAND, Change(rate="x1.25"), simulate_requests=2000)
    assert result.simulated_after["rate_rps"] == pytest.approx(5.0)
    assert result.simulated_before["rate_rps"] == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a change"),
        (("--fail", "line:nope"), "leases no line of option 'nope'"),
        (("--fail", "instance:router"), "expected a role"),
        (("--fail", "gpu:3"), "expected line:OPTION or instance:ROLE"),
        (("--hit-shift", "2"), "--hit-shift = 2.0"),
        (("--rate", "lots"), "--rate = 'lots'"),
    ],
)
def test_bad_changes(cli: Any, args: tuple[str, ...], message: str) -> None:
    result = cli("whatif", str(HAND), "pdd-agent-64k", *args)
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_whatif_table_and_json(cli: Any) -> None:
    table = cli("whatif", str(HAND), "pdd-agent-64k", "--fail", "line:express-100g")
    assert table.exit_code == 0 and "mode: the WAN is down" in table.stdout
    data = json.loads(cli("whatif", str(OPTIMIZED), "pdd-agent-64k", "--fail", "line:express-40g", "--json").stdout)
    assert data["after"] is None
