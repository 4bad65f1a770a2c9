"""Model arithmetic: parameter counts, weight bytes and FLOPs per token, from the architecture alone.

Notation (per layer unless said): d hidden size, h query heads, g KV heads, k head dim, V vocab,
E routed experts, t experts per token, w expert width, f dense FFN width.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pddplan.specs.model import DTYPE_BYTES, LayerKind, ModelArchitecture
from pddplan.specs.precision import weight_bytes_per_value


def attention_params(model: ModelArchitecture, kind: LayerKind) -> int:
    """Parameters of one attention block (projections, biases, q/k norms, indexer).

    GQA/MHA/MQA: q = d*h*k (x2 with an output gate), k = v = d*g*k, o = h*k*d.
    MLA: q = d*q_lora + q_lora + q_lora*h*(nope+rope) (or d*h*(nope+rope) without q_lora),
         kv_a = d*(kv_lora+rope) + kv_lora, kv_b = kv_lora*h*(nope+v), o = h*v*d.
    DSA indexer: q_lora*hi*ki + d*ki + 2*ki + d*hi.
    Linear (Gated DeltaNet): in = d*(2*nk*dk + 2*nv*dv + 2*nv), conv = (2*nk*dk + nv*dv)*kernel,
         A and dt = 2*nv, norm = dv, out = nv*dv*d.
    """
    d = model.hidden_size
    if kind == "linear":
        lin = model.linear
        assert lin is not None
        key_dim = lin.num_key_heads * lin.key_head_dim
        value_dim = lin.num_value_heads * lin.value_head_dim
        return (
            d * (2 * key_dim + 2 * value_dim + 2 * lin.num_value_heads)
            + (2 * key_dim + value_dim) * lin.conv_kernel
            + 2 * lin.num_value_heads
            + lin.value_head_dim
            + value_dim * d
        )
    h = model.num_heads
    if model.mla is not None:
        mla = model.mla
        qk_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank is not None:
            q = d * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * h * qk_dim
        else:
            q = d * h * qk_dim
        kv = d * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
        kv += mla.kv_lora_rank * h * (mla.qk_nope_head_dim + mla.v_head_dim)
        out = h * mla.v_head_dim * d
        total = q + kv + out
        if model.indexer is not None:
            ix = model.indexer
            q_in = mla.q_lora_rank if mla.q_lora_rank is not None else d
            total += q_in * ix.num_heads * ix.head_dim + d * ix.head_dim + 2 * ix.head_dim + d * ix.num_heads
        return total
    k = model.head_dim
    g = model.num_kv_heads
    q_out = h * k * (2 if model.attention_output_gate else 1)
    total = d * q_out + 2 * d * g * k + h * k * d
    if model.attention_bias:
        total += q_out + 2 * g * k + d
    if model.qk_norm:
        total += 2 * k
    return total


def routed_expert_params(model: ModelArchitecture) -> int:
    """Parameters of one routed expert: 3*d*w, plus 2w+d biases where the model has them."""
    moe = model.moe
    if moe is None:
        return 0
    per_expert = 3 * model.hidden_size * moe.expert_intermediate_size
    if moe.expert_bias:
        per_expert += 2 * moe.expert_intermediate_size + model.hidden_size
    return per_expert


def moe_fixed_params(model: ModelArchitecture) -> int:
    """Parameters of an MoE block besides its routed experts: router d*E (+E bias), shared experts
    3*d*ws (+d gate)."""
    moe = model.moe
    if moe is None:
        return 0
    d = model.hidden_size
    total = d * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    total += 3 * d * moe.shared_expert_intermediate_size
    if moe.shared_expert_gate:
        total += d
    return total


def ffn_params(model: ModelArchitecture, layer: int, active: bool) -> int:
    """Parameters of one FFN block: all of them, or only those one token uses (`active`).

    Dense: 3*d*f.  MoE: moe_fixed_params + n * routed_expert_params, n = E in total, t when active.
    """
    moe = model.moe
    if moe is None or not model.is_moe_layer(layer):
        return 3 * model.hidden_size * model.intermediate_size
    experts = moe.experts_per_token if active else moe.num_experts
    return moe_fixed_params(model) + experts * routed_expert_params(model)


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a model, split the way step-time models need them."""

    embedding: int
    lm_head: int
    attention: int
    norms: int
    dense_ffn: int
    routed_experts_total: int
    routed_experts_active: int
    shared_and_router: int

    @property
    def total(self) -> int:
        """Every parameter, counting a tied embedding once."""
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.norms
            + self.dense_ffn
            + self.routed_experts_total
            + self.shared_and_router
        )

    @property
    def active(self) -> int:
        """Parameters one token touches, embedding table included."""
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.norms
            + self.dense_ffn
            + self.routed_experts_active
            + self.shared_and_router
        )

    @property
    def non_expert(self) -> int:
        """Parameters every step reads whole: all but the routed experts and the embedding table."""
        return self.lm_head + self.attention + self.norms + self.dense_ffn + self.shared_and_router


@lru_cache(maxsize=128)  # a model is frozen; the optimizer asks its weight bytes thousands of times
def param_counts(model: ModelArchitecture) -> ParamCounts:
    """Count parameters layer by layer (MTP / next-token-prediction modules are not counted)."""
    d = model.hidden_size
    attention = sum(attention_params(model, kind) for kind in model.layer_kinds)
    moe = model.moe
    moe_layers = 0 if moe is None else model.num_layers - moe.first_dense_layers
    dense_layers = model.num_layers - moe_layers
    per_expert = routed_expert_params(model)
    embedding = model.vocab_size * d
    return ParamCounts(
        embedding=embedding,
        lm_head=0 if model.tie_word_embeddings else embedding,
        attention=attention,
        norms=2 * d * model.num_layers + d,
        dense_ffn=dense_layers * 3 * d * model.intermediate_size,
        routed_experts_total=moe_layers * per_expert * (moe.num_experts if moe else 0),
        routed_experts_active=moe_layers * per_expert * (moe.experts_per_token if moe else 0),
        shared_and_router=moe_layers * moe_fixed_params(model),
    )


def weight_bytes(model: ModelArchitecture) -> float:
    """Bytes of all weights: routed experts at the expert format, the rest at the weight format,
    block scales included (`precision.weight_format`).

    Embedding tables stay at bf16 in every engine, whatever the checkpoint's format.
    """
    counts = param_counts(model)
    dense_bytes = weight_bytes_per_value(model.weight_dtype)
    return (
        counts.routed_experts_total * weight_bytes_per_value(model.expert_dtype)
        + (counts.non_expert - counts.lm_head) * dense_bytes
        + (counts.embedding + counts.lm_head) * DTYPE_BYTES["bf16"]
    )


def expert_bytes(model: ModelArchitecture) -> float:
    """Bytes of one routed expert in one layer (0 for a dense model)."""
    moe = model.moe
    if moe is None:
        return 0.0
    return routed_expert_params(model) * weight_bytes_per_value(model.expert_dtype)


def linear_flops_per_token(model: ModelArchitecture) -> float:
    """Matrix-multiply FLOPs of one token's forward pass outside attention scores and the LM head:
    2 * (active params - embedding - LM head).

    The embedding lookup is free; the LM head is left out because engines compute logits for the
    last token of each sequence only, which `roofline` adds once per sequence (`lm_head_flops`).
    """
    counts = param_counts(model)
    return 2.0 * (counts.active - counts.embedding - counts.lm_head)


def lm_head_flops(model: ModelArchitecture) -> float:
    """FLOPs of the LM head for one token: 2 * d * V."""
    return 2.0 * model.hidden_size * model.vocab_size
