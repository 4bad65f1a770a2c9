"""pdd: Prefill - RelayDecode - MainDecode across two datacenters (the article's architecture).

Prefill and the relay decoder in the home datacenter, the main decoder in the other. A request
below the routing threshold (P-RLD-MD) goes to the relay over RDMA and streams its first token from
there while its incremental KV crosses the WAN; the others (P-MD) wait for the WAN transfer.
TTFT = wait + prefill + (RDMA + tau_RLD | WAN transfer + tau_MD).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pddplan.architectures.base import Architecture, Dispatch, Pipeline, Transport
from pddplan.cache.accounting import found_probability
from pddplan.cache.sessions import CacheKind
from pddplan.net.lines import pool_lines
from pddplan.specs.plan import Routing

if TYPE_CHECKING:
    from pddplan.specs.plan import HandoffMode, Routing
    from pddplan.specs.workload import Workload

# Hit-rate thresholds the optimizer tries for the P-RLD-MD route (below: relayed).
HIT_THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.97, 0.99)
RELAY_TRANSFER_BUDGET = 0.25  # relay a request whose transfer alone would take a quarter of the P90 target


def relay_by_bytes(workload: Workload) -> Routing | None:
    """Relay by the bytes a request must send over the WAN, not by its hit rate: relay when the
    transfer at one flow's TCP cap would take more than a quarter of the TTFT P90 target (None
    when the workload has no WAN option). It means the same at every hit rate (bathtub), and it
    relays a high-hit request whose prefix the main decoder no longer holds."""

    options = workload.deployment.wan_lines
    if not options:
        return None
    pool = pool_lines(options[0].between[0], options[0].between[1], [(options[0], 1)])
    threshold = pool.flow_cap_bytes_per_s * RELAY_TRANSFER_BUDGET * workload.sla.ttft_p90_s
    return Routing(kind="bytes", incremental_bytes_threshold=threshold)


class Pdd(Architecture):
    name = "pdd"
    summary = "prefill + relay decoder here, main decoder there, KV over the WAN behind the relay"
    order = 3
    transport = Transport.WAN
    has_relay = True
    direct_pipeline = Pipeline.P_MD
    subject = True

    def routings(self, workload: Workload) -> list[Routing | None]:
        """One rule per distinct set of relayed hit-rate support points (thresholds HIT_THRESHOLDS),
        and the bytes rule when the main decoder may miss a prefix prefill hit (then a high hit
        rate no longer means a small transfer)."""

        _, hits, _ = workload.prompt_hit_support()
        out: list[Routing | None] = []
        seen: set[int] = set()
        for threshold in HIT_THRESHOLDS:
            relayed = int((hits < threshold).sum())
            if relayed == 0 or relayed in seen:
                continue
            seen.add(relayed)
            out.append(Routing(kind="hit", hit_threshold=threshold))
        out = out or [Routing(kind="hit", hit_threshold=HIT_THRESHOLDS[0])]
        by_bytes = relay_by_bytes(workload)
        if by_bytes is not None and found_probability(CacheKind.DECODE, workload) < 1:
            out.append(by_bytes)
        return out

    def default_routing(self) -> Routing | None:

        return Routing(kind="hit", hit_threshold=0.9)

    def handoff_modes(self) -> tuple[HandoffMode, ...]:
        return ("adaptive", "catch-up", "one-shot")  # ties: smaller hiccups first

    def first_token_delay(
        self,
        rdma_s: np.ndarray,
        wan_s: np.ndarray,
        decode_step_s: Any,
        relay_step_s: Any,
        relayed: np.ndarray,
    ) -> np.ndarray:
        """P-RLD-MD: RDMA + tau_RLD; P-MD: WAN transfer + tau_MD."""
        return np.where(relayed, rdma_s + relay_step_s, wan_s + decode_step_s)

    def pipelines(self, relayed: np.ndarray) -> dict[Pipeline, np.ndarray]:
        return {Pipeline.P_MD: ~relayed, Pipeline.P_RLD_MD: relayed}

    def after_prefill(self, sim: Dispatch, request: int, t: float) -> None:
        """Both paths at once: RDMA to a relay (relayed requests) and the WAN to a main decoder."""
        if sim.relayed(request):
            sim.rdma_to_relay(request, t)
        sim.wan_to_decoder(request, t)


ARCHITECTURE = Pdd()
