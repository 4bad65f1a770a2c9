"""Terminal views of one deployment: a drawing of the datacenters and the figures that matter."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from pddplan import architectures
from pddplan.evaluate.outputs import Figures
from pddplan.scenarios.describe import layout_label, scenario_roles, scenario_wan
from pddplan.scenarios.scenario import Scenario


def parallel_label(role: dict[str, Any]) -> str:
    """`layout_label` of a role given as a plain dict (see `scenario_roles`)."""
    return layout_label(role["tp"], role.get("expert_parallel"), bool(role.get("tp_attention")), role.get("pp", 1))


def _role_line(name: str, role: dict[str, Any]) -> str:
    gpus = role["count"] * role["tp"] * role.get("pp", 1)
    share = f", {role['share']:.0%} of requests" if "share" in role else ""
    return f"{name} {role['count']} x {role['gpu']} ({parallel_label(role)}) = {gpus} GPUs{share}"


def drawing(
    roles: dict[str, dict[str, Any]], wan: dict[str, Any] | None, architecture: str, width: int | None = None
) -> str:
    """A small picture: each datacenter as a box with its roles, and the line between them.

    +- dc-a -----------------+            +- dc-b ------------------+
    | prefill 2 x gpu-a x16  |==100 Gbps==| decode  4 x gpu-b x8    |
    | relay   1 x gpu-a x16  |  30 ms RTT |                         |
    +------------------------+            +-------------------------+

    When that is wider than `width` columns, the datacenters are stacked, the line between them.
    """
    by_dc: dict[str, list[str]] = {}
    for name, role in roles.items():
        label = architectures.get(architecture).role_label(name)
        if role.get("relay_on_prefill"):  # the relay decodes in the prefill instances' steps
            label = "P+RLD"
        label = f"{label:<3}"
        by_dc.setdefault(role["datacenter"], []).append(_role_line(label, role))
    boxes = []
    for dc, lines in by_dc.items():
        box_width = max(max(len(line) for line in lines), len(dc) + 3) + 4
        top = f"+- {dc} " + "-" * (box_width - len(dc) - 5) + "+"
        body = [f"| {line:<{box_width - 4}} |" for line in lines]
        bottom = "+" + "-" * (box_width - 2) + "+"
        boxes.append([top, *body, bottom])
    if len(boxes) == 1:
        return "\n".join(boxes[0])
    left, right = boxes[0], boxes[1]
    link_top = f"=={wan['gbps']:g} Gbps==" if wan else "   (no line)   "
    link_mid = f"{wan['lines']} line(s), RTT {wan['rtt_ms']:g} ms" if wan else ""
    span = max(len(link_top), len(link_mid)) + 2
    if width is not None and len(left[0]) + span + len(right[0]) > width:
        link = f"   || {wan['gbps']:g} Gbps, {link_mid}" if wan else "   || (no line)"
        return "\n".join([*left, link, *right])
    height = max(len(left), len(right))
    left = left + [" " * len(left[0])] * (height - len(left))
    right = right + [" " * len(right[0])] * (height - len(right))
    rows = []
    for i in range(height):
        middle = link_top.center(span, "=") if i == 1 else (link_mid.center(span) if i == 2 else " " * span)
        rows.append(left[i] + middle + right[i])
    return "\n".join(rows)


def _s(value: float) -> str:
    return "inf" if not math.isfinite(value) else f"{value:,.2f} s"


def print_figures(console: Console, scenario: Scenario, result: Figures, title: str) -> None:
    """Drawing, headline figures, pipelines and stage loads of one evaluated or simulated plan."""
    figures = result.json_data()
    console.print(
        Panel(
            drawing(scenario_roles(scenario), scenario_wan(scenario), scenario.plan.architecture, console.width - 4),
            title=f"{scenario.plan.name}: {scenario.plan.architecture}",
            expand=False,
        )
    )
    sla = scenario.workload.sla
    verdict = (
        "[green]SLA met[/green]"
        if figures["sla_met"]
        else "[red]SLA missed: " + "; ".join(figures["sla_violations"]) + "[/red]"
    )
    console.print(f"{title}: {verdict}")
    table = Table(show_header=True)
    for header in ("figure", "value", "target"):
        table.add_column(header, justify="right" if header != "figure" else "left")
    targets = {t.key: t.target_s for t in sla.targets()}
    for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s"):
        target = targets.get(key)
        table.add_row(
            key[:4].upper() + " " + key[5:8].upper(), _s(figures[key]), "" if target is None else f"{target:g} s"
        )
    for key in ("tpot_p50_s", "tpot_p90_s", "tpot_p99_s"):
        target = targets.get(key)
        name = key[:4].upper() + " " + key[5:8].upper()
        table.add_row(name, f"{figures[key] * 1e3:,.1f} ms", "" if target is None else f"{target * 1e3:g} ms")
    table.add_row("worst inter-token gap P99", f"{figures['worst_gap_p99_s'] * 1e3:,.0f} ms", "")
    table.add_row("goodput", f"{figures['goodput_rps']:,.3f} req/s", f"{figures['rate_rps']:,.3f} offered")
    table.add_row("cost", f"${figures['cost_usd_per_hour']:,.2f} /h", "")
    table.add_row("revenue", f"${figures['revenue_usd_per_hour']:,.2f} /h", "")
    table.add_row("BCR", f"{figures['bcr']:,.2f} req/$", "")
    table.add_row("relay share of output tokens", f"{figures['rld_token_share']:.1%}", "")
    table.add_row("singular traffic (finished by relay)", f"{figures['singular_share']:.1%}", "")
    table.add_row("WAN utilization", f"{figures['link_utilization']:.1%}", "")
    table.add_row("WAN bytes per request", f"{figures['wan_bytes_per_request'] / 1e6:,.1f} MB", "")
    console.print(table)
    pipelines = Table(title="per pipeline")
    for header in ("pipeline", "share", "TTFT P50", "TTFT P90", "TTFT P99"):
        pipelines.add_column(header, justify="right" if header != "pipeline" else "left")
    for p in figures["pipelines"]:
        name = p["pipeline"]
        pipelines.add_row(name, f"{p['share']:.1%}", _s(p["ttft_p50_s"]), _s(p["ttft_p90_s"]), _s(p["ttft_p99_s"]))
    console.print(pipelines)
    for note in figures.get("notes", []):
        console.print(f"note: {note}", highlight=False)
    caches = figures.get("caches")
    if caches:
        console.print(cache_table(caches))
        for cache in caches:
            for note in cache["notes"]:
                console.print(f"note: {note}", highlight=False)
    capacity = figures.get("capacity")
    if capacity:
        console.print(
            f"capacity within the SLA: {capacity['max_rate_rps']:,.3f} req/s (bottleneck: {capacity['bottleneck']}); "
            f"fluid economics: {capacity['throughput_per_gpu_hour']:,.1f} req per GPU-hour, "
            f"${capacity['cost_per_request_usd']:.5f} per request, revenue/cost {capacity['revenue_per_cost']:.3f}"
        )
    stages = figures.get("stages") or figures.get("utilization")
    if stages:
        loads = Table(title="stage load")
        loads.add_column("stage")
        loads.add_column("utilization", justify="right")
        for name, value in stages.items():
            utilization = value["utilization"] if isinstance(value, dict) else value
            loads.add_row(name, f"{utilization:.1%}")
        console.print(loads)


def cache_table(caches: list[dict[str, Any]]) -> Table:
    """Each prefix cache: what it holds, where (HBM, host memory, NVMe; lower tiers come with the
    servers), the share of next turns that find their prefix, and a mean hit's load time."""
    table = Table(title="prefix caches (host memory and NVMe come with the servers)")
    for header in ("cache", "holds", "HBM", "below HBM", "found", "hit load"):
        table.add_column(header, justify="left" if header == "cache" else "right")
    for cache in caches:
        below = ", ".join(f"{t['tier']} {t['gb']:,.0f} GB" for t in cache["tiers"]) or "-"
        table.add_row(
            {"prefill": "prefill", "split": "prefill (split)"}.get(cache["cache"], "radix (MD)"),
            f"{cache['holds_gb']:,.0f} GB",
            f"{cache['hbm_gb']:,.0f} GB",
            below,
            f"{cache['found_share']:.1%}",
            f"{cache['mean_hit_load_s'] * 1e3:,.0f} ms",
        )
    return table


