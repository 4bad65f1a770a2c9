"""A plan as the engine instances that realize it: one `EngineInstance` per instance of each role.

This is the one place that decides what a plan means for an engine (every target renders it):
- roles: `prefill`; `relay` (PDD's relay decoder, a decode server in the prefill datacenter) or
  none when the relay runs on the prefill instances; `decode` (PDD's main decoder, or a baseline's
  decoder); a co-located architecture (`Architecture.colocated`, agg) has `prefill` alone, whose
  servers run no disaggregation mode: each prefills and decodes, mixing prefill chunks into its
  decode steps;
- layout: experts expert-parallel with data-parallel attention (pddplan's EP, `Instance.uses_ep`),
  experts expert-parallel under tensor-parallel attention (`Instance.tp_attention`), or tensor
  parallelism throughout;
- nodes per instance = ceil(GPUs per instance / GPUs per node);
- limits: chunked-prefill budget, decode batch (max running requests), HBM share, KV page size,
  context length = longest prompt + longest output the workload draws;
- caches: prefix cache on prefill (the prefix hits are the point); a radix cache on the decoders
  fed over the WAN (the decode-side cache that lets only incremental KV cross);
- KV transfer: RDMA within a datacenter; TCP across the WAN line (no RDMA between datacenters);
  PDD's prefill speaks RDMA to its relay, and its WAN leg to the main decoder is PDD's own; none
  on co-located servers (the KV stays where prefill wrote it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pddplan.errors import InputError
from pddplan.inputs import load_model
from pddplan.scenarios.scenario import Scenario
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import RoleName

#: GPUs per server (Kubernetes node) unless told otherwise: an HGX board holds 8.
DEFAULT_GPUS_PER_NODE = 8
#: The most GPUs one node may be given: Huawei's CloudMatrix 384 (384 Ascend 910C in one scale-up
#: domain, Huawei Cloud, 2025) is the largest scale-up domain sold; a larger figure is a typo.
MAX_GPUS_PER_NODE = 384

_UNSAFE_IN_SCRIPTS = re.compile(r"[\x00-\x1f\x7f]")


def check_script_text(field: str, value: str) -> str:
    """`value`, refused (InputError) when it holds a control character (a newline above all).

    Values reach generated files quoted as shell words or YAML scalars, but also in comments and
    Markdown, where a newline would end the comment and let the rest of the value run as a command.
    """
    if _UNSAFE_IN_SCRIPTS.search(value):
        raise InputError(f"{field} = {value!r}: holds a control character (a newline?); export writes it into scripts")
    return value


def check_argument(field: str, value: str) -> str:
    """`value` as one argument of an engine's command line (a checkpoint, an image): refused
    (InputError) when it holds a control character (`check_script_text`) or starts with '-',
    where the engine's parser would read it as an option (`--model-path --trust-remote-code`)."""
    check_script_text(field, value)
    if value.startswith("-"):
        raise InputError(f"{field} = {value!r}: starts with '-', which the engine would read as an option")
    return value


#: How an instance's KV leaves (prefill) or arrives (decode); `none` on a co-located server.
Transport = Literal["rdma", "tcp", "none"]
#: The server's disaggregation mode: a prefill or a decode server of a PD pair, or `none` for a
#: co-located server (prefill and decode in one server, no PD mode).
Disaggregation = Literal["prefill", "decode", "none"]


@dataclass(frozen=True)
class EngineInstance:
    """One engine instance (one server process group) of a role."""

    role: RoleName
    label: str  # file and object name stem: prefill-0, relay-0, decode-1
    index: int
    datacenter: str
    gpu: str
    vendor: str  # nvidia, amd, huawei
    gpus: int
    nodes: int
    expert_parallel: bool
    tp_attention: bool  # with expert_parallel: attention tensor-parallel, not data-parallel
    disaggregation: Disaggregation
    kv_transfer: Transport  # how this instance's KV leaves (prefill) or arrives (decode)
    max_running_requests: int | None
    decode_radix_cache: bool
    quantization: str | None = None  # "fp8": the engine quantizes a 16-bit checkpoint as it loads it
    #: instances smaller than a server share one: `per_server` of them, this one in `slot` (its GPUs
    #: slot*gpus .. slot*gpus + gpus - 1 and ports offset by the slot, `engines.server_port`)
    per_server: int = 1
    slot: int = 0
    pp: int = 1  # pipeline stages: gpus / pp GPUs of tensor parallelism in each

    @property
    def tp(self) -> int:
        """GPUs of one pipeline stage (all of them without stages)."""
        return self.gpus // self.pp

    @property
    def gpu_ids(self) -> list[int] | None:
        """The GPUs of its shared server it takes (None: a server or more of its own)."""
        return None if self.per_server == 1 else list(range(self.slot * self.gpus, (self.slot + 1) * self.gpus))

    @property
    def colocated(self) -> bool:
        """Whether the server prefills and decodes (no disaggregation mode, no KV transfer)."""
        return self.disaggregation == "none"

    @property
    def decodes(self) -> bool:
        """Whether the server runs decode steps: a decode server or a co-located one."""
        return self.disaggregation != "prefill"

    @property
    def prefills(self) -> bool:
        """Whether the server runs chunked prefill: a prefill server or a co-located one."""
        return self.disaggregation != "decode"

    @property
    def gpus_per_node(self) -> int:
        return self.gpus // self.nodes

    @property
    def layout(self) -> str:
        """tp (tensor parallel throughout), ep (experts EP, data-parallel attention) or tp-ep
        (experts EP under tensor-parallel attention)."""
        if not self.expert_parallel:
            return "tp"
        return "tp-ep" if self.tp_attention else "ep"


