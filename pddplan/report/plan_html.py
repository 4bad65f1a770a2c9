"""The HTML plan report (`optimize|evaluate|simulate --report FILE`): one self-contained offline page.

Sections, each an element with an id (the browser test looks for them): the verdict in words
(`verdict`, optimize only), the deployment as SVG (`deployment`: side by side on a wide screen,
stacked on a narrow one), the architectures side by side (`architectures`, optimize only), every
feasible architecture's simulated TTFT on one chart (`ttft-by-architecture`) and the others'
deployments folded away (`other-deployments`, both optimize only), the plan's figures against
the SLA (`figures`), the cost by role and line (`costs`), TTFT and TPOT CDFs from a simulation on
a log time axis, a line per pipeline when there are several, the SLA targets marked and labelled
(`ttft-cdf`, `tpot-cdf`), BCR against +-20% moves of the prices, hit rate and rate
(`sensitivity`), and the inputs it used, folded away (`inputs`). No script, no external resource:
values show on hover through SVG <title> elements. It reads on a phone: see `pddplan.report.html_page`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pddplan.analyses.sensitivity import HIGHEST_MEAN_HIT, Sensitivity
from pddplan.report.charts import Chart, Series, nice_floor, svg, text_width
from pddplan.report.html_page import page, scrolling
from pddplan.report.optimize_report import deployment_text
from pddplan.scenarios.describe import layout_label, scenario_roles, scenario_wan
from pddplan.scenarios.scenario import Scenario
from pddplan.specs.workload import SLA_QUANTILES

CDF_POINTS = 200
# The deployment is drawn twice, side by side and stacked; the page shows the one that fits.
STYLE = (
    ".stacked{display:none}@media (max-width:700px){.side-by-side{display:none}.stacked{display:block}}"
    ".bar{display:inline-block;height:.8em;background:#4a78a8}.miss{color:#b00}"
)
BOX_FONT_PX = 13
LINK_FONT_PX = 11


@dataclass(frozen=True)
class PlanReport:
    """What the page shows: a plan's scenario and figures (closed form or simulated), the simulated
    per-request TTFT, TPOT and pipeline, the sensitivity curves, the architectures compared
    (optimize), and the input files' text."""

    title: str
    scenario: Scenario
    figures: dict[str, Any]
    figures_source: str
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    simulation_source: str
    sensitivity: Sensitivity
    inputs: dict[str, str]
    architectures: list[dict[str, Any]] = field(default_factory=list)
    pipelines: np.ndarray = field(default_factory=lambda: np.array([], dtype=str))
    verdict: list[str] = field(default_factory=list)  # optimize: the verdict in words, winner first
    others: list[OtherPlan] = field(default_factory=list)  # optimize: the other architectures' plans


@dataclass(frozen=True)
class OtherPlan:
    """Another architecture's plan beside the report's: its scenario, WAN utilization and the
    simulated TTFT of its requests."""

    name: str
    scenario: Scenario
    link_utilization: float
    ttft_s: np.ndarray


def _e(text: object) -> str:
    return html.escape(str(text))


def _datacenters(scenario: Scenario) -> dict[str, list[str]]:
    """Per datacenter, one line per role placed there: label, instances, GPU, layout, GPUs."""
    by_dc: dict[str, list[str]] = {}
    for name, role in scenario_roles(scenario).items():
        label = "P+RLD" if role.get("relay_on_prefill") else scenario.architecture.role_label(name)
        layout = layout_label(role["tp"], role["expert_parallel"], role.get("tp_attention", False), role.get("pp", 1))
        gpus = role["count"] * role["tp"] * role.get("pp", 1)
        by_dc.setdefault(role["datacenter"], []).append(
            f"{label}: {role['count']} x {role['gpu']} {layout} = {gpus} GPUs"
            + (f", {role['share']:.0%} of requests" if "share" in role else "")
        )
    return by_dc


def _link_lines(scenario: Scenario, link_utilization: float) -> list[str]:
    """The line between the datacenters in a few short lines: bandwidth, the lines leased, RTT,
    utilization."""
    wan = scenario_wan(scenario)
    if wan is None or scenario.link is None:
        return ["no line"]
    leased = ", ".join(f"{count} x {option.name}" for option, count in scenario.link.leases)
    return [f"{wan['gbps']:g} Gbps", leased, f"RTT {wan['rtt_ms']:g} ms", f"{link_utilization:.0%} used"]