WHATIF_ROWS = (
    ("rate req/s", "rate_rps", ",.3f", 1.0),
    ("goodput req/s", "goodput_rps", ",.3f", 1.0),
    ("TTFT P50 s", "ttft_p50_s", ",.2f", 1.0),
    ("TTFT P90 s", "ttft_p90_s", ",.2f", 1.0),
    ("TTFT P99 s", "ttft_p99_s", ",.2f", 1.0),
    ("TPOT P90 ms", "tpot_p90_s", ",.1f", 1e3),
    ("relay token share", "rld_token_share", ".1%", 1.0),
    ("cost $/h", "cost_usd_per_hour", ",.2f", 1.0),
    ("BCR req/$", "bcr", ",.1f", 1.0),
)


def print_whatif(console: Console, data: dict[str, Any]) -> None:
    """Before and after, closed form (and simulated), with the degraded mode in words."""

    columns = [("planned", data["before"]), ("after", data["after"])]
    if data["simulated_before"] is not None:
        columns += [("planned, sim", data["simulated_before"]), ("after, sim", data["simulated_after"])]
    table = Table(title=f"what if: {data['change']}")
    table.add_column("figure")
    for name, _ in columns:
        table.add_column(name, justify="right")

    def cell(figures: dict[str, Any] | None, key: str, fmt: str, scale: float) -> str:
        if figures is None:
            return "shed" if key not in ("cost_usd_per_hour",) else "-"
        value = figures.get(key)
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "-"
        return format(value * scale, fmt)

    for label, key, fmt, scale in WHATIF_ROWS:
        table.add_row(label, *(cell(figures, key, fmt, scale) for _, figures in columns))
    table.add_row("SLA met", *("-" if f is None else ("yes" if f.get("sla_met") else "no") for _, f in columns))
    console.print(table)
    console.print(f"mode: {data['mode']}", highlight=False, markup=False)
    if data.get("transient"):
        _print_transient(console, data["transient"])


