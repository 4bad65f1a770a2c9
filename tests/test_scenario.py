"""Plans resolved against workloads (pddplan.specs.plan, pddplan.scenarios.scenario).

A good plan resolves into roles, prices and a pooled link whose numbers are checked by hand against
the hardware profiles and the workload; every way a plan can disagree with its workload (or with
itself) is one InputError line naming the plan field.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pddplan.cache.sessions import CacheKind
from pddplan.errors import InputError
from pddplan.inputs import load_plan, load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize.candidates import instance_candidates
from pddplan.perf.kv import request_kv_bytes
from pddplan.scenarios.scenario import build_scenario, gpu_price
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Workload
from pddplan.support.loading import validate

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "tests" / "data" / "plans"

HAND_PLAN: dict[str, Any] = {
    "name": "hand",
    "architecture": "pdd",
    "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 2},
    "relay": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 16, "count": 1},
    "decode": {"datacenter": "dc-b", "gpu": "gpu-b", "tp": 8, "count": 4},
    "wan": [{"option": "express-100g", "count": 1}],
}


def rental(gpu: str) -> float:
    """The rental price in the shipped profile, read from the YAML file itself."""
    data = yaml.safe_load((ROOT / "hardware_profiles" / f"{gpu}.yaml").read_text(encoding="utf-8"))
    return float(data["price"]["rental_usd_per_gpu_hour"]["value"])


def line_option(workload_name: str, option: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "workloads" / f"{workload_name}.yaml").read_text(encoding="utf-8"))
    return next(line for line in data["deployment"]["wan_lines"] if line["name"] == option)


@pytest.fixture(scope="module")
def agent() -> Workload:
    return load_workload("pdd-agent-64k")


def plan(changes: Any = None, base: dict[str, Any] | None = None) -> Plan:
    data = copy.deepcopy(base or HAND_PLAN)
    if changes is not None:
        changes(data)
    return validate(Plan, data, "plan.yaml")


def plan_error(changes: Any) -> str:
    with pytest.raises(InputError) as info:
        plan(changes)
    return str(info.value)


def scenario_error(p: Plan, workload: Workload) -> str:
    inputs = load_input_set(workload, PLANS)  # the folder of the small workload's capacity trace
    with pytest.raises(InputError) as info:
        build_scenario(p, inputs, source="plan.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


# -- a good plan ---------------------------------------------------------------------------------------


def test_hand_plan_resolves(agent: Workload) -> None:
    scenario = build_scenario(plan(), load_input_set(agent))
    assert list(scenario.roles) == ["prefill", "relay", "decode"]
    assert scenario.prefill.count == 2 and scenario.prefill.gpus == 32
    assert scenario.relay is not None and scenario.relay.gpus == 16
    assert scenario.decode.count == 4 and scenario.decode.gpus == 32
    assert scenario.prefill.instance.tp == 16
    assert scenario.decode.instance.hardware.name == "gpu-b"
    assert scenario.gpus_by_type() == {"gpu-a": 48, "gpu-b": 32}
    assert scenario.prefill.usd_per_gpu_hour == pytest.approx(rental("gpu-a"))
    assert scenario.decode.usd_per_gpu_hour == pytest.approx(rental("gpu-b"))
    assert all(role.kv_capacity_bytes > 0 for role in scenario.roles.values())


def test_hand_plan_link_and_cost_by_hand(agent: Workload) -> None:
    scenario = build_scenario(plan(), load_input_set(agent))
    line = line_option("pdd-agent-64k", "express-100g")
    link = scenario.link
    assert link is not None
    assert link.capacity_bytes_per_s == pytest.approx(line["capacity_gbps"] * 1e9 / 8)
    assert link.rtt_s == pytest.approx(line["rtt_ms"] / 1e3)
    assert (link.source, link.target) == ("dc-a", "dc-b")
    assert link.usd_per_hour == pytest.approx(line["usd_per_month"] / 730)
    expected = 48 * rental("gpu-a") + 32 * rental("gpu-b") + line["usd_per_month"] / 730
    assert scenario.cost_per_hour == pytest.approx(expected, rel=1e-12)
    # the article's numbers: gpu-a 1.37 $/h, gpu-b 25% dearer, 5,200 $/month for the 100 Gbps line
    assert rental("gpu-b") == pytest.approx(1.25 * rental("gpu-a"))


def test_two_line_options_pool(agent: Workload) -> None:
    p = plan(lambda d: d.update(wan=[{"option": "express-100g", "count": 2}, {"option": "express-40g", "count": 3}]))
    scenario = build_scenario(p, load_input_set(agent))
    assert scenario.link is not None
    assert scenario.link.gbps == pytest.approx(2 * 100 + 3 * 40)
    assert scenario.link.lines == 5
    lines = (2 * line_option("pdd-agent-64k", "express-100g")["usd_per_month"]) + 3 * line_option(
        "pdd-agent-64k", "express-40g"
    )["usd_per_month"]
    assert scenario.cost_per_hour == pytest.approx(48 * rental("gpu-a") + 32 * rental("gpu-b") + lines / 730)


def test_defaults_come_from_the_workload(agent: Workload) -> None:
    scenario = build_scenario(plan(), load_input_set(agent))
    assert scenario.rate_rps == agent.arrival.rate_rps
    assert scenario.chunk_tokens == agent.serving.chunk_tokens
    # no cap in the workload: memory and the TPOT SLA decide, up to the search's limit
    assert agent.serving.max_decode_batch is None and scenario.fixed_decode_batch is None
    assert scenario.max_decode_batch == agent.serving.decode_batch_limit


def test_plan_overrides_rate_chunk_and_batch(agent: Workload) -> None:
    p = plan(lambda d: d.update(rate_rps=1.25, chunk_tokens=4096, max_decode_batch=64))
    scenario = build_scenario(p, load_input_set(agent))
    assert scenario.rate_rps == 1.25
    assert scenario.chunk_tokens == 4096
    assert scenario.max_decode_batch == 64


def hbm_only(workload: Workload) -> Workload:
    return workload.model_copy(update={"serving": workload.serving.model_copy(update={"cache_tiers": "hbm"})})


def test_radix_cache_bytes_by_littles_law(agent: Workload) -> None:
    """Without a turn gap: sessions = rate x retention, each holding its prompt's KV; with the cache
    in HBM only, spread over the MD instances' HBM."""
    agent = hbm_only(agent)
    scenario = build_scenario(plan(lambda d: d.update(rate_rps=0.5)), load_input_set(agent))
    prompt_kv = float(request_kv_bytes(scenario.model, 64512, agent.serving.page_tokens))
    expected = 0.5 * agent.serving.drc_retention_s * prompt_kv
    site = scenario.cache(CacheKind.DECODE)
    assert site is not None and site.placement.demand_bytes == pytest.approx(expected, rel=1e-12)
    assert expected / 4 < scenario.decode.kv_capacity_bytes  # it fits: nothing lost
    assert scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE) == pytest.approx(expected / 4, rel=1e-12)
    doubled = build_scenario(
        plan(lambda d: (d.update(rate_rps=0.5), d["decode"].update(count=8))), load_input_set(agent)
    )
    assert doubled.cache_hbm_bytes_per_instance(CacheKind.DECODE) == pytest.approx(expected / 8)
    # at the workload's 4 req/s it does not fit: the decoders' whole KV memory, the rest lost
    crowded = build_scenario(plan(), load_input_set(agent)).cache(CacheKind.DECODE)
    assert crowded is not None and crowded.placement.hbm_bytes_per_instance == scenario.decode.kv_capacity_bytes
    assert crowded.placement.lost_bytes == pytest.approx(8 * expected - 4 * scenario.decode.kv_capacity_bytes)


