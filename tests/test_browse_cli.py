"""The browsing commands (`hardware`, `models`, `workloads`), their stdout/stderr contract, their
errors, and the help text of every command."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from cli_results import human_of, json_of, one_error_line

from pddplan.cli import app
from pddplan.inputs import model_index
from pddplan.support import catalog

HARDWARE = list(catalog.entries("hardware_profiles"))
MODELS = list(model_index())
WORKLOADS = list(catalog.entries("workloads"))


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide enough that no table cell wraps, so lines can be searched for."""
    monkeypatch.setenv("COLUMNS", "400")


def test_shipped_catalogs() -> None:
    assert len(HARDWARE) >= 10
    assert len(MODELS) == 14
    assert WORKLOADS == [
        "chat-short-lowhit",
        "coding-agent-128k",
        "pdd-agent-64k",
        "pdd-agent-64k-day",
        "pdd-agent-64k-hetero",
        "qwen3-32b-h200-isl16k",
        "rag-longdoc-lowhit",
    ]


# -- hardware -------------------------------------------------------------------------------------
def test_hardware_list_json(cli: Any) -> None:
    rows = json_of(cli("hardware", "list", "--json"))
    assert [row["name"] for row in rows] == HARDWARE
    h100 = next(row for row in rows if row["name"] == "h100-sxm")
    assert h100["figures"]["memory"]["hbm_gb"]["value"] == 80  # nested as in the profile's YAML
    assert h100["figures"]["memory"]["hbm_gb"]["source"] == "klockwood-h100"
    assert h100["rental_usd_per_gpu_hour"] == 1.37
    gb200 = next(row for row in rows if row["name"] == "gb200")
    assert gb200["rental_usd_per_gpu_hour"] is None  # unknown, not invented


def test_hardware_list_human(cli: Any) -> None:
    text = human_of(cli("hardware", "list"))
    for name in HARDWARE:
        assert name in text
    assert "BF16 TFLOPS" in text and "$/GPU-h" in text
    h100 = next(line for line in text.splitlines() if " h100-sxm " in line)
    for cell in ("989.4", "1,978.9", "80", "3.35", "450", "400", "700", "1.370"):
        assert f" {cell} " in h100, (cell, h100)
    gb200 = next(line for line in text.splitlines() if " gb200 " in line)
    assert " unknown " in gb200


@pytest.mark.parametrize("name", HARDWARE)
def test_hardware_show_json(cli: Any, name: str) -> None:
    summary = json_of(cli("hardware", "show", name, "--json"))
    assert summary["name"] == name
    assert "bf16_dense_tflops" in summary["figures"]["compute"]
    for group, entries in summary["figures"].items():
        for name, figure in entries.items():
            if figure["value"] is None:
                assert figure["source"].startswith("unknown:"), (group, name)


def test_hardware_show_human(cli: Any) -> None:
    text = human_of(cli("hardware", "show", "h100-sxm"))
    assert text.startswith("h100-sxm: NVIDIA H100 SXM5 80 GB HBM3")
    hbm = next(line for line in text.splitlines() if "memory.hbm_tb_per_s" in line)
    assert "3.35" in hbm and "klockwood-h100" in hbm
    assert "https://glennklockwood.com/garden/processors/h100" in text
    assert "efficiency factors" in text


def test_hardware_show_file(cli: Any, root: Any, tmp_path: Any) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text((root / "hardware_profiles" / "h20.yaml").read_text())
    assert json_of(cli("hardware", "show", str(path), "--json"))["name"] == "h20"


@pytest.mark.parametrize(
    ("figure", "old", "new"),
    [
        ("interconnect.scale_up_domain", "scale_up_domain: {value: 8,", "scale_up_domain: {value: 0,"),
        ("memory.hbm_tb_per_s", "hbm_tb_per_s: {value: 4.8,", "hbm_tb_per_s: {value: 0,"),
    ],
    ids=["scale-up-domain", "hbm-bandwidth"],
)
def test_hardware_profile_with_a_zero_capability_is_one_error_line(
    cli: Any, root: Any, tmp_path: Any, figure: str, old: str, new: str
) -> None:
    """Guards the profile check that compute, memory and interconnect figures are > 0: a profile file
    with scale_up_domain 0 or hbm_tb_per_s 0 (a divisor of step times) is rejected with one error
    line naming the figure, by `hardware show FILE` and by `estimate --gpu FILE`."""
    text = (root / "hardware_profiles" / "gpu-b.yaml").read_text()
    assert text.count(old) == 1
    path = tmp_path / "zero.yaml"
    path.write_text(text.replace(old, new))
    for args in (
        ("hardware", "show", str(path), "--json"),
        ("estimate", "--model", "llama-3.1-8b", "--gpu", str(path), "--prefill", "1000", "--json"),
    ):
        line = one_error_line(cli(*args))
        assert f"{figure} = 0: must be > 0" in line, (args, line)
        assert str(path) in line


