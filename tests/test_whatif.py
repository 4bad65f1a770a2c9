"""`pddplan whatif`: a plan under one change, degraded modes said plainly, and bad changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pddplan.analyses.whatif import whatif
from pddplan.errors import InputError
from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.scenarios.failures import Change, parse_rate

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
    """Two main decoders -> one: every TTFT percentile and TPOT are at least as high, to the
    resolution the TTFT quantiles are computed to (bisection to 1 ms or 0.1%,
    `mixture_quantiles`)."""
    result = _run(HAND, Change(fail="instance:decode"))
    assert result.mode == "one decode instance down, 1 left"
    for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p90_s"):
        before = getattr(result.before, key)
        resolution = max(1e-3, 1e-3 * before) if key.startswith("ttft") else 1e-9
        assert getattr(result.after, key) >= before - resolution, key


def test_losing_one_of_two_lines_never_speeds_the_transfer(tmp_path: Path) -> None:
    plan = yaml.safe_load(HAND.read_text())
    plan["wan"] = [{"option": "express-100g", "count": 2}]
    path = tmp_path / "two-lines.yaml"
    path.write_text(yaml.safe_dump(plan))
    result = _run(path, Change(fail="line:express-100g"))
    assert "one express-100g line down" in result.mode
    assert result.after.ttft_p99_s >= result.before.ttft_p99_s - 1e-9


def test_the_wan_down_leaves_the_relay_or_nothing() -> None:
    """With its only line down, a PDD plan with relay instances decodes everything on them in
    datacenter A (intra-datacenter PD on the relay's GPUs); with the relay on the prefill
    instances there is nothing to fall back to: all traffic is shed."""
    dedicated = _run(HAND, Change(fail="line:express-100g"))
    assert dedicated.after.architecture == "pd-intra" and "relay instance(s) decode every request" in dedicated.mode
    colocated = _run(OPTIMIZED, Change(fail="line:express-40g"))
    assert colocated.after is None and "shed" in colocated.mode


def test_the_only_relay_down_sends_everything_direct() -> None:
    result = _run(HAND, Change(fail="instance:relay"))
    assert result.after.rld_token_share == 0.0 and result.before.rld_token_share > 0


def test_simulated_figures_follow_the_change() -> None:
    result = _run(HAND, Change(rate="x1.25"), simulate_requests=2000)
    assert result.simulated_after.rate_rps == pytest.approx(5.0)
    assert result.simulated_before.rate_rps == pytest.approx(4.0)


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


# -- the transient of a line failure --------------------------------------------------------------------
def two_lines(tmp_path: Path) -> Path:
    plan = yaml.safe_load(HAND.read_text())
    plan["wan"] = [{"option": "express-40g", "count": 2}]
    path = tmp_path / "two-lines.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def test_stepped_path_keeps_its_share_from_the_failure_on() -> None:
    import numpy as np

    from pddplan.net.fluctuation import CapacityPath, SteppedPath
    from pddplan.specs.workload import Fluctuation

    stepped = SteppedPath(CapacityPath(Fluctuation(kind="none"), np.random.default_rng(0)), 100.0, 0.5)
    assert not stepped.constant
    assert stepped.next_step(10.0) == (1.0, 100.0)  # full capacity until the failure, a change at it
    assert stepped.next_step(100.0)[0] == 0.5 and stepped.next_step(500.0)[0] == 0.5


def test_a_line_failing_mid_run_never_speeds_a_request_in_flight(tmp_path: Path) -> None:
    """Same requests (same seed) with and without the failure at t: every request whose transfer was
    in flight at t gets its first token no sooner, and the transient reports them."""
    import numpy as np

    from pddplan.scenarios import build_scenario
    from pddplan.simulate.engine import simulate_requests

    path = two_lines(tmp_path)
    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    scenario = build_scenario(load_plan(str(path)), inputs)
    healthy, _ = simulate_requests(scenario, 3000, 0)
    # fail the line in the middle of the first transfer that starts after 300 s
    crossing = np.nonzero((healthy.wan_bytes > 0) & (healthy.prefill_end_s > 300.0))[0][0]
    at = float(healthy.prefill_end_s[crossing] + healthy.first_token_s[crossing]) / 2
    failed, stats = simulate_requests(scenario, 3000, 0, link_change=(at, 0.5), record_link=True)
    in_flight = (failed.wan_bytes > 0) & (failed.prefill_end_s <= at) & (failed.first_token_s > at)
    assert in_flight.any()
    assert (failed.ttft_s[in_flight] >= healthy.ttft_s[in_flight] - 1e-9).all()
    # the pool really lost half its capacity: the transfers after it take longer in all
    later = (failed.wan_bytes > 0) & (failed.prefill_end_s > at)
    slower = (failed.first_token_s - failed.prefill_end_s)[later].sum()
    assert slower > (healthy.first_token_s - healthy.prefill_end_s)[later].sum()  # by 0.5%: flows rarely contend
    before = failed.arrival_s < 200.0  # done long before the failure: untouched
    assert (abs(failed.ttft_s[before] - healthy.ttft_s[before]) < 1e-9).mean() > 0.99
    assert stats.link_timeline is not None and stats.link_timeline[0] == (0.0, 0)
    result = _run(path, Change(fail="line:express-40g", at_s=at), simulate_requests=3000)
    transient = result.transient
    assert transient.in_flight == int(in_flight.sum())
    assert transient.capacity_share_left == pytest.approx(0.5)
    assert transient.in_flight_ttft_max_s == pytest.approx(float(failed.ttft_s[in_flight].max()))
    assert transient.settle_s is None or transient.settle_s >= 0
    again = _run(path, Change(fail="line:express-40g", at_s=at), simulate_requests=3000)
    assert again.transient == transient  # a seed gives one answer


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--fail", "line:express-40g", "--at", "300"), "--at simulates the transient: add --simulate"),
        (("--fail", "instance:decode", "--simulate", "--at", "300"), "--at applies to one line failure alone"),
        (("--fail", "line:express-40g", "--rate", "x2", "--simulate", "--at", "300"), "--at applies to one line"),
        (("--fail", "line:express-40g", "--simulate", "--at", "nan"), "--at = nan"),
        (("--fail", "line:express-40g", "--simulate", "--requests", "1000", "--at", "99999"), "pick a time inside"),
    ],
)
def test_bad_transients(cli: Any, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    from cli_results import one_error_line

    one_error_line(cli("whatif", str(two_lines(tmp_path)), "pdd-agent-64k", *args), message)


def test_a_wan_cut_has_no_transient(cli: Any) -> None:
    from cli_results import one_error_line

    result = cli(
        "whatif",
        str(HAND),
        "pdd-agent-64k",
        "--fail",
        "line:express-100g",
        "--simulate",
        "--requests",
        "2000",
        "--at",
        "100",
    )
    one_error_line(result, "leaves no line")


def test_transient_table(cli: Any, tmp_path: Path) -> None:
    result = cli(
        "whatif",
        str(two_lines(tmp_path)),
        "pdd-agent-64k",
        "--fail",
        "line:express-40g",
        "--simulate",
        "--requests",
        "3000",
        "--at",
        "300",
    )
    assert result.exit_code == 0, result.stderr
    assert "transient: the line fails at 300 s (50% capacity left)" in result.stdout
    assert "requests in flight then" in result.stdout and "settled after" in result.stdout
