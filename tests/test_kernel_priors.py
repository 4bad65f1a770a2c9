"""The efficiency curves at their priors reproduce the public kernel microbenchmarks they were read
from (tests/data/kernel_priors.csv, sources in tests/data/kernel_priors.md).

Tolerances, per family, on efficiency: attention prefill and KV reads within a factor 1.6 (the
curves are two-parameter saturations over a kernel whose efficiency also depends on tiling and
wave quantization: the worst rows are the one-wave causal shapes and the long-cache chunks with many
heads); dense GEMMs within 25%, grouped GEMMs within 30% (one plateau across shapes whose K differs
3.5-fold: DeepGEMM's K=2048 down projection runs 12% below its K=7168 up projection).

MLA has no curve of its own: its prefill (FlashAttention-3's MLA kernel) runs on the attention
curve, within a factor 1.6 like GQA prefill; its absorbed decode on the attention curve with split-KV
(compute) and the KV-read curve (memory), whichever binds, within a factor 1.7: the curves give 1.0-1.3
of InferSim's FlashInfer MLA figures on H20, 1.2-1.6 on H800. FlashInfer's MLA kernel runs below
FlashMLA, the kernel the curves' plateaus follow (its README: ~0.9 of HBM bandwidth and ~0.67 of
bf16 peak on H800; 120-130 TFLOP/s, 0.81-0.88, on H20); docs/model.md, "MLA attention"."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

from pddplan.inputs import load_hardware
from pddplan.perf.moe import grouped_gemm_efficiency
from pddplan.perf.priors import GPU_PRIORS, PRIOR_EFFICIENCY, PRIORS, STACK_PRIORS, gpu_start, stack_start
from pddplan.perf.roofline import (
    ATTENTION_TILE_ROWS,
    attention_efficiency,
    gemm_efficiency,
    head_dim_factor,
    kv_read_efficiency,
    split_kv_attention_efficiency,
)
from pddplan.specs.hardware import Efficiency

ROWS = list(csv.DictReader((Path(__file__).parent / "data" / "kernel_priors.csv").open(encoding="utf-8")))
EFF = PRIOR_EFFICIENCY
TOLERANCE = {
    "attention_prefill": 1.6,
    "attention_chunk": 1.6,
    "kv_read": 1.6,
    "gemm_bf16": 1.25,
    "gemm_fp8": 1.25,
    "grouped_gemm": 1.3,
    "mla_prefill": 1.6,
    "mla_decode": 1.7,
}
#: MLA (DeepSeek-V3 shape, all 128 heads on one GPU): FLOPs of one query-key pair in the absorbed
#: form, 2 * heads * (latent + rope + latent), and latent bytes per key, (latent + rope) * 2 B
MLA_DECODE_FLOPS_PER_KEY = 2 * 128 * (512 + 64 + 512)
MLA_DECODE_BYTES_PER_KEY = (512 + 64) * 2


def heads(shape: str) -> int:
    return int(shape.split(" q heads")[0].split()[-1])


def batch(shape: str) -> int:
    """The shape's `batch N` (the FA3 figure runs 16K tokens per batch), else 1."""
    match = re.search(r"batch (\d+)", shape)
    return int(match.group(1)) if match else 1


def head_dim(shape: str) -> float:
    """The shape's `hdD` (0 for MLA shapes, which have none)."""
    match = re.search(r"\bhd(\d+)", shape)
    return float(match.group(1)) if match else 0.0


def curve(row: dict[str, str]) -> float:
    """The prior curve at the row's shape (batch 1: thread blocks = heads * max(S / 128, 1)), with
    the row's GPU's own priors where it has some (`GPU_PRIORS`)."""
    x = float(row["x"])
    eff = gpu_start(row["gpu"], EFF)
    family = row["family"]
    shape = row["shape"]
    if family == "attention_prefill":  # square causal: mean keys per query (S + 1) / 2
        blocks = batch(shape) * heads(shape) * x / ATTENTION_TILE_ROWS
        return float(attention_efficiency(blocks, (x + 1) / 2, eff)) * head_dim_factor(head_dim(shape), eff)
    if family == "attention_chunk":  # a chunk over a long cache: ~32K keys per query
        blocks = heads(shape) * x / ATTENTION_TILE_ROWS
        return float(attention_efficiency(blocks, 32_768, eff)) * head_dim_factor(head_dim(shape), eff)
    if family == "mla_prefill":  # as attention_prefill: 128 heads, (S + 1) / 2 keys per query
        return float(attention_efficiency(128 * x / ATTENTION_TILE_ROWS, (x + 1) / 2, eff))
    if family == "mla_decode":
        return mla_decode_roofline_fraction(row, eff)
    if family == "kv_read":
        return float(kv_read_efficiency(x, eff))
    if family == "gemm_bf16":
        return float(gemm_efficiency(x, eff, "bf16"))
    if family == "gemm_fp8":
        return float(gemm_efficiency(x, eff, "fp8"))
    assert family == "grouped_gemm"
    return float(grouped_gemm_efficiency(x, eff))


