"""Workload files: traffic, SLA, token prices, and the deployment options to choose among.

A workload file alone is enough to run every command: it names the model, describes the requests,
and lists what may be bought (GPUs per datacenter, WAN line options). Fields with defaults are
documented in `docs/inputs.md`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from pddplan.specs.common import (
    FREE_SOURCE_PREFIXES,
    MAX_BINS,
    ChunkTokens,
    Fraction,
    LineGbps,
    Name,
    NonNegativeSeconds,
    PositiveFloat,
    PositiveUsd,
    RateRps,
    RttMs,
    Seconds,
    Source,
    StepSeconds,
    StrictModel,
    Usd,
)
from pddplan.specs.distributions import SUPPORTS_KEPT, HitRateDistribution, LengthDistribution, RequestMix
from pddplan.specs.model import KvDtype
from pddplan.specs.precision import WeightDtype
from pddplan.support.kept import kept_by_identity

#: How far a request mix's mean hit rate may sit from its `hit_rate` marginal's (whose buckets are
#: discretized into points for closed-form averages).
MIX_HIT_TOLERANCE = 0.02


class Arrival(StrictModel):
    """Request arrivals: a mean rate and the process that spaces them.

    poisson: exponential inter-arrival times (coefficient of variation 1).
    gamma:   Gamma inter-arrival times with the given coefficient of variation `cv` (> 1 is bursty).
    """

    rate_rps: RateRps
    process: Literal["poisson", "gamma"] = "poisson"
    cv: float = Field(default=1.0, gt=0, le=20)
    rate_profile: list[Annotated[float, Field(ge=0, le=1e6)]] | None = Field(
        default=None,
        max_length=MAX_BINS,
        description="relative rate in consecutive steps of profile_step_s, repeating (scaled to mean 1, so "
        "rate_rps stays the mean): a day's or a trace's shape. The simulation follows it; the closed form sees "
        "the mean rate",
    )
    profile_step_s: PositiveFloat = Field(default=60.0, le=86_400)

    @model_validator(mode="after")
    def _cv_matches(self) -> Arrival:
        if self.process == "poisson" and self.cv != 1.0:
            raise ValueError("a poisson process has cv 1; use process: gamma for another cv")
        if self.rate_profile is not None and not sum(self.rate_profile) > 0:
            raise ValueError("rate_profile: every step is 0; give at least one positive relative rate")
        return self


#: The quantiles an SLA may target, as field suffixes: P50, P90, P99.
SLA_QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}


@dataclass(frozen=True)
class SlaTarget:
    """One SLA target: `metric` (ttft or tpot) at `quantile` at most `target_s`; the share of
    requests allowed above it is 1 - quantile."""

    metric: Literal["ttft", "tpot"]
    quantile: float
    target_s: float

    @property
    def name(self) -> str:
        """`TTFT P90`, `TPOT P99`."""
        return f"{self.metric.upper()} P{round(self.quantile * 100)}"

    @property
    def key(self) -> str:
        """The figure's key in results: `ttft_p90_s`."""
        return f"{self.metric}_p{round(self.quantile * 100)}_s"


