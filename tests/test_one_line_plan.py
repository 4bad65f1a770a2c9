"""A plan from one command line (issue 36, item 5): `pddplan optimize --model M --gpu TYPE:COUNT
--isl N --prefix N --osl N --rate R --ttft-p90 T --ttft-p99 T ...` builds the workload the flags
describe (`pddplan.inputs.workload_flags`), writes it, and plans it; the written file re-runs to
the same answer, and the shipped qwen3-32b-h200-isl16k workload is reproduced from flags."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_results import one_error_line

from pddplan.errors import InputError
from pddplan.inputs import load_workload
from pddplan.inputs.workload_flags import (
    UNPRICED_SOURCE,
    WorkloadFlags,
    parse_gpu_offer,
    resolve_model,
    seconds_flag,
    workload_for_optimize,
)
from pddplan.report.schemas import validate_output

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "workloads" / "qwen3-32b-h200-isl16k.yaml"

#: the shipped workload's question, as flags (its prices are OpenRouter's, $0.08 / $0.28)
PEER = (
    "--model", "qwen3-32b", "--gpu", "h200:32", "--isl", "16000", "--prefix", "14000", "--osl", "1000",
    "--ttft-p90", "2", "--ttft-p99", "5", "--tpot-p90", "0.05", "--price-input", "0.08", "--price-output", "0.28",
)  # fmt: skip
#: two architectures and a short verification keep each run near a second
FAST = ("-a", "agg", "-a", "pd-intra", "--requests", "1000", "-j", "1")


def peer_flags(**changes: Any) -> WorkloadFlags:
    values: dict[str, Any] = {
        "model": "qwen3-32b",
        "gpus": ("h200:32",),
        "isl": 16000,
        "prefix": 14000,
        "osl": 1000,
        "rate": 18.8,
        "ttft_p90": "2",
        "ttft_p99": "5s",
        "tpot_p90": "50ms",
    }
    return WorkloadFlags(**(values | changes))


# -- the builder ---------------------------------------------------------------------------------
def test_the_builder_sets_each_field_from_its_flag() -> None:
    workload = peer_flags().workload()
    assert workload.model == "qwen3-32b"
    assert workload.arrival.rate_rps == 18.8 and workload.arrival.process == "poisson"
    assert workload.prompt_tokens.model_dump() == {"kind": "fixed", "tokens": 16000}
    assert workload.output_tokens.model_dump() == {"kind": "fixed", "tokens": 1000}
    # one bucket of zero width: every request has 14,000 of its 16,000 tokens cached
    (bucket,) = workload.hit_rate.resolved_buckets()
    assert (bucket.low, bucket.high, bucket.share) == (0.875, 0.875, 1.0)
    assert workload.hit_rate.mean() == 0.875
    assert workload.sla.model_dump(exclude_none=True) == {"ttft_p90_s": 2.0, "ttft_p99_s": 5.0, "tpot_p90_s": 0.05}
    # no prices given: 0, and the source says revenue is unknown
    prices = workload.prices
    assert (prices.input_usd_per_mtok, prices.cached_input_usd_per_mtok, prices.output_usd_per_mtok) == (0, 0, 0)
    assert prices.source == UNPRICED_SOURCE and prices.source.startswith("unknown:")
    (datacenter,) = workload.deployment.datacenters
    assert datacenter.name == "dc-a"
    assert [(o.type, o.max_count) for o in datacenter.gpus] == [("h200", 32)]
    assert workload.deployment.wan_lines == []
    assert workload.name == "qwen3-32b-h200x32-isl16000-prefix14000-osl1000-rate18.8"


def test_the_builder_matches_the_shipped_workload_of_the_peer_question() -> None:
    """Every field the flags set equals the shipped file's (at its 12 req/s)."""
    built = peer_flags(rate=12.0, ttft_p99="5", tpot_p90="0.05", price_input=0.08, price_output=0.28).workload()
    shipped = load_workload(str(SHIPPED))
    skip = {"name", "description", "hit_rate", "sources"}
    assert built.model_dump(exclude=skip | {"prices"}) == shipped.model_dump(exclude=skip | {"prices"})
    assert built.prices.model_dump(exclude={"source"}) == shipped.prices.model_dump(exclude={"source"})
    assert built.hit_rate.mean() == pytest.approx(shipped.hit_rate.mean(), abs=1e-12)


