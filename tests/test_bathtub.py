"""`pddplan bathtub`: benefit against prefix-hit rate (pddplan.analyses.bathtub, pddplan.report.bathtub_report).

The tail-chunk dips must sit where the chunk arithmetic puts them (h_k = 1 - k C / P), move with
`--chunk` exactly as that arithmetic says, and every figure at a point must be what the evaluator's
capacity view gives for the point's plan under the workload at that hit rate.
"""

from __future__ import annotations

import csv
import io
import json
import math
from functools import cache
from typing import Any

import numpy as np
import pytest
from cli_results import one_error_line
from typer.testing import CliRunner

from pddplan import architectures
from pddplan.analyses import bathtub as tub
from pddplan.cli import app
from pddplan.evaluate.capacity_view import capacity_view, prefill_token_throughputs
from pddplan.evaluate.classes import planning_effects, workload_classes
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.candidates import instance_candidates
from pddplan.report import bathtub_report
from pddplan.scenarios import build_scenario, variants
from pddplan.specs.plan import Plan
from pddplan.support.curve_shape import DIP, local_minima

WORKLOAD = "pdd-agent-64k"
PROMPT = 64512  # pdd-agent-64k: fixed prompt length
PAGE = 64  # pdd-agent-64k: serving.page_tokens
VIEW_FIGURES = ("bcr", "revenue_per_cost", "throughput_per_gpu_hour", "prefill_tokens_per_gpu_s")


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@cache
def bathtub_json(*args: str) -> dict[str, Any]:
    """`pddplan bathtub ARGS --json`, parsed (each distinct command runs once per session)."""
    result = run("bathtub", *args, "--json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def fixed(chunk: int | None = None, points: int = 101) -> dict[str, Any]:
    args = [WORKLOAD, "--mode", "fixed", "--points", str(points)]
    if chunk is not None and chunk != 8192:  # 8192 is the workload's own chunk size
        args += ["--chunk", str(chunk)]
    return bathtub_json(*args)


def arithmetic_dips(chunk: int) -> list[float]:
    """h_k = 1 - k C / P for every k with k C < P."""
    return sorted(1 - k * chunk / PROMPT for k in range(1, math.ceil(PROMPT / chunk)) if k * chunk < PROMPT)


# -- the JSON view --------------------------------------------------------------------------------
def test_json_has_points_and_findings() -> None:
    data = fixed()
    assert data["workload"] == WORKLOAD
    assert data["mode"] == "fixed"
    assert data["chunk_tokens"] == 8192
    assert data["rate_rps"] == load_workload(WORKLOAD).arrival.rate_rps
    assert data["architectures"] == list(architectures.names())
    points = data["points"]
    assert len(points) == 101
    assert [p["hit"] for p in points] == pytest.approx([i / 100 for i in range(101)], abs=1e-12)
    assert points[0]["hit"] == 0.0 and points[-1]["hit"] == 1.0
    for point in points:
        assert set(point) == {"hit", "tail_chunk_tokens", *architectures.names()}
        assert point["tail_chunk_tokens"] == tub.tail_chunk_tokens(PROMPT, point["hit"], 8192, PAGE)
        for arch in architectures.names():
            entry = point[arch]
            assert set(entry) == {*tub.FIGURES, "plan"}
            if entry["plan"] is None:
                assert all(entry[name] is None for name in tub.FIGURES)
                continue
            assert entry["plan"]["architecture"] == arch
            # a plan sized at the workload's hit may serve nothing within the SLA at another (pd-cross at
            # 0% hit: the whole KV crosses), so what it serves may be 0, never what its GPUs prefill
            for name in ("bcr", "revenue_per_cost", "throughput_per_gpu_hour"):
                assert isinstance(entry[name], float) and entry[name] >= 0, (point["hit"], arch, name)
            assert entry["prefill_tokens_per_gpu_s"] > 0
            assert entry["cost_usd_per_hour"] > 0
            # margin per hour = revenue - cost per hour, revenue per cost = revenue / cost
            revenue = entry["margin_usd_per_hour"] + entry["cost_usd_per_hour"]
            assert revenue / entry["cost_usd_per_hour"] == pytest.approx(entry["revenue_per_cost"], rel=1e-9)
            # BCR is requests per $: the rate served (at most the offered rate) over the whole-instance cost
            assert entry["bcr"] <= data["rate_rps"] * 3600 / entry["cost_usd_per_hour"] * (1 + 1e-9)
    findings = data["findings"]
    assert set(findings) >= {"workload_mean_hit", "architectures", "predicted_dips", "pdd_vs_baselines"}
    assert findings["workload_mean_hit"] == pytest.approx(load_workload(WORKLOAD).hit_rate.mean(), abs=1e-12)
    assert set(findings["architectures"]) == set(architectures.names())
    for arch, entry in findings["architectures"].items():
        feasible = sum(p[arch]["plan"] is not None for p in points)
        assert entry["feasible_points"] == feasible
        if not feasible:
            continue
        benefit = [p[arch]["revenue_per_cost"] for p in points if p[arch]["revenue_per_cost"] is not None]
        assert entry["valley_min_revenue_per_cost"] == min(benefit)
        assert entry["left_rim_revenue_per_cost"] == benefit[0]
        assert entry["right_rim_revenue_per_cost"] == benefit[-1]
    assert findings["architectures"]["pd-intra"]["feasible_points"] > 0
    assert findings["architectures"]["pdd"]["feasible_points"] > 0
    for cross in findings["pdd_vs_baselines"]:
        assert 0 < cross["hit"] <= 1 and isinstance(cross["pdd_wins_above"], bool)


def test_predicted_dips_are_the_chunk_arithmetic() -> None:
    for chunk in (4096, 8192, 16384):
        data = fixed(chunk, 3)  # the predicted dips are arithmetic on the prompt and chunk: any grid gives them
        assert data["chunk_tokens"] == chunk
        assert data["findings"]["predicted_dips"] == pytest.approx(arithmetic_dips(chunk), abs=1e-12)
    assert len(arithmetic_dips(8192)) == 7
    assert len(arithmetic_dips(4096)) == 15
    assert len(arithmetic_dips(16384)) == 3


def _dips(data: dict[str, Any], arch: str) -> list[dict[str, Any]]:
    return list(data["findings"]["architectures"][arch].get("singular_points", []))


# The dip tests' grid: steps of 2.5% of the prompt (1,613 tokens). Under step-time model v3 a prefill
# chunk costs far more than a step's fixed part (weight reads, launches, collective latencies; the
# TP16 instances sized here all-reduce every token over the NIC), so a dip is the edge of a sawtooth:
# the throughput falls gently while the tail chunk shrinks and jumps once it vanishes. The point
# just below h_k sits under its left neighbour by about (step / new tokens) x (the fixed parts'
# share of a token's cost), so a coarser grid shows the edge better; 41 points still keep the 4K
# chunks' dips (6.3% apart) more than two steps apart.
DIP_POINTS = 41


def _grid_below(hits: list[float], points: int) -> set[float]:
    """The grid points just below each of `hits` (the last one before h_k), rounded for comparison."""
    steps = points - 1
    return {round(math.floor(h * steps - 1e-9) / steps, 6) for h in hits}


@pytest.mark.parametrize("chunk", [8192, 4096, 16384])
def test_dips_sit_within_one_grid_step_of_the_arithmetic(chunk: int) -> None:
    data = fixed(chunk, DIP_POINTS)
    step = 1 / (len(data["points"]) - 1)
    predicted = arithmetic_dips(chunk)
    hits = np.array([p["hit"] for p in data["points"]])
    for arch in architectures.names():
        throughput = np.array(
            [np.nan if (value := p[arch]["prefill_tokens_per_gpu_s_alone"]) is None else value for p in data["points"]]
        )
        dips = _dips(data, arch)
        matched: list[float] = []
        for dip in dips:
            near = [h for h in predicted if abs(dip["hit"] - h) <= step + 1e-9]
            assert len(near) == 1, (arch, chunk, dip, predicted)
            # just below h_k: the last grid point before the tail chunk vanishes
            assert near[0] - step - 1e-9 < dip["hit"] <= near[0] + 1e-9, (arch, chunk, dip)
            matched.append(near[0])
            assert dip["tail_chunk_tokens"] == tub.tail_chunk_tokens(PROMPT, dip["hit"], chunk, PAGE)
            assert 0 < dip["tail_chunk_tokens"] <= step * PROMPT + PAGE
            assert dip["drop"] >= DIP
        assert len(set(matched)) == len(matched), (arch, chunk, dips)
        # every predicted dip whose neighbourhood is feasible is a local minimum of the throughput,
        # reported when it is at least DIP deep on both sides
        reported: list[bool] = []
        for h in predicted:
            i = int(np.searchsorted(hits, h - 1e-12)) - 1  # the last grid point below h_k
            if i < 1 or i + 1 >= len(hits) or not np.isfinite(throughput[i - 1 : i + 2]).all():
                continue
            left, mid, right = throughput[i - 1 : i + 2]
            deep = mid < left * (1 - DIP) and mid < right * (1 - DIP)
            assert (h in matched) == deep, (arch, chunk, h, [d["hit"] for d in dips])
            reported.append(deep)
        # the deepest-cache dip (one full chunk and the tail left) is reported: there the fewest new
        # tokens carry the tail step's fixed part. Lower dips need not be: on a grid each sits at its
        # own distance below h_k, so its depth is near DIP and not monotone in the hit
        if reported:
            assert reported[-1], (arch, chunk, [d["hit"] for d in dips])


def _left_depths(data: dict[str, Any], arch: str, chunk: int) -> np.ndarray:
    """1 - throughput(just below h_k) / throughput(one grid step lower), for each predicted h_k with
    both points feasible: the loss the tail step's fixed part causes, the same tail chunks either side."""
    hits = np.array([p["hit"] for p in data["points"]])
    value = [p[arch]["prefill_tokens_per_gpu_s_alone"] for p in data["points"]]
    depths = []
    for h in arithmetic_dips(chunk):
        i = int(np.searchsorted(hits, h - 1e-12)) - 1
        if i >= 1 and value[i] is not None and value[i - 1] is not None:
            depths.append(1 - value[i] / value[i - 1])
    return np.array(depths)


def test_changing_the_chunk_moves_the_dips_as_the_arithmetic_says() -> None:
    """Each chunk's dips sit at the grid points just below its own h_k, and they nest like the
    predicted ones: h_k for C is h_2k for C/2, where C/2 leaves the same tail chunk but twice the
    steps whose fixed part the request's tokens carry, so a dip deep enough to report with C is
    deeper with C/2. Halving the chunk keeps every reported dip and adds its own deepest-cache one
    (k = 1, odd, no dip of C); doubling it keeps some of every other one."""
    found = {chunk: [d["hit"] for d in _dips(fixed(chunk, DIP_POINTS), "pd-intra")] for chunk in (4096, 8192, 16384)}
    rounded = {chunk: {round(h, 6) for h in hits} for chunk, hits in found.items()}
    for chunk in found:
        assert rounded[chunk] and rounded[chunk] <= _grid_below(arithmetic_dips(chunk), DIP_POINTS), (chunk, found)
    assert rounded[16384] < rounded[8192] < rounded[4096]
    # PDD's prefill pool sees the same tail chunks: the same dips, as deep within 15% (its prefill
    # instance is sized apart, so a dip near the 0.5% threshold may be reported by one and not the other)
    for chunk in (4096, 8192, 16384):
        data = fixed(chunk, DIP_POINTS)
        pdd, intra = _left_depths(data, "pdd", chunk), _left_depths(data, "pd-intra", chunk)
        assert len(pdd) == len(intra) > 0 and (intra > 0).all(), chunk
        np.testing.assert_allclose(pdd, intra, rtol=0.15)


@pytest.mark.parametrize(("tp_attention", "packed_dips"), [(True, False), (False, True)])
def test_packed_prefill_has_no_tail_chunk_dip_with_attention_on_one_rank(tp_attention: bool, packed_dips: bool) -> None:
    """Chunked prefill fills a step's leftover budget with the next requests' tokens, so with
    attention on one rank (tensor-parallel) a small tail chunk no longer pays a whole step: the
    packed throughput has no dip where the alone one does. Under data-parallel attention each rank
    prefills its own request chunk by chunk, all ranks in lockstep (`PrefillCost.batched_s`), so
    its tail chunk still pays a step and the packed series dips too. Packed is never below alone
    (the dip tests' grid, every request at the hit rate, on GPU-A TP16 with experts spread)."""
    inputs = load_input_set(load_workload(WORKLOAD), workload_dir(WORKLOAD))
    workload, model = inputs.workload, inputs.model
    chunk = workload.serving.chunk_tokens
    kind = next(
        c
        for c in instance_candidates(inputs, chunk)
        if (c.gpu, c.tp, c.expert_parallel, c.tp_attention) == ("gpu-a", 16, True, tp_attention)
    )
    series = []
    for hit in np.linspace(0.0, 1.0, DIP_POINTS)[:-1]:  # at 100% no token is new
        point = variants.at_hit(workload, float(hit), "fixed", chunk)
        classes = workload_classes(point, model, kind.instance, chunk, None, planning_effects(point, kind.instance))
        series.append(prefill_token_throughputs(classes, kind.gpus_per_instance))
    packed, alone = (np.array(values) for values in zip(*series, strict=True))
    assert local_minima(alone)
    assert bool(local_minima(packed)) == packed_dips
    assert np.all(packed >= alone * (1 - 1e-12))


def test_a_dip_is_a_local_minimum_of_prefill_throughput() -> None:
    data = fixed(None, DIP_POINTS)
    points = data["points"]
    for arch in ("pd-intra", "pdd"):
        assert _dips(data, arch), arch
        for dip in _dips(data, arch):
            i = round(dip["hit"] * (DIP_POINTS - 1))
            left, mid, right = (points[j][arch]["prefill_tokens_per_gpu_s_alone"] for j in (i - 1, i, i + 1))
            assert mid < left and mid < right
            assert dip["drop"] == pytest.approx(1 - mid / max(left, right), rel=1e-12)


# -- a point is the evaluator's capacity view -----------------------------------------------------
def _check_point(data: dict[str, Any], index: int, mode: str, chunk: int | None) -> int:
    workload = load_workload(WORKLOAD)
    point = data["points"][index]
    at = variants.at_hit(workload, point["hit"], mode, chunk)  # type: ignore[arg-type]
    checked = 0
    for arch in data["architectures"]:
        entry = point[arch]
        if entry["plan"] is None:
            continue
        plan = Plan.model_validate(entry["plan"])
        assert plan.architecture == arch
        scenario = build_scenario(plan, load_input_set(at, workload_dir(WORKLOAD)), source="bathtub point")
        view = capacity_view(scenario)
        for name in ("prefill_tokens_per_gpu_s", "prefill_tokens_per_gpu_s_alone"):
            assert entry[name] == pytest.approx(getattr(view, name), rel=1e-9, abs=0), (index, arch, name)
        # whole instances and lines, serving min(offered rate, capacity here)
        rate = workload.arrival.rate_rps
        served = min(rate, view.max_rate_rps)
        cost = scenario.cost_per_hour
        revenue = served * view.revenue_per_request_usd * 3600
        gpus = sum(role.gpus for role in scenario.roles.values())
        assert entry["cost_usd_per_hour"] == pytest.approx(cost, rel=1e-9)
        assert entry["bcr"] == pytest.approx(served * 3600 / cost, rel=1e-9)
        assert entry["revenue_per_cost"] == pytest.approx(revenue / cost, rel=1e-9)
        assert entry["margin_usd_per_hour"] == pytest.approx(revenue - cost, rel=1e-9)
        assert entry["throughput_per_gpu_hour"] == pytest.approx(served * 3600 / gpus, rel=1e-9)
        if not data["fixed_plan"]:  # a plan re-sized here carries the rate
            assert view.max_rate_rps >= rate * (1 - 1e-9)
        checked += 1
    return checked


# both ends, the grid point just below each of chunk 8192's dips (h_k = 1 - 0.127 k) and one above
@pytest.mark.parametrize("index", [0, 4, 9, 14, 19, 24, 29, 34, 35, 40])
def test_point_equals_the_capacity_view_fixed(index: int) -> None:
    assert _check_point(fixed(None, DIP_POINTS), index, "fixed", None) >= 2


@pytest.mark.parametrize("index", [0, 2, 18, 40])
def test_point_equals_the_capacity_view_other_chunk(index: int) -> None:
    assert _check_point(fixed(4096, DIP_POINTS), index, "fixed", 4096) >= 2


# 11 points (every 10%) for the modes that re-solve each point: a point is checked alone, so a finer
# grid checks nothing more
@pytest.mark.parametrize("index", [0, 3, 5, 9, 10])
def test_point_equals_the_capacity_view_shift(index: int) -> None:
    data = bathtub_json(WORKLOAD, "--mode", "shift", "--points", "11")
    assert data["mode"] == "shift" and data["fixed_plan"] is True
    assert _check_point(data, index, "shift", None) >= 1


@pytest.mark.parametrize("index", [0, 3, 5, 9, 10])
def test_point_equals_the_capacity_view_resized(index: int) -> None:
    data = bathtub_json(WORKLOAD, "--resize", "--points", "11")
    assert data["fixed_plan"] is False
    assert _check_point(data, index, "fixed", None) >= 1


# -- CSV ------------------------------------------------------------------------------------------
def test_csv_has_a_header_and_a_row_per_point(tmp_path: Any) -> None:
    path = tmp_path / "tub.csv"
    result = run("bathtub", WORKLOAD, "--points", "11", "-a", "pd-intra", "-a", "pdd", "--csv", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    rows = list(csv.reader(io.StringIO(path.read_text())))
    header = rows[0]
    assert header[:2] == ["hit", "tail_chunk_tokens"]
    assert header[2:] == [f"{a}.{f}" for a in ("pd-intra", "pdd") for f in tub.FIGURES]
    assert len(rows) == 1 + 11
    for row, point in zip(rows[1:], data["points"], strict=True):
        assert len(row) == len(header)
        assert float(row[0]) == pytest.approx(point["hit"], abs=1e-6)
        assert int(row[1]) == point["tail_chunk_tokens"]
        for column, cell in zip(header[2:], row[2:], strict=True):
            arch, name = column.split(".")
            value = point[arch][name]
            if value is None:
                assert cell == ""
            else:
                assert float(cell) == pytest.approx(value, rel=1e-7)


# -- hit distributions ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["pdd-agent-64k", "chat-short-lowhit", "rag-longdoc-lowhit"])
def test_shift_keeps_the_shares_and_hits_the_mean(name: str) -> None:
    workload = load_workload(name)
    original = workload.hit_rate.resolved_buckets()
    mean = workload.hit_rate.mean()
    for hit in [0.0, 0.01, 0.2, 0.37, mean, 0.5, 0.75, 0.9, 0.99, 1.0]:
        moved = variants.hit_distribution(workload, hit, "shift")
        buckets = moved.resolved_buckets()
        assert [b.share for b in buckets] == [b.share for b in original]
        assert moved.mean() == pytest.approx(hit, abs=1e-12)
        for b in buckets:
            assert 0.0 <= b.low <= b.high <= 1.0
        # a monotone map: bucket edges keep their order
        for a, b, a0, b0 in zip(buckets, buckets[1:], original, original[1:], strict=False):
            assert (a.low <= b.low) == (a0.low <= b0.low)
            assert a.high <= b.high or a0.high > b0.high
    same = variants.hit_distribution(workload, mean, "shift").resolved_buckets()
    for a, b in zip(same, original, strict=True):
        assert (a.low, a.high) == pytest.approx((b.low, b.high), abs=1e-12)
    top = variants.hit_distribution(workload, 1.0, "shift").resolved_buckets()
    assert all(b.low == pytest.approx(1.0) and b.high == pytest.approx(1.0) for b in top)
    bottom = variants.hit_distribution(workload, 0.0, "shift").resolved_buckets()
    assert all(b.low == 0.0 and b.high == 0.0 for b in bottom)


@pytest.mark.parametrize("hit", [0.0, 0.3, 0.9113, 1.0])
def test_fixed_is_a_single_point(hit: float) -> None:
    workload = load_workload(WORKLOAD)
    dist = variants.hit_distribution(workload, hit, "fixed")
    (bucket,) = dist.resolved_buckets()
    assert (bucket.low, bucket.high, bucket.share) == (hit, hit, 1.0)
    values, probs = dist.support()
    assert np.all(values == hit)
    assert probs.sum() == pytest.approx(1.0)
    assert dist.mean() == pytest.approx(hit, abs=1e-15)


def test_at_hit_replaces_the_hit_rate_and_the_chunk_only() -> None:
    workload = load_workload(WORKLOAD)
    same_chunk = variants.at_hit(workload, 0.4, "fixed")
    assert same_chunk.serving == workload.serving
    assert same_chunk.hit_rate.mean() == pytest.approx(0.4)
    other = variants.at_hit(workload, 0.4, "fixed", 4096)
    assert other.serving.chunk_tokens == 4096
    assert other.serving.model_copy(update={"chunk_tokens": 8192}) == workload.serving
    for field in ("model", "arrival", "prompt_tokens", "output_tokens", "sla", "prices", "deployment"):
        assert getattr(other, field) == getattr(workload, field)
    assert workload.hit_rate.mean() == pytest.approx(0.9114)  # the original is untouched


# -- the arithmetic helpers -----------------------------------------------------------------------
def test_tail_chunk_tokens() -> None:
    assert tub.tail_chunk_tokens(PROMPT, 0.0, 8192, PAGE) == PROMPT % 8192
    # cached tokens are whole pages: at h = 0.3, floor(19353.6 / 64) * 64 = 19328 cached, 45184 new
    assert tub.tail_chunk_tokens(PROMPT, 0.3, 4096, PAGE) == 45184 % 4096 == 128
    # new tokens a multiple of the chunk: a full last chunk
    assert tub.tail_chunk_tokens(16384, 0.5, 4096, PAGE) == 4096
    # everything cached still recomputes one token
    assert tub.tail_chunk_tokens(PROMPT, 1.0, 8192, PAGE) == 1
    assert tub.tail_chunk_tokens(PROMPT, 0.999, 8192, PAGE) == PROMPT - math.floor(0.999 * PROMPT / 64) * 64


def test_predicted_dips_function() -> None:
    assert tub.predicted_dips(PROMPT, 8192, PAGE) == pytest.approx(arithmetic_dips(8192), abs=1e-15)
    assert tub.predicted_dips(16384, 4096, PAGE) == pytest.approx([0.25, 0.5, 0.75])
    assert tub.predicted_dips(4096, 4096, PAGE) == []
    assert tub.predicted_dips(1000, 8192, PAGE) == []


def test_local_dips() -> None:
    values = np.array([10.0, 9.0, 10.0, 10.0, 9.96, 10.0, np.nan, 5.0, 10.0, 8.0, 9.0])
    # index 1: 10% below both; index 4: 0.4% below, not a dip; index 7: a nan neighbour;
    # index 9: 8 < 10 * 0.995 and 8 < 9 * 0.995
    assert local_minima(values) == [1, 9]
    assert local_minima(np.array([1.0, 2.0, 3.0])) == []


def _synthetic(benefit: list[float], workload_name: str = "chat-short-lowhit") -> tub.BathtubResult:
    workload = load_workload(workload_name)
    n = len(benefit)
    hits = np.linspace(0, 1, n)
    series = np.array(benefit, dtype=float)
    figures = {
        arch: {name: series.copy() if name in ("revenue_per_cost", "bcr") else np.ones(n) for name in tub.FIGURES}
        for arch in ("pd-intra", "pdd")
    }
    figures["pdd"]["bcr"] = np.linspace(0.55, 1.55, n)  # crosses pd-intra's
    return tub.BathtubResult(
        workload=workload,
        mode="fixed",
        hits=hits,
        architectures=["pd-intra", "pdd"],
        figures=figures,
        plans={"pd-intra": [None] * n, "pdd": [None] * n},
        tail_chunks=np.zeros(n, dtype=int),
        chunk_tokens=4096,
    )


def test_findings_valley_and_climb_out() -> None:
    result = _synthetic([1.0, 0.9, 0.7, 0.5, 0.4, 0.45, 0.6, 0.8, 1.05, 1.2, 1.3])
    mean_hit = result.workload.hit_rate.mean()
    assert mean_hit < 0.8
    found = tub.findings(result, 1500.0)
    entry = found["architectures"]["pd-intra"]
    assert entry["valley"] is True
    assert entry["valley_min_hit"] == pytest.approx(0.4)
    assert entry["valley_min_revenue_per_cost"] == 0.4
    assert entry["left_rim_revenue_per_cost"] == 1.0 and entry["right_rim_revenue_per_cost"] == 1.3
    assert entry["climb_out_hit"] == pytest.approx(0.8)
    assert entry["climb_out_cache_factor"] == pytest.approx(0.8 / mean_hit)
    assert entry["revenue_per_cost_at_mean_hit"] == pytest.approx(
        float(np.interp(mean_hit, result.hits, np.array([1.0, 0.9, 0.7, 0.5, 0.4, 0.45, 0.6, 0.8, 1.05, 1.2, 1.3])))
    )
    assert found["no_valley_note"] is None
    assert found["predicted_dips"] == pytest.approx(tub.predicted_dips(1500.0, 4096, 16))
    (cross,) = found["pdd_vs_baselines"]
    assert cross["pdd_wins_above"] is True
    # pd-intra's BCR is the valley curve, pdd's rises from 0.55 to 1.55: it passes above at 0.2
    assert cross["hit"] == pytest.approx(0.2)


def test_findings_without_a_valley() -> None:
    result = _synthetic([1.0, 0.98, 0.97, 0.96, 0.95, 0.95, 0.94, 0.93, 0.92, 0.91, 0.9])
    found = tub.findings(result, 1500.0)
    assert found["architectures"]["pd-intra"]["valley"] is False
    assert "climb_out_hit" not in found["architectures"]["pd-intra"]
    assert found["no_valley_note"] and "no valley" in found["no_valley_note"]


def test_findings_of_an_architecture_that_is_never_feasible() -> None:
    result = _synthetic([math.nan] * 11)
    found = tub.findings(result, 1500.0)
    assert found["architectures"]["pd-intra"] == {"feasible_points": 0, "no_plan_reason": None}
    result.findings = found
    lines = bathtub_report.findings_text(result)
    assert any("pd-intra: no hit rate has a plan" in line for line in lines)


# -- the command line -----------------------------------------------------------------------------
def test_human_output_has_both_charts_and_the_findings() -> None:
    result = run("bathtub", WORKLOAD, "--points", "21", "-a", "pd-intra")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    assert "Revenue per cost vs prefix hit rate" in text
    assert "Prefill throughput, packed vs prefix hit rate" in text
    assert "Prefill throughput, one request alone vs prefix hit rate" in text
    assert text.count("legend: o pd-intra") == 3
    assert "- chunk 8192 tokens predicts tail-chunk dips just below: 11.1%, 23.8%" in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--mode", "middle"), "--mode"),
        (("--points", "2"), "--points"),
        (("--chunk", "0"), "--chunk"),
        (("-a", "pd-extra"), "pd-extra"),
        (("no-such-workload",), "no-such-workload"),
    ],
)
def test_bad_input_exits_2(args: tuple[str, ...], fragment: str) -> None:
    one_error_line(run("bathtub", *args, "--json"), fragment)


