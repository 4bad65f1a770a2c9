"""Step-time model v3 for one serving instance (one GPU type x a tensor-parallel degree).

A step processes `batch` sequences, each adding `new_tokens` tokens on top of `context` tokens
already in its KV cache. Its time is the sum over three kernel families, each max(compute, memory),
plus collectives and overheads:

  dense GEMMs   compute = 2 * P_dense * N / (tp * F(dtype) * g_dtype(M)) + LM head,  M = rows per GPU
                memory  = W_dense / (tp * BW * mu(dtype))
  MoE layers    routing, permutation, grouped GEMMs, dispatch and combine, on the busiest rank
                (`perf.moe`: each part from its kernel measurements)
  attention     compute = attention FLOPs / (tp * F(bf16) * a(C, K)),
                memory  = KV bytes read * r / (tp * BW * k(bytes per GPU per layer))
  overheads     kernel_floor * kernels launched + step_overhead; a decode step the engine launches
                eagerly (its batch above `cuda_graph_max_batch`) is at least its host's time,
                step_overhead + launch_gap * (kernels + collectives)

F(dtype) is the peak of the dtype a GEMM runs at on this GPU (`HardwareProfile.gemm_dtype`: a
weight format the chip has no tensor cores for runs weight-only at bf16), mu(dtype) the weight-
streaming efficiency (`fp4_memory_fraction` for 4-bit floats); weight bytes include block scales
(`specs.precision`). Each efficiency is a saturating curve f_max * x / (x + x_half) over what
starves its kernel (`saturating`): g over GEMM rows M, a over attention thread blocks C (128
query rows x one head) times keys per query K, k over the KV bytes one GPU reads per layer. The
curves' priors come from public microbenchmarks (FlashAttention-3 and cuDNN attention, cuBLAS,
CUTLASS and DeepGEMM GEMMs, FlashInfer/cuDNN decode, nccl-tests, DeepEP; tests/data/kernel_priors.md);
`pddplan calibrate` fits them around those priors. Tensor parallelism (TP): two ring all-reduces
per layer. Expert parallelism (EP, DeepSeek-style: data-parallel attention, experts spread over the
ranks, dispatch/combine all-to-all): every rank reads its full replica of the non-expert weights
(W_dense / (BW * mu), not divided by tp) and runs its own sequences, ceil(b / tp) of the b on the
busiest rank (`dp_rank_share`); the step may run as two micro-batches whose all-to-all overlaps
the other's work (`two_batch_overlap`), at the price of launching every kernel twice.
F, BW: datasheet peaks. Every function accepts numpy arrays and broadcasts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, fields, replace
from functools import cached_property, lru_cache

import numpy as np
from numpy.typing import ArrayLike

from pddplan.errors import InputError, LayoutError
from pddplan.perf.arithmetic import expert_bytes, lm_head_flops, param_counts
from pddplan.perf.efficiency import compute_plateau, efficiency_of, streaming_fraction
from pddplan.perf.kv import kv_replication, linear_state_bytes, per_token_layer_bytes
from pddplan.perf.moe import MoeRun, moe_step
from pddplan.specs.hardware import Efficiency, HardwareProfile
from pddplan.specs.model import DTYPE_BYTES, ModelArchitecture
from pddplan.specs.precision import ComputeDtype, weight_bytes_per_value
from pddplan.specs.workload import Mtp
from pddplan.support.kept import json_by_identity, kept_by_content

ACTIVATION_BYTES = 2  # bf16 activations on the wire
ATTENTION_TILE_ROWS = 128  # query rows per FlashAttention / FlashMLA thread block (FA2/FA3 tile size)
#: Kernels one engine step launches, by the operations each layer performs (fusions vary by stack;
#: `kernel_floor_s`, fitted per stack, absorbs the difference). CUDA graphs hide their host launch
#: cost in decode and long kernels hide it in prefill; what remains is each kernel's device floor.
#: Attention block: input norm, QKV GEMM, RoPE + KV write, attention, output GEMM; QK norms add one.
GQA_ATTENTION_KERNELS = 5
#: MLA: input norm, q down GEMM, q norm, q up GEMM, kv down GEMM, kv norm, RoPE, key absorption,
#: KV write, attention, value absorption, output GEMM.
MLA_ATTENTION_KERNELS = 12
#: DeepSeek sparse attention's indexer: its q and k projections, scores, top-k.
INDEXER_KERNELS = 4
#: Gated linear attention (GDN): projections, short convolution, the recurrent update, gate, norm,
#: output GEMM.
LINEAR_ATTENTION_KERNELS = 6
#: Dense FFN: post-attention norm, gate/up GEMM, activation, down GEMM.
DENSE_FFN_KERNELS = 4
#: MoE FFN: post-attention norm, router GEMM, top-k, token sort, gate/up grouped GEMM, activation,
#: down grouped GEMM, combine; a shared expert adds its gate/up GEMM, activation and down GEMM.
MOE_FFN_KERNELS = 8
SHARED_EXPERT_KERNELS = 3
#: Per step: embedding, final norm, LM head, sampling.
STEP_KERNELS = 4


@dataclass(frozen=True)
class Instance:
    """One serving instance: a model on `tp` GPUs of one type (experts split across the same GPUs).

    `stack` names the serving stack whose calibrated factors to use (see `efficiency_of`).
    `cuda_graph_max_batch`: the largest decode batch the engine runs as a captured CUDA graph
    (SGLang `--cuda-graph-max-bs-decode`); larger decode batches run eagerly, 0 means every one does
    (`--disable-decode-cuda-graph`, vLLM `--enforce-eager`), None that every one is captured.
    `expert_parallel` None means: EP for an MoE model whose instance spans more than one scale-up
    domain (where all-reducing every layer over the NIC would be prohibitive), TP otherwise.
    `two_batch_overlap` (data-parallel attention only): run each step as two micro-batches whose
    all-to-all hides behind the other's work (SGLang `--enable-two-batch-overlap`); None lets each
    step take the faster of the two ways. `context_cv`: the coefficient of variation of the
    sequences' context lengths, which makes the busiest data-parallel rank's attention longer.
    `pp`: pipeline-parallel stages, each the model's next num_layers / pp layers on its own `tp`
    GPUs (tp x pp GPUs in all, `gpus`), passing activations to the next stage (`pipeline_stage`).
    Expert parallelism runs data-parallel attention (DeepSeek's and SGLang's `--enable-dp-attention`
    layout) unless `tp_attention`: then attention stays tensor-parallel and only the experts are
    spread whole over the ranks (SGLang `--tp N --ep N`, vLLM `--enable-expert-parallel`).
    """

    model: ModelArchitecture
    hardware: HardwareProfile
    tp: int = 1
    expert_parallel: bool | None = None
    efficiency_override: Efficiency | None = field(default=None, compare=False)
    stack: str | None = None
    mtp: Mtp | None = None
    tp_attention: bool = False
    cuda_graph_max_batch: int | None = None
    two_batch_overlap: bool | None = None
    context_cv: float = 0.0
    pp: int = 1

    def __post_init__(self) -> None:
        if self.tp < 1:
            raise InputError(f"tp = {self.tp}: must be at least 1")
        if not 1 <= self.pp <= self.model.num_layers:
            raise InputError(f"pp = {self.pp}: pipeline stages must be 1 to the model's {self.model.num_layers} layers")
        if self.pp > 1 and self.uses_dp_attention:
            raise InputError(
                f"pp = {self.pp} with data-parallel attention: not modelled (its ranks' lockstep across "
                "stages); use tensor-parallel attention (tp_attention) or expert_parallel false"
            )
        if not 0.0 <= self.context_cv <= 10.0:
            raise InputError(f"context_cv = {self.context_cv}: must be between 0 and 10")
        if self.cuda_graph_max_batch is not None and self.cuda_graph_max_batch < 0:
            raise InputError(f"cuda_graph_max_batch = {self.cuda_graph_max_batch}: must be 0 (no graphs) or more")
        if self.tp_attention and not self.uses_ep:
            raise InputError(
                f"tp_attention = true: only an expert-parallel MoE instance has a choice of attention "
                f"layout (set expert_parallel, --ep, too); {self.model.name} at tp={self.tp} is "
                f"{'dense' if self.model.moe is None else 'tensor-parallel throughout'}"
            )
        if not self.uses_dp_attention and self.model.num_heads % self.tp:
            heads = self.model.num_heads
            divisors = [n for n in range(1, heads + 1) if heads % n == 0]
            near = sorted({max(n for n in divisors if n < self.tp), *[n for n in divisors if n > self.tp][:1]})
            raise LayoutError(
                f"tp = {self.tp}: {self.model.name}'s {heads} attention heads do not split evenly over "
                f"{self.tp} tensor-parallel ranks, which vLLM and SGLang require; use a tp that divides {heads} "
                f"({' or '.join(map(str, near))})"
                + (", or data-parallel attention (expert_parallel)" if self.model.moe is not None else "")
            )
        if self.efficiency_override is None and self.stack is not None:
            efficiency_of(self.hardware, self.stack)  # fail early on a stack the profile lacks

    @property
    def efficiency(self) -> Efficiency:
        return self.efficiency_override or efficiency_of(self.hardware, self.stack)

    @property
    def gpus(self) -> int:
        """GPUs of one instance: tp per pipeline stage, pp stages."""
        return self.tp * self.pp

    @property
    def stage_share(self) -> float:
        """The share of the model's layers the fullest pipeline stage holds, ceil(L / pp) / L (1
        without stages): what sets the pipeline's pace and its memory per GPU."""
        layers = self.model.num_layers
        return 1.0 if self.pp == 1 else math.ceil(layers / self.pp) / layers

    def one_stage(self) -> Instance:
        """The instance as one stage holding every layer (pp = 1): what a stage's step is a
        1 / pp share of (`pipeline_stage`)."""
        return self if self.pp == 1 else replace(self, pp=1)

    def runs_eagerly(self, decode_batch: ArrayLike) -> np.ndarray:
        """Which decode batches the engine launches without a CUDA graph: those above
        `cuda_graph_max_batch` (none when it is None)."""
        batch = np.asarray(decode_batch, dtype=np.float64)
        if self.cuda_graph_max_batch is None:
            return np.zeros(np.shape(batch), dtype=bool)
        return batch > self.cuda_graph_max_batch

    @property
    def uses_ep(self) -> bool:
        """Whether experts run expert-parallel (see the class docstring for the default)."""
        if self.model.moe is None or self.tp == 1:
            return False
        if self.expert_parallel is not None:
            return self.expert_parallel
        return self.tp > self.hardware.scale_up_domain

    @property
    def uses_dp_attention(self) -> bool:
        """Whether attention runs data-parallel: under expert parallelism unless `tp_attention`."""
        return self.uses_ep and not self.tp_attention

    @property
    def kv_pools(self) -> int:
        """Separate KV memories a sequence must fit in one of: tp under data-parallel attention
        (each sequence stays on one rank), else 1 (the instance's memory)."""
        return self.tp if self.uses_dp_attention else 1

    @property
    def attention_ranks(self) -> int:
        """Ranks that prefill apart: tp under data-parallel attention (each rank its own requests,
        up to the chunk budget each per step, the steps in lockstep for the MoE all-to-all), else 1."""
        return self.tp if self.uses_dp_attention else 1

    def full_step_tokens(self, chunk_tokens: int) -> int:
        """New tokens a full prefill step carries: the chunk budget on each rank that prefills apart."""
        return chunk_tokens * self.attention_ranks

    @property
    def kv_senders(self) -> int:
        """GPUs (and NICs) one request's KV leaves from: 1 under data-parallel attention (one rank
        holds it), else every GPU (each rank sends its shard or share of its stage's layers)."""
        return 1 if self.uses_dp_attention else self.gpus

    @cached_property
    def constants(self) -> _ModelConstants:
        return _model_constants(self.model)


