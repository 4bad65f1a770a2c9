"""A tiered prefix cache (HBM, host DRAM, SSD, ...) replayed over a trace: which tier each hit
comes from, and how long loading it takes (`pddplan cache-curve --tier`).

The tiers form an exclusive LRU chain, fastest first: a block lives in one tier at a time. A
request's hit is the leading run of its blocks found in any tier (as `pddplan.trace.cache`);
then every block of its prompt moves to the front of the first tier, and each tier over its
capacity demotes its least recently used blocks to the front of the next (the last tier evicts
them). A hit from tier k is read at that tier's bandwidth before prefill can use it:

    load_s = sum_k cached_tokens_k x kv_bytes_per_token / read_bytes_per_s_k

with no cost for a tier without a bandwidth (the GPU's own HBM). Tokens of the last, partial
block count at the tier that holds it, as in `replay`.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from pddplan.errors import InputError
from pddplan.support.units import parse_bandwidth
from pddplan.trace.curve import parse_capacities
from pddplan.trace.outputs import Tiered, TierShare
from pddplan.trace.read import TraceRequest

MAX_TIERS = 8


@dataclass(frozen=True)
class Tier:
    """One tier: its name, size in tokens, and read bandwidth (None: no load cost)."""

    name: str
    text: str
    tokens: float
    read_bytes_per_s: float | None


def parse_tier(text: str, kv_bytes_per_token: float | None) -> Tier:
    """`NAME:CAPACITY[:BANDWIDTH]`, e.g. `hbm:80GB`, `dram:1TB:100GB/s` (bandwidth in bytes per
    second, decimal units)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise InputError(f"--tier {text!r}: expected NAME:CAPACITY[:BANDWIDTH], e.g. dram:1TB:100GB/s")
    capacity = parse_capacities(parts[1], kv_bytes_per_token, f"--tier {text!r}: the capacity")[0]
    bandwidth = None
    if len(parts) == 3:
        bandwidth = parse_bandwidth(parts[2].strip(), f"--tier {text!r}: the bandwidth")
        if not (math.isfinite(bandwidth) and bandwidth > 0):
            raise InputError(f"--tier {text!r}: the bandwidth must be above 0")
    return Tier(parts[0], parts[1], capacity.tokens, bandwidth)


@dataclass(frozen=True)
class TierResult:
    """What the tiers served: per tier, its share of all prompt tokens; per request, load time."""

    tiers: list[Tier]
    requests: int
    prompt_tokens: int
    tokens_by_tier: list[int]
    load_s: np.ndarray  # per request

    @property
    def hit_token_weighted(self) -> float:
        return sum(self.tokens_by_tier) / self.prompt_tokens if self.prompt_tokens else 0.0

    def to_output(self) -> Tiered:
        """The typed result `cache-curve --tier --json` prints under `tiered`."""
        load = self.load_s
        return Tiered(
            requests=self.requests,
            hit_token_weighted=self.hit_token_weighted,
            tiers=[
                TierShare(
                    tier=tier.name,
                    capacity=tier.text,
                    capacity_tokens=tier.tokens,
                    read_bytes_per_s=tier.read_bytes_per_s,
                    hit_share_of_prompt_tokens=tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
                )
                for tier, tokens in zip(self.tiers, self.tokens_by_tier, strict=True)
            ],
            load_s_mean=float(load.mean()) if len(load) else 0.0,
            load_s_p99=float(np.percentile(load, 99)) if len(load) else 0.0,
            load_s_max=float(load.max()) if len(load) else 0.0,
        )


def replay_tiers(
    requests: Iterable[TraceRequest],
    tiers: list[Tier],
    kv_bytes_per_token: float,
    block_tokens: int = 512,
    on_request: Callable[[TraceRequest, float, float], None] | None = None,
) -> TierResult:
    """Replay `requests` through the tier chain (module docstring); requests without hashes are
    skipped. `on_request(request, hit, load_s)` sees each request with its hit fraction and load time."""
    if not 1 <= len(tiers) <= MAX_TIERS:
        raise InputError(f"give 1 to {MAX_TIERS} tiers, fastest first")
    capacity = [int(t.tokens // block_tokens) for t in tiers]
    held: list[OrderedDict[int, None]] = [OrderedDict() for _ in tiers]
    where: dict[int, int] = {}  # block -> the tier holding it
    tokens_by_tier = [0] * len(tiers)
    loads: list[float] = []
    prompt_total = 0
    for request in requests:
        blocks = request.hash_ids
        if blocks is None:
            continue
        prompt_total += request.input_tokens
        remaining, load = request.input_tokens, 0.0
        for block in blocks:
            tier = where.get(block)
            if tier is None or remaining <= 0:
                break
            tokens = min(block_tokens, remaining)
            remaining -= tokens
            tokens_by_tier[tier] += tokens
            bandwidth = tiers[tier].read_bytes_per_s
            if bandwidth is not None:
                load += tokens * kv_bytes_per_token / bandwidth
        loads.append(load)
        if on_request is not None:
            cached = request.input_tokens - max(remaining, 0) if request.input_tokens else 0
            on_request(request, cached / request.input_tokens if request.input_tokens else 0.0, load)
        for block in blocks:  # every block of the prompt to the front of the first tier
            tier = where.get(block)
            if tier is not None:
                del held[tier][block]
            held[0][block] = None
            where[block] = 0
        for k in range(len(tiers)):  # demote each tier's overflow, oldest first
            while len(held[k]) > capacity[k]:
                block, _ = held[k].popitem(last=False)
                if k + 1 < len(tiers):
                    held[k + 1][block] = None
                    where[block] = k + 1
                else:
                    del where[block]
    return TierResult(tiers, len(loads), prompt_total, tokens_by_tier, np.asarray(loads))
