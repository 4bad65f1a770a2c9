"""What each command's `--json` prints, as pydantic models: `pddplan schema --outputs DIR` writes
their JSON Schemas, and the tests validate every command's output against them.

Conventions the models hold the outputs to: one meaning per name across commands (`bcr` is always a
plan's goodput per dollar at its rate; a capacity view's is `fluid_bcr`); money carries its unit
(`cost_usd_per_hour`, `revenue_per_request_usd`); seconds end in `_s`, rates in `_rps`; counts are
integers; a figure with no value (an infeasible plan's cost, an infinite tail) is null, never 0;
display strings are values, not keys (`pipelines` is a list with a `pipeline` field). Keys that are
names (roles, architectures, GPU types) are identifiers, as in the input files.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class Output(BaseModel):
    """An output object: every key named here, no other."""

    model_config = ConfigDict(extra="forbid")


Seconds = float | None  # null when infinite (an unstable stage)


class Stage(Output):
    instances: int
    utilization: float = Field(description="prefill: busy share; decoders: mean batch / max batch")
    batch_per_instance: float
    max_batch: int
    step_s: Seconds
    stable: bool


class Pipeline(Output):
    pipeline: str = Field(description="P-MD, P-RLD-MD, P-RLD, P-D (RDMA) or P-D (WAN)")
    share: float
    ttft_p50_s: Seconds
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    tpot_p50_s: Seconds = None
    tpot_p90_s: Seconds = None
    tpot_p99_s: Seconds = None


class Capacity(Output):
    limits: dict[str, str] = Field(description="per role, the term that sets its capacity (TPOT, HBM, a cache's room)")
    max_rate_rps: float
    bottleneck: str
    per_instance_rps: dict[str, float | None]
    prefill_tokens_per_gpu_s: float
    prefill_tokens_per_gpu_s_alone: float
    throughput_per_gpu_hour: float
    cost_per_request_usd: float | None
    fluid_bcr: float = Field(description="requests per $ with every role at its capacity (not the plan's bcr)")
    revenue_per_request_usd: float
    revenue_per_cost: float
    margin_per_request_usd: float | None


class Figures(Output):
    """The figures `evaluate` and `simulate` share (docs/model.md section 7)."""

    architecture: str
    rate_rps: float
    ttft_p50_s: Seconds
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    tpot_p50_s: Seconds
    tpot_p90_s: Seconds
    tpot_p99_s: Seconds
    worst_gap_p99_s: Seconds
    goodput_rps: float
    sla_met: bool
    sla_violations: list[str]
    cost_usd_per_hour: float
    revenue_usd_per_hour: float
    bcr: float
    rld_token_share: float
    singular_share: float
    link_utilization: float
    wan_bytes_per_request: float
    request_overhead_s: float
    utilization: dict[str, float]
    pipelines: list[Pipeline]


class CacheTier(Output):
    tier: str = Field(description="dram (host memory) or ssd (local NVMe), below HBM")
    gb: float = Field(description="bytes of the cache this tier holds, GB")
    capacity_gb: float
    read_utilization: float = Field(description="share of the tier's read bandwidth the hits loaded from it take")


class PrefixCache(Output):
    """One prefix cache of the architecture (`pddplan.cache`)."""

    cache: str = Field(description="prefill (the prefill instances' prefix cache) or decode (the radix cache)")
    holds_gb: float = Field(description="rate x E[min(turn gap, retention)] x E[prompt KV], GB")
    hbm_gb: float
    tiers: list[CacheTier]
    lost_share: float = Field(description="share of its bytes no tier has room for (those prefixes miss)")
    found_share: float = Field(description="share of next turns that find their prefix held")
    mean_hit_load_s: float = Field(description="a mean hit's time to load from the tiers below HBM")
    notes: list[str]


class Evaluation(Figures):
    """`evaluate --json` (closed form); `capacity` is left out where an evaluation is embedded."""

    relayed_request_share: float = Field(description="share of requests routed through the relay")
    wan_gbps_offered: float
    stages: dict[str, Stage]
    fixed_point_iterations: int
    caches: list[PrefixCache]
    notes: list[str] = Field(description="a fixed decode batch cap that holds a pool below what its memory allows")
    capacity: Capacity | None = None


class Simulation(Figures):
    """`simulate --json`; also an architecture's `simulated` in `optimize --json`."""

    requests: int
    requests_summarized: int
    cancelled_transfers: int
    sequential: dict[str, Any] | None = Field(default=None, description="the early-stopping check's intervals")


