"""Messages that say what is wrong in the user's own words: the file and line, the config key the
user wrote, the advice that follows from what binds, each reason once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_results import one_error_line

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "workloads" / "pdd-agent-64k.yaml"
MEASUREMENTS = ROOT / "tests" / "data" / "measurements.csv"


def csv_with(tmp_path: Path, column: int, value: str) -> Path:
    """The measurements CSV's header and first ten rows, with one column of line 11 replaced."""
    lines = MEASUREMENTS.read_text(encoding="utf-8").splitlines()[:11]
    cells = lines[10].split(",")
    cells[column] = value
    lines[10] = ",".join(cells)
    path = tmp_path / "m.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_calibrate_names_the_file_and_line_of_an_unknown_gpu(cli: Any, tmp_path: Path) -> None:
    path = csv_with(tmp_path, 1, "h100x")
    one_error_line(
        cli("calibrate", str(path), "--all"),
        f"{path}: line 11: gpu = 'h100x': unknown GPU 'h100x'; did you mean 'h100-sxm'?",
    )


def test_calibrate_names_the_file_and_line_of_an_unknown_model(cli: Any, tmp_path: Path) -> None:
    path = csv_with(tmp_path, 0, "llama-9")
    one_error_line(cli("calibrate", str(path), "--all"), f"{path}: line 11: model = 'llama-9': unknown model")


def test_a_config_error_names_the_config_key(cli: Any, tmp_path: Path) -> None:
    config = json.loads((ROOT / "pddplan" / "model_catalog" / "llama-3.1-8b.json").read_text())
    config["num_key_value_heads"] = 5
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    line = one_error_line(cli("models", "show", str(path)), "num_attention_heads (32)", "num_key_value_heads (5)")
    assert "num_kv_heads" not in line and "num_heads " not in line
    config["num_key_value_heads"] = -1
    path.write_text(json.dumps(config))
    one_error_line(cli("models", "show", str(path)), "num_key_value_heads: Input should be greater than 0 (got -1)")


def test_no_inventory_is_not_advised_larger_gpus(cli: Any, tmp_path: Path) -> None:
    """Every max_count at 0: the reason is the empty offer, said once for all architectures."""
    path = tmp_path / "w.yaml"
    path.write_text(AGENT.read_text(encoding="utf-8").replace("max_count: 256", "max_count: 0"), encoding="utf-8")
    result = cli("optimize", str(path), "--no-verify", "--json")
    assert result.exit_code == 3
    assert json.loads(result.stdout)["best"] is None  # the report still says what was tried
    [line] = result.stderr.splitlines()
    assert line == (
        "error: no architecture meets the constraints. all architectures: no GPUs are offered: "
        "every deployment.datacenters[*].gpus[*].max_count is 0"
    )
    assert "larger GPUs" not in line


def test_a_cross_field_check_shows_the_path_not_the_mapping(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(AGENT.read_text(encoding="utf-8").replace("max_tokens: 8192", "max_tokens: 10"), encoding="utf-8")
    one_error_line(
        cli("workloads", "show", str(path)), f"error: {path}: output_tokens: min_tokens (16) exceeds max_tokens (10)"
    )


def test_an_upper_case_gpu_name_is_pointed_at_the_gpu_it_names(cli: Any) -> None:
    # it suggested h800 before: the closest spelling of "H100" by edit distance
    line = one_error_line(
        cli("estimate", "--model", "llama-3.1-8b", "--gpu", "H100", "--decode-batch", "1", "--context", "9")
    )
    assert line == "error: unknown GPU 'H100'; did you mean 'h100-sxm'?"


def test_a_hugging_face_id_that_is_no_local_file_names_the_catalog_model(cli: Any, tmp_path: Path) -> None:
    # it said only "file not found" before
    line = one_error_line(cli("models", "show", "Qwen/Qwen3-32B"))
    assert line == "error: Qwen/Qwen3-32B: file not found, nor a catalog model; did you mean 'qwen3-32b'?"
    moved = tmp_path / "pdd-agent-64k.yaml"
    line = one_error_line(cli("workloads", "show", str(moved)))
    assert line == f"error: {moved}: file not found, nor a catalog workload; did you mean 'pdd-agent-64k'?"
