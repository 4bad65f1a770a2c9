"""`pddplan.optimize.search`, `.problem` and `.diagnose`: Dinkelbach iterations, line pruning,
routing rules, the elastic diagnosis of infeasible programs, and whole-architecture searches on
the shipped workloads (in-process; the CLI's subprocess tests are in test_optimize_cli.py).
"""

from __future__ import annotations

import copy
import itertools
import math
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml
from test_optimize_model import (  # shared synthetic builders and brute force
    brute_bcr,
    brute_rate,
    candidate,
    close,
    decoder,
    instance,
    line,
    pdd_problem,
)

from pddplan import architectures
from pddplan.architectures.pdd import HIT_THRESHOLDS
from pddplan.errors import InfeasibleError
from pddplan.evaluate import evaluate
from pddplan.evaluate.capacity import PathLoad
from pddplan.evaluate.moments import WorkloadMoments
from pddplan.inputs import load_workload, workload_dir
from pddplan.inputs.input_set import load_input_set
from pddplan.optimize import model as milp
from pddplan.optimize import search
from pddplan.optimize.diagnose import FIXES, diagnose
from pddplan.optimize.frontier import deployment
from pddplan.optimize.options import Mode, OptimizeOptions
from pddplan.optimize.problem import MISS_SHARE, Headroom, build_setup, limited_prefill_caps, prune_lines, solve_bcr
from pddplan.optimize.search import MAX_ROUNDS, TIGHTEN, optimize_architecture, require_feasible
from pddplan.perf import decode_step_time
from pddplan.perf.kv import request_kv_bytes
from pddplan.specs.distributions import FixedLength
from pddplan.specs.workload import Fluctuation, Sla

ROOT = Path(__file__).resolve().parent.parent


# -- Dinkelbach ----------------------------------------------------------------------------------------
def test_dinkelbach_converges_to_the_brute_force_ratio() -> None:
    data = pdd_problem("bcr", min_served_fraction=0.0)
    expected = brute_bcr(data)
    assert expected is not None
    solution, solves = solve_bcr(data, OptimizeOptions())
    assert solution is not None
    assert close(solution.rate / solution.cost_per_hour, expected)
    assert 2 <= solves <= 12


@pytest.mark.parametrize("factor", [0.5, 1.0, 3.0, 100.0])
def test_dinkelbach_from_a_start_ratio_still_returns_the_optimum(factor: float) -> None:
    """A start ratio above what any plan achieves must restart, not return nothing."""
    for floor in (0.0, 1.0):
        data = pdd_problem("bcr", min_served_fraction=floor)
        expected = brute_bcr(data)
        assert expected is not None
        solution, _ = solve_bcr(data, OptimizeOptions(), start_ratio=expected * factor)
        assert solution is not None, (floor, factor)
        assert close(solution.rate / solution.cost_per_hour, expected), (floor, factor)


def test_full_rate_bcr_is_the_cheapest_plan_at_the_ceiling() -> None:
    data = pdd_problem("bcr")
    solution, _ = solve_bcr(data, OptimizeOptions())
    cheapest = brute_rate(replace(data, mode="rate", target_rate=data.rate_ceiling))
    assert solution is not None and cheapest is not None
    assert close(solution.rate, data.rate_ceiling)
    assert close(solution.cost_per_hour, cheapest)


def test_solve_reports_infeasible_programs_as_none() -> None:
    starved = {("dc-a", "h100-sxm"): 1, ("dc-a", "h20"): 1}
    modes: tuple[tuple[Mode, dict[str, float], OptimizeOptions], ...] = (
        ("rate", {"target_rate": 3.0}, OptimizeOptions(rate=3.0)),
        ("budget", {"budget_per_hour": 1.0}, OptimizeOptions(budget_per_hour=1.0)),
        ("bcr", {}, OptimizeOptions()),
    )
    for mode, extra, options in modes:
        data = pdd_problem(mode, inventory=starved, **extra)
        solution, solves = solve_bcr(data, options)
        assert solution is None, mode
        assert solves == 1, mode


# -- line pools and routing rules --------------------------------------------------------------------
def test_prune_lines_drops_only_dominated_pools() -> None:
    a = line("dc-a", "dc-b", 10.0)
    bigger_same_price = replace(a, capacity_bytes_per_s=a.capacity_bytes_per_s * 2)
    cheaper_same_size = replace(a, usd_per_hour=5.0)
    other_direction = replace(a, source="dc-b", target="dc-a", usd_per_hour=50.0)
    trade_off = replace(a, capacity_bytes_per_s=a.capacity_bytes_per_s * 3, usd_per_hour=20.0)
    kept = prune_lines([a, bigger_same_price, cheaper_same_size, other_direction, trade_off])
    assert a not in kept
    assert bigger_same_price in kept and cheaper_same_size in kept
    assert other_direction in kept and trade_off in kept
    twin = replace(a)
    assert prune_lines([a, twin]) == [a, twin]  # equal pools dominate neither


def test_prune_lines_keeps_a_dearer_pool_with_a_better_transfer_tail() -> None:
    """Guards prune_lines: a pool cheaper and at least as large must not prune one with a lower RTT,
    a higher per-flow TCP cap or another fluctuation (RTT and the flow cap set the transfer tail, so
    a cheap slow option hid the fast lines); a pool beaten on every axis is still pruned."""
    fast = line("dc-a", "dc-b", 10.0)
    assert fast.fluctuation.kind != "none"
    cheap_big = replace(fast, usd_per_hour=5.0, capacity_bytes_per_s=2 * fast.capacity_bytes_per_s)
    far = replace(cheap_big, rtt_s=4 * fast.rtt_s)
    capped = replace(cheap_big, flow_cap_bytes_per_s=fast.flow_cap_bytes_per_s / 4)
    steady = replace(cheap_big, fluctuation=Fluctuation(kind="none"))
    for other in (far, capped, steady):
        assert prune_lines([fast, other]) == [fast, other]
    beaten = replace(
        fast,
        usd_per_hour=20.0,
        capacity_bytes_per_s=fast.capacity_bytes_per_s / 2,
        flow_cap_bytes_per_s=fast.flow_cap_bytes_per_s / 2,
        rtt_s=2 * fast.rtt_s,
    )
    assert prune_lines([fast, beaten]) == [fast]
    slower_only = replace(fast, rtt_s=2 * fast.rtt_s)  # equal on every other axis, worse RTT
    assert prune_lines([slower_only, fast]) == [fast]
    assert prune_lines([fast, far, beaten]) == [fast, far]


