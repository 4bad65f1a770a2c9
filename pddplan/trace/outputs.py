"""What `trace import --json` and `cache-curve --json` print."""

from __future__ import annotations

from pydantic import Field

from pddplan.support.outputs import Output


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
