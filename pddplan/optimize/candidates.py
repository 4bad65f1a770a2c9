"""What the optimizer may choose among: instance candidates per role and WAN line pools.

An instance candidate is (datacenter, GPU type, TP degree, parallel layout) where the model fits.
An MoE model gets three layouts inside one scale-up domain: tensor parallelism throughout; expert
parallelism with data-parallel attention (what DeepSeek-style deployments run: no KV copies per
rank, so more sequences fit, at the price of a full copy of the non-expert weights per rank and of
one rank doing a lone request's attention and dense layers); and experts expert-parallel under
tensor-parallel attention (`Instance.tp_attention`: the same weights and KV per GPU as tensor
parallelism, each rank's experts whole, so its grouped GEMMs and permutation run on its own share of
the rows; faster than TP for long prefills, never for decode). Across domains the experts are always
expert-parallel, under data-parallel or tensor-parallel attention. A WAN
configuration is a directed datacenter pair (prefill and relay at the source, main decode at the
destination) with a count of lines per option joining them; all configurations of all pairs are
enumerated, so nothing assumes exactly two datacenters.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from pddplan.errors import LayoutError
from pddplan.inputs.input_set import InputSet
from pddplan.net.lines import LinePool, pool_lines
from pddplan.perf.memory import fits, instance_kv_capacity_bytes, prompt_room
from pddplan.perf.roofline import Instance
from pddplan.scenarios.scenario import gpu_price
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import RoleName, RoleSpec
from pddplan.specs.workload import GpuOffer, WanLineOption, Workload


@dataclass(frozen=True)
class Candidate:
    """One kind of instance: `tp` x `pp` GPUs of `gpu` in `datacenter` (`pp` pipeline stages of
    `tp` each); `expert_parallel` and `tp_attention` say the layout of an MoE model's instance
    outright (so a written plan does too), None and False for a dense model."""

    datacenter: str
    gpu: str
    tp: int
    instance: Instance
    usd_per_hour: float
    kv_capacity_bytes: float
    max_count: int
    expert_parallel: bool | None = None
    tp_attention: bool = False
    pp: int = 1

    @property
    def gpus_per_instance(self) -> int:
        """tp x pp."""
        return self.tp * self.pp

    @property
    def key(self) -> str:
        layout = ("/ep" if self.expert_parallel else "") + ("/tp-attention" if self.tp_attention else "")
        stages = f"/pp{self.pp}" if self.pp > 1 else ""
        return f"{self.datacenter}/{self.gpu}/tp{self.tp}" + stages + layout

    def role(self, count: int) -> RoleSpec:
        """`count` instances of this kind, as a plan's role."""
        return RoleSpec(
            datacenter=self.datacenter,
            gpu=self.gpu,
            tp=self.tp,
            count=count,
            expert_parallel=self.expert_parallel,
            tp_attention=self.tp_attention,
            pp=self.pp,
        )


def holds_longest_prompt(candidate: Candidate, workload: Workload) -> bool:
    """Whether one instance of the kind holds the KV of the longest prompt the workload can draw
    (`prompt_room` >= 1): a prefill instance keeps it until it is sent, a relay or decoder receives it."""
    longest = workload.prompt_tokens.largest()
    room = prompt_room(candidate.kv_capacity_bytes, candidate.instance, longest, workload.serving.page_tokens)
    return room >= 1


def layouts(model: ModelArchitecture, tp: int, domain: int) -> list[tuple[bool | None, bool]]:
    """(expert_parallel, tp_attention) layouts to try: the default rule (TP inside one scale-up
    domain, EP with data-parallel attention beyond it), plus, for an MoE model on more than one GPU,
    EP with data-parallel attention inside a domain and EP under tensor-parallel attention."""
    if model.moe is None or tp == 1:
        return [(None, False)]
    if tp <= domain:
        return [(None, False), (True, False), (True, True)]
    return [(None, False), (True, True)]


# Widest instance tried by default, in scale-up domains: production MoE deployments run expert
# parallelism over several nodes (DeepSeek's decode instances span dozens of GPUs), with the
# all-to-all over the scale-out NICs priced by the step model.
DEFAULT_MAX_DOMAINS = 8


def tp_degrees(workload: Workload, domain: int) -> list[int]:
    """Instance widths (GPUs per instance) to try: the workload's list, else powers of two up to
    DEFAULT_MAX_DOMAINS scale-up domains."""
    if workload.deployment.tp_options:
        return sorted(set(workload.deployment.tp_options))
    degrees, tp = [], 1
    while tp <= DEFAULT_MAX_DOMAINS * domain:
        degrees.append(tp)
        tp *= 2
    return degrees