def test_routing_rules_are_distinct_relay_sets() -> None:
    workload = load_workload("pdd-agent-64k")
    setup = build_setup(load_input_set(workload, workload_dir("pdd-agent-64k")), "pdd", workload.arrival.rate_rps)
    hits, _ = workload.hit_rate.support()
    rules = setup.architecture.routings(workload)
    relayed = [int((hits < rule.hit_threshold).sum()) for rule in rules]  # type: ignore[union-attr]
    assert rules and all(rule is not None and rule.hit_threshold in HIT_THRESHOLDS for rule in rules)
    assert len(set(relayed)) == len(relayed) and all(n > 0 for n in relayed)
    for name in architectures.names():
        arch = architectures.get(name)
        if not arch.has_relay:  # without a relay there is nothing to route
            assert build_setup(load_input_set(workload, None), name, 4.0).architecture.routings(workload) == [None], (
                name
            )
        if not arch.uses_wan:  # RDMA-only architectures lease no lines
            assert build_setup(load_input_set(workload, workload_dir("pdd-agent-64k")), name, 4.0).lines == [], name
    assert all(pool.source == workload.deployment.home for pool in setup.lines)
    assert setup.lines


def test_a_main_decoder_that_may_miss_adds_the_bytes_rule() -> None:
    """With turn gaps given, the main decoder misses some prefixes prefill hit; a high-hit request
    may then send its whole prompt, so relaying by bytes joins the hit rules (after them)."""
    workload = load_workload("pdd-agent-64k")
    gapped = workload.model_copy(update={"serving": workload.serving.model_copy(update={"turn_gap_s": 30.0})})
    arch = architectures.get("pdd")
    plain, missing = arch.routings(workload), arch.routings(gapped)
    assert all(rule is not None and rule.kind == "hit" for rule in plain)
    assert missing[: len(plain)] == plain
    extra = missing[len(plain) :]
    assert len(extra) == 1 and extra[0] is not None and extra[0].kind == "bytes"
    assert extra[0].incremental_bytes_threshold > 0


# -- elastic diagnosis on hand-made programs -------------------------------------------------------------
class FixedBuilder:
    """Stands in for a `ProblemBuilder`: a setup with an SLA and a mean context of 2000 tokens
    (E[prompt] 1800 + E[output] 400 / 2), whose programs are all `data`."""

    def __init__(
        self,
        data: milp.ProblemData,
        options: OptimizeOptions,
        tpot: float = 0.05,
        ttft90: float = 2.0,
        ttft99: float = 5.0,
    ) -> None:
        sla = Sla(tpot_p90_s=tpot, ttft_p90_s=ttft90, ttft_p99_s=ttft99)
        prompts = FixedLength(kind="fixed", tokens=1800)
        self.setup = SimpleNamespace(
            architecture=data.architecture,
            workload=SimpleNamespace(sla=sla, prompt_tokens=prompts, serving=SimpleNamespace(page_tokens=64)),
            moments=WorkloadMoments(prompt_tokens=1800.0, output_tokens=400.0),
            rate_ceiling=data.rate_ceiling,
            candidates=[*data.prefill, *(d.candidate for d in data.decode)],
        )
        self.options = options
        self.data = data

    def build(self, routing: Any, headroom: Headroom | None = None) -> milp.ProblemData:
        return self.data

    def unloaded_ttft(self, routing: Any) -> tuple[np.ndarray, Any, Any]:
        """A fixed floor: TTFT P90 0.5 s / P99 1.2 s on the first prefill kind over the first pool's line."""
        return np.array([0.5, 1.2]), self.data.prefill[0], self.data.pools[0].line


def run_diagnose(data: milp.ProblemData, options: OptimizeOptions | None = None, **sla: float) -> list[dict[str, Any]]:
    return diagnose(FixedBuilder(data, options or OptimizeOptions(), **sla))  # type: ignore[arg-type]


def ample_pdd(**changes: Any) -> milp.ProblemData:
    """One kind per role, roomy everywhere: 3 req/s needs 3 prefill, 3 relay and 2 decode instances."""
    pre = candidate("dc-a", "h100-sxm", 1, 0.2, 10)
    rel = candidate("dc-a", "h100-sxm", 1, 0.2, 10)
    dec = candidate("dc-b", "h20", 1, 0.2, 10)
    data = milp.ProblemData(
        architecture=architectures.get("pdd"),
        prefill=[pre],
        prefill_caps={(0, 0): np.array([0.0, 0.0, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5])},
        decode=[decoder(dec, 1.6, 500.0)],
        relay=[decoder(rel, 1.0, 50.0, occupancy=2.0)],
        pools=[PathLoad(line("dc-a", "dc-b", 0.1), 1e8, 1.0, 2.0, 10.0)],
        datacenters=["dc-a"],
        decode_cache_bytes_per_rps=0.0,
        mean_output_tokens=300.0,
        inventory={("dc-a", "h100-sxm"): 100, ("dc-b", "h20"): 100},
        rate_ceiling=3.0,
    )
    return replace(data, **changes)


