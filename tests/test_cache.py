"""The prefix cache replayed over block hashes (`pddplan cache-curve`): LRU and LFU by hand,
per-instance caches, capacities with units, the curve on the shipped trace, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of, one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.errors import InputError
from pddplan.trace.cache import replay
from pddplan.trace.curve import parse_capacities
from pddplan.trace.read import TraceRequest, read_trace

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"


def requests(*prompts: tuple[int, ...], tokens_per_block: int = 10) -> list[TraceRequest]:
    return [TraceRequest(float(i), len(p) * tokens_per_block, 1, p) for i, p in enumerate(prompts)]


def test_lru_by_hand() -> None:
    """Capacity 3 blocks, 10 tokens each. A (1,2) misses; B (3,4) misses and evicts 1 (least
    recent); C (1,2) misses on 1, so hits nothing though 2 is held; D (1,2) then hits both."""
    trace = requests((1, 2), (3, 4), (1, 2), (1, 2))
    result = replay(trace, 3, block_tokens=10, eviction="lru")
    assert result.requests == 4
    assert result.hit_token_weighted == pytest.approx(20 / 80)
    assert result.hit_request_weighted == pytest.approx(0.25)


def test_lfu_keeps_the_frequent_block_by_hand() -> None:
    """Capacity 2. Block 1 is used three times, then 2 and 3 once each. LFU evicts 2 when 3 comes
    (fewest uses), so the last (1,) hits; LRU evicts 1 (used longest ago), so it misses."""
    trace = requests((1,), (1,), (1,), (2,), (3,), (1,))
    lfu = replay(trace, 2, block_tokens=10, eviction="lfu")
    lru = replay(trace, 2, block_tokens=10, eviction="lru")
    # LFU: hits at requests 2, 3, 6 (block 1 never evicted); LRU: 2 and 3 only (1 evicted by 2, 3)
    assert lfu.hit_request_weighted == pytest.approx(3 / 6)
    assert lru.hit_request_weighted == pytest.approx(2 / 6)


def test_partial_last_block_and_zero_capacity() -> None:
    """A prompt of 15 tokens in two 10-token blocks hits at most its 15 tokens; capacity 0 never hits."""
    trace = [TraceRequest(0.0, 15, 1, (1, 2)), TraceRequest(1.0, 15, 1, (1, 2))]
    assert replay(trace, 10, block_tokens=10).hit_token_weighted == pytest.approx(15 / 30)
    assert replay(trace, 0, block_tokens=10).hit_token_weighted == 0.0


def test_round_robin_splits_a_session_affinity_keeps_it() -> None:
    """Two instances: the same prompt twice in a row hits under affinity, not under round-robin."""
    trace = requests((4, 5), (4, 5))
    assert replay(trace, 10, 10, instances=2, routing="affinity").hit_request_weighted == pytest.approx(0.5)
    assert replay(trace, 10, 10, instances=2, routing="round-robin").hit_request_weighted == 0.0


@settings(max_examples=30, deadline=None)
@given(
    prompts=st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=6), min_size=1, max_size=30),
    small=st.integers(0, 20),
    extra=st.integers(0, 20),
)
def test_a_bigger_lru_cache_never_hits_less(prompts: list[list[int]], small: int, extra: int) -> None:
    """LRU is a stack algorithm: every block a smaller cache holds, a bigger one holds too."""
    trace = requests(*(tuple(dict.fromkeys(p)) for p in prompts))
    less = replay(trace, small, 10, "lru").hit_token_weighted
    more = replay(trace, small + extra, 10, "lru").hit_token_weighted
    assert more >= less - 1e-12


def test_capacities_with_units() -> None:
    parsed = parse_capacities("1GB, 2M tokens,500ktok,1GiB,0", kv_bytes_per_token=50_000.0)
    # 1e9 / 5e4 = 20,000 tokens; 2**30 / 5e4 = 21,474.83648 tokens
    assert [c.tokens for c in parsed] == pytest.approx([20_000.0, 2e6, 5e5, 21_474.83648, 0.0])
    assert parsed[0].capacity_bytes == 1e9 and parsed[1].capacity_bytes is None
    with pytest.raises(InputError, match="needs --model"):
        parse_capacities("1GB", None)
    for bad in ("ten", "5XB", "-1GB", "1e30tokens", "10G", "1T", "2M", "100"):
        with pytest.raises(InputError, match="--capacity"):
            parse_capacities(bad, 1.0)


def test_the_curve_on_the_shipped_trace_reaches_the_unbounded_hit(cli: Any) -> None:
    """Hits rise with capacity and stop at what `trace import` reports for an unbounded cache."""
    data = json_of(
        cli("cache-curve", str(MOONCAKE), "--model", "deepseek-v3.2", "--capacity", "1GB,100GB,10TB", "--json")
    )
    hits = [p["hit_token_weighted"] for p in data["points"]]
    assert hits == sorted(hits) and hits[0] < hits[-1]
    unbounded = json_of(cli("trace", "import", str(MOONCAKE), "--json"))["ideal_hit_rate_token_weighted"]
    assert hits[-1] == pytest.approx(unbounded, rel=1e-12)
    assert len(list(read_trace(MOONCAKE))) == data["points"][0]["requests"]


def test_cache_curve_html_and_bad_flags(cli: Any, tmp_path: Path) -> None:
    page = tmp_path / "curve.html"
    result = cli("cache-curve", str(MOONCAKE), "--capacity", "1Mtok,10Mtok", "--html", str(page))
    assert result.exit_code == 0 and "<svg" in page.read_text()
    # the axis is ticked with the sizes asked for, not log10 of tokens; no empty findings heading
    text = page.read_text()
    assert ">1 Mtok</text>" in text and ">10 Mtok</text>" in text and "log10" not in text
    assert "Findings" not in text
    one_error_line(
        cli("cache-curve", str(MOONCAKE), "--capacity", "1Mtok", "--eviction", "fifo"), "--eviction = 'fifo'"
    )
    one_error_line(cli("cache-curve", str(MOONCAKE), "--capacity", "1GB"), "needs --model")
    one_error_line(cli("cache-curve", str(MOONCAKE), "--capacity", "1Mtok", "--instances", "0"), "--instances")
    one_error_line(
        cli("cache-curve", str(MOONCAKE), "--capacity", "1Mtok", "--html", str(tmp_path / "x.png")), "--html"
    )