def _print_transient(console: Console, t: dict[str, Any]) -> None:
    """The line failure's transient: in-flight requests, TTFT until it settles, settling time."""

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s"

    table = Table(title=f"transient: the line fails at {t['at_s']:g} s ({t['capacity_share_left']:.0%} capacity left)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("requests in flight then", f"{t['in_flight']:,}")
    table.add_row(
        "their TTFT, median / worst", f"{seconds(t['in_flight_ttft_p50_s'])} / {seconds(t['in_flight_ttft_max_s'])}"
    )
    table.add_row("TTFT P90 before", seconds(t["ttft_p90_before_s"]))
    table.add_row("TTFT P90 until settled", seconds(t["ttft_p90_until_settled_s"]))
    table.add_row(
        "transfers in flight, peak / degraded mean",
        f"{t['transfers_in_flight_peak']:,} / {t['transfers_in_flight_degraded_mean']:.1f}",
    )
    table.add_row("settled after", "never (in the span)" if t["settle_s"] is None else f"{t['settle_s']:.1f} s")
    console.print(table)


def print_survival(console: Console, data: dict[str, Any]) -> None:
    """What N+1 added, its price, and how the grown plan runs after each failure."""
    added = ", ".join(data["added"]) or "nothing: the plan already survives"
    console.print(
        f"added: {added}\ncost ${data['original_cost_usd_per_hour']:,.2f}/h -> ${data['cost_usd_per_hour']:,.2f}/h "
        f"(price of survival {data['price_of_survival']:+.1%})",
        highlight=False,
        markup=False,
    )
    sla = "" if data.get("degraded_sla", 1.0) == 1.0 else f" (within {data['degraded_sla']:g}x the SLA's targets)"
    table = Table(title=f"after each single failure, the grown plan{sla}")
    table.add_column("failure")
    table.add_column("runs as")
    for item in data["failures"]:
        table.add_row(item["failure"], item["mode"])
    console.print(table)