@dataclass(frozen=True)
class _ModelConstants:
    """Per-model numbers the step model needs, computed once per instance."""

    dense_flops_per_token: float
    expert_flops_per_token: float
    lm_head_flops: float
    dense_weight_bytes: float
    expert_weight_bytes: float
    moe_layers: int
    num_experts: int
    experts_per_token: int
    full_layers: int
    sliding_layers: int
    linear_layers: int
    window: float
    kv_layer_bytes: float
    latent_read_bytes: float
    indexer_read_bytes: float
    attn_flops_absorbed: float
    attn_flops_expanded: float
    upproject_flops: float
    indexer_flops: float
    top_k: float
    linear_flops_per_token: float
    linear_state_bytes: float
    gqa_head_dim: float  # the attention kernels' head dim; 0 for MLA, whose kernels are checked as they are


@lru_cache(maxsize=128)  # a model is frozen: its constants never change (a fit builds ~10^4 instances)
def _model_constants(model: ModelArchitecture) -> _ModelConstants:
    counts = param_counts(model)
    dense_bytes = weight_bytes_per_value(model.weight_dtype)
    moe = model.moe
    h = model.num_heads
    if model.mla is not None:
        mla = model.mla
        absorbed = 2.0 * h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + 2.0 * h * mla.kv_lora_rank
        expanded = 2.0 * h * (mla.qk_nope_head_dim + mla.qk_rope_head_dim) + 2.0 * h * mla.v_head_dim
        upproject = 2.0 * mla.kv_lora_rank * h * (mla.qk_nope_head_dim + mla.v_head_dim)
    else:
        absorbed = expanded = 4.0 * h * model.head_dim
        upproject = 0.0
    layer_bytes = per_token_layer_bytes(model)
    indexer_read = 0.0
    indexer_flops = 0.0
    top_k = np.inf
    if model.indexer is not None:
        indexer_read = model.indexer.head_dim * DTYPE_BYTES["fp8"] + 4.0
        indexer_flops = 2.0 * model.indexer.num_heads * model.indexer.head_dim
        top_k = float(model.indexer.top_k)
    linear_flops = 0.0
    if model.linear is not None:
        lin = model.linear
        linear_flops = 6.0 * lin.num_value_heads * lin.key_head_dim * lin.value_head_dim
    layers_linear = model.count("linear")
    return _ModelConstants(
        dense_flops_per_token=2.0 * (counts.active - counts.embedding - counts.lm_head - counts.routed_experts_active),
        expert_flops_per_token=2.0 * counts.routed_experts_active,
        lm_head_flops=lm_head_flops(model),
        dense_weight_bytes=(counts.non_expert - counts.lm_head) * dense_bytes
        + counts.lm_head * DTYPE_BYTES["bf16"]
        + (counts.embedding * DTYPE_BYTES["bf16"] if counts.lm_head == 0 else 0.0),
        expert_weight_bytes=expert_bytes(model),
        moe_layers=0 if moe is None else model.num_layers - moe.first_dense_layers,
        num_experts=0 if moe is None else moe.num_experts,
        experts_per_token=0 if moe is None else moe.experts_per_token,
        full_layers=model.count("full"),
        sliding_layers=model.count("sliding"),
        linear_layers=layers_linear,
        window=float(model.sliding_window or np.inf),
        kv_layer_bytes=layer_bytes,
        latent_read_bytes=layer_bytes - indexer_read,
        indexer_read_bytes=indexer_read,
        attn_flops_absorbed=absorbed,
        attn_flops_expanded=expanded,
        upproject_flops=upproject,
        indexer_flops=indexer_flops,
        top_k=top_k,
        linear_flops_per_token=linear_flops * layers_linear,
        linear_state_bytes=linear_state_bytes(model),
        gqa_head_dim=0.0 if model.mla is not None else float(model.head_dim),
    )