class Sla(StrictModel):
    """Service-level targets on time to first token (P90 and P99, optionally P50) and time per
    output token (any of P50, P90, P99; TPOT is also the inter-token latency pddplan reports)."""

    ttft_p50_s: Seconds | None = None
    ttft_p90_s: Seconds
    ttft_p99_s: Seconds
    tpot_p50_s: Seconds | None = None
    tpot_p90_s: Seconds | None = None
    tpot_p99_s: Seconds | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Sla:
        for metric in ("ttft", "tpot"):
            given = [(name, getattr(self, f"{metric}_{name}_s")) for name in SLA_QUANTILES]
            given = [(name, value) for name, value in given if value is not None]
            for (low_name, low), (high_name, high) in itertools.pairwise(given):
                if high < low:
                    raise ValueError(f"{metric}_{high_name}_s ({high}) is below {metric}_{low_name}_s ({low})")
        return self

    def targets(self, metric: Literal["ttft", "tpot"] | None = None) -> list[SlaTarget]:
        """Every target set (of `metric`, or both), lowest quantile first."""
        return [
            SlaTarget(m, quantile, value)
            for m in ("ttft", "tpot")
            if metric in (None, m)
            for name, quantile in SLA_QUANTILES.items()
            if (value := getattr(self, f"{m}_{name}_s")) is not None
        ]

    def tpot_step_limit_s(self) -> float:
        """The longest decode step a sized batch may take: the tightest TPOT target (every
        sequence of the batch waits one step per token, so the step at the sized batch bounds
        every percentile); infinite without one."""
        return min((t.target_s for t in self.targets("tpot")), default=math.inf)

    def tpot_per_request_s(self) -> float:
        """The TPOT a request must keep to count as served within the SLA (goodput's attainment):
        the loosest TPOT target, as TTFT's is its P99 target; infinite without one."""
        return max((t.target_s for t in self.targets("tpot")), default=math.inf)

    def scaled(self, factor: float) -> Sla:
        """Every target multiplied by `factor`."""
        fields = (f"{m}_{name}_s" for m in ("ttft", "tpot") for name in SLA_QUANTILES)
        return self.model_copy(update={f: getattr(self, f) * factor for f in fields if getattr(self, f) is not None})


class TokenPrices(StrictModel):
    """What users pay per million tokens; cached input is billed at a discount."""

    input_usd_per_mtok: Usd
    cached_input_usd_per_mtok: Usd
    output_usd_per_mtok: Usd
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _discount(self) -> TokenPrices:
        if self.cached_input_usd_per_mtok > self.input_usd_per_mtok:
            raise ValueError("cached_input_usd_per_mtok exceeds input_usd_per_mtok")
        return self


class GpuOffer(StrictModel):
    """GPUs of one type a datacenter can provide, at most `max_count`."""

    type: str = Field(min_length=1, description="hardware profile name or path")
    max_count: int = Field(ge=0, le=1_000_000, description="a million GPUs is beyond any single site")
    usd_per_gpu_hour: PositiveUsd | None = Field(default=None, description="overrides the profile's price")


class Datacenter(StrictModel):
    """A datacenter: its GPU offers; GPUs inside one datacenter talk over RDMA."""

    name: Name
    gpus: list[GpuOffer] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_types(self) -> Datacenter:
        types = [offer.type for offer in self.gpus]
        if len(set(types)) != len(types):
            raise ValueError(f"a GPU type is listed twice: {types}")
        return self


class TcpSpec(StrictModel):
    """How a KV transfer uses TCP: parallel streams, their window, congestion control."""

    streams: int = Field(default=8, gt=0, le=1024)
    window_bytes: float = Field(default=64 * 2**20, gt=0, le=2**40, description="max in-flight bytes per stream")
    mss_bytes: int = Field(default=1460, gt=0, le=65_535)
    congestion: Literal["cubic", "bbr"] = "cubic"


class Fluctuation(StrictModel):
    """Random variation of a line's available capacity.

    none:  constant capacity.
    ou:    capacity fraction = clip(1 + cv * X(t), min_fraction, 1) with X a stationary Ornstein-
           Uhlenbeck process (mean 0, sd 1, correlation time `correlation_s`), sampled every
           `step_s` and held constant in between.
    trace: capacity fractions from a CSV file with columns `time_s,capacity_fraction`, repeated.
    """

    kind: Literal["none", "ou", "trace"] = "none"
    cv: float = Field(default=0.0, ge=0, le=2)
    correlation_s: Seconds = 10.0
    step_s: StepSeconds = 1.0
    min_fraction: float = Field(default=0.05, gt=0, le=1)
    trace_file: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> Fluctuation:
        if self.kind == "trace" and not self.trace_file:
            raise ValueError("kind trace needs trace_file")
        if self.kind != "trace" and self.trace_file:
            raise ValueError("trace_file is only read with kind: trace")
        return self


