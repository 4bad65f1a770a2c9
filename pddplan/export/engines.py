"""Engine launch arguments for one instance, SGLang's and vLLM's, and their routers' (PD mode for
disaggregated plans, regular mode over co-located servers).

Every flag is one the engine's own argument parser defines at the version named in
ENGINE_VERSIONS (docs/export.md tables each with its source line). Arguments are tokens: plain
text is shell-quoted when rendered; a `Shell` token is shell syntax (a `${VAR}` the launch script
or the Kubernetes pod fills in) and is written as is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pddplan.export.layout import Deployment, EngineInstance

Engine = Literal["sglang", "vllm"]
ENGINES: tuple[Engine, ...] = ("sglang", "vllm")

#: The engine releases the flags were checked against: each release's own argument parser, built
#: from its PyPI wheel, parsed a full command line with every flag (docs/export.md).
ENGINE_VERSIONS: dict[Engine, str] = {
    "sglang": "SGLang 0.5.23 (PyPI, 2026-10) and sglang-router 0.3.2",
    "vllm": "vLLM 0.34.0 (PyPI, 2026-11, commit 62d4bc3c7)",
}

#: The port each engine's server listens on, and SGLang's prefill bootstrap port (its default).
SERVER_PORT: dict[Engine, int] = {"sglang": 30000, "vllm": 8000}
SGLANG_BOOTSTRAP_PORT = 8998
#: The port a multi-node instance's head node listens on for the others (SGLang's dist-init, vLLM's
#: data-parallel RPC); the engines' own examples use these.
SGLANG_DIST_INIT_PORT = 20102
VLLM_DP_RPC_PORT = 13345
VLLM_MASTER_PORT = 29501  # vLLM's default --master-port
ROUTER_PORT = 8000
#: Instances sharing a server (`EngineInstance.slot`): each slot's server port is this much higher,
#: its SGLang bootstrap port one higher, its vLLM NIXL side channel (one port per data-parallel
#: rank from VLLM_NIXL_SIDE_CHANNEL_PORT, unique per host) past the slots before it.
SLOT_PORT_STRIDE = 100
#: vLLM's default NIXL side-channel port, one more per data-parallel rank, unique per host (vLLM docs,
#: features/nixl_connector_usage.md, as of vLLM 0.34)
VLLM_NIXL_SIDE_CHANNEL_PORT = 5600


def server_port(engine: Engine, instance: EngineInstance) -> int:
    """The port `instance`'s server listens on: the engine's, offset by its slot on a shared server."""
    return SERVER_PORT[engine] + SLOT_PORT_STRIDE * instance.slot


def bootstrap_port(instance: EngineInstance) -> int:
    """SGLang's prefill bootstrap port of `instance`, offset by its slot on a shared server."""
    return SGLANG_BOOTSTRAP_PORT + instance.slot


class Shell(str):
    """A token that is shell syntax (`${PREFILL_0_ADDR}`), written unquoted."""


@dataclass(frozen=True)
class NodeContext:
    """How a node of a multi-node instance finds its place: shell expressions for its rank and
    for its instance's head-node address."""

    rank: Shell
    leader_address: Shell


def server_args(engine: Engine, deployment: Deployment, instance: EngineInstance, node: NodeContext) -> list[str]:
    """The command that starts one node of `instance` on `engine`."""
    if engine == "sglang":
        return sglang_args(deployment, instance, node)
    return vllm_args(deployment, instance, node)


