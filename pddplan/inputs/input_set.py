"""The files one run reads, read once at the edge and passed down.

A workload names a model, GPU types and (optionally) capacity traces of its WAN lines; everything
below the loaders (scenario building, candidates, line pools, the simulator) takes them from an
`InputSet` instead of opening files, so nothing deep in the stack reads a file or keeps a cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pddplan.errors import InputError
from pddplan.inputs import load_hardware, workload_model
from pddplan.net.fluctuation import CapacityTrace, read_trace
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.plan import RoleName, RoleSpec
from pddplan.specs.workload import Fluctuation, Workload


@dataclass(frozen=True)
class InputSet:
    """A workload with the model, hardware profiles and capacity traces it names, loaded."""

    workload: Workload
    base_dir: Path | None
    model: ModelArchitecture
    hardware: dict[str, HardwareProfile] = field(default_factory=dict)  # by offer type, as written
    traces: dict[str, CapacityTrace] = field(default_factory=dict)  # by trace_file, as written

    def hardware_for(self, gpu: str) -> HardwareProfile:
        """The profile of an offered GPU type; InputError naming the offered ones otherwise."""
        try:
            return self.hardware[gpu]
        except KeyError:
            raise InputError(
                f"GPU type {gpu!r} is not offered by workload '{self.workload.name}' ({', '.join(self.hardware)})"
            ) from None

    def model_for(self, role: RoleName, spec: RoleSpec | None = None) -> ModelArchitecture:
        """The model as `role`'s instances store it: the workload's formats (`model`), replaced by
        the workload's `role_weights[role]`, then by the plan role's own (`spec`), field by field."""
        # a second co-located pool (`split`) stores the model as the first (`prefill`) does
        chosen = (self.workload.role_weights or {}).get("prefill" if role == "split" else role)
        weights = (spec.weights if spec is not None else None) or (chosen.weights if chosen else None)
        experts = (spec.expert_weights if spec is not None else None) or (chosen.expert_weights if chosen else None)
        if weights is None and experts is None:
            return self.model
        return self.model.with_weights(weights, experts)

    def trace_for(self, spec: Fluctuation) -> CapacityTrace | None:
        """The loaded trace of a `kind: trace` fluctuation (None for the other kinds)."""
        if spec.kind != "trace":
            return None
        assert spec.trace_file is not None
        return self.traces[spec.trace_file]

    def with_workload(self, workload: Workload) -> InputSet:
        """The same files for a variant of the workload (another rate, hit rate, SLA, price...).

        The variant must name the same model and KV dtype, offer only GPU types and traces already
        loaded: anything else needs `load_input_set` again."""
        if (workload.model, workload.kv_dtype) != (self.workload.model, self.workload.kv_dtype):
            raise ValueError("a workload variant with another model needs load_input_set")
        missing = _offered_types(workload) - set(self.hardware)
        missing_traces = _trace_files(workload) - set(self.traces)
        if missing or missing_traces:
            raise ValueError(f"a workload variant with new inputs needs load_input_set: {missing | missing_traces}")
        return InputSet(workload, self.base_dir, self.model, self.hardware, self.traces)


def _offered_types(workload: Workload) -> set[str]:
    return {offer.type for dc in workload.deployment.datacenters for offer in dc.gpus}


def _trace_files(workload: Workload) -> set[str]:
    return {
        option.fluctuation.trace_file
        for option in workload.deployment.wan_lines
        if option.fluctuation.kind == "trace" and option.fluctuation.trace_file is not None
    }


def load_trace(spec: Fluctuation, base_dir: Path | None = None) -> CapacityTrace | None:
    """The capacity trace a `kind: trace` fluctuation names (a relative path from `base_dir`);
    None for the other kinds."""
    if spec.kind != "trace" or spec.trace_file is None:
        return None
    path = Path(spec.trace_file)
    times, fractions = read_trace(path if path.is_absolute() or base_dir is None else base_dir / path)
    return CapacityTrace(times, fractions)


def load_input_set(workload: Workload, base_dir: Path | None = None) -> InputSet:
    """Read what `workload` names: its model (catalog, config.json or YAML), the profile of every
    GPU type it offers, and the capacity trace of every line option with `kind: trace` (a relative
    trace path, like a GPU profile file, is read from `base_dir`, the workload file's folder)."""
    model = workload_model(workload)
    hardware = {gpu: load_hardware(gpu, base_dir) for gpu in sorted(_offered_types(workload))}
    traces = {}
    for option in workload.deployment.wan_lines:
        trace = load_trace(option.fluctuation, base_dir)
        if trace is not None and option.fluctuation.trace_file is not None:
            traces[option.fluctuation.trace_file] = trace
    return InputSet(workload, base_dir, model, hardware, traces)