class WanLineOption(StrictModel):
    """A kind of WAN line that can be leased between two datacenters, up to `max_lines` of it."""

    name: Name
    between: list[str] = Field(min_length=2, max_length=2, description="the two datacenters it joins")
    capacity_gbps: LineGbps
    rtt_ms: RttMs
    loss_rate: float = Field(default=0.0, ge=0, lt=0.15)
    usd_per_month: Usd
    price_source: str = Field(min_length=1)
    max_lines: int = Field(default=4, gt=0, le=1000)
    tcp: TcpSpec = TcpSpec()
    fluctuation: Fluctuation = Fluctuation()


class PrefixCacheOffer(StrictModel):
    """Prefix cache one can buy beside the GPUs (host DRAM, SSD, a KV store), priced per GB-month:
    what `cache-plan` (and `optimize --trace`) price each capacity at."""

    usd_per_gb_month: float = Field(ge=0, le=1e4)
    price_source: str = Field(min_length=1)


class Deployment(StrictModel):
    """What the optimizer may choose among."""

    price_basis: Literal["rental", "purchase"] = "rental"
    datacenters: list[Datacenter] = Field(min_length=1)
    wan_lines: list[WanLineOption] = Field(default_factory=list)
    tp_options: list[Annotated[int, Field(gt=0, le=4096)]] | None = Field(
        default=None,
        min_length=1,
        description="TP degrees to consider; default: powers of two that fit, up to the domain",
    )
    home_datacenter: Name | None = Field(
        default=None,
        description="where prefill (and relay) run, and where pd-intra keeps everything; default: the first listed",
    )
    prefix_cache: PrefixCacheOffer | None = Field(
        default=None, description="prefix cache capacity on offer and its price (no built-in price: set your own)"
    )

    @model_validator(mode="after")
    def _names(self) -> Deployment:
        names = [dc.name for dc in self.datacenters]
        if len(set(names)) != len(names):
            raise ValueError(f"datacenter names repeat: {names}")
        if self.home_datacenter is not None and self.home_datacenter not in names:
            raise ValueError(f"home_datacenter {self.home_datacenter!r} is not a datacenter ({', '.join(names)})")
        line_names = [line.name for line in self.wan_lines]
        if len(set(line_names)) != len(line_names):
            raise ValueError(f"wan line names repeat: {line_names}")
        for index, line in enumerate(self.wan_lines):
            for end in line.between:
                if end not in names:
                    raise ValueError(f"wan_lines[{index}].between names '{end}', not a datacenter ({', '.join(names)})")
            if line.between[0] == line.between[1]:
                raise ValueError(f"wan_lines[{index}] joins '{line.between[0]}' to itself")
        return self

    def datacenter(self, name: str) -> Datacenter:
        return next(dc for dc in self.datacenters if dc.name == name)

    @property
    def home(self) -> str:
        """The home datacenter: prefill and relay run here; pd-intra runs only here."""
        return self.home_datacenter or self.datacenters[0].name


@dataclass(frozen=True)
class Mtp:
    """Multi-token prediction (speculative decoding with the model's own draft layer): each decode
    step drafts `draft_tokens` tokens and verifies them with the target model; each draft token is
    accepted with probability `acceptance`, given all before it were."""

    draft_tokens: int
    acceptance: float

    def tokens_per_step(self) -> float:
        """E[tokens a sequence gains per step] = 1 + a + a^2 + ... + a^K (the verified token, then
        each draft while the chain holds)."""
        return 1.0 + sum(self.acceptance**i for i in range(1, self.draft_tokens + 1))


#: The largest decode batch the planner considers when a workload sets no cap: a bound on the search,
#: not an engine's; the TPOT SLA and KV memory bind far below it on every shipped workload.
DECODE_BATCH_SEARCH_LIMIT = 4096


