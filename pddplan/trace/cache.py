"""A prefix cache replayed over a trace's block hashes: what hit rate a given capacity buys.

A request's prompt is a list of block hashes (`block_tokens` tokens each, the last block maybe
partial). Its hit is the longest leading run of its blocks that the cache holds when it arrives:
cached tokens = min(run x block_tokens, prompt tokens). Then every block of the prompt is in the
cache (the new ones inserted, all of them touched), and blocks are evicted until the cache holds
at most `capacity_blocks`:

  lru  evict the block used longest ago;
  lfu  evict the block used fewest times (ties: the one used longest ago).

`instances` > 1 splits the capacity into that many caches, one per prefill instance, and routes
each request by `routing`: `affinity` (by its first block, so a session's turns meet their prefix)
or `round-robin`. One cache of the whole capacity is the pooled store (a KV store shared by all).
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from pddplan.errors import InputError
from pddplan.trace.read import TraceRequest

Eviction = Literal["lru", "lfu"]
Routing = Literal["affinity", "round-robin"]


class _Lru:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def __contains__(self, block: int) -> bool:
        return block in self.blocks

    def touch(self, blocks: tuple[int, ...]) -> None:
        for block in blocks:
            self.blocks[block] = None
            self.blocks.move_to_end(block)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)


class _Lfu:
    """Counts per block and a heap of (count, last use, block) with stale entries skipped."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.count: dict[int, int] = {}
        self.used: dict[int, int] = {}
        self.heap: list[tuple[int, int, int]] = []
        self.clock = itertools.count()

    def __contains__(self, block: int) -> bool:
        return block in self.count

    def touch(self, blocks: tuple[int, ...]) -> None:
        for block in blocks:
            self.count[block] = self.count.get(block, 0) + 1
            self.used[block] = next(self.clock)
            heapq.heappush(self.heap, (self.count[block], self.used[block], block))
        while len(self.count) > self.capacity:
            count, used, block = heapq.heappop(self.heap)
            if self.count.get(block) == count and self.used.get(block) == used:
                del self.count[block], self.used[block]


@dataclass(frozen=True)
class CacheResult:
    """Hits at one capacity: token-weighted (cached / prompt tokens) and request-weighted (mean of
    per-request hit fractions), over the requests with block hashes."""

    capacity_blocks: int
    requests: int
    hit_token_weighted: float
    hit_request_weighted: float


def replay(
    requests: Iterable[TraceRequest],
    capacity_blocks: int,
    block_tokens: int = 512,
    eviction: Eviction = "lru",
    instances: int = 1,
    routing: Routing = "affinity",
    on_request: Callable[[TraceRequest, float], None] | None = None,
) -> CacheResult:
    """Replay `requests` through the cache (module docstring); requests without hashes are skipped.
    `on_request(request, hit)` sees each request with its hit fraction, cached / prompt tokens."""
    if capacity_blocks < 0 or instances < 1:
        raise InputError("a cache needs a capacity of at least 0 blocks and at least 1 instance")
    kind = _Lru if eviction == "lru" else _Lfu
    per_instance = capacity_blocks // instances
    caches = [kind(per_instance) for _ in range(instances)]
    turn = 0
    prompt_tokens = cached_tokens = 0
    hit_sum = 0.0
    count = 0
    for request in requests:
        blocks = request.hash_ids
        if blocks is None:
            continue
        if routing == "affinity":
            cache = caches[(blocks[0] if blocks else 0) % instances]
        else:
            cache, turn = caches[turn], (turn + 1) % instances
        run = 0
        for block in blocks:
            if block not in cache:
                break
            run += 1
        cached = min(run * block_tokens, request.input_tokens)
        hit = cached / request.input_tokens if request.input_tokens else 0.0
        count += 1
        prompt_tokens += request.input_tokens
        cached_tokens += cached
        hit_sum += hit
        if on_request is not None:
            on_request(request, hit)
        cache.touch(blocks)
    return CacheResult(
        capacity_blocks=capacity_blocks,
        requests=count,
        hit_token_weighted=cached_tokens / prompt_tokens if prompt_tokens else 0.0,
        hit_request_weighted=hit_sum / count if count else 0.0,
    )
