"""What a prefix cache holds for the traffic, and how often a session's next turn finds it.

A request's prompt KV stays in a cache after the request, for the session's next turn to extend.
With the gap G between a session's turns exponential of mean g (`serving.turn_gap_s`) and a cache
that keeps an entry R seconds after its last use (its retention):

    held time per request   E[min(G, R)] = g (1 - exp(-R / g))        (R = inf: g)
    bytes held              rate x E[min(G, R)] x E[prompt KV]       (Little's law)
    P(next turn finds it)   P(G <= R) = 1 - exp(-R / g)

Only sessions between turns occupy extra memory: a turn that arrives extends the entry it finds.
Without a known gap the traffic is taken to return within the retention: every prefix is found
and each is held the whole retention, E[min(G, R)] = R, the most memory the cache can take.

The prefill instances' cache has no retention of its own (it evicts by capacity, see `tiers`, and
finds every prefix it holds): R = inf with a known gap; without one it holds prefixes as long as
the main decoders' radix cache does (`serving.drc_retention_s`), the article's "the MD's cache in
line with P's" (so drc_retention_s 0 without a gap charges it nothing: give turn_gap_s).
"""

from __future__ import annotations

import math
from enum import StrEnum

from pddplan.specs.workload import ServingOptions


class CacheKind(StrEnum):
    """The caches an architecture may keep (`Architecture.caches`)."""

    PREFILL = "prefill"  # on the prefill instances: the prefixes behind the workload's hit rate
    DECODE = "decode"  # PDD's decode-side radix cache (DRC) on the main decoders across the WAN

    @property
    def label(self) -> str:
        return {"prefill": "prefill prefix cache", "decode": "decode-side radix cache"}[self.value]


def retention_s(kind: CacheKind, serving: ServingOptions) -> float:
    """How long `kind` keeps an entry after its last use (module docstring): the radix cache's
    `drc_retention_s`; the prefill cache's infinity with a known gap, else `drc_retention_s`."""
    if kind is CacheKind.PREFILL and serving.turn_gap_s is not None:
        return math.inf
    return serving.drc_retention_s


def held_time_s(retention: float, turn_gap_s: float | None) -> float:
    """E[min(G, R)]: g (1 - exp(-R / g)) for exponential gaps of mean g; R without a known gap;
    g for R = inf; 0 for R = 0."""
    if retention <= 0:
        return 0.0
    if turn_gap_s is None:
        return retention
    if math.isinf(retention):
        return turn_gap_s
    return turn_gap_s * -math.expm1(-retention / turn_gap_s)


def kept_probability(retention: float, turn_gap_s: float | None) -> float:
    """P(G <= R) = 1 - exp(-R / g): the share of next turns that find their prefix held; 1
    without a known gap (and R > 0), 0 for R = 0."""
    if retention <= 0:
        return 0.0
    if turn_gap_s is None or math.isinf(retention):
        return 1.0
    return -math.expm1(-retention / turn_gap_s)


def held_bytes(rate_rps: float, prefix_bytes: float, retention: float, turn_gap_s: float | None) -> float:
    """Bytes a cache holds for `rate_rps` requests/s of `prefix_bytes` mean prompt KV:
    rate x E[min(G, R)] x E[prompt KV] (Little's law)."""
    return rate_rps * held_time_s(retention, turn_gap_s) * prefix_bytes
