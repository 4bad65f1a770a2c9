"""The human view of `pddplan trace import`: the summary, and the length and hit histograms."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


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
