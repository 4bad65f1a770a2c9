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
from pddplan.export.layout import DEFAULT_GPUS_PER_NODE, Deployment, check_script_text, deployment_of
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


def export_plan(
    scenario: Scenario,
    target: Target,
    engine: Engine = "sglang",
    model_path: str | None = None,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    image: str | None = None,
) -> Export:
    """The launch files that realize `scenario`'s plan on `target` (k8s runs `engine`'s servers)."""
    if target not in TARGETS:
        raise InputError(f"--target = {target!r}: expected one of {', '.join(TARGETS)}")
    if engine not in ENGINES:
        raise InputError(f"--engine = {engine!r}: expected one of {', '.join(ENGINES)}")
    if image is not None:
        check_script_text("--image", image)
    repo = model_repo_of(scenario.workload.model, model_path)
    deployment = deployment_of(scenario, repo, gpus_per_node, checkpoint_given=bool(model_path), pack=target != "k8s")
    if target == "k8s":
        return Export(target, engine, deployment, k8s_files(engine, deployment, image))

    return Export(target, target, deployment, shell_files(target, deployment))
