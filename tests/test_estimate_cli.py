"""`pddplan estimate`, `pddplan calibrate` and `pddplan accuracy`: the library calls and the CLI.

Bad input must give exit code 2 and exactly one "error:" line on stderr, nothing on stdout.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from cli_results import one_error_line

from pddplan.calibration.estimate import Formats, StepQuery, estimate
from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.memory import max_batch, memory_budget
from pddplan.perf.roofline import Instance, prefill_time, step_time
from pddplan.specs.hardware import Efficiency
from pddplan.support.loading import read_data, validate

BREAKDOWN_KEYS = {
    "dense_gemm_s",
    "expert_gemm_s",
    "moe_routing_s",
    "moe_permutation_s",
    "attention_s",
    "communication_s",
    "moe_dispatch_s",
    "moe_combine_s",
    "overhead_s",
    "overlap_s",
    "host_bound_s",
    "compute_bound_s",
    "memory_bound_s",
}
BOUNDS = {"compute", "memory", "communication", "overhead", "host"}

SMALL_CSV = (
    "model,gpu,tp,kind,tokens,cached,batch,context,measured_s,split\n"
    "llama-3.1-8b,h100-sxm,1,prefill,8000,0,1,8000,0.45,fit\n"
    "llama-3.1-8b,h100-sxm,1,prefill,500,0,1,500,0.05,fit\n"
    "llama-3.1-8b,h100-sxm,1,decode,1,0,1,2000,0.008,fit\n"
    "llama-3.1-8b,h100-sxm,1,decode,1,0,64,4000,0.02,fit\n"
    "llama-3.1-8b,h100-sxm,1,extend,64,0,1,3000,0.009,holdout\n"
    "llama-3.1-8b,h200,1,decode,1,0,1,2000,0.007,fit\n"
)


def ok_json(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# -- estimate: the library ------------------------------------------------------------------------
def test_estimate_prefill_matches_roofline() -> None:
    out = estimate(
        "llama-3.1-8b", "h100-sxm", 1, StepQuery(prefill_tokens=20_000, cached_tokens=1000, chunk_tokens=8192)
    ).json_data()
    inst = Instance(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), 1)
    assert out["mode"] == "prefill"
    # engine time: the chunks alone, no request overhead; the lone request's TTFT adds it
    overhead = inst.efficiency.request_overhead_s
    assert out["prefill_s"] == pytest.approx(float(prefill_time(inst, 20_000, 1000, 8192)) - overhead, rel=1e-12)
    chunks = [step_time(inst, n, c).total_s for n, c in ((8192, 1000), (8192, 9192), (3616, 17384))]
    assert out["prefill_s"] == pytest.approx(float(sum(chunks)), rel=1e-12)
    assert out["request_overhead_s"] == overhead
    assert out["lone_request_ttft_s"] == pytest.approx(out["prefill_s"] + overhead, rel=1e-12)
    assert out["packed_prefill_s"] <= out["prefill_s"]
    assert (out["chunks"], out["tail_chunk_tokens"]) == (3, 3616)  # 8192 + 8192 + 3616
    # without pipeline stages the breakdown leaves out the stage's send
    seconds = {
        k: v for k, v in step_time(inst, 8192, 1000).breakdown().items() if k.endswith("_s") and k != "stage_transfer_s"
    }
    assert out["breakdown"] == seconds  # the first chunk
    budget = memory_budget(inst, step_tokens=8192)
    assert out["memory_per_gpu"] == {
        "weights_bytes": budget.weight_bytes,
        "activations_bytes": budget.activation_bytes,
        "kv_budget_bytes": budget.kv_bytes,
    }
    assert out["efficiency_source"] == inst.efficiency.source
    unchunked = estimate("llama-3.1-8b", "h100-sxm", 1, StepQuery(prefill_tokens=20_000)).json_data()
    assert (unchunked["chunks"], unchunked["tail_chunk_tokens"]) == (1, 20_000)
    assert unchunked["memory_per_gpu"]["activations_bytes"] == memory_budget(inst, step_tokens=20_000).activation_bytes


def test_estimate_decode_and_extend_match_roofline() -> None:
    inst = Instance(load_model("qwen3-235b-a22b"), load_hardware("h200"), 8)
    decode = estimate("qwen3-235b-a22b", "h200", 8, StepQuery(decode_batch=64, context_tokens=30_000)).json_data()
    step = float(step_time(inst, 1, 30_000, 64).total_s)
    assert decode["decode_step_s"] == pytest.approx(step, rel=1e-12)
    assert decode["tokens_per_s"] == pytest.approx(64 / step, rel=1e-12)
    assert decode["max_batch_by_memory"] == int(max_batch(inst, 30_000))
    assert decode["expert_parallel"] is False
    extend = estimate("qwen3-235b-a22b", "h200", 8, StepQuery(extend_tokens=100, context_tokens=30_000)).json_data()
    ext = float(step_time(inst, 100, 30_000, 1).total_s)
    assert extend["extend_s"] == pytest.approx(ext, rel=1e-12)
    assert extend["equivalent_decode_steps"] == pytest.approx(ext / float(step_time(inst, 1, 30_000, 1).total_s))
    assert 1.0 < extend["equivalent_decode_steps"] < 100.0


def test_estimate_kv_dtype_and_ep_switches() -> None:
    bf16 = estimate(
        "deepseek-v3.2", "h200", 8, StepQuery(decode_batch=32, context_tokens=60_000), formats=Formats(kv="bf16")
    ).json_data()
    fp8 = estimate("deepseek-v3.2", "h200", 8, StepQuery(decode_batch=32, context_tokens=60_000)).json_data()
    assert bf16["max_batch_by_memory"] < fp8["max_batch_by_memory"]
    # a GQA model reads its whole KV per decode step: fp8 KV halves the attention reads
    gqa_bf16 = estimate("qwen3-235b-a22b", "h200", 8, StepQuery(decode_batch=32, context_tokens=60_000)).json_data()
    gqa_fp8 = estimate(
        "qwen3-235b-a22b", "h200", 8, StepQuery(decode_batch=32, context_tokens=60_000), formats=Formats(kv="fp8")
    ).json_data()
    assert gqa_bf16["breakdown"]["attention_s"] > gqa_fp8["breakdown"]["attention_s"]
    forced = estimate(
        "deepseek-v3.2", "h200", 8, StepQuery(decode_batch=32, context_tokens=60_000), expert_parallel=True
    ).json_data()
    assert forced["expert_parallel"] is True and fp8["expert_parallel"] is False
    # the MLA latent on each of the 8 ranks under TP attention, once under data-parallel attention;
    # qwen3-235b's 4 KV heads twice over 8 ranks
    assert (fp8["kv_copies"], forced["kv_copies"], gqa_bf16["kv_copies"]) == (8.0, 1.0, 2.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give exactly one of --prefill TOKENS, --decode-batch B or --extend K"),
        ({"prefill_tokens": 10, "extend_tokens": 5, "context_tokens": 10}, "give exactly one of"),
        ({"decode_batch": 4}, "--decode-batch needs --context TOKENS"),
        ({"extend_tokens": 4}, "--extend needs --context TOKENS"),
    ],
)
def test_estimate_rejects_bad_modes(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        estimate("llama-3.1-8b", "h100-sxm", 1, StepQuery(**kwargs))


def test_cli_estimate_refuses_a_tp_the_heads_do_not_split_over(cli: Any) -> None:
    """qwen3-32b's 64 query heads on 3 tensor-parallel ranks: engines refuse to start it."""
    result = cli("estimate", "--model", "qwen3-32b", "--gpu", "h200", "--tp", "3", "--prefill", "8192")
    one_error_line(result, "tp = 3", "64 attention heads", "use a tp that divides 64 (2 or 4)")