def sglang_args(deployment: Deployment, instance: EngineInstance, node: NodeContext) -> list[str]:
    """`python3 -m sglang.launch_server ...` for one node of `instance`.

    EP (pddplan's expert parallelism with data-parallel attention) is `--ep-size N
    --attn-dp-size N` with DeepEP all-to-all (SGLang 0.5.23 spells data-parallel attention so;
    `--enable-dp-attention --dp-size N` is deprecated); EP under tensor-parallel attention is
    `--ep-size N` alone (the experts' outputs summed by the all-reduce); TP is `--tp-size N` alone. Across the WAN
    there is no RDMA, so KV travels by Mooncake over TCP. Pipeline stages are `--pp-size P` beside
    `--tp-size` of one stage's GPUs (SGLang's chunked pipeline). A co-located server runs no disaggregation
    mode and mixes its prefill chunks into decode steps (`--enable-mixed-chunk`; SGLang turns it off
    under EAGLE/NEXTN speculative decoding). pddplan's chunk budget is per attention rank; SGLang's
    `--chunked-prefill-size` is per instance and divided among the data-parallel attention ranks
    (server_args.py: `chunked_prefill_size // dp_size`), so under EP it is the budget times N.
    """
    n = instance.gpus
    chunk = deployment.chunk_tokens * (n if instance.layout == "ep" else 1)
    args = ["python3", "-m", "sglang.launch_server", "--model-path", deployment.model_repo]
    args += ["--tp-size", str(instance.tp)]
    if instance.pp > 1:
        args += ["--pp-size", str(instance.pp)]
    if instance.layout == "ep":
        args += ["--ep-size", str(n), "--attn-dp-size", str(n), "--moe-a2a-backend", "deepep"]
    elif instance.layout == "tp-ep":  # the experts spread over one stage's ranks
        args += ["--ep-size", str(instance.tp)]
    if instance.colocated:
        args += ["--chunked-prefill-size", str(chunk), "--enable-mixed-chunk"]
    else:
        args += ["--disaggregation-mode", instance.disaggregation]
        args += ["--disaggregation-transfer-backend", "mooncake_tcp" if instance.kv_transfer == "tcp" else "mooncake"]
    if instance.disaggregation == "prefill":
        args += ["--disaggregation-bootstrap-port", str(bootstrap_port(instance))]
        args += ["--chunked-prefill-size", str(chunk)]
    if instance.max_running_requests is not None:
        args += ["--max-running-requests", str(instance.max_running_requests)]
    if instance.decode_radix_cache:
        args += ["--disaggregation-decode-enable-radix-cache"]
    args += ["--mem-fraction-static", f"{deployment.hbm_utilization:g}"]
    args += ["--page-size", str(deployment.page_tokens), "--context-length", str(deployment.context_tokens)]
    if deployment.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if instance.quantization is not None:
        args += ["--quantization", instance.quantization]
    if deployment.mtp_draft_tokens:
        k = deployment.mtp_draft_tokens
        args += ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(k)]
        args += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(k + 1)]
    # the decode-phase graph (SGLang's `--cuda-graph-max-bs` is a deprecated alias of the flag): it
    # serves a co-located server's decode-only steps as it does a decode server's
    if instance.decodes and deployment.cuda_graph_max_batch is not None:
        if deployment.cuda_graph_max_batch == 0:
            args += ["--disable-decode-cuda-graph"]
        else:
            args += ["--cuda-graph-max-bs-decode", str(deployment.cuda_graph_max_batch)]
    if instance.nodes > 1:
        args += ["--nnodes", str(instance.nodes), "--node-rank", node.rank]
        args += ["--dist-init-addr", Shell(f"{node.leader_address}:{SGLANG_DIST_INIT_PORT}")]
    args += ["--host", "0.0.0.0", "--port", str(server_port("sglang", instance))]
    return args


def vllm_args(deployment: Deployment, instance: EngineInstance, node: NodeContext) -> list[str]:
    """`vllm serve MODEL ...` for one node of `instance`.

    EP is vLLM's expert-parallel deployment: one data-parallel attention rank per GPU
    (`--data-parallel-size N --enable-expert-parallel`), DeepEP high-throughput kernels on prefill
    and low-latency ones on decode; a multi-node instance runs one command per node, the others
    headless, each starting at its first rank (a co-located server's steps carry prefill chunks,
    so it takes the high-throughput kernels). EP under tensor-parallel attention is
    `--tensor-parallel-size N --enable-expert-parallel` (one rank group, experts spread over it). TP
    is `--tensor-parallel-size N`; across nodes, with
    vLLM's multiprocessing executor (`--nnodes`, `--node-rank`, `--master-addr`; the others
    headless). KV moves with the NIXL connector; across the WAN its UCX transport is told to use TCP.
    A co-located server has no KV connector: vLLM V1 mixes prefill chunks into decode steps by
    default, `--max-num-batched-tokens` bounding each step (of each data-parallel engine: the budget
    per attention rank, as pddplan plans it).
    """
    args = ["vllm", "serve", deployment.model_repo]
    per_node = instance.gpus_per_node
    if instance.layout == "ep":
        args += ["--tensor-parallel-size", "1", "--data-parallel-size", str(instance.gpus), "--enable-expert-parallel"]
        kernels = "deepep_high_throughput" if instance.prefills else "deepep_low_latency"
        args += ["--all2all-backend", kernels]
        if instance.nodes > 1:
            args += ["--data-parallel-size-local", str(per_node)]
            args += ["--data-parallel-start-rank", Shell(f"$(( {node.rank} * {per_node} ))")]
            args += ["--data-parallel-address", node.leader_address]
            args += ["--data-parallel-rpc-port", str(VLLM_DP_RPC_PORT)]
    else:
        args += ["--tensor-parallel-size", str(instance.gpus)]  # no pipeline stages (`check_pipeline_stages`)
        if instance.layout == "tp-ep":
            args += ["--enable-expert-parallel"]
        if instance.nodes > 1:
            args += ["--nnodes", str(instance.nodes), "--node-rank", node.rank]
            args += ["--master-addr", node.leader_address, "--master-port", str(VLLM_MASTER_PORT)]
    if instance.prefills:
        args += ["--max-num-batched-tokens", str(deployment.chunk_tokens)]
    if instance.max_running_requests is not None:
        args += ["--max-num-seqs", str(instance.max_running_requests)]
    args += ["--gpu-memory-utilization", f"{deployment.hbm_utilization:g}"]
    args += ["--block-size", str(deployment.page_tokens), "--max-model-len", str(deployment.context_tokens)]
    if deployment.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if instance.quantization is not None:
        args += ["--quantization", instance.quantization]
    args += ["--enable-prefix-caching"]
    if not instance.colocated:
        role = "kv_producer" if instance.disaggregation == "prefill" else "kv_consumer"
        args += [
            "--kv-transfer-config",
            json.dumps({"kv_connector": "NixlConnector", "kv_role": role}, separators=(",", ":")),
        ]
    if deployment.mtp_draft_tokens:
        spec = {"method": "mtp", "num_speculative_tokens": deployment.mtp_draft_tokens}
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    if instance.decodes and deployment.cuda_graph_max_batch is not None:
        if deployment.cuda_graph_max_batch == 0:
            args += ["--enforce-eager"]
        else:
            graphs = {"max_decode_cudagraph_capture_requests": deployment.cuda_graph_max_batch}
            args += ["--compilation-config", json.dumps(graphs, separators=(",", ":"))]
    args += ["--host", "0.0.0.0", "--port", str(server_port("vllm", instance))]
    return args


