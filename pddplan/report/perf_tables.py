"""Terminal views of the performance core: estimate, calibration and accuracy."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from pddplan.calibration.command import CalibrateFlags, CalibrationFit
from pddplan.calibration.outputs import Accuracy, Estimate
from pddplan.report import output


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def print_estimate(console: Console, estimate: Estimate) -> None:
    """The headline time, then the breakdown and the binding resource."""
    result = estimate.json_data()
    mode = result["mode"]
    stages = result.get("pp")
    head = f"{result['model']} on {result['tp']} x {result['gpu']}"
    if stages:
        head = f"{result['model']} on {stages} pipeline stages of {result['tp']} x {result['gpu']}"
    if result["expert_parallel"]:
        attention = "tensor" if result.get("tp_attention") else "data"
        head += f" (expert parallel, {attention}-parallel attention)"
    if mode == "prefill":
        if result.get("loaded_prefill_s") is not None:
            packed = (
                f"{_ms(result['loaded_prefill_s'])} with every data-parallel rank prefilling beside it, "
                f"{_ms(result['packed_prefill_s'])} of the instance's time"
            )
        else:
            packed = f"{_ms(result['packed_prefill_s'])} packed with other requests"
        fill = ""
        if stages:
            fill = f" and the last chunk's crossing of the other stages {_ms(result['pipeline_fill_s'])}"
        console.print(
            f"{head}: prefill of {result['new_tokens']:,} tokens on {result['cached_tokens']:,} cached "
            f"= [bold]{_ms(result['prefill_s'])}[/bold] of {'the first stage' if stages else 'engine'} time "
            f"({result['chunks']} chunk(s), tail {result['tail_chunk_tokens']:,} tokens; {packed}); a lone "
            f"request's TTFT adds the stack's request overhead {_ms(result['request_overhead_s'])}{fill}: "
            f"{_ms(result['lone_request_ttft_s'])}"
        )
    elif mode == "decode":
        mtp = ""
        if result["tokens_per_step"] > 1:
            mtp = (
                f", {result['tokens_per_step']:.2f} tokens per step with multi-token prediction: "
                f"{_ms(result['time_per_output_token_s'])} per output token"
            )
        eager = ""
        if not result["cuda_graph"]:
            eager = (
                f", launched eagerly (no CUDA graph at this batch): at least its host's "
                f"{_ms(result['eager_host_s'])} to issue every kernel"
            )
        if stages:
            mtp += (
                f"; {stages} micro-batches cross every stage: {_ms(result['time_per_output_token_s'])} per output token"
            )
        step = f"a stage's decode step of one micro-batch of {result['batch'] / stages:g}" if stages else "decode step"
        console.print(
            f"{head}: {step}, batch {result['batch']} at {result['context_tokens']:,} context "
            f"= [bold]{_ms(result['decode_step_s'])}[/bold]{mtp}{eager} ({result['tokens_per_s']:,.0f} tokens/s; "
            f"memory holds up to {result['max_batch_by_memory']:,} such sequences)"
        )
    else:
        console.print(
            f"{head}: extend of {result['extend_tokens']} tokens at {result['context_tokens']:,} context "
            f"= [bold]{_ms(result['extend_s'])}[/bold] (= {result['equivalent_decode_steps']:.2f} decode steps)"
        )
    floor = f"; {result['times_floor']:.1f}x its floor" if result.get("times_floor") else ""
    table = Table(
        title=f"breakdown of {'the first chunk' if mode == 'prefill' else 'the step'}; bound: {result['bound']}{floor}"
    )
    table.add_column("part")
    table.add_column("time", justify="right")
    for label, seconds in _breakdown_rows(result["breakdown"], result.get("moe")):
        table.add_row(label, _ms(seconds))
    console.print(table)
    console.print(_precision_line(result["precision"], result["gpu"]), markup=False, highlight=False)
    if result.get("moe"):
        console.print(_moe_line(result["moe"], result["expert_parallel"]), markup=False, highlight=False)
    mem = result["memory_per_gpu"]
    console.print(
        f"per GPU: weights {mem['weights_bytes'] / 1e9:,.1f} GB, activations {mem['activations_bytes'] / 1e9:,.1f} GB, "
        f"KV budget {mem['kv_budget_bytes'] / 1e9:,.1f} GB ({_copies(result['kv_copies'])} of each token's KV in the "
        f"instance); factors: {result['efficiency_source']}"
    )


def _breakdown_rows(parts: dict[str, float], moe: dict[str, Any] | None) -> list[tuple[str, float]]:
    """The breakdown as (label, seconds) rows: the MoE layers' and the all-to-alls' parts indented
    under their family, the overlap of two micro-batches as a negative time, zero rows left out
    but for the three families and the overheads."""
    rows: list[tuple[str, float]] = [("dense GEMMs", parts["dense_gemm_s"])]
    if moe is not None:
        rows.append(("MoE layers", parts["moe_routing_s"] + parts["moe_permutation_s"] + parts["expert_gemm_s"]))
        rows += [
            ("  routing (router, top-k)", parts["moe_routing_s"]),
            ("  permutation, activation", parts["moe_permutation_s"]),
            ("  grouped GEMMs", parts["expert_gemm_s"]),
        ]
    rows.append(("attention", parts["attention_s"]))
    rows.append(("communication", parts["communication_s"]))
    if parts.get("stage_transfer_s"):
        rows.append(("  send to the next stage", parts["stage_transfer_s"]))
    if parts["moe_dispatch_s"] or parts["moe_combine_s"]:
        rows += [
            ("  dispatch (all-to-all)", parts["moe_dispatch_s"]),
            ("  combine (all-to-all)", parts["moe_combine_s"]),
        ]
    rows.append(("overheads (kernel floors, host)", parts["overhead_s"]))
    if parts["overlap_s"]:
        rows.append(("hidden by two micro-batches", -parts["overlap_s"]))
    if parts["host_bound_s"]:
        rows.append(("waiting for the host (eager)", parts["host_bound_s"]))
    rows += [("compute-bound part", parts["compute_bound_s"]), ("memory-bound part", parts["memory_bound_s"])]
    return rows


def _precision_line(precision: dict[str, Any], gpu: str) -> str:
    """Which weight formats the step reads and the dtype its GEMMs run at on this GPU."""

    def one(fmt: str, per_value: float, dtype: str) -> str:
        native = {"bf16": "bf16", "fp8": "fp8", "fp8-block": "fp8", "nvfp4": "fp4", "fp4": "fp4", "mxfp4": "fp4"}
        how = f"GEMMs at {dtype}"
        if native.get(fmt, "bf16") != dtype:
            how += f", weight-only on {gpu}"
        return f"{fmt} ({per_value:g} B per weight; {how})"

    text = "precision: weights " + one(
        precision["weights"], precision["weight_bytes_per_value"], precision["dense_gemm_dtype"]
    )
    if "experts" in precision:
        experts = one(precision["experts"], precision["expert_bytes_per_value"], precision["expert_gemm_dtype"])
        text += f", routed experts {experts}"
    return text


def _moe_line(moe: dict[str, Any], expert_parallel: bool) -> str:
    """The busiest expert-parallel rank's share and the micro-batches."""
    if expert_parallel:
        share = (
            f"MoE: the busiest rank carries {moe['busiest_rank_share']:.2f}x the mean rank's rows "
            f"(uniform routing's spread plus a skew of {moe['expert_skew']:.2f})"
        )
    else:
        share = "MoE: experts tensor-parallel (every rank runs a slice of every expert; no rank waits for another)"
    batches = "two micro-batches overlap the all-to-alls" if moe["micro_batches"] == 2 else "one micro-batch"
    return f"{share}; {batches}"