def test_radix_cache_bytes_scale_with_the_given_rate(agent: Workload) -> None:
    """Guards `cache(kind, rate)`: the radix cache is sized at the rate asked for (evaluate --rate),
    proportional to it, not always at the plan's rate."""
    scenario = build_scenario(plan(lambda d: d.update(rate_rps=0.4)), load_input_set(hbm_only(agent)))
    at_plan_rate = scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE)
    assert at_plan_rate > 0
    assert scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE, 0.4) == pytest.approx(at_plan_rate, rel=1e-12)
    assert scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE, 0.1) == pytest.approx(at_plan_rate / 4, rel=1e-12)
    assert scenario.cache_hbm_bytes_per_instance(CacheKind.DECODE, 0.6) == pytest.approx(1.5 * at_plan_rate, rel=1e-12)


def test_pd_intra_has_no_link_and_no_line_cost() -> None:
    workload = load_workload(str(PLANS / "small-workload.yaml"))
    scenario = build_scenario(load_plan(str(PLANS / "small-pd-intra.yaml")), load_input_set(workload, PLANS))
    assert scenario.link is None
    assert scenario.relay is None
    assert scenario.cost_per_hour == pytest.approx(4 * rental("gpu-a"))


def test_relay_with_zero_count_is_absent_outside_pdd() -> None:
    workload = load_workload(str(PLANS / "small-workload.yaml"))
    data = yaml.safe_load((PLANS / "small-pd-cross.yaml").read_text())
    data["relay"] = {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 1, "count": 0}
    scenario = build_scenario(validate(Plan, data, "p"), load_input_set(workload, PLANS))
    assert "relay" not in scenario.roles
    assert scenario.relay is None