@dataclass(frozen=True)
class StepTime:
    """A step's time and where it goes (arrays broadcast like the inputs).

    total = dense + experts + attention + communication + overhead - overlap + host_bound, where
    experts = routing + permutation + grouped GEMMs of the MoE layers and communication includes
    their dispatch and combine."""

    total_s: np.ndarray
    dense_gemm_s: np.ndarray
    expert_gemm_s: np.ndarray
    attention_s: np.ndarray
    communication_s: np.ndarray
    overhead_s: np.ndarray
    compute_bound_s: np.ndarray
    memory_bound_s: np.ndarray
    flops_s: np.ndarray  # the three families' compute times alone, summed
    bytes_s: np.ndarray  # the three families' memory times alone, summed
    packed_attention_s: np.ndarray  # attention when the step is packed to `packed_tokens` (else attention_s)
    #: an eager decode step's wait for its host beyond the device's time (`eager_host_time`), in total_s
    host_bound_s: np.ndarray | float = 0.0
    moe_routing_s: np.ndarray | float = 0.0
    moe_permutation_s: np.ndarray | float = 0.0
    moe_dispatch_s: np.ndarray | float = 0.0
    moe_combine_s: np.ndarray | float = 0.0
    expert_imbalance: np.ndarray | float = 1.0  # the busiest expert-parallel rank's load over the mean
    #: work hidden behind communication by two-batch overlap (its extra launches are in overhead_s)
    overlap_s: np.ndarray | float = 0.0
    micro_batches: np.ndarray | int = 1
    #: a pipeline stage's send of its activations to the next stage, within communication_s
    stage_transfer_s: np.ndarray | float = 0.0

    @property
    def experts_s(self) -> np.ndarray:
        """The MoE layers' work: routing + permutation + grouped GEMMs."""
        return np.asarray(self.moe_routing_s + self.moe_permutation_s + self.expert_gemm_s)

    @property
    def bound(self) -> np.ndarray:
        """Which resource binds: the host where it holds the step back (`host_bound_s` > 0), else the
        largest of compute-bound, memory-bound, comm and overhead time."""
        stack = np.stack(
            np.broadcast_arrays(self.compute_bound_s, self.memory_bound_s, self.communication_s, self.overhead_s)
        )
        names = np.array(["compute", "memory", "communication", "overhead"])
        return np.where(np.asarray(self.host_bound_s) > 0, "host", names[np.argmax(stack, axis=0)])

    def breakdown(self) -> dict[str, float]:
        """Scalar breakdown in seconds (for a scalar step)."""
        return {
            "dense_gemm_s": float(self.dense_gemm_s),
            "expert_gemm_s": float(self.expert_gemm_s),
            "moe_routing_s": float(self.moe_routing_s),
            "moe_permutation_s": float(self.moe_permutation_s),
            "attention_s": float(self.attention_s),
            "communication_s": float(self.communication_s),
            "moe_dispatch_s": float(self.moe_dispatch_s),
            "moe_combine_s": float(self.moe_combine_s),
            "overhead_s": float(self.overhead_s),
            "overlap_s": float(self.overlap_s),
            "stage_transfer_s": float(self.stage_transfer_s),
            "host_bound_s": float(self.host_bound_s),
            "compute_bound_s": float(self.compute_bound_s),
            "memory_bound_s": float(self.memory_bound_s),
            "expert_imbalance": float(self.expert_imbalance),
            "micro_batches": float(self.micro_batches),
        }


def saturating(x: ArrayLike, f_max: float, x_half: float) -> np.ndarray:
    """A kernel's fraction of its roof as its work grows: f_max * x / (x + x_half) (f_max at x_half 0)."""
    x = np.maximum(np.asarray(x, dtype=np.float64), 1e-9)
    return f_max * x / (x + x_half)


def gemm_efficiency(rows: ArrayLike, eff: Efficiency, dtype: ComputeDtype = "bf16") -> np.ndarray:
    """Fraction of the `dtype` peak a dense GEMM with M = `rows` rows reaches: c_max * M / (M + M_half),
    c_max the dtype's plateau (`compute_plateau`: bf16 0.78-0.81 of peak on H100 with cuBLAS, FP8
    0.57-0.77 with DeepGEMM's fine-grained scaling, NVFP4 0.41-0.43 with CUTLASS on B200)."""
    return saturating(rows, compute_plateau(eff, dtype), eff.compute_half_tokens)


def attention_efficiency(thread_blocks: ArrayLike, keys_per_query: ArrayLike, eff: Efficiency) -> np.ndarray:
    """Fraction of bf16 peak an attention kernel reaches: a_max * C / (C + C_half) * K / (K + K_half),
    C = thread blocks (128-row query tiles x heads x sequences on one GPU, at least one tile per head
    and sequence: b * heads * max(n / 128, 1) / tp, smooth in n; too few leave SMs idle),
    K = keys per query (short rows spend their time in the tile's prologue and epilogue)."""
    blocks = saturating(thread_blocks, 1.0, eff.attention_half_ctas)
    keys = saturating(keys_per_query, 1.0, eff.attention_half_keys)
    return eff.attention_compute_fraction * blocks * keys


#: The head dim at which `attention_compute_fraction` is the plateau (the public figures' shape).
REFERENCE_HEAD_DIM = 128.0


def head_dim_factor(head_dim: float, eff: Efficiency) -> float:
    """The attention plateau at head dim D relative to D = 128: [D / (D + D_half)] / [128 / (128 + D_half)].

    Each score costs a fixed softmax (exp, max, rescale) beside its 4·D matmul FLOPs, so a smaller
    head spends more of its time off the tensor cores (FlashAttention-3 on H100: hd64 runs at 0.77
    of hd128, hd256 at 1.04-1.17). 1 for D = 0 (MLA, whose kernels the curve was checked against as
    they are) and for D_half = 0 (the ideal kernel)."""
    if head_dim <= 0 or eff.attention_half_head_dim <= 0:
        return 1.0
    half = eff.attention_half_head_dim
    return (head_dim / (head_dim + half)) / (REFERENCE_HEAD_DIM / (REFERENCE_HEAD_DIM + half))


def split_kv_attention_efficiency(
    query_tiles: ArrayLike, keys_per_query: ArrayLike, new_tokens: ArrayLike, eff: Efficiency
) -> np.ndarray:
    """`attention_efficiency` of a kernel that may split each query's keys across s thread blocks
    (split-KV, FlashDecoding: FlashInfer's and FA3's decode paths, FlashMLA) when its query tiles
    T are too few to fill the GPU. Its curve at s parts is a_max * Ts / (Ts + C_half) *
    (K/s) / (K/s + K_half), highest at s* = sqrt(C_half * K / (K_half * T)); the kernel takes
    s = max(1, s*). Sequences whose new tokens span more than one 128-row tile (prefill) run
    one block per tile (s = 1): prefill kernels parallelize over query tiles instead."""
    tiles = np.maximum(np.asarray(query_tiles, dtype=np.float64), 1e-9)
    keys = np.asarray(keys_per_query, dtype=np.float64)
    best = np.sqrt(eff.attention_half_ctas * keys / (max(eff.attention_half_keys, 1e-9) * tiles))
    decode_shaped = np.asarray(new_tokens, dtype=np.float64) <= ATTENTION_TILE_ROWS
    parts = np.where(decode_shaped, np.maximum(best, 1.0), 1.0)
    return attention_efficiency(tiles * parts, keys / parts, eff)


