"""Calibration: reading measurements, predicting them, fitting factors, writing the efficiency block.

The fits run on small synthetic CSVs in tmp_path whose "measurements" the model itself produced
with known factors, so a correct fit must recover those factors.
"""

from __future__ import annotations

import csv
import hashlib
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_results import one_error_line

from pddplan.calibration.accuracy import accuracy_report
from pddplan.calibration.calibrate import (
    PARAMETERS,
    REQUIRED_COLUMNS,
    ErrorSummary,
    Measurement,
    calibrate_profile,
    efficiency_yaml,
    fit_efficiency,
    fit_stack_efficiency,
    held_out_note,
    predict,
    read_measurements,
    ridge_spread,
    with_efficiency_block,
)
from pddplan.calibration.refit import MIN_GPU_FIT_MODELS, MIN_GPU_FIT_ROWS, FitMemo, refit, write_catalog
from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.efficiency import DEFAULT_EFFICIENCY, efficiency_of
from pddplan.perf.priors import GPU_PRIORS, PRIOR_OF, STACK_PRIORS
from pddplan.perf.roofline import Instance, step_time
from pddplan.specs.hardware import Efficiency
from pddplan.support.loading import parse_text, validate

ROOT = Path(__file__).resolve().parent.parent

HEADER = "model,gpu,tp,kind,tokens,cached,batch,context,measured_s"

TRUE = Efficiency(
    compute_max_fraction=0.7,
    fp8_compute_max_fraction=0.6,
    compute_half_tokens=50.0,
    memory_fraction=0.75,
    expert_compute_max_fraction=0.6,
    expert_half_rows=64.0,
    expert_memory_fraction=0.6,
    attention_compute_fraction=0.6,
    attention_half_ctas=80.0,
    attention_half_keys=400.0,
    kv_memory_fraction=0.85,
    kv_half_bytes=3e7,
    scale_up_fraction=0.5,
    collective_latency_s=1e-5,
    nic_latency_s=5e-5,
    kernel_floor_s=6e-6,
    step_overhead_s=2e-3,
    request_overhead_s=0.02,
    source="assumption: the factors the synthetic data was made with",
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def row(
    kind: str,
    tokens: int = 1,
    cached: int = 0,
    batch: int = 1,
    context: int = 0,
    *,
    tp: int = 1,
    gpu: str = "h100-sxm",
    model: str = "llama-3.1-8b",
    split: str = "fit",
    weight_dtype: str = "",
    kv_dtype: str = "",
    stack: str = "",
    expert_weight_dtype: str = "",
) -> Measurement:
    return Measurement(
        model,
        gpu,
        tp,
        kind,  # type: ignore[arg-type]
        tokens,
        cached,
        batch,
        context,
        1.0,
        weight_dtype,
        kv_dtype,
        split,
        0,
        expert_weight_dtype=expert_weight_dtype,
        stack=stack,
    )


def synthetic_csv(path: Path, rows: list[Measurement], efficiency: Efficiency) -> Path:
    """A measurements CSV whose measured_s are the model's own predictions with `efficiency`."""
    measured = predict(rows, efficiency)
    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow([*REQUIRED_COLUMNS, "weight_dtype", "kv_dtype", "split", "stack", "expert_weight_dtype"])
        for m, seconds in zip(rows, measured, strict=True):
            out.writerow(
                [
                    m.model,
                    m.gpu,
                    m.tp,
                    m.kind,
                    m.tokens,
                    m.cached,
                    m.batch,
                    m.context,
                    repr(float(seconds)),
                    m.weight_dtype,
                    m.kv_dtype,
                    m.split,
                    m.stack,
                    m.expert_weight_dtype,
                ]
            )
    return path


# -- reading --------------------------------------------------------------------------------------
def test_read_measurements_parses_and_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.csv",
        HEADER + ",weight_dtype,kv_dtype,split\n"
        "llama-3.1-8b, h100-sxm ,2,prefill,5000,100,1,5000,0.4,fp8,,holdout\n"
        "llama-3.1-8b,h100-sxm,1,decode,0,,0,2000.0,0.01,,fp8,\n"
        "llama-3.1-8b,h100-sxm,1,extend,64,0,1,3000,0.02,,,excluded\n",
    )
    first, second, third = read_measurements(path)
    assert first == Measurement(
        "llama-3.1-8b", "h100-sxm", 2, "prefill", 5000, 100, 1, 5000, 0.4, "fp8", "", "holdout", 2,
        measured_kind="client_ttft",
    )  # fmt: skip
    # an empty measured_kind: a prefill row is a client TTFT, a decode row a client ITL, extend an engine step
    assert (second.measured_kind, third.measured_kind) == ("client_itl", "engine_step")
    # tokens and batch are at least 1, an empty cell is 0, a float-looking whole number is accepted,
    # an empty split means fit
    assert (second.tokens, second.cached, second.batch, second.context) == (1, 0, 1, 2000)
    assert (second.kv_dtype, second.split, second.line) == ("fp8", "fit", 3)
    assert third.split == "excluded" and third.line == 4
    # the optional columns may be absent altogether
    bare = read_measurements(write(tmp_path / "bare.csv", HEADER + "\nllama-3.1-8b,h100-sxm,1,decode,1,0,1,10,0.01\n"))
    assert (bare[0].weight_dtype, bare[0].kv_dtype, bare[0].split) == ("", "", "fit")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "llama-3.1-8b,h100-sxm,1,train,1,0,1,10,0.01",
            "line 2: kind = 'train': expected one of prefill, decode, extend",
        ),
        ("llama-3.1-8b,h100-sxm,x,decode,1,0,1,10,0.01", "line 2: tp = 'x': expected a whole number"),
        ("llama-3.1-8b,h100-sxm,1,decode,1,-5,1,10,0.01", "line 2: cached = -5: expected 0 to 10,000,000"),
        ("llama-3.1-8b,h100-sxm,inf,decode,1,0,1,10,0.01", "line 2: tp = inf: expected 0 to 4,096"),  # was a traceback
        ("llama-3.1-8b,h100-sxm,1,decode,1,0,1e30,10,0.01", "line 2: batch = 1e30: expected 0 to 1,000,000"),
        ("llama-3.1-8b,h100-sxm,1,decode,1,0,1,10,inf", "line 2: measured_s = inf: expected above 0, at most a day"),
        ("llama-3.1-8b,h100-sxm,1,decode,1,0,1,10,fast", "line 2: measured_s = 'fast': expected seconds"),
        ("llama-3.1-8b,h100-sxm,1,decode,1,0,1,10,0", "line 2: measured_s = 0.0: expected above 0, at most a day"),
        ("llama-3.1-8b,h100-sxm,1,decode,1,0,1,10,nan", "line 2: measured_s = nan: expected above 0, at most a day"),
        ("llama-3.1-8b,h100-sxm,0,decode,1,0,1,10,0.01", "line 2: tp = 0: must be >= 1"),
    ],
)
def test_read_measurements_rejects_bad_values(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path / "bad.csv", f"{HEADER}\n{line}\n")
    with pytest.raises(InputError) as info:
        read_measurements(path)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "llama-3.1-8b,h100-sxm,1,decode,1,0,1,10,0.01,wallclock",
            "line 2: measured_kind = 'wallclock': expected one of engine_step, client_ttft, client_itl",
        ),
        (
            "llama-3.1-8b,h100-sxm,1,decode,1,0,1,10,0.01,client_ttft",
            "line 2: measured_kind = client_ttft: only a prefill row is a TTFT",
        ),
    ],
)
def test_read_measurements_rejects_a_bad_measured_kind(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path / "bad.csv", f"{HEADER},measured_kind\n{line}\n")
    with pytest.raises(InputError) as info:
        read_measurements(path)
    assert message in str(info.value)


