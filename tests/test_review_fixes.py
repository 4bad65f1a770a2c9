"""Regression tests for what the session's review found: each fails on the code before its fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pddplan.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
HAND = ROOT / "examples" / "plans" / "pdd-agent-64k-pdd.yaml"


def test_a_failure_keeps_the_purchase_cost(cli: Any) -> None:
    """A failed decoder is still paid for: cost stays, BCR falls with the goodput lost."""
    data = json.loads(cli("whatif", str(HAND), "pdd-agent-64k", "--fail", "instance:decode", "--json").stdout)
    assert data["after"]["cost_usd_per_hour"] == pytest.approx(data["before"]["cost_usd_per_hour"])
    assert data["after"]["bcr"] == pytest.approx(
        data["after"]["goodput_rps"] * 3600 / data["before"]["cost_usd_per_hour"]
    )


def test_an_empty_benchmark_list_is_one_line(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("[]")
    result = cli(
        "calibrate", "--from", "vllm-bench", str(path), "--gpu", "h200", "--model", "llama-3.1-70b", "--tp", "4"
    )
    assert result.exit_code == 2 and "no benchmark runs" in result.stderr


def test_a_bandwidth_in_bits_is_refused() -> None:
    from pddplan.trace.tiers import parse_tier

    with pytest.raises(InputError, match="reads as bits"):
        parse_tier("ssd:2TB:6Gb/s", 48_068)


def test_long_plan_names_keep_instances_apart() -> None:
    from pddplan.api import scenario_of
    from pddplan.export import export_plan

    plan = yaml.safe_load(HAND.read_text())
    plan["name"] = "x" * 60
    path = Path("/tmp") / "pddplan-long-name-plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    files = export_plan(scenario_of(path, "pdd-agent-64k"), "k8s").files
    docs = [d for n_, t in files.items() if n_.endswith(".yaml") for d in yaml.safe_load_all(t)]
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]  # a Service shares its instance's name
    assert len(names) == len(set(names)) and all(len(n) <= 63 for _, n in names)


def test_sglang_prefill_services_expose_the_bootstrap_port_and_the_rule_names_services() -> None:
    from pddplan.api import scenario_of
    from pddplan.export import export_plan

    files = export_plan(scenario_of(HAND, "pdd-agent-64k"), "k8s").files
    docs = [d for n_, t in files.items() if n_.endswith(".yaml") for d in yaml.safe_load_all(t)]
    prefill = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].endswith("prefill-0"))
    assert {p["port"] for p in prefill["spec"]["ports"]} == {30000, 8998}
    rule = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["pdd-router.yaml"])
    assert all("${" not in url for url in rule["prefill"] + rule["main_decode"])


def test_robust_refuses_a_rate_before_optimizing(cli: Any) -> None:
    result = cli("optimize", "pdd-agent-64k-day", "--robust", "--rate", "4", "-a", "pdd")
    assert result.exit_code == 2 and "leave out --rate" in result.stderr


def test_moving_the_hit_scales_a_class_load() -> None:
    """A class that loads its cached KV from a slower tier loads half as much at half the hit,
    and nothing at hit 0."""
    from pddplan.scenarios.variants import mix_at_hit
    from pddplan.specs.distributions import RequestMix

    mix = RequestMix.model_validate({"classes": [{"prompt_tokens": 1000, "hit": 0.8, "share": 1.0, "load_s": 0.2}]})
    assert mix_at_hit(mix, 0.4, "shift").classes[0].load_s == pytest.approx(0.1)
    assert mix_at_hit(mix, 0.0, "shift").classes[0].load_s == 0.0


def test_load_time_is_not_prefill_engine_time() -> None:
    """A class's tier load is kept apart from its prefill latency (the optimizer reads prefill_s
    as engine time when it bounds pool sizes)."""
    from dataclasses import replace

    from pddplan.api import scenario_of
    from pddplan.evaluate.classes import request_classes

    scenario = scenario_of(ROOT / "tests" / "data" / "export" / "pdd-agent-64k-pd-intra.yaml", "pdd-agent-64k")
    w = scenario.workload
    hits = w.hit_rate.model_validate({"buckets": [{"low": 0.9, "high": 0.9, "share": 1.0}]})
    data = w.model_copy(update={"hit_rate": hits}).model_dump(mode="json", exclude_none=True)
    data["request_mix"] = {"classes": [{"prompt_tokens": 64512, "hit": 0.9, "share": 1.0, "load_s": 0.5}]}
    from pddplan.specs.workload import Workload

    mixed = Workload.model_validate(data)
    plain = Workload.model_validate(
        {**data, "request_mix": {"classes": [{"prompt_tokens": 64512, "hit": 0.9, "share": 1.0}]}}
    )
    with_load, without = (request_classes(replace(scenario, workload=x)) for x in (mixed, plain))
    assert with_load.prefill_s.tolist() == without.prefill_s.tolist()
    assert with_load.load_s.tolist() == [0.5] * len(with_load.load_s)
