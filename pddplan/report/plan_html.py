"""The HTML plan report (`optimize|evaluate|simulate --report FILE`): one self-contained offline page.

Sections, each an element with an id (the browser test looks for them): the deployment as SVG
(`deployment`), the architectures side by side (`architectures`, optimize only), the plan's
figures against the SLA (`figures`), the cost by role and line (`costs`), TTFT and TPOT CDFs from a
simulation with the SLA targets marked (`ttft-cdf`, `tpot-cdf`), BCR against +-20% moves of the
prices, hit rate and rate (`sensitivity`), and the inputs it used (`inputs`). No script, no
external resource: values show on hover through SVG <title> elements.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pddplan.analyses.sensitivity import Sensitivity
from pddplan.report.charts import Chart, Series, svg
from pddplan.scenarios.describe import scenario_roles, scenario_wan
from pddplan.scenarios.scenario import Scenario
from pddplan.specs.workload import SLA_QUANTILES

CDF_POINTS = 200
STYLE = (
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em}"
    "td.num{text-align:right}th{background:#f4f4f4}section{margin:1.5em 0}"
    "pre{background:#f8f8f8;padding:.8em;overflow-x:auto;font-size:12px}.miss{color:#b00}"
)
ROLE_LABELS = {"prefill": "P", "relay": "RLD", "decode": "D"}


@dataclass(frozen=True)
class PlanReport:
    """What the page shows: a plan's scenario and figures (closed form or simulated), the simulated
    per-request TTFT and TPOT, the sensitivity curves, the architectures compared (optimize), and
    the input files' text."""

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


def _e(text: object) -> str:
    return html.escape(str(text))


def deployment_svg(scenario: Scenario, link_utilization: float) -> str:
    """Datacenters as boxes with their roles, joined by the line (bandwidth, RTT, utilization)."""
    roles = scenario_roles(scenario)
    decode_label = scenario.architecture.decode_label
    by_dc: dict[str, list[str]] = {}
    for name, role in roles.items():
        label = decode_label if name == "decode" else ROLE_LABELS[name]
        if role.get("relay_on_prefill"):
            label = "P+RLD"
        gpus = role["count"] * role["tp"]
        by_dc.setdefault(role["datacenter"], []).append(
            f"{label}: {role['count']} x {role['gpu']} TP{role['tp']} = {gpus} GPUs"
        )
    box_w, line_h, gap = 330, 22, 160
    height = 60 + line_h * max(len(lines) for lines in by_dc.values())
    width = len(by_dc) * box_w + (len(by_dc) - 1) * gap + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20}" '
        f'font-family="sans-serif" font-size="13">'
    ]
    for index, (dc, lines) in enumerate(by_dc.items()):
        x = 10 + index * (box_w + gap)
        out.append(f'<rect x="{x}" y="10" width="{box_w}" height="{height}" rx="8" fill="#f3f7fb" stroke="#4a78a8"/>')
        out.append(f'<text x="{x + 12}" y="32" font-weight="bold">{_e(dc)}</text>')
        for row, text in enumerate(lines):
            out.append(f'<text x="{x + 12}" y="{56 + row * line_h}">{_e(text)}</text>')
    wan = scenario_wan(scenario)
    if len(by_dc) == 2:
        x0, x1, y = 10 + box_w, 10 + box_w + gap, 10 + height / 2
        label = (
            f"{wan['gbps']:g} Gbps, {wan['lines']} line(s), RTT {wan['rtt_ms']:g} ms, {link_utilization:.0%} used"
            if wan
            else "no line"
        )
        out.append(
            f'<line x1="{x0}" x2="{x1}" y1="{y}" y2="{y}" stroke="#c0392b" stroke-width="4">'
            f"<title>{_e(label)}</title></line>"
        )
        words = label.split(", ")
        out.extend(
            f'<text x="{(x0 + x1) / 2}" y="{y - 10 - 15 * (len(words) - 1 - row)}" text-anchor="middle" '
            f'font-size="11">{_e(text)}</text>'
            for row, text in enumerate(words)
        )
    out.append("</svg>")
    return "\n".join(out)


