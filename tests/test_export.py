"""`pddplan export`: golden files per target, manifests valid against the Kubernetes schemas,
scripts that a shell parses and that pass the flags the engines expect, and bad input.

Golden files live in tests/data/export/golden/<plan>/<target>/; after a deliberate change,
regenerate them with PDDPLAN_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pddplan.api import scenario_of
from pddplan.export import export_plan
from pddplan.export.engines import ENGINE_VERSIONS
from pddplan.export.k8s import DEFAULT_IMAGE
from pddplan.export.layout import deployment_of
from pddplan.export.scripts import address_variable

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "export"
PLANS = {
    "pdd": DATA / "pdd-agent-64k-pdd.yaml",  # `optimize pdd-agent-64k -a pdd --output`
    "pd-intra": DATA / "pdd-agent-64k-pd-intra.yaml",  # `optimize pdd-agent-64k -a pd-intra --output`
    "hand-pdd": ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml",  # dedicated relay, adaptive handoff
    "agg": DATA / "pdd-agent-64k-agg.yaml",  # `optimize pdd-agent-64k -a agg --output`: co-located servers
}
TARGETS = ("sglang", "vllm", "k8s")
LWS_SCHEMA = DATA.parent / "k8s" / "leaderworkerset-v1.schema.json"
KUBERNETES_VERSION = "1.30.0"


def _export(plan: str, target: str, **options: Any) -> Any:
    return export_plan(scenario_of(PLANS[plan], "pdd-agent-64k"), target, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("plan", ["pdd", "pd-intra", "agg"])
@pytest.mark.parametrize("target", TARGETS)
def test_export_matches_its_golden_files(plan: str, target: str) -> None:
    files = _export(plan, target).files
    golden = DATA / "golden" / plan / target
    if os.environ.get("PDDPLAN_UPDATE_GOLDEN"):
        golden.mkdir(parents=True, exist_ok=True)
        for old in golden.iterdir():
            old.unlink()
        for name, text in files.items():
            (golden / name).write_text(text)
    assert sorted(files) == sorted(p.name for p in golden.iterdir())
    for name, text in files.items():
        assert text == (golden / name).read_text(), f"{golden / name} differs (PDDPLAN_UPDATE_GOLDEN=1 rewrites it)"


def _validate_manifest(doc: dict[str, Any]) -> None:
    """Kubernetes objects against the Kubernetes JSON Schemas (kubernetes-validate, offline, strict:
    no unknown fields); a LeaderWorkerSet against its CRD's schema, its pod templates as PodTemplates."""
    import jsonschema
    import kubernetes_validate

    if doc["kind"] == "LeaderWorkerSet":
        jsonschema.validate(doc, json.loads(LWS_SCHEMA.read_text()))
        for key in ("leaderTemplate", "workerTemplate"):
            template = doc["spec"]["leaderWorkerTemplate"][key]
            pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
            kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
    else:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def _documents(files: dict[str, str]) -> list[dict[str, Any]]:
    return [doc for name, text in files.items() if name.endswith(".yaml") for doc in yaml.safe_load_all(text)]


@pytest.mark.parametrize("plan", list(PLANS))
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_manifests_pass_the_kubernetes_schemas(plan: str, engine: str) -> None:
    documents = _documents(_export(plan, "k8s", engine=engine).files)
    kinds = {doc["kind"] for doc in documents}
    assert {"Service", "Deployment"} <= kinds
    for doc in documents:
        _validate_manifest(doc)


