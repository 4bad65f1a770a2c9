"""Joint (prompt, hit) request mixes and trace-built workloads (`trace import --workload-out`):
hand-computed classes on tiny traces, the evaluator and simulator drawing pairs from the mix, the
mix moving with the bathtub's hit axis, end to end on the shipped trace, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pddplan.errors import InputError
from pddplan.evaluate.classes import request_classes
from pddplan.inputs import load_workload
from pddplan.scenarios.variants import at_hit
from pddplan.specs.distributions import RequestMix
from pddplan.specs.workload import Workload
from pddplan.trace import read_trace, summarize
from pddplan.trace.workload import build_workload, joint_histogram, workload_fields

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"
THREE = [
    {"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]},
    {"timestamp": 1000, "input_length": 1536, "output_length": 20, "hash_ids": [1, 2, 3]},
    {"timestamp": 3000, "input_length": 600, "output_length": 30, "hash_ids": [1, 4]},
]


def _trace(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _mixed(workload: Workload, classes: list[dict[str, Any]]) -> Workload:
    data = workload.model_dump(mode="json", exclude_none=True)
    data["request_mix"] = {"classes": classes}
    return Workload.model_validate(data)


def test_three_requests_make_three_classes_by_hand(tmp_path: Path) -> None:
    """Unbounded cache, 512-token blocks: hits 0, 1024/1536 = 2/3 and 512/600 (test_trace's
    hand computation); three prompt lengths in three bins, so three classes of share 1/3 each at
    exactly those (prompt, hit) pairs. The hit marginal is one point per hit bin at its mean: the
    same three values, so its mean is the mix's, 0.5067 = (0 + 2/3 + 512/600) / 3. Arrivals: 3
    requests over 3 s, inter-arrival CV 1/3, so a Gamma process."""
    path = _trace(tmp_path, THREE)
    summary = summarize(read_trace(path), 512).to_output(str(path), "mooncake")
    fields = workload_fields(joint_histogram(read_trace(path), 10**9, 512), summary, "test")
    pairs = sorted((c["prompt_tokens"], c["hit"], c["share"]) for c in fields["request_mix"]["classes"])
    assert pairs == [
        (600, pytest.approx(512 / 600, abs=1e-6), pytest.approx(1 / 3)),
        (1024, 0.0, pytest.approx(1 / 3)),
        (1536, pytest.approx(2 / 3, abs=1e-6), pytest.approx(1 / 3)),
    ]
    assert sorted(b["low"] for b in fields["hit_rate"]["buckets"]) == pytest.approx([0, 2 / 3, 512 / 600], abs=1e-6)
    assert fields["arrival"] == {"rate_rps": 1.0, "process": "gamma", "cv": pytest.approx(1 / 3, abs=1e-4)}
    workload = build_workload(load_workload("chat-short-lowhit"), fields, "t", "", "t.jsonl")
    assert workload.request_mix is not None
    assert workload.request_mix.mean_hit() == pytest.approx(workload.hit_rate.mean(), abs=1e-6)


def test_a_small_cache_lowers_the_hits_it_replays(tmp_path: Path) -> None:
    """With room for one block, LRU: request 2 finds block 1 evicted by block 2 (hit 0); request
    3 finds block 3 (hit 0). Every class then has hit 0."""
    path = _trace(tmp_path, THREE)
    fields = workload_fields(
        joint_histogram(read_trace(path), 1, 512), summarize(read_trace(path)).to_output(str(path), "mooncake"), "t"
    )
    assert {c["hit"] for c in fields["request_mix"]["classes"]} == {0.0}


def test_the_evaluator_draws_the_mix_pairs_not_the_product() -> None:
    """Two classes, (1,000 tokens, hit 0) and (10,000 tokens, hit 0.9), half each: the classes
    the closed form averages over are those two pairs (the independent product would add
    (1,000, 0.9) and (10,000, 0)). New tokens with 16-token pages: 1,000, and 10,000 less the
    cached floor(0.9 x 10,000 / 16) x 16 = 8,992, so 1,008; mean 1,004."""
    base = load_workload("chat-short-lowhit")
    classes = [{"prompt_tokens": 1000, "hit": 0.0, "share": 0.5}, {"prompt_tokens": 10000, "hit": 0.9, "share": 0.5}]
    marginals = base.model_copy(
        update={
            "hit_rate": base.hit_rate.model_validate(
                {"buckets": [{"low": 0.0, "high": 0.0, "share": 0.5}, {"low": 0.9, "high": 0.9, "share": 0.5}]}
            )
        }
    )
    workload = _mixed(marginals, classes)
    prompt, hit, prob = workload.prompt_hit_support()
    assert sorted(zip(prompt.tolist(), hit.tolist(), prob.tolist(), strict=True)) == [
        (1000.0, 0.0, 0.5),
        (10000.0, 0.9, 0.5),
    ]
    from pddplan.perf.kv import new_tokens

    fresh = new_tokens(prompt, hit, 16)
    assert float(fresh @ prob) == pytest.approx((1000 + 1008) / 2, rel=1e-12)
    independent = marginals.prompt_hit_support()
    assert len(independent[0]) > 2


def test_the_simulator_draws_only_mix_pairs() -> None:
    from pddplan.api import scenario_of
    from pddplan.simulate.engine import _Simulation  # the drawn requests are its state

    scenario = scenario_of(ROOT / "tests" / "data" / "export" / "pdd-agent-64k-pd-intra.yaml", "pdd-agent-64k")
    workload = scenario.workload
    hits = workload.hit_rate.model_validate(
        {"buckets": [{"low": 0.2, "high": 0.2, "share": 0.25}, {"low": 0.96, "high": 0.96, "share": 0.75}]}
    )
    from pddplan.specs.distributions import HistogramLength

    prompts = HistogramLength.model_validate(
        {"kind": "histogram", "bins": [{"low_tokens": 8000, "high_tokens": 64512, "share": 1.0}]}
    )
    classes = [{"prompt_tokens": 8000, "hit": 0.2, "share": 0.25}, {"prompt_tokens": 64512, "hit": 0.96, "share": 0.75}]
    mixed = _mixed(workload.model_copy(update={"hit_rate": hits, "prompt_tokens": prompts}), classes)
    from dataclasses import replace

    sim = _Simulation(replace(scenario, workload=mixed), 4000, np.random.default_rng(0))
    pairs = set(zip(sim.prompt.tolist(), np.round(sim.hit, 6).tolist(), strict=True))
    assert pairs == {(8000, 0.2), (64512, 0.96)}
    assert np.mean(sim.prompt == 8000) == pytest.approx(0.25, abs=0.03)


def test_a_mix_must_agree_with_its_marginals() -> None:
    base = load_workload("chat-short-lowhit")
    with pytest.raises(ValueError, match="longer than prompt_tokens' longest"):
        _mixed(base, [{"prompt_tokens": 10**6, "hit": base.hit_rate.mean(), "share": 1.0}])
    with pytest.raises(ValueError, match="mean hit rate"):
        _mixed(base, [{"prompt_tokens": 1000, "hit": 0.99, "share": 1.0}])
    with pytest.raises(ValueError, match="class shares sum"):
        RequestMix.model_validate({"classes": [{"prompt_tokens": 10, "hit": 0.1, "share": 0.3}]})


def test_the_bathtub_moves_the_mix_with_the_marginal() -> None:
    """At every hit point the mix's mean lands on the point, as the marginal's does."""
    base = load_workload("chat-short-lowhit")
    mean = base.hit_rate.mean()
    workload = _mixed(
        base,
        [
            {"prompt_tokens": 500, "hit": mean - 0.1, "share": 0.5},
            {"prompt_tokens": 8000, "hit": mean + 0.1, "share": 0.5},
        ],
    )
    for target in (0.0, 0.3, 0.8, 1.0):
        for mode in ("shift", "fixed"):
            moved = at_hit(workload, target, mode)
            assert moved.request_mix is not None
            assert moved.request_mix.mean_hit() == pytest.approx(target, abs=1e-9)
            assert moved.hit_rate.mean() == pytest.approx(target, abs=1e-9)


def test_a_trace_built_workload_optimizes_end_to_end_and_keeps_the_correlation(cli: Any, tmp_path: Path) -> None:
    """From the shipped trace with pdd-agent-64k's deployment: the workload file loads, optimizes
    (every architecture the template allows), and its mix keeps the trace's positive correlation
    of hit with prompt length: fewer new (uncached) tokens per request than the same marginals
    drawn independently, which misplaces the misses onto long prompts."""
    out = tmp_path / "traced.yaml"
    result = cli("trace", "import", str(MOONCAKE), "--workload-out", str(out), "--like", "pdd-agent-64k", "--json")
    assert result.exit_code == 0, result.stderr
    workload = load_workload(str(out))
    assert workload.request_mix is not None and "mooncake-synthetic.jsonl" in workload.request_mix.source
    from pddplan.perf.kv import new_tokens

    prompt, hit, prob = workload.prompt_hit_support()
    joint_new = float(new_tokens(prompt, hit, 64) @ prob)
    independent = workload.model_copy(update={"request_mix": None})
    prompt, hit, prob = independent.prompt_hit_support()
    assert joint_new < 0.8 * float(new_tokens(prompt, hit, 64) @ prob)
    optimized = cli("optimize", str(out), "--requests", "2000", "--json")
    assert optimized.exit_code == 0, optimized.stderr
    best = json.loads(optimized.stdout)
    assert best["best"] is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--workload-out", "w.yaml"), "--workload-out and --like go together"),
        (("--cache-capacity", "1GB"), "--cache-capacity and --tier go with --workload-out"),
        (
            ("--workload-out", "w.yaml", "--like", "pdd-agent-64k", "--cache-capacity", "lots"),
            "--cache-capacity = 'lots'",
        ),
        (("--workload-out", "w.yaml", "--like", "pdd-agent-64k", "--eviction", "fifo"), "--eviction = 'fifo'"),
        (("--workload-out", "w.yaml", "--like", "no-such-workload"), "no-such-workload"),
    ],
)
def test_bad_workload_out_options(cli: Any, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    trace = _trace(tmp_path, THREE)
    fixed = [str(tmp_path / a) if a == "w.yaml" else a for a in args]
    result = cli("trace", "import", str(trace), *fixed)
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w.yaml").exists()


def test_a_trace_without_hashes_cannot_give_hits(cli: Any, tmp_path: Path) -> None:
    azure = tmp_path / "a.csv"
    azure.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    out = tmp_path / "w.yaml"
    result = cli(
        "trace", "import", str(azure), "--format", "azure", "--workload-out", str(out), "--like", "pdd-agent-64k"
    )
    assert result.exit_code == 2 and "block hashes" in result.stderr and not out.exists()


def test_the_written_file_is_a_workload_file_with_a_header(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "w.yaml"
    assert cli("trace", "import", str(MOONCAKE), "--workload-out", str(out), "--like", "pdd-agent-64k").exit_code == 0
    text = out.read_text()
    assert text.startswith("# Written by `pddplan trace import")
    data = yaml.safe_load(text)
    assert data["model"] == "deepseek-v3.2" and data["sla"]["ttft_p90_s"] == 10.0
    assert cli("workloads", "show", str(out)).exit_code == 0
    with pytest.raises(InputError):
        load_workload(str(tmp_path / "missing.yaml"))


def test_a_slow_tier_load_delays_the_first_token_and_not_the_prefill_instance() -> None:
    """Every class loading its cached KV for 1 s from a slower tier, instead of what the workload's
    cache tiers give it (tens of ms): the closed form's TTFT percentiles rise by the difference (it
    is off the engine, as the request overhead), the prefill pool's utilization does not move; the
    simulation agrees on the shift of the median.

    At 0.3 req/s, 40% of the requests prefilling 32K new tokens (each for seconds on one
    data-parallel rank) and 60% 2.6K: the median is a short request's, so it moves by the load
    alone (with half and half it would fall between the two kinds, where any point is a median)."""
    from dataclasses import replace

    from pddplan.api import scenario_of
    from pddplan.evaluate import evaluate
    from pddplan.simulate import simulate

    scenario = scenario_of(ROOT / "tests" / "data" / "export" / "pdd-agent-64k-pd-intra.yaml", "pdd-agent-64k")
    workload = scenario.workload.model_copy(
        update={"arrival": scenario.workload.arrival.model_copy(update={"rate_rps": 0.3})}
    )
    hits = workload.hit_rate.model_validate(
        {"buckets": [{"low": 0.5, "high": 0.5, "share": 0.4}, {"low": 0.96, "high": 0.96, "share": 0.6}]}
    )
    classes = [{"prompt_tokens": 64512, "hit": 0.5, "share": 0.4}, {"prompt_tokens": 64512, "hit": 0.96, "share": 0.6}]
    base = _mixed(workload.model_copy(update={"hit_rate": hits}), classes)
    loaded = _mixed(base, [c | {"load_s": 1.0} for c in classes])
    before, after = (evaluate(replace(scenario, workload=w)) for w in (base, loaded))
    assert after.stages["prefill"].utilization == pytest.approx(before.stages["prefill"].utilization, rel=1e-12)
    short = request_classes(replace(scenario, workload=base)).load_s[1]  # the median request's tier load
    assert 0.0 < short < 0.1
    assert after.ttft.p50_s == pytest.approx(before.ttft.p50_s + 1.0 - short, abs=2e-3)
    sim_before, sim_after = (simulate(replace(scenario, workload=w), 3000, 0).summary for w in (base, loaded))
    assert sim_after.ttft_p50_s - sim_before.ttft_p50_s == pytest.approx(1.0, abs=0.15)


def test_tiers_put_their_load_into_the_trace_built_workload(cli: Any, tmp_path: Path) -> None:
    """With an SSD tier, classes that hit carry a load time; the chain's total hit is what one
    cache of the summed size gives, so the mix's mean hit matches that workload's."""
    tiered, single = tmp_path / "tiered.yaml", tmp_path / "single.yaml"
    args = ("trace", "import", str(MOONCAKE), "--like", "pdd-agent-64k")
    assert cli(*args, "--workload-out", str(tiered), "--tier", "hbm:20GB", "--tier", "ssd:2TB:6GB/s").exit_code == 0
    assert cli(*args, "--workload-out", str(single), "--cache-capacity", "2020GB").exit_code == 0
    mix_tiered, mix_single = (load_workload(str(p)).request_mix for p in (tiered, single))
    assert mix_tiered is not None and mix_single is not None
    assert mix_tiered.load_s().max() > 0 and mix_single.load_s().max() == 0
    assert mix_tiered.mean_hit() == pytest.approx(mix_single.mean_hit(), abs=5e-3)
