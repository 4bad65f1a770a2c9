"""Hit rate against cache capacity for a trace (`pddplan cache-curve`): one streamed replay of the
trace per capacity (`pddplan.trace.cache.replay`), so memory stays the cache state.

Capacities are written with a unit (`pddplan.support.units`): bytes (`500MB`, `10GB`, `2TiB`),
which the model's KV bytes per token turn into tokens, or tokens (`2M tokens`, `500ktok`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pddplan.errors import InputError
from pddplan.support.units import parse_size
from pddplan.trace.cache import CacheResult, Eviction, Routing, replay
from pddplan.trace.read import TraceFormat, read_trace

MAX_CAPACITY_TOKENS = 1e13


@dataclass(frozen=True)
class Capacity:
    """One capacity: as written, in bytes when written so, and in tokens."""

    text: str
    capacity_bytes: float | None
    tokens: float


def parse_capacities(text: str, kv_bytes_per_token: float | None, flag: str = "--capacity") -> list[Capacity]:
    """`--capacity 1GB,10GiB` (bytes, needs the model's KV bytes per token) or `1M tokens` (tokens),
    each read by `pddplan.support.units.parse_size`."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        size = parse_size(item, flag)
        if size.tokens is not None:
            capacity_bytes, tokens = size.size_bytes, size.tokens
        elif kv_bytes_per_token is None:
            raise InputError(f"{flag} = {item!r}: a size in bytes needs --model (its KV bytes per token)")
        else:
            capacity_bytes = size.size_bytes
            tokens = float(capacity_bytes or 0.0) / kv_bytes_per_token
        if not (math.isfinite(tokens) and 0 <= tokens <= MAX_CAPACITY_TOKENS):
            raise InputError(f"{flag} = {item!r}: expected 0 to {MAX_CAPACITY_TOKENS:g} tokens")
        out.append(Capacity(item, capacity_bytes, tokens))
    if not out:
        raise InputError(f"{flag}: no capacities given")
    return out


def parse_capacity(text: str, kv_bytes_per_token: float | None, flag: str = "--cache-capacity") -> Capacity:
    """One capacity, written as `parse_capacities` reads it; InputError naming `flag` when `text`
    gives several."""
    capacities = parse_capacities(text, kv_bytes_per_token, flag)
    if len(capacities) != 1:
        raise InputError(f"{flag} = {text!r}: give one capacity")
    return capacities[0]


def cache_curve(
    trace: Path,
    fmt: TraceFormat,
    capacities: list[Capacity],
    block_tokens: int = 512,
    eviction: Eviction = "lru",
    instances: int = 1,
    routing: Routing = "affinity",
) -> list[CacheResult]:
    """The hits at each capacity (in whole blocks: floor(tokens / block_tokens))."""
    return [
        replay(
            read_trace(trace, fmt, block_tokens),
            int(c.tokens // block_tokens),
            block_tokens,
            eviction,
            instances,
            routing,
        )
        for c in capacities
    ]