def test_only_a_client_ttft_row_is_predicted_with_the_request_overhead(tmp_path: Path) -> None:
    """The same prefill measured by the engine and by a client: the client's prediction is the
    engine's plus the request overhead of the factors, and a decode ITL row is the step alone."""
    path = write(
        tmp_path / "m.csv",
        HEADER + ",measured_kind\n"
        "llama-3.1-8b,h100-sxm,1,prefill,2048,0,1,2048,0.1,engine_step\n"
        "llama-3.1-8b,h100-sxm,1,prefill,2048,0,1,2048,0.1,client_ttft\n"
        "llama-3.1-8b,h100-sxm,1,decode,1,0,8,2048,0.01,client_itl\n",
    )
    engine, client, itl = predict(read_measurements(path), DEFAULT_EFFICIENCY)
    instance = Instance(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), 1, None, DEFAULT_EFFICIENCY)
    assert engine == pytest.approx(float(step_time(instance, 2048, 0, 1).total_s), rel=1e-12)
    assert client == pytest.approx(engine + DEFAULT_EFFICIENCY.request_overhead_s, rel=1e-12)
    assert itl == pytest.approx(float(step_time(instance, 1, 2048, 8).total_s), rel=1e-12)


def test_read_measurements_names_the_line(tmp_path: Path) -> None:
    good = "llama-3.1-8b,h100-sxm,1,decode,1,0,1,10,0.01"
    path = write(tmp_path / "m.csv", f"{HEADER}\n{good}\n{good}\n{good.replace('decode', 'Decode!')}\n")
    with pytest.raises(InputError, match=r"line 4: kind = 'Decode!'"):
        read_measurements(path)


def test_read_measurements_missing_column_and_file(tmp_path: Path) -> None:
    path = write(tmp_path / "m.csv", "model,gpu,tp,kind,tokens,batch,context\nx,y,1,decode,1,1,1\n")
    with pytest.raises(InputError) as info:
        read_measurements(path)
    assert str(info.value) == (
        f"{path}: missing column(s) cached, measured_s; need model, gpu, tp, kind, tokens, cached, batch, "
        "context, measured_s"
    )
    with pytest.raises(InputError, match="file not found"):
        read_measurements(tmp_path / "nowhere.csv")


def test_read_measurements_short_row_is_an_input_error(tmp_path: Path) -> None:
    """A row with fewer cells than the header must be reported with its line, not crash."""
    path = write(
        tmp_path / "short.csv", f"{HEADER}\nllama-3.1-8b,h100-sxm,1,decode,1,0,1,10,0.01\nllama-3.1-8b,h100-sxm,1\n"
    )
    with pytest.raises(InputError, match="line 3"):
        read_measurements(path)
    path = write(tmp_path / "short2.csv", f"{HEADER}\nllama-3.1-8b,h100-sxm,1,decode,1,0,1,100\n")
    with pytest.raises(InputError, match="line 2"):
        read_measurements(path)


