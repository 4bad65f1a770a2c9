"""One step's mixture-of-experts layers, built from their parts (docs/model.md, "MoE layers").

Per MoE layer and per rank, for a step of N new tokens on an instance of `tp` ranks:

  routing      the router's logits (fp32, T_r x E) written and read by top-k:
               8 * T_r * E bytes at the glue bandwidth; its GEMM is in the dense part
  permutation  per routed row: its activation (SiLU x gate: read 2 w_r, write w_r, bf16; quantized
               again for fp8/fp4 GEMMs: read w_r, write w_r at the GEMM's element size) and its
               output row (d values, 2 B each) written by the down GEMM; unless the combine
               all-to-all reads that row itself (DeepEP, under data-parallel attention), the
               weighted sum reads it back (2 d B per row) and writes one row per token (2 d B). The
               gather into expert order is fused into the up GEMM's loads (Triton fused MoE) or done
               by the dispatch (DeepEP). Bytes / (HBM * `glue_memory_fraction`)
  grouped GEMM max(FLOPs / (peak * e(R)), expert bytes read / (HBM * e_bw)), R rows per expert
  dispatch,    under data-parallel attention, two all-to-alls per layer (fp8 out, bf16 back):
  combine      latency + bytes / (link * e) of the busiest sender or receiver; decode runs the
               low-latency kernels (one copy per routed expert; `ep_ll_latency_s`,
               `ep_ll_link_fraction`), prefill the normal ones (one copy per destination rank;
               `ep_latency_s`, `ep_link_fraction`)
  imbalance    under expert parallelism the busiest rank sets the step: its share of the rows is
               the uniform-routing floor (`busiest_rank_share`) plus the skew of real routing beyond
               it, `expert_skew` - 1

T_r, the tokens a rank routes, is N / tp under data-parallel attention and N otherwise (tensor-
parallel attention leaves every token on every rank). Rows per rank: N * t under tensor-parallel
experts (each rank runs every routed row on a 1/tp slice of each expert, w_r = w / tp), N * t / tp
times the busiest rank's share under expert parallelism (whole experts, w_r = w). The kernel floors
of these operations are counted with the step's kernels (`roofline.kernels_launched`).
Every function broadcasts over numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pddplan.perf.efficiency import compute_plateau, streaming_fraction
from pddplan.specs.hardware import Efficiency, HardwareProfile
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.precision import ComputeDtype, weight_format

ROUTER_LOGIT_BYTES = 4.0  # fp32 router logits
ACTIVATION_BYTES = 2.0  # bf16 hidden states between kernels
DISPATCH_BYTES = 1.0  # fp8 tokens on the way out (DeepEP, pplx dispatch in fp8)
COMBINE_BYTES = 2.0  # bf16 expert outputs on the way back


@dataclass(frozen=True)
class MoeRun:
    """How an instance runs its MoE layers: the model on `ranks` GPUs of one type, experts split
    whole (`expert_parallel`) or sliced (tensor-parallel experts), attention data-parallel or not;
    `gemm_dtype` the dtype its expert GEMMs run at on this GPU, `expert_bytes` one routed expert's
    bytes in one layer."""

    model: ModelArchitecture
    hardware: HardwareProfile
    eff: Efficiency
    ranks: int
    expert_parallel: bool
    dp_attention: bool
    gemm_dtype: ComputeDtype
    expert_bytes: float


@dataclass(frozen=True)
class MoeStep:
    """The MoE layers of one step on the busiest rank (arrays broadcast like the tokens)."""

    routing_s: np.ndarray
    permutation_s: np.ndarray
    gemm_s: np.ndarray
    gemm_compute_s: np.ndarray
    gemm_memory_s: np.ndarray
    dispatch_s: np.ndarray
    combine_s: np.ndarray
    imbalance: np.ndarray  # the busiest rank's rows over the mean rank's
    latency_s: float = 0.0  # the all-to-alls' latency alone (what a second micro-batch pays again)

    @property
    def work_s(self) -> np.ndarray:
        """Time on the rank's own compute and memory: routing + permutation + grouped GEMMs."""
        return self.routing_s + self.permutation_s + self.gemm_s

    @property
    def communication_s(self) -> np.ndarray:
        return self.dispatch_s + self.combine_s


