"""The main decoder's radix cache (DRC): how often it still holds a request's cached prefix.

Only the incremental KV crosses the WAN when the main decoder holds the prefix that prefill hit;
otherwise the whole prompt's KV must. A finished request's KV stays in the DRC for
`drc_retention_s`; the session's next request finds it there when it arrives within that time.
With turn gaps exponential of mean g (`serving.turn_gap_s`):
    P(MD holds the prefix) = 1 - exp(-retention / g);
retention 0 holds nothing; without g, every prefix prefill holds is assumed held (an upper bound).
"""

from __future__ import annotations

import math

from pddplan.specs.workload import ServingOptions


def md_prefix_hit_probability(serving: ServingOptions) -> float:
    """P(the main decoder still holds the prefix prefill hit), by the module docstring."""
    if serving.drc_retention_s <= 0:
        return 0.0
    if serving.turn_gap_s is None:
        return 1.0
    return 1.0 - math.exp(-serving.drc_retention_s / serving.turn_gap_s)