def test_workload_price_override_wins(agent: Workload) -> None:
    offers = agent.deployment.datacenters[1].gpus[0].model_copy(update={"usd_per_gpu_hour": 2.5})
    dc_b = agent.deployment.datacenters[1].model_copy(update={"gpus": [offers]})
    deployment = agent.deployment.model_copy(update={"datacenters": [agent.deployment.datacenters[0], dc_b]})
    workload = agent.model_copy(update={"deployment": deployment})
    scenario = build_scenario(plan(), load_input_set(workload))
    assert scenario.decode.usd_per_gpu_hour == 2.5
    assert scenario.prefill.usd_per_gpu_hour == pytest.approx(rental("gpu-a"))
    assert gpu_price(scenario.decode.instance.hardware, workload, "dc-b") == 2.5


def test_price_override_of_an_offer_named_by_file_path(tmp_path: Path) -> None:
    """Guards gpu_price for an offer whose `type` is a profile file path: its usd_per_gpu_hour must be
    used (the profile inside is named gpu-b, not the path, so matching on the profile's name missed
    the override) by build_scenario (role price, plan cost) and by the optimizer's candidates."""
    profile = tmp_path / "my-gpu-b.yaml"
    profile.write_text((ROOT / "hardware_profiles" / "gpu-b.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    data = yaml.safe_load((ROOT / "workloads" / "pdd-agent-64k.yaml").read_text(encoding="utf-8"))
    data["deployment"]["datacenters"][1]["gpus"] = [{"type": str(profile), "max_count": 256, "usd_per_gpu_hour": 2.5}]
    workload = validate(Workload, data, "workload.yaml")
    scenario = build_scenario(plan(lambda d: d["decode"].update(gpu=str(profile))), load_input_set(workload))
    assert scenario.decode.instance.hardware.name == "gpu-b"
    assert rental("gpu-b") != 2.5
    assert scenario.decode.usd_per_gpu_hour == 2.5
    assert gpu_price(scenario.decode.instance.hardware, workload, "dc-b", str(profile)) == 2.5
    line = line_option("pdd-agent-64k", "express-100g")
    expected = 48 * rental("gpu-a") + 32 * 2.5 + line["usd_per_month"] / 730
    assert scenario.cost_per_hour == pytest.approx(expected, rel=1e-12)
    candidates = instance_candidates(load_input_set(workload), workload.serving.chunk_tokens)
    by_path = [c for c in candidates if c.gpu == str(profile)]
    assert by_path
    for c in by_path:
        assert c.usd_per_hour == pytest.approx(c.tp * 2.5, rel=1e-12)
    for c in candidates:
        if c.gpu == "gpu-a":
            assert c.usd_per_hour == pytest.approx(c.tp * rental("gpu-a"), rel=1e-12)


def test_purchase_basis_uses_amortized_price(agent: Workload) -> None:
    """gpu-b purchase: 25,000 $ / (4 y x 8760 h) + 0.7 kW x PUE 1.3 x 0.08 $/kWh."""
    data = yaml.safe_load((ROOT / "hardware_profiles" / "gpu-b.yaml").read_text())
    price = data["price"]
    expected = (
        price["purchase_usd_per_gpu"]["value"] / (price["amortization_years"]["value"] * 8760)
        + data["power"]["tdp_w"]["value"] / 1000 * price["pue"]["value"] * price["power_usd_per_kwh"]["value"]
    )
    workload = agent.model_copy(update={"deployment": agent.deployment.model_copy(update={"price_basis": "purchase"})})
    hardware = build_scenario(plan(), load_input_set(agent)).decode.instance.hardware
    assert gpu_price(hardware, workload, "dc-b") == pytest.approx(expected, rel=1e-12)
    # gpu-a has no purchase price: using it on a purchase basis is one line naming the figure
    message = scenario_error(plan(), workload)
    assert "gpu-a" in message and "purchase_usd_per_gpu" in message


def test_trace_fluctuation_resolves_against_the_workload_folder() -> None:
    workload = load_workload(str(PLANS / "small-workload.yaml"))
    p = validate(
        Plan,
        {**yaml.safe_load((PLANS / "small-pd-cross.yaml").read_text()), "wan": [{"option": "line-trace", "count": 2}]},
        "p",
    )
    scenario = build_scenario(p, load_input_set(workload, workload_dir(str(PLANS / "small-workload.yaml"))))
    assert scenario.link is not None
    capacity, probs = scenario.link.capacity_support()
    assert probs.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(sorted(set(capacity.tolist())), np.array([0.3, 0.5, 0.6, 0.9, 1.0]) * 2 * 1e9 / 8)
    assert scenario.link.mean_capacity_bytes_per_s() < scenario.link.capacity_bytes_per_s


# -- plans that contradict themselves (schema) ---------------------------------------------------------


def test_zero_decode_instances() -> None:
    message = plan_error(lambda d: d["decode"].update(count=0))
    assert "decode.count = 0" in message and message.startswith("plan.yaml")


def test_zero_prefill_instances() -> None:
    assert "prefill.count = 0" in plan_error(lambda d: d["prefill"].update(count=0))


def test_relay_in_the_wrong_datacenter() -> None:
    message = plan_error(lambda d: d["relay"].update(datacenter="dc-b"))
    assert "relay.datacenter = 'dc-b'" in message and "dc-a" in message


def test_pdd_without_relay() -> None:
    assert "needs relay instances" in plan_error(lambda d: d.pop("relay"))
    assert "needs relay instances" in plan_error(lambda d: d["relay"].update(count=0))


def test_relay_outside_pdd() -> None:
    assert "has no relay" in plan_error(lambda d: d.update(architecture="pd-cross"))


def test_unknown_key_in_the_plan() -> None:
    message = plan_error(lambda d: d.update(replicas=3))
    assert "replicas: unknown field" in message
    nested = plan_error(lambda d: d["decode"].update(gpus=8))
    assert "decode.gpus: unknown field" in nested


def test_architecture_and_datacenters_must_agree() -> None:
    assert "pd-intra keeps prefill and decode in one datacenter" in plan_error(
        lambda d: (d.update(architecture="pd-intra"), d.pop("relay"))
    )
    assert "puts decode in another datacenter" in plan_error(lambda d: d["decode"].update(datacenter="dc-a"))
    assert "needs at least one WAN line" in plan_error(lambda d: d.update(wan=[]))


def test_unknown_architecture_and_handoff_mode() -> None:
    assert "architecture" in plan_error(lambda d: d.update(architecture="pdd-x"))
    assert "handoff.mode" in plan_error(lambda d: d.update(handoff={"mode": "sometimes"}))


# -- plans that contradict their workload (build_scenario) ------------------------------------------


def test_role_on_a_gpu_type_the_datacenter_lacks(agent: Workload) -> None:
    message = scenario_error(plan(lambda d: d["prefill"].update(gpu="gpu-b")), agent)
    assert message == "plan.yaml: prefill.gpu = 'gpu-b': datacenter dc-a offers only gpu-a"


def test_model_that_does_not_fit(agent: Workload) -> None:
    message = scenario_error(plan(lambda d: d["prefill"].update(tp=1)), agent)
    assert message.startswith("plan.yaml: prefill: model 'deepseek-v3.2' does not fit on gpu-a at tp=1")
    assert "use a larger tp" in message


def test_unknown_wan_option(agent: Workload) -> None:
    message = scenario_error(plan(lambda d: d["wan"][0].update(option="express-400g")), agent)
    assert "wan[0].option = 'express-400g': not a WAN option of the workload (express-100g, express-40g)" in message


def test_more_gpus_than_the_datacenter_offers(agent: Workload) -> None:
    message = scenario_error(plan(lambda d: d["decode"].update(count=33)), agent)  # 264 > 256
    assert message == "plan.yaml: decode: 264 x gpu-b in dc-b exceeds the 256 the datacenter offers"


def test_prefill_and_relay_share_the_datacenter_offer(agent: Workload) -> None:
    """15 x 16 prefill GPUs fit alone (240 <= 256); with 2 x 16 relay GPUs on the same offer they do not."""
    build_scenario(plan(lambda d: (d["prefill"].update(count=15), d["relay"].update(count=1))), load_input_set(agent))
    message = scenario_error(plan(lambda d: (d["prefill"].update(count=15), d["relay"].update(count=2))), agent)
    assert "relay: 272 x gpu-a in dc-a exceeds the 256" in message


def test_datacenter_not_in_the_workload(agent: Workload) -> None:
    message = scenario_error(plan(lambda d: d["decode"].update(datacenter="dc-z")), agent)
    assert "decode.datacenter = 'dc-z': not a datacenter of workload 'pdd-agent-64k' (dc-a, dc-b)" in message


def test_too_many_lines_of_one_option(agent: Workload) -> None:
    message = scenario_error(plan(lambda d: d["wan"][0].update(count=5)), agent)
    assert "wan[0].count = 5: option express-100g allows at most 4" in message


def test_line_joining_other_datacenters() -> None:
    data = yaml.safe_load((PLANS / "small-workload.yaml").read_text())
    data["deployment"]["datacenters"].append({"name": "dc-c", "gpus": [{"type": "gpu-b", "max_count": 8}]})
    data["deployment"]["wan_lines"].append(
        {
            "name": "a-to-c",
            "between": ["dc-a", "dc-c"],
            "capacity_gbps": 10,
            "rtt_ms": 5,
            "usd_per_month": 500,
            "price_source": "assumption: test",
        }
    )
    workload = validate(Workload, data, "w.yaml")
    p = validate(
        Plan,
        {**yaml.safe_load((PLANS / "small-pd-cross.yaml").read_text()), "wan": [{"option": "a-to-c", "count": 1}]},
        "plan.yaml",
    )
    message = scenario_error(p, workload)
    assert "wan[0].option = 'a-to-c' joins dc-a-dc-c, not dc-a-dc-b" in message


def test_a_workload_stack_reaches_every_role(agent: Workload) -> None:
    """serving.stack switches each role's instance to the GPU profile's factors for that stack."""
    stacked = agent.model_copy(update={"serving": agent.serving.model_copy(update={"stack": "vllm-ci-2024"})})
    plain = build_scenario(plan(), load_input_set(agent))
    with_stack = build_scenario(plan(), load_input_set(stacked))
    for name, role in with_stack.roles.items():
        assert role.instance.stack == "vllm-ci-2024"
        assert role.instance.efficiency == role.instance.hardware.stack_efficiency["vllm-ci-2024"]
        assert plain.roles[name].instance.stack is None