def experts_touched(tokens: ArrayLike, num_experts: int, experts_per_token: int) -> np.ndarray:
    """Expected distinct experts `tokens` tokens route to, uniformly: E * (1 - (1 - t/E)^N)."""
    n = np.asarray(tokens, dtype=np.float64)
    if num_experts == 0:
        return np.zeros_like(n)
    return num_experts * (1.0 - np.power(1.0 - experts_per_token / num_experts, n))


def busiest_rank_share(touched: ArrayLike, num_experts: int, ranks: int) -> np.ndarray:
    """How many times the mean rank's load the busiest expert-parallel rank carries under uniform
    routing, >= 1.

    Each of `ranks` ranks holds E / ranks experts; each expert is touched with probability
    p = E_hit / E, so a rank's touched experts are Binomial(E / ranks, p), mean mu and deviation
    sigma = sqrt(mu (1 - p)). The step waits for the busiest rank, whose count is about
    mu + sigma sqrt(2 ln ranks) (the expected maximum of `ranks` near-normal draws), at least
    ceil(E_hit / ranks) (some rank holds that many) and at most E / ranks:
    share = clip(mu + sigma sqrt(2 ln ranks), ceil(E_hit / ranks), E / ranks) / mu. Few tokens leave
    some ranks idle and others loaded; many tokens touch every expert (share 1). The skew of real
    routing comes on top (`expert_share`)."""
    hit = np.asarray(touched, dtype=np.float64)
    if ranks <= 1 or num_experts == 0:
        return np.ones_like(hit)
    per_rank = num_experts / ranks
    p = np.clip(hit / num_experts, 1e-12, 1.0)
    mu = per_rank * p
    sigma = np.sqrt(mu * (1.0 - p))
    spread = mu + sigma * math.sqrt(2.0 * math.log(ranks))
    busiest = np.minimum(np.maximum(spread, np.ceil(hit / ranks - 1e-9)), per_rank)
    return np.maximum(busiest / mu, 1.0)


def expert_share(touched: ArrayLike, num_experts: int, ranks: int, skew: float) -> np.ndarray:
    """The busiest expert-parallel rank's load over the mean: the uniform-routing floor plus the
    skew of real routing beyond it, busiest_rank_share + (skew - 1). At many tokens per rank the
    floor is 1 and the share is the skew (SGLang measured 1.18 without EPLB, 16K tokens per GPU);
    at few, sampling noise adds to it. 1 on one rank."""
    floor = busiest_rank_share(touched, num_experts, ranks)
    if ranks <= 1:
        return floor
    return floor + (skew - 1.0)


def grouped_gemm_efficiency(rows_per_expert: ArrayLike, eff: Efficiency, dtype: ComputeDtype = "fp8") -> np.ndarray:
    """Fraction of the `dtype` peak a grouped MoE GEMM reaches with R rows in each expert's group:
    e_max(dtype) * R / (R + R_half). e_max = `expert_compute_max_fraction` (DeepGEMM FP8 0.61-0.68
    at >= 4096 rows, Triton BF16 0.49-0.53), times plateau(dtype) / plateau(fp8) where a dtype's
    dense plateau is the lower one (FP4: CUTLASS NVFP4 reaches 0.41-0.43 of its peak)."""
    relative = min(1.0, compute_plateau(eff, dtype) / eff.fp8_compute_max_fraction)
    rows = np.maximum(np.asarray(rows_per_expert, dtype=np.float64), 1e-9)
    return eff.expert_compute_max_fraction * relative * rows / (rows + eff.expert_half_rows)


