"""Memory capacity of an instance: weights, activations, and what is left for KV.

Per GPU:  usable = HBM * hbm_utilization
          weights = W s / tp  under TP (every weight split across ranks; with pp pipeline stages
                    the fullest holds s = ceil(L / pp) / L of the layers, 1 without);
                    W_dense + W_experts / tp  under EP (non-expert weights replicated on each rank)
          activations = T * (8 * d + 2 * f_tp) * 2 B,  T = tokens per step, f_tp = widest FFN per rank
          kv_budget = usable - weights - activations   (must be > 0, else the model does not fit)
An instance's KV budget is tp * kv_budget / s per GPU (a stage keeps its own layers' KV); a
sequence of N tokens takes request_kv_bytes(N) times the copies its attention layout keeps (see
`kv_replication`: GQA heads replicated when tp > g, MLA's latent on every rank under
tensor-parallel attention, one copy under data-parallel attention).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pddplan.errors import InputError
from pddplan.perf.arithmetic import weight_bytes
from pddplan.perf.kv import kv_replication as kv_replication_of
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.roofline import ACTIVATION_BYTES, Instance

ACTIVATION_WIDTH_FACTOR = 8  # residual, norms, q/k/v/o buffers: about eight d-wide bf16 tensors per token


@dataclass(frozen=True)
class MemoryBudget:
    """Per-GPU memory split of an instance, in bytes."""

    usable_bytes: float
    weight_bytes: float
    activation_bytes: float

    @property
    def kv_bytes(self) -> float:
        """Bytes left on one GPU for KV cache (running batch and cached prefixes)."""
        return self.usable_bytes - self.weight_bytes - self.activation_bytes


def activation_bytes(instance: Instance, step_tokens: int) -> float:
    """Activation workspace per GPU for a step of `step_tokens` tokens: T * (8 d + 2 f / s) * 2 B,
    s = tp, the FFN split over the ranks; under data-parallel attention T is each rank's own
    budget and its experts receive as many token-expert rows as its own tokens bring, s = 1."""
    model = instance.model
    widest_ffn = model.intermediate_size
    if model.moe is not None:
        widest_ffn = max(widest_ffn, model.moe.expert_intermediate_size * model.moe.experts_per_token)
    split = 1 if instance.uses_dp_attention else instance.tp
    per_token = ACTIVATION_WIDTH_FACTOR * model.hidden_size + 2 * widest_ffn / split
    return float(step_tokens * per_token * ACTIVATION_BYTES)


def memory_budget(instance: Instance, hbm_utilization: float = 0.9, step_tokens: int = 8192) -> MemoryBudget:
    """Split one GPU's memory; raise InputError when the weights and activations do not fit."""
    hw = instance.hardware
    total_weights = weight_bytes(instance.model)
    if instance.uses_dp_attention:  # experts split, the rest replicated on every rank
        expert_total = (
            instance.constants.expert_weight_bytes * instance.constants.moe_layers * (instance.constants.num_experts)
        )
        per_gpu_weights = total_weights - expert_total + expert_total / instance.tp
    else:  # each pipeline stage holds its layers (the fullest stage's share binds)
        per_gpu_weights = total_weights * instance.stage_share / instance.tp
    budget = MemoryBudget(
        usable_bytes=hw.hbm_bytes * hbm_utilization,
        weight_bytes=per_gpu_weights,
        activation_bytes=activation_bytes(instance, step_tokens),
    )
    if budget.kv_bytes <= 0:
        need = (budget.weight_bytes + budget.activation_bytes) / 1e9
        raise InputError(
            f"model '{instance.model.name}' does not fit on {hw.name} at {layout_name(instance)}: "
            f"weights {budget.weight_bytes / 1e9:.1f} GB + activations {budget.activation_bytes / 1e9:.1f} GB "
            f"= {need:.1f} GB per GPU, usable {budget.usable_bytes / 1e9:.1f} GB "
            f"({hbm_utilization:.0%} of {hw.hbm_bytes / 1e9:.0f} GB); use a larger tp or another GPU"
        )
    return budget


def fits(instance: Instance, hbm_utilization: float = 0.9, step_tokens: int = 8192) -> bool:
    """Whether the model's weights and activations fit with some room for KV."""
    try:
        memory_budget(instance, hbm_utilization, step_tokens)
    except InputError:
        return False
    return True


def instance_kv_capacity_bytes(instance: Instance, hbm_utilization: float = 0.9, step_tokens: int = 8192) -> float:
    """KV bytes an instance can hold, across its tp x pp GPUs, in model-figure units.

    Replicated KV (`kv_replication`) shrinks the capacity by its number of copies.
    """
    per_gpu = memory_budget(instance, hbm_utilization, step_tokens).kv_bytes
    # a stage keeps its own layers' share of each token's KV: the fullest stage fills first
    return per_gpu * instance.tp / (instance.stage_share * kv_replication(instance))


def layout_name(instance: Instance) -> str:
    """tp=N, or tp=N x pp=M with pipeline stages (for messages)."""
    return f"tp={instance.tp}" + (f" x pp={instance.pp}" if instance.pp > 1 else "")


def kv_replication(instance: Instance) -> float:
    """Copies of each token's KV the instance stores (`kv.kv_replication`, data-parallel attention
    or not). Applied to a sequence's whole state, it over-counts a hybrid model's
    linear-attention state, which is split by value heads, when tp exceeds the KV heads."""
    return kv_replication_of(instance.model, instance.tp, instance.uses_dp_attention)


def sequences_that_fit(capacity_bytes: ArrayLike, sequence_bytes: ArrayLike, pools: int = 1) -> np.ndarray:
    """Whole sequences of `sequence_bytes` KV each that fit in `capacity_bytes` split evenly over
    `pools` memories a sequence cannot straddle (`Instance.kv_pools`):
    pools * floor(max(capacity, 0) / pools / max(sequence, 1 B))."""
    capacity = np.maximum(np.asarray(capacity_bytes, dtype=np.float64), 0.0) / pools
    return pools * np.floor(capacity / np.maximum(np.asarray(sequence_bytes, dtype=np.float64), 1.0))


def prompt_room(kv_capacity_bytes: float, instance: Instance, prompt_tokens: int, page_tokens: int) -> float:
    """How many of the longest prompts' KV an instance holds at once (< 1: not even one):
    sequences_that_fit(KV capacity, KV(prompt), per-rank pools). A prefill instance keeps the KV
    of the prompt it prefills until it is sent; a decoder or relay receives all of it."""
    need = request_kv_bytes(instance.model, prompt_tokens, page_tokens)
    return float(sequences_that_fit(kv_capacity_bytes, need, instance.kv_pools))


def max_batch(
    instance: Instance,
    context_tokens: ArrayLike,
    hbm_utilization: float = 0.9,
    page_tokens: int = 64,
    reserved_bytes: float = 0.0,
) -> np.ndarray:
    """Largest number of sequences of `context_tokens` tokens whose KV fits at once.

    floor((capacity - reserved) / request_kv_bytes(max(context, 1))), reserved being e.g. cached
    prefixes; a running sequence holds at least the token it decodes.
    """
    capacity = instance_kv_capacity_bytes(instance, hbm_utilization) - reserved_bytes
    tokens = np.maximum(np.asarray(context_tokens, dtype=np.float64), 1.0)
    return sequences_that_fit(capacity, request_kv_bytes(instance.model, tokens, page_tokens), instance.kv_pools)