def test_gpu_offers_share_one_datacenter_unless_they_name_another() -> None:
    flags = peer_flags(gpus=("h200:32", "h100-sxm:16", "h20:8@dc-b"))
    deployment = flags.workload().deployment
    assert [dc.name for dc in deployment.datacenters] == ["dc-a", "dc-b"]
    assert deployment.home == "dc-a"
    assert [(o.type, o.max_count) for o in deployment.datacenter("dc-a").gpus] == [("h200", 32), ("h100-sxm", 16)]
    assert [(o.type, o.max_count) for o in deployment.datacenter("dc-b").gpus] == [("h20", 8)]
    assert parse_gpu_offer(" h200:4@dc-c ") == parse_gpu_offer("h200:4@dc-c")
    assert parse_gpu_offer("h200:4@dc-c").datacenter == "dc-c"


def test_prices_from_flags_cached_input_defaults_to_the_input_price() -> None:
    prices = peer_flags(price_input=0.5, price_output=2.0).workload().prices
    assert (prices.input_usd_per_mtok, prices.cached_input_usd_per_mtok, prices.output_usd_per_mtok) == (0.5, 0.5, 2)
    assert prices.source == "user: --price-input 0.5 --price-output 2 on the command line"
    discounted = peer_flags(price_input=0.5, price_cached_input=0.1, price_output=2.0).workload().prices
    assert discounted.cached_input_usd_per_mtok == 0.1


def test_times_are_seconds_bare_or_with_their_unit() -> None:
    assert seconds_flag("2", "--ttft-p90") == 2.0
    assert seconds_flag("0.05", "--tpot-p90") == 0.05
    assert seconds_flag("2s", "--ttft-p90") == 2.0
    assert seconds_flag("50ms", "--tpot-p90") == pytest.approx(0.05)
    sla = peer_flags(ttft_p50="500ms", tpot_p99="80ms").workload().sla
    assert sla.ttft_p50_s == pytest.approx(0.5) and sla.tpot_p99_s == pytest.approx(0.08)


def test_a_model_is_a_catalog_name_a_hugging_face_id_of_one_or_a_local_config(tmp_path: Path) -> None:
    assert resolve_model("qwen3-32b") == "qwen3-32b"
    assert resolve_model("Qwen/Qwen3-32B") == "qwen3-32b"
    assert resolve_model("qwen/qwen3-32b") == "qwen3-32b"  # hub ids are matched without case
    folder = tmp_path / "Qwen3-32B-local"
    folder.mkdir()
    config = ROOT / "pddplan" / "model_catalog" / "qwen3-32b.json"
    (folder / "config.json").write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    assert resolve_model(str(folder / "config.json")) == str((folder / "config.json").resolve())
    assert resolve_model(str(folder)) == str(folder.resolve())
    # the written workload names the model by its absolute path, and itself after the folder
    built = peer_flags(model=str(folder)).workload()
    assert built.model == str(folder.resolve())
    assert built.name.startswith("qwen3-32b-local-h200x32-")
    with pytest.raises(InputError, match=r"did you mean 'qwen3-32b'\?; pddplan never downloads"):
        resolve_model("Qwen/Qwen3-32B-FP8")


# -- the command line ----------------------------------------------------------------------------
def _without_names(data: dict[str, Any]) -> dict[str, Any]:
    """An optimize report with the workload's name taken out (it names the plans too)."""
    text = json.dumps(data).replace(data["workload"], "WORKLOAD")
    return dict(json.loads(text))


