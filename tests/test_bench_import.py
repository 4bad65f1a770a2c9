"""`calibrate --from sglang-bench|vllm-bench`: benchmark results to calibration rows, by hand-
computed values, on the shipped example files (real runs), and on bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pddplan.calibration.bench_import import default_stack, read_bench, rows_csv, rows_from_runs
from pddplan.errors import InputError
from pddplan.report.schemas import validate_output

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "examples" / "bench"
SGLANG = BENCH / "sglang-llama70b-h200-tp4.jsonl"
VLLM = sorted((BENCH / "vllm-llama70b-a100-40g-tp8").glob("*.json"))


def _write(tmp_path: Path, records: list[Any], name: str = "b.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


SGLANG_RUN: dict[str, Any] = {
    "backend": "sglang",
    "dataset_name": "random",
    "request_rate": float("inf"),
    "max_concurrency": 1,
    "duration": 20.0,
    "completed": 10,
    "total_input_tokens": 20_000,
    "total_output_tokens": 5_000,
    "median_ttft_ms": 150.0,
    "median_itl_ms": 12.0,
    "server_info": {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tp_size": 1, "version": "0.5.5.post3"},
}


def test_a_concurrency_one_run_gives_a_ttft_row_and_an_itl_row(tmp_path: Path) -> None:
    """Hand-computed: 20,000 / 10 = 2,000-token prompts, 500-token outputs; TTFT 150 ms is one
    prefill of 2,000 tokens plus the request overhead (client_ttft); ITL 12 ms is a decode step at
    batch 1 and context 2,000 + 500 / 2 = 2,250 (client_itl). The model comes from server_info's
    repo, the stack from its version (sglang-0.5). SGLang's bare Infinity rate parses."""
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps(SGLANG_RUN).replace('"request_rate": Infinity', '"request_rate": Infinity') + "\n")
    runs = read_bench(path, "sglang-bench")
    assert default_stack(runs) == "sglang-0.5"
    rows, _ = rows_from_runs(runs, "h100-sxm", None, None, "sglang-0.5")
    ttft, itl = rows
    assert (ttft.kind, ttft.tokens, ttft.batch, ttft.measured_kind, ttft.model, ttft.tp) == (
        "prefill",
        2000,
        1,
        "client_ttft",
        "llama-3.1-8b",
        1,
    )
    assert ttft.measured_s == pytest.approx(0.150, rel=1e-12)
    assert (itl.kind, itl.batch, itl.context, itl.measured_kind) == ("decode", 1, 2250, "client_itl")
    assert itl.measured_s == pytest.approx(0.012, rel=1e-12)
    assert rows_csv(rows).splitlines()[1] == "llama-3.1-8b,h100-sxm,1,prefill,2000,0,1,0,0.15,client_ttft,sglang-0.5"


def test_in_flight_requests_set_the_decode_batch(tmp_path: Path) -> None:
    """No max_concurrency: SGLang's measured concurrency 30.4 -> batch 30; with 2 decode
    instances, 15. Without it, Little's law: 10 requests / 20 s x 4 s mean latency = 2 in flight.
    A TTFT under load includes queueing: no TTFT row, and a note says so."""
    loaded = {**SGLANG_RUN, "max_concurrency": None, "concurrency": 30.4}
    runs = read_bench(_write(tmp_path, [loaded]), "sglang-bench")
    rows, notes = rows_from_runs(runs, "h100-sxm", None, None, "s")
    assert [r.kind for r in rows] == ["decode"] and rows[0].batch == 30
    assert any("includes queueing" in note for note in notes)
    assert rows_from_runs(runs, "h100-sxm", None, None, "s", decode_instances=2)[0][0].batch == 15
    little = {**loaded, "concurrency": None, "mean_e2e_latency_ms": 4000.0}
    rows, notes = rows_from_runs(read_bench(_write(tmp_path, [little]), "sglang-bench"), "h100-sxm", None, None, "s")
    assert rows[0].batch == 2 and any("Little's law" in note for note in notes)


