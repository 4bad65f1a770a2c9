"""`pddplan export`: a plan as engine launch commands (SGLang, vLLM) or Kubernetes manifests.

    files = export_plan(scenario, "sglang").files   # file name -> text

`layout` decides what the plan means for an engine; `engines` spells it in each engine's flags;
`scripts` and `k8s` write the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pddplan.errors import InputError
from pddplan.export import outputs
from pddplan.export.engines import ENGINE_VERSIONS, ENGINES, Engine
from pddplan.export.k8s import k8s_files
from pddplan.export.layout import DEFAULT_GPUS_PER_NODE, Deployment, check_argument, deployment_of
from pddplan.export.scripts import shell_files
from pddplan.inputs import model_index
from pddplan.scenarios.scenario import Scenario

Target = Literal["sglang", "vllm", "k8s"]
TARGETS: tuple[Target, ...] = ("sglang", "vllm", "k8s")


@dataclass(frozen=True)
class Export:
    """What `export` writes: the resolved instances and file name -> text."""

    target: Target
    engine: Engine
    deployment: Deployment
    files: dict[str, str]

    def to_output(self) -> outputs.Export:
        """The typed result `export --json` prints."""
        return outputs.Export(
            target=self.target,
            engine=self.engine,
            engine_version_checked=ENGINE_VERSIONS[self.engine],
            plan=self.deployment.plan_name,
            architecture=self.deployment.architecture,
            model_path=self.deployment.model_repo,
            instances=[
                outputs.ExportInstance(
                    name=i.label,
                    role=i.role,
                    datacenter=i.datacenter,
                    gpu=i.gpu,
                    gpus=i.gpus,
                    **({"pp": i.pp} if i.pp > 1 else {}),
                    nodes=i.nodes,
                    layout=i.layout,
                    kv_transfer=i.kv_transfer,
                    max_running_requests=i.max_running_requests,
                )
                for i in self.deployment.instances
            ],
            files=self.files,
        )


def model_repo_of(model: str, model_path: str | None) -> str:
    """What the engines load: `model_path` if given, else the catalog model's Hugging Face repo."""
    if model_path:
        return model_path

    entry = model_index().get(model)
    if entry is None or not entry.get("hf_repo"):
        raise InputError(f"model {model!r} has no Hugging Face repo in the catalog: give --model-path")
    return str(entry["hf_repo"])


def check_pipeline_stages(engine: Engine, deployment: Deployment) -> None:
    """InputError when `engine` cannot run the deployment's pipeline stages as planned:
    vLLM 0.34's NixlConnector refuses pp > 1 (vLLM #40674, #52913; its push connector takes a
    pipelined prefill, vLLM #45880, with a proxy this export does not write); SGLang's decode (and
    a relay fed by prefill) runs pp 1 or the prefill's (SGLang #14265), and speculative decoding
    beside pipeline stages only experimentally, outside PD (`SGLANG_ENABLE_PP_SPEC`)."""
    staged = [i for i in deployment.instances if i.pp > 1]
    if not staged:
        return
    first = staged[0]
    where = f"{first.role}.pp = {first.pp}"
    if engine == "vllm":
        raise InputError(
            f"{where}: vLLM {ENGINE_VERSIONS['vllm'].split()[1]}'s NixlConnector does not run pipeline stages "
            "(vLLM #40674; a pipelined prefill needs its NixlPushConnector and proxy, vLLM #45880, which this "
            "export does not write); export with --target sglang, or plan without pp"
        )
    prefill_pp = {i.pp for i in deployment.instances if i.role == "prefill"}
    for instance in deployment.instances:
        if instance.role != "prefill" and instance.pp > 1 and {instance.pp} != prefill_pp:
            raise InputError(
                f"{instance.role}.pp = {instance.pp}: SGLang's decode runs pp 1 or the prefill's "
                f"({'/'.join(map(str, sorted(prefill_pp)))}; SGLang #14265)"
            )
    if deployment.mtp_draft_tokens and any(not i.colocated for i in staged):
        raise InputError(
            f"{where} with multi-token prediction (serving.mtp_draft_tokens): SGLang runs speculative decoding "
            "beside pipeline stages only experimentally and not in PD mode (SGLANG_ENABLE_PP_SPEC); "
            "plan without pp or without MTP"
        )


def export_plan(
    scenario: Scenario,
    target: Target,
    engine: Engine = "sglang",
    model_path: str | None = None,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    image: str | None = None,
    source: str = "plan",
) -> Export:
    """The launch files that realize `scenario`'s plan on `target` (k8s runs `engine`'s servers);
    errors about the plan's own values name `source` (its file)."""
    if target not in TARGETS:
        raise InputError(f"--target = {target!r}: expected one of {', '.join(TARGETS)}")
    if engine not in ENGINES:
        raise InputError(f"--engine = {engine!r}: expected one of {', '.join(ENGINES)}")
    if image is not None:
        check_argument("--image", image)
    repo = model_repo_of(scenario.workload.model, model_path)
    deployment = deployment_of(
        scenario, repo, gpus_per_node, checkpoint_given=bool(model_path), pack=target != "k8s", source=source
    )
    check_pipeline_stages(engine if target == "k8s" else target, deployment)
    if target == "k8s":
        return Export(target, engine, deployment, k8s_files(engine, deployment, image))

    return Export(target, target, deployment, shell_files(target, deployment))
