"""The terminal view of `pddplan optimize`: the best plan at a glance, then every architecture."""

from __future__ import annotations

import math
from typing import Any, Literal

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from pddplan.optimize.command import OptimizeOutcome
from pddplan.optimize.outputs import Disaggregation
from pddplan.optimize.run import OptimizeReport, architecture_output
from pddplan.optimize.search import ArchitectureResult
from pddplan.report import output, robustness_report
from pddplan.report.plan_tables import drawing, parallel_label
from pddplan.specs.workload import Sla


def sla_text(sla: Sla) -> str:
    """`TTFT P90 10 s, P99 20 s; TPOT P90 100 ms`: every target, grouped by metric."""
    parts = []
    metrics: tuple[tuple[Literal["ttft", "tpot"], str, float], ...] = (("ttft", "s", 1.0), ("tpot", "ms", 1e3))
    for metric, unit, scale in metrics:
        targets = sla.targets(metric)
        if targets:
            parts.append(
                f"{metric.upper()} " + ", ".join(f"{t.name[5:]} {t.target_s * scale:g} {unit}" for t in targets)
            )
    return "; ".join(parts)


def _s(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if not math.isfinite(value) else f"{value:,.2f} s"


def _pct(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:+.1%}"


def widths_note(report: OptimizeReport) -> str:
    """Which instance widths were searched, and whether the workload narrowed them."""
    spans = "; ".join(
        f"{gpu} {widths[0]}-{widths[-1]}" if len(widths) > 2 else f"{gpu} {', '.join(map(str, widths))}"
        for gpu, widths in report.widths.items()
    )
    why = (
        "narrowed by the workload's deployment.tp_options"
        if report.widths_narrowed
        else "the default: powers of two up to 8 scale-up domains; deployment.tp_options narrows them"
    )
    return f"instance widths tried (GPUs per instance): {spans} ({why})"


def figures_of(result: ArchitectureResult) -> dict[str, Any]:
    """The JSON view of one architecture's result (`architecture_output`), as the tables read it."""
    return architecture_output(result).json_data()


def print_report(console: Console, report: OptimizeReport) -> None:
    """Summary box with the drawing, side-by-side table, PDD's gains, and infeasibility reasons."""
    figures = [figures_of(r) for r in report.results]
    best = report.best
    workload = report.workload
    if best is not None and best.scenario is not None:
        f = figures_of(best)
        headline = (
            f"best: [bold]{best.name}[/bold]  ${f['cost_usd_per_hour']:,.2f}/h  BCR {f['bcr']:,.2f} req/$  "
            f"goodput {f['goodput_rps']:,.3f} req/s  TTFT P90 {_s(f['ttft_p90_s'])} / P99 {_s(f['ttft_p99_s'])}"
            f"{' (verified by simulation)' if f['verified'] else ''}"
        )
        picture = drawing(
            f["roles"],
            {
                "gbps": f["wan_gbps"],
                "lines": sum(x["count"] for x in f["wan_lines"]),
                "rtt_ms": best.scenario.link.rtt_s * 1e3,
            }
            if best.scenario.link
            else None,
            best.name,
            console.width - 4,  # the panel's borders and padding
        )
        console.print(Panel(f"{headline}\n\n{picture}", title=f"pddplan optimize {workload.name}", expand=False))
    else:
        console.print(
            Panel("[red]no architecture meets the constraints[/red]", title=f"pddplan optimize {workload.name}")
        )
    table = Table(title=f"architectures under the same SLA ({sla_text(workload.sla)}) and prices")
    for header in ("", *[f["name"] for f in figures]):
        table.add_column(header, justify="right" if header else "left")

    def row(label: str, render: Any) -> None:
        table.add_row(label, *[render(f) for f in figures])

    row("feasible", lambda f: "yes" if f["feasible"] else "[red]no[/red]")
    row("GPUs", lambda f: ", ".join(f"{n} x {gpu}" for gpu, n in f["gpus"].items()) or "-")
    split = any("split" in f["roles"] for f in figures)  # co-located pools on two GPU types
    roles = (
        ("prefill", "P (P+D)"),
        *((("split", "2nd P+D"),) if split else ()),
        ("relay", "RLD"),
        ("decode", "D / MD"),
    )
    for role, label in roles:
        row(
            label,
            lambda f, role=role: (
                f"{f['roles'][role]['count']} x {f['roles'][role]['gpu']} {parallel_label(f['roles'][role])} "
                f"@{f['roles'][role]['datacenter']}"
                + (f" {f['roles'][role]['share']:.0%}" if "share" in f["roles"][role] else "")
                if role in f["roles"]
                else ("on P" if role == "relay" and f["roles"].get("prefill", {}).get("relay_on_prefill") else "-")
            ),
        )
    row(
        "WAN",
        lambda f: (
            f"{f['wan_gbps']:g} Gbps (" + ", ".join(f"{x['count']} x {x['option']}" for x in f["wan_lines"]) + ")"
            if f["wan_lines"]
            else "-"
        ),
    )
    row("cost $/h", lambda f: f"{f['cost_usd_per_hour']:,.2f}" if f["cost_usd_per_hour"] is not None else "-")
    row("goodput req/s", lambda f: f"{f['goodput_rps']:,.3f}")
    row("BCR req/$", lambda f: f"{f['bcr']:,.2f}" if f["bcr"] is not None else "-")
    row("TTFT P50", lambda f: _s(f["ttft_p50_s"]))
    row("TTFT P90", lambda f: _s(f["ttft_p90_s"]))
    row("TTFT P99", lambda f: _s(f["ttft_p99_s"]))
    row("relay token share", lambda f: f"{f['rld_token_share']:.1%}" if "rld_token_share" in f else "-")
    row(
        "routing / handoff",
        lambda f: f"{f['routing_rule']} / {f['handoff_mode']}" if f.get("routing_rule") else "-",
    )
    row("verified", lambda f: _verified(f) if f["cost_usd_per_hour"] is not None else "-")
    console.print(table)
    comparisons = comparison_lines(report)
    if comparisons:
        console.print("\n".join(comparisons), highlight=False, markup=False)
    for result in report.results:
        for item in result.infeasibility:
            console.print(f"[yellow]{result.name}[/yellow]: {item['message']}")
    for f in figures:
        for note in (f.get("evaluated") or {}).get("notes", []):
            console.print(f"{f['name']}: {note}", highlight=False)
    console.print(widths_note(report))
    listed = [f for f in figures if f.get("top")]
    for f in listed:
        print_top(console, f, report.options.mode)
    if listed:
        console.print(top_note(report.options.mode, report.options.top or 0), markup=False, highlight=False)


#: a frontier's words in the `--top` table, by the sets a plan is on
_FRONTIER_WORDS = {("ttft_p99_s",): "TTFT", ("tpot_p90_s",): "TPOT", ("ttft_p99_s", "tpot_p90_s"): "both"}
#: what `--top` ranks plans by, per mode (the search's score, then its ties: `search._key`)
RANKED_BY = {"bcr": "BCR (ties: TTFT P99)", "rate": "cost (ties: TTFT P99)", "budget": "goodput (ties: cost)"}


def top_note(mode: str, top: int) -> str:
    """What the `--top` tables show, in words."""
    return (
        f"--top {top}: one plan per deployment (with its best routing rule and handoff mode), ranked by "
        f"{RANKED_BY.get(mode, mode)} in closed form; #1 is the chosen plan, the only one "
        f"simulated; a plan ranked below {top} is shown when on the frontier: no other plan is as cheap and "
        "as fast (TTFT P99 or TPOT P90) with one of the two better."
    )


def print_top(console: Console, figures: dict[str, Any], mode: str) -> None:
    """`--top`: one architecture's best plans and the plans on its cost frontier (those ranked
    below the best N too), in closed form, then each plan's deployment in words."""
    frontier = {p["rank"]: p for p in figures["frontier"]}
    rows = {p["rank"]: p for p in figures["top"]} | frontier
    measure = ("goodput req/s", "goodput_rps", ",.3f") if mode == "budget" else ("BCR req/$", "bcr", ",.2f")
    table = Table(
        title=f"{figures['name']}: {len(figures['top'])} best of {figures['plans_compared']} plans, and the cost "
        "frontier (closed form)"
    )
    for header in ("#", "$/h", measure[0], "TTFT P90 s", "TTFT P99 s", "TPOT P90 ms", "frontier"):
        table.add_column(header, justify="left" if header in ("#", "frontier") else "right")
    for rank, p in sorted(rows.items()):
        on = tuple(frontier[rank]["on"]) if rank in frontier else ()
        table.add_row(
            str(rank),
            f"{p['cost_usd_per_hour']:,.2f}",
            format(p[measure[1]], measure[2]),
            _seconds(p["ttft_p90_s"]),
            _seconds(p["ttft_p99_s"]),
            _seconds(p["tpot_p90_s"], 1e3, ".1f"),
            _FRONTIER_WORDS.get(on, "-"),
        )
    console.print(table)
    for rank, p in sorted(rows.items()):
        checked = "verified by simulation" if p["checked"] == "verified" else "closed form"
        console.print(f"#{rank} ({checked}, {p['found_by']}): {deployment_text(p)}", markup=False, highlight=False)


def _seconds(value: float | None, scale: float = 1.0, fmt: str = ",.2f") -> str:
    return "inf" if value is None or not math.isfinite(value) else format(value * scale, fmt)


def deployment_text(plan: dict[str, Any]) -> str:
    """`prefill 3 x h100-sxm TP4 @dc-a, decode 2 x h100-sxm TP4 @dc-a; hit < 0.95 / adaptive`."""
    roles = ", ".join(
        f"{name} {role['count']} x {role['gpu']} {parallel_label(role)} @{role['datacenter']}"
        + (" (+ relay)" if role.get("relay_on_prefill") else "")
        for name, role in plan["roles"].items()
    )
    wan = ", ".join(f"{x['count']} x {x['option']}" for x in plan["wan_lines"])
    rule = f"{plan['routing_rule']} / {plan['handoff_mode']}" if plan["routing_rule"] else ""
    return "; ".join(part for part in (roles, wan, rule) if part)


def comparison_lines(report: OptimizeReport) -> list[str]:
    """PDD against each baseline with a plan (cost, BCR, TTFT P90/P99 changes), then whether to
    disaggregate at all (when a co-located and a disaggregated plan both exist)."""
    lines = []
    for name, g in report.gains().items():
        note = "" if g.baseline_feasible else " (baseline misses the SLA)"
        lines.append(
            f"PDD vs {name}{note}: cost {_pct(g.cost_change)}, BCR {_pct(g.bcr_change)}, "
            f"TTFT P90 {_pct(g.ttft_p90_change)}, P99 {_pct(g.ttft_p99_change)}"
        )
    split = report.disaggregation()
    if split is not None:
        lines.append(_disaggregation_line(split))
    return lines


def verdict_lines(report: OptimizeReport) -> list[str]:
    """The verdict in words, first the winner and its figures, then `comparison_lines`."""
    best = report.best
    if best is None or best.scenario is None:
        return ["no architecture meets the constraints", *comparison_lines(report)]
    f = figures_of(best)
    mode = {"bcr": "the highest BCR", "rate": "the lowest cost", "budget": "the most goodput"}[report.options.mode]
    headline = (
        f"{best.name} wins ({mode}): ${f['cost_usd_per_hour']:,.2f}/h, BCR {f['bcr']:,.2f} req/$, goodput "
        f"{f['goodput_rps']:,.3f} req/s, TTFT P90 {_s(f['ttft_p90_s'])} / P99 {_s(f['ttft_p99_s'])}"
        f"{' (verified by simulation)' if f['verified'] else ''}"
    )
    return [headline, *comparison_lines(report)]


def _disaggregation_line(split: Disaggregation) -> str:
    """`disaggregate? no: co-located agg wins; the best disaggregated plan (pdd) costs 0.6% more, BCR -0.6%`."""
    colocated_wins = split.winner == split.colocated
    verdict = f"no: co-located {split.colocated} wins" if colocated_wins else f"yes: {split.winner} wins"
    return (
        f"disaggregate? {verdict}; the best disaggregated plan ({split.disaggregated}) costs "
        f"{_pct(split.cost_change)} against co-located {split.colocated}, BCR {_pct(split.bcr_change)}"
    )


def _verified(figures: dict[str, Any]) -> str:
    """`yes, 2,500 req` (requests the verdict rests on; sequential stopping may cut the run), with
    the rounds when the optimizer had to tighten and re-solve."""
    if not figures.get("verified"):
        return "no"
    simulated = figures.get("simulated") or {}
    rounds = figures.get("verification_rounds", 1)
    text = f"yes, {simulated.get('requests', 0):,} req"
    return text + (f", {rounds} rounds" if rounds > 1 else "")


def print_robust(console: Console, results: list[dict[str, Any]]) -> None:
    """`--robust`: per architecture, the purchase that meets every required scenario, its price
    over the steady plan, and its figures in each scenario."""
    table = Table(title="robust over the day's scenarios: one purchase, every required scenario met")
    headers = ("architecture", "cost $/h", "steady $/h", "price", "at bound", "idle free $/h", "weighted BCR")
    for header in headers:
        table.add_column(header, justify="left" if header == "architecture" else "right")
    for r in results:
        if not r["feasible"]:
            table.add_row(r["architecture"], "-", _money(r["steady_cost_usd_per_hour"]), "-", "-", "-", "-")
            continue
        table.add_row(
            r["architecture"],
            _money(r["cost_usd_per_hour"]),
            _money(r["steady_cost_usd_per_hour"]),
            "-" if r["price_of_robustness"] is None else f"{r['price_of_robustness']:+.1%}",
            "yes" if r["at_lower_bound"] else "no",
            _money(r["elastic_cost_usd_per_hour"]),
            "-" if r["time_weighted_bcr"] is None else f"{r['time_weighted_bcr']:,.1f}",
        )
    console.print(table)
    console.print(
        "idle free: the day's mean $/h when the instances a scenario leaves idle cost nothing "
        "(rented by the hour and released)",
        highlight=False,
        markup=False,
    )
    scenarios = Table(title="the robust plans in each scenario (TTFT P90 / P99 s, goodput req/s)")
    scenarios.add_column("scenario")
    feasible = [r for r in results if r["feasible"]]
    for r in feasible:
        scenarios.add_column(r["architecture"], justify="right")
    if feasible:
        for i, s in enumerate(feasible[0]["scenarios"]):
            label = f"{s['name']} ({s['hours_per_day']:g} h{'' if s['required'] else ', optional'})"
            cells = []
            for r in feasible:
                t = r["scenarios"][i]
                if t["ttft_p90_s"] is None:
                    cells.append("no plan fits")
                else:
                    cells.append(f"{t['ttft_p90_s']:.2f} / {t['ttft_p99_s']:.2f}, {t['goodput_rps']:.2f}")
            scenarios.add_row(label, *cells)
        console.print(scenarios)
        console.print(_operating_table(feasible))
    for r in results:
        if r["note"]:
            console.print(f"{r['architecture']}: {r['note']}", highlight=False, markup=False)


def _operating_table(feasible: list[dict[str, Any]]) -> Table:
    """Each scenario's operating decisions on the robust purchase: rule, handoff mode, served
    rate and the GPUs it keeps busy."""
    table = Table(title="operating decisions per scenario (the purchase stays; active: GPUs kept busy)")
    for header in ("scenario", "arch", "relay rule", "handoff", "req/s", "active", "$/h"):
        number = header in ("req/s", "active", "$/h")
        table.add_column(header, justify="right" if number else "left", no_wrap=header not in ("scenario", "arch"))
    for i, s in enumerate(feasible[0]["scenarios"]):
        for r in feasible:
            t = r["scenarios"][i]
            table.add_row(
                s["name"],
                r["architecture"],
                t["routing_rule"] or "-",
                t["handoff_mode"] or "-",
                f"{t['served_rps']:.2f}",
                "-" if t["active_gpus"] is None else str(t["active_gpus"]),
                _money(t["active_cost_usd_per_hour"]),
            )
    return table


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def print_survival_summary(console: Console, rows: list[dict[str, Any]]) -> None:
    """`--survive`: per architecture, its plan's cost before and after N+1, and what was added."""
    table = Table(title="N+1: each plan grown to survive any single failure")
    for header in ("architecture", "plan $/h", "N+1 $/h", "price", "added"):
        table.add_column(header, justify="left" if header in ("architecture", "added") else "right")
    for row in rows:
        if not row["feasible"]:
            table.add_row(row["architecture"], "-", "-", "-", row["reason"])
            continue
        table.add_row(
            row["architecture"],
            _money(row["original_cost_usd_per_hour"]),
            _money(row["cost_usd_per_hour"]),
            f"{row['price_of_survival']:+.1%}",
            ", ".join(row["added"]) or "nothing",
        )
    console.print(table)


def show(outcome: OptimizeOutcome, json_out: bool, written: str | None = None) -> None:
    """`optimize`'s result: JSON, or the tables of the report and of each further analysis;
    `written`, the words saying which plan `--output` wrote."""
    report, moves, day, survival = outcome.report, outcome.robustness, outcome.day, outcome.survival
    if json_out:
        output.emit_json(outcome.to_output(written))
        return
    console = output.results()
    print_report(console, report)
    if moves is not None:
        robustness_report.print_report(console, moves)
    if day is not None:
        print_robust(console, [r.to_output().json_data() for r in day])
    if survival is not None:
        print_survival_summary(console, [s.json_data() for s in survival])
    if written is not None and (day is not None or survival is not None):
        console.print(f"plan for --output: {written}", highlight=False)
