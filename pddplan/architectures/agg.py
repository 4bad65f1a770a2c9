"""agg: co-located ("aggregated") serving, prefill and decode on the same instances.

What engines run by default (SGLang and vLLM with chunked prefill, TensorRT-LLM's in-flight
batching): each instance decodes its running sequences and mixes the waiting prompts' chunks into
the same steps. One role, the prefill instances, does both; no KV moves. A request's first token
comes one step after its prefill ends (a mixed step while other prompts wait, else a decode
step), and every step that carries a chunk slows the sequences decoding in it
(`pddplan.evaluate.colocated`). TTFT = wait + prefill (slowed by the decode rows) + one step.

A plan may split the requests over a second pool on another GPU type (`split`), each pool an agg
deployment at its share of the traffic (`pddplan.scenarios.split`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pddplan.architectures.base import Architecture, DecodeGpu, Dispatch, Pipeline, Transport
from pddplan.cache.sessions import CacheKind

if TYPE_CHECKING:
    from pddplan.specs.plan import Plan


class Agg(Architecture):
    name = "agg"
    summary = "prefill and decode on the same instances (chunked prefill), no KV transfer"
    order = -1  # first in tables: the deployment every disaggregated one must beat
    transport = Transport.NONE
    decode_gpu = DecodeGpu.SAME
    direct_pipeline = Pipeline.COLOCATED
    colocated = True

    @property
    def caches(self) -> tuple[CacheKind, ...]:
        """The instances' prefix cache, sized and placed by the same rule as every prefill's; it
        shares their HBM with the running sequences."""
        return (CacheKind.PREFILL,)

    def validate(self, plan: Plan) -> None:
        """One role: `prefill` names the instances (and `split` a second pool of them, in the same
        datacenter: the router that divides the requests sits there); no decode, relay or WAN lines."""
        if plan.split is not None and plan.split.datacenter != plan.prefill.datacenter:
            raise ValueError(
                f"split.datacenter = {plan.split.datacenter!r}: the second pool must sit with the first in "
                f"{plan.prefill.datacenter!r} (one router divides the requests between them)"
            )
        for field, present in (
            ("decode", plan.decode is not None),
            ("relay", plan.relay is not None),
            ("wan", bool(plan.wan)),
            ("relay_on_prefill", plan.relay_on_prefill),
        ):
            if present:
                raise ValueError(
                    f"architecture agg runs prefill and decode on the same instances (`prefill`); remove `{field}`"
                )

    def first_token_delay(
        self,
        rdma_s: np.ndarray,
        wan_s: np.ndarray,
        decode_step_s: Any,
        relay_step_s: Any,
        relayed: np.ndarray,
    ) -> np.ndarray:
        """One step on the instance that prefilled it: tau (nothing moves)."""
        shape = np.broadcast_shapes(np.shape(rdma_s), np.shape(wan_s), np.shape(relayed))
        return np.broadcast_to(np.zeros(shape) + decode_step_s, shape)

    def after_prefill(self, sim: Dispatch, request: int, t: float) -> None:
        """The request decodes where its prefill ran."""
        sim.decode_in_place(request, t)


ARCHITECTURE = Agg()