# -- estimate: the CLI ----------------------------------------------------------------------------
def test_cli_estimate_deepseek_prefill(cli: Any) -> None:
    out = ok_json(
        cli(
            "estimate",
            "--model",
            "deepseek-v3.2",
            "--gpu",
            "gpu-a",
            "--tp",
            "16",
            "--prefill",
            "6400",
            "--cached",
            "58000",
            "--chunk",
            "8192",
            "--json",
        )
    )
    assert out["model"] == "deepseek-v3.2" and out["gpu"] == "gpu-a" and out["tp"] == 16
    assert out["expert_parallel"] is True  # 16 GPUs span two 8-GPU domains
    assert out["mode"] == "prefill"
    assert set(out["breakdown"]) == BREAKDOWN_KEYS
    assert out["bound"] in BOUNDS
    assert (out["chunks"], out["tail_chunk_tokens"], out["new_tokens"], out["cached_tokens"]) == (1, 6400, 6400, 58000)
    inst = Instance(load_model("deepseek-v3.2"), load_hardware("gpu-a"), 16)
    # one chunk: the engine time is its step; the lone request's TTFT adds the request overhead
    assert out["prefill_s"] == pytest.approx(float(step_time(inst, 6400, 58000).total_s), rel=1e-12)
    assert out["lone_request_ttft_s"] == pytest.approx(float(prefill_time(inst, 6400, 58000, 8192)), rel=1e-12)
    assert out["memory_per_gpu"]["kv_budget_bytes"] > 0


