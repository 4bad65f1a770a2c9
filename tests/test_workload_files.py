"""Shipped workload and hardware files load; broken workload files fail through
`pddplan workloads show FILE` with exit code 2 and exactly one `error:` line naming the problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_model, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.support import catalog

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "workloads" / "pdd-agent-64k.yaml"
WORKLOADS = list(catalog.entries("workloads"))
PROFILES = list(catalog.entries("hardware_profiles"))


def shows_one_error(cli: Any, path: Path | str) -> str:
    result = cli("workloads", "show", str(path))
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stderr.endswith("\n")
    return str(lines[0])


def edited(tmp_path: Path, old: str, new: str, name: str = "w.yaml") -> Path:
    """The good workload file with one textual edit (which must apply exactly once)."""
    text = GOOD.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"edit anchor {old!r} found {text.count(old)} times"
    path = tmp_path / name
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


# -- the shipped files load -----------------------------------------------------------------------
@pytest.mark.parametrize("name", WORKLOADS)
def test_shipped_workload_loads(name: str) -> None:
    workload = load_workload(name)
    assert workload.name == name
    assert load_model(workload.model, workload.kv_dtype).num_layers > 0
    for dc in workload.deployment.datacenters:
        for offer in dc.gpus:
            assert offer.type in PROFILES
    assert workload_dir(name) == (ROOT / "workloads").resolve()
    # by path as well as by name
    assert load_workload(str(ROOT / "workloads" / f"{name}.yaml")) == workload


@pytest.mark.parametrize("name", PROFILES)
def test_shipped_profile_loads(name: str) -> None:
    assert load_hardware(name).name == name
    assert load_hardware(str(ROOT / "hardware_profiles" / f"{name}.yaml")).name == name


def test_good_file_through_the_cli(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "copy.yaml"
    path.write_text(GOOD.read_text())
    result = cli("workloads", "show", str(path), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["name"] == "pdd-agent-64k"


# -- broken files: the full error line ------------------------------------------------------------
def test_unknown_key_typo(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "\narrival:\n", "\narival:\n")
    assert shows_one_error(cli, path) == (
        f"error: {path}: arival: unknown field; did you mean 'arrival'? (also arrival: required field is missing)"
    )


def test_unknown_nested_key_typo(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "  process: poisson\n", "  proces: poisson\n")
    assert shows_one_error(cli, path) == f"error: {path}: arrival.proces: unknown field; did you mean 'process'?"


def test_negative_capacity(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "capacity_gbps: 100\n", "capacity_gbps: -100\n")
    assert shows_one_error(cli, path) == (
        f"error: {path}: deployment.wan_lines[0].capacity_gbps = -100: Input should be greater than or equal to 0.001"
    )


def test_buckets_summing_to_point_nine(cli: Any, tmp_path: Path) -> None:
    path = edited(
        tmp_path,
        "  article_shares: [0.12, 0.13, 0.06, 0.08, 0.12, 0.19, 0.30]\n",
        "  buckets:\n    - {low: 0.0, high: 0.5, share: 0.5}\n    - {low: 0.5, high: 1.0, share: 0.4}\n",
    )
    assert shows_one_error(cli, path) == (f"error: {path}: hit_rate: bucket shares sum to 0.9, expected 1")


def test_article_shares_summing_to_point_nine(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "article_shares: [0.12, 0.13,", "article_shares: [0.02, 0.13,")
    line = shows_one_error(cli, path)
    assert line.startswith(f"error: {path}: hit_rate: ")
    assert line.endswith(": bucket shares sum to 0.9, expected 1")


def test_hit_above_one(cli: Any, tmp_path: Path) -> None:
    path = edited(
        tmp_path,
        "  article_shares: [0.12, 0.13, 0.06, 0.08, 0.12, 0.19, 0.30]\n",
        "  buckets:\n    - {low: 0.5, high: 1.3, share: 1.0}\n",
    )
    assert shows_one_error(cli, path) == (
        f"error: {path}: hit_rate.buckets[0].high = 1.3: Input should be less than or equal to 1"
    )


def test_unknown_gpu_type(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "{type: gpu-a, max_count: 256}", "{type: h100-sxn, max_count: 256}")
    assert shows_one_error(cli, path) == (
        f"error: {path}: deployment.datacenters[0].gpus[0].type = 'h100-sxn': unknown GPU; did you mean 'h100-sxm'?"
    )


def test_unknown_gpu_type_in_second_datacenter(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "{type: gpu-b, max_count: 256}", "{type: h20x, max_count: 256}")
    assert shows_one_error(cli, path) == (
        f"error: {path}: deployment.datacenters[1].gpus[0].type = 'h20x': unknown GPU; did you mean 'h20'?"
    )


def test_gpu_type_may_be_a_profile_file(cli: Any, tmp_path: Path) -> None:
    profile = tmp_path / "my-gpu.yaml"
    profile.write_text((ROOT / "hardware_profiles" / "h20.yaml").read_text())
    path = edited(tmp_path, "{type: gpu-b, max_count: 256}", f"{{type: {profile}, max_count: 256}}")
    result = cli("workloads", "show", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["datacenters"][1]["gpus"][0]["type"] == str(profile)


def test_a_relative_gpu_profile_path_is_read_from_the_workload_folder(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`type: my-g.yaml` next to the workload works from any working directory, as the model and
    line traces do; the plan names the type as the workload wrote it, and reads back anywhere."""
    folder = tmp_path / "wl"
    folder.mkdir()
    (folder / "my-g.yaml").write_text((ROOT / "hardware_profiles" / "gpu-a.yaml").read_text())
    path = edited(folder, "{type: gpu-a, max_count: 256}", "{type: my-g.yaml, max_count: 256}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    plan = elsewhere / "plan.yaml"
    result = cli("optimize", str(path), "-a", "pd-intra", "--no-verify", "--json", "--output", str(plan))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["best"] == "pd-intra"
    assert "gpu: my-g.yaml" in plan.read_text()
    evaluated = cli("evaluate", str(plan), str(path), "--json")
    assert evaluated.exit_code == 0, evaluated.stderr
    (folder / "my-g.yaml").unlink()  # now the name points nowhere: said with the field and the file
    line = shows_one_error(cli, path)
    assert line.startswith(f"error: {path}: deployment.datacenters[0].gpus[0].type = 'my-g.yaml'") and (
        f"{folder / 'my-g.yaml'}: file not found" in line
    ), line


def test_unknown_model(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "model: deepseek-v3.2\n", "model: kimi-k3\n")
    assert shows_one_error(cli, path) == (
        f"error: {path}: model = 'kimi-k3': unknown model 'kimi-k3'; did you mean 'kimi-k2'?"
    )


def test_unknown_model_with_a_dot(cli: Any, tmp_path: Path) -> None:
    """Catalog names carry dots (deepseek-v3.2); a misspelt one is still a name, not a file."""
    path = edited(tmp_path, "model: deepseek-v3.2\n", "model: deepseek-v3.3\n")
    assert shows_one_error(cli, path) == (
        f"error: {path}: model = 'deepseek-v3.3': unknown model 'deepseek-v3.3'; did you mean 'deepseek-v3.2'?"
    )


def test_model_given_as_a_config_next_to_the_workload(tmp_path: Path) -> None:
    """A relative model path is read from the workload's folder, not the working directory."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_text(
        (catalog.catalog_dir("model_catalog") / "llama-3.1-8b.json").read_text()
    )
    path = edited(tmp_path, "model: deepseek-v3.2\nkv_dtype: fp8\n", "model: models/config.json\n")
    workload = load_workload(str(path))
    assert Path(workload.model) == tmp_path / "models" / "config.json"
    assert load_model(workload.model).num_layers == 32


def test_wrong_type(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "rate_rps: 4.0\n", "rate_rps: '4.0'\n")
    assert shows_one_error(cli, path) == f"error: {path}: arrival.rate_rps = '4.0': Input should be a valid number"


def test_missing_field(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "  ttft_p99_s: 20.0\n", "")
    assert shows_one_error(cli, path) == f"error: {path}: sla.ttft_p99_s: required field is missing"


def test_several_problems(cli: Any, tmp_path: Path) -> None:
    text = GOOD.read_text().replace("rate_rps: 4.0", "rate_rps: 0").replace("ttft_p90_s: 10.0", "ttft_p90_s: -1")
    path = tmp_path / "w.yaml"
    path.write_text(text)
    assert shows_one_error(cli, path) == (
        f"error: {path}: arrival.rate_rps = 0: Input should be greater than or equal to 0.000001 "
        "(also sla.ttft_p90_s = -1: Input should be greater than 0)"
    )


def test_missing_file(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    assert shows_one_error(cli, path) == f"error: {path}: file not found"


def test_directory_instead_of_a_file(cli: Any, tmp_path: Path) -> None:
    assert shows_one_error(cli, tmp_path) == f"error: {tmp_path}: is a directory, expected a file"


def test_bad_yaml(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "name: pdd-agent-64k\n", "name: pdd-agent-64k\n  oops: [\n")
    line = shows_one_error(cli, path)
    # line 7 of the file: "  oops: [" right after `name:` (the file opens with 5 comment lines)
    assert line.startswith(f"error: {path}: not valid YAML at line 9, column 7: mapping values are not allowed")


def test_bad_json(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text('{"name": "x",\n "arrival": }\n')
    assert shows_one_error(cli, path) == f"error: {path}: not valid JSON at line 2, column 13: Expecting value"


def test_workload_as_json(cli: Any, tmp_path: Path) -> None:
    from pddplan.support.loading import read_data

    path = tmp_path / "w.json"
    path.write_text(json.dumps(read_data(GOOD)))
    result = cli("workloads", "show", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["name"] == "pdd-agent-64k"


def test_empty_file(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n")
    assert shows_one_error(cli, path) == f"error: {path}: expected a mapping of fields at the top level, got empty"


def test_library_raises_the_same_message(tmp_path: Path) -> None:
    path = edited(tmp_path, "capacity_gbps: 100\n", "capacity_gbps: -100\n")
    with pytest.raises(InputError) as info:
        load_workload(str(path))
    expected = "deployment.wan_lines[0].capacity_gbps = -100: Input should be greater than or equal to 0.001"
    assert str(info.value) == f"{path}: {expected}"


# -- serving stack --------------------------------------------------------------------------------
def test_serving_stack_every_gpu_lacks_is_one_line(cli: Any, tmp_path: Path) -> None:
    path = edited(tmp_path, "serving:\n", "serving:\n  stack: nope-1\n")
    line = shows_one_error(cli, path)
    assert line.startswith(f"error: {path}: serving.stack = 'nope-1': hardware profile 'gpu-a' has no factors")
    assert "pddplan calibrate MEASUREMENTS.csv --gpu gpu-a --stack nope-1" in line


def test_serving_stack_selects_the_stack_factors_for_plans_and_candidates(tmp_path: Path) -> None:
    """Both the optimizer's candidates and a resolved plan step with the stack's factors."""
    from pddplan.optimize.candidates import instance_candidates
    from pddplan.perf.efficiency import efficiency_of

    stack = "vllm-ci-2024"  # calibrated on h100-sxm (gpu-a copies it) and h200 (gpu-b copies it)
    workload = load_workload(str(edited(tmp_path, "serving:\n", f"serving:\n  stack: {stack}\n")))
    assert workload.serving.stack == stack
    candidates = instance_candidates(load_input_set(workload), workload.serving.chunk_tokens)
    assert candidates
    for candidate in candidates:
        hardware = load_hardware(candidate.gpu)
        assert candidate.instance.efficiency == efficiency_of(hardware, stack)
        assert candidate.instance.efficiency != efficiency_of(hardware)
    plain = load_workload(str(GOOD))
    assert plain.serving.stack is None
    assert all(c.instance.stack is None for c in instance_candidates(load_input_set(plain), plain.serving.chunk_tokens))
