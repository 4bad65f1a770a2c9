"""What `pddplan.cache` reports of one prefix cache, as printed in every evaluation's `caches`."""

from __future__ import annotations

from pydantic import Field

from pddplan.support.outputs import Output


class CacheTier(Output):
    tier: str = Field(description="dram (host memory) or ssd (local NVMe), below HBM")
    gb: float = Field(description="bytes of the cache this tier holds, GB")
    capacity_gb: float
    read_utilization: float = Field(description="share of the tier's read bandwidth the hits loaded from it take")


class PrefixCache(Output):
    """One prefix cache of the architecture (`pddplan.cache`)."""

    cache: str = Field(
        description="prefill (the prefill instances' prefix cache), split (a split agg plan's second pool's) or "
        "decode (the radix cache)"
    )
    holds_gb: float = Field(description="rate x E[min(turn gap, retention)] x E[prompt KV], GB")
    hbm_gb: float
    tiers: list[CacheTier]
    lost_share: float = Field(description="share of its bytes no tier has room for (those prefixes miss)")
    found_share: float = Field(description="share of next turns that find their prefix held")
    mean_hit_load_s: float = Field(description="a mean hit's time to load from the tiers below HBM")
    notes: list[str]
