"""Hit rate against cache capacity for a trace (`pddplan cache-curve`): one streamed replay of the
trace per capacity (`pddplan.trace.cache.replay`), so memory stays the cache state.

Capacities are written with a unit: bytes (`500MB`, `10GB`, `2TB`; decimal units), which the
model's KV bytes per token turn into tokens, or tokens (`2M`, `500k`, `100000`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from pddplan.errors import InputError
from pddplan.trace.cache import CacheResult, Eviction, Routing, replay
from pddplan.trace.read import TraceFormat, read_trace

BYTE_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15}
TOKEN_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
MAX_CAPACITY_TOKENS = 1e13


@dataclass(frozen=True)
class Capacity:
    """One capacity: as written, in bytes when written so, and in tokens."""

    text: str
    capacity_bytes: float | None
    tokens: float


def parse_capacities(text: str, kv_bytes_per_token: float | None) -> list[Capacity]:
    """`--capacity 1GB,10GB` (bytes, needs the model's KV bytes per token) or `1M,10M` (tokens)."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)", item)
        unit = match.group(2).upper() if match else ""
        if match is None or (unit not in BYTE_UNITS and unit not in TOKEN_UNITS):
            raise InputError(f"--capacity {item!r}: expected a size like 10GB (bytes) or 2M (tokens)")
        value = float(match.group(1))
        if unit in BYTE_UNITS:
            if kv_bytes_per_token is None:
                raise InputError(f"--capacity {item!r}: a size in bytes needs --model (its KV bytes per token)")
            size_bytes = value * BYTE_UNITS[unit]
            capacity_bytes: float | None = size_bytes
            tokens = size_bytes / kv_bytes_per_token
        else:
            capacity_bytes, tokens = None, value * TOKEN_UNITS[unit]
        if not (math.isfinite(tokens) and 0 <= tokens <= MAX_CAPACITY_TOKENS):
            raise InputError(f"--capacity {item!r}: expected 0 to {MAX_CAPACITY_TOKENS:g} tokens")
        out.append(Capacity(item, capacity_bytes, tokens))
    if not out:
        raise InputError("--capacity: no capacities given")
    return out


def parse_capacity(text: str, kv_bytes_per_token: float | None, flag: str = "--cache-capacity") -> Capacity:
    """One capacity, written as `parse_capacities` reads it; InputError naming `flag` when `text`
    gives several."""
    capacities = parse_capacities(text, kv_bytes_per_token)
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
