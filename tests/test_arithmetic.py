"""Model arithmetic: parameter counts, weight bytes and FLOPs per token, checked by hand.

Every expected number below is written out from the formulas in the docstrings of
`pddplan.perf.arithmetic`, for small hand-built architectures with round numbers.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from toys import GQA, LINEAR, arch

from pddplan.inputs import load_model, model_index
from pddplan.perf.arithmetic import (
    attention_params,
    expert_bytes,
    ffn_params,
    linear_flops_per_token,
    lm_head_flops,
    moe_fixed_params,
    param_counts,
    routed_expert_params,
    weight_bytes,
)
from pddplan.specs.model import ModelArchitecture

# A 3-layer MLA + DSA-indexer + MoE model (first layer dense), fp8 weights, fp4 experts.
MLA_MOE: dict[str, Any] = {
    "num_layers": 3,
    "hidden_size": 1024,
    "vocab_size": 1000,
    "num_heads": 8,
    "num_kv_heads": 8,
    "head_dim": 96,
    "intermediate_size": 2048,
    "mla": {"kv_lora_rank": 128, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64, "q_lora_rank": 256},
    "indexer": {"num_heads": 4, "head_dim": 32, "top_k": 256},
    "moe": {
        "num_experts": 8,
        "experts_per_token": 2,
        "num_shared_experts": 1,
        "expert_intermediate_size": 256,
        "shared_expert_intermediate_size": 512,
        "first_dense_layers": 1,
        "router_bias": True,
        "shared_expert_gate": True,
    },
    "weight_dtype": "fp8",
    "expert_weight_dtype": "fp4",
    "kv_dtype": "fp8",
}


# -- attention blocks ------------------------------------------------------------------------------
def test_gqa_attention_params() -> None:
    model = arch(**GQA)
    d, h, g, k = 1024, 8, 2, 128
    q = d * h * k
    kv = 2 * d * g * k
    o = h * k * d
    assert q + kv + o == 1_048_576 + 524_288 + 1_048_576
    assert attention_params(model, "full") == q + kv + o == 2_621_440
    assert model.attention_kind == "gqa"


def test_gqa_attention_with_gate_bias_and_qk_norm() -> None:
    model = arch(**GQA, attention_bias=True, qk_norm=True, attention_output_gate=True)
    d, h, g, k = 1024, 8, 2, 128
    q_out = h * k * 2  # doubled for the output gate
    expected = d * q_out + 2 * d * g * k + h * k * d
    expected += q_out + 2 * g * k + d  # biases
    expected += 2 * k  # q and k norms
    assert expected == 3_673_856
    assert attention_params(model, "full") == expected


def test_mla_attention_params_with_q_lora_and_indexer() -> None:
    model = arch(**MLA_MOE)
    d, h, q_lora, kv_lora, rope, nope, v = 1024, 8, 256, 128, 32, 64, 64
    q = d * q_lora + q_lora + q_lora * h * (nope + rope)
    kv_a = d * (kv_lora + rope) + kv_lora
    kv_b = kv_lora * h * (nope + v)
    o = h * v * d
    hi, ki = 4, 32
    indexer = q_lora * hi * ki + d * ki + 2 * ki + d * hi
    assert (q, kv_a + kv_b, o, indexer) == (459_008, 295_040, 524_288, 69_696)
    assert attention_params(model, "full") == q + kv_a + kv_b + o + indexer == 1_348_032
    assert model.attention_kind == "mla"


def test_mla_attention_params_without_q_lora_or_indexer() -> None:
    fields = {**MLA_MOE, "indexer": None, "mla": {**MLA_MOE["mla"], "q_lora_rank": None}}
    model = arch(**fields)
    d, h, kv_lora, rope, nope, v = 1024, 8, 128, 32, 64, 64
    q = d * h * (nope + rope)
    kv = d * (kv_lora + rope) + kv_lora + kv_lora * h * (nope + v)
    o = h * v * d
    assert attention_params(model, "full") == q + kv + o == 786_432 + 295_040 + 524_288


def test_linear_attention_params() -> None:
    model = arch(**LINEAR)
    d, nk, nv, dk, dv, kernel = 512, 2, 4, 32, 32, 4
    key_dim, value_dim = nk * dk, nv * dv
    expected = (
        d * (2 * key_dim + 2 * value_dim + 2 * nv) + (2 * key_dim + value_dim) * kernel + 2 * nv + dv + value_dim * d
    )
    assert expected == 200_704 + 1_024 + 8 + 32 + 65_536
    assert attention_params(model, "linear") == expected
    # the one full layer is an ordinary GQA block: q 4*64, k = v 2*64, o
    assert attention_params(model, "full") == 512 * 256 + 2 * 512 * 128 + 256 * 512


# -- FFN / MoE ------------------------------------------------------------------------------------
def test_routed_expert_and_fixed_moe_params() -> None:
    model = arch(**MLA_MOE)
    d, E, w, ws = 1024, 8, 256, 512
    assert routed_expert_params(model) == 3 * d * w == 786_432
    # router d*E + E bias, shared 3*d*ws, shared-expert gate d
    assert moe_fixed_params(model) == d * E + E + 3 * d * ws + d == 1_582_088
    with_bias = arch(**{**MLA_MOE, "moe": {**MLA_MOE["moe"], "expert_bias": True}})
    assert routed_expert_params(with_bias) == 3 * d * w + 2 * w + d


def test_dense_model_has_no_expert_params() -> None:
    model = arch(**GQA)
    assert routed_expert_params(model) == 0
    assert moe_fixed_params(model) == 0
    assert expert_bytes(model) == 0.0


def test_ffn_params_dense_and_moe_layers() -> None:
    model = arch(**MLA_MOE)
    d, f = 1024, 2048
    fixed, per_expert = 1_582_088, 786_432
    # layer 0 is a leading dense layer
    assert ffn_params(model, 0, active=False) == ffn_params(model, 0, active=True) == 3 * d * f
    assert ffn_params(model, 1, active=False) == fixed + 8 * per_expert
    assert ffn_params(model, 2, active=True) == fixed + 2 * per_expert
    assert ffn_params(arch(**GQA), 1, active=True) == 3 * 1024 * 4096


# -- whole-model counts ---------------------------------------------------------------------------
def test_param_counts_gqa_by_hand() -> None:
    model = arch(**GQA)
    d, V, L = 1024, 1000, 2
    c = param_counts(model)
    assert c.embedding == V * d == 1_024_000
    assert c.lm_head == V * d
    assert c.attention == L * 2_621_440
    assert c.norms == 2 * d * L + d == 5_120
    assert c.dense_ffn == L * 3 * d * 4096
    assert c.routed_experts_total == c.routed_experts_active == c.shared_and_router == 0
    total = 2 * 1_024_000 + 2 * 2_621_440 + 5_120 + 2 * 12_582_912
    assert total == 32_461_824
    assert c.total == c.active == total
    assert c.non_expert == total - c.embedding


def test_param_counts_tied_embedding_counted_once() -> None:
    untied = param_counts(arch(**GQA))
    tied = param_counts(arch(**GQA, tie_word_embeddings=True))
    assert tied.lm_head == 0
    assert tied.total == untied.total - 1000 * 1024
    assert tied.non_expert == untied.non_expert - 1000 * 1024


def test_param_counts_mla_moe_by_hand() -> None:
    model = arch(**MLA_MOE)
    d, V = 1024, 1000
    per_expert, fixed, attention = 786_432, 1_582_088, 1_348_032
    c = param_counts(model)
    assert c.attention == 3 * attention
    assert c.norms == 2 * d * 3 + d
    assert c.dense_ffn == 1 * 3 * d * 2048  # one leading dense layer
    assert c.routed_experts_total == 2 * 8 * per_expert  # two MoE layers, eight experts
    assert c.routed_experts_active == 2 * 2 * per_expert  # two experts per token
    assert c.shared_and_router == 2 * fixed
    base = 2 * V * d + 3 * attention + (2 * d * 3 + d) + 3 * d * 2048 + 2 * fixed
    assert c.total == base + 16 * per_expert
    assert c.active == base + 4 * per_expert
    assert c.non_expert == base - V * d


def test_param_counts_linear_model() -> None:
    model = arch(**LINEAR)
    c = param_counts(model)
    linear_block = 200_704 + 1_024 + 8 + 32 + 65_536
    full_block = 3 * 131_072
    assert c.attention == 3 * linear_block + full_block
    assert c.dense_ffn == 4 * 3 * 512 * 1024


def test_weight_bytes_mixed_dtypes_keep_embeddings_bf16() -> None:
    model = arch(**MLA_MOE)
    c = param_counts(model)
    # experts at fp4 = NVFP4 (0.5 B a value + one 1-byte e4m3 scale per 16 values: 0.5 + 1/16 =
    # 0.5625 B), the rest at fp8 (1 B, per-tensor scales), embedding and LM head at bf16 (2 B)
    expected = c.routed_experts_total * 0.5625 + (c.non_expert - c.lm_head) * 1.0 + (c.embedding + c.lm_head) * 2.0
    assert weight_bytes(model) == pytest.approx(expected, rel=1e-15)
    assert expert_bytes(model) == 786_432 * 0.5625 == 442_368
    # block-scaled fp8 experts: 786,432 values in 786,432 / (128 * 128) = 48 blocks of 4-byte scales
    fp8_block = arch(**{**MLA_MOE, "expert_weight_dtype": "fp8-block"})
    assert expert_bytes(fp8_block) == 786_432 * 1.0 + 48 * 4 == 786_624
    # a bf16 model is just two bytes per parameter
    assert weight_bytes(arch(**GQA)) == 2 * 32_461_824
    # expert_weight_dtype falls back to weight_dtype
    fp8_all = arch(**{**MLA_MOE, "expert_weight_dtype": None})
    assert expert_bytes(fp8_all) == 786_432 * 1.0


def test_weight_bytes_tied_model() -> None:
    tied = arch(**GQA, tie_word_embeddings=True, weight_dtype="fp8")
    c = param_counts(tied)
    assert weight_bytes(tied) == (c.total - c.embedding) * 1.0 + c.embedding * 2.0


def test_flops_per_token() -> None:
    model = arch(**GQA)
    # 2 * active params, without the embedding lookup and without the LM head (roofline adds it)
    assert linear_flops_per_token(model) == 2.0 * (2 * 2_621_440 + 5_120 + 2 * 12_582_912)
    assert lm_head_flops(model) == 2.0 * 1024 * 1000
    moe = arch(**MLA_MOE)
    c = param_counts(moe)
    assert linear_flops_per_token(moe) == 2.0 * (
        c.attention + c.norms + c.dense_ffn + c.routed_experts_active + c.shared_and_router
    )


# -- the catalog ----------------------------------------------------------------------------------
@cache
def catalog(name: str) -> ModelArchitecture:
    return load_model(name)


@pytest.mark.parametrize("name", sorted(model_index()))
def test_catalog_totals_match_published(name: str) -> None:
    model = catalog(name)
    c = param_counts(model)
    assert c.active <= c.total
    if model.params_total_published:
        assert c.total == pytest.approx(model.params_total_published, rel=0.03)


def test_catalog_llama_8b_exact() -> None:
    model = catalog("llama-3.1-8b")
    d, L, V, f = 4096, 32, 128256, 14336
    attention = d * 32 * 128 + 2 * d * 8 * 128 + 32 * 128 * d
    expected = 2 * V * d + L * attention + (2 * d * L + d) + L * 3 * d * f
    assert param_counts(model).total == expected == 8_030_261_248
    assert weight_bytes(model) == 2 * expected


def test_catalog_deepseek_expert_bytes() -> None:
    model = catalog("deepseek-v3.2")
    assert model.moe is not None
    assert routed_expert_params(model) == 3 * 7168 * 2048
    # block-scaled fp8 experts: 1 B a value plus a 4-byte fp32 scale per 128 x 128 block; each of
    # the three 7168 x 2048 matrices has 56 x 16 = 896 blocks
    assert expert_bytes(model) == 3 * 7168 * 2048 * 1.0 + 3 * 896 * 4 == 44_050_944
    assert param_counts(model).routed_experts_total == 58 * 256 * 3 * 7168 * 2048