def test_cli_estimate_decode_and_extend(cli: Any) -> None:
    decode = ok_json(
        cli(
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--decode-batch",
            "32",
            "--context",
            "4000",
            "--json",
        )
    )
    assert decode["mode"] == "decode"
    assert decode["decode_step_s"] > 0 and "prefill_s" not in decode
    assert decode["tokens_per_s"] == pytest.approx(32 / decode["decode_step_s"])
    assert set(decode["breakdown"]) == BREAKDOWN_KEYS and decode["bound"] in BOUNDS
    extend = ok_json(
        cli(
            "estimate",
            "--model",
            "gpt-oss-120b",
            "--gpu",
            "mi300x",
            "--tp",
            "2",
            "--extend",
            "100",
            "--context",
            "64000",
            "--kv-dtype",
            "fp8",
            "--json",
        )
    )
    assert extend["mode"] == "extend" and extend["extend_s"] > 0
    assert extend["extend_tokens"] == 100 and extend["context_tokens"] == 64000
    assert set(extend["breakdown"]) == BREAKDOWN_KEYS and extend["bound"] in BOUNDS
    qwen_decode = ("estimate", "--model", "qwen3-235b-a22b", "--gpu", "h200", "--tp", "8", "--decode-batch", "8")
    ep, mixed, tensor = (
        ok_json(cli(*qwen_decode, "--context", "1000", layout, "--json"))
        for layout in ("--ep", "--tp-attention", "--no-ep")
    )
    assert ep["expert_parallel"] is True and ep["tp_attention"] is False
    assert mixed["expert_parallel"] is True and mixed["tp_attention"] is True
    assert tensor["expert_parallel"] is False
    # TP's attention and all-reduces, the experts waiting for the busiest rank: slower than TP at batch 8
    assert mixed["breakdown"]["communication_s"] == pytest.approx(tensor["breakdown"]["communication_s"], rel=1e-12)
    assert mixed["decode_step_s"] > tensor["decode_step_s"]
    human = cli(*qwen_decode, "--context", "1000", "--tp-attention")
    assert human.exit_code == 0 and "(expert parallel, tensor-parallel attention)" in human.stdout


