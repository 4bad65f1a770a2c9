"""`export --target sglang|vllm`: one launch script per instance, the router's, PDD's routing rule
and a README that says which server runs what.

Hosts are not in a plan: each script reads its instance's head-node address from a variable named
after it (`PREFILL_0_ADDR`), and the router script reads them all.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

import yaml

from pddplan.export.engines import (
    ENGINE_VERSIONS,
    Engine,
    NodeContext,
    Shell,
    headless,
    router_args,
    server_args,
    server_env,
    server_port,
)
from pddplan.export.layout import Deployment, EngineInstance, nodes_total

ROLE_TITLES = {"prefill": "prefill (P)", "relay": "relay decoder (RLD)", "decode": "decoder (D / MD)"}
COLOCATED_TITLE = "prefill + decode (P+D)"


def role_title(instance: EngineInstance) -> str:
    """What the instance's server does, as the scripts and README name it."""
    return COLOCATED_TITLE if instance.colocated else ROLE_TITLES[instance.role]


def address_variable(instance: EngineInstance) -> str:
    """`PREFILL_0_ADDR`: the variable holding an instance's head-node address."""
    return f"{instance.label.upper().replace('-', '_')}_ADDR"


def render_command(args: list[str], env: dict[str, str] | None = None, prefix: str = "exec ") -> str:
    """A shell command, one flag (with its value) per line."""
    words = [a if isinstance(a, Shell) else shlex.quote(a) for a in args]
    lines: list[str] = []
    for word in words:
        if word.startswith("--") or not lines:
            lines.append(word)
        else:
            lines[-1] += " " + word
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    return exports + prefix + " \\\n    ".join(lines) + "\n"


def _header(deployment: Deployment, engine: Engine) -> str:
    return (
        f"# pddplan export --target {engine}: plan {deployment.plan_name!r} ({deployment.architecture}), "
        f"model {deployment.model_name}\n# flags checked against {ENGINE_VERSIONS[engine]} (docs/export.md)\n"
    )


def instance_script(engine: Engine, deployment: Deployment, instance: EngineInstance) -> str:
    """The launch script of one instance (run on each of its nodes with the node's rank)."""
    variable = address_variable(instance)
    where = f"{instance.gpus} x {instance.gpu} in {instance.datacenter}"
    text = f"#!/bin/sh\n{_header(deployment, engine)}# {instance.label}: {role_title(instance)}, {where}"
    if instance.nodes == 1:
        ids = instance.gpu_ids
        text += ", one node\n" if ids is None else f", GPUs {ids[0]}-{ids[-1]} of a node it shares\n"
        text += "set -eu\n"
        node = NodeContext(rank=Shell("0"), leader_address=Shell(f'"${{{variable}:-127.0.0.1}}"'))
        return text + render_command(server_args(engine, deployment, instance, node), server_env(engine, instance))
    text += (
        f", {instance.nodes} nodes of {instance.gpus_per_node} GPUs:\n"
        f"# run `{instance.label}.sh RANK` on each node, rank 0 on the head node, with {variable} set to "
        "the head node's address\nset -eu\n"
        f'NODE_RANK="${{1:?usage: {instance.label}.sh NODE_RANK (0 to {instance.nodes - 1})}}"\n'
        f'case "$NODE_RANK" in *[!0-9]* | "") echo "NODE_RANK must be 0 to {instance.nodes - 1}" >&2; exit 2 ;; esac\n'
        f': "${{{variable}:?set {variable} to the head node of {instance.label}}}"\n'
    )
    node = NodeContext(rank=Shell("$NODE_RANK"), leader_address=Shell(f'"${variable}"'))
    args = server_args(engine, deployment, instance, node)
    env = server_env(engine, instance)
    if not headless(engine, instance):
        return text + render_command(args, env)
    return (
        text
        + 'if [ "$NODE_RANK" = 0 ]; then\n'
        + _indent(render_command(args, env))
        + "fi\n"
        + _indent(render_command([*args, "--headless"], env), "")
    )


def _indent(text: str, pad: str = "    ") -> str:
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def _url(engine: Engine, instance: EngineInstance) -> str:
    return f"http://${{{address_variable(instance)}}}:{server_port(engine, instance)}"