@dataclass(frozen=True)
class Deployment:
    """Everything a target needs to write launch files for one plan."""

    plan_name: str
    architecture: str
    model_repo: str
    model_name: str
    instances: tuple[EngineInstance, ...]
    chunk_tokens: int
    page_tokens: int
    hbm_utilization: float
    context_tokens: int
    kv_dtype: str | None  # "fp8" or None (the model's own)
    mtp_draft_tokens: int
    cuda_graph_max_batch: int | None  # largest decode batch captured as a CUDA graph; None: the engine's default
    routing: dict[str, Any] | None  # PDD's routing rule and handoff, None for the baselines
    relay_on_prefill: bool
    cache_tiers: str = "hbm"  # the lowest tier the plan's prefix caches use (`serving.cache_tiers`)
    split_share: float | None = None  # a split agg plan: the share of requests its `split` servers serve

    def of_role(self, role: RoleName) -> list[EngineInstance]:
        return [i for i in self.instances if i.role == role]

    @property
    def colocated(self) -> bool:
        """Whether every server prefills and decodes (co-located serving): the router spreads
        requests over them in its regular mode, not its PD mode."""
        return all(i.colocated for i in self.instances)


def _vendor(description: str) -> str:
    """The GPU's vendor, from its profile's description (Kubernetes names its resource by vendor)."""
    text = description.lower()
    for vendor in ("nvidia", "amd", "huawei"):
        if vendor in text:
            return vendor
    return "nvidia"


def online_quantization(served: ModelArchitecture, checkpoint: ModelArchitecture) -> str | None:
    """How the engines reach the weight formats a workload asks for (`weights`, `expert_weights`)
    from the model's own checkpoint: None when they are its own; `fp8` when it is 16-bit and every
    weight is asked in FP8 (SGLang and vLLM `--quantization fp8` quantize it as they load it);
    InputError otherwise: 4-bit and mixed formats need a checkpoint quantized offline."""
    asked = (served.weight_dtype, served.expert_dtype)
    own = (checkpoint.weight_dtype, checkpoint.expert_dtype)
    if asked == own:
        return None
    if own == ("bf16", "bf16") and asked in (("fp8", "fp8"), ("fp8-block", "fp8-block")):
        return "fp8"
    raise InputError(
        f"weights {'/'.join(asked)}: the engines quantize a 16-bit checkpoint to fp8 as they load it, nothing "
        f"else; {served.name}'s own is {'/'.join(own)}: give --model-path a checkpoint already in that format"
    )


def role_quantization(scenario: Scenario, checkpoint_given: bool) -> dict[RoleName, str | None]:
    """Per role, how its engines reach the weight formats its instances store the model in
    (`online_quantization` from the model's own checkpoint); with a checkpoint the user named
    (`checkpoint_given`), none, and InputError when the roles store the model in different formats
    (one --model-path cannot be two checkpoints)."""
    formats = {
        name: (role.instance.model.weight_dtype, role.instance.model.expert_dtype)
        for name, role in scenario.roles.items()
    }
    if checkpoint_given:
        if len(set(formats.values())) > 1:
            kinds = ", ".join(f"{name} {'/'.join(f)}" for name, f in formats.items())
            raise InputError(
                f"--model-path names one checkpoint, but the roles store the model in different formats ({kinds}): "
                "export each role's servers with its own checkpoint, or give the roles one format"
            )
        return dict.fromkeys(formats, None)
    workload = scenario.workload
    checkpoint = load_model(workload.model, workload.kv_dtype)
    out: dict[RoleName, str | None] = {}
    mixed = len(set(formats.values())) > 1
    for name, role in scenario.roles.items():
        try:
            out[name] = online_quantization(role.instance.model, checkpoint)
        except InputError as exc:
            if not mixed:
                raise
            raise InputError(f"{name}: {exc}") from None  # say which role asks for it
    return out