def _decisions(data: dict[str, Any]) -> dict[str, Any]:
    """What optimize decided, per architecture: feasible, GPUs, roles, lines, cost, goodput, BCR,
    and why not; and which wins (latency figures left out)."""
    keys = ("name", "feasible", "gpus", "roles", "wan_lines", "cost_usd_per_hour", "goodput_rps", "bcr")
    rows = [{k: r[k] for k in keys} | {"infeasibility": r["infeasibility"]} for r in data["architectures"]]
    return {"best": data["best"], "disaggregation": data["disaggregation"], "architectures": rows}


def test_the_peer_question_from_flags_gives_the_shipped_workloads_answer(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 18.8 req/s (the issue's command): neither architecture fits 32 H200, short by the same
    GPUs, word for word; the JSON validates against optimize's output schema."""
    monkeypatch.chdir(tmp_path)
    at_peer = tmp_path / "shipped-at-18.8.yaml"
    at_peer.write_text(
        SHIPPED.read_text(encoding="utf-8").replace("rate_rps: 12 ", "rate_rps: 18.8 "), encoding="utf-8"
    )
    from_flags = cli("optimize", *PEER, "--rate", "18.8", *FAST, "--json")
    from_file = cli("optimize", str(at_peer), *FAST, "--json")
    assert from_flags.exit_code == from_file.exit_code == 3, from_flags.stderr
    flags_json, file_json = json.loads(from_flags.stdout), json.loads(from_file.stdout)
    validate_output("optimize", flags_json)
    assert _decisions(flags_json) == _decisions(file_json)
    assert "short by 8 GPUs" in from_flags.stderr and "short by 16 GPUs" in from_flags.stderr
    assert from_flags.stderr.splitlines()[-1] == from_file.stderr.splitlines()[-1]
    written = tmp_path / "qwen3-32b-h200x32-isl16000-prefix14000-osl1000-rate18.8.yaml"
    assert (
        from_flags.stderr.splitlines()[0]
        == f"wrote the workload to {written.name}; re-run it: pddplan optimize {written.name}"
    )


def test_a_feasible_rate_plans_as_the_shipped_file_does(cli: Any, tmp_path: Path) -> None:
    """At 12 req/s both plan the same deployments at the same cost: co-located agg on 24 H200."""
    at_12 = SHIPPED
    path = tmp_path / "built.yaml"
    from_flags = cli("optimize", *PEER, "--rate", "12", "--write-workload", str(path), *FAST, "--json")
    from_file = cli("optimize", str(at_12), *FAST, "--json")
    assert from_flags.exit_code == from_file.exit_code == 0, from_flags.stderr
    flags_json = json.loads(from_flags.stdout)
    validate_output("optimize", flags_json)
    assert _decisions(flags_json) == _decisions(json.loads(from_file.stdout))
    assert flags_json["best"] == "agg" and flags_json["architectures"][0]["gpus"] == {"h200": 24}
    assert flags_json["architectures"][0]["evaluated"]["revenue_usd_per_hour"] > 0  # priced by the flags
    # the written workload, re-run, gives the same answer to the last figure
    again = cli("optimize", str(path), *FAST, "--json")
    assert again.exit_code == 0 and again.stderr == ""
    assert json.loads(again.stdout) == flags_json


def test_the_written_workload_says_how_it_was_built_and_loads(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    result = cli("optimize", *PEER[:14], "--rate", "12", "--tpot-p90", "50ms", "--write-workload", str(path),
                 "-a", "agg", "--no-verify")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Written by `pddplan optimize --model qwen3-32b --gpu h200:32 --isl 16000")
    assert "--tpot-p90 50ms`" in text.splitlines()[0]
    assert "No token prices were given" in text
    data = yaml.safe_load(text)
    assert data["hit_rate"] == {"buckets": [{"low": 0.875, "high": 0.875, "share": 1.0}]}
    assert "serving" not in data  # defaults are left out
    assert load_workload(str(path)) == peer_flags(rate=12.0, tpot_p90="50ms").workload()
    assert "note: no token prices given" in result.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_workload_file_is_kept_replaced_with_force_or_refused(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    run = ("optimize", *PEER, "--write-workload", str(path), "-a", "agg", "--no-verify")
    assert cli(*run, "--rate", "12").exit_code == 0
    kept = cli(*run, "--rate", "12")
    assert kept.exit_code == 0 and f"{path} holds this workload already" in kept.stderr
    # the same workload spelt otherwise (5000ms for 5) is the same workload: kept, not refused
    respelt = cli(*[("5000ms" if word == "5" else word) for word in run], "--rate", "12.0")
    assert respelt.exit_code == 0 and f"{path} holds this workload already" in respelt.stderr
    assert "--ttft-p99 5 " in path.read_text(encoding="utf-8").splitlines()[0]
    one_error_line(cli(*run, "--rate", "10"), f"{path} exists and holds another workload", "--force")
    assert "rate_rps: 12" in path.read_text(encoding="utf-8")
    assert cli(*run, "--rate", "10", "--force").exit_code == 0
    assert "rate_rps: 10" in path.read_text(encoding="utf-8")
    link = tmp_path / "link.yaml"
    os.symlink(path, link)
    linked = cli("optimize", *PEER, "--write-workload", str(link), "--force", "--rate", "9", "--no-verify")
    one_error_line(linked, f"{link}: is a symbolic link")


def test_the_library_raises_the_errors_the_command_line_prints(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    flags = peer_flags(prefix=17000)
    with pytest.raises(InputError) as caught:
        workload_for_optimize(None, flags, Path("never-written.yaml"))
    args = ("optimize", "--model", "qwen3-32b", "--gpu", "h200:32", "--isl", "16000", "--prefix", "17000")
    line = one_error_line(cli(*args, "--osl", "1000", "--rate", "18.8", "--ttft-p90", "2", "--ttft-p99", "5s"))
    assert line == f"error: {caught.value}"
    assert not Path("never-written.yaml").exists()


# -- bad input: one line naming the flag, exit 2 ---------------------------------------------------
BASE = ("--model", "qwen3-32b", "--isl", "16000", "--osl", "1000", "--ttft-p90", "2", "--ttft-p99", "5")
GPU_RATE = ("--gpu", "h200:32", "--rate", "12")
BAD: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "prefix over isl": ((*BASE, *GPU_RATE, "--prefix", "17000"), ["--prefix = 17000", "--isl 16000"]),
    "unknown gpu": ((*BASE, "--gpu", "h2000:32", "--rate", "12"), ["--gpu = 'h2000:32'", "did you mean 'h200'?"]),
    "no gpus": ((*BASE, "--gpu", "h200:0", "--rate", "12"), ["--gpu = 'h200:0'", "above 0"]),
    "gpu count not a number": ((*BASE, "--gpu", "h200:abc", "--rate", "12"), ["--gpu = 'h200:abc'", "COUNT"]),
    "gpu without count": ((*BASE, "--gpu", "h200", "--rate", "12"), ["--gpu = 'h200'", "TYPE:COUNT"]),
    "gpu twice": ((*BASE, *GPU_RATE, "--gpu", "h200:8"), ["--gpu = 'h200:8'", "twice in dc-a"]),
    "gpu count too large": ((*BASE, "--gpu", "h200:2000000", "--rate", "12"), ["--gpu COUNT = 2000000"]),
    "both workload and flags": (("chat-short-lowhit", *BASE), ["not both", "'chat-short-lowhit'", "--model"]),
    "missing ttft p99": (
        ("--model", "qwen3-32b", "--isl", "16000", "--osl", "1000", "--ttft-p90", "2", *GPU_RATE),
        ["missing --ttft-p99:", "no default"],
    ),
    "missing ttft p90": (
        ("--model", "qwen3-32b", "--isl", "16000", "--osl", "1000", "--ttft-p99", "5", *GPU_RATE),
        ["missing --ttft-p90:"],
    ),
    "missing rate": ((*BASE, "--gpu", "h200:32"), ["missing --rate:"]),
    "negative rate": ((*BASE, "--gpu", "h200:32", "--rate", "-1"), ["--rate = -1"]),
    "rate not finite": ((*BASE, "--gpu", "h200:32", "--rate", "nan"), ["--rate = nan"]),
    "negative tokens": ((*BASE, *GPU_RATE, "--prefix", "-5"), ["--prefix = -5"]),
    "tokens with a multiplier": (
        ("--model", "qwen3-32b", "--isl", "16k", "--osl", "1000", "--ttft-p90", "2", "--ttft-p99", "5", *GPU_RATE),
        ["'--isl'", "'16k'"],
    ),
    "negative time": ((*BASE, *GPU_RATE, "--tpot-p90", "-0.05"), ["--tpot-p90 = '-0.05'"]),
    "infinite time": ((*BASE, *GPU_RATE, "--tpot-p90", "inf"), ["--tpot-p90 = 'inf'"]),
    "ambiguous unit": ((*BASE, *GPU_RATE, "--tpot-p90", "50MS"), ["--tpot-p90 = '50MS'"]),
    "time over a day": ((*BASE, *GPU_RATE, "--tpot-p90", "25h"), ["--tpot-p90 = 90000.0", "86400"]),
    "targets out of order": ((*BASE, *GPU_RATE, "--ttft-p50", "3"), ["--ttft-p90 (2.0) is below --ttft-p50 (3.0)"]),
    "negative price": ((*BASE, *GPU_RATE, "--price-input", "-1", "--price-output", "1"), ["--price-input = -1.0"]),
    "price not finite": ((*BASE, *GPU_RATE, "--price-input", "inf", "--price-output", "1"), ["--price-input = inf"]),
    "one price": ((*BASE, *GPU_RATE, "--price-input", "1"), ["--price-output is missing"]),
    "cached above input": (
        (*BASE, *GPU_RATE, "--price-input", "1", "--price-output", "1", "--price-cached-input", "2"),
        ["--price-cached-input exceeds --price-input"],
    ),
    "unknown hub id": ((*GPU_RATE, *BASE[2:], "--model", "Qwen/Qwen3-32B-FP8"), ["--model = 'Qwen/Qwen3-32B-FP8'"]),
    "missing config": ((*GPU_RATE, *BASE[2:], "--model", "./no/config.json"), ["--model = './no/config.json'"]),
    "write with a workload": (("chat-short-lowhit", "--write-workload", "x.yaml"), ["not both", "--write-workload"]),
    # an optimize option refused after the built workload was written (three lines, a file left)
    "unknown solver": ((*BASE, *GPU_RATE, "--solver", "nope", "--write-workload", "w.yaml"), ["nope"]),
    "unknown relay": ((*BASE, *GPU_RATE, "--relay", "nope", "--write-workload", "w.yaml"), ["--relay"]),
    "min served over 1": ((*BASE, *GPU_RATE, "--min-served", "5", "--write-workload", "w.yaml"), ["--min-served"]),
    "unknown architecture": ((*BASE, *GPU_RATE, "-a", "nope", "--write-workload", "w.yaml"), ["'nope'"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_flags_are_one_line_and_exit_2(
    case: str, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args, fragments = BAD[case]
    one_error_line(cli("optimize", *args, "--no-verify"), *fragments)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_no_workload_and_no_flags_is_a_missing_argument(cli: Any) -> None:
    one_error_line(cli("optimize"), "Missing argument 'WORKLOAD'", "--model", "(see pddplan optimize --help)")
