"""Pipeline parallelism: an instance of pp stages of tp GPUs each (`Instance.pp`, a plan role's
`pp`): a stage's step (`pipeline_stage`), decode micro-batches, the prefill's pipeline fill,
memory per stage, the simulated pool, the optimizer's widths and the export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.api import scenario_of
from pddplan.errors import InputError
from pddplan.export import export_plan
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.arithmetic import weight_bytes
from pddplan.perf.memory import instance_kv_capacity_bytes, memory_budget
from pddplan.perf.roofline import (
    Instance,
    collectives_launched,
    decode_step_time,
    extend_time,
    kernels_launched,
    prefill_cost,
    prefill_time,
    stage_transfer_s,
    step_time,
)
from pddplan.simulate.prefill import PrefillPool, run_prefill_pool
from pddplan.specs.plan import RoleSpec

WORKLOAD = "chat-short-lowhit"  # Llama-3.1-70B, up to 64 x h100-sxm (8-GPU nodes) at home


def stages(pp: int = 2, tp: int = 8, model: str = "llama-3.1-405b") -> Instance:
    return Instance(load_model(model), load_hardware("h100-sxm"), tp, pp=pp)


def test_a_stage_step_is_its_share_of_the_layers_plus_its_send_and_the_step_overhead() -> None:
    """stage = (whole - o_step - host) / pp + x(T) + o_step + host, x(T) = alpha + T d 2 B / (tp e
    link): 16 GPUs exceed the 8-GPU domain, so the NIC and its latency."""
    instance = stages()
    hw, eff = instance.hardware, instance.efficiency
    tokens = 4096.0
    whole = step_time(instance.one_stage(), tokens, 0.0)
    stage = step_time(instance, tokens, 0.0)
    send = eff.nic_latency_s + 2 * tokens * 16384 * 2 / (8 * hw.nic_bytes_per_s * eff.scale_up_fraction)
    assert float(stage_transfer_s(instance, tokens)) == pytest.approx(send, rel=1e-12)
    expected = (whole.total_s - eff.step_overhead_s) / 2 + send + eff.step_overhead_s
    assert float(stage.total_s) == pytest.approx(float(expected), rel=1e-12)
    assert float(stage.dense_gemm_s) == pytest.approx(float(whole.dense_gemm_s) / 2, rel=1e-12)
    assert float(stage.stage_transfer_s) == pytest.approx(send, rel=1e-12)
    parts = stage.dense_gemm_s + stage.experts_s + stage.attention_s + stage.communication_s + stage.overhead_s
    assert float(parts) == pytest.approx(float(stage.total_s), rel=1e-9)  # the breakdown still adds up


def test_an_eager_stage_waits_for_its_own_kernels_to_launch() -> None:
    """Without CUDA graphs a stage's step takes at least its host's time to launch the stage's
    kernels, o_step + gap (launches) s, not the whole model's: Llama-3.1-70B on two TP8 stages."""
    instance = Instance(load_model("llama-3.1-70b"), load_hardware("h100-sxm"), 8, pp=2, cuda_graph_max_batch=0)
    eff = instance.efficiency
    whole = step_time(instance.one_stage(), 1.0, 4000.0, 32.0, decode=True)
    stage = step_time(instance, 1.0, 4000.0, 32.0, decode=True)
    device = (whole.total_s - whole.host_bound_s - eff.step_overhead_s) / 2 + stage.stage_transfer_s
    device = device + eff.step_overhead_s
    launches = kernels_launched(instance.model) + collectives_launched(instance)
    host = eff.step_overhead_s + eff.launch_gap_s * launches / 2
    assert float(stage.total_s) == pytest.approx(max(float(device), host), rel=1e-12)
    assert float(stage.host_bound_s) == pytest.approx(max(host - float(device), 0.0), abs=1e-15)


