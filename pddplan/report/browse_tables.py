"""Rich tables for the browsing commands (hardware, models, workloads)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from pddplan.report import output


def _num(value: Any, fmt: str = ",.1f") -> str:
    return "unknown" if value is None else format(value, fmt)


def _figure(value: Any) -> str:
    """A figure as people read it: 25,000 (not 2.5e+04) from ten thousand up, four significant
    digits below; `unknown` for none."""
    if value is None:
        return "unknown"
    if isinstance(value, int | float) and abs(value) >= 1e4:
        return f"{value:,.0f}"
    return format(value, ",.4g")


def flat_figures(figures: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A profile summary's nested figures under dotted paths (`memory.hbm_gb`), for tables."""
    return {f"{group}.{name}": fig for group, entries in figures.items() for name, fig in entries.items()}


def _fig(figures: dict[str, Any], path: str, fmt: str = ",.1f") -> str:
    entry = flat_figures(figures).get(path)
    return "-" if entry is None else _num(entry["value"], fmt)


def hardware_table(rows: list[dict[str, Any]]) -> Table:
    """One line per GPU: compute, memory, interconnect, price."""
    table = Table(title="Hardware profiles (dense peaks; scale-up one direction per GPU)")
    for header in (
        "name",
        "BF16 TFLOPS",
        "FP8 TFLOPS",
        "FP4 TFLOPS",
        "HBM GB",
        "HBM TB/s",
        "scale-up GB/s",
        "domain",
        "NIC Gbps",
        "TDP W",
        "$/GPU-h",
    ):
        table.add_column(header, justify="left" if header == "name" else "right")
    for row in rows:
        f = row["figures"]
        table.add_row(
            row["name"],
            _fig(f, "compute.bf16_dense_tflops"),
            _fig(f, "compute.fp8_dense_tflops"),
            _fig(f, "compute.fp4_dense_tflops"),
            _fig(f, "memory.hbm_gb", ",.0f"),
            _fig(f, "memory.hbm_tb_per_s", ".2f"),
            _fig(f, "interconnect.scale_up_gb_per_s", ",.0f"),
            _fig(f, "interconnect.scale_up_domain", ".0f"),
            _fig(f, "interconnect.nic_gbps", ",.0f"),
            _fig(f, "power.tdp_w", ",.0f"),
            _num(row["rental_usd_per_gpu_hour"], ".3f"),
        )
    return table


#: what `hardware list` keeps when every column does not fit: compute, memory, scale-up and price
HARDWARE_KEY_COLUMNS = ("name", "BF16 TFLOPS", "FP8 TFLOPS", "HBM GB", "HBM TB/s", "scale-up GB/s", "$/GPU-h")


def print_hardware_list(console: Console, rows: list[dict[str, Any]], detail: bool = False) -> None:
    """`hardware list`: every column when they fit the terminal (or with `detail`), else the key ones."""
    table = hardware_table(rows)
    console.print(table if detail else output.key_columns(console, table, HARDWARE_KEY_COLUMNS))


def print_hardware(console: Console, summary: dict[str, Any]) -> None:
    """Every figure of one profile, with its source."""
    console.print(f"[bold]{summary['name']}[/bold]: {summary['description']}")
    if summary["stands_for"]:
        console.print(f"stands for: {summary['stands_for']}")
    table = Table(show_header=True)
    for header in ("figure", "value", "source", "as of", "note"):
        table.add_column(header)
    for path, fig in flat_figures(summary["figures"]).items():
        table.add_row(path, _figure(fig["value"]), fig["source"], fig["as_of"] or "", fig["note"] or "")
    console.print(table)
    if summary["efficiency"]:
        factors = Table(title="efficiency factors (stack-agnostic)")
        factors.add_column("factor")
        factors.add_column("value", justify="right")
        for name, value in summary["efficiency"].items():
            if name != "source":
                factors.add_row(name, value if isinstance(value, str) else _figure(value))
        console.print(factors)
        if summary["efficiency"].get("source"):
            console.print(f"source of the factors: {summary['efficiency']['source']}")
    else:
        console.print("efficiency factors: shipped defaults (pddplan/perf/efficiency.py)")
    stacks = summary.get("stack_efficiency") or {}
    if stacks:
        console.print(f"calibrated serving stacks (estimate --stack NAME): {', '.join(stacks)}")
    sources = Table(title="sources")
    for header in ("key", "title", "url", "accessed"):
        sources.add_column(header)
    for key, src in summary["sources"].items():
        sources.add_row(key, src["title"], src["url"] or "", src["accessed"])
    console.print(sources)


def models_table(rows: list[dict[str, Any]]) -> Table:
    """One line per model: size, attention kind, KV per token."""
    table = Table(title="Model catalog (KV bytes per token of a long context)")
    for header in (
        "name",
        "attention",
        "layers",
        "params total",
        "params active",
        "weights GB",
        "KV dtype",
        "KV B/token",
    ):
        table.add_column(header, justify="left" if header in ("name", "attention", "layers") else "right")
    for row in rows:
        layers = ", ".join(f"{n} {kind}" for kind, n in row["layers"].items())
        table.add_row(
            row["name"],
            row["attention"] + (" + MoE" if row["moe"] else ""),
            layers,
            f"{row['params_total'] / 1e9:,.1f}B",
            f"{row['params_active'] / 1e9:,.1f}B",
            f"{row['weight_bytes'] / 1e9:,.0f}",
            row["kv_dtype"],
            f"{row['kv_bytes_per_token']:,.0f}",
        )
    return table