def kv_read_efficiency(bytes_per_gpu_layer: ArrayLike, eff: Efficiency) -> np.ndarray:
    """Fraction of HBM bandwidth a paged-KV (or MLA latent) read reaches: k_max * B / (B + B_half),
    B the bytes one GPU reads per layer call (FlashInfer, cuDNN decode: small reads stay far from
    the roof)."""
    return saturating(bytes_per_gpu_layer, eff.kv_memory_fraction, eff.kv_half_bytes)


def two_batch_overlap(work_s: ArrayLike, comm_s: ArrayLike) -> np.ndarray:
    """A step split into two micro-batches whose all-to-all overlaps the other's compute (DeepSeek's
    and SGLang's two-batch overlap): max(W, C) + min(W, C) / 2, the pipeline's fill and drain
    leaving half of the shorter one exposed (W alone when there is no communication)."""
    w = np.asarray(work_s, dtype=np.float64)
    c = np.asarray(comm_s, dtype=np.float64)
    return np.maximum(w, c) + np.minimum(w, c) / 2.0


def dp_rank_share(batch: ArrayLike, ranks: int, context_cv: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(rows, attention) of the busiest data-parallel-attention rank over the mean rank's.

    b sequences spread over r ranks leave ceil(b / r) on the busiest: rows share
    s = ceil(b / r) * r / b (r for a lone sequence: one rank does all of its dense work and
    attention). Unequal lengths add to its attention: the sum of k = ceil(b / r) contexts with
    coefficient of variation v has its largest of r ranks about v * sqrt(2 ln r / k) above the
    mean, so attention share = s * (1 + v * sqrt(2 ln r / k)). Both 1 on one rank."""
    b = np.maximum(np.asarray(batch, dtype=np.float64), 1.0)
    if ranks <= 1:
        ones = np.ones_like(b)
        return ones, ones
    per_rank = np.ceil(b / ranks - 1e-9)
    rows = per_rank * ranks / b
    spread = context_cv * np.sqrt(2.0 * math.log(ranks) / per_rank)
    return rows, rows * (1.0 + spread)


def kernels_launched(model: ModelArchitecture) -> int:
    """Kernels one step launches: STEP_KERNELS plus, per layer, its attention block's (by kind: GQA,
    MLA with or without the indexer, linear attention) and its FFN's (dense, or MoE with its shared
    expert)."""
    if model.mla is not None:
        full = MLA_ATTENTION_KERNELS + (INDEXER_KERNELS if model.indexer is not None else 0)
    else:
        full = GQA_ATTENTION_KERNELS + (1 if model.qk_norm else 0)
    linear = model.count("linear")
    attention = linear * LINEAR_ATTENTION_KERNELS + (model.num_layers - linear) * full
    moe = model.moe
    moe_layers = 0 if moe is None else model.num_layers - moe.first_dense_layers
    shared = moe is not None and moe.shared_expert_intermediate_size > 0
    moe_kernels = MOE_FFN_KERNELS + (SHARED_EXPERT_KERNELS if shared else 0)
    ffn = moe_layers * moe_kernels + (model.num_layers - moe_layers) * DENSE_FFN_KERNELS
    return STEP_KERNELS + attention + ffn


def collectives_launched(instance: Instance) -> int:
    """Collectives one step launches: two all-reduces per layer under tensor parallelism, a
    dispatch and a combine per MoE layer under data-parallel attention, none on one GPU."""
    if instance.tp == 1:
        return 0
    if instance.uses_dp_attention:
        return 2 * instance.constants.moe_layers
    return 2 * instance.model.num_layers


def eager_host_time(instance: Instance) -> float:
    """The host's time to launch one step without a CUDA graph: step_overhead + launch_gap *
    (kernels + collectives). An eagerly launched step takes at least this long: its kernels
    cannot run before the host issues them (the host runs ahead only while kernels outlast the gap)."""
    return instance.efficiency.step_overhead_s + launch_s(instance)


def launch_s(instance: Instance) -> float:
    """The host's time to issue one step's kernels and collectives: launch_gap * (kernels + collectives)."""
    return instance.efficiency.launch_gap_s * (kernels_launched(instance.model) + collectives_launched(instance))


def moe_run(instance: Instance) -> MoeRun:
    """How `instance` runs its MoE layers (`pddplan.perf.moe.MoeRun`): over its tp ranks, experts
    expert-parallel or sliced as the instance's layout says, attention data-parallel or not."""
    hardware, model = instance.hardware, instance.model
    return MoeRun(
        model=model,
        hardware=hardware,
        eff=instance.efficiency,
        ranks=instance.tp,
        expert_parallel=instance.uses_ep,
        dp_attention=instance.uses_dp_attention,
        gemm_dtype=hardware.gemm_dtype(model.expert_dtype),
        expert_bytes=instance.constants.expert_weight_bytes,
    )


