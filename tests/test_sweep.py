"""`pddplan sweep`: any numeric workload field against cost and BCR (pddplan.analyses.sweep,
pddplan.report.sweep_report)."""

from __future__ import annotations

import copy
import csv
import importlib
import io
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_results import one_error_line
from typer.testing import CliRunner

from pddplan import architectures
from pddplan.analyses import sweep as sweeping
from pddplan.cli import app
from pddplan.errors import InputError
from pddplan.evaluate.capacity_view import capacity_view
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.sizing import choose_shape, relay_on_prefill_if_cheaper, size_plan
from pddplan.report import sweep_report
from pddplan.scenarios import build_scenario, variants
from pddplan.support import catalog, distribute
from pddplan.support.loading import read_data

WORKLOAD = "pdd-agent-64k"
RATE_ARGS = ("sweep", WORKLOAD, "--param", "arrival.rate_rps", "--values", "2,4", "--json")
FEASIBLE_KEYS = {
    "feasible",
    "cost_usd_per_hour",
    "fluid_bcr",
    "bcr",
    "throughput_per_gpu_hour",
    "fluid_revenue_per_cost",
    "revenue_per_cost",
    "gpus",
    "wan_gbps",
}


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@cache
def sweep_json(*args: str) -> dict[str, Any]:
    result = run(*args)
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    data: dict[str, Any] = read_data(catalog.resolve("workloads", WORKLOAD, "workload"))
    return data


# -- set_path -------------------------------------------------------------------------------------
def test_set_path_top_level_and_nested(raw: dict[str, Any]) -> None:
    original = copy.deepcopy(raw)
    out = variants.set_path(raw, "arrival.rate_rps", 2.5)
    assert out["arrival"]["rate_rps"] == 2.5
    assert raw == original  # a deep copy: the input is untouched
    out["deployment"]["wan_lines"][0]["capacity_gbps"] = -1
    assert raw == original


def test_set_path_list_items(raw: dict[str, Any]) -> None:
    out = variants.set_path(raw, "deployment.wan_lines[1].rtt_ms", 12.5)
    assert out["deployment"]["wan_lines"][1]["rtt_ms"] == 12.5
    assert out["deployment"]["wan_lines"][0]["rtt_ms"] == raw["deployment"]["wan_lines"][0]["rtt_ms"]
    out = variants.set_path(raw, "deployment.datacenters[1].gpus[0].max_count", 64.0)
    assert out["deployment"]["datacenters"][1]["gpus"][0]["max_count"] == 64
    assert type(out["deployment"]["datacenters"][1]["gpus"][0]["max_count"]) is int
    # a field the file leaves out is added (validation decides whether it exists)
    out = variants.set_path(raw, "deployment.datacenters[1].gpus[0].usd_per_gpu_hour", 3.0)
    assert out["deployment"]["datacenters"][1]["gpus"][0]["usd_per_gpu_hour"] == 3.0
    # an index as the last part sets the list item
    out = variants.set_path(raw, "hit_rate.article_shares[0]", 0.2)
    assert out["hit_rate"]["article_shares"] == [0.2, *raw["hit_rate"]["article_shares"][1:]]
    out = variants.set_path(
        {**raw, "deployment": {**raw["deployment"], "tp_options": [8, 16]}}, "deployment.tp_options[1]", 32.0
    )
    assert out["deployment"]["tp_options"] == [8, 32] and type(out["deployment"]["tp_options"][1]) is int


def test_set_path_ints_stay_ints(raw: dict[str, Any]) -> None:
    for path, value in [
        ("serving.chunk_tokens", 4096.0),
        ("prompt_tokens.tokens", 32768.0),
        ("deployment.wan_lines[0].capacity_gbps", 50.0),
    ]:
        out = variants.set_path(raw, path, value)
        node: Any = out
        for key in path.replace("[0]", ".0").split("."):
            node = node[int(key)] if key.isdigit() else node[key]
        assert node == int(value) and type(node) is int, path
    # a fraction on an integer field stays a fraction (and validation rejects it)
    out = variants.set_path(raw, "serving.chunk_tokens", 4096.5)
    assert out["serving"]["chunk_tokens"] == 4096.5
    # floats stay floats even when whole
    out = variants.set_path(raw, "arrival.rate_rps", 3.0)
    assert out["arrival"]["rate_rps"] == 3.0 and type(out["arrival"]["rate_rps"]) is float


