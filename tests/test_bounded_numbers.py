"""Numbers are bounded as well as finite: a typo of six extra zeros (or a hostile file) gets one
line naming the field or flag and exit 2, instead of a hang (a 1e30-token prompt, a one-token
chunk, a 1 ns fluctuation step) or runaway memory (a billion bathtub points, 1e8 simulated
requests). Each case below hung, ran out of memory or raised a traceback before the bounds."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_results import one_error_line

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "workloads" / "pdd-agent-64k.yaml"
SMALL_PLAN = str(ROOT / "tests" / "data" / "plans" / "small-pdd.yaml")
SMALL_WORKLOAD = str(ROOT / "tests" / "data" / "plans" / "small-workload.yaml")


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("tokens: 64512}", "tokens: 1000000000000000}", "prompt_tokens.tokens = 1000000000000000"),
        ("tokens: 64512}", "tokens: 10000001}", "less than or equal to 10000000"),
        ("  chunk_tokens: 8192\n", "  chunk_tokens: 1\n", "serving.chunk_tokens = 1"),
        ("correlation_s: 10, step_s: 1}", "correlation_s: 10, step_s: 1.0e-9}", "step_s = 1e-09"),
        ("  rate_rps: 4.0\n", "  rate_rps: 1.0e+300\n", "arrival.rate_rps = 1e+300"),
        ("      capacity_gbps: 100\n", "      capacity_gbps: 1.0e+300\n", "capacity_gbps = 1e+300"),
        # 5 bytes/s: the simulation spun for minutes on one transfer's events
        ("      capacity_gbps: 100\n", '      capacity_gbps: "5B/s"\n', "greater than or equal to 0.001"),
        ("  drc_retention_s: 60\n", "  drc_retention_s: 1.0e+12\n", "serving.drc_retention_s = 1000000000000.0"),
    ],
)
def test_workload_numbers_are_bounded(cli: object, tmp_path: Path, old: str, new: str, fragment: str) -> None:
    text = AGENT.read_text(encoding="utf-8")
    assert old in text, old
    path = tmp_path / "w.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), fragment)  # type: ignore[operator]


def test_a_histogram_of_a_million_bins_is_refused(cli: object, tmp_path: Path) -> None:
    text = AGENT.read_text(encoding="utf-8")
    bins = ", ".join(f"{{low_tokens: {i + 1}, high_tokens: {i + 1}, share: 1.0e-6}}" for i in range(1001))
    path = tmp_path / "w.yaml"
    path.write_text(
        text.replace(
            "prompt_tokens: {kind: fixed, tokens: 64512}", f"prompt_tokens: {{kind: histogram, bins: [{bins}]}}"
        ),
        encoding="utf-8",
    )
    one_error_line(cli("workloads", "show", str(path)), "prompt_tokens.bins", "at most 1000")  # type: ignore[operator]


def test_tp_options_may_not_be_empty(cli: object, tmp_path: Path) -> None:
    """An empty list used to be replaced by the defaults without a word."""
    text = AGENT.read_text(encoding="utf-8")
    path = tmp_path / "w.yaml"
    path.write_text(text.replace("deployment:\n", "deployment:\n  tp_options: []\n", 1), encoding="utf-8")
    one_error_line(cli("workloads", "show", str(path)), "deployment.tp_options")  # type: ignore[operator]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("simulate", SMALL_PLAN, SMALL_WORKLOAD, "--seed", "-1"), "--seed = -1"),
        (("simulate", SMALL_PLAN, SMALL_WORKLOAD, "--requests", "100000000"), "--requests = 100000000"),
        (("simulate", SMALL_PLAN, SMALL_WORKLOAD, "--requests", "0"), "--requests = 0"),
        (("bathtub", "--points", "1000000000"), "--points = 1000000000"),
        (("bathtub", "--points", "2"), "--points = 2"),
        (("optimize", str(AGENT), "--rate", "1e308"), "--rate = 1e+308"),
        (("optimize", str(AGENT), "--requests", "100000000"), "--requests = 100000000"),
        (("optimize", str(AGENT), "--seed", "-5"), "--seed = -5"),
        (("evaluate", SMALL_PLAN, SMALL_WORKLOAD, "--rate", "1e300"), "--rate = 1e+300"),
    ],
)
def test_run_size_flags_are_bounded(cli: object, args: tuple[str, ...], fragment: str) -> None:
    one_error_line(cli(*args, "--json"), fragment)  # type: ignore[operator]


@pytest.mark.parametrize("rate", ["1e-6", "3e-6"])
def test_a_near_zero_rate_gets_the_smallest_plan_not_infeasible(cli: object, rate: str) -> None:
    """The program solves rates as fractions of the largest rate it may serve: 1e-9 req/s used to
    vanish inside the solver's absolute tolerance and come back "infeasible" while 1e-3 worked.
    At a near-zero rate every queue is empty, so the plan is what 1e-3 req/s gets. The smallest
    rate accepted is 1e-6 req/s (`limits.MIN_RATE_RPS`); below it the arrival clock loses its
    resolution."""
    import json

    def best(r: str) -> tuple[str, float]:
        result = cli("optimize", str(AGENT), "--rate", r, "-a", "pd-intra", "--no-verify", "--json")  # type: ignore[operator]
        assert result.exit_code == 0, result.stderr
        data = json.loads(result.stdout)
        return data["best"], data["architectures"][0]["cost_usd_per_hour"]

    assert best(rate) == best("1e-3")


def test_a_near_zero_offered_rate_in_bcr_mode(cli: object, tmp_path: Path) -> None:
    import json

    text = AGENT.read_text(encoding="utf-8")
    assert text.count("rate_rps: 4.0") == 1
    path = tmp_path / "w.yaml"
    path.write_text(text.replace("rate_rps: 4.0", "rate_rps: 1.0e-6"), encoding="utf-8")
    result = cli("optimize", str(path), "-a", "pd-intra", "--no-verify", "--json")  # type: ignore[operator]
    assert result.exit_code == 0, result.stderr
    row = json.loads(result.stdout)["architectures"][0]
    assert row["feasible"] and row["goodput_rps"] == pytest.approx(1e-6, rel=1e-6)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("num_hidden_layers", 100_000_000, "num_hidden_layers = 100000000: must be at most 10,000"),
        ("hidden_size", 10**12, "hidden_size = 1000000000000: must be at most 100,000,000"),
        ("intermediate_size", float("nan"), "intermediate_size = nan: expected a whole number"),
    ],
)
def test_a_model_config_s_shape_is_bounded(cli: object, tmp_path: Path, key: str, value: float, fragment: str) -> None:
    """A config.json of 1e8 layers grew past 1.6 GB making per-layer lists; NaN raised a traceback
    (cannot convert float NaN to integer)."""
    import json

    config = json.loads((ROOT / "pddplan" / "model_catalog" / "llama-3.1-70b.json").read_text(encoding="utf-8"))
    config[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")  # NaN written as the bare NaN Python's json reads
    one_error_line(cli("models", "show", str(path)), str(path), fragment)  # type: ignore[operator]


def test_a_hardware_figure_too_small_for_a_chip_is_refused(cli: object, tmp_path: Path) -> None:
    """fp8_dense_tflops 1e-300 gave infinite step times and a NaN traceback in the queueing."""
    text = (ROOT / "hardware_profiles" / "gpu-a.yaml").read_text(encoding="utf-8")
    old = text[text.index("fp8_dense_tflops: {value: ") :].split(",")[0]
    path = tmp_path / "gpu-a.yaml"
    path.write_text(text.replace(old, "fp8_dense_tflops: {value: 1.0e-300", 1), encoding="utf-8")
    one_error_line(cli("hardware", "show", str(path)), "fp8_dense_tflops.value = 1e-300: must be at least 0.001")  # type: ignore[operator]
