"""`pddplan estimate`: one step-time prediction with its breakdown, as a plain dict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pddplan.calibration.outputs import Breakdown, Estimate, MemoryPerGpu, MoeParts, Precision
from pddplan.errors import InputError
from pddplan.inputs import check_kv_dtype, load_hardware, load_model
from pddplan.perf.memory import kv_replication, max_batch, memory_budget
from pddplan.perf.roofline import (
    Instance,
    StepTime,
    decode_step_time,
    eager_host_time,
    floor_time,
    prefill_cost,
    step_time,
)
from pddplan.specs.model import KvDtype, ModelArchitecture
from pddplan.specs.precision import WEIGHT_FORMATS, WeightDtype, weight_bytes_per_value
from pddplan.specs.workload import Mtp
from pddplan.support.limits import MAX_PIPELINE_STAGES, MIN_CHUNK_TOKENS, check_gpus_per_instance, check_tokens

MAX_MTP_DRAFT_TOKENS = 8  # as a workload's serving.mtp_draft_tokens
MAX_GRAPH_BATCH = 1_000_000  # as a workload's serving.cuda_graph_max_batch (and max_decode_batch)


@dataclass(frozen=True)
class StepQuery:
    """Which step to predict; exactly one of prefill_tokens, decode_batch and extend_tokens.

    prefill: `prefill_tokens` new tokens on `cached_tokens` cached ones (chunked by `chunk_tokens`);
    decode:  one step of `decode_batch` sequences at `context_tokens`, a captured CUDA graph unless
             the batch exceeds `cuda_graph_max_batch` (0: never captured; None: always);
    extend:  `extend_tokens` recomputed on `context_tokens` (the token-ID handoff);
    on an instance of `pipeline_stages` stages of tp GPUs each (1: none).
    """

    prefill_tokens: int | None = None
    cached_tokens: int = 0
    chunk_tokens: int | None = None
    decode_batch: int | None = None
    extend_tokens: int | None = None
    context_tokens: int | None = None
    mtp_draft_tokens: int = 0
    mtp_acceptance: float | None = None
    cuda_graph_max_batch: int | None = None
    pipeline_stages: int = 1

    def stages(self, tp: int) -> int:
        """The pipeline stages (--pp), checked with the GPUs they take (tp x pp)."""
        pp = self.pipeline_stages
        if not 1 <= pp <= MAX_PIPELINE_STAGES:
            raise InputError(f"--pp = {pp}: must be between 1 and {MAX_PIPELINE_STAGES} pipeline stages")
        check_gpus_per_instance(tp * pp, "--tp x --pp")
        return pp

    def graph_cap(self) -> int | None:
        """The largest decode batch run as a CUDA graph (--cuda-graph-max-batch), checked; None: all."""
        cap = self.cuda_graph_max_batch
        if cap is None:
            return None
        if self.decode_batch is None:
            raise InputError("--cuda-graph-max-batch applies to a decode step (--decode-batch B)")
        if not 0 <= cap <= MAX_GRAPH_BATCH:
            raise InputError(f"--cuda-graph-max-batch = {cap}: must be between 0 and {MAX_GRAPH_BATCH:,} sequences")
        return cap

    def mtp(self) -> Mtp | None:
        """The multi-token prediction of a decode step (--mtp K --accept A), checked; None when off."""
        k, a = self.mtp_draft_tokens, self.mtp_acceptance
        if k == 0 and a is None:
            return None
        if not 0 <= k <= MAX_MTP_DRAFT_TOKENS:
            raise InputError(f"--mtp = {k}: draft tokens per step must be 0-{MAX_MTP_DRAFT_TOKENS}")
        if k == 0 or a is None:
            raise InputError("--mtp K and --accept A go together (K draft tokens, a share A of them accepted)")
        if not (math.isfinite(a) and 0 < a <= 1):
            raise InputError(f"--accept = {a}: must be in (0, 1]")
        if self.decode_batch is None:
            raise InputError("--mtp applies to a decode step (--decode-batch B)")
        return Mtp(k, a)


def expert_parallel_of(ep: bool | None, tp_attention: bool) -> bool | Literal["tp-attention"] | None:
    """`--ep/--no-ep` and `--tp-attention` as `estimate`'s `expert_parallel` value: tensor-parallel
    attention is a layout of expert parallelism, so it implies `--ep` and refuses `--no-ep`."""
    if not tp_attention:
        return ep
    if ep is False:
        raise InputError("--tp-attention with --no-ep: tensor-parallel attention is a layout of expert parallelism")
    return "tp-attention"


@dataclass(frozen=True)
class EstimateFlags:
    """Every option of `pddplan estimate`, by the command's own parameter names: what a caller (the
    command line or a library user) fills in, checked when it is estimated (`estimate`)."""

    model: str
    gpu: str
    tp: int = 1
    pp: int = 1
    prefill: int | None = None
    cached: int = 0
    chunk: int | None = None
    decode_batch: int | None = None
    extend: int | None = None
    context: int | None = None
    kv_dtype: str | None = None
    ep: bool | None = None
    tp_attention: bool = False
    stack: str | None = None
    mtp: int = 0
    accept: float | None = None
    cuda_graph_max_batch: int | None = None
    weights: str | None = None
    expert_weights: str | None = None
    json_out: bool = False

    def query(self) -> StepQuery:
        """The step these options ask for (checked by `estimate`)."""
        return StepQuery(
            prefill_tokens=self.prefill,
            cached_tokens=self.cached,
            chunk_tokens=self.chunk,
            decode_batch=self.decode_batch,
            extend_tokens=self.extend,
            context_tokens=self.context,
            mtp_draft_tokens=self.mtp,
            mtp_acceptance=self.accept,
            cuda_graph_max_batch=self.cuda_graph_max_batch,
            pipeline_stages=self.pp,
        )

    def estimate(self) -> Estimate:
        """The prediction these options ask for (`estimate`), every option checked: the KV dtype,
        the layout, then the step."""
        kv_dtype = check_kv_dtype(self.kv_dtype)
        layout = expert_parallel_of(self.ep, self.tp_attention)
        weights = check_format(self.weights, "--weights")
        formats = Formats(weights, check_format(self.expert_weights, "--expert-weights"), kv_dtype)
        return estimate(
            self.model, self.gpu, self.tp, self.query(), expert_parallel=layout, stack=self.stack, formats=formats
        )


@dataclass(frozen=True)
class Formats:
    """Formats that override a model's own: `weights` for every weight, then `experts` for the
    routed experts, `kv` for the KV cache (None: the model's)."""

    weights: WeightDtype | None = None
    experts: WeightDtype | None = None
    kv: KvDtype | None = None

    def apply(self, model: ModelArchitecture) -> ModelArchitecture:
        """`model` stored in these formats (`ModelArchitecture.with_weights`)."""
        if self.experts is not None and model.moe is None:
            raise InputError(f"--expert-weights = {self.experts!r}: {model.name} has no routed experts")
        return model.with_weights(self.weights, self.experts)


def check_format(value: str | None, flag: str) -> WeightDtype | None:
    """A weight format named on the command line, checked (None stays None)."""
    if value is None:
        return None
    if value not in WEIGHT_FORMATS:
        raise InputError(f"{flag} = {value!r}: expected one of {', '.join(WEIGHT_FORMATS)}")
    return value  # type: ignore[return-value]


def precision_of(instance: Instance) -> Precision:
    """The weight formats an instance runs and the dtype its GEMMs run at on its GPU (a format
    the GPU has no tensor cores for runs weight-only at bf16)."""
    model, hardware = instance.model, instance.hardware
    out = Precision(
        weights=model.weight_dtype,
        weight_bytes_per_value=weight_bytes_per_value(model.weight_dtype),
        dense_gemm_dtype=hardware.gemm_dtype(model.weight_dtype),
    )
    if model.moe is not None:
        out.experts = model.expert_dtype
        out.expert_bytes_per_value = weight_bytes_per_value(model.expert_dtype)
        out.expert_gemm_dtype = hardware.gemm_dtype(model.expert_dtype)
    return out


def moe_parts(instance: Instance, step: StepTime) -> MoeParts | None:
    """The shown step's MoE layers: routing, permutation, grouped GEMMs, dispatch, combine (seconds),
    the busiest expert-parallel rank's load over the mean and the skew factor in it, and whether the
    step runs as two micro-batches; None for a dense model."""
    if instance.model.moe is None:
        return None
    return MoeParts(
        routing_s=float(step.moe_routing_s),
        permutation_s=float(step.moe_permutation_s),
        grouped_gemm_s=float(step.expert_gemm_s),
        dispatch_s=float(step.moe_dispatch_s),
        combine_s=float(step.moe_combine_s),
        busiest_rank_share=float(step.expert_imbalance),
        expert_skew=instance.efficiency.expert_skew if instance.uses_ep else 1.0,
        micro_batches=int(step.micro_batches),
        overlap_s=float(step.overlap_s),
    )


def estimate(
    model_name: str,
    gpu: str,
    tp: int,
    query: StepQuery,
    *,
    expert_parallel: bool | Literal["tp-attention"] | None = None,
    stack: str | None = None,
    formats: Formats | None = None,
) -> Estimate:
    """Predict a prefill, a decode step or an extend step (see `StepQuery`): engine times.

    With the query's `pipeline_stages` (pp) of `tp` GPUs each, a step is one stage's (its layers' share plus its
    send to the next stage, `pipeline_stage`); a decode step's time per output token is the batch's
    pp micro-batches crossing every stage, and a prefill's lone latency adds its last chunk's
    crossing of the other stages (`pipeline_fill_s`).

    `floor_s` is the shown step's pure floor (every FLOP at peak, every byte at peak HBM bandwidth,
    no collectives or overheads: `floor_time`), `times_floor` the step over it.

    A prefill reports its engine time alone (`prefill_s`, its chunks back to back), what it costs
    an engine that packs it with other requests (`packed_prefill_s`; under data-parallel attention
    its share of the instance with every rank busy, and its own time then, `loaded_prefill_s`),
    and apart from both the
    serving stack's per-request overhead (`request_overhead_s`: HTTP, tokenization, scheduling)
    with the lone request's client TTFT, their sum (`lone_request_ttft_s`).

    `stack` picks the factors the GPU's profile holds for that serving stack (else its default ones).
    `expert_parallel` takes the values of the measurements' column of that name: True (experts EP,
    data-parallel attention), "tp-attention" (experts EP under tensor-parallel attention), False
    (tensor parallelism throughout), None (the default rule; see `Instance`). `formats` stores the
    model's weights in other formats (`precision` reports the formats and the GEMMs' dtypes; `moe`
    the MoE layers' parts, `moe_parts`).
    """
    prefill_tokens, cached_tokens, chunk_tokens = query.prefill_tokens, query.cached_tokens, query.chunk_tokens
    decode_batch, extend_tokens, context_tokens = query.decode_batch, query.extend_tokens, query.context_tokens
    for flag, value, least in (
        ("--prefill", prefill_tokens, 1),
        ("--decode-batch", decode_batch, 1),
        ("--extend", extend_tokens, 1),
        ("--chunk", chunk_tokens, MIN_CHUNK_TOKENS),
        ("--context", context_tokens, 0),
        ("--cached", cached_tokens, 0),
    ):
        if value is not None:
            check_tokens(value, flag, least)
    modes = [m for m, v in (("prefill", prefill_tokens), ("decode", decode_batch), ("extend", extend_tokens)) if v]
    if len(modes) != 1:
        raise InputError("give exactly one of --prefill TOKENS, --decode-batch B or --extend K")
    if modes[0] in ("decode", "extend") and context_tokens is None:
        raise InputError(f"--{'decode-batch' if modes[0] == 'decode' else 'extend'} needs --context TOKENS")
    check_gpus_per_instance(tp, "--tp")
    pp = query.stages(tp)
    mtp = query.mtp()
    graph_cap = query.graph_cap()
    formats = formats or Formats()
    model = formats.apply(load_model(model_name, formats.kv))
    tp_attention = expert_parallel == "tp-attention"
    ep = True if expert_parallel == "tp-attention" else expert_parallel
    instance = Instance(
        model,
        load_hardware(gpu),
        tp,
        ep,
        stack=stack,
        mtp=mtp,
        tp_attention=tp_attention,
        cuda_graph_max_batch=graph_cap,
        pp=pp,
    )
    budget = memory_budget(instance, step_tokens=chunk_tokens or prefill_tokens or 8192)
    result: dict[str, Any] = {}  # the mode's keys
    if modes[0] == "prefill":
        assert prefill_tokens is not None
        cost = prefill_cost(instance, prefill_tokens, cached_tokens, chunk_tokens)
        overhead = instance.efficiency.request_overhead_s
        first_chunk = min(prefill_tokens, chunk_tokens or prefill_tokens)
        step = step_time(instance, first_chunk, cached_tokens)
        floor = float(floor_time(instance, first_chunk, cached_tokens))
        chunks = -(-prefill_tokens // (chunk_tokens or prefill_tokens))
        tail = prefill_tokens - (chunks - 1) * (chunk_tokens or prefill_tokens)
        if pp > 1:
            result["pipeline_fill_s"] = float(cost.fill_s)
        result.update(
            prefill_s=float(cost.alone_s),
            packed_prefill_s=float(cost.batched_s),
            request_overhead_s=overhead,
            lone_request_ttft_s=float(cost.alone_s) + float(cost.fill_s) + overhead,
            new_tokens=prefill_tokens,
            cached_tokens=cached_tokens,
            chunks=chunks,
            tail_chunk_tokens=tail,
        )
        if instance.attention_ranks > 1:
            result["loaded_prefill_s"] = float(cost.loaded_s)
    elif modes[0] == "decode":
        assert decode_batch is not None and context_tokens is not None
        micro = max(decode_batch / pp, 1.0) if pp > 1 else decode_batch  # a stage's step runs one micro-batch
        step = step_time(instance, 1 + (mtp.draft_tokens if mtp else 0), context_tokens, micro, decode=True)
        floor = float(floor_time(instance, 1 + (mtp.draft_tokens if mtp else 0), context_tokens, micro))
        per_token = float(decode_step_time(instance, decode_batch, context_tokens))
        eager = bool(instance.runs_eagerly(decode_batch))
        result.update(
            decode_step_s=float(step.total_s),
            cuda_graph=not eager,
            eager_host_s=float(eager_host_time(instance)) if eager else None,
            time_per_output_token_s=per_token,
            tokens_per_step=mtp.tokens_per_step() if mtp else 1.0,
            batch=decode_batch,
            context_tokens=context_tokens,
            tokens_per_s=decode_batch / per_token,
            max_batch_by_memory=int(max_batch(instance, context_tokens)),
        )
    else:
        assert extend_tokens is not None and context_tokens is not None
        step = step_time(instance, extend_tokens, context_tokens, 1)
        floor = float(floor_time(instance, extend_tokens, context_tokens, 1))
        one = float(step_time(instance, 1, context_tokens, 1).total_s)
        result.update(
            extend_s=float(step.total_s),
            extend_tokens=extend_tokens,
            context_tokens=context_tokens,
            equivalent_decode_steps=float(step.total_s) / one,
        )
    return Estimate(
        model=model.name,
        gpu=instance.hardware.name,
        tp=tp,
        **({"pp": pp} if pp > 1 else {}),
        expert_parallel=instance.uses_ep,
        tp_attention=instance.tp_attention,
        mode=modes[0],
        stack=stack,
        efficiency_source=instance.efficiency.source,
        kv_copies=kv_replication(instance),
        memory_per_gpu=MemoryPerGpu(
            weights_bytes=budget.weight_bytes,
            activations_bytes=budget.activation_bytes,
            kv_budget_bytes=budget.kv_bytes,
        ),
        **result,
        breakdown=Breakdown(
            **{
                name: value
                for name, value in step.breakdown().items()
                if name.endswith("_s") and (pp > 1 or name != "stage_transfer_s")
            }
        ),
        precision=precision_of(instance),
        moe=moe_parts(instance, step),
        bound=str(step.bound),
        floor_s=floor,
        times_floor=float(step.total_s) / floor if floor > 0 else None,
    )
