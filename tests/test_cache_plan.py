"""`pddplan cache-plan`: cache capacity priced beside GPUs and lines, by hand on made-up points
and end to end on the shipped trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pddplan.analyses.cache_plan import HOURS_PER_MONTH, CachePoint, best_point, marginal_values
from pddplan.trace.curve import Capacity

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"


def _point(gb: float, gpus: float | None, goodput: float = 4.0, price: float = 2.0) -> CachePoint:
    return CachePoint(
        capacity=Capacity(f"{gb:g}GB", gb * 1e9, gb * 1e9 / 50_000),
        capacity_bytes=gb * 1e9,
        hit_token_weighted=0.0,
        architecture="pdd" if gpus is not None else None,
        gpu_and_line_usd_per_hour=gpus,
        cache_usd_per_hour=gb * price / HOURS_PER_MONTH,
        goodput_rps=goodput if gpus is not None else 0.0,
    )


def test_marginal_value_and_best_by_hand() -> None:
    """0 GB: $50/h of GPUs; 365 GB at $2/GB-month costs 365 x 2 / 730 = $1/h and saves $10/h of
    GPUs: value 10. 3,650 GB costs $10/h, saves nothing more: value 0. BCR = 4 x 3600 / total:
    288, 351.2, 288 req/$; the best is 365 GB. For --rate, the cheapest total: also 365 GB."""
    points = [_point(0, 50.0), _point(365, 40.0), _point(3650, 40.0)]
    assert points[1].cache_usd_per_hour == pytest.approx(1.0)
    assert marginal_values(points) == [None, pytest.approx(10.0), pytest.approx(0.0)]
    assert [p.bcr for p in points] == [pytest.approx(288.0), pytest.approx(14400 / 41), pytest.approx(288.0)]
    assert best_point(points, "bcr") is points[1] and best_point(points, "rate") is points[1]


def test_a_capacity_without_a_plan_has_no_value_and_is_never_best() -> None:
    points = [_point(0, None), _point(100, 30.0)]
    assert marginal_values(points) == [None, None]
    assert best_point(points, "bcr") is points[1]
    assert best_point([_point(0, None)], "bcr") is None


def test_cache_plan_on_the_shipped_trace(cli: Any) -> None:
    """More cache never lowers the replayed hit rate, and with the cache free the best capacity
    is the largest (its plan can only be as cheap or cheaper). Served by pd-intra: PDD, at the
    smaller caches where most prompts prefill whole, puts its relay on the prefill instances, whose
    long steps the simulation finds too slow for the relayed tokens (TPOT P90 ~0.29 s against the
    closed form's < 0.1 s), so its plan fails verification and those capacities have none."""
    result = cli(
        "cache-plan",
        str(MOONCAKE),
        "--like",
        "pdd-agent-64k",
        "--capacity",
        "0,100GB,1TB",
        "--usd-per-gb-month",
        "0",
        "-a",
        "pd-intra",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    hits = [p["hit_token_weighted"] for p in data["points"]]
    assert hits == sorted(hits) and hits[0] == 0.0 and hits[-1] > 0.5
    costs = [p["gpu_and_line_usd_per_hour"] for p in data["points"]]
    assert all(c is not None for c in costs)
    assert data["points"][-1]["bcr"] == max(p["bcr"] for p in data["points"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--usd-per-gb-month", "-1"), "--usd-per-gb-month = -1"),
        (("--usd-per-gb-month", "2", "--format", "azure"), "--format = 'azure'"),
        (("--usd-per-gb-month", "2", "--capacity", "lots"), "--capacity = 'lots'"),
    ],
)
def test_bad_cache_plan_options(cli: Any, args: tuple[str, ...], message: str) -> None:
    base = ["cache-plan", str(MOONCAKE), "--like", "pdd-agent-64k"]
    if "--capacity" not in args:
        base += ["--capacity", "0,1TB"]
    result = cli(*base, *args)
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_price_comes_from_the_flag_or_the_workload(cli: Any, tmp_path: Path) -> None:
    """No built-in cache price: the flag, else deployment.prefix_cache (its source must resolve),
    else one line saying so."""
    import yaml

    from pddplan.analyses.cache_plan import cache_price
    from pddplan.errors import InputError
    from pddplan.inputs import load_workload

    base = load_workload("pdd-agent-64k")
    assert cache_price(base, 3.0) == 3.0
    with pytest.raises(InputError, match="no cache price"):
        cache_price(base, None)
    data = yaml.safe_load((ROOT / "workloads" / "pdd-agent-64k.yaml").read_text())
    data["deployment"]["prefix_cache"] = {"usd_per_gb_month": 1.5, "price_source": "assumption: my DRAM"}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cache_price(load_workload(str(path)), None) == 1.5
    data["deployment"]["prefix_cache"]["price_source"] = "nowhere"
    path.write_text(yaml.safe_dump(data))
    assert cli("workloads", "show", str(path)).exit_code == 2