def test_the_fullest_stage_sets_the_pace_and_the_memory() -> None:
    """Llama-3.1-405B's 126 layers on four stages: the fullest holds 32, s = 32 / 126, of the
    per-layer work and of the weights per GPU; the KV one instance holds is tp / s GPUs' worth."""
    instance, whole = stages(pp=4), stages(pp=1)
    assert instance.stage_share == pytest.approx(32 / 126)
    stage, full = step_time(instance, 2048.0, 0.0), step_time(whole, 2048.0, 0.0)
    assert float(stage.dense_gemm_s) == pytest.approx(float(full.dense_gemm_s) * 32 / 126, rel=1e-12)
    weights = weight_bytes(instance.model) / 8  # every weight over one stage's 8 GPUs
    assert memory_budget(instance).weight_bytes == pytest.approx(weights * 32 / 126, rel=1e-12)
    assert instance_kv_capacity_bytes(instance) == pytest.approx(memory_budget(instance).kv_bytes * 8 * 126 / 32)


def test_inside_one_domain_the_send_takes_the_scale_up_fabric() -> None:
    instance = stages(pp=2, tp=4, model="llama-3.1-70b")  # 8 GPUs: one node
    hw, eff = instance.hardware, instance.efficiency
    send = eff.collective_latency_s + 2 * 1000 * 8192 * 2 / (4 * hw.scale_up_bytes_per_s * eff.scale_up_fraction)
    assert float(stage_transfer_s(instance, 1000.0)) == pytest.approx(send, rel=1e-12)


def test_decode_runs_pp_micro_batches_each_crossing_every_stage() -> None:
    """tau(B) = pp * stage(max(B / pp, 1)): batch 64 on two stages is two micro-batches of 32; a
    batch of 1 or 2 fills one micro-batch each, the other stage idle half the time (the bubble)."""
    instance = stages()
    at_32 = step_time(instance, 1.0, 4000.0, 32.0, decode=True).total_s
    assert float(decode_step_time(instance, 64, 4000)) == pytest.approx(2 * float(at_32), rel=1e-12)
    assert float(decode_step_time(instance, 1, 4000)) == pytest.approx(float(decode_step_time(instance, 2, 4000)))
    assert float(extend_time(instance, 100, 4000)) == pytest.approx(
        2 * float(step_time(instance, 100, 4000, 1.0).total_s), rel=1e-12
    )


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([2, 4]), st.integers(min_value=1, max_value=512), st.integers(min_value=0, max_value=60_000))
def test_stages_never_make_a_token_faster_than_one_stage_at_the_same_micro_batch(
    pp: int, batch: int, context: int
) -> None:
    """pp * stage(b) = whole(b) + pp x + (pp - 1)(o_step + host) >= whole(b), b = max(B / pp, 1)."""
    instance = stages(pp=pp)
    micro = max(batch / pp, 1.0)
    whole = float(step_time(instance.one_stage(), 1.0, context, micro, decode=True).total_s)
    assert float(decode_step_time(instance, batch, context)) >= whole


def test_a_prefill_s_chunks_follow_each_other_through_the_stages() -> None:
    """16,000 tokens in chunks of 8,192 (8,192 and 7,808): the first stage is busy sum_j s_j, and
    the last chunk leaves the last stage (pp - 1) max_j s_j later (a proportionate flow shop);
    the lone latency adds both and the request overhead."""
    instance = stages()
    first = float(step_time(instance, 8192.0, 0.0, packed_tokens=8192).total_s)
    second = float(step_time(instance, 7808.0, 8192.0, packed_tokens=8192).total_s)
    cost = prefill_cost(instance, 16_000, 0, 8192)
    assert float(cost.alone_s) == pytest.approx(first + second, rel=1e-12)
    assert float(cost.fill_s) == pytest.approx(max(first, second), rel=1e-12)
    overhead = instance.efficiency.request_overhead_s
    assert float(prefill_time(instance, 16_000, 0, 8192)) == pytest.approx(
        first + second + max(first, second) + overhead
    )
    one_stage = prefill_cost(instance.one_stage(), 16_000, 0, 8192)
    assert float(one_stage.fill_s) == 0.0
    assert float(cost.batched_s) < float(one_stage.batched_s)  # the pipeline takes chunks at a stage's pace