def only(findings: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(findings) == 1, findings
    return findings[0]


def test_ample_program_is_feasible() -> None:
    solution, _ = solve_bcr(ample_pdd(), OptimizeOptions())
    assert solution is not None
    assert solution.prefill == (0, 3) and solution.relay == (0, 3) and solution.decode == (0, 2)


def test_diagnose_inventory_shortfall() -> None:
    """3 prefill + 3 relay GPUs of h100 in dc-a are needed, 5 are offered: short by 1 GPU."""
    finding = only(run_diagnose(ample_pdd(inventory={("dc-a", "h100-sxm"): 5, ("dc-b", "h20"): 100})))
    assert finding["constraint"] == "inventory"
    assert finding["shortfall"] == pytest.approx(1.0, rel=1e-6)
    assert "inventory binds" in finding["message"] and FIXES["inventory"] in finding["message"]
    assert "GPUs" in finding["message"]


def test_diagnose_decode_shortfall_is_the_decode_gpus_missing() -> None:
    """1 h20 offered in dc-b, decoders of 1.6 req/s each: 3 req/s needs 2, so the decode GPU type is
    short by 1 GPU. More GPUs fix a decode shortfall, so it is reported as GPUs, by type."""
    dec = candidate("dc-b", "h20", 1, 0.2, 1)
    data = ample_pdd(decode=[decoder(dec, 1.6, 500.0)], inventory={("dc-a", "h100-sxm"): 100, ("dc-b", "h20"): 1})
    finding = only(run_diagnose(data))
    assert finding["constraint"] == "inventory"
    assert finding["shortfall"] == pytest.approx(1.0, rel=1e-6)
    assert finding["by_type"] == {"dc-b/h20": pytest.approx(1.0, rel=1e-6)}
    assert "h20 in dc-b short by 1 GPUs (needs 2, offers 1)" in finding["message"]


def test_diagnose_wan_bandwidth_shortfall() -> None:
    load = PathLoad(line("dc-a", "dc-b", 0.1), 1e8, 1.0, 2.0, 2.25)
    finding = only(run_diagnose(ample_pdd(pools=[load])))
    assert finding["constraint"] == "wan-bandwidth"
    assert finding["shortfall"] == pytest.approx(0.75, rel=1e-6)
    assert FIXES["wan-bandwidth"] in finding["message"]
    # the report names the line pool whose bandwidth binds
    assert load.line is not None and finding["pool"] == load.line.key
    assert f"wan-bandwidth binds on {load.line.key}:" in finding["message"]


def test_diagnose_prefill_capacity_shortfall() -> None:
    caps = {(0, 0): np.array([0.5, 1.0, 1.5, 2.0, 2.6])}
    finding = only(run_diagnose(ample_pdd(prefill_caps=caps)))
    assert finding["constraint"] == "prefill-capacity"
    assert finding["shortfall"] == pytest.approx(0.4, rel=1e-6)
    assert "req/s" in finding["message"] and FIXES["prefill-capacity"] in finding["message"]
    # the report names the prefill pool the least-short plan strains: the largest of the only kind
    data = ample_pdd(prefill_caps=caps)
    assert finding["pool"].startswith(f"5 x {data.prefill[0].key} over ")


def test_diagnose_budget_shortfall_with_cheap_instances() -> None:
    data = ample_pdd(mode="budget", budget_per_hour=1.0)
    cheapest = brute_rate(ample_pdd(mode="rate", target_rate=3.0))
    assert cheapest is not None and cheapest > 1.0
    finding = only(run_diagnose(data, OptimizeOptions(mode="budget", budget_per_hour=1.0)))
    assert finding["constraint"] == "budget"
    assert finding["shortfall"] == pytest.approx(cheapest - 1.0, rel=1e-6)
    assert "raise the budget" in finding["message"]


def test_diagnose_budget_shortfall_with_realistic_prices() -> None:
    """Instances at $2.5-8/h: a budget 10% below the cheapest full-rate plan is what binds, and
    raising it by the shortfall is the fix. (Every slack has the same penalty per unit, so a
    shortfall in $/h must not be traded for a 'shortfall' in req/s of a capacity that the
    inventory could supply.)"""
    cheapest = brute_rate(pdd_problem("rate", target_rate=3.0))
    assert cheapest is not None
    budget = 0.9 * cheapest
    data = pdd_problem("budget", budget_per_hour=budget)
    findings = run_diagnose(data, OptimizeOptions(mode="budget", budget_per_hour=budget))
    assert [f["constraint"] for f in findings] == ["budget"], findings
    assert findings[0]["shortfall"] == pytest.approx(cheapest - budget, rel=1e-6)


def test_diagnose_ttft_nothing_can_meet() -> None:
    caps = {(0, 0): np.zeros(10)}
    finding = only(run_diagnose(ample_pdd(prefill_caps=caps), ttft90=0.01, ttft99=0.02))
    assert finding["constraint"] == "prefill-capacity"
    assert finding["shortfall"] == pytest.approx(3.0)
    assert "no prefill pool meets TTFT P90 0.01 s / TTFT P99 0.02 s at any rate" in finding["message"]
    assert "even unloaded the closest (dc-a/h100-sxm/tp1 over dc-a->dc-b:" in finding["message"]
    assert "reaches TTFT P90 0.5 s / TTFT P99 1.2 s" in finding["message"]
    assert finding["best_ttft_s"] == {"TTFT P90": 0.5, "TTFT P99": 1.2}
    assert "loosen the TTFT SLA" in finding["message"]
    # the 40 Gbps line carries one transfer at TCP's per-transfer bound, 8 streams x 0.151 Gbps:
    # more line bandwidth, which it used to advise, changes nothing
    assert "one KV crosses at 1.21 Gbps of the line's 40" in finding["message"]
    assert "more WAN bandwidth" not in finding["message"]


def test_diagnose_advises_more_bandwidth_only_where_the_line_bounds_a_transfer() -> None:
    """Where one transfer may take the whole line (per-transfer bound at or above its capacity),
    more bandwidth is the WAN's fix; the per-transfer advice names both rates."""
    from pddplan.optimize.diagnose import _flow_cap_advice

    line = ample_pdd().pools[-1].line
    assert line is not None
    assert "0.5 Gbps of the line's 40" in _flow_cap_advice(replace(line, flow_cap_bytes_per_s=0.5e9 / 8))
    wide = replace(line, flow_cap_bytes_per_s=line.capacity_bytes_per_s)
    caps = {(0, 0): np.zeros(10)}
    data = ample_pdd(prefill_caps=caps)
    data = replace(data, pools=[replace(p, line=wide) if p.line is not None else p for p in data.pools])
    message = only(run_diagnose(data, ttft90=0.01, ttft99=0.02))["message"]
    assert message.endswith("or more WAN bandwidth"), message


def test_unloaded_ttft_quantiles_are_the_delay_mixtures_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Delays 1, 5, 3, 10 s with probabilities 0.5, 0.3, 0.15, 0.05: sorted, the shares reach
    0.5, 0.65, 0.95, 1; so P50 = 1 s, P90 = 5 s, P99 = 10 s."""
    from pddplan.evaluate import capacity

    paths = SimpleNamespace(
        delays=lambda rows, rate: np.array([[1.0, 5.0, 3.0, 10.0]]), weights_l=np.array([[0.5, 0.3, 0.15, 0.05]])
    )
    monkeypatch.setattr(capacity, "_first_token_paths", lambda *args: paths)
    floors = capacity.unloaded_ttft_s(None, None, [None], None, [0.5, 0.9, 0.99])  # type: ignore[arg-type, list-item]
    np.testing.assert_array_equal(floors, [[1.0, 5.0, 10.0]])


def test_pd_cross_infeasible_says_the_best_ttft_any_pool_reaches() -> None:
    """pdd-agent-64k's pd-cross: the finding gives the least TTFT quantiles any prefill kind and
    line reaches unloaded, and the P99 one is over its 20 s target (why nothing is feasible)."""
    workload = load_workload("pdd-agent-64k")
    options = OptimizeOptions(verify=False)
    result = optimize_architecture(load_input_set(workload, workload_dir("pdd-agent-64k")), "pd-cross", options)
    finding = only(result.infeasibility)
    assert finding["constraint"] == "prefill-capacity"
    best = finding["best_ttft_s"]
    assert best["TTFT P99"] > 20.0 and 0 < best["TTFT P90"] < best["TTFT P99"]
    assert f"TTFT P99 {best['TTFT P99']:.3g} s" in finding["message"]


def test_without_diagnose_an_infeasible_architecture_has_no_finding_and_the_same_outcome() -> None:
    """`diagnose=False` (the gate's, agreement's) skips only the explanation: pdd-agent-64k's pd-cross
    is as infeasible, with no plan, and says nothing about why."""
    inputs = load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    explained = optimize_architecture(inputs, "pd-cross", OptimizeOptions(verify=False))
    silent = optimize_architecture(inputs, "pd-cross", OptimizeOptions(verify=False, diagnose=False))
    assert explained.infeasibility and not silent.infeasibility
    assert not silent.feasible and not explained.feasible
    assert silent.plan == explained.plan and silent.evaluation == explained.evaluation


def test_diagnose_tpot_no_decoder_meets_at_batch_one() -> None:
    dec = candidate("dc-b", "h20", 1, 0.2, 10)
    data = ample_pdd(decode=[decoder(dec, 0.0, 80.0, usable=False)])
    finding = only(run_diagnose(data, tpot=0.001))
    step = float(decode_step_time(instance(), 1.0, 2000.0))
    assert finding["constraint"] == "decode-capacity"
    assert finding["shortfall"] == pytest.approx(step - 0.001)
    assert "no decode candidate meets TPOT P90 1 ms even at batch 1" in finding["message"]
    assert "loosen the TPOT SLA" in finding["message"]


def test_diagnose_targets_the_requested_rate_in_rate_mode() -> None:
    data = ample_pdd(mode="rate", target_rate=2.0, rate_ceiling=2.0)
    load = PathLoad(line("dc-a", "dc-b", 0.1), 1e8, 1.0, 2.0, 1.5)
    finding = only(run_diagnose(replace(data, pools=[load]), OptimizeOptions(mode="rate", rate=2.0)))
    assert finding["constraint"] == "wan-bandwidth"
    assert finding["shortfall"] == pytest.approx(0.5, rel=1e-6)
    assert "at 2 req/s" in finding["message"]


# -- whole searches on shipped workloads -----------------------------------------------------------------
def workload_copy(tmp: Path, name: str, edit: Any) -> tuple[Any, Path]:
    """A shipped workload with `edit(dict)` applied, written to tmp; (workload, folder)."""
    spec = yaml.safe_load((ROOT / "workloads" / f"{name}.yaml").read_text())
    spec = copy.deepcopy(spec)
    edit(spec)
    path = tmp / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_workload(str(path)), tmp


def set_max_count(dc: int, count: int) -> Any:
    def edit(spec: dict[str, Any]) -> None:
        spec["name"] = f"{spec['name']}-dc{dc}-{count}"
        spec["deployment"]["datacenters"][dc]["gpus"][0]["max_count"] = count

    return edit


DEDICATED_RELAY = OptimizeOptions(verify=False, relay_placement="dedicated")
NO_VERIFY = OptimizeOptions(verify=False)


def constraints(result: Any) -> list[str]:
    return [item["constraint"] for item in result.infeasibility]


def test_pdd_agent_search_without_verification() -> None:
    workload = load_workload("pdd-agent-64k")
    result = optimize_architecture(load_input_set(workload, workload_dir("pdd-agent-64k")), "pdd", NO_VERIFY)
    assert result.feasible and result.rounds == 1 and result.simulation is None
    plan = result.plan
    assert plan is not None and (plan.relay is not None or plan.relay_on_prefill) and plan.wan
    assert plan.prefill.datacenter == workload.deployment.home
    assert plan.relay is None or plan.relay.datacenter == workload.deployment.home
    assert plan.decode is not None and plan.decode.datacenter != plan.prefill.datacenter
    assert result.evaluation is not None and result.evaluation.sla_met
    assert result.handoff_mode in ("adaptive", "catch-up", "one-shot")
    require_feasible(result)


def test_prefill_and_relay_share_a_starved_inventory(tmp_path: Path) -> None:
    """16 GPU-A in DC A hold one TP16 instance: PDD with a dedicated relay needs a prefill and a
    relay instance there, so it is short by exactly one instance. At 1 req/s one TP16 prefill
    instance carries the load (at the workload's 4 req/s, where a lone prefill runs its attention
    and dense layers on one data-parallel rank, it takes more than one)."""

    def edit(spec: dict[str, Any]) -> None:
        set_max_count(0, 16)(spec)
        spec["arrival"]["rate_rps"] = 1.0

    workload, folder = workload_copy(tmp_path, "pdd-agent-64k", edit)
    result = optimize_architecture(load_input_set(workload, folder), "pdd", DEDICATED_RELAY)
    assert not result.feasible
    assert "inventory" in constraints(result)
    item = next(i for i in result.infeasibility if i["constraint"] == "inventory")
    assert item["shortfall"] == pytest.approx(16.0, rel=1e-6)
    assert "raise max_count" in item["message"]
    with pytest.raises(InfeasibleError, match="inventory binds"):
        require_feasible(result)


def test_starved_decode_inventory_is_diagnosed_as_inventory(tmp_path: Path) -> None:
    """8 GPU-B in DC B; the cheapest plan at 4 req/s decodes on 16 GPU-B (one TP16 instance; TP8
    ones lack the memory). The binding constraint is the GPU inventory, and the fix is to raise
    max_count; the elastic program must say so rather than report a memory shortfall in GB."""
    workload, folder = workload_copy(tmp_path, "pdd-agent-64k", set_max_count(1, 8))
    result = optimize_architecture(load_input_set(workload, folder), "pdd", NO_VERIFY)
    assert not result.feasible
    assert "inventory" in constraints(result), result.infeasibility


def test_inventory_shortfall_is_what_would_fix_it(tmp_path: Path) -> None:
    """pd-intra with 16 GPU-A: one TP16 prefill and six TP16 decoders (112 GPUs) serve 4 req/s
    (the unconstrained optimum), so the inventory is short by 96 GPUs, not 16."""
    full = optimize_architecture(
        load_input_set(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k")), "pd-intra", NO_VERIFY
    )
    assert full.scenario is not None
    needed = sum(full.scenario.gpus_by_type().values())
    workload, folder = workload_copy(tmp_path, "pdd-agent-64k", set_max_count(0, 16))
    result = optimize_architecture(load_input_set(workload, folder), "pd-intra", NO_VERIFY)
    assert not result.feasible
    item = next(i for i in result.infeasibility if i["constraint"] == "inventory")
    assert item["shortfall"] >= needed - 16 - 1e-6, result.infeasibility


def test_tpot_nothing_meets_on_a_real_workload(tmp_path: Path) -> None:
    def edit(spec: dict[str, Any]) -> None:
        spec["name"] = "tight-tpot"
        spec["sla"]["tpot_p90_s"] = 0.001

    workload, folder = workload_copy(tmp_path, "pdd-agent-64k", edit)
    result = optimize_architecture(load_input_set(workload, folder), "pdd", NO_VERIFY)
    assert not result.feasible and result.plan is None
    finding = only(result.infeasibility)
    assert finding["constraint"] == "decode-capacity" and finding["shortfall"] > 0
    assert "TPOT P90 1 ms" in finding["message"]


def test_budget_below_every_plan_is_infeasible_not_a_crash() -> None:
    """$60/h buys no PDD plan of pdd-agent-64k with a dedicated relay (the cheapest serving one
    costs ~$75/h): the answer is 'infeasible, budget binds', not an invalid plan."""
    workload = load_workload("pdd-agent-64k")
    options = OptimizeOptions(mode="budget", budget_per_hour=60.0, verify=False, relay_placement="dedicated")
    result = optimize_architecture(load_input_set(workload, workload_dir("pdd-agent-64k")), "pdd", options)
    assert not result.feasible
    assert "budget" in constraints(result)


def test_budget_mode_never_serves_nothing() -> None:
    """Budget mode maximizes goodput: a feasible result serves a positive rate within budget."""
    workload = load_workload("pdd-agent-64k")
    options = OptimizeOptions(mode="budget", budget_per_hour=90.0, verify=False)
    result = optimize_architecture(load_input_set(workload, workload_dir("pdd-agent-64k")), "pdd", options)
    assert result.feasible and result.evaluation is not None
    assert result.evaluation.goodput_rps > 0
    assert result.evaluation.cost_per_hour <= 90.0 + 1e-9
    assert math.isfinite(result.evaluation.bcr)


def test_budget_mode_serves_less_after_a_failed_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the budget binds, tighter capacities leave the same plan at the same rate; so a round
    whose plans all fail verification makes the next round serve at most TIGHTEN x the goodput of
    the last plan it verified. The fake simulation fails every plan above 2.5 req/s, with idle
    decoders (no decode tightening)."""
    rounds: list[list[float]] = []  # the rates verified, round by round
    best_of_round = search._best_of_round

    def counted_round(*args: Any, **kwargs: Any) -> Any:
        rounds.append([])
        return best_of_round(*args, **kwargs)

    def simulated(scenario: Any, requests: int, seed: int, early_stop: bool = True) -> Any:
        rate = evaluate(scenario).goodput_rps
        rounds[-1].append(rate)
        return SimpleNamespace(
            summary=SimpleNamespace(sla_met=rate <= 2.5, utilization={"prefill": 0.5, "decode": 0.1})
        )

    monkeypatch.setattr(search, "_best_of_round", counted_round)
    monkeypatch.setattr(search, "verify", simulated)
    workload = load_workload("pdd-agent-64k")
    options = OptimizeOptions(mode="budget", budget_per_hour=90.0)
    result = optimize_architecture(load_input_set(workload, workload_dir("pdd-agent-64k")), "pdd", options)
    verified = [rates for rates in rounds if rates]
    assert len(verified) >= 2 and verified[0][0] > 2.5  # the budget buys more than the fake simulation accepts
    for before, after in itertools.pairwise(verified):
        assert after[0] <= TIGHTEN * before[-1] + 1e-9
    assert result.feasible and result.evaluation is not None
    assert result.evaluation.goodput_rps == verified[-1][-1] <= 2.5


def test_a_simulated_miss_limits_every_pool_as_small_or_smaller_of_that_kind() -> None:
    """Hand-computed: kind "a" missed with 2 instances at 4 req/s, so its pools of 1 and 2 are
    credited with at most 0.85 x 4 = 3.4 req/s; its pool of 3 and kind "b" keep their rates, and
    the memo's rows are not changed."""
    kinds = [SimpleNamespace(key="a"), SimpleNamespace(key="b")]
    caps = {(0, 0): np.array([2.0, 3.9, 6.0]), (1, 0): np.array([1.0, 5.0, 9.0])}
    headroom = Headroom(prefill_misses=(("a", 2, 4.0),))
    limited = limited_prefill_caps(caps, kinds, headroom)  # type: ignore[arg-type]
    assert MISS_SHARE == 0.85
    np.testing.assert_allclose(limited[(0, 0)], [2.0, 3.4, 6.0], rtol=1e-12)
    np.testing.assert_array_equal(limited[(1, 0)], [1.0, 5.0, 9.0])
    np.testing.assert_array_equal(caps[(0, 0)], [2.0, 3.9, 6.0])
    assert not headroom.prefill_allowed("a", 1, 4.0) and not headroom.prefill_allowed("a", 2, 5.0)
    assert headroom.prefill_allowed("a", 3, 4.0) and headroom.prefill_allowed("a", 2, 3.0)
    assert headroom.prefill_allowed("b", 1, 4.0)


def test_a_deployment_the_simulation_rejected_is_not_simulated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake simulation fails every pd-intra plan with fewer than 2 prefill instances (the
    program picks 1), decoders idle (the prefill pool is the cause): each round must bring a
    deployment not simulated before, neither the program nor the trim going back to one, and the
    plan kept has at least 2."""
    simulated: list[str] = []

    def fake(scenario: Any, requests: int, seed: int, early_stop: bool = True) -> Any:
        simulated.append(deployment(scenario.plan))
        met = scenario.plan.prefill.count >= 2
        return SimpleNamespace(summary=SimpleNamespace(sla_met=met, utilization={"prefill": 0.9, "decode": 0.1}))

    monkeypatch.setattr("pddplan.optimize.search.verify", fake)
    workload = load_workload("pdd-agent-64k")
    result = optimize_architecture(
        load_input_set(workload, workload_dir("pdd-agent-64k")), "pd-intra", OptimizeOptions()
    )
    assert len(simulated) == len(set(simulated)) >= 2
    assert result.feasible and result.plan is not None and result.plan.prefill.count >= 2


def test_a_closed_form_miss_with_a_saturated_decoder_credits_fewer_decode_slots() -> None:
    """A plan the closed form finds missing, with its main decoder's batch at 1.04 x its maximum:
    the next round shrinks the TTFT targets and the decode capacities by TIGHTEN each, and keeps
    what the simulations learned; with the decoder at half its maximum only the targets shrink."""
    from pddplan.optimize.search import _after_miss

    learned = Headroom(prefill_misses=(("k", 2, 4.0),))

    def miss(decode_utilization: float) -> Headroom:
        stages = {
            "prefill": SimpleNamespace(utilization=0.97),
            "decode": SimpleNamespace(utilization=decode_utilization),
        }
        pick = SimpleNamespace(evaluation=SimpleNamespace(stages=stages), plan=SimpleNamespace(rate_rps=None))
        return _after_miss(learned, pick, None, OptimizeOptions(), 4.0, [])  # type: ignore[arg-type]

    saturated = miss(1.04)
    assert saturated.sla_scale == pytest.approx(TIGHTEN) and saturated.decode_scale == pytest.approx(TIGHTEN)
    assert saturated.prefill_misses == learned.prefill_misses
    idle = miss(0.5)
    assert idle.sla_scale == pytest.approx(TIGHTEN) and idle.decode_scale == 1.0


def test_a_round_of_simulated_misses_sets_the_next_limits_from_its_best_plan() -> None:
    """Hand-computed, budget mode: the round's best plan (1.19 req/s, decoders idle) and its
    runner-up (1.088 req/s, decoders saturated) both missed in simulation. The next round may serve
    0.85 x 1.19 (not 0.85 x 1.088, which served 8.5% less for the same money), the decoders are
    credited 0.85 x their slots once, and the TTFT targets shrink by 0.85 (no prefill kind to blame:
    no candidates). Two saturated misses still tighten the decoders once."""
    from pddplan.optimize.search import _after_misses

    def simulated_miss(goodput: float, decode_busy: float) -> tuple[Any, Any]:
        stages = {"prefill": SimpleNamespace(utilization=0.5), "decode": SimpleNamespace(utilization=decode_busy)}
        plan = SimpleNamespace(rate_rps=None, split=None, prefill=SimpleNamespace(count=2))
        pick = SimpleNamespace(evaluation=SimpleNamespace(goodput_rps=goodput, stages=stages), plan=plan)
        return pick, SimpleNamespace(utilization={"prefill": 0.5, "decode": decode_busy})

    budget = OptimizeOptions(mode="budget", budget_per_hour=30.0)
    after = _after_misses(Headroom(), [simulated_miss(1.19, 0.5), simulated_miss(1.088, 0.9)], budget, 4.0, [])
    assert after.rate_cap_rps == pytest.approx(TIGHTEN * 1.19, rel=1e-12)
    assert after.decode_scale == pytest.approx(TIGHTEN) and after.sla_scale == pytest.approx(TIGHTEN)
    both = _after_misses(Headroom(), [simulated_miss(1.19, 0.9), simulated_miss(1.088, 0.9)], budget, 4.0, [])
    assert both.decode_scale == pytest.approx(TIGHTEN)


def test_a_budget_search_keeps_the_ceiling_that_served_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Budget mode doubles the ceiling while the plan serves all of it: 4 and 8 req/s are served
    whole, and the search at 16 verifies only 7.06 req/s; the answer is the 8 req/s plan."""
    served = {4.0: 4.0, 8.0: 8.0, 16.0: 7.06}

    def optimized_at(inputs: Any, architecture: Any, options: Any, ceiling: float, progress: Any) -> Any:
        return SimpleNamespace(feasible=True, evaluation=SimpleNamespace(goodput_rps=served[ceiling]), ceiling=ceiling)

    monkeypatch.setattr(search, "_optimize_at", optimized_at)
    workload = load_workload("pdd-agent-64k")
    options = OptimizeOptions(mode="budget", budget_per_hour=90.0)
    result = optimize_architecture(load_input_set(workload, workload_dir("pdd-agent-64k")), "pdd", options)
    assert result.ceiling == 8.0  # type: ignore[attr-defined]


def test_closed_form_missing_the_sla_in_every_round_keeps_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards an infeasible result whose plans all missed the SLA in closed form, so none was ever
    simulated: it must keep no plan, scenario or evaluation (only a plan the simulation tried is
    reported), and the 'sla' finding must say "in closed form", not "when verified by simulation"."""

    def missing(scenario: Any, rate_rps: float | None = None) -> Any:
        return replace(evaluate(scenario, rate_rps), sla_met=False)

    def no_simulation(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a plan missing the SLA in closed form must not be simulated")

    monkeypatch.setattr("pddplan.optimize.problem.evaluate", missing)
    monkeypatch.setattr("pddplan.optimize.search.verify", no_simulation)
    workload = load_workload("pdd-agent-64k")
    result = optimize_architecture(
        load_input_set(workload, workload_dir("pdd-agent-64k")), "pd-intra", OptimizeOptions()
    )
    assert not result.feasible
    assert result.rounds == MAX_ROUNDS
    assert result.simulation is None
    assert result.plan is None and result.scenario is None and result.evaluation is None
    finding = only(result.infeasibility)
    assert finding["constraint"] == "sla"
    assert "in closed form" in finding["message"]
    assert "when verified by simulation" not in finding["message"]


def test_bcr_diagnosis_is_at_the_least_rate_it_may_serve(tmp_path: Path) -> None:
    """Guards the BCR-mode diagnosis with min_served_fraction 0.5: the shortfall is reported at the
    least rate BCR mode may serve (0.5 x the offered 4 req/s = 2 req/s), not at the offered rate."""
    workload, folder = workload_copy(tmp_path, "pdd-agent-64k", set_max_count(0, 16))
    assert workload.arrival.rate_rps == 4.0
    result = optimize_architecture(
        load_input_set(workload, folder),
        "pdd",
        OptimizeOptions(min_served_fraction=0.5, verify=False, relay_placement="dedicated"),
    )
    assert not result.feasible
    finding = next(i for i in result.infeasibility if i["constraint"] == "inventory")
    assert finding["shortfall"] == pytest.approx(16.0, rel=1e-6)
    assert "at 2 req/s" in finding["message"]
    assert all("at 4 req/s" not in item["message"] for item in result.infeasibility)


def test_decoder_too_small_for_one_sequence_is_reported_as_memory(tmp_path: Path) -> None:
    """Guards the diagnosis when no candidate holds one sequence's KV: a 1M-token prompt of
    llama-3.1-8b (~131 GB of KV) on TP1 GPUs (at most ~110 GB of KV budget on gpu-b). The binding
    constraint is memory for the longest prompt (no instance kind can even prefill it; short by
    the difference), not a TPOT the decoders would in fact meet at batch 1."""
    spec = yaml.safe_load((ROOT / "tests" / "data" / "plans" / "small-workload.yaml").read_text())
    spec["name"] = "giant-prompt"
    spec["prompt_tokens"] = {"kind": "fixed", "tokens": 1_000_000}
    spec["arrival"]["rate_rps"] = 0.01
    spec["deployment"]["tp_options"] = [1]
    spec["deployment"]["wan_lines"] = spec["deployment"]["wan_lines"][:1]  # no trace file to copy
    path = tmp_path / "giant-prompt.yaml"
    path.write_text(yaml.safe_dump(spec))
    workload = load_workload(str(path))
    result = optimize_architecture(load_input_set(workload, tmp_path), "pd-cross", NO_VERIFY)
    assert not result.feasible and result.plan is None
    finding = only(result.infeasibility)
    assert finding["constraint"] == "prompt-memory"
    assert "holds the KV of the longest prompt (1,000,000 tokens" in finding["message"]
    assert "TPOT" not in finding["message"]
    setup = build_setup(load_input_set(workload, tmp_path), "pd-cross", 0.01)
    context = setup.moments.context_tokens
    prompt_kv = float(request_kv_bytes(setup.model, 1_000_000, workload.serving.page_tokens))
    roomiest = max(c.kv_capacity_bytes for c in setup.candidates)  # dense TP1: one pool per instance
    assert prompt_kv > roomiest
    assert finding["shortfall"] == pytest.approx((prompt_kv - roomiest) / 1e9, rel=1e-9)
    # at batch 1 the decoders are fast enough: TPOT was never the problem
    best = min(float(decode_step_time(c.instance, 1.0, context)) for c in setup.candidates)
    assert workload.sla.tpot_p90_s is not None and best < workload.sla.tpot_p90_s


def test_architectures_optimized_side_by_side_give_the_same_report() -> None:
    """Forked workers (one per architecture) change the wall time, not one figure."""
    from pddplan.optimize import optimize

    workload = load_workload("chat-short-lowhit")
    base = workload_dir("chat-short-lowhit")
    alone = optimize(workload, base, OptimizeOptions(verify_requests=3_000, jobs=1)).to_output()
    side_by_side = optimize(workload, base, OptimizeOptions(verify_requests=3_000, jobs=2)).to_output()
    assert side_by_side == alone


def test_variants_sharing_one_pool_give_each_its_own_report() -> None:
    """Two rates of chat-short-lowhit optimized together, their searches in one pool of workers,
    give the reports each gives alone (the robustness table's runs)."""
    from pddplan.optimize.run import optimize, optimize_variants

    workload = load_workload("chat-short-lowhit")
    base = workload_dir("chat-short-lowhit")
    options = OptimizeOptions(verify=False, jobs=2)
    faster = workload.model_copy(update={"arrival": workload.arrival.model_copy(update={"rate_rps": 30.0})})
    names = ["pd-intra", "agg"]
    together = optimize_variants([(workload, options), (faster, options)], base, names)
    alone = [optimize(w, base, replace(options, jobs=1), names) for w in (workload, faster)]
    assert [r.to_output() for r in together] == [r.to_output() for r in alone]
    assert together[0].to_output() != together[1].to_output()


def test_a_budget_buys_more_than_the_workload_rate_when_it_can() -> None:
    """--budget used to stop at the workload's own rate: $60/h buys chat-short-lowhit's 20 req/s
    several times over on pd-intra, so the plan must serve more than 20 req/s within $60/h."""
    workload = load_workload("chat-short-lowhit")
    options = OptimizeOptions(mode="budget", budget_per_hour=60.0, verify=False)
    result = optimize_architecture(load_input_set(workload, workload_dir("chat-short-lowhit")), "pd-intra", options)
    assert result.feasible and result.evaluation is not None
    assert result.evaluation.goodput_rps > 1.5 * workload.arrival.rate_rps
    assert result.evaluation.cost_per_hour <= 60.0 + 1e-9


def test_workers_are_forked_only_when_no_other_thread_runs() -> None:
    """A thread holding a lock at the fork would leave it held in the child forever (a hang):
    with another thread alive, the architectures run one after another instead. Checked in a fresh
    interpreter: a test worker may still hold another module's thread pool (test_optimize_cli's)."""
    import subprocess
    import sys

    code = """
import threading
from pddplan.support.forking import fork_is_safe
assert fork_is_safe(), "alone"
stop = threading.Event()
other = threading.Thread(target=stop.wait)
other.start()
try:
    assert not fork_is_safe(), "beside another thread"
finally:
    stop.set()
    other.join()
assert fork_is_safe(), "after it ended"
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


@pytest.mark.parametrize("first", ["pddplan.cli", "pddplan.analyses.agreement"])
def test_no_blas_thread_pool_runs_beside_the_forks(first: str) -> None:
    """pddplan keeps numpy's and scipy's OpenBLAS single-threaded (pddplan/support/blas.py): with a
    BLAS thread pool alive, forking can deadlock (a CI run hung), and the optimizer would fall back
    to one architecture at a time. A fresh process that loads the CLI, or a library module as a
    user's script does, then numpy and scipy, and does real linear algebra has one thread (without
    pddplan/support/blas.py it has one more per BLAS copy; a library import had it until the call
    moved from the CLI to the package)."""
    import subprocess
    import sys

    # threads_in_process counts native threads on Linux (/proc), Python threads elsewhere; the
    # variable pddplan/support/blas.py sets is checked everywhere
    code = (
        f"import os, {first}, numpy as np, scipy.linalg\n"
        "from pddplan.support.forking import threads_in_process\n"
        "m = np.eye(300) + np.ones((300, 300)) / 300\n"
        "scipy.linalg.lu_factor(m); np.linalg.inv(m) @ m\n"
        "print(threads_in_process(), os.environ.get('OPENBLAS_NUM_THREADS'))"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    }
    threads = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert threads.stdout.split() == ["1", "1"]


def _die(name: object) -> None:
    os._exit(1)


def test_a_worker_that_dies_fails_the_run_instead_of_hanging_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """multiprocessing.Pool waits forever for a task whose worker was killed; the optimizer's pool
    must raise instead, naming the way out (--jobs 1)."""
    from pddplan.optimize import parallel

    monkeypatch.setattr(parallel, "_one", _die)
    monkeypatch.setattr(parallel, "fork_is_safe", lambda: True)  # whatever an earlier test left running
    workload = load_workload("chat-short-lowhit")
    inputs = load_input_set(workload, workload_dir("chat-short-lowhit"))
    with pytest.raises(RuntimeError, match="--jobs 1"):
        parallel.optimize_all(inputs, ["pd-intra", "pdd"], OptimizeOptions(jobs=2, verify=False))
