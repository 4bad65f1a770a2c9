"""What every serving architecture is, as one interface the rest of pddplan asks.

An architecture says where its roles run and how a request's KV reaches the decoder that streams
its first token; the evaluator, the simulator, the optimizer and the reports ask it instead of
comparing names. One module per architecture in this package implements it (see `registry`).

Each answer is a small rule:
  roles           prefill and decode, plus a relay decoder for architectures that have one;
  placement       decode in the prefill datacenter (KV over RDMA) or in another one (KV over the WAN);
  decode GPU      the same type as prefill, another type, or any type;
  first token     after prefill: RDMA + one decode step, or WAN transfer + one decode step, or (with a
                  relay) RDMA + one relay step for the relayed requests;
  pipelines       the names TTFT is reported under, with the requests each carries;
  caches          the prefix caches it keeps (`pddplan.cache`): the prefill instances' (every
                  architecture), and a radix cache on decoders fed over the WAN;
  program         what it adds to the integer program follows from the above (its relay, its rule
                  on the decode GPU type: `pddplan.optimize.architecture_constraints`);
  simulation      where a request goes when its prefill finishes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from pddplan.cache.sessions import CacheKind
from pddplan.support.outputs import Output

if TYPE_CHECKING:
    from pddplan.specs.plan import HandoffMode, Plan, Routing
    from pddplan.specs.workload import Workload


class ArchitectureInfo(Output):
    """One architecture as `pddplan architectures` lists it."""

    name: str
    summary: str
    kv_path: str
    decode_gpu: str
    relay: bool
    decode_datacenter: str
    subject: bool


class Pipeline(StrEnum):
    """The path a request takes, as reported in TTFT breakdowns and per-request tables."""

    PD_RDMA = "P-D (RDMA)"
    PD_WAN = "P-D (WAN)"
    P_MD = "P-MD"
    P_RLD_MD = "P-RLD-MD"
    P_RLD = "P-RLD"  # singular traffic: a relayed request the relay finished on its own
    COLOCATED = "P+D"  # prefill and decode on the same instance (co-located serving)


class Transport(StrEnum):
    """How the KV of a finished prefill reaches the (main) decoder."""

    RDMA = "rdma"  # same datacenter
    WAN = "wan"  # the other datacenter, over the leased lines
    NONE = "none"  # decode runs where prefill wrote the KV (co-located serving): nothing moves


class DecodeGpu(StrEnum):
    """Which GPU types decode may use, relative to prefill's."""

    SAME = "same"
    OTHER = "other"
    ANY = "any"


class Dispatch(Protocol):
    """What the simulator offers an architecture when a request's prefill finishes."""

    def relayed(self, request: int) -> bool: ...

    def rdma_to_decoder(self, request: int, t: float) -> None: ...

    def rdma_to_relay(self, request: int, t: float) -> None: ...

    def wan_to_decoder(self, request: int, t: float) -> None: ...

    def decode_in_place(self, request: int, t: float) -> None: ...