def mla_decode_roofline_fraction(row: dict[str, str], eff: Efficiency) -> float:
    """Absorbed MLA decode of b sequences on K keys: floor / predicted time, the floor
    max(F / peak, B / HBM), the prediction max(F / (peak * attention curve), B / (HBM * KV-read
    curve)), b * 128 heads query tiles (one each) split over the keys as `split_kv_attention_efficiency` says."""
    hardware = load_hardware(row["gpu"])
    batch = float(row["shape"].split("b=")[1].split()[0])
    keys = float(row["x"])
    flops, read = batch * keys * MLA_DECODE_FLOPS_PER_KEY, batch * keys * MLA_DECODE_BYTES_PER_KEY
    peak, hbm = hardware.peak_flops_per_s("bf16"), hardware.hbm_bytes_per_s
    floor = max(flops / peak, read / hbm)
    compute = flops / (peak * float(split_kv_attention_efficiency(batch * 128, keys, 1, eff)))
    memory = read / (hbm * float(kv_read_efficiency(read, eff)))
    return floor / max(compute, memory)


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
    own_priors = [(gpu, factors) for gpu, factors in GPU_PRIORS.items()]
    own_priors += [
        (f"{stack}/{gpu}", factors) for stack, by_gpu in STACK_PRIORS.items() for gpu, factors in by_gpu.items()
    ]
    for where, factors in own_priors:
        for name, (value, source) in factors.items():
            prior = next(p for p in PRIORS if p.name == name)
            assert prior.low < value < prior.high and source, (where, name)


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


NCCL_ROWS = list(csv.DictReader((Path(__file__).parent / "data" / "nccl_all_reduce.csv").open(encoding="utf-8")))


@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-80g"])
def test_nccl_stack_priors_are_the_hockney_fit_of_the_vidur_all_reduces(gpu: str) -> None:
    """TensorRT-LLM 0.5's collective priors are the least-squares Hockney line through Vidur's NCCL
    all-reduce times at 4 ranks (tests/data/kernel_priors.md, "NCCL all-reduce"):
    t = alpha + 2 (n - 1) / n * S / (e * link); the shipped values are that fit to 3 digits."""
    import numpy as np

    rows = [r for r in NCCL_ROWS if r["gpu"] == gpu]
    assert len(rows) == 498
    ranks = int(rows[0]["ranks"])
    bus_bytes = np.array([2.0 * (ranks - 1) / ranks * float(r["size_bytes"]) for r in rows])
    seconds = np.array([float(r["time_s"]) for r in rows])
    design = np.column_stack([np.ones_like(bus_bytes), bus_bytes])
    (alpha, seconds_per_byte), *_ = np.linalg.lstsq(design, seconds, rcond=None)
    fraction = 1.0 / seconds_per_byte / load_hardware(gpu).scale_up_bytes_per_s
    shipped = STACK_PRIORS["trtllm-0.5"][gpu]
    assert shipped["collective_latency_s"][0] == pytest.approx(alpha, rel=5e-3)
    assert shipped["scale_up_fraction"][0] == pytest.approx(fraction, rel=5e-3)


def test_a_stack_without_priors_of_its_own_starts_at_its_gpus_factors() -> None:
    """`stack_start` swaps in only the stack's own priors, on the GPU they were measured on."""
    base = PRIOR_EFFICIENCY
    assert stack_start("h100-sxm", "sglang-0.5", base) is base
    assert stack_start("h200", "trtllm-0.5", base) is base
    nccl = stack_start("h100-sxm", "trtllm-0.5", base)
    assert nccl.collective_latency_s == STACK_PRIORS["trtllm-0.5"]["h100-sxm"]["collective_latency_s"][0]
    assert nccl.kernel_floor_s == base.kernel_floor_s
