"""Views of a hit-rate sweep: charts, findings in words, CSV rows, and `pddplan bathtub`'s output."""

from __future__ import annotations

import csv
import io
import math

from pddplan.analyses.bathtub import FIGURES, BathtubFlags, BathtubOutcome, BathtubResult
from pddplan.report import output
from pddplan.report.chart_files import write_charts
from pddplan.report.charts import Chart, Series, terminal
from pddplan.support.loading import write_atomic
from pddplan.trace.bathtub_marks import marks_text

LABELS = {
    "revenue_per_cost": ("Revenue per cost", "revenue / cost"),
    "prefill_tokens_per_gpu_s": ("Prefill throughput, packed", "new tokens / GPU-second"),
    "prefill_tokens_per_gpu_s_alone": ("Prefill throughput, one request alone", "new tokens / GPU-second"),
    "bcr": ("BCR", "requests per $"),
    "throughput_per_gpu_hour": ("Throughput per GPU-hour", "requests / GPU-hour"),
}


def charts(
    result: BathtubResult,
    names: tuple[str, ...] = ("revenue_per_cost", "prefill_tokens_per_gpu_s", "prefill_tokens_per_gpu_s_alone"),
) -> list[Chart]:
    """One chart per figure, a line per architecture, the workload's mean hit marked."""
    mean = result.findings.get("workload_mean_hit")
    markers = [(float(mean), "workload mean hit")] if mean is not None else []
    out = []
    for name in names:
        title, unit = LABELS[name]
        out.append(
            Chart(
                title=f"{title} vs prefix hit rate ({result.workload.name}, {result.mode})",
                x=result.hits,
                series=[Series(arch, result.figures[arch][name]) for arch in result.architectures],
                x_label="prefix hit rate",
                y_label=unit,
                markers=markers,
                x_percent=True,
            )
        )
    return out


def findings_text(result: BathtubResult) -> list[str]:
    """The findings as sentences."""
    f = result.findings
    lines = []
    for arch, entry in f["architectures"].items():
        if not entry.get("feasible_points"):
            why = entry.get("no_plan_reason") or "no plan sized at any hit rate meets the SLA"
            lines.append(f"{arch}: no hit rate has a plan at {result.workload.arrival.rate_rps:g} req/s ({why})")
            continue
        head = f"{arch}: revenue/cost is {entry['shape_words']}"
        if entry["valley"]:
            head += f"; valley bottom {entry['valley_min_revenue_per_cost']:.3g} at {entry['valley_min_hit']:.0%} hit"
            if "climb_out_hit" in entry:
                head += (
                    f"; to climb back to the low-end level the hit rate must reach "
                    f"{entry['climb_out_hit']:.0%} (about {entry['climb_out_cache_factor']:.2f}x the "
                    f"prefix-cache capacity of today's mean hit, a linear estimate)"
                )
        else:
            head += f"; no valley (feasible at {entry['feasible_points']} of {len(result.hits)} points)"
        lines.append(head)
        dips = entry.get("singular_points", [])
        if dips:
            spots = ", ".join(f"{d['hit']:.0%} (tail {d['tail_chunk_tokens']} tokens, -{d['drop']:.1%})" for d in dips)
            lines.append(f"{arch}: prefill throughput of a request alone dips where its tail chunk is small: {spots}")
        packed = entry.get("packed_singular_points", [])
        if dips and not packed:
            lines.append(f"{arch}: packed (chunked prefill filling each step with the next requests) shows no dip")
        elif packed:
            lines.append(f"{arch}: packed prefill throughput dips too, at " + ", ".join(f"{h:.0%}" for h in packed))
    predicted = ", ".join(f"{h:.1%}" for h in f["predicted_dips"])
    lines.append(f"chunk {result.chunk_tokens} tokens predicts tail-chunk dips just below: {predicted}")
    mean = f["workload_mean_hit"]
    at_mean = ", ".join(
        f"{arch} {e['revenue_per_cost_at_mean_hit']:.3g}"
        for arch, e in f["architectures"].items()
        if e.get("feasible_points")
    )
    lines.append(f"the workload's mean hit {mean:.1%} sits at revenue/cost: {at_mean}")
    for cross in f["pdd_vs_baselines"]:
        side = "above" if cross["pdd_wins_above"] else "below"
        lines.append(f"PDD's BCR crosses the best baseline's at {cross['hit']:.0%}: PDD wins {side} it")
    if f.get("no_valley_note"):
        lines.append(f["no_valley_note"])
    return lines


def csv_text(result: BathtubResult) -> str:
    """One row per hit rate: tail chunk and every figure of every architecture."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = [f"{arch}.{name}" for arch in result.architectures for name in FIGURES]
    writer.writerow(["hit", "tail_chunk_tokens", *columns])
    for i, hit in enumerate(result.hits):
        row = [f"{hit:.6g}", int(result.tail_chunks[i])]
        for arch in result.architectures:
            for name in FIGURES:
                value = float(result.figures[arch][name][i])
                row.append("" if not math.isfinite(value) else f"{value:.8g}")
        writer.writerow(row)
    return buffer.getvalue()


def notes(outcome: BathtubOutcome) -> list[str]:
    """The findings as sentences, then what the trace's marks say (when there is a trace)."""
    lines = findings_text(outcome.result)
    if outcome.marks is not None:
        lines += marks_text(outcome.marks, outcome.result.workload.hit_rate.mean())
    return lines


def show(flags: BathtubFlags, outcome: BathtubOutcome) -> None:
    """`bathtub`'s output: the files its options ask for (the charts as HTML, PNG and SVG, the
    points as CSV), then JSON on stdout, or each chart in the terminal and the notes."""
    drawn, said = charts(outcome.result), notes(outcome)
    title = f"pddplan bathtub: {outcome.result.workload.name}"
    write_charts(drawn, title, said, flags.png, flags.svg, flags.html)
    if flags.csv_path is not None:
        write_atomic(flags.csv_path, csv_text(outcome.result))
        output.wrote(flags.csv_path)
    if flags.json_out:
        output.emit_json(outcome.to_output())
        return
    console = output.results()
    for chart in drawn:
        console.print(terminal(chart), markup=False)
        console.print()
    for note in said:
        console.print(f"- {note}", markup=False)