def step_time(
    instance: Instance,
    new_tokens: ArrayLike,
    context_tokens: ArrayLike,
    batch: ArrayLike = 1,
    packed_tokens: ArrayLike | None = None,
    decode: bool = False,
    balanced: bool = False,
) -> StepTime:
    """Time of one engine step: `batch` sequences each adding `new_tokens` on `context_tokens`.

    `decode`: the step is a decode step, which the engine runs as a captured CUDA graph up to the
    instance's `cuda_graph_max_batch` and eagerly above it: an eager step takes
    max(its time, `eager_host_time`), the difference reported as `host_bound_s`. Prefill and extend
    steps launch eagerly, but their kernels are long enough to keep ahead of the host and are not
    bounded so. Decode steps dispatch and combine with the low-latency all-to-all kernels, the
    others with the normal ones (`perf.moe`).

    `packed_tokens`: the step's new tokens in all when these sequences share it with others
    (chunked prefill packs requests): `packed_attention_s` is then their attention with the
    kernel's thread blocks counting every request's query tiles, heads * max(packed / 128, 1) / tp,
    not only these sequences' (the step's total still charges their own blocks' attention), and
    their share of an instance whose data-parallel ranks are all busy.

    `balanced`: the step's tokens come from many sequences spread evenly over data-parallel ranks
    (a packed chunked-prefill step), whatever `batch` says; otherwise the busiest rank carries
    ceil(b / tp) of the b sequences (`dp_rank_share`).

    With pipeline stages (`Instance.pp` > 1) this is one stage's step on these tokens
    (`pipeline_stage`): how long each stage is busy with them, the pace at which the pipeline
    takes micro-batches."""
    if instance.pp > 1:
        whole = step_time(instance.one_stage(), new_tokens, context_tokens, batch, packed_tokens, decode, balanced)
        tokens = np.asarray(new_tokens, dtype=np.float64) * np.asarray(batch, dtype=np.float64)
        eager = instance.runs_eagerly(batch) if decode else False
        return pipeline_stage(instance, whole, tokens, eager)
    k = instance.constants
    hw = instance.hardware
    eff = instance.efficiency
    model = instance.model
    tp = instance.tp
    dp = instance.uses_dp_attention
    n = np.asarray(new_tokens, dtype=np.float64)
    c = np.asarray(context_tokens, dtype=np.float64)
    b = np.asarray(batch, dtype=np.float64)
    tokens = n * b
    if dp and not balanced:
        rows_share, attention_share = dp_rank_share(b, tp, instance.context_cv)
    else:
        rows_share = attention_share = np.ones_like(b)

    ranks = tp if dp else 1  # data-parallel attention: each rank runs its own sequences' rows
    dense_dtype = hw.gemm_dtype(model.weight_dtype)
    dense_peak = tp * hw.peak_flops_per_s(dense_dtype)
    rows = tokens / ranks * rows_share
    dense_compute = (
        k.dense_flops_per_token * tokens * rows_share / (dense_peak * gemm_efficiency(rows, eff, dense_dtype))
    )
    bf16_peak = tp * hw.peak_flops_per_s("bf16")
    head_rows = b / ranks * rows_share
    dense_compute = dense_compute + k.lm_head_flops * b * rows_share / (bf16_peak * gemm_efficiency(head_rows, eff))
    bw = tp * hw.hbm_bytes_per_s * streaming_fraction(eff, model.weight_dtype, eff.memory_fraction)
    replicas = tp if dp else 1
    dense_memory = np.broadcast_to(k.dense_weight_bytes * replicas / bw, np.shape(dense_compute))
    dense = np.maximum(dense_compute, dense_memory)

    moe = moe_step(moe_run(instance), tokens, decode, sender_share=rows_share)
    experts = moe.work_s

    attention_flops, attn_read = _attention(instance, n, c, b)
    thread_blocks = _query_tiles(instance, n, b)
    heads = head_dim_factor(k.gqa_head_dim, eff)

    def efficiency_at(keys_per_query: np.ndarray) -> np.ndarray:
        return np.minimum(split_kv_attention_efficiency(thread_blocks, keys_per_query, n, eff) * heads, 1.0)

    gemm_rows = np.maximum((c + n) * b / ranks, 1.0)
    upproject_s = attention_flops.upproject / (dense_peak * gemm_efficiency(gemm_rows, eff, dense_dtype))
    attn_compute_mean = attention_flops.kernel_time(efficiency_at, bf16_peak, upproject_s)
    attn_compute = attn_compute_mean * attention_share
    layers_read = max(k.full_layers + k.sliding_layers + k.linear_layers, 1)
    read_per_gpu_layer = attn_read / (tp * layers_read) * attention_share
    attn_memory_mean = attn_read / (tp * hw.hbm_bytes_per_s * kv_read_efficiency(read_per_gpu_layer, eff))
    attn_memory = attn_memory_mean * attention_share
    attention = np.maximum(attn_compute, attn_memory)
    packed_attention = np.maximum(attn_compute_mean, attn_memory_mean)
    if packed_tokens is not None:
        packed_blocks = np.maximum(thread_blocks, _query_tiles(instance, np.asarray(packed_tokens)))

        def packed_efficiency_at(keys_per_query: np.ndarray) -> np.ndarray:
            packed = np.minimum(attention_efficiency(packed_blocks, keys_per_query, eff) * heads, 1.0)
            return np.maximum(packed, efficiency_at(keys_per_query))

        packed_compute = attention_flops.kernel_time(packed_efficiency_at, bf16_peak, upproject_s)
        packed_attention = np.maximum(packed_compute, attn_memory_mean)

    comm = _communication(instance, tokens) + moe.communication_s
    kernels = kernels_launched(model)
    per_step = eff.step_overhead_s + eff.kernel_floor_s * kernels
    overhead = np.broadcast_to(np.asarray(per_step, dtype=np.float64), np.shape(tokens))
    work = dense + experts + attention
    total = work + comm + overhead
    overlap: np.ndarray | float = 0.0
    micro_batches: np.ndarray | int = 1
    if dp and tp > 1:
        # A second micro-batch launches every kernel again and waits for its own all-to-alls.
        extra = eff.kernel_floor_s * kernels + moe.latency_s
        hidden = work + comm - two_batch_overlap(work, comm)
        splittable = tokens >= 2.0
        if instance.two_batch_overlap is None:
            use = splittable & (hidden > extra)
        else:
            use = splittable & instance.two_batch_overlap
        overlap = np.where(use, hidden, 0.0)
        overhead = overhead + np.where(use, extra, 0.0)
        total = work + comm + overhead - overlap
        micro_batches = np.where(use, 2, 1)
    host_bound: np.ndarray | float = 0.0
    if decode and instance.cuda_graph_max_batch is not None:
        host_bound = np.where(instance.runs_eagerly(b), np.maximum(eager_host_time(instance) - total, 0.0), 0.0)
        total = total + host_bound

    compute_bound = (
        np.where(dense_compute >= dense_memory, dense, 0.0)
        + np.where(moe.gemm_compute_s >= moe.gemm_memory_s, moe.gemm_s, 0.0)
        + np.where(attn_compute >= attn_memory, attention, 0.0)
    )
    memory_bound = dense + experts + attention - compute_bound
    return StepTime(
        total_s=total,
        dense_gemm_s=dense,
        expert_gemm_s=moe.gemm_s,
        attention_s=attention,
        communication_s=comm,
        overhead_s=overhead,
        compute_bound_s=compute_bound,
        memory_bound_s=memory_bound,
        flops_s=dense_compute + moe.gemm_compute_s + attn_compute,
        bytes_s=dense_memory + moe.gemm_memory_s + moe.routing_s + moe.permutation_s + attn_memory,
        packed_attention_s=packed_attention,
        host_bound_s=host_bound,
        moe_routing_s=moe.routing_s,
        moe_permutation_s=moe.permutation_s,
        moe_dispatch_s=moe.dispatch_s,
        moe_combine_s=moe.combine_s,
        expert_imbalance=moe.imbalance,
        overlap_s=overlap,
        micro_batches=micro_batches,
    )


#: what a pipeline stage sends the next per token: the hidden states and the residual stream
#: (SGLang's PPProxyTensors and vLLM's IntermediateTensors carry both), bf16
STAGE_TENSORS = 2


def stage_transfer_s(instance: Instance, tokens: ArrayLike) -> np.ndarray:
    """One pipeline stage's send of `tokens` tokens to the next stage, by the rule of the
    tensor-parallel collectives (`_communication`): alpha + 2 N d 2 B / (tp e link) (hidden states
    and residual), each of the stage's tp ranks sending its share over its own link; the scale-up
    fabric and its latency when the instance's tp x pp GPUs fit one scale-up domain, the NIC and
    `nic_latency_s` otherwise (a stage boundary then crosses servers somewhere, and the slowest
    stage sets the pipeline's pace)."""
    latency, link = collective_link(instance, instance.gpus)
    message = STAGE_TENSORS * np.asarray(tokens, dtype=np.float64) * instance.model.hidden_size * ACTIVATION_BYTES
    return latency + message / (instance.tp * link)


#: the parts of a step that scale with the layers it runs (`pipeline_stage` cuts them to a stage's)
PER_LAYER_PARTS = (
    "dense_gemm_s",
    "expert_gemm_s",
    "attention_s",
    "compute_bound_s",
    "memory_bound_s",
    "flops_s",
    "bytes_s",
    "packed_attention_s",
    "moe_routing_s",
    "moe_permutation_s",
    "moe_dispatch_s",
    "moe_combine_s",
    "overlap_s",
)


