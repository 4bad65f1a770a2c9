"""Decode steps with and without CUDA graphs: the host's launch time bounds an eager decode step from
below (`eager_host_time`), from the workload's `serving.cuda_graph_max_batch` or `estimate
--cuda-graph-max-batch` through the step model, the evaluation and the exported engine flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from cli_results import one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.roofline import (
    Instance,
    collectives_launched,
    decode_step_time,
    eager_host_time,
    kernels_launched,
    step_time,
)
from pddplan.specs.workload import Mtp

ROOT = Path(__file__).resolve().parent.parent


def llama8b(cap: int | None = None, tp: int = 1) -> Instance:
    return Instance(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), tp, cuda_graph_max_batch=cap)


def test_kernels_and_collectives_by_hand() -> None:
    """Llama-3.1-8B: 4 per step + 32 layers x (5 attention + 4 FFN) = 292 kernels; at TP 4 two
    all-reduces per layer, 64; DeepSeek-V3 under data-parallel attention on 16 GPUs: a dispatch
    and a combine per MoE layer (58 of its 61 layers), 116."""
    assert kernels_launched(load_model("llama-3.1-8b")) == 292
    assert collectives_launched(llama8b()) == 0
    assert collectives_launched(llama8b(tp=4)) == 64
    deepseek = Instance(load_model("deepseek-v3"), load_hardware("h200"), 16, expert_parallel=True)
    assert collectives_launched(deepseek) == 116


def test_eager_host_time_by_hand() -> None:
    """step_overhead + launch_gap * (kernels + collectives) with the profile's factors."""
    one, four = llama8b(), llama8b(tp=4)
    eff = one.efficiency
    assert eager_host_time(one) == pytest.approx(eff.step_overhead_s + eff.launch_gap_s * 292, rel=1e-12)
    assert eager_host_time(four) == pytest.approx(eff.step_overhead_s + eff.launch_gap_s * (292 + 64), rel=1e-12)
    assert eff.launch_gap_s == 3e-5  # the shipped prior; no row runs an eager decode step


def test_the_prior_meets_the_public_eager_steps() -> None:
    """Batch-1 eager decode of Llama-3-8B in SGLang measured 8.23 ms (FlashInfer) and 9.28 ms
    (Triton) against 7.35 / 7.06 ms with CUDA graphs (sglang PR #1401); the model, graphed and
    eager, on an H100 (the PR does not name its GPU; an eager step is host-bound whatever the GPU)."""
    graphed = float(decode_step_time(llama8b(), 1.0, 136.0))
    eager = float(decode_step_time(llama8b(cap=0), 1.0, 136.0))
    assert 7.06e-3 * 0.85 <= graphed <= 7.35e-3 * 1.15
    assert 8.23e-3 * 0.9 <= eager <= 9.28e-3 * 1.1
    assert eager == pytest.approx(eager_host_time(llama8b(cap=0)), rel=1e-12)


def test_the_cap_decides_which_decode_batches_run_eagerly() -> None:
    batches = np.array([1.0, 8.0, 16.0, 17.0, 64.0])
    graphed = step_time(llama8b(), 1.0, 200.0, batches, decode=True)
    capped = step_time(llama8b(cap=16), 1.0, 200.0, batches, decode=True)
    host = eager_host_time(llama8b(cap=16))
    expected = np.where(batches > 16, np.maximum(graphed.total_s, host), graphed.total_s)
    np.testing.assert_allclose(capped.total_s, expected, rtol=1e-12)
    np.testing.assert_allclose(capped.host_bound_s, expected - graphed.total_s, rtol=1e-12, atol=1e-15)
    assert list(capped.bound[:3]) == list(graphed.bound[:3])
    assert list(capped.bound[3:]) == ["host", "host"]  # 200-token contexts: the host is slower than the device
    # every other part of the step is the graphed step's
    np.testing.assert_array_equal(capped.overhead_s, graphed.overhead_s)
    np.testing.assert_array_equal(capped.dense_gemm_s, graphed.dense_gemm_s)


def test_a_long_decode_step_hides_its_launches() -> None:
    """At batch 256 on 8K contexts the device takes longer than the host's 9 ms: no host bound."""
    graphed = step_time(llama8b(), 1.0, 8192.0, 256.0, decode=True)
    eager = step_time(llama8b(cap=0), 1.0, 8192.0, 256.0, decode=True)
    assert float(graphed.total_s) > eager_host_time(llama8b(cap=0))
    assert float(eager.total_s) == float(graphed.total_s) and float(eager.host_bound_s) == 0.0


def test_prefill_and_unflagged_steps_are_never_host_bound() -> None:
    """Only a step passed as decode is bounded; a prefill's kernels keep ahead of its host."""
    for n, b in ((128.0, 1.0), (1.0, 1.0)):
        plain = step_time(llama8b(), n, 0.0, b)
        eager = step_time(llama8b(cap=0), n, 0.0, b)
        assert float(eager.total_s) == float(plain.total_s) and float(eager.host_bound_s) == 0.0


def test_mtp_steps_are_bounded_too() -> None:
    """With multi-token prediction, the verify step and each draft step are decode steps: eager,
    each takes at least its host's time (the draft, one layer: host / L)."""
    model = load_model("deepseek-v3")
    hw = load_hardware("h200")
    mtp = Mtp(1, 0.8)
    eager = Instance(model, hw, 8, mtp=mtp, cuda_graph_max_batch=0)
    host = eager_host_time(eager)
    per_token = float(decode_step_time(eager, 1.0, 2000.0))
    verify = max(float(step_time(Instance(model, hw, 8, mtp=mtp), 2.0, 2000.0, 1.0).total_s), host)
    one = max(float(step_time(Instance(model, hw, 8, mtp=mtp), 1.0, 2000.0, 1.0).total_s), host)
    assert per_token == pytest.approx((verify + one / model.num_layers) / mtp.tokens_per_step(), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 512), cap=st.integers(0, 512), context=st.integers(0, 100_000))