def headless(engine: Engine, instance: EngineInstance) -> bool:
    """Whether a non-head node of `instance` runs without an API server (vLLM's, in both layouts)."""
    return engine == "vllm" and instance.nodes > 1


def server_env(engine: Engine, instance: EngineInstance) -> dict[str, str]:
    """Environment a server needs beyond its flags: on a shared server its GPUs
    (CUDA_VISIBLE_DEVICES) and, for vLLM's NIXL, its side-channel ports; NIXL speaks UCX, told to
    use TCP where the KV crosses the WAN (there is no RDMA between datacenters)."""
    env: dict[str, str] = {}
    if instance.gpu_ids is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in instance.gpu_ids)
        if engine == "vllm" and not instance.colocated:
            env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(VLLM_NIXL_SIDE_CHANNEL_PORT + instance.slot * instance.gpus)
    if engine == "vllm" and instance.kv_transfer == "tcp":
        env["UCX_TLS"] = "tcp"
    return env


def router_args(engine: Engine, deployment: Deployment, url: Callable[[EngineInstance], str]) -> list[str]:
    """The engine's stock router in front of `deployment`'s servers (`url`: each one's address).

    Disaggregated: PD mode over the prefill servers and the (main) decoders (SGLang's takes each
    prefill server's bootstrap port after its URL). Co-located: regular mode, each request to one
    of the servers, chosen by prefix-cache affinity (`cache_aware`).
    """
    if deployment.colocated:
        workers = [url(i) for i in deployment.instances]
        if engine == "sglang":
            args = ["python3", "-m", "sglang_router.launch_router", "--worker-urls", *workers]
        else:
            args = ["vllm-router", "--worker-urls", *workers]
        return [*args, "--policy", "cache_aware", "--host", "0.0.0.0", "--port", str(ROUTER_PORT)]
    prefill_urls = [url(i) for i in deployment.of_role("prefill")]
    decode_urls = [url(i) for i in deployment.of_role("decode")]
    if engine == "sglang":
        args = ["python3", "-m", "sglang_router.launch_router", "--pd-disaggregation"]
        for instance, address in zip(deployment.of_role("prefill"), prefill_urls, strict=True):
            args += ["--prefill", address, str(bootstrap_port(instance))]
        for address in decode_urls:
            args += ["--decode", address]
        return [*args, "--policy", "cache_aware", "--host", "0.0.0.0", "--port", str(ROUTER_PORT)]
    args = ["vllm-router", "--vllm-pd-disaggregation"]
    for address in prefill_urls:
        args += ["--prefill", address]
    for address in decode_urls:
        args += ["--decode", address]
    args += ["--prefill-policy", "cache_aware", "--decode-policy", "power_of_two"]
    return [*args, "--host", "0.0.0.0", "--port", str(ROUTER_PORT)]
