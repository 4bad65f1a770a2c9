"""What `estimate`, `accuracy` and `calibrate` print with `--json`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pddplan.support.outputs import Output


class Breakdown(Output):
    """Where a step's time goes: total = dense + MoE layers (routing + permutation + grouped GEMMs) +
    attention + communication (its dispatch and combine included) + overheads - overlap + host."""

    dense_gemm_s: float
    expert_gemm_s: float = Field(description="the MoE layers' grouped GEMMs (0 for a dense model)")
    moe_routing_s: float
    moe_permutation_s: float = Field(description="the MoE layers' activation, permutation and weighted sum")
    attention_s: float
    communication_s: float
    moe_dispatch_s: float = Field(description="the expert-parallel dispatch all-to-alls, within communication_s")
    moe_combine_s: float = Field(description="the expert-parallel combine all-to-alls, within communication_s")
    stage_transfer_s: float | None = Field(
        default=None, description="with pipeline stages: the stage's send to the next, within communication_s"
    )
    overhead_s: float
    overlap_s: float = Field(description="work hidden behind the all-to-alls by two micro-batches")
    host_bound_s: float = Field(
        description="an eagerly launched decode step's wait for its host to issue the kernels, beyond the "
        "device's time (0 under a CUDA graph)"
    )
    compute_bound_s: float
    memory_bound_s: float


class Precision(Output):
    """The weight formats a step reads and the dtype its GEMMs run at on the GPU."""

    weights: str
    weight_bytes_per_value: float = Field(description="bytes per weight, block scales included")
    dense_gemm_dtype: str = Field(description="bf16, fp8 or fp4: a format the GPU lacks runs weight-only at bf16")
    experts: str | None = None
    expert_bytes_per_value: float | None = None
    expert_gemm_dtype: str | None = None


class MoeParts(Output):
    """An MoE step's layers by part, and the busiest expert-parallel rank's share."""

    routing_s: float
    permutation_s: float
    grouped_gemm_s: float
    dispatch_s: float
    combine_s: float
    busiest_rank_share: float = Field(description="the busiest rank's rows over the mean rank's (1 without EP)")
    expert_skew: float = Field(description="the routing skew in that share beyond uniform routing's")
    micro_batches: int
    overlap_s: float


class MemoryPerGpu(Output):
    weights_bytes: float
    activations_bytes: float
    kv_budget_bytes: float


class Estimate(Output):
    """`estimate --json`: the instance, then the keys of its mode (prefill, decode or extend; the
    other modes' keys are absent), then the shown step's breakdown."""

    model: str
    gpu: str
    tp: int
    pp: int | None = Field(default=None, description="pipeline stages of tp GPUs each (absent without)")
    expert_parallel: bool
    tp_attention: bool = Field(description="with expert_parallel: attention tensor-parallel, not data-parallel")
    mode: Literal["prefill", "decode", "extend"]
    stack: str | None
    efficiency_source: str
    kv_copies: float = Field(description="copies of each token's KV across the instance's GPUs")
    memory_per_gpu: MemoryPerGpu
    # prefill
    prefill_s: float | None = Field(default=None, description="the prefill alone, its chunks back to back")
    packed_prefill_s: float | None = Field(
        default=None,
        description="what it costs an engine packing it with others (under data-parallel attention: its share "
        "of the instance with every rank busy)",
    )
    loaded_prefill_s: float | None = Field(
        default=None,
        description="under data-parallel attention, its own engine time with every rank prefilling beside it",
    )
    pipeline_fill_s: float | None = Field(
        default=None,
        description="with pipeline stages: the last chunk's crossing of the stages after the first, a latency "
        "the first stage does not wait for (prefill_s and packed_prefill_s are the first stage's)",
    )
    request_overhead_s: float | None = Field(default=None, description="the serving stack's, per request")
    lone_request_ttft_s: float | None = None
    new_tokens: int | None = None
    cached_tokens: int | None = None
    chunks: int | None = None
    tail_chunk_tokens: int | None = None
    # decode
    decode_step_s: float | None = Field(
        default=None,
        description="the decode step (with pipeline stages: one stage's, on one micro-batch of batch / pp)",
    )
    cuda_graph: bool | None = None
    eager_host_s: float | None = None
    time_per_output_token_s: float | None = None
    tokens_per_step: float | None = None
    batch: int | None = None
    tokens_per_s: float | None = None
    max_batch_by_memory: int | None = None
    # decode and extend
    context_tokens: int | None = None
    # extend
    extend_s: float | None = None
    extend_tokens: int | None = None
    equivalent_decode_steps: float | None = None
    breakdown: Breakdown
    precision: Precision
    moe: MoeParts | None = Field(description="the MoE layers' parts; null for a dense model")
    bound: str
    floor_s: float = Field(description="the shown step at its pure floor: every FLOP at peak, every byte at peak HBM")
    times_floor: float | None = Field(description="the shown step over its floor")


class Errors(Output):
    """|predicted / measured - 1| over a set of rows."""

    count: int
    median_abs_error: float | None
    p90_abs_error: float | None
    worst_abs_error: float | None


class SplitErrors(Errors):
    mean_abs_error: float | None


class GpuErrors(Output):
    holdout_count: int
    median_abs_error: float | None
    worst_abs_error: float | None


class Groups(Output):
    """Errors per (measurement, step kind), model family, architecture class and weight precision."""

    by_measurement: dict[str, Errors]
    by_family: dict[str, Errors]
    by_class: dict[str, Errors]
    by_precision: dict[str, Errors]


class CrossValidation(Groups):
    """`accuracy --folds K`: the errors of each fold's rows predicted by the factors refitted without them."""

    folds: int
    fold_by: Literal["model", "stack"] = Field(description="what a fold leaves out whole")
    overall: Errors


class AccuracyPoint(Output):
    """One measured row, its prediction with the most specific factors and with the GPU's own."""

    line: int
    model: str
    gpu: str
    stack: str | None
    tp: int
    kind: str
    tokens: int
    cached: int
    batch: int
    context: int
    measured_s: float
    predicted_s: float
    error: float
    gpu_level_predicted_s: float
    gpu_level_error: float
    split: str
    measured_kind: str
    factors: str = Field(description="which factors predicted it: the stack's, the GPU's or the defaults")


class Accuracy(Output):
    measurements: str
    rows: int
    excluded: int
    summary: dict[str, SplitErrors]
    gpu_level_summary: dict[str, SplitErrors]
    holdout_by_gpu: dict[str, GpuErrors]
    holdout_groups: Groups
    points: list[AccuracyPoint]
    cross_validation: CrossValidation | None = Field(default=None, description="with --folds K")


class FactorOnBound(Output):
    factor: str
    value: float
    bound: str = Field(description="lower or upper")


class FromBench(Output):
    """What `calibrate --from` read: the benchmark files and the rows made of them."""

    format: str = Field(description="sglang-bench or vllm-bench")
    files: list[str]
    stack: str = Field(description="the serving stack the fit lands under in the GPU profile")
    rows: int
    notes: list[str] = Field(description="what each run assumed or left out")


class FitErrors(Output):
    """Null where the split has no rows."""

    count: int
    median_abs_error: float | None
    worst_abs_error: float | None
    rms_log_error: float | None = Field(description="sqrt(mean(log(predicted / measured)^2)), what the fit minimises")


class Calibrate(Output):
    target: str
    efficiency: dict[str, Any] = Field(description="the fitted factors (the hardware profile's efficiency block)")
    before: dict[str, FitErrors] = Field(description="fit and holdout rows, before the fit")
    after: dict[str, FitErrors]
    factors_on_bounds: list[FactorOnBound] = Field(description="fitted factors on a bound (a warning each)")
    output: str | None
    from_bench: FromBench | None = None