def test_each_gpu_holds_its_stage_s_share_of_the_weights_and_its_layers_kv() -> None:
    """Llama-3.1-405B (dense): weights / (tp pp) per GPU, as tp = 16; KV over all 16 GPUs, one copy
    (8 KV heads on 8 ranks), where tp = 16 keeps two."""
    pipelined, wide = stages(pp=2, tp=8), stages(pp=1, tp=16)
    assert memory_budget(pipelined).weight_bytes == pytest.approx(memory_budget(wide).weight_bytes, rel=1e-12)
    per_gpu = memory_budget(pipelined).kv_bytes
    assert instance_kv_capacity_bytes(pipelined) == pytest.approx(per_gpu * 16, rel=1e-12)
    assert instance_kv_capacity_bytes(wide) == pytest.approx(memory_budget(wide).kv_bytes * 16 / 2, rel=1e-12)


def test_layouts_pipelines_do_not_take_are_refused() -> None:
    with pytest.raises(InputError, match="pp = 81: pipeline stages must be 1 to the model's 80 layers"):
        stages(pp=81, model="llama-3.1-70b")
    with pytest.raises(InputError, match="data-parallel attention: not modelled"):
        Instance(load_model("deepseek-v3.2"), load_hardware("h200"), 8, expert_parallel=True, pp=2)
    Instance(load_model("deepseek-v3.2"), load_hardware("h200"), 8, expert_parallel=False, pp=2)  # TP experts: fine


def test_the_simulated_pool_steps_at_the_first_stage_and_ends_after_the_fill() -> None:
    """Two stages, T_lin(T) = 1 ms per 1,000 tokens, no attention: a lone request of 3,000 tokens
    in chunks of 2,000 rides steps of 2 ms and 1 ms, ends 3 ms + (2 - 1) x 2 ms after it starts; a
    second arriving at 1 ms starts when the first stage is free, at 3 ms, not when the first ends."""
    linear = [t / 1e6 for t in range(2001)]
    pool = PrefillPool(instances=1, chunk_tokens=2000, linear_s=linear, stages=2)
    run = run_prefill_pool(pool, np.array([0.0, 0.0105]), np.array([3000.0, 1000.0]), np.zeros(2))
    assert run.end_s[0] == pytest.approx(0.003 + 0.002)
    one_stage = run_prefill_pool(
        PrefillPool(instances=1, chunk_tokens=2000, linear_s=linear), np.array([0.0]), np.array([3000.0]), np.zeros(1)
    )
    assert one_stage.end_s[0] == pytest.approx(0.003)
    assert run.start_s[1] == pytest.approx(0.0105)
    assert run.end_s[1] == pytest.approx(0.0105 + 0.001 + 0.001)


def test_a_short_step_after_a_long_one_waits_for_it_in_the_later_stages() -> None:
    """A flow shop: a 100-token request packed into the step after a 2,000-token one leaves the
    first stage at 2.1 ms but the second only after the long step has left it, at 4 + 0.1 ms."""
    linear = [t / 1e6 for t in range(2001)]
    pool = PrefillPool(instances=1, chunk_tokens=2000, linear_s=linear, stages=2)
    run = run_prefill_pool(pool, np.array([0.0, 0.0]), np.array([2000.0, 100.0]), np.zeros(2))
    assert run.end_s[0] == pytest.approx(0.004)
    assert run.end_s[1] == pytest.approx(0.0041)


def test_a_role_s_gpus_are_tp_times_pp_and_a_plan_names_pp_only_when_set() -> None:
    spec = RoleSpec(datacenter="dc-a", gpu="h100-sxm", tp=8, count=3, pp=2)
    assert spec.gpus_per_instance == 16
    assert spec.gpus == 48
    assert spec.model_dump()["pp"] == 2
    assert "pp" not in RoleSpec(datacenter="dc-a", gpu="h100-sxm", tp=8, count=3).model_dump()


