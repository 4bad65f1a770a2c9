"""The human view of `pddplan trace import`: the summary, and the length and hit histograms."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from pddplan.report.charts import Chart, Series, terminal
from pddplan.support.units import parse_size


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_trace(console: Console, summary: dict[str, Any]) -> None:
    """Summary figures, then one histogram table for lengths and one for the ideal hit rate."""
    table = Table(title=f"trace {summary['trace']} ({summary['format']})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("requests", f"{summary['requests']:,}"),
        ("duration", f"{summary['duration_s']:,.1f} s"),
        ("rate", _num(summary["rate_rps"], ",.3f") + " req/s"),
        ("inter-arrival CV (1 = Poisson)", _num(summary["interarrival_cv"], ".2f")),
        ("per-minute peak / mean", _num(summary["peak_to_mean_per_minute"], ".2f")),
        ("mean prompt", _num(summary["input_tokens_mean"], ",.0f") + " tokens"),
        ("mean output", _num(summary["output_tokens_mean"], ",.0f") + " tokens"),
        ("requests with block hashes", f"{summary['requests_with_hashes']:,}"),
        ("prefix hit, unbounded cache (token-weighted)", _num(summary["ideal_hit_rate_token_weighted"], ".1%")),
        ("hit vs prompt length correlation", _num(summary["hit_vs_prompt_length_correlation"], "+.2f")),
        ("unique blocks", f"{summary['unique_blocks']:,}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    lengths = Table(title="tokens per request")
    for header in ("from", "prompts", "outputs"):
        lengths.add_column(header, justify="right")
    bins = summary["length_bins_tokens"]
    for i, low in enumerate(bins):
        prompts, outputs = summary["input_tokens_histogram"][i], summary["output_tokens_histogram"][i]
        if prompts or outputs:
            lengths.add_row(f"{low:,}", f"{prompts:,}", f"{outputs:,}")
    console.print(lengths)
    if summary["requests_with_hashes"]:
        hits = Table(title="prefix hit per request, unbounded cache")
        hits.add_column("hit rate", justify="right")
        hits.add_column("requests", justify="right")
        edges = summary["hit_bins"]
        for i, count in enumerate(summary["ideal_hit_histogram"]):
            hits.add_row(f"{edges[i]:.0%}-{edges[i + 1]:.0%}", f"{count:,}")
        console.print(hits)


def size_label(text: str) -> str:
    """A size as the user wrote it, with a space before its unit: `10GB` -> `10 GB`."""
    match = re.fullmatch(r"\s*([0-9.eE+-]*[0-9.])\s*(\S*)\s*", text)
    return f"{match[1]} {match[2]}".strip() if match else text


def curve_chart(data: dict[str, Any]) -> Any:
    """Hit rate against the capacity in tokens on a log axis, ticked with the sizes asked for,
    token- and request-weighted."""

    points = sorted(data["points"], key=lambda p: p["capacity_tokens"])
    x = np.array([float(max(p["capacity_tokens"], 1)) for p in points])
    return Chart(
        title=f"prefix hit rate against cache capacity ({data['eviction']}, {data['instances']} cache(s))",
        x=x,
        series=[
            Series("token-weighted", np.array([p["hit_token_weighted"] for p in points])),
            Series("request-weighted", np.array([p["hit_request_weighted"] for p in points])),
        ],
        x_label="cache capacity (log scale)",
        y_label="hit rate",
        x_log=True,
        x_ticks=tuple((float(max(p["capacity_tokens"], 1)), size_label(p["capacity"])) for p in points),
        y_percent=True,
    )


def print_curve(console: Console, data: dict[str, Any]) -> None:
    """The curve as a table, then as a terminal chart."""

    table = Table(title=f"prefix hit rate against cache capacity, {data['eviction']}, {data['instances']} cache(s)")
    for header in ("capacity", "tokens", "hit (tokens)", "hit (requests)"):
        table.add_column(header, justify="right")
    for p in data["points"]:
        table.add_row(
            p["capacity"],
            f"{p['capacity_tokens']:,}",
            f"{p['hit_token_weighted']:.1%}",
            f"{p['hit_request_weighted']:.1%}",
        )
    console.print(table)
    if len(data["points"]) > 1:
        console.print(terminal(curve_chart(data), width=min(60, max(console.width - 20, 20))), markup=False)


def print_cache_plan(console: Console, data: dict[str, Any]) -> None:
    """One row per capacity: hit, best architecture, GPU-and-line cost, cache cost, total, BCR,
    marginal value; then the capacity to buy."""
    table = Table(
        title=f"prefix cache for {data['trace']} on {data['workload']} at ${data['usd_per_gb_month']:g}/GB-month"
    )
    for header in ("cache", "hit", "best", "GPUs+lines $/h", "cache $/h", "total $/h", "BCR req/$", "value"):
        table.add_column(header, justify="left" if header in ("cache", "best") else "right")
    for point in data["points"]:
        table.add_row(
            point["capacity"],
            _num(point["hit_token_weighted"], ".1%"),
            point["architecture"] or "none",
            _num(point["gpu_and_line_usd_per_hour"], ",.2f"),
            _num(point["cache_usd_per_hour"], ",.2f"),
            _num(point["total_usd_per_hour"], ",.2f"),
            _num(point["bcr"], ",.1f"),
            _num(point["marginal_value"], ".2f"),
        )
    console.print(table)
    best = data["best_capacity"]
    console.print(
        "no capacity gives a feasible plan"
        if best is None
        else "buy no prefix cache: the plan without one is the best"
        if _is_zero(best)
        else f"buy {best} of prefix cache",
        highlight=False,
    )
    console.print(
        "value: GPU-and-line $/h saved per $/h of cache added since the row above (above 1, the step pays)",
        highlight=False,
    )


def print_tiers(console: Console, data: dict[str, Any]) -> None:
    """Each tier's share of prompt tokens served, then the load time it cost per request."""
    tiered = data["tiered"]
    table = Table(title=f"tiered prefix cache (exclusive LRU chain) for {data['trace']}")
    for header in ("tier", "capacity", "read", "share of prompt tokens"):
        table.add_column(header, justify="left" if header == "tier" else "right")
    for tier in tiered["tiers"]:
        bandwidth = tier["read_bytes_per_s"]
        table.add_row(
            tier["tier"],
            tier["capacity"],
            "-" if bandwidth is None else f"{bandwidth / 1e9:,.1f} GB/s",
            f"{tier['hit_share_of_prompt_tokens']:.1%}",
        )
    console.print(table)
    console.print(
        f"hit {tiered['hit_token_weighted']:.1%} of prompt tokens over {tiered['requests']:,} requests; load time "
        f"per request: mean {tiered['load_s_mean'] * 1e3:,.1f} ms, p99 {tiered['load_s_p99'] * 1e3:,.1f} ms, "
        f"max {tiered['load_s_max'] * 1e3:,.1f} ms",
        highlight=False,
    )


def _is_zero(capacity: str) -> bool:
    """Whether a capacity as written (`0`, `0GB`, `0 tokens`) is none at all, read as the flag
    that took it reads it (`pddplan.support.units.parse_size`)."""
    size = parse_size(capacity, "capacity")
    return (size.size_bytes or 0.0) == 0.0 and (size.tokens or 0.0) == 0.0