# -- predicting -----------------------------------------------------------------------------------
def test_predict_each_kind_is_its_step() -> None:
    model = load_model("llama-3.1-8b")
    hw = load_hardware("h100-sxm")
    inst = Instance(model, hw, 1, None, TRUE)
    rows = [row("prefill", 4000, 1000, 2), row("decode", 7, 0, 32, 5000), row("extend", 64, 0, 1, 3000)]
    out = predict(rows, TRUE)
    assert out[0] == pytest.approx(float(step_time(inst, 4000, 1000, 2).total_s) + TRUE.request_overhead_s, rel=1e-12)
    # tokens ignored; a decode step (decode=True: its CUDA-graph cap and low-latency all-to-all)
    assert out[1] == pytest.approx(float(step_time(inst, 1, 5000, 32, decode=True).total_s), rel=1e-12)
    assert out[2] == pytest.approx(float(step_time(inst, 64, 3000, 1).total_s), rel=1e-12)
    # without factors each GPU uses its own profile's
    own = predict([row("decode", 1, 0, 1, 100)])
    assert own[0] == pytest.approx(float(step_time(Instance(model, hw, 1), 1, 100, 1, decode=True).total_s), rel=1e-12)


def test_predict_dtype_columns() -> None:
    model = load_model("llama-3.1-8b")
    hw = load_hardware("h100-sxm")
    fp8 = model.model_copy(update={"weight_dtype": "fp8", "expert_weight_dtype": None})
    out = predict([row("prefill", 8000, weight_dtype="fp8"), row("decode", 1, 0, 8, 60_000, kv_dtype="fp8")], TRUE)
    assert out[0] == pytest.approx(
        float(step_time(Instance(fp8, hw, 1, None, TRUE), 8000, 0, 1).total_s) + TRUE.request_overhead_s, rel=1e-12
    )
    assert out[1] == pytest.approx(
        float(step_time(Instance(model.with_kv_dtype("fp8"), hw, 1, None, TRUE), 1, 60_000, 8, decode=True).total_s),
        rel=1e-12,
    )
    # weight_dtype sets every weight's format, then expert_weight_dtype the routed experts' alone
    moe = load_model("qwen3-30b-a3b")
    mixed = moe.model_copy(update={"weight_dtype": "fp8", "expert_weight_dtype": "mxfp4"})
    both = row("decode", 1, 0, 8, 4000, model="qwen3-30b-a3b", weight_dtype="fp8", expert_weight_dtype="mxfp4")
    only_weights = replace(both, expert_weight_dtype="")
    got, fp8_experts = predict([both, only_weights], TRUE)
    expected = float(step_time(Instance(mixed, hw, 1, None, TRUE), 1, 4000, 8, decode=True).total_s)
    assert got == pytest.approx(expected, rel=1e-12)
    assert got != pytest.approx(fp8_experts, rel=1e-6)
    # int4 (AWQ / GPTQ) is a format of v3; 8-bit integer weights are not (no step-time model for them)
    predict([row("decode", weight_dtype="int4")], TRUE)
    with pytest.raises(InputError, match="weight_dtype = 'int8'"):
        predict([row("decode", weight_dtype="int8")], TRUE)
    with pytest.raises(InputError, match="expert_weight_dtype = 'int8'"):
        predict([row("decode", model="qwen3-30b-a3b", expert_weight_dtype="int8")], TRUE)


def test_error_summary() -> None:
    s = ErrorSummary.of(np.array([1.1, 0.5, 2.0]), np.array([1.0, 1.0, 1.0]))
    assert s.count == 3
    assert s.median == pytest.approx(0.5)
    assert s.worst == pytest.approx(1.0)
    assert s.mean == pytest.approx((0.1 + 0.5 + 1.0) / 3)
    empty = ErrorSummary.of(np.array([]), np.array([]))
    assert empty.count == 0 and math.isnan(empty.median) and math.isnan(empty.worst)


# -- fitting --------------------------------------------------------------------------------------
SYNTHETIC_ROWS = [
    row("prefill", 8000),
    row("prefill", 500),
    row("prefill", 2000, 10_000),
    row("prefill", 16_000, tp=2),
    row("decode", 1, 0, 1, 2000),
    row("decode", 1, 0, 64, 4000),
    row("decode", 1, 0, 256, 1000),
    row("extend", 64, 0, 1, 3000),
    row("decode", 1, 0, 16, 8000, split="holdout"),
    row("prefill", 3000, split="holdout"),
]
FREE = ("compute_max_fraction", "memory_fraction", "kernel_floor_s", "request_overhead_s")
#: A second model's rows on h100-sxm: a GPU-level refit needs rows of at least MIN_GPU_FIT_MODELS
#: models (one model's quirks would otherwise become the GPU's).
SECOND_MODEL_ROWS = [row("decode", 1, 0, 32, 2000, model="llama-2-7b"), row("prefill", 1000, model="llama-2-7b")]


def test_fit_recovers_known_factors(tmp_path: Path) -> None:
    path = synthetic_csv(tmp_path / "synthetic.csv", SYNTHETIC_ROWS, TRUE)
    rows = read_measurements(path)
    start = TRUE.model_copy(
        update={
            "compute_max_fraction": 0.5,
            "memory_fraction": 0.6,
            "kernel_floor_s": 2e-5,
            "request_overhead_s": 0.005,
        }
    )
    fixed = [name for name, _, _ in PARAMETERS if name not in FREE]
    result = fit_efficiency(rows, start, "calibrated: synthetic", fixed=fixed)
    for name in FREE:
        assert getattr(result.efficiency, name) == pytest.approx(getattr(TRUE, name), rel=0.02), name
    for name in fixed:
        assert getattr(result.efficiency, name) == getattr(TRUE, name), name
    assert result.efficiency.source == "calibrated: synthetic; on its 2 held-out rows: median |error| 0%, worst 0%"
    assert result.after_fit.count == 8 and result.after_holdout.count == 2
    assert result.after_fit.worst < 1e-3
    assert result.after_holdout.worst < 1e-3
    assert result.before_fit.median > 0.05  # the start was really off
    assert len(result.predicted_after) == len(result.rows) == 10