class ServingOptions(StrictModel):
    """Serving-engine settings shared by every plan for this workload."""

    chunk_tokens: ChunkTokens = Field(
        default=8192,
        description="chunked-prefill token budget per step of each attention rank: the instance's under "
        "tensor-parallel attention, each rank's under data-parallel attention (SGLang's --chunked-prefill-size "
        "is this times the data-parallel size)",
    )
    page_tokens: int = Field(default=64, gt=0, le=65_536, description="KV cache page (block) size")
    max_decode_batch: int | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="a cap on the sequences a decoder runs at once (SGLang --max-running-requests, vLLM "
        "--max-num-seqs); omit to let memory and the TPOT SLA decide, up to DECODE_BATCH_SEARCH_LIMIT (4,096); "
        "a cap that binds is reported",
    )
    hbm_utilization: float = Field(default=0.90, gt=0, le=1, description="share of HBM the engine may use")
    drc_retention_s: NonNegativeSeconds = Field(
        default=60.0, description="how long the MD keeps a finished request's KV in its radix cache"
    )
    turn_gap_s: Seconds | None = Field(
        default=None,
        description="mean time between a session's consecutive requests (exponential). Every prefix cache "
        "holds rate x E[min(gap, retention)] x E[prompt KV] (Little's law); a main decoder across the WAN "
        "still holds a request's prefix with probability 1 - exp(-drc_retention_s / turn_gap_s), else the "
        "whole prompt's KV crosses. Omit to take every next turn as arriving within drc_retention_s: each "
        "cache then holds every prefix for the whole retention (the most memory), and finds every one",
    )
    drc_retention_choices: list[NonNegativeSeconds] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="radix-cache retentions optimize chooses among for architectures that keep one (a longer one "
        "holds more decode memory and sends fewer whole prompts over the WAN); needs turn_gap_s; omit to run "
        "drc_retention_s",
    )
    cache_tiers: Literal["hbm", "dram", "ssd"] = Field(
        default="dram",
        description="the lowest tier prefix caches may use: hbm (GPU memory only), dram (spilling to the "
        "servers' host memory, as SGLang's hierarchical cache or vLLM's offloading connector do), ssd (and "
        "to their local NVMe); a hit held below HBM loads back over the host link before it is used",
    )
    host_memory_utilization: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="share of a server's host memory prefix caches may take (assumption: the rest for the OS, "
        "the engine's processes and pinned staging buffers)",
    )
    stack: str | None = Field(
        default=None,
        min_length=1,
        description="serving stack (e.g. sglang-0.5): step times use each GPU profile's factors for it; "
        "omit for the profiles' stack-agnostic factors",
    )
    cuda_graph_max_batch: int | None = Field(
        default=None,
        ge=0,
        le=1_000_000,
        description="largest decode batch the engine runs as a captured CUDA graph (SGLang "
        "--cuda-graph-max-bs-decode); a larger decode batch launches eagerly and takes at least its host's time "
        "to issue every kernel; 0: no graphs (SGLang --disable-decode-cuda-graph, vLLM --enforce-eager); omit: "
        "every decode batch is captured",
    )
    mtp_draft_tokens: int = Field(
        default=0,
        ge=0,
        le=8,
        description="multi-token prediction: draft tokens per decode step (0: off; DeepSeek-V3 runs 1)",
    )
    mtp_acceptance: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="share of draft tokens accepted, each given the ones before it (DeepSeek-V3's report: "
        "85-90% for its second token); needed with mtp_draft_tokens > 0",
    )

    @model_validator(mode="after")
    def _retention_choices_need_gaps(self) -> ServingOptions:
        if self.drc_retention_choices is not None and self.turn_gap_s is None:
            raise ValueError(
                "drc_retention_choices needs turn_gap_s: without gaps between turns a longer retention only "
                "costs memory, so there is nothing to choose"
            )
        return self

    @model_validator(mode="after")
    def _mtp_complete(self) -> ServingOptions:
        if self.mtp_draft_tokens > 0 and self.mtp_acceptance is None:
            raise ValueError("mtp_draft_tokens > 0 needs mtp_acceptance (the share of draft tokens accepted)")
        return self

    @property
    def decode_batch_limit(self) -> int:
        """The most sequences a decoder may run: the workload's cap, else the search's limit."""
        return self.max_decode_batch if self.max_decode_batch is not None else DECODE_BATCH_SEARCH_LIMIT

    def mtp(self) -> Mtp | None:
        """The multi-token prediction setting, or None when off."""

        if self.mtp_draft_tokens == 0 or self.mtp_acceptance is None:
            return None
        return Mtp(self.mtp_draft_tokens, self.mtp_acceptance)


