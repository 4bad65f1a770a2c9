"""`pddplan evaluate PLAN WORKLOAD` and `pddplan simulate PLAN WORKLOAD`: their JSON, per-request
records, determinism, cost by hand from the shipped profiles, and one-line errors (exit 2) for
plans that cannot run.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_results import json_of, one_error_line

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "tests" / "data" / "plans"
MODERATE = str(PLANS / "pdd-agent-64k-moderate.yaml")
SMALL_WORKLOAD = str(PLANS / "small-workload.yaml")
SMALL_PDD = str(PLANS / "small-pdd.yaml")

SUMMARY_KEYS = (
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p90_s",
    "goodput_rps",
    "cost_usd_per_hour",
    "bcr",
    "rld_token_share",
    "link_utilization",
)


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def write_plan(tmp_path: Path, changes: Any, base: str = MODERATE, name: str = "plan.yaml") -> str:
    data = copy.deepcopy(read_yaml(Path(base)))
    changes(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


# -- JSON ---------------------------------------------------------------------------------------------------


def test_evaluate_json(cli: Any, tmp_path: Path) -> None:
    # at the moderate plan's own 2.6 req/s its one expert-parallel prefill instance is ~88% busy and
    # misses the TTFT SLA (a lone prefill runs on one data-parallel rank); at 1.3 it meets it
    plan = write_plan(tmp_path, lambda d: d.update(rate_rps=1.3))
    out = json_of(cli("evaluate", plan, "pdd-agent-64k", "--json"))
    for key in SUMMARY_KEYS:
        assert isinstance(out[key], float), key
    assert out["architecture"] == "pdd"
    assert out["rate_rps"] == 1.3  # the plan's rate_rps, not the workload's 4
    assert out["sla_met"] is True
    assert out["ttft_p50_s"] <= out["ttft_p90_s"] <= out["ttft_p99_s"]
    assert out["bcr"] == pytest.approx(out["goodput_rps"] * 3600 / out["cost_usd_per_hour"])
    assert {p["pipeline"] for p in out["pipelines"]} == {"P-MD", "P-RLD-MD"}


def test_evaluate_rate_option(cli: Any, tmp_path: Path) -> None:
    # the plan at 0.2 req/s on its expert-parallel prefill instance, whose data-parallel ranks take
    # separate requests: the fewer ranks busy beside a request, the less its steps' experts carry
    # and the less a longer piece beside it stretches them, so half the rate brings a little less
    # work per request
    plan = write_plan(tmp_path, lambda d: d.update(rate_rps=0.2))
    out = json_of(cli("evaluate", plan, "pdd-agent-64k", "--rate", "0.1", "--json"))
    assert out["rate_rps"] == 0.1
    base = json_of(cli("evaluate", plan, "pdd-agent-64k", "--json"))
    assert base["rate_rps"] == 0.2
    # half the rate: half the load or a little less
    ratio = out["stages"]["prefill"]["utilization"] / (base["stages"]["prefill"]["utilization"] / 2)
    assert 0.9 < ratio <= 1.0


def test_simulate_json(cli: Any) -> None:
    out = json_of(cli("simulate", MODERATE, "pdd-agent-64k", "--requests", "3000", "--json"))
    for key in SUMMARY_KEYS:
        assert isinstance(out[key], float), key
    assert out["requests"] == 3000
    assert out["requests_summarized"] == 2850  # the first 5% are warm-up
    assert 0 < out["link_utilization"] < 1
    assert 0 < out["rld_token_share"] < 0.2
    assert set(out["utilization"]) == {"prefill", "relay", "decode"}
    assert {p["pipeline"] for p in out["pipelines"]} <= {"P-MD", "P-RLD-MD", "P-RLD"}


def test_unstable_plan_reports_null_percentiles(cli: Any, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, lambda d: d.update(rate_rps=40.0))
    out = json_of(cli("evaluate", plan, "pdd-agent-64k", "--json"))
    assert out["ttft_p50_s"] is None and out["ttft_p99_s"] is None
    assert out["goodput_rps"] == 0
    assert out["sla_violations"][0].startswith("unstable")


def test_human_output_goes_to_stdout(cli: Any) -> None:
    for command in (["evaluate"], ["simulate", "--requests", "500"]):
        result = cli(command[0], MODERATE, "pdd-agent-64k", *command[1:])
        assert result.exit_code == 0, result.stderr
        assert result.stderr == ""
        assert "TTFT P90" in result.stdout and "BCR" in result.stdout
        assert "P-RLD-MD" in result.stdout


def test_workload_given_as_a_path(cli: Any) -> None:
    by_name = json_of(cli("evaluate", MODERATE, "pdd-agent-64k", "--json"))
    by_path = json_of(cli("evaluate", MODERATE, str(ROOT / "workloads" / "pdd-agent-64k.yaml"), "--json"))
    assert by_name == by_path


# -- cost by hand ---------------------------------------------------------------------------------------------


def rental(gpu: str) -> float:
    return float(read_yaml(ROOT / "hardware_profiles" / f"{gpu}.yaml")["price"]["rental_usd_per_gpu_hour"]["value"])


def line_usd_per_month(workload: Path, option: str) -> float:
    lines = read_yaml(workload)["deployment"]["wan_lines"]
    return float(next(line for line in lines if line["name"] == option)["usd_per_month"])


@pytest.mark.parametrize("command", ["evaluate", "simulate"])
def test_cost_per_hour_by_hand(cli: Any, command: str) -> None:
    """GPUs x $/GPU-hour per role (prices read from the shipped profiles) + lines x $/month / 730."""
    plan = read_yaml(Path(MODERATE))
    gpu_cost = sum(
        plan[role]["tp"] * plan[role]["count"] * rental(plan[role]["gpu"]) for role in ("prefill", "relay", "decode")
    )
    lines = sum(
        lease["count"] * line_usd_per_month(ROOT / "workloads" / "pdd-agent-64k.yaml", lease["option"])
        for lease in plan["wan"]
    )
    expected = gpu_cost + lines / 730
    # the plan: 16 + 16 gpu-a at 1.37, 16 gpu-b at 1.7125, one 40 Gbps line at 2,450 $/month
    assert expected == pytest.approx(32 * 1.37 + 16 * 1.7125 + 2450 / 730)
    args = ["--requests", "500"] if command == "simulate" else []
    out = json_of(cli(command, MODERATE, "pdd-agent-64k", *args, "--json"))
    assert out["cost_usd_per_hour"] == pytest.approx(expected, rel=1e-12)


def test_cost_of_the_small_plans_by_hand(cli: Any) -> None:
    lines = line_usd_per_month(Path(SMALL_WORKLOAD), "line-1g")
    intra = json_of(cli("evaluate", str(PLANS / "small-pd-intra.yaml"), SMALL_WORKLOAD, "--json"))
    assert intra["cost_usd_per_hour"] == pytest.approx(4 * rental("gpu-a"))
    cross = json_of(cli("evaluate", str(PLANS / "small-pd-cross.yaml"), SMALL_WORKLOAD, "--json"))
    assert cross["cost_usd_per_hour"] == pytest.approx(2 * rental("gpu-a") + 2 * rental("gpu-b") + 4 * lines / 730)
    pdd = json_of(cli("evaluate", SMALL_PDD, SMALL_WORKLOAD, "--json"))
    assert pdd["cost_usd_per_hour"] == pytest.approx(3 * rental("gpu-a") + 2 * rental("gpu-b") + 2 * lines / 730)


# -- per-request records ------------------------------------------------------------------------------------


def test_per_request_csv(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "requests.csv"
    result = cli("simulate", SMALL_PDD, SMALL_WORKLOAD, "--requests", "2000", "--per-request", str(path), "--json")
    assert result.exit_code == 0 and result.stderr == f"wrote {path}\n"  # it wrote silently before
    out = json.loads(result.stdout)
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames
        rows = list(reader)
    assert header is not None
    assert header[:1] == ["request"]
    for column in ("request", "ttft_s", "pipeline", "tpot_s", "relay_tokens", "output_tokens", "wan_bytes"):
        assert column in header
    assert len(rows) == 2000
    assert [int(row["request"]) for row in rows] == list(range(2000))
    assert {row["pipeline"] for row in rows} <= {"P-MD", "P-RLD-MD", "P-RLD"}
    for row in rows:
        assert float(row["ttft_s"]) > 0
        assert float(row["relay_tokens"]) <= int(row["output_tokens"])
    kept = rows[int(2000 * 0.05) :]
    singular = sum(row["pipeline"] == "P-RLD" for row in kept) / len(kept)
    assert out["singular_share"] == pytest.approx(singular)


def test_per_request_json_lines(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    result = cli("simulate", SMALL_PDD, SMALL_WORKLOAD, "--requests", "300", "--per-request", str(path), "--json")
    assert result.exit_code == 0 and result.stderr == f"wrote {path}\n"
    json.loads(result.stdout)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == 300
    assert records[7]["request"] == 7
    assert {"request", "ttft_s", "pipeline", "relay_tokens", "finish_s"} <= set(records[0])


# -- determinism ------------------------------------------------------------------------------------------------


def test_same_seed_same_bytes(cli: Any, tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b", "c"):
        seed = "7" if name != "c" else "8"
        records = tmp_path / f"{name}.csv"
        result = cli(
            "simulate", MODERATE, "pdd-agent-64k", "--requests", "3000", "--seed", seed, "--per-request",
            str(records), "--json",
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        runs.append((result.stdout, records.read_bytes()))
    (out_a, csv_a), (out_b, csv_b), (out_c, csv_c) = runs
    assert out_a == out_b
    assert csv_a == csv_b
    assert out_a != out_c
    assert csv_a != csv_c


def test_default_seed_is_reproducible(cli: Any) -> None:
    first = cli("simulate", SMALL_PDD, SMALL_WORKLOAD, "--requests", "2000", "--json")
    second = cli("simulate", SMALL_PDD, SMALL_WORKLOAD, "--requests", "2000", "--json")
    explicit = cli("simulate", SMALL_PDD, SMALL_WORKLOAD, "--requests", "2000", "--seed", "0", "--json")
    assert first.stdout == second.stdout == explicit.stdout


# -- bad plans: exit 2, one line -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "simulate"])
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            lambda d: d["decode"].update(gpu="gpu-a"),
            "decode.gpu = 'gpu-a': datacenter dc-b offers only gpu-b",
            id="gpu-type-missing",
        ),
        pytest.param(
            lambda d: d["prefill"].update(tp=1),
            "prefill: model 'deepseek-v3.2' does not fit on gpu-a at tp=1",
            id="model-does-not-fit",
        ),
        pytest.param(lambda d: d["decode"].update(count=0), "decode.count = 0", id="no-main-decoder"),
        pytest.param(
            lambda d: d["wan"][0].update(option="dark-fiber"),
            "wan[0].option = 'dark-fiber': not a WAN option of the workload (express-100g, express-40g)",
            id="unknown-wan-option",
        ),
        pytest.param(
            lambda d: d["decode"].update(count=20), "decode: 320 x gpu-b in dc-b exceeds the 256", id="too-many-gpus"
        ),
        pytest.param(
            lambda d: d["relay"].update(datacenter="dc-b"),
            "relay.datacenter = 'dc-b': the relay must sit with prefill in 'dc-a'",
            id="relay-wrong-datacenter",
        ),
        pytest.param(lambda d: d.update(replicas=2), "replicas: unknown field", id="unknown-key"),
        pytest.param(
            lambda d: d["routing"].update(hit_treshold=0.8),
            "routing.hit_treshold: unknown field",
            id="misspelt-nested-key",
        ),
        pytest.param(
            lambda d: d["wan"][0].update(count=9),
            "wan[0].count = 9: option express-40g allows at most 4",
            id="too-many-lines",
        ),
        pytest.param(
            lambda d: d["decode"].update(datacenter="dc-c"),
            "decode.datacenter = 'dc-c': not a datacenter",
            id="unknown-datacenter",
        ),
    ],
)
def test_bad_plan_is_one_error_line(cli: Any, tmp_path: Path, command: str, change: Any, expected: str) -> None:
    plan = write_plan(tmp_path, change)
    args = ["--requests", "200"] if command == "simulate" else []
    line = one_error_line(cli(command, plan, "pdd-agent-64k", *args))
    assert expected in line
    assert plan in line  # the message names the plan file


def test_missing_and_malformed_plan_files(cli: Any, tmp_path: Path) -> None:
    assert "file not found" in one_error_line(cli("evaluate", str(tmp_path / "nope.yaml"), "pdd-agent-64k"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("architecture: pdd\nprefill: [unclosed\n", encoding="utf-8")
    assert "not valid YAML" in one_error_line(cli("simulate", str(broken), "pdd-agent-64k"))
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n", encoding="utf-8")
    assert "expected a mapping" in one_error_line(cli("evaluate", str(listed), "pdd-agent-64k"))


def test_unknown_workload(cli: Any) -> None:
    line = one_error_line(cli("evaluate", MODERATE, "pdd-agent-65k"))
    assert "unknown workload 'pdd-agent-65k'" in line


def test_bad_options(cli: Any) -> None:
    assert "--requests = 0" in one_error_line(cli("simulate", MODERATE, "pdd-agent-64k", "--requests", "0"))
    assert "--rate = 0.0" in one_error_line(cli("evaluate", MODERATE, "pdd-agent-64k", "--rate", "0"))


def test_infinite_rate_is_one_error_line(cli: Any) -> None:
    """Guards evaluate's --rate check: `--rate inf` passes `> 0` but is no rate; it must be exit 2
    with one error line, not an evaluation at an infinite rate."""
    line = one_error_line(cli("evaluate", SMALL_PDD, SMALL_WORKLOAD, "--rate", "inf", "--json"))
    assert "--rate = inf: must be above 0 and at most" in line


@pytest.mark.parametrize(
    ("trace", "expected"),
    [
        ("time_s,capacity_fraction\n0,1.0\n1,1.5\n", "capacity_fraction = 1.5"),
        ("time_s,capacity_fraction\n0,1.0\n0,0.5\n", "times must increase"),
        ("t,f\n0,1.0\n", "expected CSV columns time_s,capacity_fraction"),
    ],
)
@pytest.mark.parametrize("command", ["evaluate", "simulate"])
def test_bad_capacity_trace_is_one_error_line(
    cli: Any, tmp_path: Path, trace: str, expected: str, command: str
) -> None:
    """The trace file is read relative to the workload file's folder."""
    workload = read_yaml(Path(SMALL_WORKLOAD))
    (tmp_path / "capacity-trace.csv").write_text(trace, encoding="utf-8")
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(workload), encoding="utf-8")
    plan = write_plan(tmp_path, lambda d: d.update(wan=[{"option": "line-trace", "count": 2}]), base=SMALL_PDD)
    args = ["--requests", "200"] if command == "simulate" else []
    line = one_error_line(cli(command, plan, str(tmp_path / "w.yaml"), *args))
    assert expected in line
    assert "capacity-trace.csv" in line


@pytest.mark.parametrize("command", ["evaluate", "simulate"])
def test_trace_workload_runs_from_its_own_folder(cli: Any, tmp_path: Path, command: str) -> None:
    """small-workload.yaml's line-trace reads capacity-trace.csv next to it, whatever the cwd."""
    plan = write_plan(tmp_path, lambda d: d.update(wan=[{"option": "line-trace", "count": 4}]), base=SMALL_PDD)
    args = ["--requests", "500"] if command == "simulate" else []
    out = json_of(cli(command, plan, SMALL_WORKLOAD, *args, "--json"))
    assert out["link_utilization"] > 0
    steady = json_of(
        cli(
            command,
            write_plan(
                tmp_path,
                lambda d: d.update(wan=[{"option": "line-1g", "count": 4}]),
                base=SMALL_PDD,
                name="steady.yaml",
            ),
            SMALL_WORKLOAD,
            *args,
            "--json",
        )
    )
    # the trace's mean available fraction is below 1: the same bytes load the line more
    assert out["link_utilization"] > steady["link_utilization"]