def _box(x: float, y: float, width: float, height: float, dc: str, lines: list[str]) -> list[str]:
    out = [
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{width:.0f}" height="{height:.0f}" rx="8" fill="#f3f7fb" '
        f'stroke="#4a78a8"/>',
        f'<text x="{x + 12:.0f}" y="{y + 22:.0f}" font-weight="bold">{_e(dc)}</text>',
    ]
    out.extend(
        f'<text x="{x + 12:.0f}" y="{y + 46 + row * 20:.0f}">{_e(text)}</text>' for row, text in enumerate(lines)
    )
    return out


def deployment_svg(scenario: Scenario, link_utilization: float, stacked: bool = False) -> str:
    """Datacenters as boxes listing their roles, joined by the line (bandwidth, lines leased, RTT,
    utilization): side by side, or `stacked` one above the other for a narrow screen. The SVG
    scales down with its container and is never drawn wider than its natural size."""
    by_dc = _datacenters(scenario)
    link = _link_lines(scenario, link_utilization)
    box_w = 24 + max(text_width(text, BOX_FONT_PX) for lines in by_dc.values() for text in [*lines, "x" * 12])
    box_h = 34 + 20 * max(len(lines) for lines in by_dc.values())
    link_w = max(text_width(text, LINK_FONT_PX) for text in link)
    joined = len(by_dc) == 2
    out: list[str] = []
    if stacked:
        gap: float = 24 + 15 * len(link) if joined else 16
        width, height = box_w + 20, 10 + len(by_dc) * box_h + (len(by_dc) - 1) * gap + 10
        for index, (dc, lines) in enumerate(by_dc.items()):
            out += _box(10, 10 + index * (box_h + gap), box_w, box_h, dc, lines)
        if joined:
            x, y0, y1 = 40, 10 + box_h, 10 + box_h + gap
            out.append(f'<line x1="{x}" x2="{x}" y1="{y0:.0f}" y2="{y1:.0f}" stroke="#c0392b" stroke-width="4"/>')
            out.extend(
                f'<text x="{x + 14}" y="{y0 + 20 + 15 * row:.0f}" font-size="{LINK_FONT_PX}">{_e(text)}</text>'
                for row, text in enumerate(link)
            )
    else:
        gap = link_w + 30 if joined else 24
        width, height = 20 + len(by_dc) * box_w + (len(by_dc) - 1) * gap, box_h + 20
        for index, (dc, lines) in enumerate(by_dc.items()):
            out += _box(10 + index * (box_w + gap), 10, box_w, box_h, dc, lines)
        if joined:
            x0, x1, y = 10 + box_w, 10 + box_w + gap, 10 + box_h / 2
            out.append(
                f'<line x1="{x0:.0f}" x2="{x1:.0f}" y1="{y:.0f}" y2="{y:.0f}" stroke="#c0392b" stroke-width="4"/>'
            )
            above = (len(link) + 1) // 2
            out.extend(
                f'<text x="{(x0 + x1) / 2:.0f}" y="{y + (row - above) * 14 + (-6 if row < above else 14):.0f}" '
                f'text-anchor="middle" font-size="{LINK_FONT_PX}">{_e(text)}</text>'
                for row, text in enumerate(link)
            )
    title = "; ".join([*(f"{dc}: {', '.join(lines)}" for dc, lines in by_dc.items()), ", ".join(link)])
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
            f'height="{height:.0f}" role="img" aria-label="{_e(title)}" font-family="sans-serif" '
            f'font-size="{BOX_FONT_PX}">',
            f"<title>{_e(title)}</title>",
            *out,
            "</svg>",
        ]
    )


def cdf_chart(
    title: str,
    values_s: np.ndarray,
    targets: Sequence[tuple[float, str]],
    pipelines: np.ndarray | None = None,
) -> Chart:
    """The empirical CDF of `values_s` (seconds) on a log time axis of CDF_POINTS x values, from
    a round value under the shortest time to the longest time or target, the targets as markers;
    with `pipelines` (one per value) naming more than one pipeline, a line per pipeline too."""
    finite = np.isfinite(values_s) & (values_s > 0)
    values = values_s[finite]
    x = _log_axis([values], targets)
    series = [Series("all requests", _share(values, x))]
    if pipelines is not None and len(pipelines) == len(values_s):
        names, counts = np.unique(pipelines[finite], return_counts=True)
        if len(names) > 1:
            series += [
                Series(f"{name} ({count / len(values):.0%})", _share(values[pipelines[finite] == name], x))
                for name, count in zip(names, counts, strict=True)
            ]
    return _cdf(title, x, series, targets)


