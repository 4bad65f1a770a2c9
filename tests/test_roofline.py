"""Step-time model v3: each part of the breakdown recomputed by hand from the module docstring.

Instances use a hand-built GPU with round numbers (1000 TFLOPS bf16, 2000 fp8, 4 TB/s, 500 GB/s
scale-up in domains of 8, 400 Gbps NIC) and an explicit Efficiency, so nothing depends on the
shipped calibration. EFF flattens the attention and KV-read curves (half points 0, head dim
included: the plateau everywhere) so the step formulas stay short; the curves have their own tests below.
"""

from __future__ import annotations

import numpy as np
import pytest
from toys import GQA as GQA_SHAPE
from toys import SLIDING as SLIDING_SHAPE
from toys import arch, toy_gpu

from pddplan.errors import InputError, LayoutError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.arithmetic import param_counts
from pddplan.perf.efficiency import DEFAULT_EFFICIENCY, efficiency_of
from pddplan.perf.moe import busiest_rank_share, experts_touched, grouped_gemm_efficiency
from pddplan.perf.roofline import (
    Instance,
    StepTime,
    attention_efficiency,
    decode_step_time,
    extend_time,
    floor_time,
    gemm_efficiency,
    head_dim_factor,
    kernels_launched,
    keys_seen,
    kv_read_efficiency,
    prefill_cost,
    prefill_time,
    saturating,
    split_kv_attention_efficiency,
    step_time,
    two_batch_overlap,
)
from pddplan.specs.hardware import Efficiency
from pddplan.specs.model import ModelArchitecture

EFF = Efficiency(
    compute_max_fraction=0.8,
    fp8_compute_max_fraction=0.8,
    compute_half_tokens=100.0,
    memory_fraction=0.8,
    expert_compute_max_fraction=0.8,
    expert_half_rows=100.0,
    expert_memory_fraction=0.5,
    attention_compute_fraction=0.5,
    attention_half_ctas=0.0,
    attention_half_keys=0.0,
    attention_half_head_dim=0.0,
    kv_memory_fraction=0.8,
    kv_half_bytes=0.0,
    scale_up_fraction=0.5,
    collective_latency_s=1e-5,
    nic_latency_s=5e-5,
    ep_link_fraction=0.5,  # prefill's all-to-alls: 4e-5 (the default `ep_latency_s`) + bytes at 0.5 of the link
    ep_ll_latency_s=2e-5,  # decode's: 2e-5 in a domain, 3e-5 across, bytes at 0.25 of the link
    ep_ll_nic_latency_s=3e-5,
    ep_ll_link_fraction=0.25,
    kernel_floor_s=1e-4,
    step_overhead_s=1e-3,
    request_overhead_s=0.01,
    source="assumption: test factors",
)
# Kernels per step (roofline.kernels_launched): 4 per step, then per layer its attention block
# (GQA 5, MLA 12, + 4 for the indexer) and FFN (dense 4, MoE 8, + 3 for a shared expert).
GQA_KERNELS = 4 + 2 * 5 + 2 * 4  # 22
MOE_KERNELS = 4 + 3 * (12 + 4) + 1 * 4 + 2 * (8 + 3)  # 78
GQA_OVERHEAD = 1e-3 + GQA_KERNELS * 1e-4
MOE_OVERHEAD = 1e-3 + MOE_KERNELS * 1e-4

F_BF16 = 1000e12
F_FP8 = 2000e12
BW = 4e12
SCALE_UP = 500e9
NIC = 400e9 / 8


def eff(n: float) -> float:
    return 0.8 * n / (n + 100.0)


GQA = arch(**GQA_SHAPE)
# per-layer parameter counts of GQA (see test_arithmetic): attention 2,621,440, FFN 12,582,912
GQA_DENSE_PARAMS = 2 * 2_621_440 + (2 * 1024 * 2 + 1024) + 2 * 12_582_912  # attention + norms + FFN
GQA_LM_HEAD = 1000 * 1024

MOE = arch(
    num_layers=3,
    hidden_size=1024,
    vocab_size=1000,
    num_heads=8,
    num_kv_heads=8,
    head_dim=96,
    intermediate_size=2048,
    mla={"kv_lora_rank": 128, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64, "q_lora_rank": 256},
    indexer={"num_heads": 4, "head_dim": 32, "top_k": 256},
    moe={
        "num_experts": 8,
        "experts_per_token": 2,
        "expert_intermediate_size": 256,
        "shared_expert_intermediate_size": 512,
        "first_dense_layers": 1,
        "router_bias": True,
        "shared_expert_gate": True,
    },
    weight_dtype="fp8",
    expert_weight_dtype="fp4",
    kv_dtype="fp8",
)
SLIDING = arch(**SLIDING_SHAPE)


def inst(model: ModelArchitecture, tp: int = 1, ep: bool | None = None, **gpu: float) -> Instance:
    return Instance(model, toy_gpu(**gpu), tp, ep, EFF)


# -- small formulas -------------------------------------------------------------------------------
def test_gemm_efficiency() -> None:
    assert float(gemm_efficiency(100, EFF)) == pytest.approx(0.8 * 100 / 200)
    assert float(gemm_efficiency(1, EFF)) == pytest.approx(0.8 / 101)
    assert float(gemm_efficiency(1e9, EFF)) == pytest.approx(0.8, rel=1e-6)
    assert float(gemm_efficiency(0, EFF)) == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(gemm_efficiency([10, 1000], EFF), [0.8 * 10 / 110, 0.8 * 1000 / 1100])


CURVES = EFF.model_copy(
    update={
        "fp8_compute_max_fraction": 0.6,
        "expert_compute_max_fraction": 0.65,
        "expert_half_rows": 64.0,
        "attention_compute_fraction": 0.7,
        "attention_half_ctas": 100.0,
        "attention_half_keys": 450.0,
        "attention_half_head_dim": 54.0,
        "kv_memory_fraction": 0.9,
        "kv_half_bytes": 25e6,
    }
)


def test_saturating_curves_by_hand() -> None:
    assert float(saturating(300, 0.9, 100)) == pytest.approx(0.9 * 300 / 400)
    assert float(saturating(5, 0.9, 0)) == pytest.approx(0.9)  # no half point: the plateau
    assert float(gemm_efficiency(256, CURVES, "fp8")) == pytest.approx(0.6 * 256 / 356)  # the fp8 plateau
    # fp4 has its own plateau, fp4_compute_max_fraction (default 0.42: CUTLASS NVFP4 on SM100)
    assert float(gemm_efficiency(256, CURVES, "fp4")) == pytest.approx(0.42 * 256 / 356)
    # grouped GEMMs: e_max * min(1, plateau(dtype) / plateau(fp8)) * R / (R + R_half)
    assert float(grouped_gemm_efficiency(256, CURVES)) == pytest.approx(0.65 * 256 / 320)  # fp8: the curve itself
    assert float(grouped_gemm_efficiency(256, CURVES, "bf16")) == pytest.approx(0.65 * 256 / 320)  # 0.8 / 0.6 > 1
    assert float(grouped_gemm_efficiency(256, CURVES, "fp4")) == pytest.approx(0.65 * (0.42 / 0.6) * 256 / 320)
    # attention: 0.7 * C / (C + 100) * K / (K + 450); 64 heads x 16 query tiles, 1,024 keys on average
    assert float(attention_efficiency(1024, 1024, CURVES)) == pytest.approx(0.7 * 1024 / 1124 * 1024 / 1474)
    assert float(kv_read_efficiency(134e6, CURVES)) == pytest.approx(0.9 * 134 / 159)