def router_script(engine: Engine, deployment: Deployment) -> str:
    """The engine's stock router: PD mode over the plan's prefill and (main) decode instances, or
    regular mode over its co-located servers."""
    note = ""
    if deployment.routing is not None:
        note = (
            "# PDD: the stock router sends every request P -> MD. Sending low-hit requests through the relay\n"
            "# decoder and handing them to the main decoder is pdd-router.yaml's rule, for a PDD-aware router.\n"
        )
    args = [Shell(a) if "${" in a else a for a in router_args(engine, deployment, lambda i: _url(engine, i))]
    return f"#!/bin/sh\n{_header(deployment, engine)}{note}set -eu\n" + render_command(args)


def pdd_router_config(
    engine: Engine, deployment: Deployment, url: Callable[[EngineInstance], str] | None = None
) -> str:
    """PDD's routing rule and handoff (plan fields `routing`, `handoff`) with the servers they
    route between (`url`: each instance's address; default the scripts' address variables):
    what a PDD-aware router implements (stock routers split P from D only)."""
    assert deployment.routing is not None
    address = url or (lambda i: _url(engine, i))
    relays = (
        "on prefill (the prefill servers decode relayed requests)"
        if deployment.relay_on_prefill
        else [address(i) for i in deployment.of_role("relay")]
    )
    body = {
        "plan": deployment.plan_name,
        "architecture": deployment.architecture,
        "prefill": [address(i) for i in deployment.of_role("prefill")],
        "relay_decode": relays,
        "main_decode": [address(i) for i in deployment.of_role("decode")],
        **deployment.routing,
    }
    return (
        f"{_header(deployment, engine)}"
        "# PDD routing: a request whose prefix hit rate is below routing.hit_threshold (kind: hit) or whose\n"
        "# incremental KV exceeds routing.incremental_bytes_threshold (kind: bytes) is prefilled, decoded\n"
        "# at once by a relay decoder over RDMA, and handed to a main decoder by token IDs (handoff.mode)\n"
        "# once its KV has crossed the WAN; singular_filter cancels the transfer of a request the relay\n"
        "# finishes first. Every other request goes P -> MD. Neither SGLang's nor vLLM's stock router does\n"
        "# this: it is the specification for a PDD-aware router (docs/export.md).\n"
        + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)
    )