class Architecture:
    """One serving architecture (subclasses set the class attributes and override what differs)."""

    name: ClassVar[str]
    summary: ClassVar[str]
    order: ClassVar[int]  # position in tables and default runs
    transport: ClassVar[Transport]
    decode_gpu: ClassVar[DecodeGpu] = DecodeGpu.ANY
    has_relay: ClassVar[bool] = False
    direct_pipeline: ClassVar[Pipeline]
    subject: ClassVar[bool] = False  # the architecture the others are baselines for (PDD)
    # prefill and decode share instances (chunked prefill mixed into decode steps): one role, the
    # prefill instances, and no KV moves (`pddplan.evaluate.colocated`)
    colocated: ClassVar[bool] = False

    @property
    def uses_wan(self) -> bool:
        return self.transport is Transport.WAN

    @property
    def decode_label(self) -> str:
        """Short name of the decode role in tables: MD (main decoder) beside a relay, else D."""
        return "MD" if self.has_relay else "D"

    def role_label(self, role: str) -> str:
        """Short name of a role in tables: P, RLD, D or MD; P+D for co-located instances."""
        if role == "decode":
            return self.decode_label
        if role in ("prefill", "split"):
            return "P+D" if self.colocated else "P"
        return "RLD"

    @property
    def caches(self) -> tuple[CacheKind, ...]:
        """The prefix caches this architecture keeps, each sized, placed and priced by
        `pddplan.cache`: every prefill keeps the prefixes behind the workload's hit rate; decoders
        fed over the WAN keep a radix cache (DRC) so that only the incremental KV crosses it, while
        RDMA-fed decoders receive the whole KV each time and keep none."""
        return (CacheKind.PREFILL, CacheKind.DECODE) if self.uses_wan else (CacheKind.PREFILL,)

    @property
    def decode_keeps_prefix_cache(self) -> bool:
        """Whether the decoders keep a radix cache of prompt KV (`caches`)."""
        return CacheKind.DECODE in self.caches

    def __repr__(self) -> str:
        return f"<architecture {self.name}>"

    # plan files ---------------------------------------------------------------------------------

    def validate(self, plan: Plan) -> None:
        """Raise ValueError when `plan`'s roles, datacenters or lines do not fit this architecture."""
        if plan.split is not None:
            raise ValueError(
                f"architecture {self.name} decodes apart from prefill; `split` (a second co-located pool) "
                "is for co-located serving (agg)"
            )
        if plan.decode is None:
            raise ValueError(f"architecture {self.name} needs decode instances (`decode`)")
        relay = plan.relay
        dedicated = relay is not None and relay.count > 0
        if self.has_relay and plan.relay_on_prefill:
            if dedicated:
                raise ValueError(
                    "relay_on_prefill = true with relay instances: the relay runs on the prefill "
                    "instances or on its own, not both; remove `relay` or set relay_on_prefill: false"
                )
        elif self.has_relay:
            if relay is None or not dedicated:
                raise ValueError(
                    f"architecture {self.name} needs relay instances (relay.count > 0) or relay_on_prefill: true"
                )
            if relay.datacenter != plan.prefill.datacenter:
                raise ValueError(
                    f"relay.datacenter = {relay.datacenter!r}: the relay must sit with prefill "
                    f"in {plan.prefill.datacenter!r} (it is fed over RDMA)"
                )
        elif dedicated or plan.relay_on_prefill:
            field = "`relay`" if dedicated else "relay_on_prefill"
            raise ValueError(f"architecture {self.name} has no relay; remove {field}")
        same_dc = plan.decode.datacenter == plan.prefill.datacenter
        if self.uses_wan:
            if same_dc:
                raise ValueError(f"architecture {self.name} puts decode in another datacenter than prefill")
            if not plan.wan:
                raise ValueError(f"architecture {self.name} needs at least one WAN line (`wan`)")
        elif not same_dc:
            raise ValueError(f"architecture {self.name} keeps prefill and decode in one datacenter")
        if not self.decode_gpu_allowed(plan.prefill.gpu, plan.decode.gpu):
            raise ValueError(
                f"decode.gpu = {plan.decode.gpu!r}: architecture {self.name} decodes on "
                f"{'the same GPU type as' if self.decode_gpu is DecodeGpu.SAME else 'another GPU type than'} "
                f"prefill ({plan.prefill.gpu!r})"
            )

    def decode_gpu_allowed(self, prefill_gpu: str, decode_gpu: str) -> bool:
        """Whether decode may run on `decode_gpu` when prefill runs on `prefill_gpu`."""
        if self.decode_gpu is DecodeGpu.SAME:
            return decode_gpu == prefill_gpu
        if self.decode_gpu is DecodeGpu.OTHER:
            return decode_gpu != prefill_gpu
        return True

    def why_unavailable(self, workload: Workload, wan_options: int) -> str | None:
        """Why the workload's deployment cannot host this architecture at all (None if it can);
        `wan_options` counts the WAN line pools that leave the home datacenter."""
        if self.uses_wan and wan_options == 0:
            return "the workload offers no WAN line option"
        return None

    # routing and handoff --------------------------------------------------------------------------

    def relay_rule(self, routing: Routing) -> Routing | None:
        """The rule that sends requests through the relay (None: no request is relayed)."""
        return routing if self.has_relay else None

    def routings(self, workload: Workload) -> list[Routing | None]:
        """The routing rules the optimizer tries for `workload`."""
        return [None]

    def default_routing(self) -> Routing | None:
        """The routing rule used where none was searched (diagnosis, fast sizing)."""
        return None

    def handoff_modes(self) -> tuple[HandoffMode, ...]:
        """Handoff modes the optimizer compares (one, irrelevant, without a relay)."""
        return ("adaptive",)

    # closed form ---------------------------------------------------------------------------------

    def first_token_delay(
        self,
        rdma_s: np.ndarray,
        wan_s: np.ndarray,
        decode_step_s: Any,
        relay_step_s: Any,
        relayed: np.ndarray,
    ) -> np.ndarray:
        """Time from the end of prefill to the first token, per class (arrays broadcast together):
        RDMA + tau_D when the KV goes by RDMA, WAN transfer + tau_D when it goes over the WAN."""
        to_decoder = rdma_s if self.transport is Transport.RDMA else wan_s
        shape = np.broadcast_shapes(np.shape(rdma_s), np.shape(wan_s), np.shape(relayed))
        return np.broadcast_to(to_decoder + decode_step_s, shape)

    def pipelines(self, relayed: np.ndarray) -> dict[Pipeline, np.ndarray]:
        """Which requests (a mask over the classes) each pipeline carries."""
        return {self.direct_pipeline: np.ones(np.shape(relayed), dtype=bool)}

    # simulation ---------------------------------------------------------------------------------

    def after_prefill(self, sim: Dispatch, request: int, t: float) -> None:
        """Send a request whose prefill finished at `t` on its way to a decoder."""
        if self.transport is Transport.RDMA:
            sim.rdma_to_decoder(request, t)
        else:
            sim.wan_to_decoder(request, t)
