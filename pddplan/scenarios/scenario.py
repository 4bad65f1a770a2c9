"""A plan resolved against its workload: loaded model and GPUs, instances per role, pooled WAN lines.

This is where a plan is checked for what a schema cannot see: a role on a GPU type its datacenter
lacks, more GPUs than the datacenter offers, a model that does not fit, a WAN option that does not
join the two datacenters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pddplan import architectures
from pddplan.architectures import Architecture
from pddplan.cache.accounting import CacheSite, cache_site
from pddplan.cache.sessions import CacheKind
from pddplan.errors import InputError
from pddplan.inputs.input_set import InputSet
from pddplan.net.lines import LinePool, pool_lines
from pddplan.perf.kv import request_kv_bytes
from pddplan.perf.memory import instance_kv_capacity_bytes, memory_budget, prompt_room
from pddplan.perf.roofline import Instance
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import Plan, RoleName, RoleSpec
from pddplan.specs.workload import WanLineOption, Workload


@dataclass(frozen=True)
class Role:
    """The instances of one role, resolved."""

    name: RoleName
    spec: RoleSpec
    instance: Instance
    usd_per_gpu_hour: float
    kv_capacity_bytes: float

    @property
    def count(self) -> int:
        return self.spec.count

    @property
    def tp(self) -> int:
        return self.spec.tp

    @property
    def gpus_per_instance(self) -> int:
        return self.spec.gpus_per_instance

    @property
    def gpus(self) -> int:
        return self.spec.gpus

    @property
    def usd_per_hour(self) -> float:
        return self.gpus * self.usd_per_gpu_hour


@dataclass(frozen=True)
class Scenario:
    """Everything evaluation and simulation need, in SI units."""

    plan: Plan
    workload: Workload
    model: ModelArchitecture
    roles: dict[RoleName, Role]
    link: LinePool | None
    chunk_tokens: int
    max_decode_batch: int  # the cap a decoder's batch may reach (the search's limit when none is set)
    fixed_decode_batch: int | None = None  # the cap the plan or the workload sets (None: memory and TPOT decide)

    @property
    def architecture(self) -> Architecture:
        return architectures.get(self.plan.architecture)

    @property
    def prefill(self) -> Role:
        return self.roles["prefill"]

    @property
    def decode(self) -> Role:
        """The decode instances; co-located serving decodes on the prefill instances (priced and
        counted under prefill)."""
        if self.architecture.colocated:
            return replace(self.prefill, name="decode")
        return self.roles["decode"]

    @property
    def colocated_pool(self) -> str | None:
        """The decoder pool whose tokens ride in the prefill instances' steps: "decode" under
        co-located serving, "relay" for a relay on the prefill instances, else None."""
        if self.architecture.colocated:
            return "decode"
        return "relay" if self.relay_colocated else None

    @property
    def relay(self) -> Role | None:
        """The relay's instances: its own, or the prefill instances when it runs on them
        (`relay_colocated`; those are priced and counted under prefill)."""
        if self.plan.relay_on_prefill:
            return replace(self.prefill, name="relay")
        return self.roles.get("relay")

    @property
    def relay_colocated(self) -> bool:
        """Whether the relay decodes on the prefill instances (`pddplan.perf.mixed`)."""
        return self.plan.relay_on_prefill and self.architecture.has_relay

    @property
    def rate_rps(self) -> float:
        """Requests/s the deployment serves: the plan's own rate, else the workload's."""
        return self.plan.rate_rps or self.workload.arrival.rate_rps

    @property
    def cost_per_hour(self) -> float:
        """GPU rental (or amortized purchase) plus line leases, $ per hour."""
        gpus = sum(role.usd_per_hour for role in self.roles.values())
        return gpus + (self.link.usd_per_hour if self.link else 0.0)

    def gpus_by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for role in self.roles.values():
            out[role.spec.gpu] = out.get(role.spec.gpu, 0) + role.gpus
        return out

    @property
    def longest_prompt_kv_bytes(self) -> float:
        """KV of the longest prompt the workload draws: what a prefill instance keeps room for
        (the prompt it prefills, until the KV is sent)."""
        workload = self.workload
        return float(request_kv_bytes(self.model, workload.prompt_tokens.largest(), workload.serving.page_tokens))

    def cache(self, kind: CacheKind, rate_rps: float | None = None, scale: float = 1.0) -> CacheSite | None:
        """The architecture's cache `kind` at `rate_rps` (default: the plan's rate), placed over its
        pool (`pddplan.cache`); None when the architecture keeps no such cache. The prefill
        instances leave HBM room for the longest prompt in flight; a main decoder's radix cache may
        take all of its KV memory (the batch shrinks by what it takes)."""
        if kind not in self.architecture.caches:
            return None
        rate = self.rate_rps if rate_rps is None else rate_rps
        if kind is CacheKind.PREFILL:
            role, room = self.prefill, self.prefill.kv_capacity_bytes - self.longest_prompt_kv_bytes
        else:
            role, room = self.decode, self.decode.kv_capacity_bytes
        return cache_site(kind, self.workload, self.model, (role.instance, role.count, room), rate, scale)

    def cache_hbm_bytes_per_instance(self, kind: CacheKind, rate_rps: float | None = None, scale: float = 1.0) -> float:
        """HBM one instance of `kind`'s pool gives its cache (what the lower tiers cannot hold)."""
        site = self.cache(kind, rate_rps, scale)
        return site.placement.hbm_bytes_per_instance if site is not None else 0.0