def _plan(tmp_path: Path, architecture: str = "pd-intra", pp: Any = 2, prefill_count: int = 1) -> Path:
    prefill: dict[str, Any] = {"datacenter": "dc-a", "gpu": "h100-sxm", "tp": 8, "count": prefill_count}
    if pp != 1:
        prefill["pp"] = pp
    plan: dict[str, Any] = {"name": "pp-plan", "architecture": architecture, "prefill": prefill}
    if architecture != "agg":
        plan["decode"] = {"datacenter": "dc-a", "gpu": "h100-sxm", "tp": 8, "count": 2}
    path = tmp_path / f"plan-{architecture}-{pp}-{prefill_count}.yaml"
    path.write_text(yaml.safe_dump(plan), encoding="utf-8")
    return path


def _figures(cli: Any, command: str, plan: Path, *extra: str) -> dict[str, Any]:
    result = cli(command, str(plan), WORKLOAD, *extra, "--json")
    assert result.exit_code == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_a_pipelined_pool_is_judged_like_the_plain_pool_of_as_many_gpus(cli: Any, tmp_path: Path) -> None:
    """One TP8 x PP2 prefill instance takes chunks at a stage's pace, as two TP8 instances do at
    theirs, and adds only the fill and the sends: its simulated TTFT P90 is within 15% of theirs,
    and the closed form is as close to the simulation for it as for them (P50 and P90 ratios
    within 0.1 of each other). It costs its 16 GPUs (with the decoders', 32)."""
    pipelined, plain = _plan(tmp_path), _plan(tmp_path, pp=1, prefill_count=2)
    figures = {
        (name, command): _figures(cli, command, plan, *(("--requests", "2000") if command == "simulate" else ()))
        for name, plan in (("pp", pipelined), ("plain", plain))
        for command in ("evaluate", "simulate")
    }
    assert figures[("pp", "simulate")]["ttft_p90_s"] == pytest.approx(
        figures[("plain", "simulate")]["ttft_p90_s"], rel=0.15
    )
    for key in ("ttft_p50_s", "ttft_p90_s"):
        ratios = {name: figures[(name, "evaluate")][key] / figures[(name, "simulate")][key] for name in ("pp", "plain")}
        assert ratios["pp"] == pytest.approx(ratios["plain"], abs=0.1), key
    gpu_hour = load_hardware("h100-sxm").cost_usd_per_gpu_hour("rental")
    assert figures[("pp", "evaluate")]["cost_usd_per_hour"] == pytest.approx(32 * gpu_hour, rel=1e-9)
    drawing = cli("evaluate", str(pipelined), WORKLOAD).stdout
    assert "1 x h100-sxm (TP8 PP2) = 16 GPUs" in drawing


def test_decoding_in_pipelined_prefill_steps_is_refused(cli: Any, tmp_path: Path) -> None:
    result = cli("evaluate", str(_plan(tmp_path, "agg")), WORKLOAD)
    assert result.exit_code == 2
    assert "prefill.pp = 2: decode tokens riding in a pipelined instance's prefill steps" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("pp", [0, 65, "two"])
def test_a_bad_pp_in_a_plan_is_one_line_naming_the_field(cli: Any, tmp_path: Path, pp: Any) -> None:
    result = cli("evaluate", str(_plan(tmp_path, pp=pp)), WORKLOAD)
    assert result.exit_code == 2
    assert "prefill.pp" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_export_runs_stages_beside_tensor_parallelism(tmp_path: Path) -> None:
    """SGLang --tp-size 8 --pp-size 2 over two 8-GPU nodes; the README table says TP8 x PP2."""
    scenario = scenario_of(_plan(tmp_path), WORKLOAD)
    sglang = export_plan(scenario, "sglang")
    head = " ".join(sglang.files["prefill-0.sh"].replace("\\\n", " ").split())
    assert "--tp-size 8 --pp-size 2" in head
    assert "--nnodes 2" in head
    assert "TP8 x PP2" in sglang.files["README.md"]
    prefill = next(i for i in sglang.to_output().instances if i.role == "prefill")
    assert (prefill.gpus, prefill.pp, prefill.nodes) == (16, 2, 2)
    decode = " ".join(sglang.files["decode-0.sh"].replace("\\\n", " ").split())
    assert "--pp-size" not in decode


