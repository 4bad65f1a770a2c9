"""`optimize --top N` (issue 36, item 6): the N best plans per architecture and the cost-latency
frontier, by hand on made-up plans (`pddplan.optimize.frontier`), then end to end on a small
workload: the terminal at 80 columns, `--json` against its schema, the HTML report on a phone, and
bad values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_results import human_of, json_of, one_error_line
from headless_page import PHONE_WIDTH_PX, render
from typer.testing import CliRunner

import pddplan.architectures  # noqa: F401  (registers the architectures a plan may name)
from pddplan.cli import app
from pddplan.errors import InputError
from pddplan.optimize.frontier import PlanOption, frontier, pareto, ranked
from pddplan.optimize.options import MAX_TOP, OptimizeOptions
from pddplan.report.schemas import validate_output
from pddplan.specs.plan import Plan

WORKLOAD = "chat-short-lowhit"
SMALL = ("optimize", WORKLOAD, "-a", "pd-intra", "-a", "agg", "--requests", "2000")


# -- by hand --------------------------------------------------------------------------------------
def test_pareto_keeps_the_points_nothing_beats_on_both_by_hand() -> None:
    """(cost, latency), lower better on both:
    (1, 5) the cheapest: kept;  (2, 3) and its copy: nothing is as cheap and as fast, both kept;
    (2, 4) beaten by (2, 3) (as cheap, faster);  (3, 3) beaten by (2, 3) (cheaper, as fast);
    (4, 1) the fastest: kept."""
    points = [(1.0, 5.0), (2.0, 3.0), (2.0, 4.0), (3.0, 3.0), (4.0, 1.0), (2.0, 3.0)]
    assert pareto(points) == [0, 1, 4, 5]
    assert pareto([]) == []
    assert pareto([(7.0, 7.0)]) == [0]


def _option(
    cost: float, ttft_p99_s: float, tpot_p90_s: float, bcr: float, count: int = 1, handoff: str = "adaptive"
) -> PlanOption:
    """A made-up plan option: `count` prefill instances tell the deployments apart."""
    plan = Plan.model_validate(
        {
            "name": "toy",
            "architecture": "agg",
            "prefill": {"datacenter": "dc-a", "gpu": "h100-sxm", "tp": 4, "count": count},
            "handoff": {"mode": handoff},
        }
    )
    return PlanOption(
        plan=plan,
        key=(bcr, -ttft_p99_s, 0.0),
        cost_usd_per_hour=cost,
        goodput_rps=bcr * cost / 3600,
        bcr=bcr,
        ttft_p90_s=ttft_p99_s / 2,
        ttft_p99_s=ttft_p99_s,
        tpot_p90_s=tpot_p90_s,
        tpot_p99_s=tpot_p90_s,
        gpus={"h100-sxm": 4 * count},
        roles={},
        routing_rule=None,
        handoff_mode=None,
        found_by="program",
    )


def test_ranked_puts_the_chosen_plan_first_then_the_others_by_key() -> None:
    chosen = _option(10.0, 1.0, 0.03, bcr=100.0, count=1)
    others = [
        _option(12.0, 0.8, 0.03, bcr=90.0, count=2),
        _option(10.0, 1.0, 0.03, bcr=100.0, count=1),  # the chosen plan again: counted once
        _option(11.0, 0.9, 0.02, bcr=95.0, count=3),
        _option(12.0, 0.8, 0.03, bcr=89.0, count=2),  # plan 2 seen again with a worse key: its best kept
        _option(20.0, 0.5, 0.02, bcr=120.0, count=4),  # scores above the chosen one: listed after it
        _option(11.0, 0.9, 0.02, bcr=96.0, count=3, handoff="one-shot"),  # deployment 3, another mode, better
        _option(10.0, 1.2, 0.03, bcr=99.0, count=1, handoff="one-shot"),  # the chosen deployment: left out
    ]
    out = ranked(chosen, others)
    assert [o.plan.prefill.count for o in out] == [1, 4, 3, 2]
    assert [o.rank for o in out] == [1, 2, 3, 4]
    assert (out[2].bcr, out[2].plan.handoff.mode) == (96.0, "one-shot")
    assert out[3].bcr == 90.0


def test_the_frontier_by_hand() -> None:
    """cost / TTFT P99 / TPOT P90: A 10 / 1.0 / 30 ms, B 12 / 0.8 / 30 ms, C 12 / 0.9 / 20 ms,
    D 15 / 0.9 / 25 ms. Cost against TTFT: A (cheapest), B (faster than A); C is beaten by B (as
    cheap, faster), D by B. Cost against TPOT: A, C (faster than A); B beaten by C, D by C."""
    a, b, c, d = (
        _option(10.0, 1.0, 0.030, bcr=100.0, count=1),
        _option(12.0, 0.8, 0.030, bcr=90.0, count=2),
        _option(12.0, 0.9, 0.020, bcr=90.0, count=3),
        _option(15.0, 0.9, 0.025, bcr=80.0, count=4),
    )
    points = frontier(ranked(a, [b, c, d]))
    assert [(p.option.plan.prefill.count, p.on) for p in points] == [
        (1, ("ttft_p99_s", "tpot_p90_s")),
        (2, ("ttft_p99_s",)),
        (3, ("tpot_p90_s",)),
    ]


def test_top_is_bounded() -> None:
    assert OptimizeOptions(top=1).top == 1 and OptimizeOptions(top=MAX_TOP).top == MAX_TOP
    for bad in (0, -1, MAX_TOP + 1):
        with pytest.raises(InputError, match="--top"):
            OptimizeOptions(top=bad)


# -- end to end -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs() -> dict[str, Any]:
    """The small workload optimized without and with --top 3 (JSON), and with --top 3 at 80 columns."""
    runner = CliRunner()

    def run(*args: str, columns: int = 160) -> Any:
        return runner.invoke(app, [*SMALL, *args], env={"COLUMNS": str(columns)}, catch_exceptions=False)

    return {
        "plain": json_of(run("--json")),
        "top": json_of(run("--top", "3", "--json")),
        "terminal": human_of(run("--top", "3", columns=80)),
    }


def _point(plan: dict[str, Any], latency: str) -> tuple[float, float]:
    return plan["cost_usd_per_hour"], plan[latency]


def _dominates_or_ties(f: dict[str, Any], p: dict[str, Any], latency: str) -> bool:
    """`f` is at most as costly and at most as slow as `p`."""
    return bool(f["cost_usd_per_hour"] <= p["cost_usd_per_hour"] and f[latency] <= p[latency])


def test_top_lists_the_chosen_plan_first_then_the_next_best(runs: dict[str, Any]) -> None:
    plain = {a["name"]: a for a in runs["plain"]["architectures"]}
    for arch in runs["top"]["architectures"]:
        top = arch["top"]
        assert 1 <= len(top) <= 3 and len(top) <= arch["plans_compared"]
        assert [p["rank"] for p in top] == list(range(1, len(top) + 1))
        assert top[0]["plan"] == plain[arch["name"]]["plan"] == arch["plan"]
        assert [p["checked"] for p in top] == ["verified"] + ["closed form"] * (len(top) - 1)
        keys = [(p["bcr"], -p["ttft_p99_s"]) for p in top]
        assert keys == sorted(keys, reverse=True), keys  # by the mode's score (BCR), then TTFT P99
        assert len({str(p["plan"]) for p in top}) == len(top)  # distinct plans
    assert len(runs["top"]["architectures"][0]["top"]) > 1  # there is more than one plan to show


def test_top_changes_nothing_else(runs: dict[str, Any]) -> None:
    """Without --top the output has none of the new keys; with it, every other figure is the same
    (the program solves more often: `solves` counts them)."""
    added = {"top", "frontier", "plans_compared", "solves"}
    for plain, top in zip(runs["plain"]["architectures"], runs["top"]["architectures"], strict=True):
        assert not {"top", "frontier", "plans_compared"} & plain.keys()
        assert {k: v for k, v in plain.items() if k not in added} == {k: v for k, v in top.items() if k not in added}
    assert {k: v for k, v in runs["plain"].items() if k != "architectures"} == {
        k: v for k, v in runs["top"].items() if k != "architectures"
    }


def test_the_frontier_is_what_no_listed_plan_beats(runs: dict[str, Any]) -> None:
    """Each frontier point is beaten by no plan shown (as cheap and as fast, one better) on the
    latencies it is on; every plan shown is beaten or tied by a frontier point on each latency."""
    for arch in runs["top"]["architectures"]:
        points, shown = arch["frontier"], arch["top"] + arch["frontier"]
        assert points and points == sorted(points, key=lambda p: (p["cost_usd_per_hour"], p["rank"]))
        for latency in ("ttft_p99_s", "tpot_p90_s"):
            on = [f for f in points if latency in f["on"]]
            assert on, (arch["name"], latency)
            for f in on:
                beaten = [
                    p for p in shown if _dominates_or_ties(p, f, latency) and _point(p, latency) != _point(f, latency)
                ]
                assert not beaten, (arch["name"], latency, f["rank"], [p["rank"] for p in beaten])
            for p in shown:
                assert any(_dominates_or_ties(f, p, latency) for f in on), (arch["name"], latency, p["rank"])


def test_top_json_validates_against_the_schema(runs: dict[str, Any]) -> None:
    validate_output("optimize", runs["top"])
    validate_output("optimize", runs["plain"])


def test_the_terminal_at_80_columns_cuts_nothing(runs: dict[str, Any]) -> None:
    out = runs["terminal"]
    lines = out.splitlines()
    assert not [line for line in lines if len(line) > 80]
    assert "…" not in out
    for name in ("pd-intra", "agg"):
        assert any(line.startswith(f"{name}: ") and " best of " in line for line in (s.strip() for s in lines)), name
    assert "#1 (verified by simulation" in out and "closed form" in out
    assert "the only one simulated" in " ".join(out.split())


@pytest.mark.parametrize("value", ["0", "1000", "x", "-3"])
def test_a_bad_top_is_one_line_and_exit_2(cli: Any, value: str) -> None:
    one_error_line(cli("optimize", WORKLOAD, "-a", "agg", "--top", value), "--top")


def test_the_html_report_shows_the_plans_and_fits_a_phone(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    result = CliRunner().invoke(
        app, [*SMALL, "--top", "2", "--report", str(page)], env={"COLUMNS": "160"}, catch_exceptions=False
    )
    human_of(result)
    text = page.read_text()
    assert 'id="top-plans"' in text and "pd-intra: " in text and "agg: " in text
    assert "only one verified by simulation" in text
    shown = render(page, PHONE_WIDTH_PX)
    assert (shown.scroll_width_px, shown.inner_width_px) == (PHONE_WIDTH_PX, PHONE_WIDTH_PX)
    assert shown.console == []
