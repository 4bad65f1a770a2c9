"""Prefix caches, one rule for every architecture: how much a cache holds, where it lives, what
its hits cost, and the hit it gives.

Every architecture keeps the prefill instances' prefix cache (it is what gives a workload its hit
rate); an architecture whose decoders are fed over the WAN also keeps PDD's decode-side radix
cache on its main decoders (only the incremental KV then crosses). Both are sized and placed
here, by the same functions:

- `sessions`: the bytes a cache holds for the traffic (Little's law on sessions between turns)
  and the share of next turns that find their prefix still held;
- `tiers`: the tiers below HBM a server offers (host DRAM, local NVMe), the placement of a
  cache's bytes over them and over HBM, and the time a hit takes to load back into HBM.
"""

from __future__ import annotations

from pddplan.cache.sessions import CacheKind, held_bytes, held_time_s, kept_probability, retention_s
from pddplan.cache.tiers import (
    PLACEMENTS,
    Placement,
    Tier,
    instance_tiers,
    place,
)

__all__ = [
    "PLACEMENTS",
    "CacheKind",
    "Placement",
    "Tier",
    "held_bytes",
    "held_time_s",
    "instance_tiers",
    "kept_probability",
    "place",
    "retention_s",
]
