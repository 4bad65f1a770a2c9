"""KV-cache bytes: per token, per request in pages, per TP shard, incremental for a hit rate, token IDs.

Expected values are written out from the formulas in the docstring of `pddplan.perf.kv`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from toys import GQA, LINEAR, SLIDING, arch

from pddplan.inputs import load_model
from pddplan.perf.kv import (
    cached_tokens,
    incremental_kv_bytes,
    instance_kv_bytes_per_token,
    kv_breakdown,
    kv_bytes_per_token,
    kv_formula,
    kv_replication,
    linear_state_bytes,
    new_tokens,
    per_token_layer_bytes,
    request_kv_bytes,
    round_to_pages,
    shard_kv_bytes_per_token,
    token_id_bytes,
)

MLA: dict[str, Any] = {
    "num_layers": 3,
    "hidden_size": 1024,
    "vocab_size": 1000,
    "num_heads": 8,
    "num_kv_heads": 8,
    "head_dim": 96,
    "intermediate_size": 2048,
    "mla": {"kv_lora_rank": 128, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64, "q_lora_rank": 256},
    "indexer": {"num_heads": 4, "head_dim": 32, "top_k": 256},
}


# -- per token -------------------------------------------------------------------------------------
def test_gqa_bytes_per_token() -> None:
    model = arch(**GQA)
    g, k = 2, 128
    assert per_token_layer_bytes(model) == 2 * g * k * 2 == 1024  # K and V, bf16
    assert kv_bytes_per_token(model) == 2 * 1024
    assert kv_bytes_per_token(model.with_kv_dtype("fp8")) == 2 * (2 * g * k * 1)


def test_mla_bytes_per_token_fp8_and_bf16() -> None:
    fp8 = arch(**MLA, kv_dtype="fp8")
    kv_lora, rope, ki = 128, 32, 32
    latent_fp8 = kv_lora * 1 + 4 * math.ceil(kv_lora / 128) + 2 * rope  # 128 + 4 + 64
    indexer = ki + 4
    assert per_token_layer_bytes(fp8) == latent_fp8 + indexer == 232
    assert kv_bytes_per_token(fp8) == 3 * 232
    bf16 = fp8.with_kv_dtype("bf16")
    assert per_token_layer_bytes(bf16) == (kv_lora + rope) * 2 + indexer == 356
    # a rank that is not a multiple of 128 still pays a whole scale for its last group
    odd = arch(**{**MLA, "mla": {**MLA["mla"], "kv_lora_rank": 200}, "indexer": None}, kv_dtype="fp8")
    assert per_token_layer_bytes(odd) == 200 + 4 * 2 + 2 * 32


def test_deepseek_v32_is_656_plus_indexer() -> None:
    model = load_model("deepseek-v3.2")
    assert model.kv_dtype == "fp8"
    # 512 fp8 latent + 16 B of scales + 64 bf16 rope = 656; indexer 128 fp8 + 4 B scale
    assert per_token_layer_bytes(model) == 656 + 132
    assert kv_bytes_per_token(model) == 61 * 788 == 48_068
    assert kv_formula(model).startswith("61 full layers x (512 fp8 latent + 16 scales + 64x2 rope + 128 + 4 indexer)")
    assert kv_formula(model).endswith("= 48,068 B/token")


def test_sliding_breakdown() -> None:
    model = arch(**SLIDING)
    layer = 2 * 2 * 64 * 2
    kv = kv_breakdown(model)
    assert kv.full_bytes_per_token == 2 * layer == 1024
    assert kv.sliding_bytes_per_token == 2 * layer
    assert kv.sliding_window_tokens == 128
    assert kv.linear_state_bytes == 0.0
    assert kv.long_context_bytes_per_token == 1024
    assert kv_bytes_per_token(model) == 1024  # only what grows with length


def test_linear_state_bytes() -> None:
    model = arch(**LINEAR)
    nk, nv, dk, dv, kernel = 2, 4, 32, 32, 4
    recurrent = nv * dk * dv * 4  # fp32 state
    conv = (2 * nk * dk + nv * dv) * (kernel - 1) * 2  # bf16 conv tail
    assert (recurrent, conv) == (16_384, 1_536)
    assert linear_state_bytes(model) == 3 * (recurrent + conv) == 53_760
    bf16_state = arch(**{**LINEAR, "linear": {**LINEAR["linear"], "state_dtype": "bf16"}})
    assert linear_state_bytes(bf16_state) == 3 * (nv * dk * dv * 2 + conv)
    assert linear_state_bytes(arch(**GQA)) == 0.0
    assert kv_bytes_per_token(model) == 1 * 2 * 2 * 64 * 2  # the single full layer
    text = kv_formula(model)
    assert "3 linear layers hold 0.1 MB per sequence" in text


# -- per request, in pages -------------------------------------------------------------------------
def test_round_to_pages() -> None:
    assert np.array_equal(round_to_pages([0, 1, 64, 65, 1000], 64), [0, 64, 64, 128, 1024])
    assert np.array_equal(round_to_pages([7, 8], 1), [7, 8])


def test_request_kv_bytes_gqa_pages() -> None:
    model = arch(**GQA)
    assert float(request_kv_bytes(model, 1000, page_tokens=64)) == 1024 * 2048  # ceil(1000/64)=16 pages
    assert float(request_kv_bytes(model, 1000)) == 1000 * 2048
    assert float(request_kv_bytes(model, 0, 64)) == 0.0
    out = request_kv_bytes(model, np.array([1, 64, 65]), 64)
    assert np.array_equal(out, [64 * 2048, 64 * 2048, 128 * 2048])


def test_request_kv_bytes_sliding_capped_at_window() -> None:
    model = arch(**SLIDING)
    # full: pages(1000) * 1024; sliding: pages(min(1000, 128)) * 1024
    assert float(request_kv_bytes(model, 1000, 64)) == 1024 * 1024 + 128 * 1024
    # below the window both grow: min(100, 128) = 100 -> 2 pages
    assert float(request_kv_bytes(model, 100, 64)) == 128 * 1024 + 128 * 1024
    assert float(request_kv_bytes(model, 100, 1)) == 100 * 1024 + 100 * 1024
    assert float(request_kv_bytes(model, 5000, 1)) == 5000 * 1024 + 128 * 1024


def test_request_kv_bytes_linear_state_once_per_live_sequence() -> None:
    model = arch(**LINEAR)
    assert float(request_kv_bytes(model, 0)) == 0.0
    assert float(request_kv_bytes(model, 10)) == 10 * 512 + 53_760
    assert np.array_equal(request_kv_bytes(model, [0, 10]), [0.0, 10 * 512 + 53_760])


# -- per TP shard ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tp", "shard", "instance"),
    [
        (1, 2048, 2048),  # both KV heads on one rank
        (2, 1024, 2048),  # one head per rank
        (4, 1024, 4096),  # ceil(2/4) = 1 head per rank: replicated, 4 * 1024
        (8, 1024, 8192),
    ],
)
def test_gqa_shard_bytes(tp: int, shard: float, instance: float) -> None:
    model = arch(**GQA)
    assert shard_kv_bytes_per_token(model, tp) == shard
    assert instance_kv_bytes_per_token(model, tp) == instance
    assert instance == tp * math.ceil(2 / tp) / 2 * kv_bytes_per_token(model)


@pytest.mark.parametrize("tp", [1, 2, 8, 16])
def test_mla_latent_on_every_rank_under_tensor_parallel_attention(tp: int) -> None:
    """The latent is shared by all heads: each of the tp ranks keeps all 696 B of it."""
    model = arch(**MLA, kv_dtype="fp8")
    assert shard_kv_bytes_per_token(model, tp) == 696
    assert kv_replication(model, tp) == tp
    assert instance_kv_bytes_per_token(model, tp) == 696 * tp


@pytest.mark.parametrize("attention", [MLA, GQA])
@pytest.mark.parametrize("tp", [1, 2, 8, 16])
def test_data_parallel_attention_keeps_one_copy(attention: dict[str, object], tp: int) -> None:
    """Each rank attends its own sequences: whole tokens, stored once in the instance."""
    model = arch(**attention)
    assert kv_replication(model, tp, data_parallel_attention=True) == 1.0
    assert shard_kv_bytes_per_token(model, tp, data_parallel_attention=True) == kv_bytes_per_token(model)
    assert instance_kv_bytes_per_token(model, tp, data_parallel_attention=True) == kv_bytes_per_token(model)


# -- prefix hits and the WAN payload --------------------------------------------------------------
def test_cached_and_new_tokens_whole_pages() -> None:
    # floor(0.9 * 1000 / 64) * 64 = 14 * 64 = 896 cached; a partial page is recomputed
    assert float(cached_tokens(1000, 0.9, 64)) == 896
    assert float(new_tokens(1000, 0.9, 64)) == 104
    assert float(cached_tokens(1000, 0.9)) == 900
    assert float(new_tokens(1000, 0.9)) == 100
    # the article's scenario: 64K prompt at 90% hit -> 57,600 cached = 900 pages of 64
    assert float(cached_tokens(64000, 0.9, 64)) == 57_600
    assert float(new_tokens(64000, 0.9, 64)) == 6_400
    assert float(cached_tokens(1000, 0.0, 64)) == 0
    assert float(cached_tokens(1000, 1.0, 64)) == 960  # the last partial page is never a hit
    out = new_tokens(np.array([1000, 64000]), np.array([0.9, 0.5]), 64)
    assert np.array_equal(out, [104, 32_000])


def test_incremental_kv_gqa() -> None:
    model = arch(**GQA)
    assert float(incremental_kv_bytes(model, 1000, 0.9, 64)) == 104 * 2048
    assert float(incremental_kv_bytes(model, 1000, 0.0)) == 1000 * 2048
    # the last prompt token is always recomputed (its logits give the first output token)
    assert float(incremental_kv_bytes(model, 1000, 1.0)) == 1 * 2048


def test_incremental_kv_deepseek_article_scenario() -> None:
    model = load_model("deepseek-v3.2")
    # (1 - 0.9) * 64,000 tokens * 48,068 B: ~0.31 GB per request crosses the WAN
    assert float(incremental_kv_bytes(model, 64000, 0.9, 64)) == 6400 * 48_068


def test_incremental_kv_sliding_sends_the_window() -> None:
    model = arch(**SLIDING)
    # full layers: 104 new tokens; sliding layers: the last min(1000, 128) tokens whatever the hit
    assert float(incremental_kv_bytes(model, 1000, 0.9, 64)) == 104 * 1024 + 128 * 1024
    assert float(incremental_kv_bytes(model, 100, 0.5)) == 50 * 1024 + 100 * 1024
    # at a full hit the last prompt token is still recomputed, and the window is still sent
    assert float(incremental_kv_bytes(model, 1000, 1.0)) == 1 * 1024 + 128 * 1024


def test_incremental_kv_linear_state_when_anything_is_new() -> None:
    model = arch(**LINEAR)
    assert float(incremental_kv_bytes(model, 1000, 0.9)) == 100 * 512 + 53_760
    # the last prompt token is always recomputed (its logits give the first output token), so the
    # state, changed by it, is sent too
    assert float(incremental_kv_bytes(model, 1000, 1.0)) == 1 * 512 + 53_760


def test_token_id_payload() -> None:
    assert float(token_id_bytes(100)) == 400.0  # int32 IDs
    assert float(token_id_bytes(100, bytes_per_id=8)) == 800.0
    assert np.array_equal(token_id_bytes([0, 1, 64]), [0.0, 4.0, 256.0])
    # the handoff payload is orders of magnitude below the same tokens' KV
    model = load_model("deepseek-v3.2")
    assert float(token_id_bytes(100)) * 100 < float(incremental_kv_bytes(model, 100, 0.0))


def test_kv_formula_spells_the_numbers() -> None:
    assert kv_formula(arch(**GQA)) == "2 full layers x (2 x 2 kv heads x 128 x 2 B) = 2,048 B/token"
    fp8 = kv_formula(arch(**MLA, kv_dtype="fp8"))
    assert fp8 == "3 full layers x (128 fp8 latent + 4 scales + 32x2 rope + 32 + 4 indexer) = 696 B/token"
    bf16 = kv_formula(arch(**MLA))
    assert bf16 == "3 full layers x ((128 + 32) x 2 bf16 + 32 + 4 indexer) = 1,068 B/token"
    sliding = kv_formula(arch(**SLIDING))
    assert sliding.endswith("; 2 sliding layers add 1,024 B/token up to 128 tokens")