class Role(Output):
    datacenter: str
    gpu: str
    tp: int
    expert_parallel: bool | None
    count: int
    tp_attention: bool | None = Field(default=None, description="present (true) when EP runs tensor-parallel attention")
    relay_on_prefill: bool | None = None


class WanLease(Output):
    option: str
    count: int


class PlanChoice(Output):
    """One plan `optimize --top N` lists, with its figures in closed form: rank 1 is the plan the
    optimizer chose (the one the simulation verified), the others are ranked by the mode's score."""

    rank: int
    checked: Literal["verified", "closed form"] = Field(
        description="verified: the simulation met the SLA too (only rank 1 is simulated); closed form: not simulated"
    )
    found_by: str = Field(
        description="program (a solution at a relay placement and handoff mode), trimmed, re-solved (the program "
        "without the prefill kinds before it) or '+1 ROLE' (one more instance)"
    )
    cost_usd_per_hour: float
    goodput_rps: float
    bcr: float
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    tpot_p90_s: Seconds
    tpot_p99_s: Seconds
    gpus: dict[str, int]
    roles: dict[str, Role]
    wan_lines: list[WanLease]
    routing_rule: str | None
    handoff_mode: str | None
    plan: dict[str, Any] = Field(description="the plan file (schemas/plan.schema.json)")


class FrontierPlan(PlanChoice):
    """A plan on the cost-latency frontier: no plan compared is as cheap and as fast with one better."""

    on: list[Literal["ttft_p99_s", "tpot_p90_s"]] = Field(description="the latencies it is on the frontier of")


class ArchitectureResult(Output):
    name: str
    feasible: bool
    gpus: dict[str, int]
    roles: dict[str, Role]
    wan_lines: list[WanLease]
    wan_gbps: float
    cost_usd_per_hour: float | None
    goodput_rps: float
    bcr: float | None
    ttft_p50_s: Seconds
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    tpot_p50_s: Seconds = None
    tpot_p90_s: Seconds = None
    tpot_p99_s: Seconds = None
    rld_token_share: float | None = None
    link_utilization: float | None = None
    routing_threshold: float | None = None
    routing_rule: str | None = None
    handoff_mode: str | None = None
    verified: bool = False
    verification_rounds: int = 0
    solves: int = 0
    evaluated: Evaluation | None = None
    simulated: Simulation | None = None
    infeasibility: list[dict[str, Any]]
    plan: dict[str, Any] | None = Field(default=None, description="the plan file (schemas/plan.schema.json)")
    plans_compared: int | None = Field(
        default=None, description="with --top: the deployments meeting the SLA in closed form that were ranked"
    )
    top: list[PlanChoice] | None = Field(default=None, description="with --top N: the N best plans, best first")
    frontier: list[FrontierPlan] | None = Field(
        default=None, description="with --top: the plans on the frontier of cost against TTFT P99 or TPOT P90"
    )


class Gain(Output):
    cost_change: float | None
    bcr_change: float | None
    ttft_p90_change: float | None
    ttft_p99_change: float | None
    baseline_feasible: bool


class InstanceWidths(Output):
    by_gpu: dict[str, list[int]]
    narrowed_by_workload: bool