def test_curves_never_fall_as_their_work_grows() -> None:
    x = np.geomspace(1, 1e9, 200)
    for curve in (
        gemm_efficiency(x, CURVES),
        grouped_gemm_efficiency(x, CURVES),
        attention_efficiency(x, 1000, CURVES),
        attention_efficiency(1000, x, CURVES),
        kv_read_efficiency(x, CURVES),
    ):
        assert np.all(np.diff(curve) >= 0)
        assert np.all(curve <= 1)


def test_head_dim_factor_by_hand() -> None:
    """[D / (D + 54)] / [128 / (128 + 54)]: 1 at the reference 128, 0.771 at 64, 1.175 at 256; 1 for
    MLA (D = 0) and for the ideal kernel (D_half = 0)."""
    assert head_dim_factor(128, CURVES) == pytest.approx(1.0)
    assert head_dim_factor(64, CURVES) == pytest.approx((64 / 118) / (128 / 182))
    assert head_dim_factor(256, CURVES) == pytest.approx((256 / 310) / (128 / 182))
    assert head_dim_factor(0, CURVES) == 1.0
    assert head_dim_factor(64, CURVES.model_copy(update={"attention_half_head_dim": 0.0})) == 1.0
    dims = np.arange(16, 1024, 16)
    assert np.all(np.diff([head_dim_factor(int(d), CURVES) for d in dims]) > 0)  # wider heads, nearer the roof


def test_small_heads_run_attention_slower() -> None:
    """Halving the head dim halves the attention FLOPs but runs them at 0.771 of the rate (same heads,
    so the same thread blocks and keys): a compute-bound prefill's attention takes 0.5 / 0.771."""
    wide = Instance(arch(**GQA_SHAPE), toy_gpu(), 1, None, CURVES)
    narrow = Instance(arch(**(GQA_SHAPE | {"head_dim": 64})), toy_gpu(), 1, None, CURVES)
    a, b = step_time(wide, 8192, 0), step_time(narrow, 8192, 0)
    assert float(a.compute_bound_s) >= float(a.attention_s)  # attention is compute-bound here
    assert float(b.attention_s) / float(a.attention_s) == pytest.approx(0.5 / head_dim_factor(64, CURVES), rel=1e-9)


def test_split_kv_by_hand() -> None:
    """s* = sqrt(C_half * K / (K_half * T)): 16 query tiles on 32,768 keys split in
    sqrt(100 * 32768 / (450 * 16)) = 21.33 parts, each a block of 1,536 keys."""
    parts = (100 * 32768 / (450 * 16)) ** 0.5
    expected = 0.7 * 16 * parts / (16 * parts + 100) * (32768 / parts) / (32768 / parts + 450)
    assert float(split_kv_attention_efficiency(16, 32768, 1, CURVES)) == pytest.approx(expected)
    assert expected > 2 * float(attention_efficiency(16, 32768, CURVES))  # unsplit: 16 blocks idle the GPU
    # enough tiles already (s* < 1), or a prefill (more than one 128-row tile per sequence): no split
    assert float(split_kv_attention_efficiency(4096, 512, 1, CURVES)) == float(attention_efficiency(4096, 512, CURVES))
    assert float(split_kv_attention_efficiency(16, 32768, 129, CURVES)) == float(
        attention_efficiency(16, 32768, CURVES)
    )


def test_split_kv_never_lowers_the_curve() -> None:
    """The split maximizes the curve over s >= 1, so it is never below the unsplit kernel's."""
    tiles, keys = np.meshgrid(np.geomspace(1, 1e5, 40), np.geomspace(1, 1e6, 40))
    split = split_kv_attention_efficiency(tiles, keys, 1, CURVES)
    assert np.all(split >= attention_efficiency(tiles, keys, CURVES) * (1 - 1e-12))
    assert np.all(split <= CURVES.attention_compute_fraction)


def test_two_batch_overlap_by_hand() -> None:
    assert float(two_batch_overlap(1.27, 1.46)) == pytest.approx(1.46 + 1.27 / 2)
    assert float(two_batch_overlap(2.0, 0.0)) == 2.0  # nothing to hide
    assert np.allclose(two_batch_overlap([1.0, 3.0], [2.0, 1.0]), [2.5, 3.5])


@pytest.mark.parametrize(
    ("shape", "kernels"),
    [
        ({}, 4 + 2 * 5 + 2 * 4),  # GQA, dense FFN
        ({"qk_norm": True}, 4 + 2 * 6 + 2 * 4),
        (
            {
                "intermediate_size": 0,
                "moe": {"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 256},
            },
            4 + 2 * 5 + 2 * 8,
        ),
    ],
)
def test_kernels_launched_by_hand(shape: dict[str, object], kernels: int) -> None:
    assert kernels_launched(arch(**{**GQA_SHAPE, **shape})) == kernels


def test_kernels_launched_mla_indexer_and_shared_expert() -> None:
    assert kernels_launched(MOE) == MOE_KERNELS == 78


def test_attention_curve_in_a_step_by_hand() -> None:
    """Attention compute divides by 0.7 * C / (C + 100) * K / (K + 450): C = b * heads * max(n / 128, 1)
    / tp thread blocks, K = query-key pairs / n keys per query."""
    n, c, b, tp = 1000, 3000, 2, 2
    step = step_time(Instance(GQA, toy_gpu(), tp, None, CURVES), n, c, b)
    pairs = n * c + n * (n + 1) / 2
    blocks = b * 8 * (1000 / 128) / tp  # 1000 / 128 query tiles per head
    a = 0.7 * blocks / (blocks + 100) * (pairs / n) / (pairs / n + 450)
    compute = b * 2 * 4 * 8 * 128 * pairs / (tp * F_BF16 * a)
    read = b * 2 * (2 * 2 * 128 * 2) * (c + n)  # 2 full layers, 2 KV heads of 128, K and V, bf16
    per_gpu_layer = read / (tp * 2)
    memory = read / (tp * BW * 0.9 * per_gpu_layer / (per_gpu_layer + 25e6))
    assert float(step.attention_s) == pytest.approx(max(compute, memory), rel=1e-12)


def test_floor_time_by_hand() -> None:
    """Every kernel at its roof, no collectives or overheads: max(FLOPs / F, bytes / BW)."""
    n = 2048
    floor = float(floor_time(inst(GQA), n, 0))
    flops = 2 * GQA_DENSE_PARAMS * n + 2 * 1024 * 1000 + 2 * 4 * 8 * 128 * n * (n + 1) / 2
    weights = (GQA_DENSE_PARAMS + GQA_LM_HEAD) * 2
    kv = 2 * (2 * 2 * 128 * 2) * n
    assert floor == pytest.approx(max(flops / F_BF16, (weights + kv) / BW), rel=1e-12)
    assert floor < float(step_time(inst(GQA), n, 0).total_s)


def test_experts_touched() -> None:
    E, t = 8, 2
    for n in (1, 2, 5, 100):
        assert float(experts_touched(n, E, t)) == pytest.approx(E * (1 - (1 - t / E) ** n))
    assert float(experts_touched(1, E, t)) == pytest.approx(t)  # one token touches exactly t experts
    assert float(experts_touched(10_000, E, t)) == pytest.approx(E)  # many tokens touch them all
    assert float(experts_touched(0, E, t)) == 0.0
    assert np.array_equal(experts_touched([1, 2], 0, 0), [0.0, 0.0])  # dense model
    assert float(experts_touched(3, 256, 8)) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 3))


