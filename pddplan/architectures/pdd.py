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

if TYPE_CHECKING:
    from pddplan.specs.plan import HandoffMode, Routing

# Hit-rate thresholds the optimizer tries for the P-RLD-MD route (below: relayed).
HIT_THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.97, 0.99)


class Pdd(Architecture):
    name = "pdd"
    summary = "prefill + relay decoder here, main decoder there, KV over the WAN behind the relay"
    order = 3
    transport = Transport.WAN
    has_relay = True
    direct_pipeline = Pipeline.P_MD
    subject = True

    def routings(self, hits: np.ndarray) -> list[Routing | None]:
        """One rule per distinct set of relayed hit-rate support points (thresholds HIT_THRESHOLDS)."""
        from pddplan.specs.plan import Routing

        out: list[Routing | None] = []
        seen: set[int] = set()
        for threshold in HIT_THRESHOLDS:
            relayed = int((hits < threshold).sum())
            if relayed == 0 or relayed in seen:
                continue
            seen.add(relayed)
            out.append(Routing(kind="hit", hit_threshold=threshold))
        return out or [Routing(kind="hit", hit_threshold=HIT_THRESHOLDS[0])]

    def default_routing(self) -> Routing | None:
        from pddplan.specs.plan import Routing

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

    def define_constraints(self, model: Any, data: Any, variables: Any) -> None:
        super().define_constraints(model, data, variables)
        define_relay_capacity(model, data, variables)

    def after_prefill(self, sim: Dispatch, request: int, t: float) -> None:
        """Both paths at once: RDMA to a relay (relayed requests) and the WAN to a main decoder."""
        if sim.relayed(request):
            sim.rdma_to_relay(request, t)
        sim.wan_to_decoder(request, t)


def define_relay_capacity(model: Any, data: Any, v: Any) -> None:
    """Relay concurrency by Little's law: sum_r u* B*_r * count_r >= sum_k E[hold_k] * rate_k; one relay
    type, at the prefill datacenter (it is fed over RDMA)."""
    import pulp

    model += pulp.lpSum(v.relay_pick.values()) == 1, "one-relay-kind"
    supply = pulp.lpSum(data.relay[r].occupancy * count for r, count in v.relay_count.items())
    demand = pulp.lpSum(data.pools[k].relay_hold_s * v.pool_rate[k] for k in v.pool)
    model += supply + v.slack_of("relay-capacity") >= demand, "relay-capacity"
    for r, count in v.relay_count.items():
        candidate = data.relay[r].candidate
        model += count <= data.count_bound(data.relay[r]) * v.relay_pick[r], f"relay-pick-{r}"
        model += count >= v.relay_pick[r], f"relay-nonempty-{r}"
        home = [k for k in v.pool if data.pool_location(k)[0] == candidate.datacenter]
        model += v.relay_pick[r] <= pulp.lpSum(v.pool[k] for k in home), f"relay-location-{r}"


ARCHITECTURE = Pdd()
