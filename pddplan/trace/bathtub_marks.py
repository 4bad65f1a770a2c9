"""Where a trace puts a workload on its bathtub, and how much cache climbs out of a valley
(`pddplan bathtub --trace`).

The trace is replayed through one LRU prefix cache at each capacity of CAPACITIES_GB (decimal
GB of the workload model's KV); the mean hit per request at each (request-weighted, as the
workload's hit-rate distribution and so the bathtub's axis are) is the curve it is read
against. An architecture whose bathtub has a valley and a climb-out hit h* (the first hit past
the valley's floor where revenue per cost is back at the left rim, `bathtub.findings`) climbs
out with the smallest capacity whose hit reaches h*; none when even an unbounded cache stays
below it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pddplan.trace.cache import replay
from pddplan.trace.read import TraceFormat, read_trace

CAPACITIES_GB = (1, 3, 10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000)
BLOCK_TOKENS = 512


def trace_marks(findings: dict[str, Any], trace: Path, fmt: TraceFormat, kv_bytes_per_token: float) -> dict[str, Any]:
    """The trace's hit against capacity, its hit with an unbounded cache, and per architecture
    with a climb-out hit, the capacity that reaches it (module docstring)."""
    curve = []
    for gb in CAPACITIES_GB:
        blocks = int(gb * 1e9 / kv_bytes_per_token // BLOCK_TOKENS)
        result = replay(read_trace(trace, fmt), blocks, BLOCK_TOKENS)
        curve.append({"capacity_gb": float(gb), "hit_request_weighted": result.hit_request_weighted})
    unbounded = replay(read_trace(trace, fmt), 10**15, BLOCK_TOKENS).hit_request_weighted
    climb: dict[str, Any] = {}
    for arch, entry in findings.get("architectures", {}).items():
        target = entry.get("climb_out_hit")
        if target is None:
            continue
        reach = next((p["capacity_gb"] for p in curve if p["hit_request_weighted"] >= target), None)
        climb[arch] = {"climb_out_hit": target, "capacity_gb": reach}
    return {"trace": str(trace), "capacity_hits": curve, "unbounded_hit": unbounded, "climb_out": climb}


def marks_text(marks: dict[str, Any], workload_mean_hit: float) -> list[str]:
    """The marks as sentences for the bathtub's notes."""
    lines = [
        f"trace {Path(marks['trace']).name}: with an unbounded prefix cache its requests hit "
        f"{marks['unbounded_hit']:.1%} on average (the workload's mean hit is {workload_mean_hit:.1%}); "
        + ", ".join(
            f"{p['capacity_gb']:,.0f} GB -> {p['hit_request_weighted']:.1%}"
            for p in marks["capacity_hits"]
            if p["capacity_gb"] in (10, 100, 1_000, 10_000)
        )
    ]
    for arch, entry in marks["climb_out"].items():
        if entry["capacity_gb"] is None:
            lines.append(
                f"{arch}: climbing out of the valley takes a hit of {entry['climb_out_hit']:.0%}, beyond what even an "
                "unbounded cache gives this traffic"
            )
        else:
            lines.append(
                f"{arch}: climbing out of the valley takes a hit of {entry['climb_out_hit']:.0%}: about "
                f"{entry['capacity_gb']:,.0f} GB of prefix cache for this traffic"
            )
    return lines
