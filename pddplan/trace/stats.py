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

import bisect
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pddplan.trace.outputs import TraceImport
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
    # plain lists while counting (a numpy element increment costs more than the bisection)
    input_histogram: list[int] = field(default_factory=lambda: [0] * len(LENGTH_BINS))
    output_histogram: list[int] = field(default_factory=lambda: [0] * len(LENGTH_BINS))
    input_tokens: int = 0
    output_tokens: int = 0
    hashed: int = 0
    cached_tokens: int = 0
    hit_histogram: list[int] = field(default_factory=lambda: [0] * (len(HIT_BINS) - 1))
    hit_vs_length: _Moments = field(default_factory=_Moments)
    unique_blocks: int = 0

    def to_output(self, trace: str, fmt: str) -> TraceImport:
        """The typed result `trace import --json` prints for `trace` read as `fmt` (SI units;
        token counts as integers)."""
        minutes = [self.per_minute.get(m, 0) for m in range(max(self.per_minute, default=-1) + 1)]
        mean_per_minute = float(np.mean(minutes)) if minutes else 0.0
        gap_mean = self.gap_sum_s / self.gap_count if self.gap_count else None
        gap_var = self.gap_sum_squares_s2 / self.gap_count - gap_mean**2 if gap_mean is not None else None
        return TraceImport(
            trace=trace,
            format=fmt,
            requests=self.requests,
            duration_s=self.duration_s,
            rate_rps=self.requests / self.duration_s if self.duration_s > 0 else None,
            interarrival_cv=math.sqrt(max(gap_var, 0.0)) / gap_mean if gap_mean and gap_var is not None else None,
            requests_per_minute=minutes,
            peak_to_mean_per_minute=max(minutes) / mean_per_minute if mean_per_minute > 0 else None,
            input_tokens_mean=self.input_tokens / self.requests if self.requests else None,
            output_tokens_mean=self.output_tokens / self.requests if self.requests else None,
            length_bins_tokens=LENGTH_BINS,
            input_tokens_histogram=list(self.input_histogram),
            output_tokens_histogram=list(self.output_histogram),
            block_tokens=self.block_tokens,
            requests_with_hashes=self.hashed,
            ideal_hit_rate_token_weighted=self.cached_tokens / self.input_tokens
            if self.hashed and self.input_tokens
            else None,
            hit_bins=HIT_BINS,
            ideal_hit_histogram=list(self.hit_histogram),
            hit_vs_prompt_length_correlation=self.hit_vs_length.correlation(),
            unique_blocks=self.unique_blocks,
        )


def _bin(value: float, edges: list[Any]) -> int:
    """Index of the bin [edges[i], edges[i+1]) holding `value` (the last bin is open above).
    Pure Python bisection: called per request, where numpy's per-call overhead dominated."""
    return max(bisect.bisect_right(edges, value) - 1, 0)


def summarize(requests: Iterable[TraceRequest], block_tokens: int = 512) -> TraceSummary:
    """One pass over `requests` (module docstring). The loop keeps its counters in locals: it runs
    once per request of traces with millions of them."""
    summary = TraceSummary(block_tokens=block_tokens)
    seen: set[int] = set()
    contains = seen.__contains__
    takewhile = itertools.takewhile
    per_minute = summary.per_minute
    input_histogram, output_histogram = summary.input_histogram, summary.output_histogram
    hit_histogram, moments = summary.hit_histogram, summary.hit_vs_length
    top_hit_bin = len(HIT_BINS) - 2
    count = gap_count = hashed = 0
    gap_sum = gap_squares = 0.0
    input_tokens = output_tokens = cached_tokens = 0
    last: float | None = None
    arrival = 0.0
    for arrival, inputs, outputs, hashes in requests:
        count += 1
        if last is not None:
            gap = arrival - last
            gap_count += 1
            gap_sum += gap
            gap_squares += gap * gap
        last = arrival
        minute = int(arrival // 60)
        per_minute[minute] = per_minute.get(minute, 0) + 1
        input_histogram[_bin(inputs, LENGTH_BINS)] += 1
        output_histogram[_bin(outputs, LENGTH_BINS)] += 1
        input_tokens += inputs
        output_tokens += outputs
        if hashes is None:
            continue
        hashed += 1
        # the leading run of blocks already seen (takewhile over a set's membership runs in C)
        run = len(list(takewhile(contains, hashes)))
        cached = min(run * block_tokens, inputs)
        hit = cached / inputs if inputs else 0.0
        cached_tokens += cached
        hit_histogram[min(_bin(hit, HIT_BINS), top_hit_bin)] += 1
        moments.add(hit, float(inputs))
        seen.update(hashes)
    summary.requests, summary.duration_s, summary.hashed = count, arrival if count else 0.0, hashed
    summary.gap_count, summary.gap_sum_s, summary.gap_sum_squares_s2 = gap_count, gap_sum, gap_squares
    summary.input_tokens, summary.output_tokens, summary.cached_tokens = input_tokens, output_tokens, cached_tokens
    summary.unique_blocks = len(seen)
    return summary