def test_cli_estimate_human_output_goes_to_stdout(cli: Any) -> None:
    result = cli("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "20000", "--chunk", "8192")
    assert result.exit_code == 0
    assert result.stderr == ""
    assert "3 chunk(s), tail 3,616 tokens" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--prefill", "100", "--decode-batch", "4", "--context", "10"], ["give exactly one of"]),
        (["--prefill", "100", "--extend", "4", "--context", "10"], ["give exactly one of"]),
        ([], ["give exactly one of"]),
        (["--decode-batch", "4"], ["--decode-batch needs --context"]),
        (["--extend", "4"], ["--extend needs --context"]),
        (["--prefill", "100", "--tp", "0"], ["--tp = 0"]),
        (["--prefill", "100", "--kv-dtype", "int4"], ["--kv-dtype = 'int4'"]),
        (["--prefill", "100", "--tp", "8", "--tp-attention"], ["tp_attention = true", "llama-3.1-8b", "dense"]),
        (["--prefill", "100", "--tp", "8", "--no-ep", "--tp-attention"], ["--tp-attention with --no-ep"]),
    ],
)
def test_cli_estimate_bad_combinations(cli: Any, args: list[str], fragments: list[str]) -> None:
    one_error_line(cli("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", *args), *fragments)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--prefill", "100", "--chunk", "0"], "--chunk = 0: must be between 16 and"),
        (["--decode-batch", "-3", "--context", "100"], "--decode-batch = -3: must be between 1 and"),
        (["--prefill", "100", "--cached", "-1"], "--cached = -1: must be between 0 and"),
        (["--decode-batch", "4", "--context", "-5"], "--context = -5: must be between 0 and"),
        (["--extend", "0", "--context", "100"], "--extend = 0: must be between 1 and"),
        (["--prefill", "0"], "--prefill = 0: must be between 1 and"),
    ],
    ids=["chunk", "decode-batch", "cached", "context", "extend", "prefill"],
)
def test_cli_estimate_rejects_zero_or_negative_sizes(cli: Any, args: list[str], fragment: str) -> None:
    """Guards estimate's size checks: a zero chunk, a negative batch, cached or context count (and a
    zero token count) are one error line naming the flag (exit 2), not a traceback (division by a
    zero chunk) or a silent answer computed from a negative size."""
    one_error_line(cli("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", *args, "--json"), fragment)


def test_cli_estimate_unknown_names(cli: Any) -> None:
    one_error_line(cli("estimate", "--model", "llama-9", "--gpu", "h100-sxm", "--prefill", "10"), "unknown model")
    one_error_line(cli("estimate", "--model", "llama-3.1-8b", "--gpu", "h1000", "--prefill", "10"), "h1000")


def test_cli_estimate_model_that_does_not_fit(cli: Any) -> None:
    one_error_line(
        cli("estimate", "--model", "llama-3.1-405b", "--gpu", "l40s", "--tp", "1", "--prefill", "1000", "--json"),
        "model 'llama-3.1-405b' does not fit on l40s at tp=1",
        "use a larger tp",
    )


# -- accuracy -------------------------------------------------------------------------------------
def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_cli_accuracy_counts_match_the_csv(cli: Any, root: Path) -> None:
    path = root / "tests" / "data" / "measurements.csv"
    rows = csv_rows(path)
    scored = [r for r in rows if r["split"].strip() != "excluded"]
    report = ok_json(cli("accuracy", str(path), "--json"))
    assert report["rows"] == len(rows)
    assert report["excluded"] == len(rows) - len(scored)
    fit, holdout = report["summary"]["fit"], report["summary"]["holdout"]
    assert fit["count"] + holdout["count"] == len(scored)
    assert fit["count"] == sum(r["split"].strip() in ("fit", "") for r in rows)
    assert holdout["count"] == sum(r["split"].strip() == "holdout" for r in rows)
    assert len(report["points"]) == len(rows)  # excluded rows are listed (not scored)
    assert sum(p["split"] == "excluded" for p in report["points"]) == report["excluded"]
    gpu_fit, gpu_holdout = report["gpu_level_summary"]["fit"], report["gpu_level_summary"]["holdout"]
    assert (gpu_fit["count"], gpu_holdout["count"]) == (fit["count"], holdout["count"])
    for split in (fit, holdout, gpu_fit, gpu_holdout):
        assert 0 <= split["median_abs_error"] <= split["worst_abs_error"]
    assert sum(g["holdout_count"] for g in report["holdout_by_gpu"].values()) == holdout["count"]


