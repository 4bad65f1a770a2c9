"""What `evaluate --json` prints: the closed form's figures of one deployment, and its capacity view."""

from __future__ import annotations

from pydantic import Field

from pddplan.cache.outputs import PrefixCache
from pddplan.support.outputs import Output, Seconds


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


class Evaluation(Figures):
    """`evaluate --json` (closed form); `capacity` is left out where an evaluation is embedded."""

    relayed_request_share: float = Field(description="share of requests routed through the relay")
    wan_gbps_offered: float
    stages: dict[str, Stage]
    fixed_point_iterations: int
    caches: list[PrefixCache]
    notes: list[str] = Field(description="a fixed decode batch cap that holds a pool below what its memory allows")
    capacity: Capacity | None = None
