"""`export --target k8s`: Kubernetes manifests, one file per datacenter.

Each instance is a Deployment (one node) or a LeaderWorkerSet (several nodes; LWS injects
LWS_LEADER_ADDRESS and LWS_WORKER_INDEX into every pod), with a Service in front of its head pod.
Pods ask for the instance's GPUs by the vendor's device-plugin resource and land on nodes
labelled with the datacenter and GPU type (`pddplan/datacenter`, `pddplan/gpu`: label your nodes so).
The router runs in the prefill datacenter (PD mode; regular mode over co-located servers); for
PDD a ConfigMap carries the routing rule. The manifests assume one cluster whose nodes span both
datacenters (or a multi-cluster Service mesh that resolves the Service names across them).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import yaml

from pddplan.export.engines import (
    ENGINE_VERSIONS,
    ROUTER_PORT,
    SERVER_PORT,
    SGLANG_BOOTSTRAP_PORT,
    Engine,
    NodeContext,
    Shell,
    headless,
    router_args,
    server_args,
    server_env,
)
from pddplan.export.layout import Deployment, EngineInstance
from pddplan.export.scripts import colocated_notes, pdd_router_config, render_command

GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "huawei": "huawei.com/Ascend910"}
#: The images of the releases the generated flags were checked against (`engines.ENGINE_VERSIONS`),
#: never `latest`, whose flags move under the manifests. Tags follow each project's published scheme:
#: lmsysorg/sglang `vX.Y.Z-cu130` (as tagged for v0.5.11-v0.5.19 in SemiAnalysisAI/InferenceX's configs;
#: SGLang's install docs: CUDA 13 images only after v0.5.19), vllm/vllm-openai `vX.Y.Z`. Not pulled
#: here (no network at run time): a registry without the tag needs `--image`.
DEFAULT_IMAGE: dict[Engine, str] = {"sglang": "lmsysorg/sglang:v0.5.23-cu130", "vllm": "vllm/vllm-openai:v0.34.0"}
DATACENTER_LABEL = "pddplan/datacenter"
GPU_LABEL = "pddplan/gpu"
LWS_API = "leaderworkerset.x-k8s.io/v1"


class _Dumper(yaml.SafeDumper):
    """YAML with multi-line strings (commands, the routing file) as literal blocks, readable."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def dns_name(text: str) -> str:
    """`text` as a Kubernetes object name (RFC 1123 label: lowercase letters, digits and '-', at
    most 63 characters, starting and ending with an alphanumeric)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return (name[:63].rstrip("-")) or "plan"


def _object_name(deployment: Deployment, instance_label: str) -> str:
    """`<plan>-<instance>`, the plan part shortened (with a digest of the whole name, so that two
    long plan names stay apart) so the instance label is never cut."""
    suffix = dns_name(instance_label)
    plan = dns_name(deployment.plan_name)
    room = 63 - len(suffix) - 1
    if len(plan) > room:
        digest = hashlib.sha256(deployment.plan_name.encode()).hexdigest()[:6]
        plan = plan[: max(room - 7, 1)].rstrip("-") + "-" + digest
    return f"{plan}-{suffix}"


def _labels(deployment: Deployment, role: str, instance: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": dns_name(deployment.plan_name),
        "app.kubernetes.io/managed-by": "pddplan",
        "pddplan/role": role,
        "pddplan/instance": instance,
    }


def _pod_template(
    engine: Engine, deployment: Deployment, instance: EngineInstance, image: str, args: list[str]
) -> dict[str, Any]:
    labels = _labels(deployment, instance.role, instance.label)
    port = SERVER_PORT[engine]
    env = [{"name": k, "value": v} for k, v in server_env(engine, instance).items()]
    container: dict[str, Any] = {
        "name": "engine",
        "image": image,
        "command": ["/bin/sh", "-c", render_command(args).rstrip("\n")],
        "ports": [{"containerPort": port, "name": "http"}],
        "resources": {"limits": {GPU_RESOURCE[instance.vendor]: str(instance.gpus_per_node)}},
        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 30},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if env:
        container["env"] = env
    if instance.kv_transfer == "rdma" or instance.nodes > 1:
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}  # RDMA pins memory
    return {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {DATACENTER_LABEL: dns_name(instance.datacenter), GPU_LABEL: dns_name(instance.gpu)},
            "containers": [container],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        },
    }


def _workload(engine: Engine, deployment: Deployment, instance: EngineInstance, image: str) -> dict[str, Any]:
    name = _object_name(deployment, instance.label)
    meta = {"name": name, "labels": _labels(deployment, instance.role, instance.label)}
    if instance.nodes == 1:
        node = NodeContext(rank=Shell("0"), leader_address=Shell("127.0.0.1"))
        template = _pod_template(engine, deployment, instance, image, server_args(engine, deployment, instance, node))
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {
                    "matchLabels": {
                        "pddplan/instance": instance.label,
                        "app.kubernetes.io/name": dns_name(deployment.plan_name),
                    }
                },
                "template": template,
            },
        }
    node = NodeContext(rank=Shell("$LWS_WORKER_INDEX"), leader_address=Shell("$LWS_LEADER_ADDRESS"))
    args = server_args(engine, deployment, instance, node)
    leader = _pod_template(engine, deployment, instance, image, args)
    worker = _pod_template(
        engine, deployment, instance, image, [*args, "--headless"] if headless(engine, instance) else args
    )
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": instance.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": leader,
                "workerTemplate": worker,
            },
        },
    }


def _service(deployment: Deployment, name: str, selector: dict[str, str], port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": dns_name(deployment.plan_name)}},
        "spec": {"selector": selector, "ports": [{"name": "http", "port": port, "targetPort": port}]},
    }


def _instance_service(engine: Engine, deployment: Deployment, instance: EngineInstance) -> dict[str, Any]:
    selector = {"pddplan/instance": instance.label, "app.kubernetes.io/name": dns_name(deployment.plan_name)}
    if instance.nodes > 1:
        selector["leaderworkerset.sigs.k8s.io/worker-index"] = "0"  # the head pod serves the API
    service = _service(deployment, _object_name(deployment, instance.label), selector, SERVER_PORT[engine])
    if engine == "sglang" and instance.disaggregation == "prefill":
        # decode servers reach a prefill server's bootstrap port through the same Service
        service["spec"]["ports"].append(
            {"name": "bootstrap", "port": SGLANG_BOOTSTRAP_PORT, "targetPort": SGLANG_BOOTSTRAP_PORT}
        )
    return service


def _router(engine: Engine, deployment: Deployment, image: str) -> list[dict[str, Any]]:
    def url(i: EngineInstance) -> str:
        return f"http://{_object_name(deployment, i.label)}:{SERVER_PORT[engine]}"

    args = router_args(engine, deployment, url)
    name = _object_name(deployment, "router")
    labels = _labels(deployment, "router", "router")
    datacenter = deployment.of_role("prefill")[0].datacenter
    pod: dict[str, Any] = {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {DATACENTER_LABEL: datacenter},
            "containers": [
                {
                    "name": "router",
                    "image": image,
                    "command": ["/bin/sh", "-c", render_command(args).rstrip("\n")],
                    "ports": [{"containerPort": ROUTER_PORT, "name": "http"}],
                }
            ],
        },
    }
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {
                    "matchLabels": {
                        "pddplan/instance": "router",
                        "app.kubernetes.io/name": dns_name(deployment.plan_name),
                    }
                },
                "template": pod,
            },
        },
        _service(
            deployment,
            name,
            {"pddplan/instance": "router", "app.kubernetes.io/name": dns_name(deployment.plan_name)},
            ROUTER_PORT,
        ),
    ]
    if deployment.routing is not None:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": dns_name(f"{deployment.plan_name}-pdd-router"),
                    "labels": {"app.kubernetes.io/name": dns_name(deployment.plan_name)},
                },
                "data": {"pdd-router.yaml": pdd_router_config(engine, deployment, url)},
            }
        )
    return objects


def manifests(engine: Engine, deployment: Deployment, image: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Datacenter -> its objects (instances with their Services; the router in the prefill one)."""
    image = image or DEFAULT_IMAGE[engine]
    out: dict[str, list[dict[str, Any]]] = {}
    for instance in deployment.instances:
        objects = out.setdefault(instance.datacenter, [])
        objects += [_workload(engine, deployment, instance, image), _instance_service(engine, deployment, instance)]
    prefill_dc = deployment.of_role("prefill")[0].datacenter
    out[prefill_dc] += _router(engine, deployment, image)
    return out


