"""The MoE layer's kernel model against measured fused-MoE latencies (tests/data/
aiconfigurator-moe-h200-sglang-0.5.6.csv: SGLang 0.5.6's Triton fused_moe on H200, 1,176 shapes of
four catalog models, bf16 and block-fp8, 1 to 20,480 tokens per rank, experts split over 1-32
ranks). A kernel-level check, never fitted to: the H200 profile's stack-agnostic factors.

Measured 2026-12-05: median |error| 21%, p90 55%, worst 89% over every row; the model is slow, not
fast: per model and format the median error is +1% to +24%, most at <= 64 tokens in bf16 (~+30%:
the uniform routing the model assumes touches more experts, so reads more weights, than the
benchmark's power-law routing)."""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pddplan.inputs import load_hardware, load_model
from pddplan.perf.moe import all_to_all, fused_moe_layer_s
from pddplan.perf.roofline import Instance, moe_run

DATA = Path(__file__).resolve().parent / "data" / "aiconfigurator-moe-h200-sglang-0.5.6.csv"
MODELS = {
    (2048, 768, 128, 8): "qwen3-30b-a3b",
    (4096, 1536, 128, 8): "qwen3-235b-a22b",
    (7168, 2048, 256, 8): "deepseek-v3",
    (7168, 2048, 384, 8): "kimi-k2",
}
DTYPES = {"bfloat16": "bf16", "fp8_block": "fp8"}


def _rows() -> dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]]:
    """(model, dtype, expert ranks) -> (tokens per rank, measured seconds)."""
    groups: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
    with DATA.open(encoding="utf-8") as handle:
        for row in csv.DictReader(line for line in handle if not line.startswith("#")):
            shape = (int(row["hidden_size"]), int(row["inter_size"]), int(row["num_experts"]), int(row["topk"]))
            key = (MODELS[shape], DTYPES[row["moe_dtype"]], int(row["moe_tp_size"]))
            groups[key].append((float(row["num_tokens"]), float(row["latency_ms"]) / 1e3))
    return {key: (np.array([n for n, _ in v]), np.array([s for _, s in v])) for key, v in groups.items()}


def _errors() -> dict[tuple[str, str, int], np.ndarray]:
    """Per group: predicted / measured - 1 at each token count."""
    h200 = load_hardware("h200")
    out = {}
    for (name, dtype, ranks), (tokens, measured) in _rows().items():
        model = load_model(name).with_weights(dtype, dtype)  # type: ignore[arg-type]
        run = moe_run(Instance(model, h200, ranks, False))
        predicted = np.concatenate(
            [fused_moe_layer_s(run, tokens[tokens <= 256], True), fused_moe_layer_s(run, tokens[tokens > 256], False)]
        )
        order = np.concatenate([np.flatnonzero(tokens <= 256), np.flatnonzero(tokens > 256)])
        out[(name, dtype, ranks)] = predicted / measured[order] - 1.0
    return out


@pytest.fixture(scope="module")
def errors() -> dict[tuple[str, str, int], np.ndarray]:
    return _errors()


def test_the_data_is_what_its_header_says() -> None:
    rows = _rows()
    assert sum(len(tokens) for tokens, _ in rows.values()) == 1176
    assert {name for name, _, _ in rows} == set(MODELS.values())
    assert {ranks for _, _, ranks in rows} == {1, 2, 4, 8, 16, 32}


def test_the_fused_moe_layer_is_within_a_quarter_of_the_measurements(
    errors: dict[tuple[str, str, int], np.ndarray],
) -> None:
    every = np.abs(np.concatenate(list(errors.values())))
    assert np.median(every) <= 0.25
    assert np.quantile(every, 0.9) <= 0.6


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_each_weight_format_is_within_a_third(errors: dict[tuple[str, str, int], np.ndarray], dtype: str) -> None:
    """Per model and format, the median error stays within a third either way: no format's GEMM
    efficiency is off by a factor."""
    for name in MODELS.values():
        per_model = np.concatenate([e for (n, f, _), e in errors.items() if n == name and f == dtype])
        assert abs(float(np.median(per_model))) <= 1 / 3, (name, dtype)


def test_more_tokens_never_take_less_time_in_the_model() -> None:
    """The model's fused op is non-decreasing in the tokens on the rank (a property the measured
    table breaks only by noise)."""
    h200 = load_hardware("h200")
    model = load_model("qwen3-235b-a22b")
    run = moe_run(Instance(model, h200, 8, False))
    tokens = np.arange(1, 20_481, 37, dtype=np.float64)
    times = fused_moe_layer_s(run, tokens, False)
    assert np.all(np.diff(times) >= -1e-15)


# -- under expert parallelism (DeepEP) ---------------------------------------------------------------
EP_DATA = Path(__file__).resolve().parent / "data" / "aiconfigurator-deepep-moe-h200-sglang-0.5.6.csv"