class RobustScenario(Output):
    name: str
    hours_per_day: float
    required: bool
    rate_rps: float
    sla_met: bool
    goodput_rps: float
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    bcr: float | None
    routing_rule: str | None = Field(description="this scenario's routing rule for PDD's relay (null: no relay)")
    handoff_mode: str | None = Field(description="this scenario's handoff mode for PDD's relay (null: no relay)")
    served_rps: float = Field(
        description="the rate served: the offered one, or the most within the SLA (the rest shed)"
    )
    active_gpus: int | None = Field(description="GPUs of the purchase this scenario keeps busy (null: SLA not met)")
    active_cost_usd_per_hour: float | None = Field(description="what those GPUs cost per hour")


class RobustArchitecture(Output):
    architecture: str
    feasible: bool
    cost_usd_per_hour: float | None
    lower_bound_usd_per_hour: float | None = Field(
        description="the costliest required scenario's own optimum: no plan meeting them all costs less"
    )
    at_lower_bound: bool
    steady_cost_usd_per_hour: float | None
    price_of_robustness: float | None = Field(description="cost over the steady plan's, as a share of it")
    time_weighted_bcr: float | None
    elastic_cost_usd_per_hour: float | None = Field(
        description="the day's mean cost per hour when the instances a scenario leaves idle cost nothing"
    )
    scenarios: list[RobustScenario]
    plan: dict[str, Any] | None
    note: str


class Disaggregation(Output):
    """Whether to disaggregate: the best disaggregated plan's cost and BCR change over the best
    co-located one's (negative cost change: disaggregating is cheaper)."""

    colocated: str
    disaggregated: str
    winner: str
    cost_change: float
    bcr_change: float


class Optimize(Output):
    """`optimize --json`."""

    workload: str
    mode: str
    rate_rps: float | None
    budget_usd_per_hour: float | None
    best: str | None
    architectures: list[ArchitectureResult]
    gains: dict[str, Gain]
    disaggregation: Disaggregation | None = Field(
        description="the best co-located plan against the best disaggregated one (null unless both exist)"
    )
    instance_widths: InstanceWidths
    robustness: dict[str, Any] | None = None
    robust: list[RobustArchitecture] | None = Field(
        default=None, description="with --robust: per architecture, one purchase for every required scenario"
    )
    survive: list[dict[str, Any]] | None = Field(
        default=None, description="with --survive: per architecture, its plan grown to N+1 (as `survive --json`)"
    )
    output_plan: str | None = Field(
        default=None, description="with --output: which plan it wrote (the best, the robust purchase, the N+1 plan)"
    )


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


class Estimate(Output):
    """`estimate --json` (the keys of its mode: prefill, decode or extend)."""

    model_config = ConfigDict(extra="allow")
    model: str
    gpu: str
    tp: int
    expert_parallel: bool
    tp_attention: bool = Field(description="with expert_parallel: attention tensor-parallel, not data-parallel")
    mode: str
    stack: str | None
    efficiency_source: str
    breakdown: Breakdown
    precision: Precision
    moe: MoeParts | None = Field(description="the MoE layers' parts; null for a dense model")
    bound: str
    floor_s: float = Field(description="the shown step at its pure floor: every FLOP at peak, every byte at peak HBM")
    times_floor: float | None = Field(description="the shown step over its floor")


class MetricChange(Output):
    metric: str
    before: float | None
    after: float | None
    change: float | None
    verdict: str


class GateScenario(Output):
    name: str
    verdict: str = Field(description="regression, improvement or unchanged")
    reasons: list[str]
    best_before: str | None
    best_after: str | None
    metrics: list[MetricChange] | dict[str, Any]
    gpus_before: dict[str, int]
    gpus_after: dict[str, int]


class Gate(Output):
    """`gate --json`."""

    passed: bool
    improved: bool
    scenarios: list[GateScenario]


class ArchitectureInfo(Output):
    name: str
    summary: str
    kv_path: str
    decode_gpu: str
    relay: bool
    decode_datacenter: str
    subject: bool


class AgreementRow(Output):
    workload: str
    architecture: str
    figure: str
    evaluate: float | None
    simulate: float | None
    relative_gap: float | None


