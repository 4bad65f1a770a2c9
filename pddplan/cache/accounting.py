"""One cache of one deployment: its bytes for the traffic (`sessions`), placed over a pool of
instances (`tiers`), and the share of next turns that find their prefix.

Every architecture's caches go through `cache_site`, with the same traffic rule and the same
tiers: what one architecture pays for holding a prefix (memory, load time), another pays too.
"""

from __future__ import annotations

from dataclasses import dataclass

from pddplan.cache.sessions import CacheKind, held_bytes, held_time_s, kept_probability, retention_s
from pddplan.cache.tiers import Placement, instance_tiers, place
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.roofline import Instance
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.workload import Workload


@dataclass(frozen=True)
class CacheSite:
    """A cache at a pool: where its bytes are, and how often a next turn finds its prefix."""

    kind: CacheKind
    placement: Placement
    found: float  # P(the next turn comes within the retention): `sessions.kept_probability`
    notes: tuple[str, ...] = ()

    @property
    def kept(self) -> float:
        """P(a next turn finds its prefix): within the retention and not lost for room."""
        return self.found * self.placement.kept_share


def prefix_kv_bytes(workload: Workload, model: ModelArchitecture) -> float:
    """E[prompt KV]: the bytes a session's entry holds, over the (prompt, hit) support, whole pages."""
    prompts, _, probs = workload.prompt_hit_support()
    return float(request_kv_bytes(model, prompts, workload.serving.page_tokens) @ probs)


def demand_bytes_per_rps(kind: CacheKind, workload: Workload, model: ModelArchitecture) -> float:
    """Bytes `kind` holds per request/s: E[min(G, R)] x E[prompt KV] (`sessions`)."""
    serving = workload.serving
    return held_bytes(1.0, prefix_kv_bytes(workload, model), retention_s(kind, serving), serving.turn_gap_s)


def decode_cache_bytes_per_rps(workload: Workload, model: ModelArchitecture, caches: tuple[CacheKind, ...]) -> float:
    """Bytes the main decoders' radix cache holds per request/s (0 for an architecture whose
    `caches` have none)."""
    if CacheKind.DECODE not in caches:
        return 0.0
    return demand_bytes_per_rps(CacheKind.DECODE, workload, model)


def prefill_cache_bytes_per_rps(workload: Workload, model: ModelArchitecture) -> float:
    """Bytes the prefill instances' prefix cache holds per request/s (every architecture keeps one)."""
    return demand_bytes_per_rps(CacheKind.PREFILL, workload, model)


def held_time_of(kind: CacheKind, workload: Workload) -> float:
    """E[min(G, R)] of `kind` for this workload's gaps and retention."""
    return held_time_s(retention_s(kind, workload.serving), workload.serving.turn_gap_s)


def found_probability(kind: CacheKind, workload: Workload) -> float:
    """P(a next turn comes within `kind`'s retention); 1 for the prefill cache, which evicts by
    capacity only (its hits are the workload's, less what `place` loses for room)."""
    if kind is CacheKind.PREFILL:
        return 1.0
    return kept_probability(retention_s(kind, workload.serving), workload.serving.turn_gap_s)


def cache_site(
    kind: CacheKind,
    workload: Workload,
    model: ModelArchitecture,
    pool: tuple[Instance, int, float],
    rate_rps: float,
    scale: float = 1.0,
) -> CacheSite:
    """`kind` on a pool of (instance, count, HBM room per instance) at `rate_rps`, its demand
    times `scale` (the share of prefixes that land at all)."""
    instance, count, room = pool
    serving = workload.serving
    tiers, notes = instance_tiers(instance, serving.cache_tiers, serving.host_memory_utilization)
    demand = rate_rps * demand_bytes_per_rps(kind, workload, model) * scale
    return CacheSite(kind, place(demand, count, room, tiers), found_probability(kind, workload), notes)
