"""A trace's summary, built in one pass over a stream of requests (memory: the per-minute counts,
fixed histograms and the set of prompt blocks seen, nothing per request).

  rate                 requests / (last arrival - first arrival);
  burstiness           inter-arrival coefficient of variation (1 for Poisson), and the per-minute
                       request counts with their peak-to-mean ratio;
  lengths              prompt and output token histograms on fixed log2 bins, with means;
  prefix hit (ideal)   with the block hashes: the share of a prompt's blocks in its longest leading
                       run already seen by an earlier request (an unbounded cache that keeps every
                       block), h = min(run x block_tokens, input) / input; and the Pearson
                       correlation of h with the prompt length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pddplan.trace.read import TraceRequest

LENGTH_BINS = [0, *[2**k for k in range(4, 21)]]  # tokens: 0, 16, 32, ..., 1M (last bin open)
HIT_BINS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]


@dataclass
class _Moments:
    """Streaming count and sums of x, y, x^2, y^2 and x*y, for their Pearson correlation."""

    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0
    sxy: float = 0.0

    def add(self, x: float, y: float) -> None:
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.syy += y * y
        self.sxy += x * y

    def correlation(self) -> float | None:
        if self.n < 2:
            return None
        cov = self.sxy - self.sx * self.sy / self.n
        vx = self.sxx - self.sx**2 / self.n
        vy = self.syy - self.sy**2 / self.n
        return cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else None


@dataclass
class TraceSummary:
    """What `summarize` gathers (see the module docstring)."""

    block_tokens: int
    requests: int = 0
    duration_s: float = 0.0
    gap_count: int = 0
    gap_sum_s: float = 0.0
    gap_sum_squares_s2: float = 0.0
    per_minute: dict[int, int] = field(default_factory=dict)
    input_histogram: np.ndarray = field(default_factory=lambda: np.zeros(len(LENGTH_BINS), dtype=np.int64))
    output_histogram: np.ndarray = field(default_factory=lambda: np.zeros(len(LENGTH_BINS), dtype=np.int64))
    input_tokens: int = 0
    output_tokens: int = 0
    hashed: int = 0
    cached_tokens: int = 0
    hit_histogram: np.ndarray = field(default_factory=lambda: np.zeros(len(HIT_BINS) - 1, dtype=np.int64))
    hit_vs_length: _Moments = field(default_factory=_Moments)
    unique_blocks: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON view (SI units; token counts as integers)."""
        minutes = [self.per_minute.get(m, 0) for m in range(max(self.per_minute, default=-1) + 1)]
        mean_per_minute = float(np.mean(minutes)) if minutes else 0.0
        gap_mean = self.gap_sum_s / self.gap_count if self.gap_count else None
        gap_var = self.gap_sum_squares_s2 / self.gap_count - gap_mean**2 if gap_mean is not None else None
        return {
            "requests": self.requests,
            "duration_s": self.duration_s,
            "rate_rps": self.requests / self.duration_s if self.duration_s > 0 else None,
            "interarrival_cv": math.sqrt(max(gap_var, 0.0)) / gap_mean if gap_mean and gap_var is not None else None,
            "requests_per_minute": minutes,
            "peak_to_mean_per_minute": max(minutes) / mean_per_minute if mean_per_minute > 0 else None,
            "input_tokens_mean": self.input_tokens / self.requests if self.requests else None,
            "output_tokens_mean": self.output_tokens / self.requests if self.requests else None,
            "length_bins_tokens": LENGTH_BINS,
            "input_tokens_histogram": self.input_histogram.tolist(),
            "output_tokens_histogram": self.output_histogram.tolist(),
            "block_tokens": self.block_tokens,
            "requests_with_hashes": self.hashed,
            "ideal_hit_rate_token_weighted": self.cached_tokens / self.input_tokens
            if self.hashed and self.input_tokens
            else None,
            "hit_bins": HIT_BINS,
            "ideal_hit_histogram": self.hit_histogram.tolist(),
            "hit_vs_prompt_length_correlation": self.hit_vs_length.correlation(),
            "unique_blocks": self.unique_blocks,
        }


def _bin(value: float, edges: list[Any]) -> int:
    """Index of the bin [edges[i], edges[i+1]) holding `value` (the last bin is open above)."""
    return max(int(np.searchsorted(edges, value, side="right")) - 1, 0)


def summarize(requests: Iterable[TraceRequest], block_tokens: int = 512) -> TraceSummary:
    """One pass over `requests` (module docstring)."""
    summary = TraceSummary(block_tokens=block_tokens)
    seen: set[int] = set()
    last: float | None = None
    for request in requests:
        summary.requests += 1
        if last is not None:
            gap = request.arrival_s - last
            summary.gap_count += 1
            summary.gap_sum_s += gap
            summary.gap_sum_squares_s2 += gap * gap
        last = request.arrival_s
        summary.duration_s = request.arrival_s
        minute = int(request.arrival_s // 60)
        summary.per_minute[minute] = summary.per_minute.get(minute, 0) + 1
        summary.input_histogram[_bin(request.input_tokens, LENGTH_BINS)] += 1
        summary.output_histogram[_bin(request.output_tokens, LENGTH_BINS)] += 1
        summary.input_tokens += request.input_tokens
        summary.output_tokens += request.output_tokens
        if request.hash_ids is None:
            continue
        summary.hashed += 1
        run = 0
        for block in request.hash_ids:
            if block not in seen:
                break
            run += 1
        cached = min(run * block_tokens, request.input_tokens)
        hit = cached / request.input_tokens if request.input_tokens else 0.0
        summary.cached_tokens += cached
        summary.hit_histogram[min(_bin(hit, HIT_BINS), len(HIT_BINS) - 2)] += 1
        summary.hit_vs_length.add(hit, float(request.input_tokens))
        seen.update(request.hash_ids)
    summary.unique_blocks = len(seen)
    return summary
