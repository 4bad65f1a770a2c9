"""The efficiency factors that turn datasheet peaks into real step times, and their defaults.

A hardware profile may carry its own calibrated `efficiency` block (written by `pddplan
calibrate --gpu`); otherwise the shipped defaults apply. The defaults live in
`default_efficiency.yaml` beside this module and were fitted across every GPU by
`pddplan calibrate tests/data/measurements.csv --all --output pddplan/perf/default_efficiency.yaml`
to the `fit` rows of the public measurements (README "Accuracy", docs/model.md).
"""

from __future__ import annotations

from pathlib import Path

from pddplan.loading import read_data, validate
from pddplan.specs.hardware import Efficiency, HardwareProfile

DEFAULT_EFFICIENCY_PATH = Path(__file__).with_name("default_efficiency.yaml")


def _load_default() -> Efficiency:
    data = read_data(DEFAULT_EFFICIENCY_PATH)
    block = data.get("efficiency", data) if isinstance(data, dict) else data
    return validate(Efficiency, block, str(DEFAULT_EFFICIENCY_PATH))


DEFAULT_EFFICIENCY = _load_default()


def efficiency_of(hardware: HardwareProfile) -> Efficiency:
    """The profile's own calibrated factors, or the shipped defaults."""
    return hardware.efficiency or DEFAULT_EFFICIENCY
