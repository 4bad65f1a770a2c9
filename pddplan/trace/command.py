"""`pddplan trace import` and `cache-curve` as library calls: every option by the command's own
parameter name, checked, and the steps the commands take.

    flags = TraceImportFlags(Path("trace.jsonl"), workload_out=Path("w.yaml"), like="pdd-agent-64k")
    summary = flags.summary()
    flags.write_workload()

    flags = CacheCurveFlags(Path("trace.jsonl"), capacity="1M,10M")
    results = flags.curve(flags.sizes())

Every check is here, so a library caller gets the errors the command line gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pddplan.errors import InputError
from pddplan.inputs import load_model
from pddplan.perf.kv import kv_bytes_per_token
from pddplan.support.limits import check_gpus_per_instance, check_tokens
from pddplan.trace.cache import Eviction, Routing
from pddplan.trace.curve import Capacity, cache_curve, parse_capacities
from pddplan.trace.outputs import CacheCurve, CachePoint, TraceImport
from pddplan.trace.prefetch import stream_trace
from pddplan.trace.read import FORMATS, HASHED_FORMATS, TraceFormat, read_trace
from pddplan.trace.stats import summarize
from pddplan.trace.tiers import Tier, parse_tier, replay_tiers
from pddplan.trace.workload import CacheChoice, write_trace_workload

Choice = TypeVar("Choice", bound=str)

EVICTIONS: tuple[Eviction, ...] = ("lru", "lfu")
ROUTINGS: tuple[Routing, ...] = ("affinity", "round-robin")


def one_of(flag: str, value: str, allowed: tuple[Choice, ...]) -> Choice:
    """`value` as the one of `allowed` it names; InputError naming `flag` and the choices otherwise."""
    chosen = next((name for name in allowed if name == value), None)
    if chosen is None:
        raise InputError(f"{flag} = {value!r}: expected one of {', '.join(allowed)}")
    return chosen


@dataclass(frozen=True)
class TraceImportFlags:
    """Every option of `pddplan trace import`, by the command's parameter names; the format, the
    block size and which options go together are checked when the flags are made."""

    trace: Path
    fmt: str = "mooncake"
    block_tokens: int = 512
    workload_out: Path | None = None
    like: str | None = None
    cache_capacity: str | None = None
    eviction: str = "lru"
    tier: list[str] | None = None
    json_out: bool = False

    def __post_init__(self) -> None:
        """InputError for an unknown format, a block size out of bounds, `--workload-out` without
        `--like` (or the reverse), and a cache (`--cache-capacity`, `--tier`) without
        `--workload-out`, in that order."""
        one_of("--format", self.fmt, FORMATS)
        check_tokens(self.block_tokens, "--block-tokens", 1)
        if (self.workload_out is None) != (self.like is None):
            raise InputError("--workload-out and --like go together: the trace gives the traffic, --like the rest")
        if (self.cache_capacity is not None or self.tier) and self.workload_out is None:
            raise InputError("--cache-capacity and --tier go with --workload-out")

    @property
    def trace_format(self) -> TraceFormat:
        """The checked `--format`."""
        return one_of("--format", self.fmt, FORMATS)

    def summary(self, progress: Callable[[str], None] | None = None) -> TraceImport:
        """The trace streamed once and summarized (`pddplan.trace.stats.summarize`), after its path
        and format: what `--json` prints."""
        if progress is not None:
            progress(f"reading {self.trace}...")
        summary = summarize(stream_trace(self.trace, self.trace_format, self.block_tokens), self.block_tokens)
        return summary.to_output(str(self.trace), self.fmt)

    def write_workload(self, progress: Callable[[str], None] | None = None) -> Path | None:
        """With `--workload-out`: write the trace's traffic on `--like`'s workload there
        (`write_trace_workload`, hits through `--cache-capacity`'s cache or the `--tier` chain);
        the path written, or None without `--workload-out`."""
        if self.workload_out is None or self.like is None:
            return None
        if progress is not None:
            progress(f"replaying {self.trace} through the prefix cache...")
        eviction: Eviction = self.eviction  # type: ignore[assignment]  # checked by workload_from_trace
        cache = CacheChoice(self.cache_capacity, eviction, tuple(self.tier or ()))
        write_trace_workload(self.trace, self.trace_format, self.like, self.workload_out, cache, self.block_tokens)
        return self.workload_out


@dataclass(frozen=True)
class CacheSizes:
    """What `cache-curve` replays the trace through: capacities (a hit-rate curve) or a chain of
    tiers, fastest first (the other one empty), with the model's KV bytes per token (None without
    `--model`)."""

    kv_bytes_per_token: float | None
    capacities: list[Capacity] = field(default_factory=list)
    tiers: list[Tier] = field(default_factory=list)


@dataclass(frozen=True)
class CacheCurveFlags:
    """Every option of `pddplan cache-curve`, by the command's parameter names; the choices, the
    block size and the instances are checked when the flags are made, the sizes by `sizes`."""

    trace: Path
    capacity: str | None = None
    tier: list[str] | None = None
    model: str | None = None
    fmt: str = "mooncake"
    block_tokens: int = 512
    eviction: str = "lru"
    instances: int = 1
    routing: str = "affinity"
    html_path: Path | None = None
    png: Path | None = None
    svg: Path | None = None
    json_out: bool = False

    def __post_init__(self) -> None:
        """InputError for a format without block hashes, an unknown eviction or routing, a block
        size or a number of instances out of bounds, in that order."""
        one_of("--format", self.fmt, HASHED_FORMATS)
        one_of("--eviction", self.eviction, EVICTIONS)
        one_of("--routing", self.routing, ROUTINGS)
        check_tokens(self.block_tokens, "--block-tokens", 1)
        check_gpus_per_instance(self.instances, "--instances")

    @property
    def trace_format(self) -> TraceFormat:
        """The checked `--format`."""
        return one_of("--format", self.fmt, HASHED_FORMATS)

    def sizes(self) -> CacheSizes:
        """The capacities or tiers asked for, read with `--model`'s KV bytes per token. InputError
        unless exactly one of `--capacity` and `--tier` is given, for `--tier` without `--model`
        (load times need the KV bytes), and for an `--html` page not named .html."""
        kv = kv_bytes_per_token(load_model(self.model)) if self.model is not None else None
        if (self.capacity is None) == (not self.tier):
            raise InputError("give --capacity (a hit-rate curve) or --tier (a tiered cache), not both or neither")
        if self.tier:
            if kv is None:
                raise InputError("--tier needs --model: load times follow the model's KV bytes per token")
            return CacheSizes(kv, tiers=[parse_tier(text, kv) for text in self.tier])
        assert self.capacity is not None
        capacities = parse_capacities(self.capacity, kv)
        if self.html_path is not None and self.html_path.suffix.lower() not in (".html", ".htm"):
            raise InputError(f"--html = {str(self.html_path)!r}: name the page .html")
        return CacheSizes(kv, capacities=capacities)

    def curve(self, sizes: CacheSizes) -> CacheCurve:
        """The hits at each of `sizes.capacities` (`pddplan.trace.curve.cache_curve`): one point per
        capacity."""
        eviction, routing = one_of("--eviction", self.eviction, EVICTIONS), one_of("--routing", self.routing, ROUTINGS)
        results = cache_curve(
            self.trace, self.trace_format, sizes.capacities, self.block_tokens, eviction, self.instances, routing
        )
        return CacheCurve(
            trace=str(self.trace),
            model=self.model,
            eviction=eviction,
            instances=self.instances,
            routing=routing if self.instances > 1 else None,
            points=[
                CachePoint(
                    capacity=c.text,
                    capacity_bytes=c.capacity_bytes,
                    capacity_tokens=int(c.tokens),
                    capacity_blocks=r.capacity_blocks,
                    requests=r.requests,
                    hit_token_weighted=r.hit_token_weighted,
                    hit_request_weighted=r.hit_request_weighted,
                )
                for c, r in zip(sizes.capacities, results, strict=True)
            ],
        )

    def tiered(self, sizes: CacheSizes) -> CacheCurve:
        """`--tier`: the trace replayed through `sizes.tiers` (`pddplan.trace.tiers.replay_tiers`),
        as `--json` prints it (one LRU chain, no curve points)."""
        assert sizes.kv_bytes_per_token is not None
        requests = read_trace(self.trace, self.trace_format)
        result = replay_tiers(requests, sizes.tiers, sizes.kv_bytes_per_token, self.block_tokens)
        return CacheCurve(
            trace=str(self.trace),
            model=self.model,
            eviction="lru",
            instances=1,
            routing=None,
            points=[],
            tiered=result.to_output(),
        )
