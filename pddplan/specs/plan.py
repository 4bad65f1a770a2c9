"""Plan files: one concrete deployment to evaluate or simulate (what `optimize --output` writes).

A plan names an architecture, the instances of each role (GPU type, TP degree, count, datacenter),
the WAN lines leased, and the serving policies: routing threshold, singular-traffic filtering,
handoff mode, chunk size and decode batch limit.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from pddplan.specs.common import (
    ChunkTokens,
    Fraction,
    Name,
    NonNegativeInt,
    NonNegativeSeconds,
    PositiveFloat,
    PositiveInt,
    RateRps,
    StrictModel,
    TokenCount,
)
from pddplan.specs.precision import WeightDtype
from pddplan.support.limits import MAX_PIPELINE_STAGES

# An architecture's name, as `pddplan.architectures` registers it (checked when a plan is read).
ArchitectureName = str
RoleName = Literal["prefill", "relay", "decode", "split"]
HandoffMode = Literal["one-shot", "catch-up", "adaptive"]


class RoleSpec(StrictModel):
    """Instances of one role: `count` instances of `tp` x `pp` GPUs of type `gpu` in `datacenter`."""

    datacenter: Name
    gpu: str = Field(min_length=1)
    tp: PositiveInt
    count: NonNegativeInt
    pp: int = Field(
        default=1,
        ge=1,
        le=MAX_PIPELINE_STAGES,
        description="pipeline-parallel stages, each the next layers on its own tp GPUs (SGLang --pp-size, "
        "vLLM --pipeline-parallel-size); tp x pp GPUs per instance",
    )
    expert_parallel: bool | None = Field(
        default=None, description="None: EP for MoE models spanning more than one scale-up domain"
    )
    tp_attention: bool = Field(
        default=False,
        description="with expert parallelism: attention tensor-parallel (SGLang --tp N --ep N), not data-parallel",
    )
    weights: WeightDtype | None = Field(
        default=None, description="this role's weight format (default: the workload's role_weights, then weights)"
    )
    expert_weights: WeightDtype | None = Field(
        default=None, description="this role's routed experts' format, after `weights`"
    )

    @property
    def gpus_per_instance(self) -> int:
        """tp x pp."""
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        return self.gpus_per_instance * self.count

    @model_serializer(mode="wrap")
    def _written_without_the_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A plan file names `pp`, `tp_attention` and the weight formats only where they are set:
        plans written before them read alike."""
        data: dict[str, Any] = handler(self)
        if self.pp == 1:
            data.pop("pp", None)
        if not self.tp_attention:
            data.pop("tp_attention", None)
        for name in ("weights", "expert_weights"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class SplitPool(RoleSpec):
    """Co-located serving (agg) on a second GPU type: these instances serve `share` of the
    requests, `prefill`'s the rest. The router keeps a session on one pool, so each pool's prefix
    cache holds its own sessions and finds the workload's hit rate."""

    share: float = Field(gt=0.0, lt=1.0, description="the share of requests these instances serve (0 to 1, exclusive)")

    def as_role(self) -> RoleSpec:
        """The instances alone, as a role of a one-pool plan."""
        return RoleSpec.model_validate(self.model_dump(exclude={"share"}))


class WanLease(StrictModel):
    """Lines of one WAN option (named in the workload's `deployment.wan_lines`)."""

    option: Name
    count: PositiveInt


class Routing(StrictModel):
    """Which requests take P -> RLD -> MD instead of P -> MD (pdd only).

    hit:   a request whose prefix hit rate is below `hit_threshold` goes through the relay.
    bytes: a request whose incremental KV exceeds `incremental_bytes_threshold` goes through it.
    """

    kind: Literal["hit", "bytes"] = "hit"
    hit_threshold: Fraction = 0.9
    incremental_bytes_threshold: PositiveFloat = 1e9
    singular_filter: bool = Field(
        default=True, description="cancel the WAN transfer of a request the relay finishes first"
    )


class Handoff(StrictModel):
    """How the relay hands a request to the main decoder, by token IDs.

    one-shot: all eager tokens at once (RLD freed soonest, one bigger hiccup).
    catch-up: chunks while the RLD keeps decoding, until fewer than `catchup_threshold_tokens`
              remain (smaller hiccups, RLD busy longer).
    adaptive: catch-up while relay utilization is below `adaptive_load_threshold`, else one-shot.
    """

    mode: HandoffMode = "adaptive"
    catchup_threshold_tokens: TokenCount = 64
    adaptive_load_threshold: Fraction = 0.7


class Plan(StrictModel):
    """One deployment of one workload."""

    name: str = Field(default="plan", min_length=1)
    architecture: ArchitectureName = Field(json_schema_extra=lambda schema: _architecture_enum(schema))
    prefill: RoleSpec
    relay: RoleSpec | None = None
    relay_on_prefill: bool = Field(
        default=False,
        description=(
            "the relay decodes on the prefill instances, its tokens mixed into their chunked-prefill "
            "steps, instead of on relay instances of its own (then leave out `relay`)"
        ),
    )
    decode: RoleSpec | None = Field(
        default=None, description="the (main) decode instances; left out by co-located serving (agg)"
    )
    split: SplitPool | None = Field(
        default=None,
        description="co-located serving (agg) only: a second pool of instances, on another GPU type, that serves "
        "`share` of the requests",
    )
    wan: list[WanLease] = Field(default_factory=list)
    routing: Routing = Routing()
    handoff: Handoff = Handoff()
    rate_rps: RateRps | None = Field(
        default=None,
        description="requests/s this plan serves; traffic beyond it is shed at admission. Default: the workload's rate",
    )
    chunk_tokens: ChunkTokens | None = Field(default=None, description="default: the workload's")
    max_decode_batch: PositiveInt | None = Field(default=None, description="default: the workload's")
    drc_retention_s: NonNegativeSeconds | None = Field(
        default=None, description="the main decoders' radix-cache retention this plan runs; default: the workload's"
    )

    @model_serializer(mode="wrap")
    def _written_without_a_split(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A plan file names `split` only where it has one: plans written before it read alike."""
        data: dict[str, Any] = handler(self)
        if self.split is None:
            data.pop("split", None)
        return data

    @field_validator("architecture")
    @classmethod
    def _known(cls, name: str) -> str:
        known = architecture_rules().names()
        if name not in known:
            raise ValueError(f"unknown architecture {name!r}: expected one of {', '.join(known)}")
        return name

    @model_validator(mode="after")
    def _shape(self) -> Plan:
        if self.decode is not None and self.decode.count == 0:
            raise ValueError("decode.count = 0: a plan needs at least one (main) decode instance")
        if self.prefill.count == 0:
            raise ValueError("prefill.count = 0: a plan needs at least one prefill instance")
        if self.split is not None and self.split.count == 0:
            raise ValueError("split.count = 0: a second pool needs at least one instance (or leave out `split`)")
        architecture_rules().validate(self)
        return self

    def with_count(self, role: RoleName, count: int) -> Plan:
        """This plan with `count` instances of `role` (its other fields as they are)."""
        spec = getattr(self, role)
        return self.model_copy(update={role: spec.model_copy(update={"count": count})})

    def roles(self) -> dict[RoleName, RoleSpec]:
        """The roles present, by name."""
        out: dict[RoleName, RoleSpec] = {"prefill": self.prefill}
        if self.relay is not None and self.relay.count > 0:
            out["relay"] = self.relay
        if self.decode is not None:
            out["decode"] = self.decode
        if self.split is not None:
            out["split"] = self.split
        return out


def _architecture_enum(schema: dict[str, Any]) -> None:
    """JSON Schema of `architecture`: the registered names (looked up when the schema is written)."""
    schema["enum"] = list(architecture_rules().names())


class ArchitectureRules(Protocol):
    """What a plan is checked against: the architectures registered and each one's rules for its
    roles, datacenters and lines. The registry (`pddplan.architectures`, a layer above the specs)
    registers itself here when it is imported, as plug-ins do: the specs never import it."""

    def names(self) -> tuple[str, ...]: ...

    def validate(self, plan: Plan) -> None:
        """Raise ValueError when `plan` does not fit its architecture."""


_RULES: list[ArchitectureRules] = []


def register_architecture_rules(rules: ArchitectureRules) -> None:
    """Check plans against `rules` from now on (`pddplan.architectures` calls it on import)."""
    _RULES[:] = [rules]


def architecture_rules() -> ArchitectureRules:
    """The registered rules; importing `pddplan` registers the shipped architectures."""
    if not _RULES:
        raise RuntimeError("no architecture registry: import pddplan.architectures before validating a plan")
    return _RULES[0]