def test_instance_validation_and_parallel_mode() -> None:
    with pytest.raises(InputError, match="tp = 0"):
        Instance(GQA, toy_gpu(), 0)
    assert not inst(GQA, tp=8, domain=4).uses_ep  # dense: never EP
    assert not inst(MOE, tp=1, ep=True).uses_ep  # one GPU: nothing to split
    assert not inst(MOE, tp=8).uses_ep  # fits one scale-up domain: TP
    assert inst(MOE, tp=16).uses_ep  # spans two domains: EP
    assert inst(MOE, tp=4, ep=True).uses_ep
    assert not inst(MOE, tp=8, ep=False, domain=4).uses_ep


def test_tensor_parallel_attention_needs_tp_to_divide_the_heads() -> None:
    """vLLM and SGLang split the query heads evenly over the tensor-parallel ranks: the toy's 8
    heads run on 1, 2, 4 or 8 ranks; 3 or 16 is refused, naming the divisors on either side. Under
    data-parallel attention (expert parallelism) each rank keeps every head, so 16 is fine."""
    assert inst(GQA, tp=8).tp == 8
    with pytest.raises(LayoutError, match=r"tp = 3: toy's 8 attention heads .* divides 8 \(2 or 4\)$"):
        inst(GQA, tp=3)
    with pytest.raises(LayoutError, match=r"divides 8 \(8\), or data-parallel attention \(expert_parallel\)$"):
        inst(MOE, tp=16, ep=False)
    assert inst(MOE, tp=16, ep=True).uses_dp_attention


def test_efficiency_priority() -> None:
    l40s = load_hardware("l40s")
    h100 = load_hardware("h100-sxm")
    assert l40s.efficiency is None and efficiency_of(l40s) is DEFAULT_EFFICIENCY
    assert h100.efficiency is not None and efficiency_of(h100) == h100.efficiency
    assert Instance(GQA, h100, 1, None, EFF).efficiency is EFF
    assert Instance(GQA, l40s).efficiency is DEFAULT_EFFICIENCY
    assert DEFAULT_EFFICIENCY.source.startswith("priors:")  # the kernel priors, not fitted (perf/refit.py)


# -- dense GQA step, tp = 1 -----------------------------------------------------------------------
@pytest.mark.parametrize(("n", "c", "b"), [(1000, 500, 1), (1, 2000, 64), (4096, 0, 2)])
def test_dense_step_by_hand(n: int, c: int, b: int) -> None:
    step = step_time(inst(GQA), n, c, b)
    N = n * b
    dense_compute = 2 * GQA_DENSE_PARAMS * N / (F_BF16 * eff(N)) + 2 * 1024 * 1000 * b / (F_BF16 * eff(b))
    dense_weight_bytes = (GQA_DENSE_PARAMS + GQA_LM_HEAD) * 2
    dense_memory = dense_weight_bytes / (BW * 0.8)
    # attention: 4*h*k FLOPs per query-key pair, average query sees c + (n+1)/2; 2 full layers
    attn_compute = b * 2 * 4 * 8 * 128 * n * (c + (n + 1) / 2) / (F_BF16 * 0.5)
    # KV read: c + n tokens of 2*g*k*2 B per layer
    attn_memory = b * 2 * (2 * 2 * 128 * 2) * (c + n) / (BW * 0.8)
    overhead = GQA_OVERHEAD
    assert float(step.dense_gemm_s) == pytest.approx(max(dense_compute, dense_memory), rel=1e-12)
    assert float(step.expert_gemm_s) == 0.0
    assert float(step.attention_s) == pytest.approx(max(attn_compute, attn_memory), rel=1e-12)
    assert float(step.communication_s) == 0.0
    assert float(step.overhead_s) == pytest.approx(overhead)
    expected = max(dense_compute, dense_memory) + max(attn_compute, attn_memory) + overhead
    assert float(step.total_s) == pytest.approx(expected, rel=1e-12)
    compute = (dense_compute >= dense_memory) * max(dense_compute, dense_memory) + (attn_compute >= attn_memory) * max(
        attn_compute, attn_memory
    )
    assert float(step.compute_bound_s) == pytest.approx(compute, rel=1e-12)
    assert float(step.memory_bound_s) == pytest.approx(expected - overhead - compute, rel=1e-9, abs=1e-15)
    parts = step.breakdown()
    assert set(parts) == {
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
        "expert_imbalance",
        "micro_batches",
        "stage_transfer_s",
    }
    assert parts["host_bound_s"] == 0.0  # no CUDA-graph cap: never bounded by its host
    # a dense model on one GPU: no MoE parts, nothing overlapped, one batch, nobody to wait for
    for part in (
        "moe_routing_s",
        "moe_permutation_s",
        "moe_dispatch_s",
        "moe_combine_s",
        "overlap_s",
        "stage_transfer_s",
    ):
        assert parts[part] == 0.0, part
    assert parts["expert_imbalance"] == parts["micro_batches"] == 1.0


def test_bound_names_the_largest_part() -> None:
    prefill = step_time(inst(GQA), 65_536, 0)
    assert str(prefill.bound) == "compute"
    decode = step_time(inst(GQA), 1, 100_000, 64)
    assert str(decode.bound) == "memory"
    tiny = step_time(inst(GQA), 1, 0)  # a tiny model's single-token step: launches dominate
    assert str(tiny.bound) == "overhead"
    slow_link = step_time(inst(GQA, tp=8, nic=0.001, domain=4), 4096, 0)  # all-reduce over a crawling NIC
    assert str(slow_link.bound) == "communication"


