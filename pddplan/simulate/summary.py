"""`pddplan simulate`: run the simulation and summarize it in the evaluator's terms."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from pddplan.architectures import Pipeline
from pddplan.errors import InputError
from pddplan.evaluate.classes import request_classes
from pddplan.evaluate.outputs import Pipeline as PipelineFigures
from pddplan.evaluate.verdict import Tails, judge, revenue_per_request, tpot_target
from pddplan.scenarios.scenario import Scenario
from pddplan.scenarios.split import pool_figure_name, pool_parts
from pddplan.simulate.engine import RequestTable, SimulationStats, simulate_requests
from pddplan.simulate.outputs import Simulation as SimulationOutput
from pddplan.specs.plan import RoleName
from pddplan.support.loading import write_atomic
from pddplan.trace.replay import TraceReplay

WARMUP_FRACTION = 0.05


@dataclass(frozen=True)
class Simulation:
    """A finished simulation: the request table, server statistics and the summary."""

    table: RequestTable
    stats: SimulationStats
    summary: SimulationOutput


def _percentiles(values: np.ndarray) -> dict[str, float]:
    if len(values) == 0:
        return {"p50_s": float("nan"), "p90_s": float("nan"), "p99_s": float("nan")}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"p50_s": float(p50), "p90_s": float(p90), "p99_s": float(p99)}


def simulate(
    scenario: Scenario, requests: int = 20_000, seed: int = 0, replay: TraceReplay | None = None
) -> Simulation:
    """Simulate `requests` requests with `seed` (or replay the first `requests` of a trace);
    summarize all but the first 5% (warm-up)."""
    table, stats = simulate_requests(scenario, requests, seed, replay)
    return Simulation(table=table, stats=stats, summary=summarize(scenario, table, stats, replayed=replay is not None))


def table_revenue_per_request(scenario: Scenario, table: RequestTable) -> float:
    """Mean $ the simulated requests pay, from their own tokens: uncached input, cached input
    (discounted) and output, mean(new x p_in + (prompt - new) x p_cached + O x p_out)."""
    prices = scenario.workload.prices
    new = table.new_tokens.astype(np.float64)
    cached = table.prompt_tokens.astype(np.float64) - new
    outputs = table.output_tokens.astype(np.float64)
    usd = (
        new * prices.input_usd_per_mtok
        + cached * prices.cached_input_usd_per_mtok
        + outputs * prices.output_usd_per_mtok
    ) / 1e6
    return float(usd.mean()) if len(usd) else 0.0


def summarize(
    scenario: Scenario, table: RequestTable, stats: SimulationStats, replayed: bool = False
) -> SimulationOutput:
    """TTFT/TPOT percentiles overall and per pipeline, utilizations, relay share, goodput, BCR.

    The SLA verdict, goodput, revenue and BCR are `pddplan.evaluate.verdict`'s, as in the closed
    form, at the offered rate (not the sample's, so that seeds do not add noise) with the attainment
    the simulated requests reached. A `replayed` trace's revenue is its own requests' (their hits
    are what the replayed cache gave, not the workload's distribution).
    """
    workload = scenario.workload
    sla = workload.sla
    count = len(table.arrival_s)
    keep = np.arange(count) >= int(count * WARMUP_FRACTION)
    ttft = table.ttft_s[keep]
    tpot = table.tpot_s[keep]
    ttft_pct = _percentiles(ttft)
    tpot_pct = _percentiles(tpot[table.output_tokens[keep] > 1])
    meets = (ttft <= sla.ttft_p99_s) & (tpot <= tpot_target(sla))
    attainment = float(meets.mean()) if len(meets) else 0.0
    cost = scenario.cost_per_hour
    verdict = judge(
        sla,
        Tails.of(*([pct[k] for k in ("p50_s", "p90_s", "p99_s")] for pct in (ttft_pct, tpot_pct))),
        scenario.rate_rps,
        attainment,
        (
            table_revenue_per_request(scenario, table) if replayed else _revenue_per_request(scenario),
            cost,
        ),
    )
    pipelines = []
    several_tokens = table.output_tokens[keep] > 1  # TPOT is undefined for one-token outputs
    for name in sorted(set(table.pipeline[keep].tolist())):
        mask = table.pipeline[keep] == name
        ttft_of, tpot_of = _percentiles(ttft[mask]), _percentiles(tpot[mask & several_tokens])
        pipelines.append(
            PipelineFigures(
                pipeline=name,
                share=float(mask.mean()),
                ttft_p50_s=ttft_of["p50_s"],
                ttft_p90_s=ttft_of["p90_s"],
                ttft_p99_s=ttft_of["p99_s"],
                tpot_p50_s=tpot_of["p50_s"],
                tpot_p90_s=tpot_of["p90_s"],
                tpot_p99_s=tpot_of["p99_s"],
            )
        )
    utilization = _utilization(stats)
    for role, pool in stats.pools:  # a split plan: each pool's own, the second's by its role
        for name, busy in _utilization(pool).items():
            utilization[pool_figure_name(cast(RoleName, role), name)] = busy
    link_utilization = stats.link_bytes / stats.link_capacity_integral if stats.link_capacity_integral > 0 else 0.0
    outputs = table.output_tokens.astype(np.float64)
    return SimulationOutput(
        architecture=scenario.plan.architecture,
        requests=count,
        requests_summarized=int(keep.sum()),
        rate_rps=scenario.rate_rps,
        ttft_p50_s=ttft_pct["p50_s"],
        ttft_p90_s=ttft_pct["p90_s"],
        ttft_p99_s=ttft_pct["p99_s"],
        tpot_p50_s=tpot_pct["p50_s"],
        tpot_p90_s=tpot_pct["p90_s"],
        tpot_p99_s=tpot_pct["p99_s"],
        worst_gap_p99_s=float(np.percentile(table.worst_gap_s[keep], 99)),
        goodput_rps=verdict.goodput_rps,
        sla_met=verdict.sla_met,
        sla_violations=verdict.violations,
        cost_usd_per_hour=cost,
        revenue_usd_per_hour=verdict.revenue_per_hour,
        bcr=verdict.bcr,
        rld_token_share=float(table.relay_tokens[keep].sum() / outputs[keep].sum()),
        singular_share=float((table.pipeline[keep] == Pipeline.P_RLD.value).mean()),
        request_overhead_s=sum(
            part.share * part.scenario.prefill.instance.efficiency.request_overhead_s for part in pool_parts(scenario)
        ),
        cancelled_transfers=int(table.cancelled[keep].sum()),
        link_utilization=link_utilization,
        wan_bytes_per_request=float(table.wan_bytes[keep].mean()),
        utilization=utilization,
        pipelines=pipelines,
    )


def _utilization(stats: SimulationStats) -> dict[str, float]:
    """Busy share of each pool over the span: prefill's busy time per instance; a decoder's mean
    batch over its instances' slots."""
    full_span = stats.span_s if stats.span_s > 0 else 1.0
    return {
        "prefill": stats.prefill_busy_s / (stats.prefill_instances * full_span),
        **{
            name: float(integral / (stats.decoder_instances[name] * stats.decoder_max_batch[name] * full_span))
            for name, integral in stats.decoder_batch_integral.items()
        },
    }


def _revenue_per_request(scenario: Scenario) -> float:
    """Mean $ a request pays by the workload's classes; under a split plan, the pools' means
    weighted by their shares (each pool's caches see its own share of the sessions)."""
    return sum(
        part.share * revenue_per_request(part.scenario.workload, request_classes(part.scenario))
        for part in pool_parts(scenario)
    )


RECORD_FIELDS = (
    "request",
    "arrival_s",
    "prompt_tokens",
    "hit",
    "new_tokens",
    "output_tokens",
    "pipeline",
    "ttft_s",
    "tpot_s",
    "worst_gap_s",
    "relay_tokens",
    "wan_bytes",
    "cancelled",
    "finish_s",
)


def request_records(table: RequestTable) -> list[dict[str, Any]]:
    """One plain dict per request."""
    columns = {
        "arrival_s": table.arrival_s,
        "prompt_tokens": table.prompt_tokens,
        "hit": table.hit,
        "new_tokens": table.new_tokens,
        "output_tokens": table.output_tokens,
        "pipeline": table.pipeline,
        "ttft_s": table.ttft_s,
        "tpot_s": table.tpot_s,
        "worst_gap_s": table.worst_gap_s,
        "relay_tokens": table.relay_tokens,
        "wan_bytes": table.wan_bytes,
        "cancelled": table.cancelled,
        "finish_s": table.finish_s,
    }
    if table.pool is not None:  # a split plan: which pool served the request
        columns["pool"] = table.pool
    lists = {name: values.tolist() for name, values in columns.items()}
    return [{"request": i, **{name: lists[name][i] for name in columns}} for i in range(len(table.arrival_s))]


RECORD_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def record_format(path: Path) -> str:
    """ "csv" or "jsonl" by the file name's suffix; InputError for any other (a `.parquet` name
    would otherwise get JSON lines it cannot read)."""
    fmt = RECORD_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(
            f"--per-request {path}: expected a .csv, .jsonl or .ndjson file name (CSV or JSON lines), "
            f"got {path.suffix or 'no suffix'}"
        )
    return fmt


def write_records(path: Path, table: RequestTable) -> None:
    """Per-request records as CSV (.csv) or JSON lines (.jsonl, .ndjson), written atomically."""
    records = request_records(table)
    if record_format(path) == "csv":
        buffer = io.StringIO()
        names = (*RECORD_FIELDS, "pool") if table.pool is not None else RECORD_FIELDS
        writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        write_atomic(path, buffer.getvalue())
    else:
        write_atomic(path, "".join(json.dumps(r) + "\n" for r in records))