def test_an_eager_step_is_never_faster_than_a_graphed_one(batch: int, cap: int, context: int) -> None:
    graphed = float(decode_step_time(llama8b(), float(batch), float(context)))
    capped = float(decode_step_time(llama8b(cap=cap), float(batch), float(context)))
    if batch <= cap:
        assert capped == graphed
    else:
        assert capped >= graphed
        assert capped >= eager_host_time(llama8b(cap=cap)) * (1 - 1e-12)


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(InputError, match="cuda_graph_max_batch = -1"):
        llama8b(cap=-1)


def test_estimate_flag(cli: Any) -> None:
    args = ("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--decode-batch", "1", "--context", "200")
    graphed = json.loads(cli(*args, "--json").stdout)
    eager = json.loads(cli(*args, "--cuda-graph-max-batch", "0", "--json").stdout)
    captured = json.loads(cli(*args, "--cuda-graph-max-batch", "1", "--json").stdout)
    assert graphed["cuda_graph"] and graphed["eager_host_s"] is None and graphed["breakdown"]["host_bound_s"] == 0
    assert captured == graphed
    assert not eager["cuda_graph"] and eager["bound"] == "host"
    assert eager["decode_step_s"] == pytest.approx(eager["eager_host_s"], rel=1e-12)
    assert eager["breakdown"]["host_bound_s"] == pytest.approx(eager["decode_step_s"] - graphed["decode_step_s"])
    text = cli(*args, "--cuda-graph-max-batch", "0").stdout
    assert "launched eagerly" in text and "bound: host" in " ".join(text.split())
    one_error_line(cli(*args, "--cuda-graph-max-batch", "-1"), "--cuda-graph-max-batch = -1")
    prefill = ("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "100")
    one_error_line(cli(*prefill, "--cuda-graph-max-batch", "8"), "--cuda-graph-max-batch applies to a decode step")


def _workload_with_cap(tmp_path: Path, cap: int) -> Path:
    spec = yaml.safe_load((ROOT / "workloads" / "pdd-agent-64k.yaml").read_text())
    spec["serving"] = {**spec.get("serving", {}), "cuda_graph_max_batch": cap}
    path = tmp_path / f"pdd-agent-64k-graphs-{cap}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_workload_without_decode_graphs_decodes_slower(tmp_path: Path) -> None:
    """The shipped PDD plan on pdd-agent-64k with no decode graphs: every decoder's instance carries
    the cap, and no decode stage gets faster (a long-context decode step may hide its launches)."""
    from pddplan.api import scenario_of
    from pddplan.evaluate import evaluate

    plan = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"
    base = scenario_of(plan, ROOT / "workloads" / "pdd-agent-64k.yaml")
    eager = scenario_of(plan, _workload_with_cap(tmp_path, 0))
    assert all(role.instance.cuda_graph_max_batch == 0 for role in eager.roles.values())
    slow, fast = evaluate(eager), evaluate(base)
    for stage, result in fast.stages.items():
        assert slow.stages[stage].step_s >= result.step_s * (1 - 1e-12), stage
    assert slow.tpot.p90_s >= fast.tpot.p90_s


def test_a_negative_workload_cap_is_bad_input(tmp_path: Path, cli: Any) -> None:
    path = _workload_with_cap(tmp_path, -1)
    result = cli("workloads", "show", str(path))
    one_error_line(result, "cuda_graph_max_batch")


@pytest.mark.parametrize(
    ("cap", "sglang_flags", "vllm_flags"),
    [
        (0, ["--disable-decode-cuda-graph"], ["--enforce-eager"]),
        (
            48,
            ["--cuda-graph-max-bs-decode", "48"],
            ["--compilation-config", '{"max_decode_cudagraph_capture_requests":48}'],
        ),
    ],
)
def test_export_passes_the_cap_to_decode_servers(
    tmp_path: Path, cap: int, sglang_flags: list[str], vllm_flags: list[str]
) -> None:
    """SGLang 0.5.23 `--cuda-graph-max-bs-decode N` / `--disable-decode-cuda-graph`; vLLM 0.34.0
    `--compilation-config '{"max_decode_cudagraph_capture_requests": N}'` / `--enforce-eager`; on
    decode servers only (docs/export.md)."""
    from pddplan.api import scenario_of
    from pddplan.export.engines import NodeContext, Shell, sglang_args, vllm_args
    from pddplan.export.layout import deployment_of

    plan = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"
    deployment = deployment_of(scenario_of(plan, _workload_with_cap(tmp_path, cap)), "org/model")
    node = NodeContext(Shell("0"), Shell("${HEAD}"))

    def has(args: list[str], flags: list[str]) -> bool:
        return any(args[i : i + len(flags)] == flags for i in range(len(args)))

    for instance in deployment.instances:
        decode = instance.disaggregation == "decode"
        assert has(sglang_args(deployment, instance, node), sglang_flags) == decode
        assert has(vllm_args(deployment, instance, node), vllm_flags) == decode
    plain = deployment_of(scenario_of(plan, ROOT / "workloads" / "pdd-agent-64k.yaml"), "org/model")
    for instance in plain.instances:
        assert not any("cuda" in token or "eager" in token for token in sglang_args(plain, instance, node))
        assert not any("cudagraph" in token or "eager" in token for token in vllm_args(plain, instance, node))