def moe_step(run: MoeRun, tokens: ArrayLike, decode: bool, sender_share: ArrayLike = 1.0) -> MoeStep:
    """The MoE layers of a step of `tokens` new tokens on the busiest rank (module docstring).

    `sender_share`: under data-parallel attention, the busiest rank's tokens over the mean rank's
    (`roofline.dp_rank_share`: a lone sequence's tokens all sit on one rank, which routes,
    dispatches and combines all of them)."""
    model, hardware, eff, gemm_dtype = run.model, run.hardware, run.eff, run.gemm_dtype
    moe = model.moe
    n = np.asarray(tokens, dtype=np.float64)
    zero = np.zeros_like(n)
    if moe is None:
        return MoeStep(zero, zero, zero, zero, zero, zero, zero, np.ones_like(n), 0.0)
    layers = model.num_layers - moe.first_dense_layers
    e, t, d = moe.num_experts, moe.experts_per_token, model.hidden_size
    ranks = run.ranks
    hbm = hardware.hbm_bytes_per_s

    hit = experts_touched(n, e, t)
    if run.expert_parallel:
        share = expert_share(hit, e, ranks, eff.expert_skew)
        rows = n * t / ranks * share
        width = float(moe.expert_intermediate_size)
        gemm_ranks = ranks / share  # the busiest rank does share / ranks of the work
    else:
        share = np.ones_like(n)
        rows = n * t
        width = moe.expert_intermediate_size / ranks
        gemm_ranks = np.full_like(n, float(ranks))
    routed = n / ranks * np.asarray(sender_share, dtype=np.float64) if run.dp_attention else n

    glue_bw = hbm * eff.glue_memory_fraction
    routing = layers * 2.0 * ROUTER_LOGIT_BYTES * routed * e / glue_bw
    activation = 3.0 * width * ACTIVATION_BYTES
    if gemm_dtype != "bf16":
        activation += width * (ACTIVATION_BYTES + weight_format(gemm_dtype).value_bytes)
    # Every routed row's output (d values) is written by the down GEMM; the weighted sum reads it
    # back and writes one row per token, unless the combine all-to-all reads it (DeepEP).
    per_row = activation + d * ACTIVATION_BYTES
    per_token = 0.0
    if not run.dp_attention:
        per_row += d * ACTIVATION_BYTES
        per_token = d * ACTIVATION_BYTES
    permutation = layers * (rows * per_row + routed * per_token) / glue_bw

    rows_per_expert = n * t / np.maximum(hit, 1e-9)
    flops = 2.0 * 3.0 * d * moe.expert_intermediate_size * t * layers * n
    peak = hardware.peak_flops_per_s(gemm_dtype)
    gemm_compute = flops / (gemm_ranks * peak * grouped_gemm_efficiency(rows_per_expert, eff, gemm_dtype))
    stream = hbm * streaming_fraction(eff, model.expert_dtype, eff.expert_memory_fraction)
    gemm_memory = hit * layers * run.expert_bytes / (gemm_ranks * stream)
    gemm = np.maximum(gemm_compute, gemm_memory)

    dispatch = combine = zero
    latency = 0.0
    if run.dp_attention and ranks > 1:
        # the collective waits for the busiest sender (`sender_share`) or the busiest receiver
        # (`share` of the routed copies), whichever moves more: a lone sequence's rank sends all of
        # its tokens while every receiver takes only its experts' share of them
        busiest = n / ranks * np.maximum(np.asarray(sender_share, dtype=np.float64), share)
        dispatch, combine = all_to_all(run, busiest, decode)
        latency = 2.0 * layers * all_to_all_latency_s(run, decode)
    return MoeStep(
        routing_s=routing,
        permutation_s=permutation,
        gemm_s=gemm,
        gemm_compute_s=gemm_compute,
        gemm_memory_s=gemm_memory,
        dispatch_s=dispatch,
        combine_s=combine,
        imbalance=share,
        latency_s=latency,
    )


#: the kernels of one MoE layer's fused expert op (SGLang's `fused_moe`): token sort, gate/up
#: grouped GEMM, activation, down grouped GEMM, weighted combine; the router GEMM and top-k run
#: before it (`roofline.MOE_FFN_KERNELS` counts all seven and the layer's norm)
FUSED_MOE_KERNELS = 5