def samples_cdf_chart(title: str, samples: dict[str, np.ndarray], targets: Sequence[tuple[float, str]]) -> Chart:
    """The empirical CDF of each named sample (seconds; the architectures side by side) on one log
    time axis, as `cdf_chart` draws one."""
    positive = {name: s[np.isfinite(s) & (s > 0)] for name, s in samples.items()}
    x = _log_axis(list(positive.values()), targets)
    return _cdf(title, x, [Series(name, _share(s, x)) for name, s in positive.items()], targets)


def _log_axis(samples: Sequence[np.ndarray], targets: Sequence[tuple[float, str]]) -> np.ndarray:
    """CDF_POINTS times, log-spaced from a round value under the shortest of `samples` (finite,
    positive) to the longest time or target."""
    pooled = np.concatenate([*samples, np.array([])])
    top = max([float(pooled.max()) if len(pooled) else 1.0, *[t for t, _ in targets]])
    low = nice_floor(float(pooled.min()) if len(pooled) else top / 100)
    return np.geomspace(low, top, CDF_POINTS)


def _share(sample: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The share of `sample` at most each x."""
    return np.asarray(np.searchsorted(np.sort(sample), x, side="right") / max(len(sample), 1))


def _cdf(title: str, x: np.ndarray, series: list[Series], targets: Sequence[tuple[float, str]]) -> Chart:
    return Chart(
        title,
        x,
        series,
        "seconds (log scale)",
        "share of requests at most x",
        list(targets),
        x_log=True,
        x_unit="s",
        y_percent=True,
    )


def _sensitivity(report: PlanReport) -> str:
    """BCR against each input's factor, and a note on the hit-rate points the model caps (a mean
    hit above HIGHEST_MEAN_HIT leaves nothing to prefill), named in the legend too."""
    sens = report.sensitivity
    mean_hit = report.scenario.workload.hit_rate.mean()
    capped = [float(f) for f in sens.factors if mean_hit * f > HIGHEST_MEAN_HIT]
    names = {name: name for name in sens.bcr}
    note = ""
    if capped and "prefix hit rate" in names:
        factors = ", ".join(f"x{f:g}" for f in capped)
        names["prefix hit rate"] = f"prefix hit rate ({factors} capped at {HIGHEST_MEAN_HIT:.1%})"
        note = (
            f'<p class="note">The workload\'s mean prefix hit is {mean_hit:.1%}: at {factors} it would pass '
            f"{HIGHEST_MEAN_HIT:.1%}, the highest mean hit the model takes (above it nothing is left to "
            f"prefill), so those points are drawn at {HIGHEST_MEAN_HIT:.1%}.</p>"
        )
    chart = Chart(
        "BCR when one input moves",
        sens.factors,
        [Series(names[name], values) for name, values in sens.bcr.items()],
        "factor on the input",
        "BCR (requests per $)",
        [(1.0, "as planned")],
        x_ticks=tuple((float(f), f"x{f:g}") for f in sens.factors),
    )
    return svg(chart) + note


def _figures_table(figures: dict[str, Any], sla: Any) -> str:
    def s(value: Any) -> str:
        return "inf" if value is None or not math.isfinite(value) else f"{value:,.3f} s"

    targets = {t.key: t.target_s for t in sla.targets()}
    quantiles = [f"{metric}_{q}_s" for metric in ("ttft", "tpot") for q in SLA_QUANTILES]
    rows = [
        *(
            (f"{key[:4].upper()} {key[5:8].upper()}", s(figures[key]), f"{targets[key]:g} s" if key in targets else "")
            for key in quantiles
        ),
        ("goodput", f"{figures['goodput_rps']:,.3f} req/s", ""),
        ("cost", f"${figures['cost_usd_per_hour']:,.2f} / h", ""),
        ("BCR", f"{figures['bcr']:,.2f} req/$", ""),
        ("relay share of output tokens", f"{figures.get('rld_token_share', 0.0):.1%}", ""),
        ("singular traffic (finished by the relay)", f"{figures.get('singular_share', 0.0):.1%}", ""),
        ("WAN utilization", f"{figures.get('link_utilization', 0.0):.1%}", ""),
    ]
    verdict = "SLA met" if figures.get("sla_met") else '<span class="miss">SLA missed</span>'
    body = "".join(
        f'<tr><td>{_e(a)}</td><td class="num">{_e(b)}</td><td class="num">{_e(c)}</td></tr>' for a, b, c in rows
    )
    return f"<p>{verdict}</p>" + scrolling(
        f"<table><tr><th>figure</th><th>value</th><th>target</th></tr>{body}</table>"
    )


def _costs(scenario: Scenario) -> str:
    """$ per hour by role and for the line, with shares, as a table with a bar per share."""
    items = [
        (f"{scenario.architecture.role_label(name)} ({role.gpus} x {role.spec.gpu})", role.usd_per_hour)
        for name, role in scenario.roles.items()
    ]
    if scenario.link is not None:
        items.append(("WAN line(s)", scenario.link.usd_per_hour))
    total = sum(cost for _, cost in items) or 1.0
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td class="num">${cost:,.2f}</td><td class="num">{cost / total:.1%}</td>'
        f'<td style="width:8em"><span class="bar" style="width:{100 * cost / total:.1f}%" '
        f'title="{_e(name)}: ${cost:,.2f}/h"></span></td></tr>'
        for name, cost in items
    )
    return scrolling(
        "<table><tr><th>what</th><th>$ / hour</th><th>share</th><th></th></tr>"
        f'{rows}<tr><td>total</td><td class="num">${total:,.2f}</td><td></td><td></td></tr></table>'
    )


def _architectures(rows: list[dict[str, Any]]) -> str:
    def cell(value: Any, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    head = "".join(f"<th>{_e(r['name'])}</th>" for r in rows)
    lines = [
        ("feasible", [("yes" if r["feasible"] else "no") for r in rows]),
        ("GPUs", [", ".join(f"{n} x {g}" for g, n in r["gpus"].items()) or "-" for r in rows]),
        ("cost $/h", [cell(r["cost_usd_per_hour"], ",.2f") for r in rows]),
        ("BCR req/$", [cell(r["bcr"], ",.2f") for r in rows]),
        ("goodput req/s", [cell(r["goodput_rps"], ",.3f") for r in rows]),
        ("TTFT P90 s", [cell(r.get("ttft_p90_s"), ",.3f") for r in rows]),
        ("TTFT P99 s", [cell(r.get("ttft_p99_s"), ",.3f") for r in rows]),
    ]
    body = "".join(
        f"<tr><td>{_e(label)}</td>" + "".join(f'<td class="num">{_e(v)}</td>' for v in values) + "</tr>"
        for label, values in lines
    )
    return scrolling(f"<table><tr><th></th>{head}</tr>{body}</table>")


def _top_plans(rows: list[dict[str, Any]]) -> str:
    """`optimize --top`: per architecture, its best plans and those on its cost frontier, in closed
    form, each with its deployment in words."""
    words = {("ttft_p99_s",): "TTFT P99", ("tpot_p90_s",): "TPOT P90", ("ttft_p99_s", "tpot_p90_s"): "both"}
    parts = []
    for row in rows:
        if not row.get("top"):
            continue
        frontier = {p["rank"]: tuple(p["on"]) for p in row["frontier"]}
        plans = {p["rank"]: p for p in [*row["top"], *row["frontier"]]}
        body = "".join(
            f'<tr><td class="num">{rank}</td><td class="num">{p["cost_usd_per_hour"]:,.2f}</td>'
            f'<td class="num">{p["bcr"]:,.2f}</td><td class="num">{p["ttft_p99_s"]:,.3f}</td>'
            f'<td class="num">{p["tpot_p90_s"] * 1e3:,.1f}</td><td>{_e(words.get(frontier.get(rank, ()), "-"))}</td>'
            f"<td>{_e(p['checked'])}</td><td>{_e(deployment_text(p))}</td></tr>"
            for rank, p in sorted(plans.items())
        )
        parts.append(
            f"<h3>{_e(row['name'])}: {len(row['top'])} best of {row['plans_compared']} plans</h3>"
            + scrolling(
                "<table><tr><th>#</th><th>$/h</th><th>BCR req/$</th><th>TTFT P99 s</th><th>TPOT P90 ms</th>"
                f"<th>frontier</th><th>checked</th><th>deployment</th></tr>{body}</table>"
            )
        )
    note = (
        '<p class="note">Figures in closed form, one plan per deployment (with its best routing rule and '
        "handoff mode). #1 is the chosen plan, the only one verified by simulation; the others are ranked by "
        "the optimizer's score. A plan is on the frontier when no other plan is as "
        "cheap and as fast (TTFT P99 or TPOT P90) with one of the two better; such a plan is shown even when "
        "ranked below the best N.</p>"
    )
    return note + "".join(parts)


def _deployment(scenario: Scenario, link_utilization: float) -> str:
    """The deployment drawn side by side and stacked; the page shows the one that fits."""
    return (
        f'<div class="side-by-side">{deployment_svg(scenario, link_utilization)}</div>'
        f'<div class="stacked">{deployment_svg(scenario, link_utilization, stacked=True)}</div>'
    )


def _other_plans(report: PlanReport, targets: list[tuple[float, str]]) -> list[tuple[str, str, str]]:
    """The TTFT of every architecture's plan side by side (`ttft-by-architecture`), and each other
    architecture's deployment, folded away (`other-deployments`)."""
    samples = {report.scenario.plan.architecture: report.ttft_s} | {o.name: o.ttft_s for o in report.others}
    chart = samples_cdf_chart("TTFT by architecture, cumulative", samples, targets)
    note = (
        f'<p class="note">Each architecture\'s plan simulated the same way ({_e(report.simulation_source)}); '
        "the first is the report's plan.</p>"
    )
    folded = "".join(
        f"<details><summary>{_e(o.name)}: {_e(layout_text(o.scenario))}</summary>"
        f"{_deployment(o.scenario, o.link_utilization)}</details>"
        for o in report.others
    )
    return [
        ("ttft-by-architecture", "Time to first token by architecture", svg(chart) + note),
        ("other-deployments", "The other architectures' deployments", folded),
    ]