def test_fixed_plan_keeps_the_deployment_and_moves_the_hit_rate() -> None:
    """--fixed-plan: one plan per architecture for every point, its whole-instance cost the same
    everywhere, BCR = served x 3600 / cost with served <= the offered rate, and at hit rates the
    plan was sized above it serves the whole rate."""
    from pddplan.analyses.bathtub import BathtubOptions, bathtub

    workload = load_workload(WORKLOAD)
    result = bathtub(workload, workload_dir(WORKLOAD), ["pd-intra", "pdd"], BathtubOptions(points=11, fixed_plan=True))
    assert result.fixed_plan and result.to_output().fixed_plan is True
    rate = workload.arrival.rate_rps
    for arch in ("pd-intra", "pdd"):
        plans = [plan for plan in result.plans[arch] if plan is not None]
        assert len(plans) == 11 and all(plan == plans[0] for plan in plans)
        cost = result.figures[arch]["cost_usd_per_hour"]
        assert np.allclose(cost, cost[0], rtol=1e-12)
        served = result.figures[arch]["bcr"] * cost / 3600
        assert (served <= rate * (1 + 1e-9)).all()
        assert served[-1] == pytest.approx(rate, rel=1e-9)  # at 100% hit the nominal plan is ample
        assert served[0] < rate  # at 0% hit it is not: the same GPUs now prefill every token