def test_the_export_refuses_stages_an_engine_cannot_run(tmp_path: Path) -> None:
    """vLLM's NIXL connector runs no pipeline stages; SGLang's decode runs pp 1 or the prefill's."""
    with pytest.raises(InputError, match=r"prefill.pp = 2: vLLM .*NixlConnector does not run pipeline stages"):
        export_plan(scenario_of(_plan(tmp_path), WORKLOAD), "vllm")
    with pytest.raises(InputError, match=r"prefill.pp = 2: vLLM"):
        export_plan(scenario_of(_plan(tmp_path), WORKLOAD), "k8s", engine="vllm")
    plan = yaml.safe_load(_plan(tmp_path).read_text(encoding="utf-8"))
    plan["decode"].update(pp=4, count=1)
    path = tmp_path / "decode-pp.yaml"
    path.write_text(yaml.safe_dump(plan), encoding="utf-8")
    with pytest.raises(InputError, match=r"decode.pp = 4: SGLang's decode runs pp 1 or the prefill's \(2"):
        export_plan(scenario_of(path, WORKLOAD), "sglang")


def test_estimate_reports_a_stage_and_the_fill(cli: Any) -> None:
    args = ("estimate", "--model", "llama-3.1-405b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "2")
    prefill = json.loads(cli(*args, "--prefill", "16000", "--chunk", "8192", "--json").stdout)
    cost = prefill_cost(stages(), 16_000, 0, 8192)
    assert prefill["pp"] == 2
    assert prefill["pipeline_fill_s"] == pytest.approx(float(cost.fill_s))
    assert prefill["lone_request_ttft_s"] == pytest.approx(float(prefill_time(stages(), 16_000, 0, 8192)))
    decode = json.loads(cli(*args, "--decode-batch", "64", "--context", "4000", "--json").stdout)
    assert decode["time_per_output_token_s"] == pytest.approx(float(decode_step_time(stages(), 64, 4000)))
    assert decode["breakdown"]["stage_transfer_s"] > 0
    plain = json.loads(
        cli("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "100", "--json").stdout
    )
    assert "pp" not in plain and "stage_transfer_s" not in plain["breakdown"]
    for bad in ("0", "65"):
        result = cli("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--pp", bad, "--prefill", "100")
        assert result.exit_code == 2
        assert "--pp" in result.stderr


def test_the_optimizer_plans_a_model_too_large_for_one_node(cli: Any, tmp_path: Path) -> None:
    """Llama-3.1-405B in bf16 (810 GB) does not fit one 8 x H100 node: every plan spans nodes, and
    the candidates include TP8 x PP2 beside TP16 (the one-line plan, pd-intra)."""
    result = cli(
        "optimize",
        "--model",
        "llama-3.1-405b",
        "--gpu",
        "h100-sxm:64",
        "--isl",
        "4000",
        "--prefix",
        "0",
        "--osl",
        "300",
        "--ttft-p90",
        "8",
        "--ttft-p99",
        "15",
        "--tpot-p90",
        "0.2",
        "--rate",
        "0.5",
        "-a",
        "pd-intra",
        "--no-verify",
        "--top",
        "5",
        "--write-workload",
        str(tmp_path / "w.yaml"),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    plans = report["architectures"][0]["top"]
    kinds = {(role["tp"], role.get("pp", 1)) for p in plans for role in p["roles"].values()}
    assert all(tp * pp >= 16 for tp, pp in kinds)
    assert (8, 2) in kinds