def layout_text(scenario: Scenario) -> str:
    """`48 x gpu-a, 16 x gpu-b; 1 x express-40g`: the GPUs and lines of a scenario's plan."""
    gpus = ", ".join(f"{n} x {g}" for g, n in scenario.gpus_by_type().items())
    lines = ", ".join(f"{x.count} x {x.option}" for x in scenario.plan.wan)
    return "; ".join(part for part in (gpus, lines) if part)


def _inputs(inputs: dict[str, str]) -> str:
    """Each input file's text folded away under its name."""
    return "".join(
        f"<details><summary>{_e(name)} ({text.count(chr(10))} lines of YAML)</summary><pre>{_e(text)}</pre></details>"
        for name, text in inputs.items()
    )


def plan_report_html(report: PlanReport) -> str:
    """The page (module docstring)."""
    scenario, figures = report.scenario, report.figures
    sla = scenario.workload.sla
    ttft = cdf_chart(
        "TTFT, cumulative",
        report.ttft_s,
        [(t.target_s, f"{t.name[5:]} SLA") for t in sla.targets("ttft")],
        report.pipelines,
    )
    tpot = cdf_chart(
        "TPOT, cumulative", report.tpot_s, [(t.target_s, f"{t.name[5:]} SLA") for t in sla.targets("tpot")]
    )
    utilization = float(figures.get("link_utilization", 0.0))
    sections = []
    if report.verdict:
        lead, *rest = report.verdict
        words = f"<p><strong>{_e(lead)}</strong></p>" + "".join(f"<p>{_e(line)}</p>" for line in rest)
        sections.append(("verdict", "Verdict", words))
    sections.append(("deployment", "Deployment", _deployment(scenario, utilization)))
    if report.architectures:
        sections.append(("architectures", "Architectures under the same SLA", _architectures(report.architectures)))
    if report.others:
        sections += _other_plans(report, [(t.target_s, f"{t.name[5:]} SLA") for t in sla.targets("ttft")])
    if any(row.get("top") for row in report.architectures):
        sections.append(("top-plans", "The best plans and the cost frontier", _top_plans(report.architectures)))
    sections += [
        ("figures", f"Figures ({_e(report.figures_source)})", _figures_table(figures, sla)),
        ("costs", "Cost", _costs(scenario)),
        ("ttft-cdf", f"Time to first token ({_e(report.simulation_source)})", svg(ttft)),
        ("tpot-cdf", f"Time per output token ({_e(report.simulation_source)})", svg(tpot)),
        ("sensitivity", "Sensitivity (closed form, the plan fixed)", _sensitivity(report)),
        ("inputs", "Inputs", _inputs(report.inputs)),
    ]
    body = "\n".join(f'<section id="{sid}"><h2>{title}</h2>\n{content}\n</section>' for sid, title, content in sections)
    return page(report.title, f"<h1>{_e(report.title)}</h1>\n{body}", STYLE)
