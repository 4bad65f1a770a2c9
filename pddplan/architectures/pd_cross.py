"""pd-cross: PD disaggregation across two datacenters without a relay (the article's unoptimized
cross-datacenter baseline).

Prefill in the home datacenter, decode in the other; the incremental KV crosses the WAN before the
first token. TTFT = wait + prefill + WAN transfer + tau_D.
"""

from __future__ import annotations

from pddplan.architectures.base import Architecture, Pipeline, Transport


class PdCross(Architecture):
    name = "pd-cross"
    summary = "PD across datacenters, KV over the WAN before the first token"
    order = 2
    transport = Transport.WAN
    direct_pipeline = Pipeline.PD_WAN


ARCHITECTURE = PdCross()
