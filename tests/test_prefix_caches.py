"""The prefix caches (`pddplan.cache`): bytes held by Little's law on sessions between turns, the
placement over HBM and the tiers below it, the load time of a hit, and one rule for every
architecture."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan import architectures
from pddplan.cache import CacheKind, held_bytes, held_time_s, instance_tiers, kept_probability, place
from pddplan.cache.accounting import cache_site
from pddplan.cache.tiers import Tier, request_links
from pddplan.evaluate import evaluate
from pddplan.inputs import load_hardware, load_model, load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.perf import Instance
from pddplan.scenarios import build_scenario

ROOT = Path(__file__).resolve().parent.parent


def test_held_time_by_hand() -> None:
    """E[min(G, R)] = g (1 - e^(-R/g)): 13 (1 - e^(-60/13)) = 12.871 s; R without a gap; g without
    a retention limit; 0 for R = 0."""
    assert held_time_s(60.0, 13.0) == pytest.approx(13.0 * (1 - math.exp(-60.0 / 13.0)), rel=1e-12)
    assert held_time_s(60.0, 13.0) == pytest.approx(12.8713, abs=1e-4)
    assert held_time_s(60.0, None) == 60.0
    assert held_time_s(math.inf, 13.0) == 13.0
    assert held_time_s(0.0, 13.0) == 0.0
    assert kept_probability(60.0, 13.0) == pytest.approx(1 - math.exp(-60.0 / 13.0), rel=1e-12)
    assert kept_probability(math.inf, 13.0) == 1.0


def test_the_issues_radix_cache_figures_by_hand() -> None:
    """4 req/s of 3.1 GB prompts held 60 s: 744 GB without a gap (every session held the whole
    retention); with 13 s mean gaps only the sessions between turns: 4 x 12.87 x 3.1 = 160 GB."""
    assert held_bytes(4.0, 3.1e9, 60.0, None) == pytest.approx(744e9, rel=1e-12)
    assert held_bytes(4.0, 3.1e9, 60.0, 13.0) == pytest.approx(159.6e9, rel=1e-3)


@given(
    rate=st.floats(0.01, 100),
    prefix=st.floats(1e6, 1e10),
    retention=st.floats(1, 3600),
    gaps=st.lists(st.floats(0.1, 3600), min_size=2, max_size=5),
)
def test_radix_cache_memory_falls_as_turn_gaps_fall(
    rate: float, prefix: float, retention: float, gaps: list[float]
) -> None:
    """Shorter gaps between turns: fewer sessions wait between turns, so never more bytes held;
    and never more than the no-gap bound, rate x retention x prefix."""
    held = [held_bytes(rate, prefix, retention, g) for g in sorted(gaps)]
    assert all(a <= b * (1 + 1e-12) for a, b in itertools.pairwise(held))
    assert max(held) <= held_bytes(rate, prefix, retention, None) * (1 + 1e-12)


def test_placement_by_hand() -> None:
    """1,000 GB over 2 instances with 300 GB of DRAM and 100 GB of SSD each and 50 GB of HBM room:
    DRAM 600, SSD 200, HBM 100, lost 100. Hits come 600/900 from DRAM, 200/900 from SSD; at 50 and
    10 GB/s per request a GB of hit loads in (2/3)/50 + (2/9)/10 s."""
    dram = Tier("dram", 300e9, 50e9, 400e9)
    ssd = Tier("ssd", 100e9, 10e9, 50e9)
    p = place(1000e9, 2, 50e9, (dram, ssd))
    assert p.tier_bytes == (600e9, 200e9)
    assert p.hbm_bytes == 100e9 and p.lost_bytes == pytest.approx(100e9)
    assert p.kept_share == pytest.approx(0.9)
    assert p.hbm_bytes_per_instance == 50e9
    assert p.load_s_per_byte() * 1e9 == pytest.approx((2 / 3) / 50 + (2 / 9) / 10, rel=1e-12)
    # 9 GB/s of hits: DRAM serves 6 GB/s of the pool's 800 GB/s, SSD 2 of 100
    assert p.tier_utilization(9e9) == pytest.approx((6 / 800, 2 / 100), rel=1e-12)
    small = place(100e9, 2, 50e9, (dram,))
    assert small.tier_bytes == (100e9,) and small.hbm_bytes == 0 and small.kept_share == 1.0


def test_the_tiers_of_an_instance_by_hand() -> None:
    """gpu-a (2 TB of host memory per 8-GPU server, 50 GB/s host-to-device per GPU) at TP16 with
    data-parallel attention: 16/8 servers x 2,048 GB x 0.8 of DRAM; one request's KV sits on one
    rank, so it loads over one host link (50 GB/s). Tensor-parallel llama-3.1-8b at TP2 (no KV
    copies): over both GPUs' links (100 GB/s). hbm: no tier at all."""
    model = load_model("deepseek-v3.2")
    gpu_a = load_hardware("gpu-a")
    ep = Instance(model, gpu_a, 16, True)
    tiers, notes = instance_tiers(ep, "dram", 0.8)
    assert notes == () and [t.name for t in tiers] == ["dram"]
    assert tiers[0].capacity_bytes == pytest.approx(2 * 2048e9 * 0.8, rel=1e-12)
    assert request_links(ep) == 1 and tiers[0].request_bytes_per_s == 50e9
    dense = Instance(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), 2)
    assert request_links(dense) == 2 and instance_tiers(dense, "dram", 0.8)[0][0].request_bytes_per_s == 100e9
    ssd = instance_tiers(ep, "ssd", 0.8)[0][1]
    assert ssd.capacity_bytes == pytest.approx(2 * 30.72e12) and ssd.request_bytes_per_s == pytest.approx(56.9e9 / 8)
    assert instance_tiers(ep, "hbm", 0.8) == ((), ())