def fused_moe_layer_s(run: MoeRun, tokens: ArrayLike, decode: bool) -> np.ndarray:
    """One MoE layer's fused expert op on the busiest rank, what a kernel benchmark of `fused_moe`
    times: (permutation + grouped GEMMs) / MoE layers + FUSED_MOE_KERNELS * `kernel_floor_s`
    (routing, the all-to-alls and the rest of the step are outside it)."""
    moe = run.model.moe
    step = moe_step(run, tokens, decode)
    layers = 1 if moe is None else run.model.num_layers - moe.first_dense_layers
    return (step.permutation_s + step.gemm_s) / layers + FUSED_MOE_KERNELS * run.eff.kernel_floor_s


def all_to_all_latency_s(run: MoeRun, decode: bool) -> float:
    """One dispatch's or combine's latency: decode's low-latency kernels `ep_ll_latency_s` inside one
    scale-up domain and `ep_ll_nic_latency_s` across domains; prefill's normal kernels
    `ep_latency_s` and `nic_latency_s`."""
    eff = run.eff
    within = run.ranks <= run.hardware.scale_up_domain
    if decode:
        return eff.ep_ll_latency_s if within else eff.ep_ll_nic_latency_s
    return eff.ep_latency_s if within else eff.nic_latency_s


def all_to_all(run: MoeRun, tokens_per_rank: np.ndarray, decode: bool) -> tuple[np.ndarray, np.ndarray]:
    """(dispatch, combine) seconds of all MoE layers for a rank sending `tokens_per_rank` tokens.

    Each collective takes latency (`all_to_all_latency_s`) + max(bytes over the scale-up fabric /
    (link * e_m), bytes over the NIC / (NIC * `scale_up_fraction`)), e_m the kernel mode's share of
    the link (`ep_ll_link_fraction` for decode, `ep_link_fraction` for prefill: DeepEP's copies run
    on a few SMs and reach 0.5-0.64 of NVLink, where a NIC is near its line rate and NCCL's
    all-reduce 0.8 of NVLink). Copies per token: decode's low-latency kernels send one
    per routed expert (t (r - 1) / r of them remote within a domain of r ranks, t (1 - D / ranks)
    over the NIC); prefill's normal kernels send one per destination rank, deduplicated (ranks
    touched: r (1 - (1 - 1/r)^t), remote (r - 1) / r of them; across m domains one NIC crossing per
    remote domain, m (1 - (1 - 1/m)^t) (m - 1) / m).
    """
    hardware, eff, moe = run.hardware, run.eff, run.model.moe
    assert moe is not None
    ranks = run.ranks
    domain = min(hardware.scale_up_domain, ranks)
    t = float(moe.experts_per_token)
    layers = run.model.num_layers - moe.first_dense_layers
    hidden = run.model.hidden_size
    scale_up = hardware.scale_up_bytes_per_s * (eff.ep_ll_link_fraction if decode else eff.ep_link_fraction)
    nic = hardware.nic_bytes_per_s * eff.scale_up_fraction
    if decode:
        local_copies = t * (domain - 1) / ranks
        nic_copies = t * (1.0 - domain / ranks)
    else:
        local_copies = domain * (1.0 - (1.0 - 1.0 / domain) ** t) * (domain - 1) / domain
        m = math.ceil(ranks / domain)
        nic_copies = m * (1.0 - (1.0 - 1.0 / m) ** t) * (m - 1) / m if m > 1 else 0.0
    latency = all_to_all_latency_s(run, decode)

    def collective(bytes_per_value: float) -> np.ndarray:
        per_token = hidden * bytes_per_value
        seconds = np.maximum(
            tokens_per_rank * local_copies * per_token / scale_up,
            tokens_per_rank * nic_copies * per_token / nic if nic_copies else 0.0,
        )
        return layers * (latency + seconds)

    return collective(DISPATCH_BYTES), collective(COMBINE_BYTES)