# -- models ---------------------------------------------------------------------------------------
def test_models_list_json(cli: Any) -> None:
    rows = json_of(cli("models", "list", "--json"))
    assert [row["name"] for row in rows] == MODELS
    by_name = {row["name"]: row for row in rows}
    assert by_name["llama-3.1-8b"]["params_total"] == 8_030_261_248
    assert by_name["llama-3.1-8b"]["kv_bytes_per_token"] == 131_072
    assert by_name["deepseek-v3.2"]["kv_dtype"] == "fp8"
    assert by_name["deepseek-v3.2"]["kv_bytes_per_token"] == 48_068


def test_models_list_kv_dtype_fp8(cli: Any) -> None:
    rows = {row["name"]: row for row in json_of(cli("models", "list", "--kv-dtype", "fp8", "--json"))}
    assert rows["llama-3.1-8b"]["kv_bytes_per_token"] == 65_536
    assert rows["deepseek-v3"]["kv_bytes_per_token"] == 40_016
    assert rows["gpt-oss-120b"]["kv_bytes_per_token"] == 18_432
    assert all(row["kv_dtype"] == "fp8" for row in rows.values())
    rows = {row["name"]: row for row in json_of(cli("models", "list", "--kv-dtype", "bf16", "--json"))}
    assert rows["deepseek-v3.2"]["kv_bytes_per_token"] == 78_324


def test_models_list_human(cli: Any) -> None:
    text = human_of(cli("models", "list"))
    for name in MODELS:
        assert name in text
    line = next(line for line in text.splitlines() if " gpt-oss-120b " in line)
    assert "18 full, 18 sliding" in line and "36,864" in line
    line = next(line for line in text.splitlines() if " qwen3-next-80b-a3b " in line)
    assert "12 full, 36 linear" in line and "24,576" in line


@pytest.mark.parametrize("name", MODELS)
def test_models_show_json(cli: Any, name: str) -> None:
    summary = json_of(cli("models", "show", name, "--json"))
    assert summary["name"] == name
    assert summary["params_total"] >= summary["params_active"] > 0
    assert summary["kv_bytes_per_token"] > 0
    full_layers = summary["layers"].get("full", 0)
    assert summary["kv_formula"].startswith(f"{full_layers} full layers x (")
    assert f") = {summary['kv_bytes_per_token']:,.0f} B/token" in summary["kv_formula"]


def test_models_show_kv_dtype_changes_kv_bytes(cli: Any) -> None:
    bf16 = json_of(cli("models", "show", "llama-3.1-70b", "--json"))
    fp8 = json_of(cli("models", "show", "llama-3.1-70b", "--kv-dtype", "fp8", "--json"))
    assert (bf16["kv_dtype"], bf16["kv_bytes_per_token"]) == ("bf16", 327_680)
    assert (fp8["kv_dtype"], fp8["kv_bytes_per_token"]) == ("fp8", 163_840)
    assert fp8["params_total"] == bf16["params_total"]


def test_models_show_human_shows_the_formula(cli: Any) -> None:
    text = human_of(cli("models", "show", "deepseek-v3.2"))
    assert "61 full layers x (512 fp8 latent + 16 scales + 64x2 rope + 128 + 4 indexer) = 48,068 B/token" in text
    text = human_of(cli("models", "show", "deepseek-v3.2", "--kv-dtype", "bf16"))
    assert "61 full layers x ((512 + 64) x 2 bf16 + 128 + 4 indexer) = 78,324 B/token" in text
    text = human_of(cli("models", "show", "llama-3.1-8b", "--kv-dtype", "fp8"))
    assert "32 full layers x (2 x 8 kv heads x 128 x 1 B) = 65,536 B/token" in text
    assert "8,030,261,248" in text
    text = human_of(cli("models", "show", "gpt-oss-120b"))
    assert "18 full layers x (2 x 8 kv heads x 64 x 2 B) = 36,864 B/token" in text
    assert "18 sliding layers add 36,864 B/token up to 128 tokens" in text
    text = human_of(cli("models", "show", "qwen3-next-80b-a3b"))
    assert "36 linear layers hold 77.3 MB per sequence" in text