def pipeline_stage(instance: Instance, whole: StepTime, tokens: ArrayLike, eager: ArrayLike = False) -> StepTime:
    """The slowest stage's step of a `pp`-stage pipeline, from `whole`, the same step with every
    layer on one stage's tp GPUs: its per-layer parts (GEMMs, attention, collectives, kernel
    floors) times its share of the layers, s = ceil(L / pp) / L (`Instance.stage_share`), plus its
    send to the next stage (`stage_transfer_s`), plus the engine's per-step overhead once (the
    scheduler forms each micro-batch once, not per stage):

        device = (whole - o_step - host_whole) s + x(T) + o_step,

    and where the step launches eagerly (`eager`) at least its host's time to issue the stage's
    kernels, o_step + launch_gap (launches) s (`eager_host_time`, cut to the stage): total =
    max(device, that). The embedding and LM head are spread with the layers."""
    eff = instance.efficiency
    step_overhead = eff.step_overhead_s
    fraction = instance.stage_share
    send = stage_transfer_s(instance, tokens)

    def share(value: np.ndarray | float) -> np.ndarray:
        return np.asarray(value, dtype=np.float64) * fraction

    device = (whole.total_s - step_overhead - np.asarray(whole.host_bound_s, dtype=np.float64)) * fraction
    device = device + send + step_overhead
    host_s = step_overhead + launch_s(instance) * fraction
    host = np.where(np.asarray(eager, dtype=bool), np.maximum(host_s - device, 0.0), 0.0)
    return replace(
        whole,
        **{name: share(getattr(whole, name)) for name in PER_LAYER_PARTS},
        total_s=device + host,
        communication_s=share(whole.communication_s) + send,
        overhead_s=(whole.overhead_s - step_overhead) * fraction + step_overhead,
        host_bound_s=host,
        stage_transfer_s=send,
    )


#: Kernels that run at their datasheet roofs: what `floor_time` prices a step at. Every efficiency
#: (a `*_fraction`) is 1, routing no more skewed than uniform, every half-saturation point, latency
#: and overhead 0: built from the fields so that a factor added to `Efficiency` cannot be left out.
IDEAL_EFFICIENCY = Efficiency(
    **{
        name: 1.0 if name.endswith("_fraction") or name == "expert_skew" else 0.0
        for name in Efficiency.model_fields
        if name != "source"
    },
    source="ideal: every kernel at its datasheet roof",
)


def floor_time(
    instance: Instance, new_tokens: ArrayLike, context_tokens: ArrayLike, batch: ArrayLike = 1
) -> np.ndarray:
    """The step's pure floor: max(all its FLOPs at peak, all its bytes at peak HBM bandwidth), no
    collectives or overheads: max(sum_f FLOPs_f / F, sum_f bytes_f / BW) over the kernel families."""
    ideal = Instance(
        model=instance.model,
        hardware=instance.hardware,
        tp=instance.tp,
        expert_parallel=instance.expert_parallel,
        efficiency_override=IDEAL_EFFICIENCY,
        tp_attention=instance.tp_attention,
        two_batch_overlap=False,
        pp=instance.pp,
    )
    step = step_time(ideal, new_tokens, context_tokens, batch)
    return np.maximum(step.flops_s, step.bytes_s)


def _query_tiles(instance: Instance, new_tokens: ArrayLike, batch: ArrayLike = 1.0) -> np.ndarray:
    """Attention thread blocks `batch` sequences of `new_tokens` queries give each GPU:
    b * heads * max(n / 128, 1) / tp (128-row query tiles, at least one per head and sequence)."""
    rows = np.maximum(np.asarray(new_tokens, dtype=np.float64) / ATTENTION_TILE_ROWS, 1.0)
    return np.asarray(batch, dtype=np.float64) * instance.model.num_heads * rows / instance.tp


def keys_seen(cached: ArrayLike, new: ArrayLike, cap: float) -> np.ndarray:
    """Query-key pairs of n new tokens on c cached ones when a query sees at most `cap` keys:
    sum over i < n of min(c + i + 1, cap) = m*c + m*(m + 1)/2 + (n - m)*cap', with cap' =
    min(cap, c + n) and m = clip(cap' - c, 0, n) queries below the cap (n*c + n*(n + 1)/2 uncapped)."""
    c = np.asarray(cached, dtype=np.float64)
    n = np.asarray(new, dtype=np.float64)
    limit = np.minimum(cap, c + n)
    below = np.clip(limit - c, 0.0, n)
    return below * c + below * (below + 1.0) / 2.0 + (n - below) * limit


@dataclass(frozen=True)
class AttentionFlops:
    """A step's attention FLOPs by layer kind, each with the keys its queries see (the kernel's
    efficiency depends on them, `attention_efficiency`).

    Full layers run MLA either absorbed (the latent read as one shared key/value head of kv_lora +
    rope dims: FlashMLA's MQA mode) or expanded (the context first up-projected to per-head keys
    and values by a GEMM, `upproject` FLOPs, then ordinary attention over head dims nope + rope and
    v: MHA mode); other attention has one form (upproject 0). `others` holds the remaining kinds
    (sliding-window layers, the sparse indexer, linear attention) as (FLOPs, keys per query)."""

    absorbed: np.ndarray
    expanded: np.ndarray
    upproject: np.ndarray
    keys_per_query: np.ndarray
    others: tuple[tuple[np.ndarray, np.ndarray], ...]

    def kernel_time(
        self, efficiency_at: Callable[[np.ndarray], np.ndarray], peak_flops_per_s: float, upproject_s: np.ndarray
    ) -> np.ndarray:
        """Sum over kinds of F_kind / (P e(K_kind)), the full layers in the faster form:
        min(absorbed / (P e(K)), expanded / (P e(K)) + the up-projection's GEMM time). Each kind at
        its own keys per query, so a longer context never raises the efficiency of a layer whose
        window it does not reach."""
        rate = peak_flops_per_s * efficiency_at(self.keys_per_query)
        time = np.minimum(self.absorbed / rate, self.expanded / rate + upproject_s)
        for flops, keys in self.others:
            time = time + flops / (peak_flops_per_s * efficiency_at(keys))
        return time


#: Tokens per chunk of the chunked linear-attention kernels (flash-linear-attention's
#: chunk_gated_delta_rule, which SGLang and vLLM run for Qwen3-Next: BT = 64): the keys a query
#: meets inside its chunk, whatever the context.
LINEAR_ATTENTION_CHUNK_TOKENS = 64.0


def _attention(instance: Instance, n: np.ndarray, c: np.ndarray, b: np.ndarray) -> tuple[AttentionFlops, np.ndarray]:
    """(attention FLOPs by layer kind with their keys per new query, KV bytes read) of a step,
    before rates.

    A query at position i of the new tokens sees c + i + 1 tokens (causal), at most the window
    (sliding layers) or top_k (sparse attention; its indexer scores every token): `keys_seen`.
    A linear layer's query meets its chunk (`LINEAR_ATTENTION_CHUNK_TOKENS`) and the state.
    KV is read once per step per sequence: c + n tokens per layer (capped the same way), by every
    rank that keeps a copy (`kv_replication`: a replicated GQA head or MLA latent is read once per
    copy), and linear layers read and write their state.
    """
    k = instance.constants
    total_ctx = c + n
    queries = np.maximum(n, 1.0)
    full_pairs = keys_seen(c, n, k.top_k)
    others: list[tuple[np.ndarray, np.ndarray]] = []
    if k.sliding_layers:
        sliding_pairs = keys_seen(c, n, k.window)
        others.append((b * k.sliding_layers * k.attn_flops_expanded * sliding_pairs, sliding_pairs / queries))
    if k.indexer_flops:
        all_pairs = keys_seen(c, n, np.inf)
        bf16_over_fp8 = instance.hardware.peak_flops_per_s("bf16") / instance.hardware.peak_flops_per_s("fp8")
        others.append((b * k.full_layers * k.indexer_flops * all_pairs * bf16_over_fp8, all_pairs / queries))
    if k.linear_flops_per_token:
        others.append((b * k.linear_flops_per_token * n, np.asarray(LINEAR_ATTENTION_CHUNK_TOKENS)))
    flops = AttentionFlops(
        absorbed=b * (k.full_layers * k.attn_flops_absorbed * full_pairs),
        expanded=b * (k.full_layers * k.attn_flops_expanded * full_pairs),
        upproject=b * k.full_layers * k.upproject_flops * np.minimum(total_ctx, k.top_k),
        keys_per_query=full_pairs / queries,
        others=tuple(others),
    )
    full_read = k.full_layers * (
        k.latent_read_bytes * np.minimum(total_ctx, k.top_k) + k.indexer_read_bytes * total_ctx
    )
    sliding_read = k.sliding_layers * k.kv_layer_bytes * np.minimum(total_ctx, k.window)
    copies = kv_replication(instance.model, instance.tp, instance.uses_dp_attention)
    read = b * ((full_read + sliding_read) * copies + 2.0 * k.linear_state_bytes)
    return flops, read