def deployment_of(
    scenario: Scenario,
    model_repo: str,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    checkpoint_given: bool = False,
    pack: bool = False,
    source: str = "plan",
) -> Deployment:
    """The engine instances that realize `scenario`'s plan; InputError when an instance's GPUs do
    not fill whole nodes (a 12-GPU instance on 8-GPU nodes). `checkpoint_given`: the user named
    the checkpoint (`--model-path`), which is then taken to be in the workload's weight formats
    (no online quantization). `pack`: a role's instances smaller than a node share nodes,
    floor(gpus_per_node / tp) to a node (launch scripts; a Kubernetes scheduler packs pods itself).
    Errors about the plan's own values name `source` (its file)."""
    if not 1 <= gpus_per_node <= MAX_GPUS_PER_NODE:
        raise InputError(f"--gpus-per-node = {gpus_per_node}: must be 1 to {MAX_GPUS_PER_NODE}")
    plan, workload = scenario.plan, scenario.workload
    check_argument("model_path", model_repo)
    check_script_text("workload model", workload.model)
    check_script_text(f"{source}: name", plan.name)
    wan = scenario.architecture.uses_wan
    colocated = scenario.architecture.colocated
    quantization = role_quantization(scenario, checkpoint_given)
    instances: list[EngineInstance] = []
    for role_name, role in scenario.roles.items():
        width = role.gpus_per_instance
        per_node = min(gpus_per_node, width)
        if width % per_node:
            raise InputError(
                f"{role_name}: {width} GPUs per instance do not fill whole {gpus_per_node}-GPU nodes "
                "(set --gpus-per-node to your servers' GPU count)"
            )
        check_script_text(f"{source}: {role_name}.datacenter", role.spec.datacenter)
        check_script_text(f"{source}: {role_name}.gpu", role.spec.gpu)
        is_decode = role_name != "prefill"
        # KV crosses the WAN by TCP (no RDMA between datacenters). PDD's prefill servers speak
        # RDMA, to the relay beside them: the P -> MD leg over the WAN is PDD's own transfer,
        # which stock engines lack (the export's README says so).
        crosses_wan = role_name == "decode" or (role_name == "prefill" and not scenario.architecture.has_relay)
        transport: Transport = "none" if colocated else "tcp" if wan and crosses_wan else "rdma"
        mode: Disaggregation = "none" if colocated else "decode" if is_decode else "prefill"
        per_server = min(max(gpus_per_node // width, 1), role.count) if pack else 1
        instances.extend(
            EngineInstance(
                role=role_name,
                label=f"{role_name}-{index}",
                index=index,
                datacenter=role.spec.datacenter,
                gpu=role.spec.gpu,
                vendor=_vendor(role.instance.hardware.description),
                gpus=width,
                nodes=width // per_node,
                pp=role.spec.pp,
                expert_parallel=role.instance.uses_ep,
                tp_attention=role.instance.tp_attention,
                disaggregation=mode,
                kv_transfer=transport,
                max_running_requests=scenario.fixed_decode_batch if mode != "prefill" else None,
                decode_radix_cache=role_name == "decode" and scenario.architecture.decode_keeps_prefix_cache,
                quantization=quantization[role_name],
                per_server=per_server,
                slot=index % per_server,
            )
            for index in range(role.count)
        )
    routing = None
    if scenario.architecture.has_relay:
        routing = {
            "routing": plan.routing.model_dump(mode="json"),
            "handoff": plan.handoff.model_dump(mode="json"),
        }
    mtp = workload.serving.mtp()
    return Deployment(
        plan_name=plan.name,
        architecture=plan.architecture,
        model_repo=model_repo,
        model_name=workload.model,
        instances=tuple(instances),
        chunk_tokens=scenario.chunk_tokens,
        page_tokens=workload.serving.page_tokens,
        hbm_utilization=workload.serving.hbm_utilization,
        context_tokens=workload.prompt_tokens.largest() + workload.output_tokens.largest(),
        kv_dtype="fp8" if workload.kv_dtype == "fp8" else None,
        mtp_draft_tokens=workload.serving.mtp_draft_tokens if mtp is not None else 0,
        cuda_graph_max_batch=workload.serving.cuda_graph_max_batch,
        routing=routing,
        relay_on_prefill=scenario.relay_colocated,
        cache_tiers=workload.serving.cache_tiers,
        split_share=plan.split.share if plan.split is not None else None,
    )


def nodes_total(deployment: Deployment) -> int:
    """Servers the deployment occupies (a shared server counted once, by its first slot's instance)."""
    return sum(i.nodes for i in deployment.instances if i.slot == 0)