# -- MLA + indexer + MoE step ---------------------------------------------------------------------
@pytest.mark.parametrize(("n", "c", "b"), [(1, 1000, 32), (2000, 100, 1), (3, 50, 1)])
def test_moe_mla_step_by_hand(n: int, c: int, b: int) -> None:
    step = step_time(inst(MOE), n, c, b)
    counts = param_counts(MOE)
    N = n * b
    d, w, E, t, moe_layers = 1024, 256, 8, 2, 2
    per_expert = 3 * d * w
    assert counts.routed_experts_active == moe_layers * t * per_expert
    # dense GEMMs at fp8 (the weight dtype), the LM head at bf16
    dense_flops = 2 * (counts.active - counts.embedding - counts.lm_head - counts.routed_experts_active)
    dense_compute = dense_flops * N / (F_FP8 * eff(N)) + 2 * 1024 * 1000 * b / (F_BF16 * eff(b))
    dense_bytes = (counts.non_expert - counts.lm_head) * 1 + counts.lm_head * 2
    dense_memory = dense_bytes / (BW * 0.8)
    # MoE layers (perf.moe), one GPU: tensor-parallel experts, every routed row on this rank.
    # The toy GPU has no fp4 tensor cores, so the fp4 (NVFP4) experts run weight-only at bf16
    # (`HardwareProfile.gemm_dtype`): the bf16 peak, and the grouped-GEMM plateau 0.8 times
    # min(1, c_max(bf16) / c_max(fp8)) = min(1, 0.8 / 0.8) = 1; E_hit = E (1 - (1 - t/E)^N).
    hit = E * (1 - (1 - t / E) ** N)
    rows = N * t / hit
    expert_compute = 2 * 3 * d * w * t * moe_layers * N / (F_BF16 * eff(rows))
    # the weights keep NVFP4's bytes (0.5 + 1/16 per value) and stream at mu_e scaled for 4-bit
    # floats by fp4_memory_fraction / memory_fraction: 0.5 * 0.65 / 0.8
    expert_memory = hit * moe_layers * per_expert * (0.5 + 1 / 16) / (BW * 0.5 * 0.65 / 0.8)
    glue = BW * 0.4  # routing and permutation kernels at glue_memory_fraction of HBM
    routing = moe_layers * 2 * 4 * N * E / glue  # fp32 logits, N x E, written and read
    # permutation: N t rows of width w, each SiLU x gate (read 2w, write w, bf16; no re-quantization
    # for bf16 GEMMs) and its d-wide output row written by the down GEMM and read back by the weighted
    # sum (no DeepEP combine under tensor parallelism), which writes one d-wide row per token
    permutation = moe_layers * (N * t * (3 * w * 2 + d * 2 + d * 2) + N * d * 2) / glue
    experts = routing + permutation + max(expert_compute, expert_memory)
    # MLA attention: the faster of absorbed and expanded, capped at top_k = 256; indexer at fp8 rate
    h, kv_lora, rope, nope, v = 8, 128, 32, 64, 64
    absorbed = 2 * h * (kv_lora + rope) + 2 * h * kv_lora
    expanded = 2 * h * (nope + rope) + 2 * h * v
    upproject = 2 * kv_lora * h * (nope + v)
    assert (absorbed, expanded, upproject) == (4608, 2560, 262_144)
    pairs = sum(min(c + i + 1, 256) for i in range(n))  # query i sees c + i + 1 keys, at most top_k
    indexer = 3 * (2 * 4 * 32) * n * (c + (n + 1) / 2) * (F_BF16 / F_FP8)  # the indexer scores every key
    absorbed_s = b * (3 * absorbed * pairs + indexer) / (F_BF16 * 0.5)
    # expanded: the up-projection of min(c + n, top_k) latents per sequence is a dense fp8 GEMM of
    # (c + n) * b rows, then attention over the expanded heads
    upproject_s = b * 3 * upproject * min(c + n, 256) / (F_FP8 * eff((c + n) * b))
    expanded_s = b * (3 * expanded * pairs + indexer) / (F_BF16 * 0.5) + upproject_s
    attn_compute = min(absorbed_s, expanded_s)
    latent, index_key = 128 + 4 + 2 * 32, 32 + 4
    attn_memory = b * 3 * (latent * min(c + n, 256) + index_key * (c + n)) / (BW * 0.8)
    overhead = MOE_OVERHEAD
    assert float(step.dense_gemm_s) == pytest.approx(max(dense_compute, dense_memory), rel=1e-12)
    assert float(step.expert_gemm_s) == pytest.approx(max(expert_compute, expert_memory), rel=1e-12)
    assert float(step.moe_routing_s) == pytest.approx(routing, rel=1e-12)
    assert float(step.moe_permutation_s) == pytest.approx(permutation, rel=1e-12)
    assert float(step.experts_s) == pytest.approx(experts, rel=1e-12)
    assert float(step.attention_s) == pytest.approx(max(attn_compute, attn_memory), rel=1e-12)
    assert float(step.communication_s) == 0.0  # one GPU: no all-reduce, no all-to-all
    assert float(step.overhead_s) == pytest.approx(overhead)
    assert float(step.expert_imbalance) == 1.0 and float(step.micro_batches) == 1.0
    expected = max(dense_compute, dense_memory) + experts + max(attn_compute, attn_memory) + overhead
    assert float(step.total_s) == pytest.approx(expected, rel=1e-12)
    # routing and permutation only move bytes: they count as memory-bound time
    compute = (
        (dense_compute >= dense_memory) * max(dense_compute, dense_memory)
        + (expert_compute >= expert_memory) * max(expert_compute, expert_memory)
        + (attn_compute >= attn_memory) * max(attn_compute, attn_memory)
    )
    assert float(step.compute_bound_s) == pytest.approx(compute, rel=1e-12)
    assert float(step.memory_bound_s) == pytest.approx(expected - overhead - compute, rel=1e-9)


@pytest.mark.parametrize(
    ("model", "tp", "ep", "copies"),
    [("gqa", 8, None, 4), ("gqa", 2, None, 1), ("mla", 4, False, 4), ("mla", 4, True, 1)],
)
def test_attention_reads_every_copy_of_the_kv(model: str, tp: int, ep: bool | None, copies: int) -> None:
    """A KV head or latent kept by several ranks is read by each: GQA with g = 2 at tp 8 keeps
    8 * ceil(2/8) / 2 = 4 copies; MLA under tensor-parallel attention one per rank; under expert
    parallelism (data-parallel attention) one in all. Memory-bound decode: b * reads * copies / (tp BW mu)."""
    b, c = 256, 50_000
    if model == "gqa":
        step = step_time(inst(GQA, tp=tp, ep=ep), 1, c, b)
        reads = 2 * (2 * 2 * 128 * 2) * (c + 1)
    else:
        step = step_time(inst(MOE, tp=tp, ep=ep), 1, c, b)
        latent, index_key = 128 + 4 + 2 * 32, 32 + 4
        reads = 3 * (latent * min(c + 1, 256) + index_key * (c + 1))
    expected = b * reads * copies / (tp * BW * 0.8)
    assert float(step.attention_s) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("n", "c"), [(10, 5000), (300, 0), (200, 50)])
def test_sliding_attention_capped_at_window(n: int, c: int) -> None:
    step = step_time(inst(SLIDING), n, c)
    pairs = n * (c + (n + 1) / 2)
    window_pairs = sum(min(c + i + 1, 128) for i in range(n))
    flops = 2 * 4 * 4 * 64 * pairs + 2 * 4 * 4 * 64 * window_pairs  # 2 full + 2 sliding layers
    layer_bytes = 2 * 2 * 64 * 2
    read = 2 * layer_bytes * (c + n) + 2 * layer_bytes * min(c + n, 128)
    expected = max(flops / (F_BF16 * 0.5), read / (BW * 0.8))
    assert float(step.attention_s) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("n", "c"), [(300, 5000), (200, 50), (10, 20000)])