def readme(engine: Engine, deployment: Deployment, files: list[str]) -> str:
    """Which server runs which script, and what the export assumed."""
    where_router = "servers'" if deployment.colocated else "prefill"
    lines = [
        f"# Launch files for plan `{deployment.plan_name}` ({deployment.architecture}) on {engine}",
        "",
        f"Written by `pddplan export --target {engine}`; flags checked against {ENGINE_VERSIONS[engine]}.",
        f"{len(deployment.instances)} instances on {nodes_total(deployment)} servers:",
        "",
        "| script | role | datacenter | GPUs | nodes | layout | address variable |",
        "|---|---|---|---|---|---|---|",
    ]
    for i in deployment.instances:
        stages = f" x PP{i.pp}" if i.pp > 1 else ""
        layout = {"tp": f"TP{i.tp}", "ep": f"EP{i.tp} + DP attention", "tp-ep": f"EP{i.tp} + TP attention"}[i.layout]
        layout += stages
        ids = i.gpu_ids
        nodes = str(i.nodes) if ids is None else f"shared, GPUs {ids[0]}-{ids[-1]}"
        lines.append(
            f"| {i.label}.sh | {role_title(i)} | {i.datacenter} | {i.gpus} x {i.gpu} | {nodes} | {layout} "
            f"| {address_variable(i)} |"
        )
    lines += [
        "",
        "Set every address variable (each instance's head node) where the scripts run; start the servers,",
        f"then `router.sh` in the {where_router} datacenter.",
    ]
    servers: dict[tuple[str, int], list[str]] = {}
    for i in deployment.instances:
        if i.gpu_ids is not None:
            servers.setdefault((i.role, i.index // i.per_server), []).append(i.label)
    if servers:
        lines += [
            "",
            "Instances smaller than a server share one; give the instances of a server the same address:",
            *(f"- {', '.join(labels)}" for labels in servers.values()),
            "",
            "Each script takes its slot's GPUs (CUDA_VISIBLE_DEVICES) and its own ports (the server port 100",
            "higher per slot, SGLang's bootstrap port 1 higher, vLLM's NIXL side channel past the slots before",
            "it).",
        ]
    if deployment.colocated:
        lines += ["", *colocated_notes(engine, deployment)]
    if deployment.relay_on_prefill:
        lines += [
            "",
            "The plan runs the relay decoder on the prefill instances (relay_on_prefill). Stock SGLang and vLLM",
            "servers run one disaggregation role each, so this needs an engine that decodes relayed requests",
            "inside its chunked-prefill steps; the scripts start plain prefill servers.",
        ]
    if deployment.cache_tiers != "hbm":
        lines += [
            "",
            "The plan keeps its prefix caches down to host "
            + ("memory and NVMe" if deployment.cache_tiers == "ssd" else "memory"),
            "(`serving.cache_tiers`): start each server with its engine's host tier (SGLang's hierarchical",
            "cache, vLLM's KV offloading connector) sized to the servers' host memory. The scripts do not set",
            "those flags: they were not checked against the engine versions above.",
        ]
    if deployment.routing is not None:
        lines += [
            "",
            "What stock SGLang and vLLM do not do, and a PDD deployment needs (see pdd-router.yaml):",
            "- route by prefix hit rate: requests below the threshold go P -> RLD -> MD, the rest P -> MD;",
            "- hand a sequence from the relay decoder to a main decoder by token IDs;",
            "- send KV from one prefill server both over RDMA (to the relay) and over the WAN (to the main",
            "  decoders): stock servers speak one transfer backend, so the scripts give prefill RDMA (the relay",
            "  leg) and the main decoders TCP; the WAN leg is PDD's own transfer.",
        ]
    if "pdd-router.yaml" in files:
        lines += ["", "`pdd-router.yaml` holds PDD's routing rule and handoff for a PDD-aware router."]
    return "\n".join(lines) + "\n"


def colocated_notes(engine: Engine, deployment: Deployment, router: str = "`router.sh` starts") -> list[str]:
    """README lines for a co-located plan: how the servers mix prefill into decode, and when the
    engine stops doing so (`router`: what starts the router, the subject of a sentence)."""
    chunk = deployment.chunk_tokens
    lines = [
        "The plan co-locates prefill and decode: each server runs both, with no disaggregation mode and",
        f"no KV transfer, mixing prefill chunks of up to {chunk} tokens (per attention rank) into its decode steps.",
        f"{router} the router in regular mode over every server",
        "(cache-aware: a request goes to the server that holds its prefix).",
    ]
    share = deployment.split_share
    if share is not None:
        first, second = deployment.of_role("prefill")[0].gpu, deployment.of_role("split")[0].gpu
        lines += [
            f"The plan splits the requests over two pools: {1 - share:.0%} to the prefill-* servers ({first}),",
            f"{share:.0%} to the split-* servers ({second}); each pool meets the SLA at its share. The stock",
            "router has no fixed weights: it keeps a session on one server and balances by load, so the faster",
            "pool takes more. To hold the plan's shares, put a weighted load balancer in front of one router per",
            "pool.",
        ]
    if engine == "sglang":
        lines += [
            "SGLang mixes them with `--chunked-prefill-size` (the budget times the data-parallel attention",
            "ranks, which SGLang divides it among) and `--enable-mixed-chunk`, and turns mixed",
            "chunks off under EAGLE/NEXTN speculative decoding: it then runs prefill chunks and decode steps",
            "apart.",
        ]
        if deployment.mtp_draft_tokens:
            lines += [
                f"This plan drafts {deployment.mtp_draft_tokens} tokens per step with MTP "
                "(`serving.mtp_draft_tokens`, NEXTN), so",
                "the servers do not mix, and the plan's step model (decode rows sharing steps with prefill",
                "chunks) does not hold on SGLang: re-plan with `serving.mtp_draft_tokens: 0`, or expect TTFT",
                "and TPOT to differ from the plan's.",
            ]
    else:
        lines += [
            "vLLM V1 mixes prefill chunks into decode steps by default; `--max-num-batched-tokens "
            f"{chunk}` bounds each step.",
        ]
    return lines


def shell_files(engine: Engine, deployment: Deployment) -> dict[str, str]:
    """File name -> text for the shell target."""
    files = {f"{i.label}.sh": instance_script(engine, deployment, i) for i in deployment.instances}
    files["router.sh"] = router_script(engine, deployment)
    if deployment.routing is not None:
        files["pdd-router.yaml"] = pdd_router_config(engine, deployment)
    files["README.md"] = readme(engine, deployment, list(files))
    return files
