"""Where a prefix cache lives: HBM and the tiers below it, and what a hit costs to load.

Tiers below HBM come with the servers an instance runs on (`HardwareProfile.host`): host DRAM
and local NVMe, each GPU taking its share of its server's. A workload chooses the lowest tier its
caches may use (`serving.cache_tiers`: hbm, dram or ssd) and the share of host memory they may take
(`serving.host_memory_utilization`). A tier whose figures the profile leaves unknown is absent.

Placement (`place`), the engines' write-through hierarchy (SGLang HiCache, vLLM's offloading
connector): a cache's bytes fill the lower tiers first, fastest first; HBM holds what they cannot,
up to the room the instance leaves it; the rest is lost (those prefixes are evicted, and their
next turns miss). HBM keeps a hot copy besides, but a hit is priced as read from the tier holding
it, an upper bound on load time. Under least-recently-used eviction with exponential turn gaps,
hits come from a tier in proportion to the bytes it holds (Che's approximation: the hit
probability is linear in capacity), so

    load time of a hit of h bytes = h x sum_k share_k / b_k,    share_k = bytes_k / bytes held,

b_k the rate one request's KV loads from tier k into HBM: each GPU holding part of the request
copies its part over its own host link, b = per-GPU bandwidth x tp pp / (KV pools x KV copies).
"""

from __future__ import annotations

from dataclasses import dataclass

from pddplan.perf.memory import kv_replication
from pddplan.perf.roofline import Instance

#: the lowest tier a workload's caches may use (`serving.cache_tiers`), fastest first
PLACEMENTS = ("hbm", "dram", "ssd")


@dataclass(frozen=True)
class Tier:
    """One tier below HBM, for one instance."""

    name: str
    capacity_bytes: float
    request_bytes_per_s: float  # one request's cached KV loads into HBM at this rate
    read_bytes_per_s: float  # the instance's whole read bandwidth from this tier


def request_links(instance: Instance) -> float:
    """Host links one request's KV loads over in parallel: tp pp / (KV pools x KV copies) (one GPU
    under data-parallel attention; every GPU under tensor parallelism, less the copies each keeps,
    each pipeline stage its own layers')."""
    return instance.gpus / (instance.kv_pools * kv_replication(instance))


def instance_tiers(
    instance: Instance, lowest: str, host_utilization: float
) -> tuple[tuple[Tier, ...], tuple[str, ...]]:
    """(the tiers below HBM an instance's caches may use, down to `lowest`; notes on the tiers its
    profile leaves unknown). Each GPU gets 1 / gpus_per_node of its server's DRAM (times
    `host_utilization`) and NVMe; NVMe reads also cross the GPU's host link."""
    hw = instance.hardware
    if lowest == "hbm":
        return (), ()
    per_node = hw.host_figure("gpus_per_node")
    h2d = hw.host_figure("host_to_device_gb_per_s")
    dram = hw.host_figure("dram_gb_per_node")
    notes: list[str] = []
    if not (per_node and h2d and dram):
        missing = [
            f"host.{n}"
            for n, v in (("gpus_per_node", per_node), ("host_to_device_gb_per_s", h2d), ("dram_gb_per_node", dram))
            if not v
        ]
        return (), (f"{hw.name}: {', '.join(missing)} unknown: its caches stay in HBM (set them in the profile)",)
    tp, links = instance.gpus, request_links(instance)  # every GPU of every stage
    h2d_bytes = h2d * 1e9
    tiers = [Tier("dram", dram * 1e9 * host_utilization * tp / per_node, h2d_bytes * links, h2d_bytes * tp)]
    if lowest == "ssd":
        nvme = hw.host_figure("nvme_tb_per_node")
        read = hw.host_figure("nvme_read_gb_per_s_per_node")
        if nvme and read:
            per_gpu = min(h2d_bytes, read * 1e9 / per_node)
            tiers.append(Tier("ssd", nvme * 1e12 * tp / per_node, per_gpu * links, per_gpu * tp))
        else:
            notes.append(f"{hw.name}: host.nvme_tb_per_node or host.nvme_read_gb_per_s_per_node unknown: no SSD tier")
    return tuple(tiers), tuple(notes)


@dataclass(frozen=True)
class Placement:
    """A cache's bytes over a pool of `count` instances: per lower tier, in HBM, and lost."""

    demand_bytes: float
    count: int
    tiers: tuple[Tier, ...]
    tier_bytes: tuple[float, ...]
    hbm_bytes: float
    lost_bytes: float

    @property
    def held_bytes(self) -> float:
        return self.demand_bytes - self.lost_bytes

    @property
    def kept_share(self) -> float:
        """Share of the prefixes the traffic asks the cache to hold that it holds (1 - lost / demand)."""
        return self.held_bytes / self.demand_bytes if self.demand_bytes > 0 else 1.0

    @property
    def hbm_bytes_per_instance(self) -> float:
        return self.hbm_bytes / self.count if self.count else 0.0

    def shares(self) -> tuple[float, ...]:
        """Share of the hits each lower tier serves (bytes it holds / bytes held)."""
        held = self.held_bytes
        return tuple(b / held if held > 0 else 0.0 for b in self.tier_bytes)

    def load_s_per_byte(self) -> float:
        """Mean seconds to load one byte of a hit into HBM: sum_k share_k / b_k (module docstring)."""
        return sum(s / t.request_bytes_per_s for s, t in zip(self.shares(), self.tiers, strict=True))

    def tier_utilization(self, hit_bytes_per_s: float) -> tuple[float, ...]:
        """Each lower tier's read bandwidth in use when hits of `hit_bytes_per_s` load from it."""
        return tuple(
            hit_bytes_per_s * s / (t.read_bytes_per_s * self.count) if self.count else 0.0
            for s, t in zip(self.shares(), self.tiers, strict=True)
        )


def place(demand_bytes: float, count: int, hbm_room_bytes: float, tiers: tuple[Tier, ...]) -> Placement:
    """Place `demand_bytes` over `count` instances: each lower tier (count x its capacity) in order,
    then HBM up to count x `hbm_room_bytes`; the rest is lost (module docstring)."""
    left = max(demand_bytes, 0.0)
    placed = []
    for tier in tiers:
        take = min(left, count * tier.capacity_bytes)
        placed.append(take)
        left -= take
    hbm = min(left, count * max(hbm_room_bytes, 0.0))
    return Placement(max(demand_bytes, 0.0), count, tiers, tuple(placed), hbm, left - hbm)