def test_a_stack_level_fit_pulls_the_kernel_floor_with_its_stack_spread(tmp_path: Path) -> None:
    """kernel_floor_s is a device floor at GPU level (spread 0.5 in log) but also carries a stack's
    fusions and eager launch gaps (stack_spread 1.0): rows made with a floor 4x the start move a
    stack-level fit (same ridge weight) further towards it, and no other factor has a stack spread."""
    assert ridge_spread(PRIOR_OF["kernel_floor_s"], stack_level=False) == 0.5
    assert ridge_spread(PRIOR_OF["kernel_floor_s"], stack_level=True) == 1.0
    for name in ("compute_max_fraction", "memory_fraction", "step_overhead_s"):
        assert ridge_spread(PRIOR_OF[name], stack_level=True) == PRIOR_OF[name].spread, name
    slow = TRUE.model_copy(update={"kernel_floor_s": 2.4e-5})
    path = synthetic_csv(tmp_path / "eager.csv", [r for r in SYNTHETIC_ROWS if r.split == "fit"], slow)
    rows = read_measurements(path)
    fixed = [name for name, _, _ in PARAMETERS if name != "kernel_floor_s"]
    floors = {
        level: fit_efficiency(
            rows, TRUE, "calibrated", fixed=fixed, prior_weight=0.33, stack_level=level
        ).efficiency.kernel_floor_s
        for level in (False, True)
    }
    assert TRUE.kernel_floor_s < floors[False] < floors[True] < slow.kernel_floor_s


def test_a_stack_fit_starts_at_and_keeps_the_stacks_own_priors(tmp_path: Path) -> None:
    """A (GPU, stack) with public priors of its own (TensorRT-LLM 0.5: NCCL all-reduces) fits from
    those, not from the GPU's factors: rows that cannot see a collective (one GPU each) leave
    `collective_latency_s` where each fit started, 27.9 us for trtllm-0.5 on H100 (Vidur's NCCL
    line), the GPU's own value for any other stack."""
    single = [r for r in SYNTHETIC_ROWS if r.split == "fit" and r.tp == 1]
    rows = read_measurements(synthetic_csv(tmp_path / "tp1.csv", single, TRUE))
    nccl = STACK_PRIORS["trtllm-0.5"]["h100-sxm"]
    trtllm = fit_stack_efficiency(rows, "h100-sxm", "trtllm-0.5", TRUE, "calibrated").efficiency
    other = fit_stack_efficiency(rows, "h100-sxm", "sglang-0.5", TRUE, "calibrated").efficiency
    assert trtllm.collective_latency_s == pytest.approx(nccl["collective_latency_s"][0], rel=1e-6)
    assert trtllm.scale_up_fraction == pytest.approx(nccl["scale_up_fraction"][0], rel=1e-6)
    assert other.collective_latency_s == pytest.approx(TRUE.collective_latency_s, rel=1e-6)
    assert other.scale_up_fraction == pytest.approx(TRUE.scale_up_fraction, rel=1e-6)


def test_fit_needs_three_fit_rows_and_ignores_excluded(tmp_path: Path) -> None:
    rows = [
        row("decode", 1, 0, 1, 1000),
        row("decode", 1, 0, 4, 1000),
        row("prefill", 100, split="excluded"),
        row("prefill", 100, split="holdout"),
    ]
    path = synthetic_csv(tmp_path / "few.csv", rows, TRUE)
    with pytest.raises(InputError, match="calibration needs at least 3 fit rows, got 2"):
        fit_efficiency(read_measurements(path))


def test_calibrate_profile_on_small_csv(tmp_path: Path) -> None:
    rows = [r for r in SYNTHETIC_ROWS if r.tp == 1] + [row("decode", 1, 0, 1, 2000, gpu="h200")]
    path = synthetic_csv(tmp_path / "small.csv", rows, TRUE)
    profile, result = calibrate_profile(path, "h100-sxm")
    assert profile.name == "h100-sxm"
    assert profile.efficiency == result.efficiency
    assert profile.efficiency.source.startswith("calibrated: fitted by `pddplan calibrate` to 7 rows of small.csv")
    assert {m.gpu for m in result.rows} == {"h100-sxm"}  # the h200 row is not this GPU's
    assert result.after_fit.median < result.before_fit.median
    catalog = load_hardware("h100-sxm")
    assert profile.model_copy(update={"efficiency": None}) == catalog.model_copy(update={"efficiency": None})
    with pytest.raises(InputError, match="no rows for gpu 'mi300x'"):
        calibrate_profile(path, "mi300x")


# -- writing the efficiency block -----------------------------------------------------------------
def reload(text: str) -> Efficiency:
    data = parse_text(text, "test")
    return validate(Efficiency, data["efficiency"], "test")