def test_models_show_bad_kv_dtype(cli: Any) -> None:
    assert one_error_line(cli("models", "show", "llama-3.1-8b", "--kv-dtype", "fp16")) == (
        "error: --kv-dtype = 'fp16': expected bf16 or fp8"
    )


# -- workloads ------------------------------------------------------------------------------------
def test_workloads_list_json(cli: Any) -> None:
    rows = json_of(cli("workloads", "list", "--json"))
    assert [row["name"] for row in rows] == WORKLOADS
    pdd = next(row for row in rows if row["name"] == "pdd-agent-64k")
    assert pdd["model"] == "deepseek-v3.2"
    assert pdd["prompt_tokens_mean"] == 64512
    assert pdd["hit_rate_mean"] == pytest.approx(0.9114)
    assert len(pdd["hit_buckets"]) == 7


def test_workloads_list_human(cli: Any) -> None:
    text = human_of(cli("workloads", "list"))
    for name in WORKLOADS:
        assert name in text
    line = next(line for line in text.splitlines() if " pdd-agent-64k " in line)
    assert "deepseek-v3.2" in line and "64,512" in line and "91.1%" in line and "10 / 20" in line


@pytest.mark.parametrize("name", WORKLOADS)
def test_workloads_show(cli: Any, name: str) -> None:
    summary = json_of(cli("workloads", "show", name, "--json"))
    assert summary["name"] == name
    assert summary["model"] in MODELS
    assert summary["rate_rps"] > 0
    assert sum(b["share"] for b in summary["hit_buckets"]) == pytest.approx(1.0)
    assert 0 <= summary["hit_rate_mean"] <= 1
    text = human_of(cli("workloads", "show", name))
    assert text.startswith(f"{name}: ")
    assert "hit-rate" in text and "share" in text  # the bucket table (its title may wrap)
    assert text.count("%") >= 3 * len(summary["hit_buckets"])
    for dc in summary["datacenters"]:
        assert f"datacenter {dc['name']}: " in text
    for line in summary["wan_lines"]:
        assert f"WAN option {line['name']} " in text
    assert summary["serving"]["stack"] is None  # shipped workloads use the stack-agnostic factors
    assert "serving stack: none named" in text


def test_hardware_show_lists_calibrated_stacks(cli: Any) -> None:
    summary = json_of(cli("hardware", "show", "b200", "--json"))
    assert "sglang-0.5" in summary["stack_efficiency"]
    assert "calibrated serving stacks (estimate --stack NAME): sglang-0.5" in human_of(cli("hardware", "show", "b200"))


def test_workloads_show_human_details(cli: Any) -> None:
    text = human_of(cli("workloads", "show", "pdd-agent-64k"))
    assert "model deepseek-v3.2 (KV fp8); 4 req/s poisson (cv 1); prompt mean 64,512" in text
    assert "datacenter dc-a: gpu-a x256" in text
    assert "WAN option express-100g dc-a<->dc-b: 100 Gbps, RTT 30 ms, loss 1e-05, $5,200/month, up to 4" in text


# -- unknown names --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("hardware", "show", "h100"), "error: unknown GPU 'h100'; did you mean 'h100-sxm'?"),
        (("hardware", "show", "mi300"), "error: unknown GPU 'mi300'; did you mean 'mi300x'?"),
        (("hardware", "show", "h100sxm"), "error: unknown GPU 'h100sxm'; did you mean 'h100-sxm'?"),
        (("models", "show", "kimi-k3"), "error: unknown model 'kimi-k3'; did you mean 'kimi-k2'?"),
        (("models", "show", "qwen3-32"), "error: unknown model 'qwen3-32'; did you mean 'qwen3-32b'?"),
        (("models", "show", "gpt-oss"), "error: unknown model 'gpt-oss'; did you mean 'gpt-oss-120b'?"),
        (("workloads", "show", "pdd-agent"), "error: unknown workload 'pdd-agent'; did you mean 'pdd-agent-64k'?"),
        (("workloads", "show", "rag"), "error: unknown workload 'rag'; did you mean 'rag-longdoc-lowhit'?"),
    ],
)
def test_unknown_name_suggests_the_nearest(cli: Any, args: tuple[str, ...], line: str) -> None:
    assert one_error_line(cli(*args)) == line