def collective_link(instance: Instance, gpus: int) -> tuple[float, float]:
    """(latency alpha in s, effective bytes/s e * link) of a collective among `gpus` GPUs: the
    scale-up fabric and `collective_latency_s` when they fit one scale-up domain, the NIC and
    `nic_latency_s` otherwise."""
    hw, eff = instance.hardware, instance.efficiency
    if gpus <= hw.scale_up_domain:
        return eff.collective_latency_s, hw.scale_up_bytes_per_s * eff.scale_up_fraction
    return eff.nic_latency_s, hw.nic_bytes_per_s * eff.scale_up_fraction


def _communication(instance: Instance, tokens: np.ndarray) -> np.ndarray:
    """The tensor-parallel all-reduces of a step, each alpha + bytes / (e * link) (the Hockney model;
    nccl-tests and custom all-reduce figures set alpha and e), alpha the scale-up latency
    `collective_latency_s` inside a domain and `nic_latency_s` across domains.

    TP: two all-reduces per layer of N * d bf16 activations, each
        alpha + 2 (tp-1)/tp * N * d * 2 B / link (a ring's bytes; small messages take one-shot
        or two-shot kernels whose time is the latency), over the scale-up fabric when the
        instance fits one domain, the NIC otherwise.
    TP attention + EP experts: as TP. After tensor-parallel attention every rank holds every token,
        runs the routed copies that land on its own experts, and the second all-reduce sums them.
    Data-parallel attention has none: its dispatch and combine are the MoE layers' (`perf.moe`).
    """
    tp = instance.tp
    if tp == 1 or instance.uses_dp_attention:
        return np.zeros_like(tokens)
    model = instance.model
    latency, link = collective_link(instance, tp)
    message = tokens * model.hidden_size * ACTIVATION_BYTES
    all_reduce = latency + 2.0 * (tp - 1) / tp * message / link
    return 2.0 * model.num_layers * all_reduce


@dataclass(frozen=True)
class PrefillCost:
    """A prefill's engine cost, apart from the request overhead (arrays broadcast like the inputs).

    `alone_s`: the engine time of the request's chunks run alone, back to back (its latency on an
    idle instance). `attention_s`: the attention part of that time (the kernel's thread blocks are
    the request's own tiles). `packed_attention_s`: its attention in steps packed full (C new
    tokens in all: the thread blocks count every packed request's tiles, so short pieces run at
    the efficiency of a full chunk); attention belongs to the request whatever it shares a step
    with. `batched_s`: the engine time it occupies when chunked prefill
    packs it with other requests into full steps of C tokens: n / C * T_lin(C) + attention, where
    T_lin(C) = step(C tokens) - its attention is the step's token-proportional and fixed part (weight
    reads, GEMMs, collectives, overheads), shared in proportion to tokens; at most `alone_s`.

    Under data-parallel attention (r = `Instance.attention_ranks` > 1) a request's chunks run on one
    rank, each up to the chunk budget, while the other ranks run other requests' chunks in the same
    lockstep steps: `loaded_s` is its chunks' time when every rank is busy, sum_j L_r(size_j) +
    its attention, L_k(T) the step without attention when k ranks carry T tokens each
    (`rank_linear_step_s`), and `batched_s` = `loaded_s` / r, its share of the instance; `chunk_s`
    (a last axis over the chunks, 0 past a request's last) each chunk's step alone, which the
    lockstep stretches to the longest piece any rank runs beside it. Without data-parallel
    attention `loaded_s` is `alone_s` and `chunk_s` the whole alone time.

    With pipeline stages (pp > 1) every time above is the first stage's, the pace at which the
    pipeline takes chunks, and a request's chunks follow one another through the stages (SGLang's
    chunked pipeline): its last chunk leaves the last stage `fill_s` = (pp - 1) max_j s_j after it
    leaves the first (a proportionate flow shop's makespan is sum_j s_j + (pp - 1) max_j s_j), a
    latency the request waits and the first stage does not (0 without stages).
    """

    alone_s: np.ndarray
    attention_s: np.ndarray
    packed_attention_s: np.ndarray
    batched_s: np.ndarray
    loaded_s: np.ndarray
    chunk_s: np.ndarray
    fill_s: np.ndarray


#: the fields of `Instance` its key holds as they are (the model is keyed whole, the hardware by its
#: content, the override through the efficiency it gives)
_SCALAR_FIELDS = tuple(f.name for f in fields(Instance) if f.name not in ("model", "hardware", "efficiency_override"))


def _instance_key(instance: Instance) -> Hashable:
    """Every field of `instance` that sets a step's time, by content: its efficiency too, which an
    override changes and `Instance` equality ignores; the hardware profile by its JSON."""
    return (
        instance.model,
        json_by_identity(instance.hardware),
        instance.efficiency,
        tuple(getattr(instance, name) for name in _SCALAR_FIELDS),
    )


#: the step times the optimizer and the evaluator ask again and again on the same instance kinds,
#: built anew each time (the day's robust purchase: 620 prefill costs of 32 distinct, 2,433 decode
#: steps of 34), kept by the instance's and the arguments' content (`pddplan.support.kept`)
kept_by_instance = kept_by_content(_instance_key)


@kept_by_instance
def linear_step_s(instance: Instance, tokens: ArrayLike) -> np.ndarray:
    """T_lin(T): a step of T new tokens without its attention (weights, GEMMs, collectives, overheads).

    T_lin(T) = step(T tokens, no context).total - its attention part. Under expert parallelism the
    step overlaps its all-to-all with the work (`two_batch_overlap`), so the difference is exact only when
    the work binds; attention is then charged on top. Kept by content (`kept_by_instance`): the
    array returned is read-only.
    """
    step = step_time(instance, np.maximum(np.asarray(tokens, dtype=np.float64), 1.0), 0.0, 1.0, balanced=True)
    return np.maximum(step.total_s - step.attention_s, 0.0)


def rank_linear_step_s(instance: Instance, busy_ranks: ArrayLike, tokens: ArrayLike) -> np.ndarray:
    """L_k(T): a lockstep step without its attention when k of the instance's data-parallel ranks
    each carry T new tokens of one sequence (k <= tp): each rank's dense layers on its T rows, the
    experts on k T tokens. L_1 is a lone sequence's step; without data-parallel attention it is the
    step of T tokens whatever k."""
    k = np.asarray(busy_ranks, dtype=np.float64)
    t = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
    if instance.attention_ranks == 1:
        k = np.ones_like(k)
    step = step_time(instance, t, 0.0, k)
    return np.maximum(step.total_s - step.attention_s, 0.0)