def gpu_price(hardware: HardwareProfile, workload: Workload, datacenter: str, offer_type: str | None = None) -> float:
    """$ per GPU-hour of `hardware` in `datacenter`: the override of the offer named `offer_type`
    (as the workload writes it: a profile name or a file path; default the profile's name), else
    the profile's price."""
    dc = workload.deployment.datacenter(datacenter)
    for offer in dc.gpus:
        if offer.type == (offer_type or hardware.name) and offer.usd_per_gpu_hour is not None:
            return offer.usd_per_gpu_hour
    return hardware.cost_usd_per_gpu_hour(workload.deployment.price_basis)


def build_scenario(plan: Plan, inputs: InputSet, source: str = "plan") -> Scenario:
    """Resolve `plan` against the workload of `inputs`; InputError naming the plan field when they disagree."""
    workload, model = inputs.workload, inputs.model
    if plan.drc_retention_s is not None:  # the plan runs its own radix-cache retention
        serving = workload.serving.model_copy(update={"drc_retention_s": plan.drc_retention_s})
        workload = workload.model_copy(update={"serving": serving})
    chunk = plan.chunk_tokens or workload.serving.chunk_tokens
    roles: dict[RoleName, Role] = {}
    used: dict[tuple[str, str], int] = {}
    dc_names = [dc.name for dc in workload.deployment.datacenters]
    for name, spec in plan.roles().items():
        if spec.datacenter not in dc_names:
            raise InputError(
                f"{source}: {name}.datacenter = {spec.datacenter!r}: not a datacenter of workload "
                f"'{workload.name}' ({', '.join(dc_names)})"
            )
        offers = {offer.type: offer for offer in workload.deployment.datacenter(spec.datacenter).gpus}
        if spec.gpu not in offers:
            raise InputError(
                f"{source}: {name}.gpu = {spec.gpu!r}: datacenter {spec.datacenter} offers only {', '.join(offers)}"
            )
        hardware = inputs.hardware_for(spec.gpu)
        decodes_in_prefill = architectures.get(plan.architecture).colocated or plan.relay_on_prefill
        if spec.pp > 1 and name in ("prefill", "split") and decodes_in_prefill:
            raise InputError(
                f"{source}: {name}.pp = {spec.pp}: decode tokens riding in a pipelined instance's prefill steps "
                "(agg, or a relay on the prefill instances) are not modelled; use pp 1 for these instances"
            )
        try:
            instance = Instance(
                inputs.model_for(name, spec),
                hardware,
                spec.tp,
                spec.expert_parallel,
                stack=workload.serving.stack,
                mtp=workload.serving.mtp(),
                tp_attention=spec.tp_attention,
                cuda_graph_max_batch=workload.serving.cuda_graph_max_batch,
                context_cv=min(workload.decode_context_cv(), 10.0),
                pp=spec.pp,
            )
            memory_budget(instance, workload.serving.hbm_utilization, chunk)
        except InputError as exc:
            raise InputError(f"{source}: {name}: {exc}") from None
        kv_capacity = instance_kv_capacity_bytes(instance, workload.serving.hbm_utilization, chunk)
        _check_prompt_room(name, spec, instance, kv_capacity, inputs, source)
        key = (spec.datacenter, spec.gpu)
        used[key] = used.get(key, 0) + spec.gpus
        if used[key] > offers[spec.gpu].max_count:
            raise InputError(
                f"{source}: {name}: {used[key]} x {spec.gpu} in {spec.datacenter} exceeds the "
                f"{offers[spec.gpu].max_count} the datacenter offers"
            )
        roles[name] = Role(
            name=name,
            spec=spec,
            instance=instance,
            usd_per_gpu_hour=gpu_price(hardware, workload, spec.datacenter, spec.gpu),
            kv_capacity_bytes=kv_capacity,
        )
    link = _build_link(plan, inputs, source) if architectures.get(plan.architecture).uses_wan else None
    return Scenario(
        plan=plan,
        workload=workload,
        model=model,
        roles=roles,
        link=link,
        chunk_tokens=chunk,
        max_decode_batch=plan.max_decode_batch or workload.serving.decode_batch_limit,
        fixed_decode_batch=plan.max_decode_batch or workload.serving.max_decode_batch,
    )