def test_efficiency_yaml_round_trips() -> None:
    tiny = TRUE.model_copy(
        update={
            "collective_latency_s": 1e-06,
            "kernel_floor_s": 5e-06,
            "kv_half_bytes": 4e7,
            "compute_half_tokens": 256.0,
            "source": 'calibrated: "quoted", with: colons and `ticks` # not a comment',
        }
    )
    for efficiency in (tiny, DEFAULT_EFFICIENCY, load_hardware("mi300x").efficiency):
        assert efficiency is not None
        text = efficiency_yaml(efficiency)
        assert text.startswith("efficiency:\n")
        back = reload(text)
        assert back.source == efficiency.source
        for name, value in efficiency.model_dump().items():
            if name != "source":
                assert isinstance(getattr(back, name), float), name
                assert getattr(back, name) == pytest.approx(value, rel=1e-5), name
    assert "  collective_latency_s: 1.0e-06\n" in efficiency_yaml(tiny)  # YAML 1.1 would read 1e-06 as text


def test_efficiency_yaml_loads_as_the_defaults_file() -> None:
    # the shipped defaults file is exactly such a block
    from pddplan.perf.efficiency import DEFAULT_EFFICIENCY_PATH

    assert reload(DEFAULT_EFFICIENCY_PATH.read_text()) == DEFAULT_EFFICIENCY
    assert reload(efficiency_yaml(DEFAULT_EFFICIENCY)) == DEFAULT_EFFICIENCY


def test_with_efficiency_block_replaces_the_block_and_keeps_the_rest(root: Path, tmp_path: Path) -> None:
    original = (root / "hardware_profiles" / "h100-sxm.yaml").read_text()
    new = TRUE.model_copy(update={"source": "calibrated: test"})
    text = with_efficiency_block(original, new)
    before_block = original.split("\nefficiency:\n")[0]
    assert text.startswith(before_block + "\n")
    assert text.count("\nefficiency:\n") == 1
    assert "\nstack_efficiency:\n" in text  # the per-stack block is kept when only the main one is given
    assert text.endswith(efficiency_yaml(new))
    path = write(tmp_path / "h100-sxm.yaml", text)
    profile = load_hardware(str(path))
    assert profile.efficiency == reload(efficiency_yaml(new))
    assert profile.model_copy(update={"efficiency": None}) == load_hardware("h100-sxm").model_copy(
        update={"efficiency": None}
    )


def test_with_efficiency_block_in_the_middle_or_absent() -> None:
    text = (
        "name: x\n"
        "efficiency:\n"
        "  compute_max_fraction: 0.5\n"
        "\n"
        "  memory_fraction: 0.5\n"
        "# a comment at column 0 inside the block\n"
        "  source: old\n"
        "sources:\n"
        "  a: {title: t, accessed: 2026-01}\n"
    )
    out = with_efficiency_block(text, TRUE)
    assert out == "name: x\nsources:\n  a: {title: t, accessed: 2026-01}\n" + efficiency_yaml(TRUE)
    assert with_efficiency_block("name: x\n\n\n", TRUE) == "name: x\n" + efficiency_yaml(TRUE)


# -- accuracy -------------------------------------------------------------------------------------
def test_accuracy_report_on_a_small_csv(tmp_path: Path) -> None:
    rows = [
        row("decode", 1, 0, 1, 2000),
        row("prefill", 4000, split="holdout"),
        row("decode", 1, 0, 8, 1000, gpu="l40s"),
        row("prefill", 100, split="excluded"),
    ]
    path = synthetic_csv(tmp_path / "acc.csv", rows, TRUE)
    report = accuracy_report(path).json_data()
    assert report["rows"] == 4 and report["excluded"] == 1
    assert report["summary"]["fit"]["count"] == 2 and report["summary"]["holdout"]["count"] == 1
    assert len(report["points"]) == 4  # the excluded row is listed, not scored
    for point in report["points"]:
        assert point["error"] == pytest.approx(point["predicted_s"] / point["measured_s"] - 1, rel=1e-12)
    assert [p["factors"] for p in report["points"]] == ["profile", "profile", "default", "profile"]  # l40s: none
    expected = predict([rows[0]])[0]
    assert report["points"][0]["predicted_s"] == pytest.approx(expected, rel=1e-12)
    assert report["holdout_by_gpu"] == {"h100-sxm": report["holdout_by_gpu"]["h100-sxm"]}  # only GPUs held out
    assert report["holdout_by_gpu"]["h100-sxm"]["holdout_count"] == 1
    assert report["gpu_level_summary"] == report["summary"]  # no row names a stack the profiles hold


def test_accuracy_scores_a_row_with_its_stack_factors(tmp_path: Path) -> None:
    """A row of a stack the GPU's profile holds is predicted with that stack's block; the GPU-level
    figure is kept beside it."""
    profile = load_hardware("b200")
    stack = sorted(profile.stack_efficiency)[0]
    rows = [row("decode", 1, 0, 8, 1000, gpu="b200", stack=stack), row("decode", 1, 0, 8, 1000, gpu="b200")]
    report = accuracy_report(synthetic_csv(tmp_path / "stack.csv", rows, TRUE)).json_data()
    stacked, plain = report["points"]
    assert (stacked["factors"], plain["factors"]) == ("stack", "profile")
    model = load_model("llama-3.1-8b")
    expected = step_time(Instance(model, profile, 1, stack=stack), 1.0, 1000, 8).total_s
    assert stacked["predicted_s"] == pytest.approx(float(expected), rel=1e-12)
    assert stacked["gpu_level_predicted_s"] == pytest.approx(plain["predicted_s"], rel=1e-12)
    assert stacked["predicted_s"] != pytest.approx(plain["predicted_s"], rel=1e-6)