@kept_by_instance
def prefill_cost(
    instance: Instance, new_tokens: ArrayLike, cached_tokens: ArrayLike, chunk_tokens: int | None
) -> PrefillCost:
    """The engine cost of prefilling `new_tokens` on `cached_tokens`, chunked by `chunk_tokens`.

    Chunk j (0-based) holds min(C, n - j*C) tokens on a context of c + j*C; the last, the tail
    chunk, is smaller: alone it pays a whole step's weight reads and overhead for few tokens, packed
    with other requests (`PrefillCost.batched_s`) it pays its share. Without a chunk size the
    prefill is one step (and packs with nothing). Zero new tokens cost nothing.

    Kept by content (`kept_by_instance`): the arrays returned are read-only.
    """
    n = np.asarray(new_tokens, dtype=np.float64)
    c = np.asarray(cached_tokens, dtype=np.float64)
    n, c = np.broadcast_arrays(n, c)
    if chunk_tokens is None and instance.attention_ranks > 1:  # one chunk each, beside the other ranks'
        chunk_tokens = max(int(np.max(n, initial=1.0)), 1)
    drain = instance.pp - 1  # stages a request's last chunk still crosses after the first
    if chunk_tokens is None:
        step = step_time(instance, np.maximum(n, 1.0), c)
        alone = np.where(n > 0, step.total_s, 0.0)
        attention = np.where(n > 0, step.attention_s, 0.0)
        return PrefillCost(
            alone_s=alone,
            attention_s=attention,
            packed_attention_s=attention,
            batched_s=alone,
            loaded_s=alone,
            chunk_s=alone[..., None],
            fill_s=drain * alone,
        )
    ranks = instance.attention_ranks
    alone = np.zeros(n.shape)
    longest = np.zeros(n.shape)
    attention = np.zeros(n.shape)
    packed_attention = np.zeros(n.shape)
    # every chunk j of every request in one step_time call, along a leading chunk axis
    starts = np.arange(int(np.ceil(n / chunk_tokens).max(initial=0))).reshape(-1, *([1] * n.ndim)) * chunk_tokens
    size_j = np.clip(n - starts, 0.0, chunk_tokens)
    live_j = size_j > 0
    steps = step_time(instance, np.where(live_j, size_j, 1.0), c + starts, packed_tokens=chunk_tokens)
    total_j = np.where(live_j, steps.total_s, 0.0)
    attention_j = np.where(live_j, steps.attention_s, 0.0)
    packed_attention_j = np.where(live_j, steps.packed_attention_s, 0.0)
    for j in range(len(starts)):  # summed chunk by chunk, in order (the floats of a running sum)
        alone = alone + total_j[j]
        longest = np.maximum(longest, total_j[j])
        attention = attention + attention_j[j]
        packed_attention = packed_attention + packed_attention_j[j]
    if ranks > 1:
        # sum_j L_r(size_j) - L_1(size_j): what busy ranks add, every chunk in one call
        if not len(starts):
            size_j = np.zeros((1, *n.shape))
        lone_and_full = rank_linear_step_s(instance, np.array([1.0, ranks]).reshape(2, *([1] * size_j.ndim)), size_j)
        loading = np.where(size_j > 0, lone_and_full[1] - lone_and_full[0], 0.0).sum(axis=0)
        loaded = np.where(n > 0, alone + loading, 0.0)
        return PrefillCost(
            alone_s=alone,
            attention_s=attention,
            packed_attention_s=attention,
            batched_s=loaded / ranks,
            loaded_s=loaded,
            chunk_s=np.moveaxis(total_j, 0, -1) if len(starts) else np.zeros((*n.shape, 1)),
            fill_s=np.zeros(n.shape),  # no pipeline stages under data-parallel attention (`Instance`)
        )
    shared = n / chunk_tokens * float(linear_step_s(instance, chunk_tokens)) + packed_attention
    batched = np.where(n > 0, np.minimum(shared, alone), 0.0)
    return PrefillCost(
        alone_s=alone,
        attention_s=attention,
        packed_attention_s=packed_attention,
        batched_s=batched,
        loaded_s=alone,
        chunk_s=alone[..., None],
        fill_s=drain * longest,
    )


def prefill_time(
    instance: Instance,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike = 0,
    chunk_tokens: int | None = None,
) -> np.ndarray:
    """Time to prefill `new_tokens` on top of `cached_tokens` alone, in chunks of `chunk_tokens`:
    the engine time (`prefill_cost(...).alone_s`, plus the pipeline's `fill_s` with stages) plus
    the request's `request_overhead_s` once (scheduling, tokenization, returning the first token).
    Zero new tokens take no time.
    """
    n = np.asarray(new_tokens, dtype=np.float64)
    cost = prefill_cost(instance, n, cached_tokens, chunk_tokens)
    alone = cost.alone_s
    return np.where(alone > 0, alone + cost.fill_s + instance.efficiency.request_overhead_s, 0.0)


@kept_by_instance
def decode_step_time(instance: Instance, batch: ArrayLike, context_tokens: ArrayLike) -> np.ndarray:
    """Time of one decode step for `batch` sequences of mean context `context_tokens`, per token each
    sequence gains. With multi-token prediction (`instance.mtp`, K drafts accepted at rate a) a step
    verifies K + 1 tokens per sequence and runs the draft layer K times (each about one layer of
    the model: a 1-token step / L), and gains `Mtp.tokens_per_step` tokens:
    (step(K + 1 tokens) + K * step(1 token) / L) / (1 + a + ... + a^K).

    With pipeline stages (pp > 1) the batch runs as pp micro-batches of B / pp sequences (at least
    one: fewer leave stages idle, the pipeline's bubble), each crossing every stage once per step:
    tau(B) = pp * stage(max(B / pp, 1)) (`pipeline_stage`). Kept by content (`kept_by_instance`):
    the array returned is read-only."""
    mtp = instance.mtp
    pp = instance.pp
    micro = np.maximum(np.asarray(batch, dtype=np.float64) / pp, 1.0) if pp > 1 else batch
    if mtp is None or mtp.draft_tokens == 0:
        return pp * step_time(instance, 1.0, context_tokens, micro, decode=True).total_s
    verify = step_time(instance, float(mtp.draft_tokens + 1), context_tokens, micro, decode=True).total_s
    one_token = step_time(instance, 1.0, context_tokens, micro, decode=True).total_s
    draft = mtp.draft_tokens * one_token / instance.model.num_layers
    return pp * (verify + draft) / mtp.tokens_per_step()


@kept_by_instance
def extend_time(instance: Instance, tokens: ArrayLike, context_tokens: ArrayLike) -> np.ndarray:
    """Time of one extend step: recompute `tokens` tokens' KV on a context (token-ID handoff);
    with pipeline stages the step crosses all pp of them: pp * stage(tokens). Kept by content
    (`kept_by_instance`), as `decode_step_time`: the array returned is read-only. On one context,
    each distinct token count is stepped once (a handoff's rounds ask thousands of (class, line
    state) counts, an eighth of them distinct)."""
    t = np.asarray(tokens, dtype=np.float64)
    if np.ndim(context_tokens) == 0 and t.size > 1:
        distinct, inverse = np.unique(t, return_inverse=True)
        if len(distinct) < t.size:
            once = instance.pp * step_time(instance, distinct, context_tokens, 1.0).total_s
            return once[inverse.reshape(-1)].reshape(t.shape)
    return instance.pp * step_time(instance, t, context_tokens, 1.0).total_s