def test_each_layer_kind_runs_at_the_efficiency_of_its_own_keys(n: int, c: int) -> None:
    """Full layers at K_full = pairs / n keys per query, sliding ones at K_window = window pairs / n:
    e(K) = 0.5 K / (K + 450). A longer context raises the full layers' efficiency only."""
    keys_curve = EFF.model_copy(update={"attention_half_keys": 450.0})
    step = step_time(Instance(SLIDING, toy_gpu(), 1, None, keys_curve), n, c)
    pairs = n * (c + (n + 1) / 2)
    window_pairs = sum(min(c + i + 1, 128) for i in range(n))
    per_pair = 2 * 4 * 4 * 64  # 2 layers of each kind, 4 heads of 64, 4 FLOPs per key and dim

    def rate(keys: float) -> float:
        return F_BF16 * 0.5 * keys / (keys + 450.0)

    compute = per_pair * pairs / rate(pairs / n) + per_pair * window_pairs / rate(window_pairs / n)
    layer_bytes = 2 * 2 * 64 * 2
    read = 2 * layer_bytes * (c + n) + 2 * layer_bytes * min(c + n, 128)
    assert float(step.attention_s) == pytest.approx(max(compute, read / (BW * 0.8)), rel=1e-12)


@pytest.mark.parametrize(
    ("c", "n", "cap", "pairs"),
    [
        (0, 332, 128, 128 * 129 / 2 + 204 * 128),  # 128 queries below the window, 204 at it
        (1000, 8, 128, 8 * 128),  # every query at the cap
        (10, 4, np.inf, 11 + 12 + 13 + 14),  # uncapped: n c + n (n + 1) / 2
        (100, 50, 120, sum(min(101 + i, 120) for i in range(50))),
    ],
)
def test_keys_seen_by_hand(c: int, n: int, cap: float, pairs: float) -> None:
    assert float(keys_seen(c, n, cap)) == pytest.approx(pairs, rel=1e-12)
    out = keys_seen(np.array([c, c]), np.array([n, n]), cap)
    assert np.allclose(out, pairs)


# -- communication --------------------------------------------------------------------------------
@pytest.mark.parametrize(("tp", "domain", "link"), [(2, 8, SCALE_UP * 0.5), (8, 8, SCALE_UP * 0.5), (8, 4, NIC * 0.5)])
def test_tp_ring_all_reduce(tp: int, domain: int, link: float) -> None:
    n = 1000
    step = step_time(inst(GQA, tp=tp, domain=domain), n, 0)
    message = n * 1024 * 2  # N * d bf16 activations
    latency = 1e-5 if tp <= domain else 5e-5  # one collective's latency: scale-up, or across domains
    all_reduce = latency + 2 * (tp - 1) / tp * message / link
    assert float(step.communication_s) == pytest.approx(2 * 2 * all_reduce, rel=1e-12)  # 2 per layer, 2 layers
    # TP splits compute and weight reads across tp GPUs, and adds communication to the step
    dense_compute = 2 * GQA_DENSE_PARAMS * n / (tp * F_BF16 * eff(n)) + 2 * 1024 * 1000 / (tp * F_BF16 * eff(1))
    dense_memory = (GQA_DENSE_PARAMS + GQA_LM_HEAD) * 2 / (tp * BW * 0.8)
    assert float(step.dense_gemm_s) == pytest.approx(max(dense_compute, dense_memory), rel=1e-12)
    expected = float(step.dense_gemm_s + step.attention_s) + float(step.communication_s) + GQA_OVERHEAD
    assert float(step.total_s) == pytest.approx(expected, rel=1e-12)


def test_ep_across_domains() -> None:
    """Data-parallel attention on 16 GPUs in two domains of 8, a prefill step (the all-to-all's normal
    kernels: one copy per destination rank). 16 sequences of 256 tokens put one on each rank."""
    b, n, tp = 16, 256, 16
    instance = inst(MOE, tp=tp)
    assert instance.uses_ep and instance.uses_dp_attention
    step = step_time(instance, n, 0, b)
    tokens_per_rank = n * b / tp  # s_DP = ceil(16 / 16) * 16 / 16 = 1
    # the busiest expert rank: 4,096 tokens touch all 8 experts (E_hit = 8 (1 - 0.75^4096) = 8), half
    # an expert per rank: clip(mu + 0, ceil(8 / 16) = 1, E / tp = 0.5) / mu = 1; plus the skew 1.18 - 1
    share = 1.0 + (1.18 - 1.0)
    assert float(step.expert_imbalance) == pytest.approx(share)
    m, r, t = 2, 8, 2  # domains, ranks per domain, experts per token
    remote = m * (1 - (1 - 1 / m) ** t) * (m - 1) / m  # NIC crossings per token
    local = r * (1 - (1 - 1 / r) ** t) * (r - 1) / r  # copies to other ranks of the domain
    assert (remote, local) == (0.75, 105 / 64)

    def collective(bytes_per_value: int, sent: float) -> float:
        """L_moe (alpha + the slower link), alpha the NIC latency across domains."""
        row = 1024 * bytes_per_value
        return 2 * (5e-5 + max(sent * local * row / (SCALE_UP * 0.5), sent * remote * row / (NIC * 0.5)))

    dispatch, combine = collective(1, tokens_per_rank * share), collective(2, tokens_per_rank * share)
    assert float(step.moe_dispatch_s) == pytest.approx(dispatch, rel=1e-12)  # fp8 out
    assert float(step.moe_combine_s) == pytest.approx(combine, rel=1e-12)  # bf16 back
    comm = dispatch + combine
    assert float(step.communication_s) == pytest.approx(comm, rel=1e-12)
    # every rank reads its whole replica of the non-expert weights
    counts = param_counts(MOE)
    dense_bytes = (counts.non_expert - counts.lm_head) * 1 + counts.lm_head * 2
    assert float(step.dense_gemm_s) >= dense_bytes / (BW * 0.8) * (1 - 1e-12)
    work = float(step.dense_gemm_s + step.experts_s + step.attention_s)
    # two micro-batches would hide min(W, C) / 2 and cost a second launch of every kernel and a second
    # latency of every all-to-all, 78 * 1e-4 + 2 * 2 * 5e-5 = 8 ms: far more on this toy, so one batch
    extra = MOE_KERNELS * 1e-4 + 2 * 2 * 5e-5
    assert min(work, comm) / 2 < extra
    assert float(step.micro_batches) == 1 and float(step.overlap_s) == 0.0
    assert float(step.total_s) == pytest.approx(work + comm + MOE_OVERHEAD, rel=1e-12)
    # forced (SGLang --enable-two-batch-overlap): max(W, C) + min(W, C) / 2, plus the second launches
    forced = step_time(Instance(MOE, instance.hardware, tp, None, EFF, two_batch_overlap=True), n, 0, b)
    assert float(forced.micro_batches) == 2
    assert float(forced.overlap_s) == pytest.approx(min(work, comm) / 2, rel=1e-12)
    expected = max(work, comm) + min(work, comm) / 2 + MOE_OVERHEAD + extra
    assert float(forced.total_s) == pytest.approx(expected, rel=1e-12)
    # a lone request sits on one rank (s_DP = tp): that rank runs its dense layers on all 4,096 rows
    # and sends all of its tokens' all-to-all; the collective waits for that sender, max(s_DP = 16,
    # s_EP = 1.18) = 16 times the mean rank's tokens, not for the skewed receivers on top of it
    lone = step_time(instance, n * b, 0)
    assert float(lone.moe_dispatch_s) == pytest.approx(collective(1, n * b / tp * max(tp, share)), rel=1e-12)
    assert float(lone.moe_combine_s) == pytest.approx(collective(2, n * b / tp * max(tp, share)), rel=1e-12)
    dense_flops = 2 * (counts.active - counts.embedding - counts.lm_head - counts.routed_experts_active)
    dense_compute = dense_flops * n * b / (F_FP8 * eff(n * b)) + 2 * 1024 * 1000 / (F_BF16 * eff(1))
    assert float(lone.dense_gemm_s) == pytest.approx(max(dense_compute, dense_bytes / (BW * 0.8)), rel=1e-12)


