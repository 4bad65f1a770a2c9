"""Memory capacity: weights, activations and the KV budget per GPU, instance capacity, max batch.

Expected values follow the module docstring of `pddplan.perf.memory`, for hand-built models on a
hand-built GPU (100 GB of HBM).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from toys import GQA as GQA_SHAPE
from toys import arch, toy_gpu

from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf import Instance
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.memory import (
    activation_bytes,
    fits,
    instance_kv_capacity_bytes,
    max_batch,
    memory_budget,
)
from pddplan.specs.hardware import Efficiency
from pddplan.specs.model import ModelArchitecture

EFF = Efficiency(
    compute_max_fraction=0.8,
    compute_half_tokens=100.0,
    attention_compute_fraction=0.5,
    memory_fraction=0.8,
    scale_up_fraction=0.5,
    collective_latency_s=1e-5,
    step_overhead_s=1e-3,
    source="assumption: test",
)


GQA = arch(**GQA_SHAPE)
GQA_WEIGHTS = 2 * 32_461_824  # bf16, see test_arithmetic
GQA_KV_PER_TOKEN = 2 * (2 * 2 * 128 * 2)

MOE = arch(
    num_layers=3,
    hidden_size=1024,
    vocab_size=1000,
    num_heads=8,
    num_kv_heads=8,
    head_dim=96,
    intermediate_size=2048,
    mla={"kv_lora_rank": 128, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64, "q_lora_rank": 256},
    moe={
        "num_experts": 8,
        "experts_per_token": 2,
        "expert_intermediate_size": 256,
        "shared_expert_intermediate_size": 512,
        "first_dense_layers": 1,
    },
    weight_dtype="fp8",
    expert_weight_dtype="fp4",
    kv_dtype="fp8",
)


def inst(model: ModelArchitecture, tp: int = 1, ep: bool | None = None, **gpu: float) -> Instance:
    return Instance(model, toy_gpu(**gpu), tp, ep, EFF)


def test_activation_bytes() -> None:
    # T * (8 d + 2 f / tp) * 2 B
    assert activation_bytes(inst(GQA, tp=2), 8192) == 8192 * (8 * 1024 + 2 * 4096 / 2) * 2
    assert activation_bytes(inst(GQA), 100) == 100 * (8 * 1024 + 2 * 4096) * 2
    # MoE: the widest FFN is max(dense f, w * t) = max(2048, 256 * 2)
    assert activation_bytes(inst(MOE, tp=4), 8192) == 8192 * (8 * 1024 + 2 * 2048 / 4) * 2
    # data-parallel attention: each rank's own 8,192 tokens, whose token-expert rows its experts take
    assert inst(MOE, tp=4, ep=True).uses_dp_attention
    assert activation_bytes(inst(MOE, tp=4, ep=True), 8192) == 8192 * (8 * 1024 + 2 * 2048) * 2


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_memory_budget_tp(tp: int) -> None:
    budget = memory_budget(inst(GQA, tp=tp))
    activations = 8192 * (8 * 1024 + 2 * 4096 / tp) * 2
    assert budget.usable_bytes == pytest.approx(100e9 * 0.9)
    assert budget.weight_bytes == pytest.approx(GQA_WEIGHTS / tp, rel=1e-15)
    assert budget.activation_bytes == pytest.approx(activations)
    assert budget.kv_bytes == pytest.approx(90e9 - GQA_WEIGHTS / tp - activations, rel=1e-15)


def test_memory_budget_options() -> None:
    budget = memory_budget(inst(GQA), hbm_utilization=0.5, step_tokens=1000)
    assert budget.usable_bytes == pytest.approx(50e9)
    assert budget.activation_bytes == 1000 * (8 * 1024 + 2 * 4096) * 2


def test_memory_budget_ep_replicates_non_expert_weights() -> None:
    from pddplan.perf.arithmetic import weight_bytes

    total = weight_bytes(MOE)
    # 2 MoE layers x 8 experts, fp4 = NVFP4: 0.5 B a value + a 1-byte scale per 16 values
    experts = 2 * 8 * (3 * 1024 * 256) * (0.5 + 1 / 16)
    ep = memory_budget(inst(MOE, tp=16))  # spans two domains of 8: EP
    assert ep.weight_bytes == pytest.approx(total - experts + experts / 16, rel=1e-15)
    tp = memory_budget(inst(MOE, tp=8, ep=False))
    assert tp.weight_bytes == pytest.approx(total / 8, rel=1e-15)
    assert memory_budget(inst(MOE, tp=4, ep=True)).weight_bytes == pytest.approx(total - experts + experts / 4)


def test_does_not_fit_is_a_clear_error() -> None:
    small = inst(GQA, hbm_gb=0.05)
    assert not fits(small)
    with pytest.raises(InputError) as info:
        memory_budget(small)
    message = str(info.value)
    assert "model 'toy' does not fit on toy-gpu at tp=1" in message
    assert "use a larger tp or another GPU" in message
    assert "usable 0.0 GB (90% of 0 GB)" in message


def test_fits_boundary_and_utilization() -> None:
    # need 64,923,648 B weights + 268,435,456 B activations = 333,359,104 B
    need = GQA_WEIGHTS + 8192 * (8 * 1024 + 2 * 4096) * 2
    assert need == 333_359_104
    edge = inst(GQA, hbm_gb=0.4)
    assert fits(edge, hbm_utilization=0.9)  # 360,000,000 usable
    assert not fits(edge, hbm_utilization=0.8)  # 320,000,000 usable
    assert fits(edge, hbm_utilization=0.8, step_tokens=1024)  # smaller step, smaller workspace
    assert memory_budget(edge).kv_bytes == pytest.approx(360_000_000 - need)


def test_catalog_fits() -> None:
    llama405 = load_model("llama-3.1-405b")
    with pytest.raises(InputError, match=r"does not fit on l40s at tp=1"):
        memory_budget(Instance(llama405, load_hardware("l40s"), 1))
    assert not fits(Instance(load_model("deepseek-v3.2"), load_hardware("h100-sxm"), 8))
    assert fits(Instance(load_model("deepseek-v3.2"), load_hardware("h100-sxm"), 16))
    assert fits(Instance(load_model("llama-3.1-8b"), load_hardware("l40s"), 1))


@pytest.mark.parametrize(("tp", "replication"), [(1, 1), (2, 1), (4, 2), (8, 4)])
def test_instance_kv_capacity_gqa_replication(tp: int, replication: int) -> None:
    instance = inst(GQA, tp=tp)
    per_gpu = memory_budget(instance).kv_bytes
    # tp * ceil(g / tp) / g with g = 2
    assert replication == tp * math.ceil(2 / tp) / 2
    assert instance_kv_capacity_bytes(instance) == pytest.approx(per_gpu * tp / replication, rel=1e-15)


def test_instance_kv_capacity_mla() -> None:
    """Tensor-parallel attention keeps the whole latent on each of the 8 ranks: one GPU's budget;
    expert parallelism runs data-parallel attention: each rank keeps its own sequences, 8 budgets."""
    tensor_parallel = inst(MOE, tp=8, ep=False)
    assert instance_kv_capacity_bytes(tensor_parallel) == pytest.approx(memory_budget(tensor_parallel).kv_bytes)
    expert_parallel = inst(MOE, tp=8, ep=True)
    assert instance_kv_capacity_bytes(expert_parallel) == pytest.approx(memory_budget(expert_parallel).kv_bytes * 8)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_expert_parallel_gqa_keeps_one_copy(tp: int) -> None:
    """Data-parallel attention under EP: no head replication even when tp exceeds the 2 KV heads."""
    moe_gqa = MOE.model_copy(update={"num_kv_heads": 2})
    instance = inst(moe_gqa, tp=tp, ep=True)
    assert instance_kv_capacity_bytes(instance) == pytest.approx(memory_budget(instance).kv_bytes * tp, rel=1e-15)


def test_max_batch() -> None:
    instance = inst(GQA, tp=2)
    capacity = instance_kv_capacity_bytes(instance)
    per_sequence = 1024 * GQA_KV_PER_TOKEN  # 1000 tokens in 64-token pages
    assert float(max_batch(instance, 1000)) == math.floor(capacity / per_sequence)
    reserved = 10e9
    assert float(max_batch(instance, 1000, reserved_bytes=reserved)) == math.floor((capacity - reserved) / per_sequence)
    assert float(max_batch(instance, 1000, page_tokens=1)) == math.floor(capacity / (1000 * GQA_KV_PER_TOKEN))
    out = max_batch(instance, np.array([1000, 64_000]))
    assert np.array_equal(out, [math.floor(capacity / per_sequence), math.floor(capacity / (64_000 * 2048))])
    # an empty context still holds the decoded token: one 64-token page, not 0 bytes
    assert float(max_batch(instance, 0)) == math.floor(capacity / (64 * GQA_KV_PER_TOKEN))
    # a cache reservation larger than the capacity leaves room for nothing, not a negative batch
    assert float(max_batch(instance, 1000, reserved_bytes=2 * capacity)) == 0.0


def test_max_batch_hbm_utilization() -> None:
    instance = inst(GQA)
    low = float(max_batch(instance, 4000, hbm_utilization=0.5))
    high = float(max_batch(instance, 4000, hbm_utilization=0.9))
    assert low < high
    assert low == math.floor((50e9 - GQA_WEIGHTS - 268_435_456) / (4032 * GQA_KV_PER_TOKEN))


def test_capacity_of_a_model_without_full_attention_layers() -> None:
    """Every layer sliding (Mistral-7B-v0.1 style): the KV budget is still the budget."""
    sliding = arch(
        num_layers=2,
        hidden_size=1024,
        vocab_size=1000,
        num_heads=8,
        num_kv_heads=2,
        head_dim=128,
        intermediate_size=4096,
        layer_kinds=["sliding", "sliding"],
        sliding_window=4096,
    )
    instance = inst(sliding, tp=2)
    per_gpu = memory_budget(instance).kv_bytes
    assert instance_kv_capacity_bytes(instance) == pytest.approx(per_gpu * 2)
    # a sequence holds at most the window: pages(min(N, 4096)) * 2 layers * 1024 B
    assert float(max_batch(instance, 100_000)) == math.floor(per_gpu * 2 / (4096 * 2 * 1024))


def test_sequences_that_fit_by_hand() -> None:
    """floor(max(capacity, 0) / max(sequence, 1 B)), the one rule every decoder-size limit uses."""
    from pddplan.perf.memory import sequences_that_fit

    assert float(sequences_that_fit(10_000.0, 3_000.0)) == 3.0
    assert float(sequences_that_fit(9_000.0, 3_000.0)) == 3.0
    assert float(sequences_that_fit(-5.0, 3_000.0)) == 0.0  # reserved prefixes above capacity
    assert float(sequences_that_fit(2.5, 0.0)) == 2.0  # a zero-byte sequence counts as 1 B
    assert sequences_that_fit([6e3, 7e3], [2e3, 3.5e3]).tolist() == [3.0, 2.0]


def test_sequences_that_fit_per_pool_by_hand() -> None:
    """A sequence cannot straddle two ranks' memories: pools * floor(capacity / pools / sequence)."""
    from pddplan.perf.memory import sequences_that_fit

    assert float(sequences_that_fit(10_000.0, 3_000.0, pools=2)) == 2.0  # 2 x floor(5,000 / 3,000), not 3
    assert float(sequences_that_fit(12_000.0, 3_000.0, pools=2)) == 4.0
    assert float(sequences_that_fit(10_000.0, 3_000.0, pools=1)) == 3.0


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_expert_parallel_sequences_fit_per_rank(tp: int) -> None:
    """Data-parallel attention: each of the tp ranks holds whole sequences in its own budget; the KV
    of one request leaves through one NIC. Tensor-parallel attention: one memory, tp senders."""
    ep, tensor = inst(MOE, tp=tp, ep=True), inst(MOE, tp=tp, ep=False)
    assert (ep.kv_pools, ep.kv_senders) == (tp, 1)
    assert (tensor.kv_pools, tensor.kv_senders) == (1, tp)
    per_rank = memory_budget(ep).kv_bytes
    sequence = float(request_kv_bytes(MOE, 5000, 64))
    assert float(max_batch(ep, 5000)) == tp * math.floor(per_rank / sequence)