class TrafficScenario(StrictModel):
    """A named condition the deployment must live through for part of each day: the workload with
    numeric fields overridden (dotted paths, as `sweep --param` names them, e.g.
    `arrival.rate_rps: 8` or `deployment.wan_lines[0].capacity_gbps: 50`) and the mean prefix hit
    moved by `hit_shift` (the bathtub's shift)."""

    name: Name
    hours_per_day: float = Field(gt=0, le=24)
    required: bool = Field(default=True, description="the plan must meet the SLA in this scenario")
    overrides: dict[str, float] = Field(default_factory=dict, max_length=64)
    hit_shift: float = Field(default=0.0, ge=-1, le=1)


class RoleWeights(StrictModel):
    """One role's weight formats, replacing the workload's (None: the workload's)."""

    weights: WeightDtype | None = Field(default=None, description="every weight of the role's instances")
    expert_weights: WeightDtype | None = Field(default=None, description="their routed experts, after `weights`")


class Workload(StrictModel):
    """A traffic scenario with its SLA, prices and deployment options."""

    name: Name
    description: str = ""
    model: str = Field(min_length=1, description="model catalog name, or a path to a config.json")
    kv_dtype: KvDtype | None = None
    weights: WeightDtype | None = Field(
        default=None,
        description="weight format of every weight (bf16, fp8, fp8-block, fp4/nvfp4, mxfp4, int4); default: the "
        "model's own (its config's quantization_config)",
    )
    expert_weights: WeightDtype | None = Field(
        default=None, description="weight format of the routed experts (MoE models), after `weights`"
    )
    role_weights: dict[Literal["prefill", "relay", "decode"], RoleWeights] | None = Field(
        default=None,
        description="per role (prefill, relay, decode), weight formats that replace `weights` / `expert_weights` "
        "there, e.g. {decode: {weights: fp4}}; a plan's role may set its own; instances that prefill and decode "
        "(agg, a relay on the prefill instances) store the model as prefill",
    )
    arrival: Arrival
    prompt_tokens: LengthDistribution
    output_tokens: LengthDistribution
    hit_rate: HitRateDistribution
    request_mix: RequestMix | None = Field(
        default=None,
        description="joint (prompt, hit) classes, e.g. from `trace import --workload-out`; when given, requests draw "
        "their prompt and hit together from it, and prompt_tokens / hit_rate are its marginals",
    )
    sla: Sla
    prices: TokenPrices
    deployment: Deployment
    serving: ServingOptions = ServingOptions()
    scenarios: list[TrafficScenario] = Field(
        default_factory=list,
        max_length=32,
        description="conditions of the day for `optimize --robust` (peak, off-peak, a degraded line, hit drift)",
    )
    sources: dict[str, Source] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _scenarios_fit_a_day(self) -> Workload:
        names = [s.name for s in self.scenarios]
        if len(set(names)) != len(names):
            raise ValueError(f"scenario names repeat: {', '.join(sorted(n for n in set(names) if names.count(n) > 1))}")
        hours = sum(s.hours_per_day for s in self.scenarios)
        if hours > 24 + 1e-9:
            raise ValueError(f"scenarios add up to {hours:g} hours a day, more than 24")
        return self

    @model_validator(mode="after")
    def _mix_matches_its_marginals(self) -> Workload:
        """The marginals must describe the mix: no class longer than prompt_tokens' longest (memory
        is sized for it), and the mean hit rates within MIX_HIT_TOLERANCE (the buckets' points
        are discretized)."""
        mix = self.request_mix
        if mix is None:
            return self
        if mix.largest_prompt() > self.prompt_tokens.largest():
            raise ValueError(
                f"request_mix has a class of {mix.largest_prompt()} prompt tokens, longer than prompt_tokens' "
                f"longest ({self.prompt_tokens.largest()}): prompt_tokens must be the mix's marginal"
            )
        if abs(mix.mean_hit() - self.hit_rate.mean()) > MIX_HIT_TOLERANCE:
            raise ValueError(
                f"request_mix's mean hit rate {mix.mean_hit():.4f} differs from hit_rate's {self.hit_rate.mean():.4f} "
                f"by more than {MIX_HIT_TOLERANCE}: hit_rate must be the mix's marginal"
            )
        return self

    def request_load_s(self) -> np.ndarray:
        """Load time from slower cache tiers per (prompt, hit) point of `prompt_hit_support`
        (0 without a request mix: the cache is the GPUs' own memory)."""
        if self.request_mix is not None:
            return self.request_mix.load_s()
        return np.zeros(len(self.prompt_hit_support()[0]))

    def decode_context_cv(self) -> float:
        """The coefficient of variation of a decoding sequence's context C = P + U * O (prompt P,
        output O, U uniform on [0, 1] for how far it has decoded): E[C] = E[P] + E[O] / 2,
        Var[C] = Var[P] + E[O^2] / 3 - E[O]^2 / 4; sqrt(Var[C]) / E[C] (0 for a constant context)."""
        prompts, _, prompt_probs = self.prompt_hit_support()
        outputs, output_probs = self.output_tokens.support()
        mean_p, mean_o = float(prompts @ prompt_probs), float(outputs @ output_probs)
        var_p = float((prompts - mean_p) ** 2 @ prompt_probs)
        var = var_p + float(outputs**2 @ output_probs) / 3.0 - mean_o**2 / 4.0
        mean = mean_p + mean_o / 2.0
        return float(np.sqrt(max(var, 0.0)) / mean) if mean > 0 else 0.0

    @kept_by_identity(SUPPORTS_KEPT)
    def prompt_hit_support(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prompt tokens, hit, probability) over the (prompt, hit) pairs requests draw: the mix's
        classes, else every pair of the two marginals' supports (independent)."""
        if self.request_mix is not None:
            return self.request_mix.support()
        prompts, prompt_probs = self.prompt_tokens.support()
        hits, hit_probs = self.hit_rate.support()
        prompt = np.repeat(prompts, len(hits))
        hit = np.tile(hits, len(prompts))
        return prompt, hit, np.repeat(prompt_probs, len(hits)) * np.tile(hit_probs, len(prompts))

    @model_validator(mode="after")
    def _sources_resolve(self) -> Workload:
        cited = [("prices.source", self.prices.source)]
        cited += [
            (f"deployment.wan_lines[{i}].price_source", line.price_source)
            for i, line in enumerate(self.deployment.wan_lines)
        ]
        if self.deployment.prefix_cache is not None:
            cited.append(("deployment.prefix_cache.price_source", self.deployment.prefix_cache.price_source))
        for path, source in cited:
            if source.startswith(FREE_SOURCE_PREFIXES) or source in self.sources:
                continue
            known = ", ".join(sorted(self.sources)) or "none"
            raise ValueError(
                f"{path} cites source {source!r}, which is not in the sources table (known: {known}); "
                f"or start it with one of {', '.join(FREE_SOURCE_PREFIXES)}"
            )
        return self


__all__ = [
    "Arrival",
    "Datacenter",
    "Deployment",
    "Fluctuation",
    "Fraction",
    "GpuOffer",
    "ServingOptions",
    "Sla",
    "TcpSpec",
    "TokenPrices",
    "WanLineOption",
    "Workload",
]
