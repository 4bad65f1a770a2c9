"""What the optimizer may choose among: instance candidates per role and WAN line pools.

An instance candidate is (datacenter, GPU type, TP degree) where the model fits. A WAN
configuration is a directed datacenter pair (prefill and relay at the source, main decode at the
destination) with a count of lines per option joining them; all configurations of all pairs are
enumerated, so nothing assumes exactly two datacenters.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from pddplan.inputs import load_hardware
from pddplan.net.lines import LinePool, pool_lines
from pddplan.perf.memory import fits, instance_kv_capacity_bytes
from pddplan.perf.roofline import Instance
from pddplan.scenario import gpu_price
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.workload import WanLineOption, Workload


@dataclass(frozen=True)
class Candidate:
    """One kind of instance: `tp` GPUs of `gpu` in `datacenter`."""

    datacenter: str
    gpu: str
    tp: int
    instance: Instance
    usd_per_hour: float
    kv_capacity_bytes: float
    max_count: int

    @property
    def key(self) -> str:
        return f"{self.datacenter}/{self.gpu}/tp{self.tp}"


def tp_degrees(workload: Workload, domain: int) -> list[int]:
    """TP degrees to try: the workload's list, else powers of two up to twice the scale-up domain."""
    if workload.deployment.tp_options:
        return sorted(set(workload.deployment.tp_options))
    degrees, tp = [], 1
    while tp <= 2 * domain:
        degrees.append(tp)
        tp *= 2
    return degrees


def instance_candidates(workload: Workload, model: ModelArchitecture, chunk_tokens: int) -> list[Candidate]:
    """Every (datacenter, GPU, TP) the model fits on, smallest TP first within a GPU."""
    out = []
    utilization = workload.serving.hbm_utilization
    for dc in workload.deployment.datacenters:
        for offer in dc.gpus:
            if offer.max_count == 0:
                continue
            hardware = load_hardware(offer.type)
            for tp in tp_degrees(workload, hardware.scale_up_domain):
                if tp > offer.max_count:
                    continue
                instance = Instance(model, hardware, tp, stack=workload.serving.stack)
                if not fits(instance, utilization, chunk_tokens):
                    continue
                out.append(
                    Candidate(
                        datacenter=dc.name,
                        gpu=offer.type,
                        tp=tp,
                        instance=instance,
                        usd_per_hour=tp * gpu_price(hardware, workload, dc.name, offer.type),
                        kv_capacity_bytes=instance_kv_capacity_bytes(instance, utilization, chunk_tokens),
                        max_count=offer.max_count // tp,
                    )
                )
    return out


def wan_configs(workload: Workload, base_dir: Path | None) -> list[LinePool]:
    """Every non-empty combination of line counts per ordered datacenter pair."""
    options = workload.deployment.wan_lines
    pairs: dict[tuple[str, str], list[WanLineOption]] = {}
    for option in options:
        a, b = option.between
        pairs.setdefault((a, b), []).append(option)
        pairs.setdefault((b, a), []).append(option)
    out = []
    for (source, target), pair_options in sorted(pairs.items()):
        ranges = [range(option.max_lines + 1) for option in pair_options]
        for counts in itertools.product(*ranges):
            if not any(counts):
                continue
            leased = [(option, n) for option, n in zip(pair_options, counts, strict=True) if n]
            out.append(pool_lines(source, target, leased, base_dir))
    return out