@pytest.mark.parametrize(
    "path",
    [
        "nope.rate",
        "arrival..rate_rps",
        "arrival.rate_rps.x",
        "arrival.rate_rps[0]",
        "deployment.wan_lines[7].rtt_ms",
        "deployment.wan_lines.rtt_ms",
        "deployment.datacenters[0].gpus[3].max_count",
        "serving.chunk-tokens",
        "deployment.wan_lines[-1].rtt_ms",
        "",
    ],
)
def test_set_path_bad_paths(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(InputError) as info:
        variants.set_path(raw, path, 1.0, where="--param")
    assert f"--param {path!r}" in str(info.value)


# -- parse_values ---------------------------------------------------------------------------------
def test_parse_values_list() -> None:
    assert sweeping.parse_values("1,2,4", None) == [1.0, 2.0, 4.0]
    assert sweeping.parse_values(" 0.5 , 1e3,", None) == [0.5, 1000.0]
    assert sweeping.parse_values("-3", None) == [-3.0]


def test_parse_values_range_includes_both_ends() -> None:
    assert sweeping.parse_values(None, "10:100:10") == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    assert sweeping.parse_values(None, "0:1:5") == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert sweeping.parse_values(None, "4096:16384:4") == [4096.0, 8192.0, 12288.0, 16384.0]
    assert sweeping.parse_values(None, "5:1:3") == [5.0, 3.0, 1.0]
    assert sweeping.parse_values(None, "7:9:1") == [7.0]
    for span, first, last in [("0.2:0.9:2", 0.2, 0.9), ("0.1:0.7:4", 0.1, 0.7), ("0.05:0.95:19", 0.05, 0.95)]:
        values = sweeping.parse_values(None, span)
        assert values[0] == first and values[-1] == last, (span, values)


@pytest.mark.parametrize(
    ("values", "span", "fragment"),
    [
        (None, None, "give --values"),
        ("1,2", "1:2:2", "give --values"),
        ("a,b", None, "--values"),
        ("", None, "no values"),
        (" , ", None, "no values"),
        (None, "1:2", "START:STOP:NUM"),
        (None, "1:2:3:4", "START:STOP:NUM"),
        (None, "1:2:x", "START:STOP:NUM"),
        (None, "1:2:2.5", "START:STOP:NUM"),
        (None, "1:2:0", "NUM must be 1 to 1000"),
    ],
)
def test_parse_values_errors(values: str | None, span: str | None, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment.replace("-", r"\-")):
        sweeping.parse_values(values, span)


# -- the command line -----------------------------------------------------------------------------
def test_sweep_json() -> None:
    data = sweep_json(*RATE_ARGS)
    assert data["workload"] == WORKLOAD
    assert data["param"] == "arrival.rate_rps"
    assert data["architectures"] == list(architectures.names())
    points = data["points"]
    assert [p["value"] for p in points] == [2.0, 4.0]
    for point in points:
        assert set(point) == {"value", *architectures.names()}
        for arch in architectures.names():
            entry = point[arch]
            assert isinstance(entry["feasible"], bool)
            if not entry["feasible"]:
                assert set(entry) == {"feasible", "reason"} and entry["reason"]
                continue
            assert set(entry) == FEASIBLE_KEYS
            assert entry["cost_usd_per_hour"] > 0 and entry["fluid_bcr"] > 0
            # the plan's BCR: the swept rate's requests per $ of the plan's cost
            assert entry["bcr"] == pytest.approx(point["value"] * 3600 / entry["cost_usd_per_hour"], rel=1e-12)
            assert all(isinstance(n, int) and n > 0 for n in entry["gpus"].values())
    assert points[0]["pd-intra"]["feasible"] and points[1]["pd-intra"]["feasible"]
    assert points[0]["pdd"]["feasible"] and points[1]["pdd"]["feasible"]
    # twice the rate needs at least as much hardware
    for arch in ("pd-intra", "pdd"):
        assert points[1][arch]["cost_usd_per_hour"] >= points[0][arch]["cost_usd_per_hour"]


def test_sweep_point_is_the_sized_plan_under_its_capacity_view() -> None:
    """The figures at a value are the sized plan's (PDD's relay on its prefill instances when that
    is no dearer and meets the SLA), read through the evaluator's capacity view."""
    data = sweep_json(*RATE_ARGS)
    workload = load_workload(WORKLOAD)
    base = workload_dir(WORKLOAD)
    for point in data["points"]:
        at = workload.model_copy(update={"arrival": workload.arrival.model_copy(update={"rate_rps": point["value"]})})
        for arch in ("pd-intra", "pdd"):
            inputs = load_input_set(at, base)
            sized = relay_on_prefill_if_cheaper(size_plan(at, choose_shape(inputs, arch)), inputs)
            assert sized.plan.relay_on_prefill == (arch == "pdd")
            scenario = build_scenario(sized.plan, inputs)
            view = capacity_view(scenario)
            entry = point[arch]
            assert entry["cost_usd_per_hour"] == pytest.approx(scenario.cost_per_hour, rel=1e-12)
            assert entry["gpus"] == scenario.gpus_by_type()
            assert entry["fluid_bcr"] == pytest.approx(view.bcr, rel=1e-9)
            assert entry["fluid_revenue_per_cost"] == pytest.approx(view.revenue_per_cost, rel=1e-9)
            assert entry["throughput_per_gpu_hour"] == pytest.approx(view.throughput_per_gpu_hour, rel=1e-9)


def test_forked_and_loky_workers_give_the_serial_points() -> None:
    """The default (forked copies of this process, one per CPU) and joblib's loky processes."""
    serial = sweep_json(*RATE_ARGS, "--jobs", "1")
    assert sweep_json(*RATE_ARGS) == serial
    assert sweep_json(*RATE_ARGS, "--jobs", "2", "--backend", "loky") == serial


def test_threading_backend_gives_the_same_points() -> None:
    assert sweep_json(*RATE_ARGS, "--jobs", "2", "--backend", "threading") == sweep_json(*RATE_ARGS, "--jobs", "1")


def test_range_over_an_integer_field() -> None:
    data = sweep_json(
        "sweep", WORKLOAD, "--param", "serving.chunk_tokens", "--range", "4096:16384:4", "-a", "pd-intra", "--json"
    )
    assert data["architectures"] == ["pd-intra"]
    assert [p["value"] for p in data["points"]] == [4096.0, 8192.0, 12288.0, 16384.0]
    assert all(set(p) == {"value", "pd-intra"} for p in data["points"])
    assert all(p["pd-intra"]["feasible"] for p in data["points"])
    # the workload's own chunk size gives the same figures as the unswept workload
    assert data["points"][1]["pd-intra"] == sweep_json(*RATE_ARGS)["points"][1]["pd-intra"]


def test_optimize_runs_the_integer_program() -> None:
    data = sweep_json(
        "sweep", WORKLOAD, "--param", "arrival.rate_rps", "--values", "4", "-a", "pd-intra", "--optimize", "--json"
    )
    (point,) = data["points"]
    entry = point["pd-intra"]
    assert entry["feasible"] is True
    assert set(entry) == FEASIBLE_KEYS
    assert entry["fluid_bcr"] is None and entry["fluid_revenue_per_cost"] is None  # no fluid view when optimized
    # the integer program does no worse than greedy sizing on the same inputs
    sized = sweep_json(*RATE_ARGS)["points"][1]["pd-intra"]
    assert entry["cost_usd_per_hour"] <= sized["cost_usd_per_hour"] * (1 + 1e-9)


def test_human_output_table_and_chart() -> None:
    result = run("sweep", WORKLOAD, "--param", "arrival.rate_rps", "--values", "2,4", "-a", "pd-intra", "-a", "pdd")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    assert "sweep of arrival.rate_rps" in text
    assert "BCR vs arrival.rate_rps" in text
    assert "legend: o pd-intra   x pdd" in text


def test_csv(tmp_path: Path) -> None:
    result = run(*RATE_ARGS, "--csv", tmp_path / "s.csv")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    rows = list(csv.reader(io.StringIO((tmp_path / "s.csv").read_text())))
    keys = (
        "feasible",
        "cost_usd_per_hour",
        "bcr",
        "throughput_per_gpu_hour",
        "fluid_revenue_per_cost",
        "revenue_per_cost",
        "wan_gbps",
    )
    assert rows[0] == ["value", *[f"{a}.{k}" for a in architectures.names() for k in keys]]
    assert len(rows) == 3
    for row, point in zip(rows[1:], data["points"], strict=True):
        assert float(row[0]) == point["value"]
        cells = dict(zip(rows[0], row, strict=True))
        for arch in architectures.names():
            entry = point[arch]
            assert cells[f"{arch}.feasible"] == str(entry["feasible"])
            if entry["feasible"]:
                assert float(cells[f"{arch}.cost_usd_per_hour"]) == pytest.approx(entry["cost_usd_per_hour"], rel=1e-12)
            else:
                assert cells[f"{arch}.cost_usd_per_hour"] == ""


def test_notes_and_best_of() -> None:
    points = [
        {"value": 1.0, "a": {"feasible": True, "bcr": 2.0}, "b": {"feasible": True, "bcr": 1.0}},
        {"value": 2.0, "a": {"feasible": True, "bcr": 2.0}, "b": {"feasible": True, "bcr": 3.0}},
        {"value": 3.0, "a": {"feasible": False, "reason": "x"}, "b": {"feasible": False, "reason": "y"}},
    ]
    assert [sweeping.best_of(p, ["a", "b"]) for p in points] == ["a", "b", None]
    assert sweep_report.notes("p", points, ["a", "b"], optimized=True) == [
        "from p = 1: best is a",
        "from p = 2: best is b",
        "from p = 3: best is none (infeasible)",
    ]


# -- issue 37, item 6: sweeps that mislead -------------------------------------------------------
def test_without_optimize_a_failure_is_the_sized_plans_not_the_architectures() -> None:
    """Without --optimize each architecture is one greedy-sized plan: the table called it
    "infeasible" where optimize found a plan. The table, the notes and the JSON say it was the
    sized plan that failed, and that a search may find one."""
    args = ("sweep", WORKLOAD, "--param", "arrival.rate_rps", "--values", "4", "-a", "pd-hetero", "-a", "pd-intra")
    result = run(*args)
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "infeasible" not in text
    assert "greedy-sized plan fails here (one plan evaluated, not a search: --optimize may find one)" in text
    entry = json.loads(run(*args, "--json").stdout)["points"][0]["pd-hetero"]
    assert not entry["feasible"] and entry["reason"].startswith("greedy sizing (one plan, not a search) found none: ")
    points = [{"value": 1.0, "a": {"feasible": False, "reason": "x"}}]
    assert sweep_report.notes("p", points, ["a"], optimized=False) == [
        "from p = 1: best is none (no greedy-sized plan meets the SLA; try --optimize)"
    ]


def test_sweeping_a_line_no_plan_leases_says_so() -> None:
    """pdd-agent-64k's plans lease express-40g (wan_lines[1]): sweeping wan_lines[0] drew flat
    lines without a word. A warning on stderr names the line and the one the plans lease; JSON
    on stdout is unchanged; sweeping the leased line warns of nothing."""
    args = ("sweep", WORKLOAD, "--values", "40,100", "-a", "pdd", "--json")
    unused = run(*args, "--param", "deployment.wan_lines[0].capacity_gbps")
    assert unused.exit_code == 0, unused.stderr
    assert json.loads(unused.stdout)["points"][0]["pdd"]["feasible"]
    assert unused.stderr.strip() == (
        "warning: deployment.wan_lines[0].capacity_gbps: no plan leases deployment.wan_lines[0] (express-100g) "
        "at any value (they lease express-40g), so no figure moves"
    )
    used = run(*args, "--param", "deployment.wan_lines[1].capacity_gbps")
    assert used.exit_code == 0 and used.stderr == ""


def test_a_field_that_moves_nothing_is_named() -> None:
    """Any other field whose every figure stays the same (a GPU offer no plan takes) is named too."""
    args = ("sweep", WORKLOAD, "--values", "1,2", "-a", "pd-intra")
    flat = run(*args, "--param", "deployment.datacenters[1].gpus[0].usd_per_gpu_hour")
    assert flat.exit_code == 0, flat.stderr
    assert flat.stderr.startswith("warning: deployment.datacenters[1].gpus[0].usd_per_gpu_hour moved nothing: ")
    assert "same at all 2 values" in flat.stderr


def test_unused_param_needs_two_values_and_a_plan() -> None:
    workload = load_workload(WORKLOAD)
    plan = {"a": {"feasible": True, "bcr": 1.0}}
    none = {"a": {"feasible": False, "reason": "x"}}
    line = "deployment.wan_lines[0].capacity_gbps"
    one = [sweeping.PointResult(plan, frozenset({"express-40g"}))]
    assert sweeping.unused_param(line, workload, one) is None
    assert sweeping.unused_param(line, workload, [sweeping.PointResult(none, frozenset())] * 2) is None
    assert "(express-100g)" in str(sweeping.unused_param(line, workload, one * 2))
    leased = [sweeping.PointResult(plan, frozenset({"express-100g"}))] * 2
    assert sweeping.unused_param(line, workload, leased) is None
    moved = [
        sweeping.PointResult(plan, frozenset()),
        sweeping.PointResult({"a": {"feasible": True, "bcr": 2.0}}, frozenset()),
    ]
    assert sweeping.unused_param("arrival.rate_rps", workload, moved) is None
    assert "moved nothing" in str(sweeping.unused_param("arrival.rate_rps", workload, one * 2))


# -- errors ---------------------------------------------------------------------------------------
def test_dask_backend_on_a_local_cluster_gives_the_same_points() -> None:
    """--backend dask used to crash ("To use Joblib with Dask first create a Dask Client", exit 1):
    without --scheduler it starts a local cluster of --jobs workers for the sweep."""
    assert sweep_json(*RATE_ARGS, "--backend", "dask", "--jobs", "2") == sweep_json(*RATE_ARGS, "--jobs", "1")


def test_dask_backend_reaches_a_running_scheduler_by_address() -> None:
    """A cluster started elsewhere (here: a LocalCluster of two worker processes) is used by address."""
    distributed = importlib.import_module("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        result = run(*RATE_ARGS, "--backend", "dask", "--scheduler", cluster.scheduler_address)
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout) == sweep_json(*RATE_ARGS, "--jobs", "1")


def test_an_unreachable_scheduler_is_one_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distribute, "SCHEDULER_TIMEOUT_S", 1)  # the error, not the 5 s of trying, is the point
    result = run(*RATE_ARGS, "--backend", "dask", "--scheduler", "tcp://127.0.0.1:9")
    one_error_line(result, "--scheduler tcp://127.0.0.1:9", "cannot reach")


