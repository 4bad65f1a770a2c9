"""KV-cache bytes: per token, per request, per tensor-parallel shard, and over the WAN for a hit rate.

Per token and layer, by attention kind (b = bytes per KV element):
  GQA/MHA/MQA     2 * g * k * b                       (K and V for each KV head)
  MLA, bf16       (kv_lora + rope) * 2                (one latent plus the rope key)
  MLA, fp8        kv_lora + 4 * ceil(kv_lora / 128) + 2 * rope
                  (FlashMLA / vLLM `fp8_ds_mla`: fp8 latent, one fp32 scale per 128 values, bf16 rope;
                  656 B for DeepSeek's 512 + 64)
  DSA indexer     ki + 4                              (fp8 key plus an fp32 scale, at either KV dtype)
Sliding-window layers keep at most `window` tokens; linear-attention layers keep a fixed state per
sequence, nv * dk * dv at the state dtype plus a causal-conv tail (2*nk*dk + nv*dv) * (kernel-1) bf16.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pddplan.specs.model import DTYPE_BYTES, ModelArchitecture

FP8_SCALE_GROUP = 128
FP32_BYTES = 4


def per_token_layer_bytes(model: ModelArchitecture) -> float:
    """KV bytes one token adds to one full- or sliding-attention layer (indexer included)."""
    if model.mla is not None:
        mla = model.mla
        if model.kv_dtype == "fp8":
            scales = FP32_BYTES * math.ceil(mla.kv_lora_rank / FP8_SCALE_GROUP)
            latent = mla.kv_lora_rank * DTYPE_BYTES["fp8"] + scales + mla.qk_rope_head_dim * DTYPE_BYTES["bf16"]
        else:
            latent = (mla.kv_lora_rank + mla.qk_rope_head_dim) * DTYPE_BYTES["bf16"]
        indexer = 0.0
        if model.indexer is not None:
            indexer = model.indexer.head_dim * DTYPE_BYTES["fp8"] + FP32_BYTES
        return latent + indexer
    return 2.0 * model.num_kv_heads * model.head_dim * DTYPE_BYTES[model.kv_dtype]


def linear_state_bytes(model: ModelArchitecture) -> float:
    """Fixed per-sequence state of all linear-attention layers (0 when there are none)."""
    lin = model.linear
    layers = model.count("linear")
    if lin is None or layers == 0:
        return 0.0
    recurrent = lin.num_value_heads * lin.key_head_dim * lin.value_head_dim * DTYPE_BYTES[lin.state_dtype]
    conv_channels = 2 * lin.num_key_heads * lin.key_head_dim + lin.num_value_heads * lin.value_head_dim
    conv = conv_channels * (lin.conv_kernel - 1) * DTYPE_BYTES["bf16"]
    return layers * (recurrent + conv)


@dataclass(frozen=True)
class KvBreakdown:
    """KV bytes per token by layer kind, for a long context (sliding layers at their window cap)."""

    full_bytes_per_token: float
    sliding_bytes_per_token: float
    sliding_window_tokens: int
    linear_state_bytes: float

    @property
    def long_context_bytes_per_token(self) -> float:
        """Bytes each further token adds once the context exceeds every window."""
        return self.full_bytes_per_token


def kv_breakdown(model: ModelArchitecture) -> KvBreakdown:
    """Split per-token KV bytes by layer kind."""
    layer = per_token_layer_bytes(model)
    return KvBreakdown(
        full_bytes_per_token=model.count("full") * layer,
        sliding_bytes_per_token=model.count("sliding") * layer,
        sliding_window_tokens=model.sliding_window or 0,
        linear_state_bytes=linear_state_bytes(model),
    )


def kv_bytes_per_token(model: ModelArchitecture) -> float:
    """KV bytes per token of a long context: full-attention layers only (what grows with length)."""
    return kv_breakdown(model).full_bytes_per_token


def round_to_pages(tokens: ArrayLike, page_tokens: int) -> np.ndarray:
    """Tokens rounded up to whole pages: ceil(tokens / page) * page."""
    arr = np.asarray(tokens, dtype=np.float64)
    return np.ceil(arr / page_tokens) * page_tokens


def request_kv_bytes(model: ModelArchitecture, tokens: ArrayLike, page_tokens: int = 1) -> np.ndarray:
    """KV bytes a sequence of `tokens` tokens holds, in whole pages.

    full layers: pages(N) * bytes;  sliding layers: pages(min(N, window)) * bytes;  linear: fixed state.
    """
    kv = kv_breakdown(model)
    n = np.asarray(tokens, dtype=np.float64)
    out = round_to_pages(n, page_tokens) * kv.full_bytes_per_token
    if kv.sliding_bytes_per_token:
        out = out + round_to_pages(np.minimum(n, kv.sliding_window_tokens), page_tokens) * kv.sliding_bytes_per_token
    return out + np.where(n > 0, kv.linear_state_bytes, 0.0)


def kv_replication(model: ModelArchitecture, tp: int, data_parallel_attention: bool = False) -> float:
    """Copies of each token's KV an instance of `tp` ranks stores.

    Data-parallel attention (each rank attends its own sequences, as under expert parallelism): 1.
    Tensor-parallel attention (heads split across ranks): GQA keeps ceil(g / tp) of its g KV heads
    on each rank, tp * ceil(g / tp) / g copies (1 when tp divides g); MLA's latent is shared by all
    heads, so every rank keeps all of it: tp copies.
    """
    if data_parallel_attention or tp == 1:
        return 1.0
    if model.mla is not None:
        return float(tp)
    return tp * math.ceil(model.num_kv_heads / tp) / model.num_kv_heads


def shard_kv_bytes_per_token(model: ModelArchitecture, tp: int, data_parallel_attention: bool = False) -> float:
    """KV bytes per token that one rank stores (long context).

    Tensor-parallel attention: GQA splits its KV heads, ceil(g / tp) per rank; MLA keeps the whole
    latent on every rank. Data-parallel attention: a rank keeps whole tokens of its own sequences.
    """
    if data_parallel_attention or model.mla is not None:
        return kv_bytes_per_token(model)
    return kv_bytes_per_token(model) * math.ceil(model.num_kv_heads / tp) / model.num_kv_heads


def instance_kv_bytes_per_token(model: ModelArchitecture, tp: int, data_parallel_attention: bool = False) -> float:
    """KV bytes per token an instance of `tp` ranks stores: the model figure times `kv_replication`."""
    return kv_bytes_per_token(model) * kv_replication(model, tp, data_parallel_attention)


def cached_tokens(prompt_tokens: ArrayLike, hit: ArrayLike, page_tokens: int = 1) -> np.ndarray:
    """Prompt tokens served from the prefix cache: min(floor(hit * prompt / page) * page, prompt - 1).

    Prefix caches match whole pages, so a partial page is recomputed; and the last prompt token is
    always computed, because its logits give the first output token.
    """
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    matched = np.floor(np.asarray(hit, dtype=np.float64) * prompt / page_tokens) * page_tokens
    return np.minimum(matched, np.maximum(prompt - 1.0, 0.0))


def new_tokens(prompt_tokens: ArrayLike, hit: ArrayLike, page_tokens: int = 1) -> np.ndarray:
    """Prompt tokens that must be prefilled: prompt - cached (at least one)."""
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    return prompt - cached_tokens(prompt, hit, page_tokens)


def incremental_kv_bytes(
    model: ModelArchitecture, prompt_tokens: ArrayLike, hit: ArrayLike, page_tokens: int = 1
) -> np.ndarray:
    """KV bytes to move after a prefill at prefix hit rate `hit` (what crosses the WAN).

    full layers:    new_tokens * bytes, new_tokens = prompt - floor(hit * prompt / page) * page
                    (i.e. ~ (1 - hit) * prompt * kv_bytes_per_token);
    sliding layers: the last min(prompt, window) tokens, which the receiver cannot rebuild;
    linear layers:  the whole fixed state, which changes with every new token.
    """
    kv = kv_breakdown(model)
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    fresh = new_tokens(prompt, hit, page_tokens)
    out = fresh * kv.full_bytes_per_token
    if kv.sliding_bytes_per_token:
        out = out + np.minimum(prompt, kv.sliding_window_tokens) * kv.sliding_bytes_per_token
    return out + np.where(fresh > 0, kv.linear_state_bytes, 0.0)


def token_id_bytes(tokens: ArrayLike, bytes_per_id: int = 4) -> np.ndarray:
    """Payload of a token-ID handoff: 4-byte IDs (int32), plus nothing else worth counting."""
    return np.asarray(tokens, dtype=np.float64) * bytes_per_id


def kv_formula(model: ModelArchitecture) -> str:
    """The per-token KV arithmetic for this model, spelled out with its numbers."""
    kv = kv_breakdown(model)
    full = model.count("full")
    if model.mla is not None:
        mla = model.mla
        if model.kv_dtype == "fp8":
            scales = FP32_BYTES * math.ceil(mla.kv_lora_rank / FP8_SCALE_GROUP)
            per_layer = f"{mla.kv_lora_rank} fp8 latent + {scales} scales + {mla.qk_rope_head_dim}x2 rope"
        else:
            per_layer = f"({mla.kv_lora_rank} + {mla.qk_rope_head_dim}) x 2 bf16"
        if model.indexer is not None:
            per_layer += f" + {model.indexer.head_dim} + 4 indexer"
    else:
        width = DTYPE_BYTES[model.kv_dtype]
        per_layer = f"2 x {model.num_kv_heads} kv heads x {model.head_dim} x {width:g} B"
    text = f"{full} full layers x ({per_layer}) = {kv.full_bytes_per_token:,.0f} B/token"
    if kv.sliding_bytes_per_token:
        text += (
            f"; {model.count('sliding')} sliding layers add {kv.sliding_bytes_per_token:,.0f} B/token "
            f"up to {kv.sliding_window_tokens} tokens"
        )
    if kv.linear_state_bytes:
        text += f"; {model.count('linear')} linear layers hold {kv.linear_state_bytes / 1e6:,.1f} MB per sequence"
    return text
