"""The tiered prefix cache (`cache-curve --tier`): by hand on three requests, against the single
LRU it must equal in total, and bad tier specifications."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.errors import InputError
from pddplan.trace.cache import replay
from pddplan.trace.read import TraceRequest, read_trace
from pddplan.trace.tiers import Tier, parse_tier, replay_tiers

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"
KV = 50_000.0  # bytes per token, for the hand computation
THREE = [
    TraceRequest(0.0, 1024, 1, (1, 2)),
    TraceRequest(1.0, 1536, 1, (1, 2, 3)),
    TraceRequest(3.0, 600, 1, (1, 4)),
]


def test_three_requests_by_hand() -> None:
    """Tier 0 holds 1 block, tier 1 two (read at 1 GB/s). After request 1, block 2 is in tier 0
    and block 1 demoted to tier 1. Request 2 hits block 1 in tier 1 and block 2 in tier 0 (512
    tokens each; loading tier 1's costs 512 x 50,000 B / 1e9 B/s = 25.6 ms); then 1, 2, 3 move to
    tier 0, which keeps 3 and demotes 1 and 2. Request 3 hits block 1 in tier 1 (512 of its 600
    tokens, 25.6 ms). Shares of the 3,160 prompt tokens: 512 in tier 0, 1,024 in tier 1."""
    tiers = [Tier("hbm", "1", 512, None), Tier("dram", "2", 1024, 1e9)]
    result = replay_tiers(THREE, tiers, KV, 512)
    assert result.tokens_by_tier == [512, 1024]
    assert result.prompt_tokens == 3160
    assert result.load_s.tolist() == pytest.approx([0.0, 0.0256, 0.0256])
    assert result.hit_token_weighted == pytest.approx(1536 / 3160)


@settings(max_examples=40, deadline=None)
@given(
    prompts=st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=6), min_size=1, max_size=40),
    sizes=st.lists(st.integers(0, 6), min_size=1, max_size=3),
)
def test_the_chain_holds_what_one_lru_of_its_total_size_holds(prompts: list[list[int]], sizes: list[int]) -> None:
    """An exclusive LRU chain keeps blocks in recency order across its tiers, so its total hits
    equal one LRU cache of the summed capacity (`replay`), request by request."""
    trace = [TraceRequest(float(i), 512 * len(p), 1, tuple(p)) for i, p in enumerate(prompts)]
    tiers = [Tier(f"t{k}", "", 512 * n, 1e9) for k, n in enumerate(sizes)]
    chained = replay_tiers(trace, tiers, KV, 512)
    single = replay(trace, sum(sizes), 512)
    assert sum(chained.tokens_by_tier) / chained.prompt_tokens == pytest.approx(single.hit_token_weighted, abs=1e-12)


def test_the_shipped_trace_in_tiers_hits_as_one_cache_of_their_sum() -> None:
    tiers = [parse_tier("hbm:20GB", 48_068), parse_tier("dram:200GB:50GB/s", 48_068)]
    chained = replay_tiers(read_trace(MOONCAKE), tiers, 48_068)
    single = replay(read_trace(MOONCAKE), int((tiers[0].tokens + tiers[1].tokens) // 512) + 0, 512)
    assert chained.hit_token_weighted == pytest.approx(single.hit_token_weighted, abs=2e-3)  # whole blocks per tier
    assert chained.load_s.max() > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dram", "expected NAME:CAPACITY"),
        ("dram:1TB:fast", "the bandwidth = .fast.: expected a number with its unit"),
        (":1TB", "expected NAME"),
    ],
)
def test_bad_tiers(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_tier(text, 48_068)


def test_cache_curve_with_tiers(cli: Any) -> None:
    result = cli(
        "cache-curve",
        str(MOONCAKE),
        "--model",
        "deepseek-v3.2",
        "--tier",
        "hbm:20GB",
        "--tier",
        "ssd:2TB:6GB/s",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    tiered = json.loads(result.stdout)["tiered"]
    assert [t["tier"] for t in tiered["tiers"]] == ["hbm", "ssd"]
    assert tiered["load_s_p99"] >= tiered["load_s_mean"] > 0
    for args, message in (
        (("--tier", "hbm:20GB"), "--tier needs --model"),
        (("--model", "deepseek-v3.2", "--tier", "hbm:20GB", "--capacity", "1GB"), "not both or neither"),
        (("--model", "deepseek-v3.2"), "not both or neither"),
    ):
        bad = cli("cache-curve", str(MOONCAKE), *args)
        assert bad.exit_code == 2 and message in bad.stderr


def test_cache_curve_draws_png_and_svg(cli: Any, tmp_path: Path) -> None:
    png, svg = tmp_path / "c.png", tmp_path / "c.svg"
    result = cli(
        "cache-curve",
        str(MOONCAKE),
        "--model",
        "deepseek-v3.2",
        "--capacity",
        "10GB,1TB",
        "--png",
        str(png),
        "--svg",
        str(svg),
    )
    assert result.exit_code == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in svg.read_bytes()[:500]