def test_cli_accuracy_table_splits_held_out_rows_by_kind_and_family(cli: Any, root: Path) -> None:
    """The human view shows what the JSON's holdout_groups hold: engine-step rows apart from client
    rows, per step kind and per model family, with their counts."""
    path = root / "tests" / "data" / "measurements.csv"
    groups = ok_json(cli("accuracy", str(path), "--json"))["holdout_groups"]
    result = cli("accuracy", str(path))
    assert result.exit_code == 0
    text = result.stdout
    assert "held-out rows by what was measured and by model family" in text
    for name, stats in [*groups["by_measurement"].items(), *groups["by_family"].items()]:
        row = next(line for line in text.splitlines() if f" {name} " in line and "%" in line)
        assert f" {stats['count']} " in row and f"{stats['median_abs_error']:.1%}" in row, (name, row)
    assert "engine_step prefill" in groups["by_measurement"] and "MLA" in groups["by_family"]


def test_cli_accuracy_default_measurements(cli: Any, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    report = ok_json(cli("accuracy", "--json"))
    assert Path(report["measurements"]) == root / "tests" / "data" / "measurements.csv"
    scored = [p for p in report["points"] if p["split"] != "excluded"]
    assert report["summary"]["fit"]["count"] + report["summary"]["holdout"]["count"] == len(scored)


def test_cli_accuracy_bad_input(cli: Any, tmp_path: Path) -> None:
    one_error_line(cli("accuracy", str(tmp_path / "none.csv")), "file not found")
    bad = tmp_path / "bad-split.csv"
    bad.write_text(
        "model,gpu,tp,kind,tokens,cached,batch,context,measured_s,split\n"
        "llama-3.1-8b,h100-sxm,1,decode,1,0,8,1000,0.01,Holdout\n"
    )
    one_error_line(cli("accuracy", str(bad)), "line 2: split = 'Holdout': expected one of fit, holdout, excluded")


# -- calibrate ------------------------------------------------------------------------------------
def test_cli_calibrate_full_measurements_smoke(cli: Any, root: Path, tmp_path: Path) -> None:
    output = tmp_path / "h100-calibrated.yaml"
    args = [
        "calibrate",
        str(root / "tests" / "data" / "measurements.csv"),
        "--gpu",
        "h100-sxm",
        "--output",
        str(output),
    ]
    # this fit raises the nine held-out rows' median |error| (3.0% -> 4.7%): written only with --force
    assert cli(*args, "--json").exit_code == 2 and not output.exists()
    result = cli(*args, "--force", "--json")
    assert result.exit_code == 0 and result.stderr.startswith("warning: the fitted factors make the 9 held-out")
    summary = json.loads(result.stdout)
    assert summary["target"] == "h100-sxm"
    assert summary["output"] == str(output)
    profile = load_hardware(str(output))
    # the same fit `--all --write-catalog` ran for the shipped block (same rows, start and prior)
    shipped = load_hardware("h100-sxm").efficiency
    assert profile.efficiency is not None and shipped is not None
    mine, theirs = profile.efficiency.model_dump(), shipped.model_dump()
    assert all(mine[k] == pytest.approx(theirs[k], rel=1e-3) for k in mine if k != "source")
    assert profile.efficiency is not None
    assert profile.efficiency.source.startswith("calibrated:")
    assert profile.efficiency.source == summary["efficiency"]["source"]
    catalog = load_hardware("h100-sxm")
    assert profile.model_copy(update={"efficiency": None}) == catalog.model_copy(update={"efficiency": None})


def test_cli_calibrate_gpu_into_an_existing_profile(cli: Any, root: Path, tmp_path: Path) -> None:
    measurements = tmp_path / "small.csv"
    measurements.write_text(SMALL_CSV)
    output = tmp_path / "mine.yaml"
    original = (
        (root / "hardware_profiles" / "h100-sxm.yaml")
        .read_text()
        .replace("description: NVIDIA H100", "description: MY H100")
    )
    output.write_text(original)
    summary = ok_json(cli("calibrate", str(measurements), "--gpu", "h100-sxm", "--output", str(output), "--json"))
    assert summary["before"]["fit"]["count"] == summary["after"]["fit"]["count"] == 4
    assert summary["after"]["holdout"]["count"] == 1
    text = output.read_text()
    assert text.startswith(original.split("\nefficiency:\n")[0])  # the user's own edits are kept
    profile = load_hardware(str(output))
    assert profile.description.startswith("MY H100")
    assert profile.efficiency is not None
    assert profile.efficiency.source.startswith("calibrated: fitted by `pddplan calibrate` to 4 rows of small.csv")


def test_cli_calibrate_all_writes_an_efficiency_block(cli: Any, tmp_path: Path) -> None:
    measurements = tmp_path / "small.csv"
    measurements.write_text(SMALL_CSV)
    output = tmp_path / "defaults.yaml"
    summary = ok_json(cli("calibrate", str(measurements), "--all", "--output", str(output), "--json"))
    assert summary["target"] == "all GPUs"
    assert summary["after"]["fit"]["count"] == 5
    data = read_data(output)
    efficiency = validate(Efficiency, data["efficiency"], str(output))
    assert efficiency.source.startswith("calibrated: fitted by `pddplan calibrate --all` to 5 rows of small.csv")
    assert efficiency.compute_max_fraction == pytest.approx(summary["efficiency"]["compute_max_fraction"], rel=1e-5)


def test_cli_calibrate_all_without_rows(cli: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text(SMALL_CSV.splitlines()[0] + "\n")
    one_error_line(cli("calibrate", str(empty), "--all"), "calibration needs at least 3 fit rows, got 0")


def test_cli_calibrate_missing_column(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "nocol.csv"
    path.write_text("\n".join(",".join(line.split(",")[:8]) for line in SMALL_CSV.splitlines()) + "\n")
    one_error_line(cli("calibrate", str(path), "--all"), "missing column(s) measured_s", "need model, gpu")
    one_error_line(cli("calibrate", str(path), "--gpu", "h100-sxm"), "missing column(s) measured_s")


def test_cli_calibrate_needs_exactly_one_target(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "small.csv"
    path.write_text(SMALL_CSV)
    one_error_line(cli("calibrate", str(path)), "give --gpu NAME")
    one_error_line(cli("calibrate", str(path), "--gpu", "h100-sxm", "--all"), "give --gpu NAME")
    one_error_line(cli("calibrate", str(path), "--gpu", "mi300x"), "no rows for gpu 'mi300x'")
    one_error_line(cli("calibrate", str(tmp_path / "none.csv"), "--all"), "file not found")


# -- serving stacks -------------------------------------------------------------------------------
def test_cli_estimate_with_a_calibrated_stack(cli: Any) -> None:
    """--stack switches to the factors the profile holds for that stack; the prediction changes."""
    args = (
        "estimate",
        "--model",
        "deepseek-v3",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--decode-batch",
        "32",
        "--context",
        "1536",
    )
    plain = ok_json(cli(*args, "--json"))
    stacked = ok_json(cli(*args, "--stack", "sglang-0.5", "--json"))
    assert plain["stack"] is None and stacked["stack"] == "sglang-0.5"
    assert "stack sglang-0.5" in stacked["efficiency_source"]
    assert stacked["decode_step_s"] != pytest.approx(plain["decode_step_s"], rel=1e-3)


def test_cli_estimate_unknown_stack_is_one_line(cli: Any) -> None:
    result = cli(
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h200",
        "--decode-batch",
        "8",
        "--context",
        "96",
        "--stack",
        "nope-1.0",
    )
    one_error_line(result, "stack = 'nope-1.0'", "h200", "calibrated stacks:", "--stack nope-1.0")


def test_cli_calibrate_stack_needs_a_gpu(cli: Any, root: Path) -> None:
    path = root / "tests" / "data" / "measurements.csv"
    one_error_line(cli("calibrate", str(path), "--all", "--stack", "sglang-0.5"), "--stack needs --gpu")
    one_error_line(cli("calibrate", str(path), "--gpu", "b200", "--write-catalog"), "--write-catalog goes with --all")


def test_cli_calibrate_stack_writes_a_profile_with_that_stack(cli: Any, root: Path, tmp_path: Path) -> None:
    path = root / "tests" / "data" / "measurements.csv"
    out = tmp_path / "b200-mine.yaml"
    result = cli("calibrate", str(path), "--gpu", "b200", "--stack", "sglang-0.5", "--output", str(out), "--json")
    summary = ok_json(result)
    assert summary["after"]["fit"]["count"] == sum(
        r["gpu"] == "b200" and r["stack"] == "sglang-0.5" and r["split"] == "fit" for r in csv_rows(path)
    )
    written = load_hardware(str(out))
    shipped = load_hardware("b200")
    # the same fit `--all --write-catalog` ran for the shipped block (same rows, start and prior)
    mine, theirs = (
        written.stack_efficiency["sglang-0.5"].model_dump(),
        shipped.stack_efficiency["sglang-0.5"].model_dump(),
    )
    assert all(mine[k] == pytest.approx(theirs[k], rel=1e-3) for k in mine if k != "source")
    assert set(written.stack_efficiency) == set(shipped.stack_efficiency) | {"sglang-0.5"}
    assert "rows of stack sglang-0.5 in measurements.csv" in written.stack_efficiency["sglang-0.5"].source
    assert written.efficiency == shipped.efficiency  # the stack-agnostic block is left as it was


def test_cli_accuracy_on_the_blind_set(cli: Any, root: Path) -> None:
    """The blind set (no stack calibrated) is scored at GPU level; the README quotes its median."""
    path = root / "tests" / "data" / "measurements_blind.csv"
    report = ok_json(cli("accuracy", str(path), "--json"))
    holdout = report["summary"]["holdout"]
    assert holdout["count"] == len(csv_rows(path)) == 19
    assert report["summary"] == report["gpu_level_summary"]
    assert {p["factors"] for p in report["points"]} <= {"profile", "default"}
    # measurements_blind.md: median 24% with step-time model v3 (v2 21%, v1 57%)
    assert 0.2 < holdout["median_abs_error"] < 0.3


def test_estimate_reports_the_steps_floor(cli: Any) -> None:
    """floor_s is the shown step's pure floor (roofline.floor_time) and times_floor the step over it."""
    from pddplan.inputs import load_hardware, load_model
    from pddplan.perf.roofline import Instance, floor_time

    out = ok_json(
        cli("estimate", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", "4", "--prefill", "2048", "--json")
    )
    floor = float(floor_time(Instance(load_model("llama-3.1-70b"), load_hardware("h200"), 4), 2048, 0))
    assert out["floor_s"] == pytest.approx(floor, rel=1e-12)
    step = sum(
        out["breakdown"][k] for k in ("dense_gemm_s", "expert_gemm_s", "attention_s", "communication_s", "overhead_s")
    )
    assert out["times_floor"] == pytest.approx(step / floor, rel=1e-9)
    assert 1 < out["times_floor"] < 3


def test_estimate_shows_the_moe_parts_and_the_precision(cli: Any) -> None:
    """An MoE step reports its routing, permutation, grouped GEMMs, dispatch and combine (which sum
    into the breakdown's expert and communication parts), the busiest rank's share with the skew in
    it, and the formats with the dtype their GEMMs run at: NVFP4 experts on H200 run weight-only."""
    out = ok_json(
        cli(
            "estimate", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "16", "--decode-batch", "256",
            "--context", "4000", "--expert-weights", "nvfp4", "--json",
        )
    )  # fmt: skip
    moe, parts = out["moe"], out["breakdown"]
    assert out["expert_parallel"] is True  # 16 GPUs span two scale-up domains: EP with DP attention
    assert moe["grouped_gemm_s"] == parts["expert_gemm_s"]
    assert moe["routing_s"] == parts["moe_routing_s"] > 0
    assert moe["permutation_s"] == parts["moe_permutation_s"] > 0
    assert moe["dispatch_s"] == parts["moe_dispatch_s"] > 0 and moe["combine_s"] == parts["moe_combine_s"] > 0
    assert moe["combine_s"] > moe["dispatch_s"]  # bf16 back, fp8 out
    assert parts["communication_s"] == pytest.approx(moe["dispatch_s"] + moe["combine_s"], rel=1e-12)
    assert moe["expert_skew"] == load_hardware("h200").efficiency.expert_skew  # type: ignore[union-attr]
    assert moe["busiest_rank_share"] >= moe["expert_skew"]
    assert out["precision"] == {
        "weights": "fp8-block",
        "weight_bytes_per_value": pytest.approx(1 + 4 / 16384),
        "dense_gemm_dtype": "fp8",
        "experts": "nvfp4",
        "expert_bytes_per_value": 0.5625,
        "expert_gemm_dtype": "bf16",
    }
    dense = ok_json(
        cli("estimate", "--model", "llama-3.1-8b", "--gpu", "b200", "--prefill", "2048", "--weights", "nvfp4", "--json")
    )
    assert dense["moe"] is None and dense["precision"]["dense_gemm_dtype"] == "fp4"


def test_fp4_weights_read_their_bytes_with_scales_at_their_own_efficiency(cli: Any) -> None:
    """A batch-1 decode step of Llama-3.1-70B on B200 reads its dense weights: every weight but the
    bf16 LM head at the format's bytes (NVFP4 0.5 + 1/16), at HBM x memory_fraction, times
    fp4_memory_fraction / memory_fraction for 4-bit floats (roofline.step_time, efficiency.streaming_fraction)."""
    from pddplan.perf.arithmetic import param_counts

    args = ("--model", "llama-3.1-70b", "--gpu", "b200", "--decode-batch", "1", "--context", "1000", "--json")
    counts = param_counts(load_model("llama-3.1-70b"))
    eff = load_hardware("b200").efficiency
    assert eff is not None
    body = counts.non_expert - counts.lm_head
    for fmt, per_value, fraction in (
        ("fp8", 1.0, eff.memory_fraction),
        ("nvfp4", 0.5625, eff.memory_fraction * min(1.0, eff.fp4_memory_fraction / eff.memory_fraction)),
    ):
        out = ok_json(cli("estimate", *args, "--weights", fmt))
        expected = (body * per_value + counts.lm_head * 2.0) / (8.0e12 * fraction)
        assert out["breakdown"]["dense_gemm_s"] == pytest.approx(expected, rel=1e-9), fmt


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--weights", "fp6", "--weights = 'fp6': expected one of bf16, fp8, fp8-block, nvfp4, fp4, mxfp4, int4"),
        ("--expert-weights", "int8", "--expert-weights = 'int8': expected one of"),
    ],
)
def test_bad_weight_format_is_one_line(cli: Any, flag: str, value: str, message: str) -> None:
    result = cli("estimate", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--prefill", "100", flag, value)
    assert result.exit_code == 2
    assert message in one_error_line(result)


def test_expert_weights_need_experts(cli: Any) -> None:
    result = cli(
        "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "100", "--expert-weights", "int4"
    )
    assert result.exit_code == 2
    assert "--expert-weights = 'int4': llama-3.1-8b has no routed experts" in one_error_line(result)