# -- serving stacks -------------------------------------------------------------------------------
def test_efficiency_of_a_stack_and_an_unknown_one() -> None:
    profile = load_hardware("h100-sxm").model_copy(update={"stack_efficiency": {"mine-1.0": TRUE}})
    assert efficiency_of(profile, "mine-1.0") is TRUE
    assert efficiency_of(profile) == profile.efficiency
    with pytest.raises(InputError, match=r"stack = 'other': .*'h100-sxm'.*calibrated stacks: mine-1.0"):
        efficiency_of(profile, "other")
    with pytest.raises(InputError, match="calibrated stacks"):
        Instance(load_model("llama-3.1-8b"), profile, 1, stack="other")  # fails when built, not mid-sweep
    assert Instance(load_model("llama-3.1-8b"), profile, 1, stack="mine-1.0").efficiency is TRUE


def test_calibrate_profile_for_one_stack(tmp_path: Path) -> None:
    """--stack fits only that stack's rows, starts from the profile's factors and lands in stack_efficiency."""
    rows = [replace(r, stack="mine-1.0") for r in SYNTHETIC_ROWS if r.tp == 1]
    rows += [row("decode", 1, 0, 1, 2000, stack="other-2.0")]
    path = synthetic_csv(tmp_path / "stacks.csv", rows, TRUE)
    profile, result = calibrate_profile(path, "h100-sxm", stack="mine-1.0")
    assert {m.stack for m in result.rows} == {"mine-1.0"}
    assert profile.stack_efficiency["mine-1.0"] == result.efficiency
    assert profile.efficiency == load_hardware("h100-sxm").efficiency  # stack-agnostic block untouched
    assert "rows of stack mine-1.0 in stacks.csv" in result.efficiency.source
    assert result.after_fit.median < result.before_fit.median
    with pytest.raises(InputError, match="no rows for gpu 'h100-sxm' with stack 'absent'"):
        calibrate_profile(path, "h100-sxm", stack="absent")


def test_refit_builds_the_three_levels_and_writes_them(tmp_path: Path, root: Path) -> None:
    assert (MIN_GPU_FIT_ROWS, MIN_GPU_FIT_MODELS) == (3, 2)
    rows = [replace(r, stack="s-1") for r in SYNTHETIC_ROWS + SECOND_MODEL_ROWS if r.tp == 1]
    rows += [
        row("decode", 1, 0, 4, 1000, gpu="h200", stack="s-1"),
        row("prefill", 800, gpu="h200", stack="s-1"),
        row("decode", 1, 0, 64, 2000, gpu="h200", stack="s-1"),
    ]
    rows += [row("decode", 1, 0, 2, 500, stack="s-2", split="holdout")]  # a stack with no fit row: no block
    rows += [row("decode", 1, 0, 8, 3000, gpu="h800", stack="s-3")]  # the copying GPU's own stack
    fit = refit(read_measurements(synthetic_csv(tmp_path / "r.csv", rows, TRUE)), "r.csv")
    # h200 has 3 fit rows, all of one model (< 2 models): no GPU-level fit; h100 has rows of two;
    # h800 and gpu-a copy h100; GPUs with public kernel priors keep them
    assert set(fit.per_gpu) == {"h100-sxm", "h800", "gpu-a"} | set(GPU_PRIORS)
    assert "to 9 h100-sxm rows" in fit.per_gpu["h100-sxm"].source  # 7 + 2 fit rows
    assert fit.per_gpu["h20"].attention_compute_fraction == GPU_PRIORS["h20"]["attention_compute_fraction"][0]
    assert "own kernel priors" in fit.per_gpu["h20"].source
    assert set(fit.per_stack["h100-sxm"]) == {"s-1"} and set(fit.per_stack["h200"]) == {"s-1"}
    assert "copied from h100-sxm" in fit.per_gpu["h800"].source
    assert set(fit.per_stack["h800"]) == {"s-1", "s-3"}  # its own stack, and h100's inherited
    assert fit.factors("h100-sxm", "s-1") is fit.per_stack["h100-sxm"]["s-1"]
    assert fit.factors("h100-sxm", "s-2") is fit.per_gpu["h100-sxm"]
    assert fit.factors("l40s", None) is fit.defaults
    hardware = tmp_path / "hw"
    hardware.mkdir()
    for name in ("h100-sxm", "h200"):
        (hardware / f"{name}.yaml").write_text((root / "hardware_profiles" / f"{name}.yaml").read_text())
    written = write_catalog(fit, hardware, tmp_path / "defaults.yaml")
    assert written[0] == tmp_path / "defaults.yaml" and len(written) == 3
    h100 = load_hardware(str(hardware / "h100-sxm.yaml"))
    assert same_factors(h100.efficiency, fit.per_gpu["h100-sxm"])
    assert set(h100.stack_efficiency) == {"s-1"}
    assert same_factors(h100.stack_efficiency["s-1"], fit.per_stack["h100-sxm"]["s-1"])
    h200 = load_hardware(str(hardware / "h200.yaml"))
    assert h200.efficiency == load_hardware("h200").efficiency  # no GPU-level refit: block kept
    assert same_factors(h200.stack_efficiency["s-1"], fit.per_stack["h200"]["s-1"])
    assert same_factors(reload((tmp_path / "defaults.yaml").read_text()), fit.defaults)