def test_an_unknown_host_gives_no_tier_and_says_so() -> None:
    """h20's profile has no host section: its caches stay in HBM, with a note naming the figures."""
    tiers, notes = instance_tiers(Instance(load_model("llama-3.1-8b"), load_hardware("h20"), 1), "dram", 0.8)
    assert tiers == () and "host.dram_gb_per_node" in notes[0] and "stay in HBM" in notes[0]


@settings(max_examples=25, deadline=None)
@given(
    rate=st.floats(0.1, 20),
    retention=st.floats(1, 600),
    gap=st.one_of(st.none(), st.floats(1, 600)),
    tiers=st.sampled_from(["hbm", "dram", "ssd"]),
)
def test_every_architecture_pays_for_the_same_prefixes_by_the_same_rule(
    rate: float, retention: float, gap: float | None, tiers: str
) -> None:
    """pd-intra, pd-cross and PDD plans with the same prefill pool hold the same prefill-side bytes
    in the same tiers; a radix cache and a prefill cache on identical pools, holding the same
    traffic (no gap: both for the whole retention), are placed byte for byte alike."""
    workload = load_workload("pdd-agent-64k")
    serving = workload.serving.model_copy(
        update={"drc_retention_s": retention, "turn_gap_s": gap, "cache_tiers": tiers}
    )
    workload = workload.model_copy(update={"serving": serving})
    inputs = load_input_set(workload, workload_dir("pdd-agent-64k"))
    sites = []
    for name, plan in _plans().items():
        scenario = build_scenario(plan, inputs)
        site = scenario.cache(CacheKind.PREFILL, rate)
        assert site is not None, name
        sites.append(site)
        radix = scenario.cache(CacheKind.DECODE, rate)
        assert (radix is not None) == architectures.get(name).uses_wan
    assert all(s.placement == sites[0].placement and s.kept == sites[0].kept for s in sites)
    if gap is None:
        pool = (build_scenario(_plans()["pdd"], inputs).prefill.instance, 2, 1e11)
        prefill = cache_site(CacheKind.PREFILL, workload, inputs.model, pool, rate)
        decode = cache_site(CacheKind.DECODE, workload, inputs.model, pool, rate)
        assert prefill.placement == decode.placement


def _plans() -> dict[str, Any]:
    """One plan per architecture on pdd-agent-64k, all with one 16-GPU gpu-a prefill instance."""
    base = yaml.safe_load((ROOT / "tests" / "data" / "export" / "pdd-agent-64k-pd-intra.yaml").read_text())
    base["prefill"] |= {"tp": 16, "count": 1}
    cross = {
        **base,
        "architecture": "pd-cross",
        "decode": {**base["decode"], "datacenter": "dc-b", "gpu": "gpu-b", "tp": 16},
        "wan": [{"option": "express-40g", "count": 1}],
    }
    pdd = {**cross, "architecture": "pdd", "relay_on_prefill": True}
    from pddplan.specs.plan import Plan
    from pddplan.support.loading import validate

    return {
        name: validate(Plan, data, "plan") for name, data in (("pd-intra", base), ("pd-cross", cross), ("pdd", pdd))
    }


def test_host_memory_decides_the_radix_cache_cost_on_the_shipped_plan() -> None:
    """The shipped PDD plan on pdd-agent-64k (4 req/s, 60 s retention, no gap): 744 GB of radix
    cache (4 x 60 x 3.1 GB). With host memory it all sits in the main decoders' DRAM and their HBM
    runs the full batch; in HBM only it takes most of their KV memory and the batch shrinks."""
    workload = load_workload("pdd-agent-64k")
    plan = load_plan(str(ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"))
    folder = workload_dir("pdd-agent-64k")
    spilled = build_scenario(plan, load_input_set(workload, folder))
    hbm = workload.model_copy(update={"serving": workload.serving.model_copy(update={"cache_tiers": "hbm"})})
    in_hbm = build_scenario(plan, load_input_set(hbm, folder))
    site = spilled.cache(CacheKind.DECODE)
    assert site is not None and site.placement.demand_bytes == pytest.approx(743e9, rel=0.01)
    assert site.placement.hbm_bytes == 0 and site.placement.tier_bytes[0] == site.placement.demand_bytes
    assert evaluate(spilled).stages["decode"].max_batch > evaluate(in_hbm).stages["decode"].max_batch
    assert in_hbm.cache_hbm_bytes_per_instance(CacheKind.DECODE) == pytest.approx(site.placement.demand_bytes / 2)
