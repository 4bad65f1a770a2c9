"""`bathtub --trace`: the trace's hit per cache size, and the cache that climbs out of a valley."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pddplan.report.schemas import validate_output
from pddplan.trace.bathtub_marks import marks_text, trace_marks

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"
KV = 48_068.0  # DeepSeek-V3.2 FP8, bytes per token


def test_the_smallest_cache_that_reaches_the_climb_out_hit() -> None:
    """An architecture that climbs out at a 30% hit gets the first capacity whose hit reaches 30%
    (the one before it falls short); one that needs 90% gets none: the trace's unbounded hit is
    43.2% per request, and the note says so."""
    findings = {"architectures": {"a": {"climb_out_hit": 0.3}, "b": {"climb_out_hit": 0.9}, "c": {}}}
    marks = trace_marks(findings, MOONCAKE, "mooncake", KV)
    hits = [p["hit_request_weighted"] for p in marks["capacity_hits"]]
    assert hits == sorted(hits) and abs(marks["unbounded_hit"] - 0.432) < 2e-3
    reach = marks["climb_out"]["a"]["capacity_gb"]
    index = [p["capacity_gb"] for p in marks["capacity_hits"]].index(reach)
    assert hits[index] >= 0.3 > hits[index - 1]
    assert marks["climb_out"]["b"]["capacity_gb"] is None and "c" not in marks["climb_out"]
    text = "\n".join(marks_text(marks, 0.911))
    assert "beyond what even an unbounded cache gives" in text and f"{reach:,.0f} GB of prefix cache" in text


def test_bathtub_with_a_trace(cli: Any) -> None:
    result = cli("bathtub", "pdd-agent-64k", "--points", "5", "--trace", str(MOONCAKE), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    validate_output("bathtub", data)
    assert data["trace"]["unbounded_hit"] > 0.4
    assert (
        "with an unbounded prefix cache"
        in cli("bathtub", "pdd-agent-64k", "--points", "5", "--trace", str(MOONCAKE)).stdout
    )