def _copies(count: float) -> str:
    return "1 copy" if count == 1 else f"{count:g} copies"


def show_calibration(flags: CalibrateFlags, fit: CalibrationFit) -> None:
    """`calibrate`'s output: a warning on stderr for each factor left on a bound, then JSON on
    stdout or the tables, then the profile written (`--output`)."""
    result = fit.to_output(flags.output_path)
    for item in result.factors_on_bounds:
        output.diagnostics().print(
            f"warning: {item.factor} = {item.value:.4g} sits on its {item.bound} bound: the step "
            "model's structure, not the data, limits this fit (see docs/model.md)",
            markup=False,
            highlight=False,
        )
    if flags.json_out:
        output.emit_json(result)
    else:
        print_calibration(output.results(), result.json_data())
    if flags.output_path is not None:
        output.wrote(flags.output_path)


def _share(value: float | None) -> str:
    """An error as a percentage; '-' when there is none to show (no rows in that split)."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.1%}"


def print_calibration(console: Console, summary: dict[str, Any]) -> None:
    """Errors before and after, and the fitted factors."""
    table = Table(title=f"calibration of {summary['target']}: |predicted / measured - 1|")
    for header in ("rows", "count", "median before", "median after", "worst before", "worst after"):
        table.add_column(header, justify="right")
    for split in ("fit", "holdout"):
        before, after = summary["before"][split], summary["after"][split]
        table.add_row(
            split,
            str(after["count"]),
            _share(before["median_abs_error"]),
            _share(after["median_abs_error"]),
            _share(before["worst_abs_error"]),
            _share(after["worst_abs_error"]),
        )
    console.print(table)
    factors = Table(title="fitted factors")
    factors.add_column("factor")
    factors.add_column("value", justify="right")
    for name, value in summary["efficiency"].items():
        factors.add_row(name, value if isinstance(value, str) else f"{value:.4g}")
    console.print(factors)


#: held-out points the summary lists, worst first (--detail lists every one, and the excluded)
WORST_POINTS = 10

#: the columns of a point a terminal too narrow for them all keeps
POINT_KEY_COLUMNS = ("line", "model", "gpu", "kind", "measured", "predicted", "error")


def print_accuracy(console: Console, accuracy: Accuracy, detail: bool = False) -> None:
    """The README's accuracy table: per split and factor level, per GPU, per group of rows; then
    the worst held-out points (the columns that fit the terminal), or with `detail` every
    held-out and excluded point in every column."""
    report = accuracy.json_data()
    table = Table(
        title=f"step-time model vs {report['rows'] - report['excluded']} measured points "
        f"({report['excluded']} excluded{', listed last' if detail else ''}; see tests/data/measurements.md)"
    )
    for header in ("rows", "factors", "count", "median |error|", "p90 |error|", "worst |error|"):
        table.add_column(header, justify="right")
    for key, label in (("summary", "stack-calibrated"), ("gpu_level_summary", "GPU only")):
        for split, s in report[key].items():
            table.add_row(
                split,
                label,
                str(s["count"]),
                _share(s["median_abs_error"]),
                _share(s["p90_abs_error"]),
                _share(s["worst_abs_error"]),
            )
    console.print(table)
    console.print(
        "stack-calibrated: the factors the GPU's profile holds for the row's serving stack (`estimate --stack`), "
        "fitted to that stack's fit rows; GPU only: the profile's stack-agnostic factors (`estimate`)."
    )
    per_gpu = Table(title="held-out rows by GPU (stack-calibrated)")
    for header in ("gpu", "count", "median |error|", "worst |error|"):
        per_gpu.add_column(header, justify="right")
    for gpu, s in report["holdout_by_gpu"].items():
        if s["holdout_count"]:
            per_gpu.add_row(gpu, str(s["holdout_count"]), _share(s["median_abs_error"]), _share(s["worst_abs_error"]))
    console.print(per_gpu)
    groups = report["holdout_groups"]
    console.print(
        _groups_table(
            "held-out rows by what was measured and by model family (stack-calibrated)",
            [*groups["by_measurement"].items(), *groups["by_family"].items()],
        )
    )
    console.print(
        _groups_table(
            "held-out rows by architecture class and weight precision (stack-calibrated)",
            [*groups["by_class"].items(), *groups["by_precision"].items()],
        )
    )
    if detail:
        for split, title in (("holdout", "held-out points, worst first"), ("excluded", "excluded points (not scored)")):
            chosen = [p for p in report["points"] if p["split"] == split]
            if chosen:
                console.print(_points_table(title, sorted(chosen, key=lambda p: -abs(p["error"]))))
    else:
        _print_worst_points(console, report["points"])
    cv = report.get("cross_validation")
    if cv:
        console.print(
            _groups_table(
                f"{cv['folds']}-fold cross-validation of the refit on the fit rows, whole {cv['fold_by']}s "
                "left out (out of fold)",
                [
                    ("all", cv["overall"]),
                    *cv["by_measurement"].items(),
                    *cv["by_family"].items(),
                    *cv["by_class"].items(),
                    *cv["by_precision"].items(),
                ],
            )
        )


def _print_worst_points(console: Console, points: list[dict[str, Any]]) -> None:
    """The `WORST_POINTS` worst held-out points in their key columns when all do not fit, and
    what `--detail` adds."""
    held_out = sorted((p for p in points if p["split"] == "holdout"), key=lambda p: -abs(p["error"]))
    excluded = sum(p["split"] == "excluded" for p in points)
    if held_out:
        shown = held_out[:WORST_POINTS]
        title = f"the {len(shown)} worst of {len(held_out)} held-out points"
        console.print(output.key_columns(console, _points_table(title, shown), POINT_KEY_COLUMNS))
    rest = [f"{len(held_out) - WORST_POINTS} more held-out points"] if len(held_out) > WORST_POINTS else []
    rest += [f"the {excluded} excluded points"] if excluded else []
    if rest:
        console.print(f"--detail lists {' and '.join(rest)}.")


def _groups_table(title: str, groups: list[tuple[str, dict[str, Any]]]) -> Table:
    """Median, p90 and worst |error| per group of rows (engine_step prefill, MLA, ...)."""
    table = Table(title=title)
    for header in ("rows", "count", "median |error|", "p90 |error|", "worst |error|"):
        table.add_column(header, justify="right")
    for name, s in groups:
        shares = (_share(s[key]) for key in ("median_abs_error", "p90_abs_error", "worst_abs_error"))
        table.add_row(name, str(s["count"]), *shares)
    return table


def _points_table(title: str, points: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    for header in (
        "line",
        "model",
        "gpu",
        "stack",
        "tp",
        "kind",
        "tokens",
        "batch",
        "context",
        "measured",
        "predicted",
        "error",
        "GPU-only error",
    ):
        table.add_column(header, justify="right")
    for p in points:
        table.add_row(
            str(p["line"]),
            p["model"],
            p["gpu"],
            p["stack"] or "-",
            str(p["tp"]),
            p["kind"],
            f"{p['tokens']:,}",
            f"{p['batch']:,}",
            f"{p['context']:,}",
            _ms(p["measured_s"]),
            _ms(p["predicted_s"]),
            f"{p['error']:+.0%}",
            f"{p['gpu_level_error']:+.0%}",
        )
    return table
