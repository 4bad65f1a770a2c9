"""The efficiency curves at their priors reproduce the public kernel microbenchmarks they were read
from (tests/data/kernel_priors.csv, sources in tests/data/kernel_priors.md).

Tolerances, per family, on efficiency: attention prefill and KV reads within a factor 1.6 (the
curves are two-parameter saturations over a kernel whose efficiency also depends on tiling and
wave quantization: the worst rows are the one-wave causal shapes and the long-cache chunks with many
heads); dense GEMMs within 25%, grouped GEMMs within 30% (one plateau across shapes whose K differs
3.5-fold: DeepGEMM's K=2048 down projection runs 12% below its K=7168 up projection)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from pddplan.perf.priors import GPU_PRIORS, PRIOR_EFFICIENCY, PRIORS
from pddplan.perf.roofline import (
    ATTENTION_TILE_ROWS,
    attention_efficiency,
    gemm_efficiency,
    grouped_gemm_efficiency,
    kv_read_efficiency,
)

ROWS = list(csv.DictReader((Path(__file__).parent / "data" / "kernel_priors.csv").open(encoding="utf-8")))
EFF = PRIOR_EFFICIENCY
TOLERANCE = {
    "attention_prefill": 1.6,
    "attention_chunk": 1.6,
    "kv_read": 1.6,
    "gemm_bf16": 1.25,
    "gemm_fp8": 1.25,
    "grouped_gemm": 1.3,
}


def heads(shape: str) -> int:
    return int(shape.split(" q heads")[0].split()[-1])


def curve(row: dict[str, str]) -> float:
    """The prior curve at the row's shape (batch 1: thread blocks = heads * max(S / 128, 1))."""
    x = float(row["x"])
    family = row["family"]
    if family == "attention_prefill":  # square causal: mean keys per query (S + 1) / 2
        return float(attention_efficiency(heads(row["shape"]) * x / ATTENTION_TILE_ROWS, (x + 1) / 2, EFF))
    if family == "attention_chunk":  # a chunk over a long cache: ~32K keys per query
        return float(attention_efficiency(heads(row["shape"]) * x / ATTENTION_TILE_ROWS, 32_768, EFF))
    if family == "kv_read":
        return float(kv_read_efficiency(x, EFF))
    if family == "gemm_bf16":
        return float(gemm_efficiency(x, EFF, "bf16"))
    if family == "gemm_fp8":
        return float(gemm_efficiency(x, EFF, "fp8"))
    assert family == "grouped_gemm"
    return float(grouped_gemm_efficiency(x, EFF))


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['family']}:{r['shape']}" for r in ROWS])
def test_prior_curve_reproduces_the_public_figure(row: dict[str, str]) -> None:
    measured = float(row["efficiency"])
    predicted = curve(row)
    factor = TOLERANCE[row["family"]]
    assert measured / factor <= predicted <= measured * factor, (row["shape"], predicted, measured)


def test_every_row_cites_a_source() -> None:
    assert len(ROWS) >= 30
    for row in ROWS:
        assert row["source"].strip() and 0 < float(row["efficiency"]) < 1


def test_priors_sit_inside_their_ranges_and_cite_figures() -> None:
    for prior in PRIORS:
        assert prior.low < prior.value < prior.high, prior.name
        assert prior.spread > 0 and prior.source, prior.name
        if prior.log:
            assert prior.low > 0
    for gpu, factors in GPU_PRIORS.items():
        for name, (value, source) in factors.items():
            prior = next(p for p in PRIORS if p.name == name)
            assert prior.low < value < prior.high and source, (gpu, name)


def test_median_error_of_the_priors_is_small() -> None:
    """Across all rows the priors' median |log error| is within 20%: no family is off on average."""
    errors = sorted(abs(math.log(curve(r) / float(r["efficiency"]))) for r in ROWS)
    assert errors[len(errors) // 2] < math.log(1.2)


def test_an_omitted_factor_takes_the_shipped_default() -> None:
    """An efficiency block may leave out the factors with a default; each default is the shipped one
    (the prior, which is what default_efficiency.yaml holds), so a partial block of a user's own
    does not quietly run another value than the profiles without a block."""
    from pydantic_core import PydanticUndefined

    from pddplan.perf.efficiency import DEFAULT_EFFICIENCY
    from pddplan.specs.hardware import Efficiency

    optional = {name: f.default for name, f in Efficiency.model_fields.items() if f.default is not PydanticUndefined}
    assert "request_overhead_s" in optional and "expert_memory_fraction" in optional
    for name, default in optional.items():
        assert default == getattr(DEFAULT_EFFICIENCY, name) == getattr(PRIOR_EFFICIENCY, name), name