class Bathtub(Output):
    """`bathtub --json`: per hit point, each architecture's figures under its name."""

    workload: str
    mode: str
    fixed_plan: bool
    chunk_tokens: int
    rate_rps: float
    architectures: list[str]
    points: list[dict[str, Any]]
    findings: dict[str, Any]
    trace: dict[str, Any] | None = Field(
        default=None,
        description="with --trace: the trace's hit per cache size (GB), its unbounded hit, and per architecture "
        "with a valley the cache size that climbs out",
    )


class Sweep(Output):
    """`sweep --json`: per value, each architecture's figures under its name."""

    workload: str
    param: str
    architectures: list[str]
    points: list[dict[str, Any]]


class PaperRow(Output):
    metric: str
    article: str
    pddplan: str
    why: str
    values: dict[str, Any] = Field(default_factory=dict)


class Paper(Output):
    """`paper --json`."""

    workload: str
    rows: list[PaperRow]
    robustness: dict[str, Any]
    plans: dict[str, Any]


class Catalog(Output):
    """A catalog entry (`hardware|models|workloads show --json`, and each row of `list`)."""

    model_config = ConfigDict(extra="allow")
    name: str


class CrossValidation(Output):
    folds: int
    overall: dict[str, Any]
    by_measurement: dict[str, Any]
    by_family: dict[str, Any]


class Accuracy(Output):
    measurements: str
    rows: int
    excluded: int
    summary: dict[str, Any]
    gpu_level_summary: dict[str, Any]
    holdout_by_gpu: dict[str, Any]
    holdout_groups: dict[str, Any]
    points: list[dict[str, Any]]
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


class Calibrate(Output):
    target: str
    efficiency: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]
    factors_on_bounds: list[FactorOnBound] = Field(description="fitted factors on a bound (a warning each)")
    output: str | None
    from_bench: FromBench | None = None


class CachePlanPoint(Output):
    capacity: str = Field(description="as given: bytes (100GB) or tokens (5M)")
    capacity_bytes: float
    hit_token_weighted: float = Field(description="cached share of prompt tokens at this capacity")
    architecture: str | None = Field(description="the best feasible architecture (null: none)")
    gpu_and_line_usd_per_hour: float | None
    cache_usd_per_hour: float
    total_usd_per_hour: float | None
    goodput_rps: float
    bcr: float | None = Field(description="goodput per dollar of GPUs, lines and cache (requests / $)")
    marginal_value: float | None = Field(
        description="GPU-and-line $/h saved per $/h of cache added since the previous capacity"
    )


class CachePlan(Output):
    """`cache-plan --json`."""

    trace: str
    workload: str
    usd_per_gb_month: float
    mode: str
    points: list[CachePlanPoint]
    best_capacity: str | None


class Transient(Output):
    """`whatif --at`: a line failing mid-simulation (pddplan.analyses.whatif)."""

    at_s: float
    capacity_share_left: float = Field(description="the line pool's capacity left, as a share")
    in_flight: int = Field(description="requests with a WAN transfer owed and no first token at at_s")
    in_flight_ttft_p50_s: float | None
    in_flight_ttft_max_s: float | None
    ttft_p90_before_s: float
    ttft_p90_until_settled_s: float | None
    transfers_in_flight_peak: int
    transfers_in_flight_degraded_mean: float
    settle_s: float | None = Field(
        description="seconds from at_s until the link carries what the degraded deployment does (null: never)"
    )


class WhatIfOutput(Output):
    """`whatif --json`: the plan's figures as planned and after the change (null: all shed)."""

    change: str
    mode: str = Field(description="how the deployment runs after the change, in words")
    before: Evaluation
    after: Evaluation | None
    simulated_before: Simulation | None
    simulated_after: Simulation | None
    transient: Transient | None = Field(description="with --at: the line failure's transient")


class FailureMode(Output):
    failure: str = Field(description="instance:ROLE or line:OPTION")
    mode: str = Field(description="how the grown plan runs after it")


