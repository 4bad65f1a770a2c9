"""The efficiency factors that turn datasheet peaks into real step times, and their defaults.

A hardware profile may carry its own calibrated `efficiency` block (written by `pddplan
calibrate --gpu`); otherwise the shipped defaults apply. The defaults live in
`default_efficiency.yaml` beside this module and were fitted across every GPU by
`pddplan calibrate tests/data/measurements.csv --all --output pddplan/perf/default_efficiency.yaml`
to the `fit` rows of the public measurements (README "Accuracy", docs/model.md).
"""

from __future__ import annotations

from pathlib import Path

from pddplan.errors import InputError
from pddplan.specs.hardware import Efficiency, HardwareProfile
from pddplan.specs.precision import ComputeDtype, weight_format
from pddplan.support.loading import read_data, validate

DEFAULT_EFFICIENCY_PATH = Path(__file__).with_name("default_efficiency.yaml")


def _load_default() -> Efficiency:
    data = read_data(DEFAULT_EFFICIENCY_PATH)
    block = data.get("efficiency", data) if isinstance(data, dict) else data
    return validate(Efficiency, block, str(DEFAULT_EFFICIENCY_PATH))


DEFAULT_EFFICIENCY = _load_default()


def efficiency_of(hardware: HardwareProfile, stack: str | None = None) -> Efficiency:
    """The factors of `stack` on this GPU if given; else the profile's own factors, or the defaults.

    Step times depend on the serving software as much as on the chip (the same DeepSeek decode
    step on one H200 server measures 13 ms with SGLang 0.5.7 and 31-43 ms with early-2025 builds),
    so a profile may carry factors calibrated per stack next to its stack-agnostic ones.
    """
    if stack is not None:
        if stack not in hardware.stack_efficiency:
            known = ", ".join(sorted(hardware.stack_efficiency)) or "none"
            command = f"pddplan calibrate MEASUREMENTS.csv --gpu {hardware.name} --stack {stack}"
            raise InputError(
                f"stack = {stack!r}: hardware profile '{hardware.name}' has no factors for it "
                f"(calibrated stacks: {known}); calibrate them with `{command}`"
            )
        return hardware.stack_efficiency[stack]
    return hardware.efficiency or DEFAULT_EFFICIENCY


def compute_plateau(eff: Efficiency, dtype: ComputeDtype) -> float:
    """The dense GEMM plateau of `dtype`: `compute_max_fraction` (bf16), `fp8_compute_max_fraction`,
    `fp4_compute_max_fraction`."""
    if dtype == "fp4":
        return eff.fp4_compute_max_fraction
    if dtype == "fp8":
        return eff.fp8_compute_max_fraction
    return eff.compute_max_fraction


def streaming_fraction(eff: Efficiency, dtype: str, base: float) -> float:
    """HBM efficiency of streaming weights of `dtype`: `base` (the bf16/fp8 figure), scaled by
    `fp4_memory_fraction` / `memory_fraction` for 4-bit floats (NVFP4 MoE weights stream at
    0.60-0.68 of HBM where BF16 reaches 0.81-0.87)."""
    if weight_format(dtype).compute == "fp4":
        return base * min(1.0, eff.fp4_memory_fraction / eff.memory_fraction)
    return base