def test_ep_decode_across_domains() -> None:
    """A decode step on 16 GPUs in two domains of 8: the low-latency kernels send one copy per routed
    expert, t (r - 1) / tp of them to the own domain's other ranks over the scale-up link (at
    `ep_ll_link_fraction`, 0.25) and t (1 - r / tp) over the NIC (at `scale_up_fraction`, 0.5), and
    wait `ep_ll_nic_latency_s` (3e-5) each."""
    b, tp, r, t = 16, 16, 8, 2
    decode = step_time(inst(MOE, tp=tp), 1, 1000, b, decode=True)
    share = float(decode.expert_imbalance)
    sent = b / tp * max(1.0, share)  # one sequence per rank: the busiest receiver's share sets it
    local, remote = t * (r - 1) / tp, t * (1 - r / tp)
    assert (local, remote) == (7 / 8, 1.0)

    def collective(bytes_per_value: int) -> float:
        row = 1024 * bytes_per_value
        return 2 * (3e-5 + max(sent * local * row / (SCALE_UP * 0.25), sent * remote * row / (NIC * 0.5)))

    assert float(decode.moe_dispatch_s) == pytest.approx(collective(1), rel=1e-12)
    assert float(decode.moe_combine_s) == pytest.approx(collective(2), rel=1e-12)


def test_ep_within_one_domain() -> None:
    """EP4 in one domain, no NIC. Prefill's normal kernels send a token once per destination rank it
    routes to, `ep_latency_s` (4e-5) per all-to-all and bytes at `ep_link_fraction` (0.5) of the link;
    decode's low-latency ones once per routed expert, `ep_ll_latency_s` (2e-5) and
    `ep_ll_link_fraction` (0.25)."""
    tp, t = 4, 2
    instance = inst(MOE, tp=tp, ep=True)
    # prefill: 4 sequences of 128 tokens, one per rank; 512 tokens touch all 8 experts, 2 per rank:
    # clip(2 + 0, ceil(8 / 4) = 2, 2) / 2 = 1, plus the skew 0.18
    step = step_time(instance, 128, 0, 4)
    share = 1.18
    ranks_reached = tp * (1 - (1 - 1 / tp) ** t) * (tp - 1) / tp  # other ranks a token is sent to
    assert ranks_reached == 21 / 16
    seconds = 128 * share * ranks_reached * 1024 * 1 / (SCALE_UP * 0.5)
    assert float(step.moe_dispatch_s) == pytest.approx(2 * (4e-5 + seconds), rel=1e-12)
    assert float(step.communication_s) == pytest.approx(2 * (4e-5 + seconds) + 2 * (4e-5 + 2 * seconds), rel=1e-12)
    # decode: 4 sequences of one token, one per rank; 4 tokens leave experts idle on some ranks
    decode = step_time(instance, 1, 1000, 4, decode=True)
    share = float(busiest_rank_share(experts_touched(4, 8, t), 8, tp)) + 0.18
    assert float(decode.expert_imbalance) == pytest.approx(share, rel=1e-12)
    seconds = 1 * share * t * (tp - 1) / tp * 1024 * 1 / (SCALE_UP * 0.25)  # t (r - 1) / tp remote copies
    assert float(decode.moe_dispatch_s) == pytest.approx(2 * (2e-5 + seconds), rel=1e-12)
    assert float(decode.moe_combine_s) == pytest.approx(2 * (2e-5 + 2 * seconds), rel=1e-12)


def test_ep_overlaps_communication_tp_adds_it() -> None:
    """Under data-parallel attention a step may run as two micro-batches, each one's all-to-all hidden
    behind the other's work (max(W, C) + min(W, C) / 2), at the price of launching every kernel and
    waiting for every all-to-all's latency twice; by default the step takes the faster way. Tensor
    parallelism adds its all-reduces to the work."""
    n = 4096
    crawling = toy_gpu(su=0.01)  # a crawling fabric: communication dominates

    def ep(factors: Efficiency, overlap: bool | None) -> StepTime:
        return step_time(Instance(MOE, crawling, 4, True, factors, two_batch_overlap=overlap), n, 0)

    one, two, best = ep(EFF, False), ep(EFF, True), ep(EFF, None)
    work = float(one.dense_gemm_s + one.experts_s + one.attention_s)
    comm = float(one.communication_s)
    assert comm > work
    assert float(one.total_s) == pytest.approx(work + comm + MOE_OVERHEAD, rel=1e-12)
    extra = MOE_KERNELS * 1e-4 + 2 * 2 * 4e-5  # 78 kernels again, 2 MoE layers x 2 all-to-alls again
    assert float(two.micro_batches) == 2
    assert float(two.overhead_s) == pytest.approx(MOE_OVERHEAD + extra, rel=1e-12)
    assert float(two.total_s) == pytest.approx(comm + work / 2 + MOE_OVERHEAD + extra, rel=1e-12)
    # the hidden half of the work is far less than the 8 ms of second launches: one batch
    assert work / 2 < extra
    assert float(best.micro_batches) == 1 and float(best.total_s) == float(one.total_s)
    # with free launches and latencies the second micro-batch costs nothing: two batches (the
    # all-to-alls lose their 4e-5 latency too, and the step keeps its 1 ms host overhead)
    free = EFF.model_copy(update={"kernel_floor_s": 0.0, "ep_latency_s": 0.0})
    overlapped = ep(free, None)
    assert float(overlapped.micro_batches) == 2
    assert float(overlapped.total_s) == pytest.approx(comm - 2 * 2 * 4e-5 + work / 2 + 1e-3, rel=1e-12)
    tp = step_time(inst(MOE, tp=4, ep=False), n, 0)
    work = float(tp.dense_gemm_s + tp.experts_s + tp.attention_s)
    assert float(tp.total_s) == pytest.approx(work + float(tp.communication_s) + float(tp.overhead_s), rel=1e-12)


# -- prefill, decode, extend ----------------------------------------------------------------------
def test_prefill_unchunked_pays_request_overhead_once() -> None:
    instance = inst(GQA)
    total = float(prefill_time(instance, 20_000, 1000))
    assert total == pytest.approx(float(step_time(instance, 20_000, 1000).total_s) + 0.01, rel=1e-12)
    assert float(prefill_time(instance, 0, 1000)) == 0.0