def same_factors(written: Efficiency | None, fitted: Efficiency) -> bool:
    """Equal up to the 6 significant digits the YAML writer keeps."""
    assert written is not None
    a, b = written.model_dump(), fitted.model_dump()
    return a.pop("source") == b.pop("source") and all(a[k] == pytest.approx(b[k], rel=1e-5) for k in a)


def test_accuracy_default_is_found_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped measurements resolve from the package (tests/data in a checkout, _catalog in a wheel)."""
    monkeypatch.chdir(tmp_path)
    report = accuracy_report().json_data()
    assert Path(report["measurements"]).name == "measurements.csv"
    assert report["rows"] == len(read_measurements(Path(report["measurements"])))


def test_refit_does_not_depend_on_the_shipped_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The global fit starts from FIT_START, not from the file it rewrites, so a refit repeats."""
    import pddplan.calibration.calibrate as calibrate_module

    single = [r for r in SYNTHETIC_ROWS + SECOND_MODEL_ROWS if r.tp == 1]
    rows = read_measurements(synthetic_csv(tmp_path / "d.csv", single, TRUE))
    first = refit(rows, "d.csv")
    assert "h100-sxm" in first.per_gpu  # two models' rows: a GPU-level fit to compare
    monkeypatch.setattr(calibrate_module, "DEFAULT_EFFICIENCY", TRUE)
    second = refit(rows, "d.csv")
    assert second.defaults == first.defaults
    assert second.per_gpu == first.per_gpu


def test_held_out_note_states_the_held_out_error() -> None:
    """The note appended to a fit's source: the held-out count, median and worst, or that there are none."""
    summary = ErrorSummary.of(np.array([1.1, 0.5, 1.0]), np.array([1.0, 1.0, 1.0]))
    assert held_out_note(summary) == "; on its 3 held-out rows: median |error| 10%, worst 50%"
    assert held_out_note(ErrorSummary.of(np.array([0.8]), np.array([1.0]))) == (
        "; on its 1 held-out row: median |error| 20%, worst 20%"
    )
    assert held_out_note(ErrorSummary.of(np.array([]), np.array([]))) == "; no held-out rows to check it"


def test_refit_starts_a_copying_gpus_stack_from_its_originals_factors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """h800 copies h100-sxm (COPIES): a stack measured on the h800 is fitted from h100's factors,
    not from the defaults."""
    import pddplan.calibration.calibrate as calibrate_module  # refit's level fits call its fit_efficiency

    starts: dict[tuple[str, ...], Efficiency] = {}
    real_fit = calibrate_module.fit_efficiency

    def recording(rows: list[Measurement], start: Efficiency, *args: Any, **kwargs: Any) -> Any:
        starts[tuple(sorted({f"{m.gpu}/{m.stack}" for m in rows}))] = start
        return real_fit(rows, start, *args, **kwargs)

    monkeypatch.setattr(calibrate_module, "fit_efficiency", recording)
    rows = [replace(r, stack="s-1") for r in SYNTHETIC_ROWS + SECOND_MODEL_ROWS if r.tp == 1]
    rows += [row("decode", 1, 0, 8, 3000, gpu="h800", stack="s-3")]
    fit = refit(read_measurements(synthetic_csv(tmp_path / "r.csv", rows, TRUE)), "r.csv")
    assert starts[("h800/s-3",)] == fit.per_gpu["h100-sxm"]
    assert starts[("h800/s-3",)].source != fit.defaults.source


def test_expert_parallel_column_sets_the_layout(tmp_path: Path) -> None:
    """true / false / empty pick EP, TP or the default rule; the prediction is that layout's step."""
    path = write(
        tmp_path / "ep.csv",
        HEADER + ",expert_parallel\n"
        "deepseek-v3,h200,8,decode,1,0,64,4096,0.03, True \n"
        "deepseek-v3,h200,8,decode,1,0,64,4096,0.03,false\n"
        "deepseek-v3,h200,8,decode,1,0,64,4096,0.03,\n",
    )
    ep, tensor, default = read_measurements(path)
    assert (ep.expert_parallel, tensor.expert_parallel, default.expert_parallel) == (True, False, None)
    model, hardware = load_model("deepseek-v3"), load_hardware("h200")
    # decode rows are decode steps: under expert parallelism their all-to-all runs the low-latency kernels
    expected = [
        float(step_time(Instance(model, hardware, 8, layout, DEFAULT_EFFICIENCY), 1, 4096, 64, decode=True).total_s)
        for layout in (True, False, None)
    ]
    assert predict([ep, tensor, default], DEFAULT_EFFICIENCY).tolist() == pytest.approx(expected, rel=1e-12)
    assert expected[0] != pytest.approx(expected[1], rel=1e-3)  # the layouts really differ here
    bad = write(tmp_path / "bad.csv", HEADER + ",expert_parallel\ndeepseek-v3,h200,8,decode,1,0,64,4096,0.03,maybe\n")
    with pytest.raises(InputError, match=r"line 2: expert_parallel = 'maybe': expected true, false, tp-attention or"):
        read_measurements(bad)