@pytest.mark.parametrize(
    ("name", "nearest"),
    [("llama3.1-8b", "llama-3.1-8b"), ("deepseek-v3.3", "deepseek-v3.2"), ("Llama-3.1-8B", "llama-3.1-8b")],
)
def test_unknown_model_name_with_a_dot_suggests_the_nearest(cli: Any, name: str, nearest: str) -> None:
    """Catalog model names contain dots (llama-3.1-8b, deepseek-v3.2); a misspelt one is a name,
    not a file path, and must get the suggestion like any other name."""
    assert one_error_line(cli("models", "show", name)) == f"error: unknown model '{name}'; did you mean '{nearest}'?"


def test_unknown_name_without_a_near_match_lists_the_names(cli: Any) -> None:
    line = one_error_line(cli("hardware", "show", "zzzz"))
    assert line == f"error: unknown GPU 'zzzz'; known: {', '.join(HARDWARE)}"


def test_missing_files(cli: Any, tmp_path: Any) -> None:
    path = tmp_path / "nope.yaml"
    assert one_error_line(cli("hardware", "show", str(path))) == f"error: {path}: file not found"
    assert one_error_line(cli("workloads", "show", str(path))) == f"error: {path}: file not found"
    assert (
        one_error_line(cli("models", "show", str(tmp_path / "nope.json")))
        == f"error: {tmp_path}/nope.json: file not found"
    )


# -- schema command --------------------------------------------------------------------------------
def test_schema_prints_one_kind(cli: Any) -> None:
    schema = json_of(cli("schema", "hardware"))
    assert schema["title"] == "HardwareProfile"
    assert json_of(cli("schema"))["title"] == "Workload"


def test_schema_unknown_kind(cli: Any) -> None:
    line = one_error_line(cli("schema", "nope"))
    assert line.startswith("error: unknown schema kind 'nope'; expected one of: hardware, model, workload")


# -- help -----------------------------------------------------------------------------------------
def _commands() -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        out.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return out


COMMANDS = _commands()


def test_the_command_tree() -> None:
    paths = {path for path, _ in COMMANDS}
    for expected in [
        ("hardware", "list"),
        ("hardware", "show"),
        ("models", "list"),
        ("models", "show"),
        ("workloads", "list"),
        ("workloads", "show"),
        ("schema",),
    ]:
        assert expected in paths


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=lambda p: " ".join(p) or "pddplan")
def test_every_command_has_help(cli: Any, path: tuple[str, ...]) -> None:
    command = dict(COMMANDS)[path]
    assert (command.help or "").strip(), f"`pddplan {' '.join(path)}` has no help text"
    for param in command.params:
        if getattr(param, "param_type_name", "") in ("option", "argument"):
            assert (getattr(param, "help", None) or "").strip(), f"`pddplan {' '.join(path)}`: {param.name} has no help"
    result = cli(*path, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.stdout
    assert command.help.strip().split("\n")[0][:30] in " ".join(result.stdout.split())


def test_no_arguments_shows_help(cli: Any) -> None:
    result = cli()
    assert "Usage:" in result.stdout + result.stderr
    for name in ("hardware", "models", "workloads", "schema"):
        assert name in result.stdout + result.stderr


def test_results_go_to_stdout_so_they_can_be_grepped(cli: Any) -> None:
    """`pddplan workloads list | grep pdd` finds the shipped workloads; stderr stays empty."""
    result = cli("workloads", "list")
    assert result.stderr == ""
    assert [line for line in result.stdout.splitlines() if "pdd-agent-64k" in line]
    for command in (("models", "list"), ("hardware", "list"), ("architectures",)):
        shown = cli(*command)
        assert shown.exit_code == 0 and shown.stderr == "" and shown.stdout.strip()


def test_hardware_show_prints_figures_as_people_read_them(cli: Any) -> None:
    """A purchase price printed as 2.5e+04 and the factors as a raw Python dict before."""
    out = human_of(cli("hardware", "show", "h200"))
    assert "25,000" in out and "e+04" not in out
    assert "efficiency factors (stack-agnostic)" in out and "{'" not in out