def test_prefill_chunks_and_tail_chunk() -> None:
    instance = inst(GQA)
    c = 1000
    # 20,000 new tokens in chunks of 8,192: 8192 + 8192 + 3616 on contexts c, c + 8192, c + 16384
    assert 20_000 - 2 * 8192 == 3616
    steps = [
        step_time(instance, 8192, c).total_s,
        step_time(instance, 8192, c + 8192).total_s,
        step_time(instance, 3616, c + 16384).total_s,
    ]
    expected = float(sum(steps)) + 0.01
    assert float(prefill_time(instance, 20_000, c, 8192)) == pytest.approx(expected, rel=1e-12)
    # a prefill smaller than one chunk is one step
    assert float(prefill_time(instance, 5000, c, 8192)) == pytest.approx(
        float(step_time(instance, 5000, c).total_s) + 0.01, rel=1e-12
    )
    # an exact multiple has no tail chunk
    exact = float(prefill_time(instance, 16384, c, 8192))
    assert exact == pytest.approx(
        float(step_time(instance, 8192, c).total_s + step_time(instance, 8192, c + 8192).total_s) + 0.01, rel=1e-12
    )


def test_tail_chunk_pays_a_whole_step() -> None:
    """One token past a chunk boundary costs a whole extra step (weights + overhead)."""
    instance = inst(GQA)
    exact = float(prefill_time(instance, 8192, 0, 8192))
    one_more = float(prefill_time(instance, 8193, 0, 8192))
    assert one_more - exact == pytest.approx(float(step_time(instance, 1, 8192).total_s), rel=1e-12)
    assert one_more - exact >= GQA_OVERHEAD + (GQA_DENSE_PARAMS + GQA_LM_HEAD) * 2 / (BW * 0.8)


def test_prefill_chunked_vectorized() -> None:
    instance = inst(MOE)
    n = np.array([0, 100, 8192, 8193, 20_000, 30_000])
    c = np.array([0, 50_000, 10, 0, 1000, 7])
    vector = prefill_time(instance, n, c, 8192)
    scalar = [float(prefill_time(instance, int(a), int(b), 8192)) for a, b in zip(n, c, strict=True)]
    assert vector.shape == (6,)
    assert np.allclose(vector, scalar, rtol=1e-12, atol=0)
    assert vector[0] == 0.0


def test_decode_and_extend_are_steps() -> None:
    instance = inst(MOE)
    assert float(decode_step_time(instance, 32, 4000)) == float(step_time(instance, 1, 4000, 32).total_s)
    assert float(extend_time(instance, 100, 4000)) == float(step_time(instance, 100, 4000, 1).total_s)
    # an extend of 100 tokens costs little more than one decode step (decode is memory-bound)
    one = float(decode_step_time(instance, 1, 4000))
    assert float(extend_time(instance, 100, 4000)) < 100 * one


def test_step_time_vectorized_matches_scalar() -> None:
    instance = Instance(load_model("qwen3-235b-a22b"), load_hardware("h200"), 8)
    n = np.array([1.0, 1.0, 512.0, 8192.0])
    c = np.array([0.0, 60_000.0, 4000.0, 100.0])
    b = np.array([1.0, 128.0, 1.0, 2.0])
    vector = step_time(instance, n, c, b)
    for i in range(4):
        scalar = step_time(instance, n[i], c[i], b[i])
        for field in (
            "total_s",
            "dense_gemm_s",
            "expert_gemm_s",
            "attention_s",
            "communication_s",
            "overhead_s",
            "compute_bound_s",
            "memory_bound_s",
        ):
            assert float(getattr(vector, field)[i]) == pytest.approx(float(getattr(scalar, field)), rel=1e-12)
        assert vector.bound[i] == str(scalar.bound)


def test_busiest_rank_share_by_hand() -> None:
    """Binomial(E/R, p) experts per rank, p = E_hit / E: the busiest of R ranks carries about
    mu + sigma sqrt(2 ln R), at least ceil(E_hit / R), at most E/R, over the mean mu."""
    import math

    hit = float(experts_touched(8, 256, 8))  # DeepSeek-V3, 8 tokens on EP8
    mu = 32 * hit / 256
    expected = (mu + math.sqrt(mu * (1 - hit / 256)) * math.sqrt(2 * math.log(8))) / mu
    assert float(busiest_rank_share(hit, 256, 8)) == pytest.approx(expected, rel=1e-12)
    assert float(busiest_rank_share(hit, 256, 8)) == pytest.approx(1.67, abs=0.01)
    assert float(busiest_rank_share(256.0, 256, 8)) == pytest.approx(1.0)  # every expert touched
    assert float(busiest_rank_share(1.0, 256, 8)) == pytest.approx(8.0)  # one expert: one rank has it all
    assert float(busiest_rank_share(5.0, 256, 1)) == 1.0  # one rank: nothing to wait for
    shares = busiest_rank_share(experts_touched(np.array([1, 8, 64, 512]), 256, 8), 256, 8)
    assert np.all(np.diff(shares) <= 0) and np.all(shares >= 1)  # more tokens, better balance


def test_tensor_parallel_attention_with_expert_parallel_experts() -> None:
    """TP attention + EP experts: TP's dense, attention and all-reduces, the experts waiting for the
    busiest rank (whole experts per rank), no two-batch overlap; TP's memory, KV copies and senders."""
    from pddplan.perf.memory import memory_budget

    n, tp = 8, 4
    mixed = inst(MOE, tp=tp, ep=True)
    mixed = Instance(MOE, mixed.hardware, tp, True, EFF, tp_attention=True)
    tensor = inst(MOE, tp=tp, ep=False)
    assert mixed.uses_ep and not mixed.uses_dp_attention
    assert (mixed.kv_pools, mixed.kv_senders) == (1, tp) == (tensor.kv_pools, tensor.kv_senders)
    assert memory_budget(mixed).weight_bytes == memory_budget(tensor).weight_bytes
    a, b = step_time(mixed, 1, 1000, n), step_time(tensor, 1, 1000, n)
    # the busiest rank: uniform routing's floor plus the skew beyond it (1.18 - 1)
    share = float(busiest_rank_share(experts_touched(n, 8, 2), 8, tp)) + 0.18
    for part in ("dense_gemm_s", "attention_s", "communication_s", "overhead_s", "moe_routing_s"):
        assert float(getattr(a, part)) == pytest.approx(float(getattr(b, part)), rel=1e-12), part
    assert float(a.expert_gemm_s) == pytest.approx(float(b.expert_gemm_s) * share, rel=1e-12)
    # permutation: every rank holds every token after attention (d-wide rows written and read back,
    # one row per token written), but an EP rank permutes only its own experts' rows, n t / tp * share
    # of width w, where a TP rank permutes all n t rows on a w / tp slice of each expert (bf16 GEMMs
    # on the toy GPU: no re-quantization)
    d, w, t, glue = 1024, 256, 2, BW * 0.4
    ep_permutation = 2 * (n * t / tp * share * (3 * w * 2 + 4 * d) + n * 2 * d) / glue
    tp_permutation = 2 * (n * t * (3 * w / tp * 2 + 4 * d) + n * 2 * d) / glue
    assert float(a.moe_permutation_s) == pytest.approx(ep_permutation, rel=1e-12)
    assert float(b.moe_permutation_s) == pytest.approx(tp_permutation, rel=1e-12)
    assert float(a.moe_dispatch_s) == float(a.moe_combine_s) == 0.0  # no all-to-all: TP's all-reduces
    expected = float(a.dense_gemm_s + a.experts_s + a.attention_s + a.communication_s + a.overhead_s)
    assert float(a.total_s) == pytest.approx(expected, rel=1e-12)  # work + comm: nothing overlaps
    assert float(a.micro_batches) == 1