def _check_prompt_room(
    name: RoleName, spec: RoleSpec, instance: Instance, kv_capacity_bytes: float, inputs: InputSet, source: str
) -> None:
    """InputError when one instance of a role cannot hold the KV of the longest prompt the workload
    can draw (prefill keeps it until it is sent; a relay or decoder receives all of it)."""
    workload = inputs.workload
    longest = workload.prompt_tokens.largest()
    if prompt_room(kv_capacity_bytes, instance, longest, workload.serving.page_tokens) >= 1:
        return
    need = float(request_kv_bytes(instance.model, longest, workload.serving.page_tokens))
    raise InputError(
        f"{source}: {name}: one {spec.gpu} TP{spec.tp}{f' PP{spec.pp}' if spec.pp > 1 else ''} instance keeps "
        f"{kv_capacity_bytes / 1e9:.3g} GB of KV "
        f"(over {instance.kv_pools} rank pool(s)), but the longest prompt ({longest:,} tokens) needs "
        f"{need / 1e9:.3g} GB; use more GPUs per instance, GPUs with more memory, or a smaller kv_dtype"
    )


def _build_link(plan: Plan, inputs: InputSet, source: str) -> LinePool:
    workload = inputs.workload
    decode = plan.decode
    assert decode is not None  # architectures over the WAN have decoders (`Architecture.validate`)
    options = {option.name: option for option in workload.deployment.wan_lines}
    ends = {plan.prefill.datacenter, decode.datacenter}
    leases: list[tuple[WanLineOption, int]] = []
    for index, lease in enumerate(plan.wan):
        if lease.option not in options:
            known = ", ".join(options) or "none"
            raise InputError(
                f"{source}: wan[{index}].option = {lease.option!r}: not a WAN option of the workload ({known})"
            )
        option = options[lease.option]
        if set(option.between) != ends:
            raise InputError(
                f"{source}: wan[{index}].option = {lease.option!r} joins {option.between[0]}-{option.between[1]}, "
                f"not {plan.prefill.datacenter}-{decode.datacenter}"
            )
        if lease.count > option.max_lines:
            raise InputError(
                f"{source}: wan[{index}].count = {lease.count}: option {lease.option} allows at most {option.max_lines}"
            )
        leases.append((option, lease.count))
    return pool_lines(plan.prefill.datacenter, decode.datacenter, leases, inputs.traces)