def _ep_errors() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per DeepEP mode: (ranks, total tokens, predicted / measured - 1) of DeepSeek-V3's expert
    compute on the busiest rank, uniform routing (so no skew: `expert_skew` 1)."""
    h200 = load_hardware("h200")
    model = load_model("deepseek-v3")
    out: dict[str, list[tuple[float, float, float]]] = {"normal": [], "low_latency": []}
    with EP_DATA.open(encoding="utf-8") as handle:
        for row in csv.DictReader(line for line in handle if not line.startswith("#")):
            ranks, tokens = int(row["moe_ep_size"]), float(row["num_tokens"])
            # the layout of an 8-rank data-parallel-attention EP instance, over `ranks` ranks
            run = moe_run(Instance(model, h200, min(ranks, 8), True))
            run = replace(run, ranks=ranks, eff=run.eff.model_copy(update={"expert_skew": 1.0}))
            decode = row["deepep_mode"] == "low_latency"
            predicted = float(fused_moe_layer_s(run, np.array([tokens]), decode)[0])
            out[row["deepep_mode"]].append((ranks, tokens, predicted / (float(row["latency_ms"]) / 1e3) - 1.0))
    return {mode: tuple(np.array(column) for column in zip(*rows, strict=True)) for mode, rows in out.items()}  # type: ignore[misc]


def test_expert_parallel_decode_compute_is_slow_by_less_than_half() -> None:
    """The low-latency (decode) path, 2 to 32,768 tokens over 2 to 256 ranks, measured 2026-12-05:
    median |error| 33%, the model slow everywhere but a few rows, more so the more ranks (+15-30%
    on 2-16 ranks, +35-80% on 64-256): the masked GEMM of few rows per expert costs less than the
    model's tile efficiency says. Never off by 2x."""
    _, _, errors = _ep_errors()["low_latency"]
    assert len(errors) == 64
    assert np.median(np.abs(errors)) <= 0.4
    assert np.max(np.abs(errors)) < 1.0


def test_expert_parallel_prefill_compute_on_8_to_32_ranks_is_within_a_third() -> None:
    """The normal (prefill) path on the 8-32 ranks a planned instance spans (one to four nodes),
    128 to 524,288 tokens, measured: median |error| 22%. Outside that range the model's time per
    rank scales as 1 / ranks and the measured op does not: it never falls under about 0.35 ms,
    so on 64-256 ranks the model is 30-80% fast, and with 2-4 ranks it reads every local expert
    where the measurement is 1.5-4x faster. Open work (issue 35)."""
    ranks, _, errors = _ep_errors()["normal"]
    planned = (ranks >= 8) & (ranks <= 32)
    assert planned.sum() == 33
    assert np.median(np.abs(errors[planned])) <= 1 / 3


# -- dispatch and combine (DeepEP) -------------------------------------------------------------------
COMM_DATA = Path(__file__).resolve().parent / "data" / "aiconfigurator-deepep-comm.csv"


def _comm_errors() -> dict[tuple[str, int], np.ndarray]:
    """Per (DeepEP mode, nodes): predicted / measured - 1 of one MoE layer's dispatch and of its
    combine for DeepSeek-V3's shape, `tokens` per rank on 8 x nodes ranks, uniform routing."""
    model = load_model("deepseek-v3")
    layers = model.num_layers - model.moe.first_dense_layers  # type: ignore[union-attr]
    out: dict[tuple[str, int], list[float]] = {}
    with COMM_DATA.open(encoding="utf-8") as handle:
        for row in csv.DictReader(line for line in handle if not line.startswith("#")):
            nodes, tokens = int(row["nodes"]), float(row["tokens"])
            run = replace(moe_run(Instance(model, load_hardware(row["gpu"]), 8, True)), ranks=8 * nodes)
            dispatch, combine = all_to_all(run, np.array([tokens]), row["mode"] == "low_latency")
            errors = out.setdefault((row["mode"], nodes), [])
            for seconds, measured_us in ((dispatch, row["dispatch_us"]), (combine, row["combine_us"])):
                errors.append(float(seconds[0]) / layers / (float(measured_us) / 1e6) - 1)
    return {key: np.array(errors) for key, errors in out.items()}


def test_decode_dispatch_and_combine_follow_deepeps_low_latency_kernels() -> None:
    """Decode's low-latency all-to-alls, 1-2,048 tokens per GPU on one node, 2-256 on 2-8 nodes, from
    the kernel priors fitted to these rows (`ep_ll_latency_s` 13 us and 0.5 of NVLink inside a node,
    `ep_ll_nic_latency_s` 22 us across, the NIC at `scale_up_fraction`): within a fifth at every row
    of one node and within a quarter across nodes. The single 40 us latency and 0.8 of NVLink the
    model had before made one node's small batches 2.5-3x too slow and its large ones 1.7x too fast."""
    errors = _comm_errors()
    assert len(errors[("low_latency", 1)]) == 34
    assert np.max(np.abs(errors[("low_latency", 1)])) <= 0.2
    for nodes in (2, 4, 8):
        assert np.max(np.abs(errors[("low_latency", nodes)])) <= 0.25, nodes


def test_prefill_dispatch_and_combine_follow_deepeps_normal_kernels() -> None:
    """Prefill's throughput all-to-alls on one node of H100, 1-131,072 tokens per GPU
    (`ep_latency_s` 40 us, `ep_link_fraction` 0.64): median |error| 11%, never off by 40%; on two
    nodes of H200 (the NIC at `scale_up_fraction`, `nic_latency_s` 50 us) within a third at the
    token counts a prefill chunk sends (>= 1,024 per GPU). On 4 and 8 nodes the model is fast, by
    up to 58% and 65%: these rows move 20-40 GB/s per 400G NIC where DeepEP's own tables give 43-58
    (tests/data/kernel_priors.md); open work (issue 35)."""
    errors = _comm_errors()
    one_node = errors[("normal", 1)]
    assert len(one_node) == 46
    assert np.median(np.abs(one_node)) <= 0.15 and np.max(np.abs(one_node)) <= 0.4
    chunks = errors[("normal", 2)][-16:]  # 1,024 to 131,072 tokens, dispatch and combine
    assert np.max(np.abs(chunks)) <= 1 / 3
    for nodes in (4, 8):
        assert np.all(errors[("normal", nodes)] < 0.2) and np.all(errors[("normal", nodes)] > -0.7), nodes
