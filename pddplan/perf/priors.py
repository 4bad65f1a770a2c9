"""Priors of the step-time model's efficiency curves, from public kernel microbenchmarks.

Each factor has a prior value and a plausible range, both read off published measurements
(tests/data/kernel_priors.md lists every figure with its source; docs/model.md shows the curves).
`pddplan calibrate` starts at the priors and fits the factors around them: a ridge term pulls each
one towards its prior by (x - prior) / spread, the spread being how far the public figures scatter
(so a kernel curve the microbenchmarks pin down moves little, an engine overhead they barely
constrain moves freely), and the range bounds it. A factor that ends on a bound says the model's
structure, not the data, limits the fit, and `calibrate` warns about it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pddplan.specs.hardware import Efficiency


@dataclass(frozen=True)
class Prior:
    """One factor's prior: its value, its plausible range, whether it is fitted on a log scale
    (ranges spanning orders of magnitude), the public figures it comes from, and whether
    `calibrate` fits it at all (a structural constant of the kernels is not fitted)."""

    name: str
    value: float
    low: float
    high: float
    log: bool
    spread: float  # one standard deviation of the prior, in fit units (natural log for log factors)
    source: str
    fitted: bool = True
    per_stack: bool = False  # a serving stack's software cost, fitted only to one stack's rows
    #: How far one serving stack's value scatters around its GPU's, where that differs from `spread`
    #: (a stack-level fit pulls towards the GPU's value with this spread instead).
    stack_spread: float | None = None
    stack_source: str = ""


#: aiconfigurator's collector, SGLang's DeepEP dispatch and combine (hidden 7168, top-8 of 256 experts,
#: fp8 dispatch, bf16 combine), tests/data/aiconfigurator-deepep-comm.csv, least-squares fitted to
#: `moe.all_to_all`'s t = alpha + copies x bytes / (e x link) (tests/data/kernel_priors.md).
DEEPEP_SOURCE = (
    "github:ai-dynamo/aiconfigurator@095f58a5 aic-core/src/aiconfigurator_core/systems/data/h200_sxm/comm/"
    "sglang/0.5.6.post2/wideep_deepep_{ll,normal}_perf.parquet"
)

PRIORS: tuple[Prior, ...] = (
    Prior(
        name="compute_max_fraction",
        value=0.78,
        low=0.5,
        high=0.9,
        log=False,
        spread=0.05,
        source="cuBLAS BF16 large square GEMMs 0.80-0.81 of H100 peak (0.68 at n=2048)",
    ),
    Prior(
        name="fp8_compute_max_fraction",
        value=0.65,
        low=0.35,
        high=0.85,
        log=False,
        spread=0.07,
        source="DeepGEMM FP8 (1x128 scaling) on H800: 0.57-0.77 of FP8 peak at M=4096 with K >= 1536, 0.39 at K=512",
    ),
    Prior(
        name="fp4_compute_max_fraction",
        value=0.42,
        low=0.2,
        high=0.85,
        log=False,
        spread=0.07,
        source="vLLM CUTLASS NVFP4 GEMMs on SM100 (vLLM PR #20646): 3646-3904 TFLOP/s at M = 4096-16384, "
        "0.41-0.43 of the 9000 peak (0.24 at M = 512); FP8 there 0.46-0.57 (vLLM PR #19566)",
    ),
    Prior(
        name="compute_half_tokens",
        value=64.0,
        low=16.0,
        high=600.0,
        log=True,
        spread=0.5,
        fitted=False,
        source="Hopper tensor-core tiles are 64 rows (wgmma M): fewer rows pad the tile; with the plateau 0.78 "
        "this gives 0.62 at M=256, where cuBLAS BF16 on H100 measures 0.60",
    ),
    Prior(
        name="memory_fraction",
        value=0.85,
        low=0.6,
        high=0.95,
        log=False,
        spread=0.05,
        source="BF16 GEMMs at M <= 128 stream weights at 0.85-0.92 of H100 HBM; FP8 0.72-0.91",
    ),
    Prior(
        name="fp4_memory_fraction",
        value=0.65,
        low=0.2,
        high=0.95,
        log=False,
        spread=0.08,
        source="FlashInfer TRT-LLM NVFP4 MoE on B300 (flashinfer PR #5301): weights and scales stream at "
        "4.8-5.4 TB/s, 0.60-0.68 of 8 TB/s, where BF16 reaches 0.81-0.87; mm_fp4 at M = 1 only 0.22 (issue #1732)",
    ),
    Prior(
        name="expert_compute_max_fraction",
        value=0.65,
        low=0.35,
        high=0.85,
        log=False,
        spread=0.07,
        source="DeepGEMM grouped contiguous layout 0.61-0.68 of FP8 peak at >= 4096 rows per expert",
    ),
    Prior(
        name="expert_half_rows",
        value=180.0,
        low=16.0,
        high=1500.0,
        log=True,
        spread=0.5,
        fitted=False,
        source="DeepGEMM grouped FP8 GEMMs on H800 swept by InferSim (alibaba/InferSim bench_data/grouped_gemm "
        "@f2293dab, 142 rows): least squares over masked (decode) and contiguous (prefill) layouts gives "
        "plateau 0.66, half-saturation 160-220 rows per expert (0.30 of peak at 128 rows, 0.43 at 256, 0.54 at 512)",
    ),
    Prior(
        name="expert_memory_fraction",
        value=0.7,
        low=0.2,
        high=0.95,
        log=False,
        spread=0.12,
        source="grouped MoE GEMMs stream expert weights at 0.75-0.89 of HBM when tuned (DeepGEMM masked FP8 on "
        "H800 with >= 8 local experts, InferSim's sweep; tuned Triton fused MoE on H100, vLLM PR #24700) and at "
        "0.44-0.53 in the configurations engines ship untuned for many shapes (Triton FP8 on H200 and B200, "
        "SGLang PRs #11730 and #11816): 0.7 between them",
    ),
    Prior(
        name="glue_memory_fraction",
        value=0.4,
        low=0.15,
        high=0.9,
        log=False,
        spread=0.1,
        source="MoE permutation on H200 (tile-ai/TileOPs PR #603): gather of 512 tokens x top-8 x 7168 at "
        "1.6-1.8 TB/s, 0.33-0.38 of 4.8 TB/s; routing, align and activation kernels bandwidth-bound at "
        "1.6-2.4 TB/s (0.33-0.5) at large token counts (SGLang PRs #7794, #14133)",
    ),
    Prior(
        name="expert_skew",
        value=1.18,
        low=1.0,
        high=3.0,
        log=False,
        spread=0.15,
        source="SGLang large-scale EP blog (2025-05-05): prefill at 16,384 tokens per GPU, EP32, default expert "
        "placement 50,302 vs simulated perfect EPLB 59,337 tok/s/node: 1.18 beyond balanced routing; "
        "with EPLB and redundant experts it falls towards 1.0",
    ),
    Prior(
        name="attention_compute_fraction",
        value=0.7,
        low=0.3,
        high=0.92,
        log=False,
        spread=0.07,
        source="FlashAttention-3 and cuDNN prefill plateau 0.62-0.76 of H100/H200 BF16 peak; FA2 0.59-0.65 on A100",
    ),
    Prior(
        name="attention_half_ctas",
        value=100.0,
        low=10.0,
        high=1000.0,
        log=True,
        spread=0.7,
        source="cuDNN H200 chunked prefill with 8 heads: 0.08 of peak at 16 thread blocks, 0.31 at 64",
    ),
    Prior(
        name="attention_half_keys",
        value=450.0,
        low=50.0,
        high=4000.0,
        log=True,
        spread=0.5,
        source="cuDNN H200 causal prefill, 64 heads: 0.50 of peak at 2K tokens, 0.69 at 16K",
    ),
    Prior(
        name="attention_half_head_dim",
        value=54.0,
        low=10.0,
        high=300.0,
        log=True,
        spread=0.3,
        fitted=False,
        source="FlashAttention-3 FP16 forward on H100 at 16K: hd64 497 / 473, hd128 648 / 616, hd256 756 / 642 "
        "TFLOP/s (non-causal / causal): hd64 at 0.77 of hd128 both ways gives 54",
    ),
    Prior(
        name="kv_memory_fraction",
        value=0.9,
        low=0.6,
        high=0.96,
        log=False,
        spread=0.04,
        source="FlashInfer and cuDNN decode 0.88-0.94 of HBM at large reads; FlashMLA 0.84-0.90",
    ),
    Prior(
        name="kv_half_bytes",
        value=25000000.0,
        low=4000000.0,
        high=400000000.0,
        log=True,
        spread=0.7,
        source="cuDNN 9.27 decode on H200: 0.27 of HBM at 8.4 MB per call, 0.48 at 34 MB, 0.68 at 134 MB, "
        "0.85 at 537 MB",
    ),
    Prior(
        name="scale_up_fraction",
        value=0.8,
        low=0.4,
        high=0.97,
        log=False,
        spread=0.1,
        source="nccl-tests H100 NVLink busBw ~370 of 450 GB/s; DeepEP NVLink 0.96-0.99, one NDR NIC 0.92-0.98",
    ),
    Prior(
        name="collective_latency_s",
        value=8e-06,
        low=1e-06,
        high=0.0002,
        log=True,
        spread=0.7,
        source="custom all-reduce of small messages 4-10 us at TP 2-8 on H100 (SGLang, vLLM)",
    ),
    Prior(
        name="nic_latency_s",
        value=5e-05,
        low=5e-06,
        high=0.0005,
        log=True,
        spread=1.0,
        source="NVLSTree all-reduce 46-48 us for 4-512 B on 2 x 8 H20 (NDR); 136 us for 8 B on 2 x 8 H100",
    ),
    Prior(
        name="ep_latency_s",
        value=4e-05,
        low=5e-06,
        high=3e-04,
        log=True,
        spread=0.5,
        source="expert-parallel all-to-all inside one 8-GPU node, throughput kernels: DeepEP normal dispatch / "
        "combine on 8 x H100 37 / 48 us at 1 token per GPU, fit 41.7 us (" + DEEPEP_SOURCE + "); pplx-kernels "
        "NVLink 41.6 / 41.7 us at 1 token",
    ),
    Prior(
        name="ep_link_fraction",
        value=0.64,
        low=0.3,
        high=0.97,
        log=False,
        spread=0.1,
        source="DeepEP normal dispatch / combine on 8 x H100, 1-131,072 tokens per GPU: 0.635 of 450 GB/s "
        "with alpha 41.7 us (median |error| 14%, worst 36%; " + DEEPEP_SOURCE + ")",
        fitted=False,
    ),
    Prior(
        name="ep_ll_latency_s",
        value=1.3e-05,
        low=2e-06,
        high=1e-04,
        log=True,
        spread=0.5,
        source="DeepEP low-latency dispatch / combine on 8 x H200 (EP8), 1-2,048 tokens per GPU: 16.3 / 12.2 us "
        "at 1 token, fit alpha 13.1 us and 0.496 of 450 GB/s (median |error| 6%, worst 18%; " + DEEPEP_SOURCE + ")",
        fitted=False,
    ),
    Prior(
        name="ep_ll_nic_latency_s",
        value=2.2e-05,
        low=2e-06,
        high=3e-04,
        log=True,
        spread=0.5,
        source="DeepEP low-latency dispatch / combine on 2, 4 and 8 nodes of 8 x H200 (EP16-EP64), 2-256 tokens "
        "per GPU: 22-31 us at 2 tokens, fit alpha 22 us with the NIC at 0.8 of 50 GB/s (median |error| 10%, "
        "worst 17%; " + DEEPEP_SOURCE + ")",
        fitted=False,
    ),
    Prior(
        name="ep_ll_link_fraction",
        value=0.5,
        low=0.2,
        high=0.97,
        log=False,
        spread=0.1,
        source="the same EP8 low-latency fit: 0.496 of 450 GB/s (the kernels copy with few SMs, 0.53 at <= 128 "
        "tokens; " + DEEPEP_SOURCE + ")",
        fitted=False,
    ),
    Prior(
        name="kernel_floor_s",
        value=5e-06,
        low=1e-06,
        high=3e-05,
        log=True,
        spread=0.5,
        source="smallest cuDNN attention and GEMM calls take 4.5-6.5 us of device time on H200/B200",
        stack_spread=1.0,
        stack_source="per stack it also carries the stack's fusions (2x fewer or more kernels) and, in eager "
        "steps, the host's launch gap: ~1.5 ms per 7B decode step saved by CUDA graphs (vLLM) is ~5 us per kernel",
    ),
    Prior(
        name="step_overhead_s",
        value=0.0005,
        low=2e-05,
        high=0.1,
        log=True,
        spread=2.0,
        per_stack=True,
        source="CUDA graphs save ~1.5 ms of host time per eager decode step for 7B models (vLLM)",
    ),
    Prior(
        name="launch_gap_s",
        value=3e-05,
        low=3e-06,
        high=3e-04,
        log=True,
        spread=0.4,
        per_stack=True,
        fitted=False,
        source="batch-1 eager decode steps are host-bound, (step - 0.5 ms step overhead) / kernels counted: "
        "SGLang 26-30 us (Llama-3-8B, 8.23-9.28 ms eager against 7.06-7.35 ms graphed, sglang PR #1401), vLLM "
        "39 us (Llama-2-7B, ~12 ms, vllm PR #1440); 13 us for the C++ engine xLLM (Qwen3-0.6B, 4.20 ms, xllm "
        "PR #713); not fitted: no measured row runs an eager decode step",
    ),
    Prior(
        name="request_overhead_s",
        value=0.01,
        low=0.0001,
        high=0.5,
        log=True,
        spread=2.0,
        per_stack=True,
        source="concurrency-1 TTFT intercept ~8 ms for NIM 1.8 (Llama-3.3-70B FP8, 2 x H100)",
    ),
)

#: name -> prior
PRIOR_OF = {prior.name: prior for prior in PRIORS}
#: Software costs of one serving stack (host scheduling per step, serving time per request): the
#: defaults and a GPU's stack-agnostic factors keep their priors, only a stack's own fit moves them.
PER_STACK_FACTORS = tuple(prior.name for prior in PRIORS if prior.per_stack)

#: The factors at their priors: where every fit starts and what the catalog-level fit is pulled to.
PRIOR_EFFICIENCY = Efficiency(
    **{prior.name: prior.value for prior in PRIORS},
    source="priors: public kernel microbenchmarks (tests/data/kernel_priors.md), not fitted",
)

#: Kernel priors that differ on one GPU, where public microbenchmarks measured that GPU:
#: profile name -> factor -> (prior value, the public figures). The catalog fit starts that GPU's
#: factors from the defaults with these set, and a GPU with too few rows of its own keeps them.
GPU_PRIORS: dict[str, dict[str, tuple[float, str]]] = {
    "h20": {
        "attention_compute_fraction": (
            0.85,
            "FlashAttention-3 forward on H20 at S=2048, batch 2, hd128: 126 of 148 TFLOP/s (flash-attention "
            "issue #1310); FlashMLA on H20 120-130 (FlashMLA issue #30): a compute-poor part saturates early",
        ),
    },
    "a100-80g": {
        "attention_compute_fraction": (
            0.6,
            "FlashAttention-2 on A100 0.59-0.65 of 312 TFLOP/s (flash-attention README); cuDNN 0.47-0.59 on A100 PCIe",
        ),
        "compute_max_fraction": (0.75, "torch BF16 square GEMMs on A100: at best 0.75 of 312 TFLOP/s"),
    },
}
GPU_PRIORS["a100-40g"] = GPU_PRIORS["a100-80g"]
GPU_PRIORS["h20"].update(
    {
        "expert_compute_max_fraction": (
            0.74,
            "DeepGEMM grouped FP8 GEMMs on H20 swept by InferSim (852 rows): plateau 0.74 of 296 TFLOP/s "
            "(0.83 over its contiguous prefill rows), half-saturation 55 rows per expert: a compute-poor part "
            "saturates near its roofline ridge (37 rows)",
        ),
        "expert_half_rows": (55.0, "the same InferSim H20 fit: half-saturation 42-55 rows per expert"),
        "expert_memory_fraction": (0.8, "the same InferSim H20 fit: 0.80 of 4.0 TB/s"),
    }
)
GPU_PRIORS["b200"] = {
    "compute_max_fraction": (
        0.67,
        "torch BF16 GEMMs on SM100 (vLLM PR #19566): 1363 TFLOP/s at M = 1024, 1513 at M = 16384, 0.61-0.67 of 2250",
    ),
    "fp8_compute_max_fraction": (
        0.52,
        "vLLM CUTLASS FP8 GEMMs on SM100 (vLLM PR #19566): 2077-2545 TFLOP/s at M = 1024-16384, 0.46-0.57 of 4500",
    ),
}
GPU_PRIORS["gb200"] = GPU_PRIORS["b200"]  # the same Blackwell GPU, in a Grace-Blackwell board


def _with_priors(factors: Efficiency, own: dict[str, tuple[float, str]]) -> Efficiency:
    """`factors` with the prior values of `own` (factor -> (value, source)) in place of theirs."""
    if not own:
        return factors
    return factors.model_copy(update={name: value for name, (value, _) in own.items()})


def gpu_start(gpu: str, defaults: Efficiency) -> Efficiency:
    """Where one GPU's fit starts: the defaults with that GPU's own kernel priors (`GPU_PRIORS`)."""
    return _with_priors(defaults, GPU_PRIORS.get(gpu, {}))


#: Vidur's NCCL all-reduce measurements (torch.distributed NCCL on an fp16 buffer, kernel time, one
#: 8-GPU DGX node, 498 message sizes of 2 KiB-64 MiB at 4 ranks, tests/data/nccl_all_reduce.csv; github:microsoft/vidur
#: data/profiling/network/{a100,h100}_dgx/all_reduce.csv @7d47513), least-squares fitted to the
#: Hockney model t = alpha + 2 (n-1)/n * S / (e * link) that `roofline._communication` uses:
#: tests/data/kernel_priors.md, section "NCCL all-reduce".
NCCL_ALL_REDUCE_SOURCE = (
    "NCCL all-reduce at 4 ranks in one DGX node, Hockney fit to Vidur's 498 sizes (2 KiB-64 MiB; "
    "github:microsoft/vidur data/profiling/network/*_dgx/all_reduce.csv @7d47513): "
)

#: Serving stacks whose kernels differ from a GPU's defaults in a way their own public build
#: commands state: stack -> profile -> factor -> (prior value, the public figures). A stack-level
#: fit starts from, and is pulled towards, these values instead of the GPU's factors.
#: TensorRT-LLM 0.5's performance tables built Llama 2 without `--use_custom_all_reduce`
#: (github:NVIDIA/TensorRT-LLM docs/source/performance.md @138f96d), a flag whose help in that
#: release reads "Activates latency-optimized algorithm for all-reduce instead of NCCL"
#: (examples/llama/build.py @027cd51): its tensor-parallel all-reduces are NCCL's, ~30-55 us each
#: where the GPU factors hold a custom one-shot kernel's ~8 us.
STACK_PRIORS: dict[str, dict[str, dict[str, tuple[float, str]]]] = {
    "trtllm-0.5": {
        "h100-sxm": {
            "collective_latency_s": (2.79e-05, NCCL_ALL_REDUCE_SOURCE + "H100 alpha 27.9 us"),
            "scale_up_fraction": (0.786, NCCL_ALL_REDUCE_SOURCE + "H100 e 0.786 of 450 GB/s"),
        },
        "a100-80g": {
            "collective_latency_s": (5.48e-05, NCCL_ALL_REDUCE_SOURCE + "A100 alpha 54.8 us"),
            "scale_up_fraction": (0.611, NCCL_ALL_REDUCE_SOURCE + "A100 e 0.611 of 300 GB/s"),
        },
    },
}


def stack_start(gpu: str, stack: str, gpu_factors: Efficiency) -> Efficiency:
    """Where one (GPU, stack) fit starts: the GPU's factors with the stack's own priors
    (`STACK_PRIORS`) in place of theirs."""
    return _with_priors(gpu_factors, STACK_PRIORS.get(stack, {}).get(gpu, {}))
