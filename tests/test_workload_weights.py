"""Weight precision as a workload input (issue 36, item 4): `weights` and `expert_weights` set the
formats the served model's weights are stored in, through every command that reads the workload,
and `export` reaches them the way the engines can (online FP8 from a 16-bit checkpoint, or a
checkpoint the user names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of, one_error_line

from pddplan.inputs import load_workload, workload_model
from pddplan.perf.arithmetic import param_counts, weight_bytes

ROOT = Path(__file__).resolve().parent.parent
CHAT = (ROOT / "workloads" / "chat-short-lowhit.yaml").read_text(encoding="utf-8")  # llama-3.1-70b, bf16


def with_formats(tmp_path: Path, lines: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(CHAT.replace("model: llama-3.1-70b\n", f"model: llama-3.1-70b\n{lines}", 1), encoding="utf-8")
    return path


def test_fp8_weights_take_one_byte_a_value_and_the_embeddings_keep_two(tmp_path: Path) -> None:
    model = workload_model(load_workload(str(with_formats(tmp_path, "weights: fp8\n"))))
    assert model.weight_dtype == "fp8"
    c = param_counts(model)
    # fp8 (per-tensor scales): 1 B a value; the embedding and the LM head stay bf16, 2 B
    assert weight_bytes(model) == pytest.approx(
        (c.total - c.embedding - c.lm_head) * 1.0 + (c.embedding + c.lm_head) * 2.0
    )
    plain = workload_model(load_workload(str(ROOT / "workloads" / "chat-short-lowhit.yaml")))
    assert plain.weight_dtype == "bf16" and weight_bytes(plain) == 2.0 * c.total


def test_fp8_weights_make_the_plan_no_dearer(cli: Any, tmp_path: Path) -> None:
    """Fewer bytes per step and the fp8 GEMM rate: at the same rate and SLA, never a dearer plan."""
    costs = [
        json_of(cli("optimize", workload, "-a", "pd-intra", "--json"))["architectures"][0]["cost_usd_per_hour"]
        for workload in ("chat-short-lowhit", str(with_formats(tmp_path, "weights: fp8\n")))
    ]
    assert costs[1] < costs[0]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("expert_weights: int4\n", "expert_weights = 'int4': llama-3.1-70b has no routed experts"),
        ("weights: fp6\n", "weights = 'fp6': Input should be 'bf16', 'fp8'"),
    ],
)
def test_bad_weight_formats_are_one_line(cli: Any, tmp_path: Path, lines: str, message: str) -> None:
    path = with_formats(tmp_path, lines)
    one_error_line(cli("workloads", "show", str(path)), str(path), message)


def test_export_quantizes_a_16_bit_checkpoint_to_fp8_and_refuses_fp4_without_one(cli: Any, tmp_path: Path) -> None:
    fp8 = with_formats(tmp_path, "weights: fp8\n")
    plan = tmp_path / "plan.yaml"
    assert cli("optimize", str(fp8), "-a", "pd-intra", "--output", str(plan)).exit_code == 0
    for target in ("sglang", "vllm"):
        files = json_of(cli("export", str(plan), str(fp8), "--target", target, "--json"))["files"]
        scripts = [text for name, text in files.items() if name.startswith(("prefill", "decode"))]
        assert scripts and all("--quantization fp8" in text for text in scripts)
    fp4 = tmp_path / "w4.yaml"
    fp4.write_text(fp8.read_text(encoding="utf-8").replace("weights: fp8", "weights: nvfp4"), encoding="utf-8")
    one_error_line(cli("export", str(plan), str(fp4), "--target", "vllm"), "weights nvfp4/nvfp4", "--model-path")
    named = cli("export", str(plan), str(fp4), "--target", "vllm", "--model-path", "org/llama-70b-nvfp4", "--json")
    assert named.exit_code == 0 and "--quantization" not in named.stdout