def test_vllm_little_law_from_ttft_and_tpot() -> None:
    """The shipped qps_04 run (real, vLLM, April 2025) has no mean latency: in flight =
    200 / 62.988 s x (50.325 ms + 27.083 ms x (42,449 / 200 - 1)) = 18.3 -> batch 18."""
    run = read_bench(BENCH / "vllm-llama70b-a100-40g-tp8" / "qps_04.json", "vllm-bench")[0]
    expected = 200 / 62.98832992400003 * (50.32546663501307 + 27.083319078977674 * (42449 / 200 - 1)) / 1e3
    assert run.in_flight == pytest.approx(expected, rel=1e-12)
    rows, _ = rows_from_runs([run], "a100-40g", "llama-3.1-70b", 8, "vllm")
    assert rows[0].batch == round(expected) == 18
    assert rows[0].measured_s == pytest.approx(0.02719267299994499, rel=1e-12)


def test_the_shipped_examples_calibrate(cli: Any, tmp_path: Path) -> None:
    """Both example sets produce rows and a fit, written into a profile under the stack."""
    out = tmp_path / "a100-40g.yaml"
    rows_out = tmp_path / "rows.csv"
    result = cli(
        "calibrate",
        "--from",
        "vllm-bench",
        *map(str, VLLM),
        "--gpu",
        "a100-40g",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "8",
        "--output",
        str(out),
        "--rows-out",
        str(rows_out),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    validate_output("calibrate", summary)
    assert summary["from_bench"]["rows"] == 3 and summary["from_bench"]["stack"] == "vllm"
    assert "vllm:" in out.read_text() and len(rows_out.read_text().splitlines()) == 4
    result = cli(
        "calibrate",
        "--from",
        "sglang-bench",
        str(SGLANG),
        "--gpu",
        "h200",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "4",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["from_bench"]["rows"] == 7
    # the fit minimises the squared log error (plus its pull to the GPU's factors), never raising it
    assert summary["after"]["fit"]["rms_log_error"] <= summary["before"]["fit"]["rms_log_error"]


@pytest.mark.parametrize(
    ("records", "fmt", "message"),
    [
        (
            [{k: v for k, v in SGLANG_RUN.items() if k != "median_itl_ms"}],
            "sglang-bench",
            "line 1: missing field(s) median_itl_ms",
        ),
        ([SGLANG_RUN, {**SGLANG_RUN, "completed": 0}], "sglang-bench", "line 2: completed = 0"),
        ([{**SGLANG_RUN, "max_concurrency": 0}], "sglang-bench", "max_concurrency = 0: must be at least 1"),
        ([{**SGLANG_RUN, "total_input_tokens": -5}], "sglang-bench", "total_input_tokens = -5"),
        ([{**SGLANG_RUN, "median_itl_ms": "fast"}], "sglang-bench", "median_itl_ms = 'fast'"),
        ([{"model_id": "m", "num_prompts": 3}], "sglang-bench", "use --from vllm-bench"),
        ([SGLANG_RUN], "vllm-bench", "use --from sglang-bench"),
        ([[1, 2]], "sglang-bench", "expected a JSON object"),
    ],
)
def test_bad_benchmark_files_give_one_line_naming_the_line(
    tmp_path: Path, records: list[Any], fmt: str, message: str
) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_bench(_write(tmp_path, records), fmt)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ("", (), "empty file"),
        ("{not json\n", (), "line 1: not JSON"),
        (json.dumps(SGLANG_RUN) + "\n", ("--from", "tgi-bench"), "--from = 'tgi-bench'"),
        (
            json.dumps({**SGLANG_RUN, "server_info": {"model_path": "meta-llama/Llama-3.1-8B-Instruct"}}) + "\n",
            (),
            "give --tp N",
        ),
        (json.dumps({**SGLANG_RUN, "server_info": {"tp_size": 1}}) + "\n", (), "names no model: give --model"),
        (
            json.dumps({**SGLANG_RUN, "server_info": {**SGLANG_RUN["server_info"], "pp_size": 2}}) + "\n",
            (),
            "the server ran pp_size 2: pipeline-parallel runs are not calibrated",
        ),
    ],
)
def test_bad_calibrate_from_gives_one_line_and_exit_2(
    cli: Any, tmp_path: Path, text: str, args: tuple[str, ...], message: str
) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(text)
    result = cli("calibrate", *(args or ("--from", "sglang-bench")), str(path), "--gpu", "h100-sxm")
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_from_needs_a_gpu_and_csv_flags_need_from(cli: Any, tmp_path: Path) -> None:
    result = cli("calibrate", "--from", "sglang-bench", str(SGLANG), "--all")
    assert result.exit_code == 2 and "--from needs --gpu" in result.stderr
    result = cli("calibrate", str(SGLANG), "--gpu", "h200", "--tp", "4")
    assert result.exit_code == 2 and "--tp goes with --from" in result.stderr