@pytest.mark.parametrize("tokens", [1, 64, 4096])
def test_tensor_parallel_attention_ep_against_tp(tokens: int) -> None:
    """DeepSeek-V3 on 8 x H200, TP attention + EP experts against TP throughout: the same dense GEMMs,
    attention, routing, all-reduces and overheads. The experts differ two ways: whole experts
    per rank make the grouped GEMMs wait for the busiest rank (times s_EP = the uniform floor + the
    skew - 1 >= 1.18), and each rank permutes only its own experts' N t / tp * s_EP rows where a TP
    rank permutes all N t (the d-wide output rows of its expert slices, written and read back, do not
    shrink with tp). Decode and short prefills stream expert weights: the wait costs more than the
    bytes saved, never faster (why the optimizer does not try the layout). Step-time model v2 had no
    permutation and the layout was never faster at any size; under v3 a 4K-token prefill, whose TP
    ranks each write and re-read 4096 * 8 rows of 7,168 values per MoE layer, runs faster with it."""
    model, hardware = load_model("deepseek-v3"), load_hardware("h200")
    batch = np.array([1, 4, 16, 64, 256]) if tokens == 1 else np.array([1])
    mixed = Instance(model, hardware, 8, True, tp_attention=True)
    tensor = Instance(model, hardware, 8, False)
    a, b = step_time(mixed, tokens, 4096, batch), step_time(tensor, tokens, 4096, batch)
    for part in ("dense_gemm_s", "attention_s", "communication_s", "overhead_s", "moe_routing_s"):
        assert np.allclose(getattr(a, part), getattr(b, part), rtol=1e-12, atol=0), part
    N = tokens * batch
    skew = mixed.efficiency.expert_skew
    share = busiest_rank_share(experts_touched(N, 256, 8), 256, 8) + skew - 1
    assert np.allclose(a.expert_gemm_s, b.expert_gemm_s * share, rtol=1e-12, atol=0)
    # permutation bytes per MoE layer (fp8-block experts run fp8 GEMMs: the activation is re-quantized,
    # read at 2 B and written at 1 B); the ratio leaves out the layers and the glue bandwidth
    d, w, t, tp = 7168, 2048, 8, 8
    ep_bytes = N * t / tp * share * (3 * w * 2 + w * 3 + 4 * d) + N * 2 * d
    tp_bytes = N * t * (3 * w / tp * 2 + w / tp * 3 + 4 * d) + N * 2 * d
    assert np.allclose(a.moe_permutation_s / b.moe_permutation_s, ep_bytes / tp_bytes, rtol=1e-12, atol=0)
    difference = (a.expert_gemm_s - b.expert_gemm_s) + (a.moe_permutation_s - b.moe_permutation_s)
    assert np.allclose(a.total_s - b.total_s, difference, rtol=1e-9, atol=1e-15)
    if tokens <= 64:
        assert np.all(a.total_s >= b.total_s * (1 - 1e-12))
    else:
        assert np.all(a.total_s < b.total_s)


def test_tensor_parallel_attention_needs_expert_parallelism() -> None:
    with pytest.raises(InputError, match="tp_attention = true: only an expert-parallel MoE instance"):
        Instance(GQA, toy_gpu(), 8, None, EFF, tp_attention=True)
    with pytest.raises(InputError, match="tensor-parallel throughout"):
        Instance(MOE, toy_gpu(), 4, False, EFF, tp_attention=True)


def test_ep_experts_wait_for_the_busiest_rank() -> None:
    n, tp = 8, 4
    ep = step_time(inst(MOE, tp=tp, ep=True), 1, 1000, n)
    tp_step = step_time(inst(MOE, tp=tp, ep=False), 1, 1000, n)

    # uniform routing's floor (8 tokens leave some of the 8 experts untouched) plus the skew of real
    # routing beyond it, expert_skew - 1 = 0.18
    floor = float(busiest_rank_share(experts_touched(n, 8, 2), 8, tp))
    assert floor > 1
    share = floor + 0.18
    assert float(ep.expert_imbalance) == pytest.approx(share, rel=1e-12)
    assert float(ep.expert_gemm_s) == pytest.approx(float(tp_step.expert_gemm_s) * share, rel=1e-12)
    # a perfectly balanced deployment (expert_skew 1) waits for the uniform floor alone
    balanced = Instance(MOE, toy_gpu(), tp, True, EFF.model_copy(update={"expert_skew": 1.0}))
    assert float(step_time(balanced, 1, 1000, n).expert_gemm_s) == pytest.approx(
        float(tp_step.expert_gemm_s) * floor, rel=1e-12
    )


# -- step times kept by content -------------------------------------------------------------------
def test_step_times_are_kept_by_content_and_shared_read_only() -> None:
    """Instances built anew with equal contents share one result; a different efficiency or
    hardware figure is another key; the arrays returned cannot be changed by one caller for all."""
    model, gpu = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    first = prefill_cost(Instance(model, gpu, 2), np.array([4096, 100]), np.array([0, 50]), 2048)
    again = prefill_cost(Instance(model.model_copy(), gpu.model_copy(), 2), [4096, 100], [0, 50], 2048)
    assert again is first
    with pytest.raises(ValueError, match="read-only"):
        first.alone_s[0] = 0.0
    eff = efficiency_of(gpu, None)
    dearer = eff.model_copy(update={"step_overhead_s": eff.step_overhead_s + 0.01})
    overridden = prefill_cost(Instance(model, gpu, 2, efficiency_override=dearer), [4096, 100], [0, 50], 2048)
    assert np.all(overridden.alone_s > first.alone_s)  # Instance equality ignores the override; the key does not
    memory = gpu.memory.model_copy(update={"hbm_tb_per_s": gpu.memory.hbm_tb_per_s.model_copy(update={"value": 1.0})})
    slow = gpu.model_copy(update={"memory": memory})
    assert float(decode_step_time(Instance(model, slow, 2), 8, 4096)) > float(
        decode_step_time(Instance(model, gpu, 2), 8, 4096)
    )
    step = decode_step_time(Instance(model, gpu, 2), np.array([1.0, 64.0]), 4096)
    assert not step.flags.writeable and decode_step_time(Instance(model, gpu, 2), np.array([1.0, 64.0]), 4096) is step
    # a call whose arrays would take more than a sixteenth of the 32 MB budget is computed, not kept
    batches = np.arange(1.0, 300_001.0)  # 2.4 MB
    big = decode_step_time(Instance(model, gpu, 2), batches, 4096)
    assert decode_step_time(Instance(model, gpu, 2), batches, 4096) is not big
    kept = decode_step_time.results  # type: ignore[attr-defined]
    assert 0 < kept.kept_bytes <= kept.budget_bytes and kept.hits >= 1
