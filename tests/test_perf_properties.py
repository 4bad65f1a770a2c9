"""Properties of the performance core that must hold for every catalog model, GPU and input.

Each is a hypothesis property test over real catalog models and GPUs:
  - more cached tokens never make a prefill of the same new tokens faster;
  - a bigger decode batch never shortens the step, and never lowers throughput (batch / step);
  - a bigger TP degree never raises per-GPU weight memory;
  - an extend of k >= 2 tokens costs less than k separate decode steps;
  - more HBM bandwidth never slows a step;
  - more bytes per KV element never shrink KV bytes;
and the numpy vectorization gives the same numbers as element-by-element scalar calls.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import example, given, reject, settings
from hypothesis import strategies as st

from pddplan.errors import LayoutError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.kv import incremental_kv_bytes, kv_bytes_per_token, request_kv_bytes
from pddplan.perf.memory import memory_budget
from pddplan.perf.roofline import Instance, decode_step_time, extend_time, prefill_time, step_time
from pddplan.specs.common import Figure
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import ModelArchitecture

MODELS = ("llama-3.1-8b", "deepseek-v3.2", "qwen3-235b-a22b", "gpt-oss-120b", "qwen3-next-80b-a3b")
GPUS = ("h100-sxm", "h200", "gpu-a", "gpu-b", "mi300x")
TPS = (1, 2, 4, 8, 16)

REL = 1e-12  # floating-point slack for "never smaller" comparisons of sums of the same terms

PROPERTY = settings(max_examples=60, deadline=None)


@cache
def model(name: str, kv_dtype: str | None = None) -> ModelArchitecture:
    return load_model(name, kv_dtype)  # type: ignore[arg-type]


@cache
def gpu(name: str) -> HardwareProfile:
    return load_hardware(name)


def with_figure(hardware: HardwareProfile, group: str, field: str, value: float) -> HardwareProfile:
    """A copy of `hardware` with one figure replaced."""
    section = getattr(hardware, group)
    figure = Figure(value=value, source="assumption: property test")
    return hardware.model_copy(update={group: section.model_copy(update={field: figure})})


@cache
def instance(model_name: str, gpu_name: str, tp: int) -> Instance:
    return Instance(model(model_name), gpu(gpu_name), tp)


models = st.sampled_from(MODELS)
gpus = st.sampled_from(GPUS)
tps = st.sampled_from(TPS)
contexts = st.integers(min_value=0, max_value=200_000)


# -- cached tokens --------------------------------------------------------------------------------
@PROPERTY
@given(
    models,
    gpus,
    tps,
    st.integers(min_value=1, max_value=70_000),
    contexts,
    contexts,
    st.sampled_from([None, 512, 2048, 8192]),
)
# sliding layers once ran at the full layers' efficiency, which rose with the context they never see
@example("gpt-oss-120b", "h100-sxm", 16, 23, 14, 161, None)
def test_more_cached_tokens_never_speed_up_a_prefill(
    model_name: str, gpu_name: str, tp: int, new: int, c1: int, c2: int, chunk: int | None
) -> None:
    low, high = sorted((c1, c2))
    inst = instance(model_name, gpu_name, tp)
    fast = float(prefill_time(inst, new, low, chunk))
    slow = float(prefill_time(inst, new, high, chunk))
    assert slow >= fast * (1 - REL)


# -- decode batch ---------------------------------------------------------------------------------
@PROPERTY
@given(
    models,
    gpus,
    tps,
    st.integers(min_value=1, max_value=2048),
    st.integers(min_value=1, max_value=2048),
    st.integers(min_value=0, max_value=131_072),
)
def test_bigger_decode_batch_slower_step_but_more_throughput(
    model_name: str, gpu_name: str, tp: int, b1: int, b2: int, context: int
) -> None:
    small, big = sorted((b1, b2))
    inst = instance(model_name, gpu_name, tp)
    t_small = float(decode_step_time(inst, small, context))
    t_big = float(decode_step_time(inst, big, context))
    assert t_big >= t_small * (1 - REL)
    assert big / t_big >= small / t_small * (1 - REL)


# -- TP degree and weight memory ------------------------------------------------------------------
def weights_per_gpu(model_name: str, gpu_name: str, tp: int, ep: bool | None) -> float:
    """Per-GPU weight bytes; the HBM is made huge so the budget never refuses for lack of room. A
    layout engines refuse (tensor-parallel attention over more ranks than split the heads, such as
    qwen3-next's 16 heads on 32) is not an example."""
    roomy = with_figure(gpu(gpu_name), "memory", "hbm_gb", 1e9)
    try:
        instance = Instance(model(model_name), roomy, tp, ep)
    except LayoutError:
        reject()
    return memory_budget(instance).weight_bytes


@PROPERTY
@given(models, gpus, st.sampled_from((1, 2, 4, 8, 16, 32)), st.sampled_from((1, 2, 4, 8, 16, 32)))
@example("gpt-oss-120b", "h100-sxm", 8, 16)
def test_bigger_tp_never_raises_weight_memory(model_name: str, gpu_name: str, tp1: int, tp2: int) -> None:
    """With the default parallelism, per-GPU weights never grow with TP within one parallel mode;
    the automatic switch from TP to EP past one scale-up domain may add a little (the non-expert
    weights are replicated under data-parallel attention), and only at that switch, where EP
    replaces per-layer all-reduces over the NIC by one all-to-all."""
    small, big = sorted((tp1, tp2))
    bigger = weights_per_gpu(model_name, gpu_name, big, None)
    smaller = weights_per_gpu(model_name, gpu_name, small, None)
    if bigger > smaller:
        domain = gpu(gpu_name).scale_up_domain
        assert model(model_name).moe is not None
        assert small <= domain < big
        assert weights_per_gpu(model_name, gpu_name, big, False) <= weights_per_gpu(model_name, gpu_name, small, False)


@PROPERTY
@given(models, gpus, st.sampled_from((1, 2, 4, 8, 16, 32)), st.sampled_from((1, 2, 4, 8, 16, 32)), st.booleans())
def test_bigger_tp_never_raises_weight_memory_in_a_fixed_mode(
    model_name: str, gpu_name: str, tp1: int, tp2: int, ep: bool
) -> None:
    small, big = sorted((tp1, tp2))
    assert weights_per_gpu(model_name, gpu_name, big, ep) <= weights_per_gpu(model_name, gpu_name, small, ep)


# -- extend against decode ------------------------------------------------------------------------
@PROPERTY
@given(
    models,
    gpus,
    tps,
    st.integers(min_value=2, max_value=2048),
    st.integers(min_value=0, max_value=131_072),
)
def test_extend_is_cheaper_than_separate_decode_steps(
    model_name: str, gpu_name: str, tp: int, k: int, context: int
) -> None:
    inst = instance(model_name, gpu_name, tp)
    extend = float(extend_time(inst, k, context))
    # k separate single-sequence decode steps, each on a context one token longer
    separate = float(np.sum(decode_step_time(inst, 1, context + np.arange(k))))
    assert extend < separate
    # and also against k decode steps all at the starting context
    assert extend < k * float(decode_step_time(inst, 1, context))


# -- bandwidth ------------------------------------------------------------------------------------
@PROPERTY
@given(
    models,
    gpus,
    tps,
    st.floats(min_value=1.0, max_value=20.0),
    st.integers(min_value=1, max_value=16_384),
    st.integers(min_value=0, max_value=131_072),
    st.integers(min_value=1, max_value=512),
)
def test_more_bandwidth_never_slows_a_step(
    model_name: str, gpu_name: str, tp: int, factor: float, new: int, context: int, batch: int
) -> None:
    base = gpu(gpu_name)
    faster = with_figure(base, "memory", "hbm_tb_per_s", base.hbm_bytes_per_s / 1e12 * factor)
    slow = Instance(model(model_name), base, tp)
    fast = Instance(model(model_name), faster, tp)
    assert float(step_time(fast, new, context, batch).total_s) <= float(step_time(slow, new, context, batch).total_s)
    assert float(prefill_time(fast, new, context, 4096)) <= float(prefill_time(slow, new, context, 4096))


# -- KV dtype -------------------------------------------------------------------------------------
@PROPERTY
@given(
    models,
    st.integers(min_value=0, max_value=300_000),
    st.floats(min_value=0.0, max_value=1.0),
    st.sampled_from([1, 16, 64, 256]),
)
def test_more_kv_dtype_bytes_never_shrink_kv_bytes(model_name: str, tokens: int, hit: float, page: int) -> None:
    narrow = model(model_name, "fp8")
    wide = model(model_name, "bf16")
    assert kv_bytes_per_token(wide) >= kv_bytes_per_token(narrow) > 0
    assert float(request_kv_bytes(wide, tokens, page)) >= float(request_kv_bytes(narrow, tokens, page))
    assert float(incremental_kv_bytes(wide, tokens, hit, page)) >= float(
        incremental_kv_bytes(narrow, tokens, hit, page)
    )


# -- vectorization --------------------------------------------------------------------------------
FIELDS = (
    "total_s",
    "dense_gemm_s",
    "expert_gemm_s",
    "attention_s",
    "communication_s",
    "overhead_s",
    "compute_bound_s",
    "memory_bound_s",
)


@settings(max_examples=25, deadline=None)
@given(
    models,
    gpus,
    tps,
    st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=20_000),
            st.integers(min_value=0, max_value=150_000),
            st.integers(min_value=1, max_value=256),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_step_time_arrays_match_scalar_calls(
    model_name: str, gpu_name: str, tp: int, points: list[tuple[int, int, int]]
) -> None:
    inst = instance(model_name, gpu_name, tp)
    n, c, b = (np.array(col, dtype=float) for col in zip(*points, strict=True))
    vector = step_time(inst, n, c, b)
    bounds = vector.bound
    for i, (ni, ci, bi) in enumerate(points):
        scalar = step_time(inst, ni, ci, bi)
        for field in FIELDS:
            assert float(getattr(vector, field)[i]) == pytest.approx(float(getattr(scalar, field)), rel=1e-12)
        assert bounds[i] == str(scalar.bound)


@settings(max_examples=25, deadline=None)
@given(
    models,
    gpus,
    tps,
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=40_000), st.integers(min_value=0, max_value=150_000)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([None, 1024, 8192]),
)
def test_prefill_time_arrays_match_scalar_calls(
    model_name: str, gpu_name: str, tp: int, points: list[tuple[int, int]], chunk: int | None
) -> None:
    inst = instance(model_name, gpu_name, tp)
    n = np.array([p[0] for p in points])
    c = np.array([p[1] for p in points])
    vector = prefill_time(inst, n, c, chunk)
    assert vector.shape == (len(points),)
    for i, (ni, ci) in enumerate(points):
        assert float(vector[i]) == pytest.approx(float(prefill_time(inst, ni, ci, chunk)), rel=1e-12)
    # broadcasting: one cached length for every prompt
    shared = prefill_time(inst, n, 1000, chunk)
    for i, ni in enumerate(n):
        assert float(shared[i]) == pytest.approx(float(prefill_time(inst, int(ni), 1000, chunk)), rel=1e-12)


def test_decode_step_time_broadcasts_batch_against_context() -> None:
    inst = instance("deepseek-v3.2", "gpu-b", 8)
    batch = np.array([1, 16, 128])[:, None]
    context = np.array([1000, 64_000])[None, :]
    grid = decode_step_time(inst, batch, context)
    assert grid.shape == (3, 2)
    for i, b in enumerate((1, 16, 128)):
        for j, c in enumerate((1000, 64_000)):
            assert float(grid[i, j]) == pytest.approx(float(decode_step_time(inst, b, c)), rel=1e-12)