def test_expert_parallel_column_takes_tensor_parallel_attention(tmp_path: Path) -> None:
    """tp-attention: experts expert-parallel under tensor-parallel attention, predicted as that step."""
    row = "deepseek-v3,h200,8,decode,1,0,64,4096,0.03,TP-Attention\n"
    path = write(tmp_path / "tpa.csv", HEADER + ",expert_parallel\n" + row)
    (m,) = read_measurements(path)
    assert (m.expert_parallel, m.tp_attention) == (True, True)
    model, hardware = load_model("deepseek-v3"), load_hardware("h200")
    instance = Instance(model, hardware, 8, True, DEFAULT_EFFICIENCY, tp_attention=True)
    expected = float(step_time(instance, 1, 4096, 64).total_s)
    assert float(predict([m], DEFAULT_EFFICIENCY)[0]) == pytest.approx(expected, rel=1e-12)


def test_an_empty_split_shows_a_dash_not_nan_percent() -> None:
    """A calibration with no held-out rows printed `nan%` in its table."""
    from rich.console import Console

    from pddplan.report.perf_tables import print_calibration

    nothing = {"count": 0, "median_abs_error": math.nan, "worst_abs_error": math.nan}
    some = {"count": 3, "median_abs_error": 0.04, "worst_abs_error": 0.11}
    summary = {
        "target": "h100-sxm",
        "before": {"fit": some, "holdout": nothing},
        "after": {"fit": some, "holdout": nothing},
        "efficiency": {"compute_max_fraction": 0.9},
    }
    console = Console(record=True, width=120)
    print_calibration(console, summary)
    text = console.export_text()
    assert "nan" not in text
    assert "4.0%" in text and "11.0%" in text


def test_write_catalog_refuses_an_installed_package(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a plain `pip install .` it used to rewrite the profiles inside site-packages."""
    monkeypatch.setattr("pddplan.support.catalog.is_installed_copy", lambda: True)
    result = cli("calibrate", str(ROOT / "tests" / "data" / "measurements.csv"), "--all", "--write-catalog")
    one_error_line(result, "--write-catalog", "installed package")


def test_a_fit_names_its_data_by_hash_and_is_stamped_with_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source line used to carry today's date, so a refit never repeated byte for byte."""
    from pddplan.calibration.calibrate import data_tag

    path = tmp_path / "m.csv"
    path.write_text("model,gpu\n", encoding="utf-8")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764633600")  # 2025-12-02T00:00:00Z
    digest = hashlib.sha256(b"model,gpu\n").hexdigest()[:12]
    assert data_tag(path) == f"m.csv (sha256 {digest}) on 2025-12-02"
    path.write_text("model,gpu\nx,y\n", encoding="utf-8")
    assert digest not in data_tag(path)  # other data, another tag
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "soon")
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH"):
        data_tag(path)


def test_a_fit_that_worsens_the_held_out_rows_is_not_written_without_force(cli: Any, tmp_path: Path) -> None:
    """calibrate wrote such factors silently before (issue 37, item 7): h100-sxm's nine held-out rows
    go from 3.0% to 4.7% median |error| when its stack-agnostic factors are refitted to its fit rows."""
    measurements = str(ROOT / "tests" / "data" / "measurements.csv")
    out = tmp_path / "h100.yaml"
    result = cli("calibrate", measurements, "--gpu", "h100-sxm", "--output", str(out))
    assert result.exit_code == 2 and not out.exists()
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("warning: the fitted factors make the 9 held-out rows worse: median |error|")
    assert lines[-1].endswith(f"{out} not written (--force writes it anyway)")
    forced = cli("calibrate", measurements, "--gpu", "h100-sxm", "--output", str(out), "--force")
    assert forced.exit_code == 0 and out.exists() and "warning: the fitted factors make" in forced.stderr


def test_predicting_rows_together_equals_predicting_each_alone() -> None:
    """`predict` steps every row of one instance and kind at once: each row's prediction is the
    one it gets alone, exactly (the shipped measurements: every model, GPU, layout and kind)."""
    rows = read_measurements(ROOT / "tests" / "data" / "measurements.csv")
    for by_stack in (False, True):
        together = predict(rows, by_stack=by_stack)
        alone = np.array([predict([m], by_stack=by_stack)[0] for m in rows])
        assert np.array_equal(together, alone)


def test_a_fit_memo_refits_only_the_groups_whose_rows_changed(tmp_path: Path) -> None:
    """Cross-validation's folds share one FitMemo: a refit of the same rows makes no new fit and
    gives the same factors; holding out an h200 row changes the h200 stack's input only, so that
    one fit is made again and the h100 fits are the kept ones."""
    rows = [replace(r, stack="s-1") for r in SYNTHETIC_ROWS + SECOND_MODEL_ROWS if r.tp == 1]
    rows += [row("decode", 1, 0, 4, 1000, gpu="h200", stack="s-1"), row("prefill", 800, gpu="h200", stack="s-1")]
    rows = read_measurements(synthetic_csv(tmp_path / "r.csv", rows, TRUE))
    memo = FitMemo()
    first = refit(rows, "r.csv", memo=memo)
    made = len(memo.fits)
    assert made == 3  # h100-sxm's GPU level, its s-1 stack, h200's s-1 stack (one model: no GPU level)
    again = refit(rows, "r.csv", memo=memo)
    assert len(memo.fits) == made and again.per_stack == first.per_stack and again.per_gpu == first.per_gpu
    held = [replace(m, split="holdout") if m.gpu == "h200" and m.kind == "prefill" else m for m in rows]
    fold = refit(held, "r.csv", memo=memo)
    assert len(memo.fits) == made + 1
    assert fold.per_gpu["h100-sxm"] is first.per_gpu["h100-sxm"]
    assert fold.per_stack["h100-sxm"]["s-1"] is first.per_stack["h100-sxm"]["s-1"]