def stage_splits(model: ModelArchitecture, width: int, domain: int) -> list[tuple[int, int]]:
    """(tp, pp) splits of an instance of `width` GPUs to try: tensor parallelism over all of them,
    and, for a dense model wider than one scale-up domain, tensor parallelism inside each domain
    and one pipeline stage per domain (how engines run a dense model too large for one node: TP
    within a node, PP across). An MoE model spreads its experts across domains instead."""
    splits = [(width, 1)]
    if model.moe is None and width > domain and width % domain == 0 and width // domain <= model.num_layers:
        splits.append((domain, width // domain))
    return splits


def instance_widths(inputs: InputSet) -> dict[str, list[int]]:
    """The instance widths (GPUs per instance) tried per offered GPU type."""
    workload = inputs.workload
    return {gpu: tp_degrees(workload, inputs.hardware_for(gpu).scale_up_domain) for gpu in sorted(inputs.hardware)}


class TriedLayout(NamedTuple):
    """One (datacenter, GPU offer, width, TP x PP split, layout) the search tries; `instance` is None
    when the engines refuse the layout (`LayoutError`: tensor-parallel attention over a tp that does
    not divide the heads)."""

    datacenter: str
    offer: GpuOffer
    hardware: HardwareProfile
    width: int
    tp: int
    pp: int
    tp_attention: bool
    instance: Instance | None


def tried_layouts(inputs: InputSet, role: RoleName = "prefill") -> Iterator[TriedLayout]:
    """Every layout the search tries, the narrowest first within a GPU (`tp_degrees`,
    `stage_splits`, `layouts`), its instances storing the model as `role`'s do
    (`InputSet.model_for`)."""
    workload, model = inputs.workload, inputs.model_for(role)
    for dc in workload.deployment.datacenters:
        for offer in dc.gpus:
            if offer.max_count == 0:
                continue
            hardware = inputs.hardware_for(offer.type)
            domain = hardware.scale_up_domain
            for width in tp_degrees(workload, domain):
                if width > offer.max_count:
                    continue
                for tp, pp in stage_splits(model, width, domain):
                    for layout, tp_attention in layouts(model, tp, domain):
                        try:
                            instance: Instance | None = Instance(
                                model,
                                hardware,
                                tp,
                                layout,
                                tp_attention=tp_attention,
                                stack=workload.serving.stack,
                                mtp=workload.serving.mtp(),
                                cuda_graph_max_batch=workload.serving.cuda_graph_max_batch,
                                context_cv=min(workload.decode_context_cv(), 10.0),
                                pp=pp,
                            )
                        except LayoutError:
                            instance = None
                        yield TriedLayout(dc.name, offer, hardware, width, tp, pp, tp_attention, instance)


def refused_tps(inputs: InputSet) -> list[int]:
    """The tensor-parallel degrees the search tried and the engines refuse (`TriedLayout`)."""
    return sorted({tried.tp for tried in tried_layouts(inputs) if tried.instance is None})


def instance_candidates(inputs: InputSet, chunk_tokens: int, role: RoleName = "prefill") -> list[Candidate]:
    """Every layout the search tries (`tried_layouts`) that the engines start and the model fits on."""
    workload = inputs.workload
    utilization = workload.serving.hbm_utilization
    out = []
    for tried in tried_layouts(inputs, role):
        instance = tried.instance
        if instance is None or not fits(instance, utilization, chunk_tokens):
            continue
        out.append(
            Candidate(
                datacenter=tried.datacenter,
                gpu=tried.offer.type,
                tp=tried.tp,
                instance=instance,
                usd_per_hour=tried.width * gpu_price(tried.hardware, workload, tried.datacenter, tried.offer.type),
                kv_capacity_bytes=instance_kv_capacity_bytes(instance, utilization, chunk_tokens),
                max_count=tried.offer.max_count // tried.width,
                expert_parallel=instance.uses_ep if instance.model.moe is not None else None,
                tp_attention=tried.tp_attention,
                pp=tried.pp,
            )
        )
    return out


def wan_configs(inputs: InputSet) -> list[LinePool]:
    """Every non-empty combination of line counts per ordered datacenter pair."""
    options = inputs.workload.deployment.wan_lines
    pairs: dict[tuple[str, str], list[WanLineOption]] = {}
    for option in options:
        a, b = option.between
        pairs.setdefault((a, b), []).append(option)
        pairs.setdefault((b, a), []).append(option)
    out = []
    for (source, target), pair_options in sorted(pairs.items()):
        ranges = [range(option.max_lines + 1) for option in pair_options]
        for counts in itertools.product(*ranges):
            if not any(counts):
                continue
            leased = [(option, n) for option, n in zip(pair_options, counts, strict=True) if n]
            out.append(pool_lines(source, target, leased, inputs.traces))
    return out