#: what `models list` keeps when every column does not fit: kind, size and KV bytes per token
MODELS_KEY_COLUMNS = ("name", "attention", "params total", "params active", "weights GB", "KV B/token")


def print_models_list(console: Console, rows: list[dict[str, Any]], detail: bool = False) -> None:
    """`models list`: every column when they fit the terminal (or with `detail`), else the key ones."""
    table = models_table(rows)
    console.print(table if detail else output.key_columns(console, table, MODELS_KEY_COLUMNS))


def print_model(console: Console, summary: dict[str, Any]) -> None:
    """A model's figures, each with the formula that gives it."""
    console.print(f"[bold]{summary['name']}[/bold] ({summary['attention']}) from {summary['source']}")
    b = summary["params_breakdown"]
    table = Table(show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("formula")
    table.add_row(
        "params_total",
        f"{summary['params_total']:,}",
        "embedding + lm_head + attention + norms + dense FFN + routed experts + shared/routers",
    )
    table.add_row("", "", " + ".join(f"{k} {v:,}" for k, v in b.items() if k != "routed_experts_active" and v))
    published = summary["params_total_published"]
    if published:
        diff = summary["params_total"] / published - 1
        table.add_row("  published", f"{published:,.0f}", f"difference {diff:+.1%}")
    table.add_row(
        "params_active",
        f"{summary['params_active']:,}",
        "as params_total, with routed experts x experts_per_token / num_experts",
    )
    published = summary["params_active_published"]
    if published:
        diff = summary["params_active"] / published - 1
        table.add_row("  published", f"{published:,.0f}", f"difference {diff:+.1%}")
    table.add_row(
        "weight_bytes",
        f"{summary['weight_bytes'] / 1e9:,.1f} GB",
        f"experts at {summary['expert_weight_dtype']}, the rest at {summary['weight_dtype']}, embeddings bf16",
    )
    table.add_row("kv_bytes_per_token", f"{summary['kv_bytes_per_token']:,.0f} B", summary["kv_formula"])
    kv = summary["kv_breakdown"]
    if kv["sliding_bytes_per_token"]:
        table.add_row(
            "  sliding layers",
            f"{kv['sliding_bytes_per_token']:,.0f} B/token",
            f"capped at {kv['sliding_window_tokens']} tokens per sequence",
        )
    if kv["linear_state_bytes_per_sequence"]:
        table.add_row(
            "  linear layers", f"{kv['linear_state_bytes_per_sequence'] / 1e6:,.2f} MB", "fixed state per sequence"
        )
    console.print(table)


def architectures_table(rows: list[dict[str, Any]]) -> Table:
    """One line per architecture: where decode runs, how the KV gets there, the decode GPU rule."""
    table = Table(title="Architectures")
    for header in ("name", "decode DC", "KV path", "decode GPU", "relay", "what it is"):
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(
            row["name"],
            str(row["decode_datacenter"]),
            str(row["kv_path"]).upper(),
            f"{row['decode_gpu']} type",
            "yes" if row["relay"] else "-",
            str(row["summary"]),
        )
    return table


def workloads_table(rows: list[dict[str, Any]]) -> Table:
    """One line per workload."""
    table = Table(title="Workloads")
    for header in ("name", "model", "rate rps", "prompt (mean)", "output (mean)", "hit (mean)", "TTFT P90/P99 s"):
        table.add_column(header, justify="left" if header in ("name", "model") else "right")
    for row in rows:
        sla = row["sla"]
        table.add_row(
            row["name"],
            row["model"],
            f"{row['rate_rps']:g}",
            f"{row['prompt_tokens_mean']:,.0f}",
            f"{row['output_tokens_mean']:,.0f}",
            f"{row['hit_rate_mean']:.1%}",
            f"{sla['ttft_p90_s']:g} / {sla['ttft_p99_s']:g}",
        )
    return table


def print_workload(console: Console, summary: dict[str, Any]) -> None:
    """A workload's traffic, SLA, prices and options."""
    console.print(f"[bold]{summary['name']}[/bold]: {summary['description']}")
    console.print(
        f"model {summary['model']} (KV {summary['kv_dtype'] or 'catalog default'}); "
        f"{summary['rate_rps']:g} req/s {summary['arrival_process']} (cv {summary['arrival_cv']:g}); "
        f"prompt mean {summary['prompt_tokens_mean']:,.0f}, output mean {summary['output_tokens_mean']:,.0f} tokens; "
        f"hit mean {summary['hit_rate_mean']:.1%}"
    )
    buckets = Table(title="prefix hit-rate buckets")
    for header in ("from", "to", "share"):
        buckets.add_column(header, justify="right")
    for bucket in summary["hit_buckets"]:
        buckets.add_row(f"{bucket['low']:.0%}", f"{bucket['high']:.0%}", f"{bucket['share']:.1%}")
    console.print(buckets)
    console.print(f"SLA: {summary['sla']}")
    console.print(f"prices: {summary['prices']}")
    for dc in summary["datacenters"]:
        offers = ", ".join(f"{g['type']} x{g['max_count']}" for g in dc["gpus"])
        console.print(f"datacenter {dc['name']}: {offers}")
    for line in summary["wan_lines"]:
        console.print(
            f"WAN option {line['name']} {line['between'][0]}<->{line['between'][1]}: {line['capacity_gbps']:g} Gbps, "
            f"RTT {line['rtt_ms']:g} ms, loss {line['loss_rate']:g}, ${line['usd_per_month']:,.0f}/month, "
            f"up to {line['max_lines']}"
        )
    stack = summary["serving"].get("stack")
    fallback = "none named (each GPU profile's stack-agnostic factors)"
    console.print(f"serving stack: {stack or fallback}")