def test_a_scheduler_without_a_cluster_backend_is_refused() -> None:
    one_error_line(run(*RATE_ARGS, "--scheduler", "tcp://127.0.0.1:9"), "--scheduler", "dask or ray")


def test_dask_backend_without_dask_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # what a missing package looks like to import
    one_error_line(run(*RATE_ARGS, "--backend", "dask"), "pddplan[dask]", "--backend dask")


def test_ray_backend_on_a_local_runtime_gives_the_same_points() -> None:
    """A local ray runtime of --jobs CPUs, started and shut down for the sweep."""
    assert sweep_json(*RATE_ARGS, "--backend", "ray", "--jobs", "2") == sweep_json(*RATE_ARGS, "--jobs", "1")


def test_ray_backend_without_ray_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    one_error_line(run(*RATE_ARGS, "--backend", "ray"), "pddplan[ray]")


@pytest.mark.parametrize("backend", ["dask", "ray"])
def test_a_bathtub_on_a_cluster_gives_the_serial_points(backend: str) -> None:
    args = ("bathtub", WORKLOAD, "--points", "11", "--json")
    assert sweep_json(*args, "--jobs", "2", "--backend", backend) == sweep_json(*args, "--jobs", "1")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--param", "nope.rate", "--values", "2"), ("--param 'nope.rate'", "nope")),
        (("--param", "arrival.rate_rps[0]", "--values", "2"), ("--param 'arrival.rate_rps[0]'",)),
        (("--param", "deployment.wan_lines[9].rtt_ms", "--values", "2"), ("deployment.wan_lines[9].rtt_ms", "[9]")),
        (("--param", "arrival.nope", "--values", "2"), ("arrival.nope", "unknown field")),
        (("--param", "arrival.rate_rps", "--values", "-1"), ("arrival.rate_rps",)),
        (("--param", "serving.chunk_tokens", "--values", "4096.5"), ("serving.chunk_tokens",)),
        (("--param", "arrival.rate_rps", "--values", "x"), ("--values",)),
        (("--param", "arrival.rate_rps"), ("--values",)),
        (("--param", "arrival.rate_rps", "--values", "2", "--range", "1:2:2"), ("--values",)),
        (("--param", "arrival.rate_rps", "--range", "1:2"), ("--range",)),
        (("--param", "arrival.rate_rps", "--values", "2", "--jobs", "0"), ("--jobs",)),
        (("--param", "arrival.rate_rps", "--values", "2", "--backend", "mpi"), ("--backend", "mpi")),
        (("--param", "arrival.rate_rps", "--values", "2", "-a", "pd-extra"), ("pd-extra",)),
    ],
)
def test_bad_input_exits_2(args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    one_error_line(run("sweep", WORKLOAD, *args, "--json"), *fragments)


def test_unknown_workload_exits_2() -> None:
    one_error_line(run("sweep", "no-such-workload", "--param", "arrival.rate_rps", "--values", "2"), "no-such-workload")


def test_workload_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(yaml.safe_dump([1, 2]))
    one_error_line(run("sweep", tmp_path / "w.yaml", "--param", "arrival.rate_rps", "--values", "2"), "w.yaml")


def test_a_price_sweep_shows_revenue_per_cost_which_prices_move() -> None:
    """Cost and BCR (requests per $) do not move with a token price: the table used to show flat
    columns for the sweep the README recommends. It shows revenue per $ of cost instead, which
    doubles when revenue per request does (at the same plan)."""
    result = run("sweep", WORKLOAD, "--param", "prices.output_usd_per_mtok", "--values", "0.42,0.84", "-a", "pd-intra")
    assert result.exit_code == 0, result.stderr
    assert "pd-intra rev/cost" in result.stdout and "pd-intra BCR" not in result.stdout
    data = run(
        "sweep", WORKLOAD, "--param", "prices.output_usd_per_mtok", "--values", "0.42,0.84", "-a", "pd-intra", "--json"
    )
    low, high = (json.loads(data.stdout)["points"][i]["pd-intra"] for i in (0, 1))
    assert low["cost_usd_per_hour"] == high["cost_usd_per_hour"]
    assert high["revenue_per_cost"] > low["revenue_per_cost"]
    # by hand: the output price rises by 0.42 $/Mtok, so each request earns E[output] x 0.42e-6 $
    # more; at the workload's rate that is rate x 3600 x it per hour, over the same cost
    workload = load_workload(WORKLOAD)
    extra = workload.output_tokens.mean() * 0.42e-6 * workload.arrival.rate_rps * 3600 / low["cost_usd_per_hour"]
    assert high["revenue_per_cost"] - low["revenue_per_cost"] == pytest.approx(extra, rel=1e-9)


def test_a_sweep_reads_the_files_its_workload_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each point used to re-read the model and GPU profiles (on every worker); they are read
    once and travel with the points."""
    calls: list[object] = []
    real = load_input_set  # what the sweep module imports

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeping, "load_input_set", counting)
    result = run("sweep", WORKLOAD, "--param", "arrival.rate_rps", "--values", "2,3,4", "-a", "pd-intra", "--json")
    assert result.exit_code == 0, result.stderr
    assert len(json.loads(result.stdout)["points"]) == 3
    assert len(calls) == 1


def test_a_shipped_workload_is_named_as_the_user_wrote_it_not_by_its_install_path(tmp_path: Path) -> None:
    """A value the workload refuses: the message names `pdd-agent-64k`, not the package's folder;
    a workload file of the user's is named by its path."""
    message = one_error_line(run("sweep", WORKLOAD, "--param", "serving.chunk_tokens", "--values", "1,2"))
    assert "pdd-agent-64k with serving.chunk_tokens = 1" in message and "/" not in message.split(" with ")[0]
    own = tmp_path / "w.yaml"
    own.write_text((workload_dir(WORKLOAD) / "pdd-agent-64k.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    message = one_error_line(run("sweep", str(own), "--param", "serving.chunk_tokens", "--values", "1,2"))
    assert f"{own} with serving.chunk_tokens = 1" in message