def k8s_files(engine: Engine, deployment: Deployment, image: str | None = None) -> dict[str, str]:
    """File name -> text: `<datacenter>.yaml` (multi-document), and a README."""
    header = (
        f"# pddplan export --target k8s --engine {engine}: plan {deployment.plan_name!r} ({deployment.architecture})\n"
        f"# flags checked against {ENGINE_VERSIONS[engine]}\n"
        f"# label GPU nodes {DATACENTER_LABEL}=<datacenter>, {GPU_LABEL}=<gpu>; LeaderWorkerSet needs the\n"
        "# LWS controller (kubernetes-sigs/lws).\n"
    )
    files = {
        f"{dns_name(dc)}.yaml": header
        + yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
        for dc, objects in manifests(engine, deployment, image).items()
    }
    files["README.md"] = (
        f"# Kubernetes manifests for plan `{deployment.plan_name}` ({deployment.architecture}) on {engine}\n\n"
        "One file per datacenter: `kubectl apply -f <datacenter>.yaml` in the cluster (or context)\n"
        f"that runs it. Label the GPU nodes `{DATACENTER_LABEL}=<datacenter>` and `{GPU_LABEL}=<gpu type>`.\n"
        "Instances wider than a node are LeaderWorkerSets (install the LWS controller). The router runs\n"
        "in the prefill datacenter and reaches every instance by its Service name, so both datacenters\n"
        "must resolve each other's Services (one cluster spanning both, or a multi-cluster Service mesh).\n"
    )
    if deployment.colocated:
        notes = colocated_notes(engine, deployment, router="The router's Deployment starts")
        files["README.md"] += "\n" + "\n".join(notes) + "\n"
    return files