class Survive(Output):
    """`survive --json`."""

    original_cost_usd_per_hour: float
    cost_usd_per_hour: float
    price_of_survival: float = Field(description="extra cost over the original plan, as a share of it")
    degraded_sla: float = Field(description="the SLA's targets after a failure, as a multiple of the full SLA's")
    added: list[str]
    failures: list[FailureMode]
    plan: dict[str, Any] = Field(description="the grown plan, as a plan file holds it")


class ExportInstance(Output):
    name: str = Field(description="the instance's file and object name stem, e.g. prefill-0")
    role: str = Field(description="prefill, relay or decode")
    datacenter: str
    gpu: str
    gpus: int
    nodes: int
    layout: str = Field(
        description="ep (experts expert-parallel, data-parallel attention), tp-ep (experts expert-parallel, "
        "tensor-parallel attention) or tp"
    )
    kv_transfer: str = Field(description="rdma or tcp")
    max_running_requests: int | None


class Export(Output):
    """`export --json`."""

    target: str
    engine: str
    engine_version_checked: str
    plan: str
    architecture: str
    model_path: str
    instances: list[ExportInstance]
    files: dict[str, str] = Field(description="file name -> text, as --out writes them")


class TraceImport(Output):
    """`trace import --json`."""

    trace: str
    format: str
    requests: int
    duration_s: float
    rate_rps: float | None
    interarrival_cv: float | None
    requests_per_minute: list[int]
    peak_to_mean_per_minute: float | None
    input_tokens_mean: float | None
    output_tokens_mean: float | None
    length_bins_tokens: list[int]
    input_tokens_histogram: list[int]
    output_tokens_histogram: list[int]
    block_tokens: int
    requests_with_hashes: int
    ideal_hit_rate_token_weighted: float | None
    hit_bins: list[float]
    ideal_hit_histogram: list[int]
    hit_vs_prompt_length_correlation: float | None
    unique_blocks: int


class CachePoint(Output):
    capacity: str
    capacity_bytes: float | None
    capacity_tokens: int
    capacity_blocks: int
    requests: int
    hit_token_weighted: float
    hit_request_weighted: float


class TierShare(Output):
    tier: str
    capacity: str
    capacity_tokens: float
    read_bytes_per_s: float | None = Field(description="null: no load cost (the GPU's own HBM)")
    hit_share_of_prompt_tokens: float


class Tiered(Output):
    """`cache-curve --tier ...`: what each tier served and the load time it cost."""

    requests: int
    hit_token_weighted: float
    tiers: list[TierShare]
    load_s_mean: float
    load_s_p99: float
    load_s_max: float


class CacheCurve(Output):
    """`cache-curve --json`: a point per `--capacity`, or with `--tier` the tiered cache."""

    trace: str
    model: str | None
    eviction: str
    instances: int
    routing: str | None
    points: list[CachePoint]
    tiered: Tiered | None = None


OUTPUTS: dict[str, Any] = {
    "evaluate": Evaluation,
    "simulate": Simulation,
    "optimize": Optimize,
    "estimate": Estimate,
    "gate": Gate,
    "architectures": list[ArchitectureInfo],
    "agreement": list[AgreementRow],
    "bathtub": Bathtub,
    "sweep": Sweep,
    "paper": Paper,
    "hardware-show": Catalog,
    "hardware-list": list[Catalog],
    "models-show": Catalog,
    "models-list": list[Catalog],
    "workloads-show": Catalog,
    "workloads-list": list[Catalog],
    "accuracy": Accuracy,
    "calibrate": Calibrate,
    "export": Export,
    "cache-plan": CachePlan,
    "whatif": WhatIfOutput,
    "survive": Survive,
    "trace-import": TraceImport,
    "cache-curve": CacheCurve,
}
"""Each command's `--json` output, by the file name its schema is written under."""


def output_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of command output `name` (a key of OUTPUTS)."""

    schema = TypeAdapter(OUTPUTS[name]).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("title", f"pddplan {name} --json")
    return schema


def validate_output(name: str, data: Any) -> None:
    """Raise pydantic's ValidationError unless `data` is what command output `name` prints."""

    TypeAdapter(OUTPUTS[name]).validate_python(data, strict=False)
