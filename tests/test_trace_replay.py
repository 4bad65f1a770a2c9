"""`simulate --trace` replays a trace's own requests; `evaluate --trace` evaluates its traffic in
closed form; both on the plan's deployment."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pddplan.trace.replay import load_replay

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The shipped trace as a workload on pdd-agent-64k's deployment, and a PDD plan for it."""
    from typer.testing import CliRunner

    from pddplan.cli import app

    folder = tmp_path_factory.mktemp("traced")
    workload, plan = folder / "traced.yaml", folder / "plan.yaml"
    runner = CliRunner()
    made = runner.invoke(
        app, ["trace", "import", str(MOONCAKE), "--workload-out", str(workload), "--like", "pdd-agent-64k", "--json"]
    )
    assert made.exit_code == 0, made.stderr
    optimized = runner.invoke(
        app, ["optimize", str(workload), "-a", "pdd", "--requests", "2000", "--output", str(plan), "--json"]
    )
    assert optimized.exit_code == 0, optimized.stderr
    return workload, plan


def test_the_replay_is_the_trace_in_order() -> None:
    """The first requests as recorded: arrivals from the first (ms -> s), lengths, and the hits an
    unbounded cache gives (0 for the very first request)."""
    rows = [json.loads(line) for line in MOONCAKE.read_text().splitlines()[:50]]
    replay = load_replay(MOONCAKE, "mooncake", 10**12, 50)
    assert replay.prompt_tokens.tolist() == [r["input_length"] for r in rows]
    assert replay.output_tokens.tolist() == [max(r["output_length"], 1) for r in rows]
    assert replay.arrival_s.tolist() == pytest.approx([(r["timestamp"] - rows[0]["timestamp"]) / 1000 for r in rows])
    assert replay.hit[0] == 0.0
    assert replay.rate_rps == pytest.approx(50 / replay.arrival_s[-1])


def test_simulate_replays_the_trace_requests(cli: Any, traced: tuple[Path, Path], tmp_path: Path) -> None:
    workload, plan = traced
    records = tmp_path / "r.csv"
    result = cli(
        "simulate",
        str(plan),
        str(workload),
        "--trace",
        str(MOONCAKE),
        "--requests",
        "1500",
        "--per-request",
        str(records),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    replay = load_replay(MOONCAKE, "mooncake", 10**12, 1500)
    assert summary["rate_rps"] == pytest.approx(replay.rate_rps)
    with records.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["prompt_tokens"]) for r in rows] == replay.prompt_tokens.tolist()


def test_evaluate_on_a_trace_is_evaluate_on_the_workload_built_from_it(cli: Any, traced: tuple[Path, Path]) -> None:
    workload, plan = traced
    on_file = json.loads(cli("evaluate", str(plan), str(workload), "--json").stdout)
    on_trace = cli("evaluate", str(plan), "pdd-agent-64k", "--trace", str(MOONCAKE), "--json")
    assert on_trace.exit_code == 0, on_trace.stderr
    figures = json.loads(on_trace.stdout)
    for key in ("rate_rps", "ttft_p90_s", "ttft_p99_s", "cost_usd_per_hour", "rld_token_share"):
        assert figures[key] == pytest.approx(on_file[key], rel=1e-9), key


def test_a_smaller_cache_raises_the_replayed_ttft(cli: Any, traced: tuple[Path, Path], tmp_path: Path) -> None:
    """Fewer prefix hits mean more tokens to prefill and more KV to move: the tail cannot improve.

    On the optimized plan with its prefill pool doubled: the replay starts on a cold cache and
    follows the trace's bursts, which the plan, sized and verified on the trace's histogram, does
    not carry (its prefill ~95% busy, TTFT P90 ~40 s); with a 50 GB cache it would shed most of the
    traffic, and its revenue would fall with the goodput rather than rise with the billed tokens."""
    workload, optimized = traced
    spec = yaml.safe_load(optimized.read_text())
    spec["prefill"]["count"] *= 2
    plan = tmp_path / "doubled.yaml"
    plan.write_text(yaml.safe_dump(spec))
    runs = {
        capacity: json.loads(
            cli(
                "simulate",
                str(plan),
                str(workload),
                "--trace",
                str(MOONCAKE),
                "--requests",
                "2000",
                *(("--cache-capacity", capacity) if capacity else ()),
                "--json",
            ).stdout
        )
        for capacity in (None, "50GB")
    }
    assert runs[None]["sla_met"] and runs["50GB"]["sla_met"]  # both serve the replay
    assert runs["50GB"]["ttft_p90_s"] > runs[None]["ttft_p90_s"]
    # and the revenue follows the replayed hits: fewer cached tokens billed at the discount
    assert runs["50GB"]["revenue_usd_per_hour"] > runs[None]["revenue_usd_per_hour"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--trace", str(MOONCAKE)), "more than workload pdd-agent-64k's longest"),
        (("--cache-capacity", "10GB"), "--cache-capacity goes with --trace"),
        (("--trace", str(MOONCAKE), "--trace-format", "azure"), "--trace-format = 'azure'"),
    ],
)
def test_bad_trace_options(cli: Any, args: tuple[str, ...], message: str) -> None:
    plan = ROOT / "tests" / "data" / "export" / "pdd-agent-64k-pdd.yaml"
    for command in ("simulate", "evaluate"):
        if command == "evaluate" and "longest" in message:
            continue  # evaluate builds the workload from the trace: no prompt is too long
        result = cli(command, str(plan), "pdd-agent-64k", *args)
        assert result.exit_code == 2, (command, result.stdout)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("command", "timestamps", "words"),
    [
        # two requests a nanosecond apart: 2e9 req/s, simulated with overflow warnings and exit 0
        ("simulate", (0, 1e-9), "the replayed requests' mean rate = "),
        # the same trace made a workload whose error named `--workload-out`, an option evaluate lacks
        ("evaluate", (0, 1e-9), "its workload: arrival.rate_rps = "),
        ("evaluate", (5, 5), "the trace spans no time"),  # named no file
    ],
)
def test_a_trace_too_fast_or_spanning_no_time_is_one_line_naming_it(
    cli: Any, tmp_path: Path, command: str, timestamps: tuple[float, float], words: str
) -> None:
    from cli_results import one_error_line

    trace = tmp_path / "t.jsonl"
    rows = [
        {"timestamp": t, "input_length": 100, "output_length": 10, "hash_ids": [i]} for i, t in enumerate(timestamps)
    ]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    plan = str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml")
    one_error_line(cli(command, plan, "pdd-agent-64k", "--trace", str(trace)), f"{trace}: ", words)
