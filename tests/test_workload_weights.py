"""Weight precision as a workload input (issue 36, item 4): `weights` and `expert_weights` set the
formats the served model's weights are stored in, through every command that reads the workload,
and `export` reaches them the way the engines can (online FP8 from a 16-bit checkpoint, or a
checkpoint the user names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of, one_error_line

from pddplan.inputs import load_plan, load_workload, workload_dir, workload_model
from pddplan.inputs.input_set import load_input_set
from pddplan.perf import decode_step_time
from pddplan.perf.arithmetic import param_counts, weight_bytes
from pddplan.scenarios import build_scenario
from pddplan.specs.plan import RoleSpec

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


# -- per role (issue 36, item 4: "chosen in the workload or per role") --------------------------------
ROLE_FP8 = "role_weights:\n  decode:\n    weights: fp8\n"


def test_a_role_stores_the_model_as_the_plan_then_the_workload_says(tmp_path: Path) -> None:
    """Field by field: the plan role's own format, else the workload's `role_weights`, else its
    `weights`; a role neither names keeps the workload's."""
    inputs = load_input_set(
        load_workload(str(with_formats(tmp_path, "weights: fp8\n" + ROLE_FP8.replace("fp8", "nvfp4"))))
    )
    assert inputs.model_for("prefill").weight_dtype == "fp8"
    assert inputs.model_for("decode").weight_dtype == "nvfp4"
    spec = RoleSpec(datacenter="dc", gpu="g", tp=8, count=1, weights="int4")
    assert inputs.model_for("decode", spec).weight_dtype == "int4"
    assert inputs.model_for("prefill", spec.model_copy(update={"weights": None})).weight_dtype == "fp8"


def test_fp8_decoders_free_exactly_the_weight_bytes_they_save(cli: Any, tmp_path: Path) -> None:
    """The same pd-intra plan with its decoders in fp8: each decode instance gains the bytes its
    weights no longer take as KV room (hand-computed from the two models' weight bytes), runs
    shorter steps, and the prefill instances are untouched."""
    plan_path = tmp_path / "plan.yaml"
    assert (
        cli("optimize", "chat-short-lowhit", "-a", "pd-intra", "--no-verify", "--output", str(plan_path)).exit_code == 0
    )
    plan = load_plan(str(plan_path))
    bf16 = build_scenario(plan, load_input_set(load_workload("chat-short-lowhit"), workload_dir("chat-short-lowhit")))
    fp8 = build_scenario(plan, load_input_set(load_workload(str(with_formats(tmp_path, ROLE_FP8)))))
    before, after = bf16.roles["decode"], fp8.roles["decode"]
    assert after.instance.model.weight_dtype == "fp8" and fp8.roles["prefill"].instance.model.weight_dtype == "bf16"
    saved = weight_bytes(before.instance.model) - weight_bytes(after.instance.model)
    assert after.kv_capacity_bytes - before.kv_capacity_bytes == pytest.approx(saved, rel=1e-9)
    assert fp8.roles["prefill"].kv_capacity_bytes == bf16.roles["prefill"].kv_capacity_bytes
    step = [decode_step_time(r.instance, 64, 2048) for r in (before, after)]
    assert float(step[1]) < float(step[0])


def test_optimize_with_fp8_decoders_is_no_dearer_and_writes_no_format_into_the_plan(cli: Any, tmp_path: Path) -> None:
    workload = with_formats(tmp_path, ROLE_FP8)
    plan = tmp_path / "plan.yaml"
    costs = [
        json_of(cli("optimize", w, "-a", "pd-intra", "--no-verify", "--json"))["architectures"][0]["cost_usd_per_hour"]
        for w in ("chat-short-lowhit", str(workload))
    ]
    assert costs[1] <= costs[0]
    assert cli("optimize", str(workload), "-a", "pd-intra", "--no-verify", "--output", str(plan)).exit_code == 0
    assert "weights" not in plan.read_text(encoding="utf-8")  # the workload says it; the plan reads alike


def test_export_quantizes_only_the_role_that_asks(cli: Any, tmp_path: Path) -> None:
    """Decoders in fp8 from the 16-bit checkpoint: `--quantization fp8` on the decode servers
    only; decoders in nvfp4 need their own checkpoint (the error names the role), and one
    --model-path cannot serve two formats."""
    workload = with_formats(tmp_path, ROLE_FP8)
    plan = tmp_path / "plan.yaml"
    assert cli("optimize", str(workload), "-a", "pd-intra", "--no-verify", "--output", str(plan)).exit_code == 0
    files = json_of(cli("export", str(plan), str(workload), "--target", "sglang", "--json"))["files"]
    decode = [text for name, text in files.items() if name.startswith("decode")]
    prefill = [text for name, text in files.items() if name.startswith("prefill")]
    assert decode and all("--quantization fp8" in text for text in decode)
    assert prefill and not any("--quantization" in text for text in prefill)
    fp4 = tmp_path / "w4.yaml"
    fp4.write_text(workload.read_text(encoding="utf-8").replace("weights: fp8", "weights: nvfp4"), encoding="utf-8")
    one_error_line(
        cli("export", str(plan), str(fp4), "--target", "vllm"), "decode: weights nvfp4/nvfp4", "--model-path"
    )
    mixed = cli("export", str(plan), str(fp4), "--target", "vllm", "--model-path", "org/llama-70b-nvfp4")
    one_error_line(mixed, "--model-path names one checkpoint", "decode nvfp4/nvfp4")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("role_weights:\n  decoder:\n    weights: fp8\n", "role_weights.decoder"),
        ("role_weights:\n  decode:\n    weights: fp6\n", "role_weights.decode.weights"),
        (
            "role_weights:\n  decode:\n    expert_weights: int4\n",
            "expert_weights = 'int4': llama-3.1-70b has no routed experts",
        ),
    ],
)
def test_bad_role_weights_are_one_line(cli: Any, tmp_path: Path, lines: str, message: str) -> None:
    path = with_formats(tmp_path, lines)
    result = cli("optimize", str(path), "-a", "pd-intra", "--no-verify")
    one_error_line(result, message)