def cdf_chart(title: str, values_s: np.ndarray, targets: Sequence[tuple[float, str]]) -> Chart:
    """The empirical CDF of `values_s` (seconds) on CDF_POINTS x values up to the largest value or
    target, with the targets as markers."""
    values = np.sort(values_s[np.isfinite(values_s)])
    top = max([float(values[-1]) if len(values) else 1.0, *[t for t, _ in targets]])
    x = np.linspace(0.0, top, CDF_POINTS)
    share = np.searchsorted(values, x, side="right") / max(len(values), 1)
    return Chart(title, x, [Series("requests", share)], "seconds", "share at most x", list(targets))


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
    return f"<p>{verdict}</p><table><tr><th>figure</th><th>value</th><th>target</th></tr>{body}</table>"


def _costs(scenario: Scenario) -> str:
    """$ per hour by role and for the line, with shares, as a table and horizontal bars."""
    items = [
        (f"{ROLE_LABELS.get(name, name)} ({role.gpus} x {role.spec.gpu})", role.usd_per_hour)
        for name, role in scenario.roles.items()
    ]
    if scenario.link is not None:
        items.append(("WAN line(s)", scenario.link.usd_per_hour))
    total = sum(cost for _, cost in items) or 1.0
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td class="num">${cost:,.2f}</td><td class="num">{cost / total:.1%}</td>'
        f'<td><svg width="220" height="12"><rect width="{200 * cost / total:.1f}" height="12" fill="#4a78a8">'
        f"<title>{_e(name)}: ${cost:,.2f}/h</title></rect></svg></td></tr>"
        for name, cost in items
    )
    return (
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
    return f"<table><tr><th></th>{head}</tr>{body}</table>"


def plan_report_html(report: PlanReport) -> str:
    """The page (module docstring)."""
    scenario, figures = report.scenario, report.figures
    sla = scenario.workload.sla
    ttft = cdf_chart(
        "TTFT, cumulative",
        report.ttft_s,
        [(t.target_s, f"{t.name[5:]} target") for t in sla.targets("ttft")],
    )
    tpot_targets = [(t.target_s, f"{t.name} target") for t in sla.targets("tpot")]
    tpot = cdf_chart("TPOT, cumulative", report.tpot_s, tpot_targets)
    sens = report.sensitivity
    sensitivity = Chart(
        "BCR when one input moves",
        sens.factors,
        [Series(name, values) for name, values in sens.bcr.items()],
        "factor on the input",
        "BCR (requests per $)",
        [(1.0, "as planned")],
    )
    sections = [
        ("deployment", "Deployment", deployment_svg(scenario, float(figures.get("link_utilization", 0.0)))),
    ]
    if report.architectures:
        sections.append(("architectures", "Architectures under the same SLA", _architectures(report.architectures)))
    sections += [
        ("figures", f"Figures ({_e(report.figures_source)})", _figures_table(figures, sla)),
        ("costs", "Cost", _costs(scenario)),
        ("ttft-cdf", f"Time to first token ({_e(report.simulation_source)})", svg(ttft)),
        ("tpot-cdf", f"Time per output token ({_e(report.simulation_source)})", svg(tpot)),
        ("sensitivity", "Sensitivity (closed form, the plan fixed)", svg(sensitivity)),
        (
            "inputs",
            "Inputs",
            "".join(f"<h3>{_e(name)}</h3><pre>{_e(text)}</pre>" for name, text in report.inputs.items()),
        ),
    ]
    body = "\n".join(f'<section id="{sid}"><h2>{title}</h2>\n{content}\n</section>' for sid, title, content in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(report.title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{_e(report.title)}</h1>\n{body}\n</body></html>\n"
    )