def test_the_schema_check_can_fail() -> None:
    """A misspelled field fails: in a Deployment (Kubernetes schema) and in a LeaderWorkerSet (its CRD)."""
    import jsonschema
    import kubernetes_validate

    documents = _documents(_export("pdd", "k8s").files)
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    deployment["spec"]["replica"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate_manifest(deployment)
    lws = next(d for d in documents if d["kind"] == "LeaderWorkerSet")
    lws["spec"]["leaderWorkerTemplate"]["sizes"] = 2
    with pytest.raises(jsonschema.ValidationError):
        _validate_manifest(lws)


def test_an_instance_wider_than_a_node_is_a_leader_worker_set_of_whole_nodes() -> None:
    """pd-intra's 32-GPU decoder on 8-GPU nodes: one LeaderWorkerSet of 4 pods, 8 GPUs each; its
    Service selects the head pod only."""
    documents = _documents(_export("pd-intra", "k8s").files)
    lws = next(d for d in documents if d["kind"] == "LeaderWorkerSet" and "decode-0" in d["metadata"]["name"])
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 4
    assert template["workerTemplate"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    service = next(d for d in documents if d["kind"] == "Service" and d["metadata"]["name"] == lws["metadata"]["name"])
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"


@pytest.mark.parametrize("plan", list(PLANS))
@pytest.mark.parametrize("target", ["sglang", "vllm"])
def test_every_script_parses_in_a_posix_shell(plan: str, target: str, tmp_path: Path) -> None:
    for name, text in _export(plan, target).files.items():
        if name.endswith(".sh"):
            path = tmp_path / name
            path.write_text(text)
            subprocess.run(["sh", "-n", str(path)], check=True)


def _run_with_fake_engine(script: str, argv: list[str], env: dict[str, str], tmp_path: Path) -> list[str]:
    """Run an exported script with `python3` / `vllm` replaced by a stub that prints its argv as
    JSON: what the engine would receive, after the shell's quoting and expansion."""
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir(exist_ok=True)
    for tool in ("python3", "vllm", "vllm-router"):
        stub = stub_dir / tool
        stub.write_text(
            "#!/bin/sh\n"
            'printf "%s\\n" "$UCX_TLS" > "$STUB_OUT.env"\n'
            'for a in "$0" "$@"; do printf "%s\\n" "$a"; done > "$STUB_OUT"\n'
        )
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    path = tmp_path / "script.sh"
    path.write_text(script)
    out = tmp_path / "argv.txt"
    run_env = {"PATH": f"{stub_dir}:/usr/bin:/bin", "STUB_OUT": str(out), **env}
    subprocess.run(["sh", str(path), *argv], check=True, env=run_env)
    return out.read_text().splitlines()[1:]


def test_a_vllm_worker_node_gets_its_ranks_and_the_transfer_config_intact(tmp_path: Path) -> None:
    """Node 1 of a 16-GPU expert-parallel main decoder: headless, data-parallel ranks 8-15, the
    head node's address, the NIXL connector's JSON in one argument, UCX told to use TCP (WAN)."""
    files = _export("pdd", "vllm").files
    argv = _run_with_fake_engine(files["decode-0.sh"], ["1"], {"DECODE_0_ADDR": "10.0.0.7"}, tmp_path)
    assert argv[:2] == ["serve", "deepseek-ai/DeepSeek-V3.2-Exp"]
    flags = dict(itertools.pairwise(argv[2:]))  # each argument -> the one after it
    assert flags["--data-parallel-start-rank"] == "8"
    assert flags["--data-parallel-address"] == "10.0.0.7"
    assert json.loads(flags["--kv-transfer-config"]) == {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}
    assert argv[-1] == "--headless"
    assert (tmp_path / "argv.txt.env").read_text().strip() == "tcp"


def test_a_multi_node_script_refuses_a_missing_or_bad_rank(tmp_path: Path) -> None:
    script = tmp_path / "p.sh"
    script.write_text(_export("pdd", "sglang").files["prefill-0.sh"])
    for argv in ([], ["x"]):
        run = subprocess.run(["sh", str(script), *argv], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        assert run.returncode != 0 and ("NODE_RANK" in run.stderr)


def test_the_layout_follows_the_plan() -> None:
    """pdd-agent-64k's PDD plan: one 16-GPU prefill instance carrying the relay (no relay
    instances), two 16-GPU main decoders in dc-b fed over the WAN with a radix cache; EP layouts
    (DeepSeek-V3.2 is MoE); no decode batch cap (the workload sets none)."""
    deployment = _export("pdd", "sglang").deployment
    roles = [(i.role, i.datacenter, i.gpus, i.nodes) for i in deployment.instances]
    assert roles == [("prefill", "dc-a", 16, 2), ("decode", "dc-b", 16, 2), ("decode", "dc-b", 16, 2)]
    assert deployment.relay_on_prefill
    prefill, main_decoder = deployment.instances[0], deployment.instances[1]
    assert prefill.kv_transfer == "rdma" and main_decoder.kv_transfer == "tcp"
    assert main_decoder.decode_radix_cache and main_decoder.max_running_requests is None  # no cap: memory decides
    assert prefill.max_running_requests is None
    assert all(i.expert_parallel for i in deployment.instances)
    assert deployment.context_tokens == 64512 + 8192  # longest prompt + longest output
    intra = _export("pd-intra", "sglang").deployment
    assert all(i.kv_transfer == "rdma" and not i.decode_radix_cache for i in intra.instances)


def test_flags_realize_the_plan_values() -> None:
    files = _export("pd-intra", "sglang").files
    decode = files["decode-0.sh"]
    for flag in (
        "--tp-size 32",
        "--ep-size 32",
        "--attn-dp-size 32",
        "--mem-fraction-static 0.9",
        "--page-size 64",
        "--kv-cache-dtype fp8_e4m3",
        "--disaggregation-mode decode",
        "--disaggregation-transfer-backend mooncake",
        "--nnodes 4",
    ):
        assert flag in decode, flag
    # the budget per data-parallel attention rank (8,192) times the 16 ranks SGLang divides it among
    assert "--chunked-prefill-size 131072" in files["prefill-0.sh"] and "--attn-dp-size 16" in files["prefill-0.sh"]
    assert "pdd-router.yaml" not in files  # no relay, no PDD routing
    router = yaml.safe_load(_export("hand-pdd", "sglang").files["pdd-router.yaml"])
    assert router["routing"]["hit_threshold"] == 0.9 and router["handoff"]["mode"] == "adaptive"
    assert len(router["relay_decode"]) == 1 and len(router["main_decode"]) == 2


def _flags_in(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", text))


@pytest.mark.parametrize("plan", list(PLANS))
def test_every_flag_used_is_in_the_docs_table(plan: str) -> None:
    """docs/export.md lists every flag export writes, with the engine version and source line it
    was checked against: a flag added to the export without that check fails here."""
    docs = (ROOT / "docs" / "export.md").read_text()
    documented = {engine: _flags_in(section) for engine, section in _doc_sections(docs).items()}
    for target in ("sglang", "vllm"):
        used: set[str] = set()
        for name, text in _export(plan, target).files.items():
            if name.endswith(".sh"):
                used |= _flags_in("\n".join(line for line in text.splitlines() if not line.startswith("#")))
        assert used <= documented[target], f"{target}: undocumented {sorted(used - documented[target])}"


def _doc_sections(docs: str) -> dict[str, str]:
    sections = {"sglang": "", "vllm": ""}
    current = None
    for line in docs.splitlines():
        if line.startswith("## "):
            current = "sglang" if "SGLang" in line else "vllm" if "vLLM" in line else None
        elif current and line.startswith("|"):
            sections[current] += line + "\n"
    return sections


def test_export_cli_prints_the_files_or_writes_them(cli: Any, tmp_path: Path) -> None:
    printed = cli("export", str(PLANS["pd-intra"]), "pdd-agent-64k", "--target", "sglang")
    assert printed.exit_code == 0 and "==> prefill-0.sh <==" in printed.stdout and printed.stderr == ""
    out = tmp_path / "launch"
    written = cli("export", str(PLANS["pd-intra"]), "pdd-agent-64k", "--target", "sglang", "--out", str(out))
    assert written.exit_code == 0 and written.stdout == ""
    assert (out / "decode-0.sh").stat().st_mode & stat.S_IXUSR
    assert (out / "decode-0.sh").read_text() in printed.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--target", "trtllm"), "--target = 'trtllm'"),
        (("--target", "k8s", "--engine", "tgi"), "--engine = 'tgi'"),
        (("--target", "sglang", "--gpus-per-node", "3"), "do not fill whole 3-GPU nodes"),
        (("--target", "sglang", "--gpus-per-node", "0"), "--gpus-per-node = 0"),
    ],
)
def test_bad_export_options_give_one_line_and_exit_2(cli: Any, args: tuple[str, ...], message: str) -> None:
    result = cli("export", str(PLANS["pd-intra"]), "pdd-agent-64k", *args)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_out_must_be_a_folder(cli: Any, tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("x")
    result = cli("export", str(PLANS["pd-intra"]), "pdd-agent-64k", "--target", "k8s", "--out", str(file))
    assert result.exit_code == 2 and "not a folder" in result.stderr and file.read_text() == "x"


def test_a_dense_vllm_instance_wider_than_a_node_uses_the_multiprocessing_executor() -> None:
    """A tensor-parallel instance over 4 nodes: every node names the node count, its rank and the
    head node's address (vLLM 0.34's --nnodes/--node-rank/--master-addr); the others are headless."""
    from dataclasses import replace

    from pddplan.export.engines import NodeContext, Shell, headless, vllm_args

    deployment = deployment_of(scenario_of(PLANS["pd-intra"], "pdd-agent-64k"), "m")
    dense = replace(deployment.instances[1], expert_parallel=False)
    args = vllm_args(deployment, dense, NodeContext(Shell("$R"), Shell("h")))
    text = " ".join(args)
    assert "--tensor-parallel-size 32 --nnodes 4 --node-rank $R --master-addr h --master-port 29501" in text
    assert "--enable-expert-parallel" not in text and headless("vllm", dense) and not headless("sglang", dense)


def test_expert_parallel_under_tensor_parallel_attention_launches_as_the_engines_spell_it(tmp_path: Path) -> None:
    """A plan's `tp_attention: true` role: SGLang `--tp-size N --ep-size N` (no data-parallel
    attention, no DeepEP), vLLM `--tensor-parallel-size N --enable-expert-parallel` (no data
    parallelism); the plan tables label it EP-TPA."""
    from pddplan.export.engines import NodeContext, Shell, sglang_args, vllm_args
    from pddplan.report.plan_tables import parallel_label
    from pddplan.scenarios.describe import scenario_roles

    data = yaml.safe_load(PLANS["pd-intra"].read_text(encoding="utf-8"))
    data["decode"] |= {"expert_parallel": True, "tp_attention": True}
    path = tmp_path / "tpa.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    scenario = scenario_of(path, "pdd-agent-64k")
    deployment = deployment_of(scenario, "m")
    decode = next(i for i in deployment.instances if i.role == "decode")
    n = decode.gpus
    assert decode.layout == "tp-ep" and scenario.roles["decode"].instance.kv_senders == n
    node = NodeContext(Shell("$R"), Shell("h"))
    sglang = " ".join(sglang_args(deployment, decode, node))
    assert f"--tp-size {n} --ep-size {n} " in sglang and "--attn-dp-size" not in sglang and "deepep" not in sglang
    vllm = " ".join(vllm_args(deployment, decode, node))
    assert f"--tensor-parallel-size {n} --enable-expert-parallel" in vllm and "--data-parallel-size" not in vllm
    role = scenario_roles(scenario)["decode"]
    assert role["tp_attention"] is True and parallel_label(role) == f"TP{n} EP-TPA"
    assert "tp_attention" not in scenario_roles(scenario)["prefill"]
    written = scenario.plan.model_dump(mode="json")  # a plan file names it only where it is set
    assert written["decode"]["tp_attention"] is True and "tp_attention" not in written["prefill"]


def test_tensor_parallel_attention_on_a_tensor_parallel_role_is_one_error_line(cli: Any, tmp_path: Path) -> None:
    data = yaml.safe_load(PLANS["pd-intra"].read_text(encoding="utf-8"))
    data["decode"] |= {"expert_parallel": False, "tp_attention": True}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = cli("evaluate", str(path), "pdd-agent-64k")
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "decode: tp_attention = true" in line and str(path) in line


def test_out_refuses_a_symbolic_link_to_another_folder(cli: Any, tmp_path: Path) -> None:
    """`--out LINK` where LINK points at a system folder wrote the launch files there (exit 0):
    the folder must be new or ordinary, and nothing is written through the link."""
    target = tmp_path / "system"
    target.mkdir()
    link = tmp_path / "launch"
    link.symlink_to(target)
    result = cli("export", str(PLANS["pd-intra"]), "pdd-agent-64k", "--target", "sglang", "--out", str(link))
    assert result.exit_code == 2 and "symbolic link" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(target.iterdir()) == []


def _workload_with_model(tmp_path: Path, model: str) -> Path:
    data = yaml.safe_load((ROOT / "workloads" / "pdd-agent-64k.yaml").read_text(encoding="utf-8"))
    data["model"] = model
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_model_path_with_a_newline_is_refused_not_run(cli: Any, tmp_path: Path) -> None:
    """A model config whose file name holds newlines put a bare command into every script's header
    comment (`bash -n` accepted it): refused, one line, exit 2, nothing written."""
    config = tmp_path / "evil\ntouch PWNED\n.json"
    config.write_text((ROOT / "pddplan" / "model_catalog" / "deepseek-v3.2.json").read_text())
    workload = _workload_with_model(tmp_path, str(config))
    out = tmp_path / "launch"
    for target in ("sglang", "vllm", "k8s"):
        args = ("--target", target, "--model-path", "m", "--out", str(out))
        result = cli("export", str(PLANS["pdd"]), str(workload), *args)
        assert result.exit_code == 2, result.output
        assert "control character" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()
    result = cli("export", str(PLANS["pdd"]), "pdd-agent-64k", "--target", "sglang", "--model-path", "a\nb")
    assert result.exit_code == 2 and "model_path" in result.stderr
    result = cli("export", str(PLANS["pdd"]), "pdd-agent-64k", "--target", "k8s", "--image", "img\r:1")
    assert result.exit_code == 2 and "--image" in result.stderr


def test_a_plan_name_with_a_newline_is_refused_naming_the_plan_file(cli: Any, tmp_path: Path) -> None:
    """The error said 'plan name = ...' without the file the name came from."""
    data = yaml.safe_load(PLANS["pdd"].read_text(encoding="utf-8"))
    data["name"] = "x\ntouch PWNED"
    plan = tmp_path / "p.yaml"
    plan.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = cli("export", str(plan), "pdd-agent-64k", "--target", "sglang", "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {plan}: name = ")
    assert "control character" in result.stderr and not (tmp_path / "o").exists()


@pytest.mark.parametrize(("flag", "target"), [("--model-path", "vllm"), ("--model-path", "sglang"), ("--image", "k8s")])
def test_a_value_that_looks_like_an_option_is_refused(cli: Any, tmp_path: Path, flag: str, target: str) -> None:
    """`--model-path --trust-remote-code` wrote `vllm serve --trust-remote-code ...`: the engine read
    the checkpoint as an option. A value starting with '-' is refused, one line, nothing written."""
    out = tmp_path / "launch"
    result = cli("export", str(PLANS["pdd"]), "pdd-agent-64k", "--target", target, flag, "--trust-remote-code",
                 "--out", str(out))  # fmt: skip
    assert result.exit_code == 2 and "starts with '-'" in result.stderr, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("target", ["sglang", "vllm"])
def test_shell_metacharacters_in_every_input_value_reach_the_engine_as_data(target: str, tmp_path: Path) -> None:
    """Every value a user gives that reaches a script (model path, model config path) is quoted:
    run with a stub engine, the script passes `$(touch PWNED)` and friends through literally and
    no command in them runs."""
    hostile = "$(touch PWNED) `touch PWNED` ; touch PWNED ' \" \\"
    config = tmp_path / f"cfg {hostile.replace('/', '_')}.json"
    config.write_text((ROOT / "pddplan" / "model_catalog" / "deepseek-v3.2.json").read_text())
    scenario = scenario_of(PLANS["pdd"], _workload_with_model(tmp_path, str(config)))
    result = export_plan(scenario, target, model_path=hostile)  # type: ignore[arg-type]
    addresses = {address_variable(i): "10.0.0.1" for i in result.deployment.instances}
    files = result.files
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name, text in files.items():
        if not name.endswith(".sh"):
            continue
        argv = ["0"] if "NODE_RANK" in text else []
        received = _run_with_fake_engine(f"cd {shlex.quote(str(run_dir))}\n{text}", argv, addresses, tmp_path)
        if name != "router.sh":
            assert hostile in received, name
    assert not any(run_dir.iterdir()) and not (tmp_path / "PWNED").exists()


def test_gpus_per_node_is_bounded(cli: Any) -> None:
    result = cli("export", str(PLANS["pd-intra"]), "pdd-agent-64k", "--target", "k8s", "--gpus-per-node", "1000000000")
    assert result.exit_code == 2 and "--gpus-per-node = 1000000000: must be 1 to 384" in result.stderr


def test_manifests_pin_the_engine_release_the_flags_were_checked_against() -> None:
    """They pulled `:latest` before (issue 37, item 10), whose flags move under the manifests."""
    for engine in ("sglang", "vllm"):
        image = DEFAULT_IMAGE[engine]
        assert not image.endswith(":latest")
        version = ENGINE_VERSIONS[engine].split()[1]  # "SGLang 0.5.23 (...)" -> "0.5.23"
        assert f":v{version}" in image


def _agg_workload(tmp_path: Path, **serving: Any) -> Path:
    """pdd-agent-64k with `serving` fields set (a decode batch cap, CUDA graphs, MTP)."""
    data = yaml.safe_load((ROOT / "workloads" / "pdd-agent-64k.yaml").read_text(encoding="utf-8"))
    data["serving"] |= serving
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_an_agg_plan_is_co_located_servers_without_kv_transfer() -> None:
    """agg's one role, `prefill`, is servers that prefill and decode: no disaggregation mode, no KV
    transfer (so no RDMA pinning, no SGLang bootstrap port), titled P+D; no PDD routing file."""
    result = _export("agg", "k8s")
    deployment = result.deployment
    assert deployment.colocated and len(deployment.instances) == 7
    assert all(i.disaggregation == "none" and i.kv_transfer == "none" for i in deployment.instances)
    assert all(i.role == "prefill" and not i.decode_radix_cache for i in deployment.instances)
    services = [d for d in _documents(result.files) if d["kind"] == "Service"]
    assert all([p["name"] for p in d["spec"]["ports"]] == ["http"] for d in services)
    pods = [d["spec"]["template"]["spec"] for d in _documents(result.files) if d["kind"] == "Deployment"]
    assert not any("securityContext" in c for pod in pods for c in pod["containers"])
    for target in ("sglang", "vllm"):
        files = _export("agg", target).files
        assert "pdd-router.yaml" not in files
        assert "prefill + decode (P+D)" in files["prefill-0.sh"] and "| prefill + decode (P+D) |" in files["README.md"]
        assert "regular mode over every server" in files["README.md"]
    assert "co-locates" not in _export("pd-intra", "sglang").files["README.md"]


@pytest.mark.parametrize("target", ["sglang", "vllm"])
def test_agg_servers_mix_chunked_prefill_into_decode_steps(target: str, tmp_path: Path) -> None:
    """Each agg server, as the engine receives it: no PD flags, the chunk budget with mixing
    (SGLang `--enable-mixed-chunk`, its budget per instance: 8,192 per attention rank times 8;
    vLLM V1 mixes by default, its budget per data-parallel engine), vLLM's prefix cache kept and
    DeepEP's high-throughput kernels (its steps carry prefill chunks)."""
    files = _export("agg", target).files
    servers = [name for name in files if name.startswith("prefill-")]
    assert len(servers) == 7
    for name in servers:
        argv = _run_with_fake_engine(files[name], [], {"PREFILL_0_ADDR": "10.0.0.1"}, tmp_path)
        assert not any("disaggregation" in a or a == "--kv-transfer-config" for a in argv), argv
        flags = dict(itertools.pairwise(argv))
        if target == "sglang":
            assert flags["--chunked-prefill-size"] == str(8192 * 8) and "--enable-mixed-chunk" in argv
            assert flags["--attn-dp-size"] == "8"
        else:
            assert flags["--max-num-batched-tokens"] == "8192" and "--enable-prefix-caching" in argv
            assert flags["--all2all-backend"] == "deepep_high_throughput"


@pytest.mark.parametrize("target", ["sglang", "vllm"])
def test_the_agg_router_runs_in_regular_mode_over_every_server(target: str, tmp_path: Path) -> None:
    """`router.sh` lists every server after one `--worker-urls`, cache-aware, with no PD mode."""
    result = _export("agg", target)
    addresses = {address_variable(i): f"10.0.0.{i.index + 1}" for i in result.deployment.instances}
    argv = _run_with_fake_engine(result.files["router.sh"], [], addresses, tmp_path)
    port = 30000 if target == "sglang" else 8000
    workers = [f"http://10.0.0.{n}:{port}" for n in range(1, 8)]
    head = ["-m", "sglang_router.launch_router"] if target == "sglang" else []
    assert argv == [*head, "--worker-urls", *workers, "--policy", "cache_aware", "--host", "0.0.0.0", "--port", "8000"]
    router = next(
        d for d in _documents(_export("agg", "k8s", engine=target).files) if "router" in d["metadata"]["name"]
    )
    command = router["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "--worker-urls http://pdd-agent-64k-agg-prefill-0:" in command and "disaggregation" not in command


def test_agg_servers_take_the_decode_batch_cap_cuda_graphs_and_mtp(tmp_path: Path) -> None:
    """The workload's decode batch cap and CUDA-graph bound reach every co-located server as they
    reach decoders; with MTP, the SGLang README says mixed chunks are off and the step model fails."""
    workload = _agg_workload(
        tmp_path, max_decode_batch=64, cuda_graph_max_batch=32, mtp_draft_tokens=1, mtp_acceptance=0.8
    )
    scenario = scenario_of(PLANS["agg"], workload)
    sglang = export_plan(scenario, "sglang").files
    for flag in ("--max-running-requests 64", "--cuda-graph-max-bs-decode 32", "--speculative-algorithm NEXTN"):
        assert flag in sglang["prefill-0.sh"], flag
    assert "drafts 1 tokens per step with MTP" in sglang["README.md"]
    vllm = export_plan(scenario, "vllm").files["prefill-0.sh"]
    assert "--max-num-seqs 64" in vllm and """'{"max_decode_cudagraph_capture_requests":32}'""" in vllm
    eager = scenario_of(PLANS["agg"], _agg_workload(tmp_path, cuda_graph_max_batch=0))
    assert "--disable-decode-cuda-graph" in export_plan(eager, "sglang").files["prefill-0.sh"]
    assert "--enforce-eager" in export_plan(eager, "vllm").files["prefill-0.sh"]
    assert "MTP" not in export_plan(eager, "sglang").files["README.md"]


def test_instances_smaller_than_a_node_share_it_in_scripts_not_in_manifests() -> None:
    """The PDD plan's 16-GPU instances on (hypothetical) 32-GPU nodes: the two main decoders share
    one node in the launch scripts, decode-1 on GPUs 16-31 with its server port 100 higher (the
    router's URL too) and vLLM's NIXL side channel past decode-0's 16 ranks; 3 instances on 2
    servers. Kubernetes schedules pods itself: its manifests keep one port and no GPU list."""
    sglang = _export("pdd", "sglang", gpus_per_node=32)
    decode_0, decode_1 = sglang.deployment.of_role("decode")
    assert (decode_0.slot, decode_1.slot, decode_1.per_server) == (0, 1, 2)
    assert decode_1.gpu_ids == list(range(16, 32)) and sglang.deployment.instances[0].gpu_ids is None
    script = sglang.files["decode-1.sh"]
    assert "export CUDA_VISIBLE_DEVICES=" + ",".join(str(g) for g in range(16, 32)) in script
    assert "--port 30100" in script and "--port 30000" in sglang.files["decode-0.sh"]
    assert "${DECODE_1_ADDR}:30100" in sglang.files["router.sh"]
    assert (
        "3 instances on 2 servers" in sglang.files["README.md"] and "- decode-0, decode-1" in sglang.files["README.md"]
    )
    vllm = _export("pdd", "vllm", gpus_per_node=32).files["decode-1.sh"]
    assert "export VLLM_NIXL_SIDE_CHANNEL_PORT=5616" in vllm and "--port 8100" in vllm
    manifests = "".join(_export("pdd", "k8s", gpus_per_node=32).files.values())
    assert "CUDA_VISIBLE_DEVICES" not in manifests and "30100" not in manifests
