"""Hardware profiles: one accelerator's four dimensions, power, prices and efficiency factors.

Files keep human units in their field names (TFLOPS, GB, TB/s, Gbps); the `*_per_s`, `*_bytes`
properties convert to SI once, here, so nothing downstream ever sees a non-SI number.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pddplan.errors import InputError
from pddplan.specs.common import (
    Figure,
    Source,
    StrictModel,
    check_sources_cited,
)
from pddplan.specs.precision import ComputeDtype, weight_format

HOURS_PER_YEAR = 8760.0

#: The largest value each figure may take, with the reason. Beyond it a figure is a unit slip or an
#: attack (1e300 TFLOPS makes every step time zero and every plan free), not a chip.
FIGURE_MAXIMA: dict[str, tuple[float, str]] = {
    "compute.bf16_dense_tflops": (1e5, "TFLOPS; 1e5 is ~40x the fastest chip of 2026"),
    "compute.fp8_dense_tflops": (1e5, "TFLOPS; 1e5 is ~20x the fastest chip of 2026"),
    "compute.fp4_dense_tflops": (1e5, "TFLOPS; 1e5 is ~10x the fastest chip of 2026"),
    "memory.hbm_gb": (1e5, "GB per GPU; 100 TB is ~350x the largest HBM of 2026"),
    "memory.hbm_tb_per_s": (1e3, "TB/s; 1,000 is ~100x the fastest HBM of 2026"),
    "interconnect.scale_up_gb_per_s": (1e5, "GB/s per GPU; 1e5 is ~100x NVLink 5"),
    "interconnect.scale_up_domain": (1e5, "GPUs in one scale-up domain"),
    "interconnect.nic_gbps": (1e5, "Gbit/s per GPU; 1e5 is 125x an 800G NIC"),
    "power.tdp_w": (1e5, "W per GPU"),
    "price.rental_usd_per_gpu_hour": (1e4, "$/GPU-hour"),
    "price.purchase_usd_per_gpu": (1e8, "$ per GPU"),
    "price.amortization_years": (100, "years"),
    "price.power_usd_per_kwh": (1e3, "$/kWh"),
    "price.pue": (10, "a power usage effectiveness; real datacenters run 1.05-2"),
    "host.gpus_per_node": (1e4, "GPUs in one server"),
    "host.dram_gb_per_node": (1e6, "GB of host memory per server; 1 PB is ~250x the largest server of 2026"),
    "host.host_to_device_gb_per_s": (1e5, "GB/s per GPU; 1e5 is ~500x NVLink-C2C"),
    "host.nvme_tb_per_node": (1e5, "TB of local NVMe per server"),
    "host.nvme_read_gb_per_s_per_node": (1e5, "GB/s of NVMe reads per server"),
}
#: The smallest value a capability may take (compute, memory and interconnect divide step times,
#: and so does a host's copy bandwidth): far below any chip (the tests' toy GPUs included), and
#: far above where the arithmetic breaks (1e-300 TFLOPS made step times infinite and the
#: queueing arithmetic NaN).
FIGURE_MINIMA: dict[str, tuple[float, str]] = {
    "compute.bf16_dense_tflops": (1e-3, "TFLOPS; 1 GFLOPS, far below one CPU core"),
    "compute.fp8_dense_tflops": (1e-3, "TFLOPS; 1 GFLOPS, far below one CPU core"),
    "compute.fp4_dense_tflops": (1e-3, "TFLOPS; 1 GFLOPS, far below one CPU core"),
    "memory.hbm_gb": (1e-3, "GB per GPU; 1 MB"),
    "memory.hbm_tb_per_s": (1e-3, "TB/s; 1 GB/s, a tenth of one DDR4 channel"),
    "interconnect.scale_up_gb_per_s": (1e-3, "GB/s per GPU; 1 MB/s"),
    "interconnect.nic_gbps": (1e-3, "Gbit/s per GPU; 1 Mbit/s"),
    "host.host_to_device_gb_per_s": (1e-3, "GB/s per GPU; 1 MB/s"),
}
#: figures that count things and must be whole numbers
WHOLE_FIGURES = ("interconnect.scale_up_domain", "host.gpus_per_node")
#: a per-step, per-layer or per-request overhead above a minute is a unit slip (ms written as s)
OverheadSeconds = Annotated[float, Field(ge=0, le=60)]


class ComputeSpec(StrictModel):
    """Dense (no structured sparsity) peak matrix throughput per dtype, in TFLOPS (1e12 FLOP/s)."""

    bf16_dense_tflops: Figure
    fp8_dense_tflops: Figure | None = Field(default=None, description="omit when the chip has no FP8")
    fp4_dense_tflops: Figure | None = Field(default=None, description="omit when the chip has no FP4")


class MemorySpec(StrictModel):
    """Device memory: capacity in GB (1e9 bytes) and bandwidth in TB/s (1e12 bytes/s)."""

    hbm_gb: Figure
    hbm_tb_per_s: Figure


class InterconnectSpec(StrictModel):
    """Scale-up (NVLink-class) bandwidth per GPU, one direction, and scale-out NIC per GPU."""

    scale_up_gb_per_s: Figure = Field(description="per GPU, one direction, GB/s (1e9 bytes/s)")
    scale_up_domain: Figure = Field(description="GPUs in one scale-up domain (node or rack)")
    nic_gbps: Figure = Field(description="scale-out (RDMA) NIC bandwidth per GPU, Gbit/s")


class HostSpec(StrictModel):
    """The server a GPU sits in: its host memory and local NVMe, the tiers a prefix cache may spill
    to below HBM (`pddplan.cache`), and the bandwidths that load a cached prefix back into HBM."""

    gpus_per_node: Figure = Field(description="GPUs in one server (the share of its memory and disks each GPU gets)")
    dram_gb_per_node: Figure = Field(description="host memory per server, GB (1e9 bytes)")
    host_to_device_gb_per_s: Figure = Field(description="host-to-GPU copy bandwidth per GPU (PCIe or C2C), GB/s")
    nvme_tb_per_node: Figure = Field(description="local NVMe capacity per server, TB (1e12 bytes)")
    nvme_read_gb_per_s_per_node: Figure = Field(description="NVMe read bandwidth of the whole server, GB/s")


class PowerSpec(StrictModel):
    """Board power."""

    tdp_w: Figure


class PriceSpec(StrictModel):
    """What one GPU costs: rental per hour, or purchase amortized plus power (the alternative)."""

    rental_usd_per_gpu_hour: Figure | None = None
    purchase_usd_per_gpu: Figure | None = None
    amortization_years: Figure | None = None
    power_usd_per_kwh: Figure | None = None
    pue: Figure | None = Field(default=None, description="datacenter power usage effectiveness")


#: Efficiency fields of step-time model v1 that v2 replaced, with what replaced them.
REMOVED_EFFICIENCY_FIELDS = {
    "layer_overhead_s": "kernel_floor_s (per kernel, times the kernels a layer launches)",
    "moe_layer_overhead_s": "kernel_floor_s (MoE layers launch more kernels) and the grouped-GEMM curve",
}


class Efficiency(StrictModel):
    """How far real kernels fall short of the datasheet, one curve per kernel family (docs/model.md).

    Each curve saturates, f(x) = f_max * x / (x + x_half):
    - dense GEMM: compute `compute_max_fraction` (bf16; `fp8_compute_max_fraction` for fp8,
      `fp4_compute_max_fraction` for fp4) over M rows with `compute_half_tokens`; weights
      stream at `memory_fraction` of HBM (`fp4_memory_fraction` for 4-bit floats with their scales);
    - grouped MoE GEMM: `expert_compute_max_fraction` over rows per expert with `expert_half_rows`;
      expert weights stream at `expert_memory_fraction`; the MoE layer's routing, permutation and
      activation kernels move their bytes at `glue_memory_fraction` of HBM; the busiest
      expert-parallel rank carries `expert_skew` times the mean load beyond uniform routing's;
    - expert-parallel dispatch and combine, in the two kernel modes engines run: prefill's
      throughput kernels wait `ep_latency_s` inside a scale-up domain (`nic_latency_s` across) and
      move their bytes at `ep_link_fraction` of the scale-up link; decode's low-latency kernels wait
      `ep_ll_latency_s` (`ep_ll_nic_latency_s` across domains) at `ep_ll_link_fraction` of it; over
      the NIC both reach `scale_up_fraction` of it;
    - attention (FlashAttention / FlashMLA class): `attention_compute_fraction` times a parallelism
      term over thread blocks (`attention_half_ctas`) times a work term over keys per query
      (`attention_half_keys`); its KV reads reach `kv_memory_fraction` of HBM over bytes per GPU per
      layer with `kv_half_bytes`;
    - collectives: `scale_up_fraction` of the link plus a latency per collective
      (`collective_latency_s` inside a scale-up domain, `nic_latency_s` across domains);
    - every kernel a step launches costs `kernel_floor_s` on top of its work; the engine's host
      work per step is `step_overhead_s`; a decode step the engine launches eagerly (no CUDA graph
      captured for its batch) also waits for its host to issue each kernel, `launch_gap_s` apart;
      `request_overhead_s` is serving time per request, never part of a step.
    """

    compute_max_fraction: float = Field(gt=0, le=1, description="dense GEMM plateau, fraction of peak FLOP/s")
    fp8_compute_max_fraction: float = Field(
        default=0.65, gt=0, le=1, description="dense fp8/fp4 GEMM plateau, fraction of that dtype's peak FLOP/s"
    )
    compute_half_tokens: float = Field(
        ge=0, le=10_000_000, description="GEMM rows (M) where dense GEMMs reach half their plateau"
    )
    fp4_compute_max_fraction: float = Field(
        default=0.42, gt=0, le=1, description="dense fp4 GEMM plateau, fraction of the fp4 peak FLOP/s"
    )
    memory_fraction: float = Field(gt=0, le=1, description="HBM efficiency of streaming dense weights")
    fp4_memory_fraction: float = Field(
        default=0.65, gt=0, le=1, description="HBM efficiency of streaming 4-bit float weights, scales included"
    )
    expert_compute_max_fraction: float = Field(
        default=0.65, gt=0, le=1, description="grouped MoE GEMM plateau, fraction of peak FLOP/s"
    )
    expert_half_rows: float = Field(
        default=180.0, ge=0, le=10_000_000, description="rows per expert where grouped GEMMs reach half their plateau"
    )
    expert_memory_fraction: float = Field(
        default=0.7, gt=0, le=1, description="HBM efficiency of grouped MoE expert GEMMs (many small weights)"
    )
    glue_memory_fraction: float = Field(
        default=0.4,
        gt=0,
        le=1,
        description="HBM efficiency of the MoE layer's routing, permutation and activation kernels",
    )
    expert_skew: float = Field(
        default=1.18,
        ge=1,
        le=8,
        description="the busiest expert-parallel rank's load over the mean beyond uniform routing's",
    )
    attention_compute_fraction: float = Field(gt=0, le=1, description="attention kernel plateau, fraction of bf16 peak")
    attention_half_ctas: float = Field(
        default=100.0,
        ge=0,
        le=1_000_000,
        description="attention thread blocks (128-query tiles x heads) at half the plateau",
    )
    attention_half_keys: float = Field(
        default=450.0, ge=0, le=10_000_000, description="keys per query at half the plateau"
    )
    attention_half_head_dim: float = Field(
        default=54.0,
        ge=0,
        le=10_000,
        description="GQA/MHA attention: head dim at half the plateau (the plateau is set at head dim 128)",
    )
    kv_memory_fraction: float = Field(default=0.9, gt=0, le=1, description="HBM efficiency of KV reads at large reads")
    kv_half_bytes: float = Field(
        default=25e6, ge=0, le=1e12, description="KV bytes per GPU per layer where KV reads reach half their best"
    )
    scale_up_fraction: float = Field(gt=0, le=1)
    collective_latency_s: OverheadSeconds = Field(description="one collective's latency inside a scale-up domain")
    nic_latency_s: OverheadSeconds = Field(default=5e-5, description="one collective's latency across scale-up domains")
    ep_latency_s: OverheadSeconds = Field(
        default=4e-5,
        description="one expert-parallel dispatch or combine's latency inside a scale-up domain, prefill's "
        "throughput kernels",
    )
    ep_link_fraction: float = Field(
        default=0.64, gt=0, le=1, description="fraction of the scale-up link prefill's dispatch and combine reach"
    )
    ep_ll_latency_s: OverheadSeconds = Field(
        default=1.3e-5,
        description="one expert-parallel dispatch or combine's latency inside a scale-up domain, decode's "
        "low-latency kernels",
    )
    ep_ll_nic_latency_s: OverheadSeconds = Field(
        default=2.2e-5,
        description="one low-latency (decode) dispatch or combine's latency across scale-up domains",
    )
    ep_ll_link_fraction: float = Field(
        default=0.5, gt=0, le=1, description="fraction of the scale-up link decode's dispatch and combine reach"
    )
    kernel_floor_s: OverheadSeconds = Field(default=5e-6, description="device time every kernel costs beyond its work")
    step_overhead_s: OverheadSeconds = Field(description="engine host work per step: scheduling, batch assembly")
    launch_gap_s: OverheadSeconds = Field(
        default=3e-5, description="host time per kernel of a decode step launched eagerly (no CUDA graph)"
    )
    request_overhead_s: OverheadSeconds = Field(
        default=0.01, description="per prefilled request: scheduling, tokenization, first-token return"
    )
    source: str = Field(min_length=1, description="how these factors were obtained")

    @model_validator(mode="before")
    @classmethod
    def _no_v1_fields(cls, data: object) -> object:
        """A profile written for step-time model v1 says what replaced its removed factors."""
        if isinstance(data, dict):
            for name, replacement in REMOVED_EFFICIENCY_FIELDS.items():
                if name in data:
                    raise ValueError(
                        f"{name}: removed in step-time model v2, replaced by {replacement}; "
                        "drop the factor and recalibrate (`pddplan calibrate`)"
                    )
        return data


class HardwareProfile(StrictModel):
    """One accelerator type."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    description: str
    stands_for: str | None = Field(default=None, description="for generic profiles: what it models and why")
    compute: ComputeSpec
    memory: MemorySpec
    interconnect: InterconnectSpec
    power: PowerSpec
    price: PriceSpec
    host: HostSpec | None = Field(
        default=None, description="the server's host memory and NVMe (prefix-cache tiers below HBM); omit: unknown"
    )
    efficiency: Efficiency | None = Field(default=None, description="omit to use the shipped defaults")
    stack_efficiency: dict[str, Efficiency] = Field(
        default_factory=dict,
        description="factors calibrated to one serving stack (engine and release line, e.g. sglang-0.5), by stack name",
    )
    sources: dict[str, Source] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sources_resolve(self) -> HardwareProfile:
        check_sources_cited(self.figures(), self.sources)
        return self

    @model_validator(mode="after")
    def _capabilities_positive(self) -> HardwareProfile:
        """Compute, memory and interconnect figures divide step times: a known one must be > 0, and
        at least its FIGURE_MINIMA bound."""
        for path, figure in self.figures().items():
            capability = path.split(".")[0] in ("compute", "memory", "interconnect") or path == "host.gpus_per_node"
            if capability and figure.value is not None and figure.value <= 0:
                raise ValueError(f"{path} = {figure.value:g}: must be > 0 (or null when unknown)")
            if path in FIGURE_MINIMA and figure.value is not None and figure.value < FIGURE_MINIMA[path][0]:
                minimum, reason = FIGURE_MINIMA[path]
                raise ValueError(f"{path}.value = {figure.value:g}: must be at least {minimum:g} ({reason})")
        return self

    @model_validator(mode="after")
    def _figures_physical(self) -> HardwareProfile:
        """Every known figure is at most its FIGURE_MAXIMA bound; counts are whole numbers."""
        for path, figure in self.figures().items():
            if figure.value is None:
                continue
            maximum, reason = FIGURE_MAXIMA[path]
            if figure.value > maximum:
                raise ValueError(f"{path}.value = {figure.value:g}: must be at most {maximum:g} ({reason})")
            if path in WHOLE_FIGURES and figure.value != int(figure.value):
                raise ValueError(f"{path}.value = {figure.value:g}: must be a whole number")
        return self

    def figures(self) -> dict[str, Figure]:
        """Every figure of the profile by its dotted field path."""
        out: dict[str, Figure] = {}
        for group_name in ("compute", "memory", "interconnect", "power", "price", "host"):
            group = getattr(self, group_name)
            if group is None:
                continue
            for field_name in type(group).model_fields:
                value = getattr(group, field_name)
                if isinstance(value, Figure):
                    out[f"{group_name}.{field_name}"] = value
        return out

    def require(self, path: str) -> float:
        """The value of a figure; a clear InputError when the profile leaves it unknown."""
        group, _, name = path.partition(".")
        figure = getattr(getattr(self, group, None), name, None)
        if not isinstance(figure, Figure) or figure.value is None:
            raise InputError(
                f"hardware '{self.name}': {path} is unknown ({figure.source if figure else 'not set'}); "
                "set it in the profile before using this GPU"
            )
        return figure.value

    def gemm_dtype(self, weights: str) -> ComputeDtype:
        """The dtype a GEMM on weights of format `weights` runs at on this chip: the format's own
        where the chip has tensor cores for it, else bf16 (weight-only: the kernel dequantizes the
        weights and multiplies at bf16, as Marlin W4A16 / W8A16 and Triton MXFP4 on Hopper do)."""
        fmt = weight_format(weights)
        if fmt.weight_only or fmt.compute == "bf16":
            return "bf16"
        figure: Figure | None = getattr(self.compute, f"{fmt.compute}_dense_tflops")
        return fmt.compute if figure is not None and figure.value is not None else "bf16"

    # SI accessors -----------------------------------------------------------------------------
    def peak_flops_per_s(self, dtype: ComputeDtype) -> float:
        """Dense peak FLOP/s for `dtype`; a dtype the chip lacks falls back to the next wider one."""
        order: list[ComputeDtype] = ["fp4", "fp8", "bf16"]
        for candidate in order[order.index(dtype) :]:
            figure: Figure | None = getattr(self.compute, f"{candidate}_dense_tflops")
            if figure is not None and figure.value is not None:
                return figure.value * 1e12
        return self.require("compute.bf16_dense_tflops") * 1e12

    @property
    def hbm_bytes(self) -> float:
        return self.require("memory.hbm_gb") * 1e9

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.require("memory.hbm_tb_per_s") * 1e12

    @property
    def scale_up_bytes_per_s(self) -> float:
        return self.require("interconnect.scale_up_gb_per_s") * 1e9

    @property
    def scale_up_domain(self) -> int:
        return int(self.require("interconnect.scale_up_domain"))

    @property
    def nic_bytes_per_s(self) -> float:
        return self.require("interconnect.nic_gbps") * 1e9 / 8

    def host_figure(self, name: str) -> float | None:
        """A `host` figure's value (None when the profile has no host section or leaves it unknown)."""
        figure = getattr(self.host, name, None) if self.host is not None else None
        return figure.value if isinstance(figure, Figure) else None

    @property
    def tdp_w(self) -> float:
        return self.require("power.tdp_w")

    def cost_usd_per_gpu_hour(self, basis: Literal["rental", "purchase"] = "rental") -> float:
        """Hourly cost of one GPU.

        rental:   rental_usd_per_gpu_hour
        purchase: purchase_usd_per_gpu / (amortization_years * 8760 h)
                  + tdp_w / 1000 * pue * power_usd_per_kwh
        """
        if basis == "rental":
            return self.require("price.rental_usd_per_gpu_hour")
        capex = self.require("price.purchase_usd_per_gpu") / (self.require("price.amortization_years") * HOURS_PER_YEAR)
        power = self.tdp_w / 1000.0 * self.require("price.pue") * self.require("price.power_usd_per_kwh")
        return capex + power
