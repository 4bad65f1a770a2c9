"""Distributions a workload file describes: token lengths and prefix hit rates.

Each distribution can be sampled with a seeded numpy Generator and knows its mean in closed form,
so the evaluator and the simulator read the same numbers.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from pddplan.specs.common import MAX_BINS, Fraction, StrictModel, TokenCount, TokenLength
from pddplan.support.frozen import read_only
from pddplan.support.kept import kept_by_identity
from pddplan.support.special import norm_cdf, norm_ppf

SHARE_TOLERANCE = 1e-6
#: supports kept per distribution class, by the distribution's identity: an evaluation asks its
#: workload's again and again (the relay fixed point, the cache's prefix bytes)
SUPPORTS_KEPT = 16
#: Quantile edges of the bins that stand for a lognormal length in closed-form averages: 5% steps,
#: then finer in the upper tail.
LOGNORMAL_BIN_EDGES = np.concatenate([np.linspace(0.0, 0.95, 20), [0.98, 0.99, 0.995, 0.999, 1.0]])

#: Bucket edges of the article's seven hit-rate buckets: [0,90%), [90,95%), [95,96%), ..., [99,100%].
ARTICLE_BUCKET_EDGES = (0.0, 0.90, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0)


class FixedLength(StrictModel):
    """Every request has the same length."""

    kind: Literal["fixed"]
    tokens: TokenCount

    def mean(self) -> float:
        return float(self.tokens)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)

    def largest(self) -> int:
        """The longest length a request can draw."""
        return self.tokens

    @kept_by_identity(SUPPORTS_KEPT)
    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, probabilities) of a discrete approximation, for closed-form averages."""
        return np.array([float(self.tokens)]), np.array([1.0])


class LognormalLength(StrictModel):
    """Lengths lognormally distributed around `median_tokens`, clipped to [min, max]."""

    kind: Literal["lognormal"]
    median_tokens: TokenLength
    sigma: float = Field(gt=0, le=4)
    min_tokens: TokenCount = 1
    max_tokens: TokenCount

    @model_validator(mode="after")
    def _bounds(self) -> LognormalLength:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) exceeds max_tokens ({self.max_tokens})")
        return self

    @kept_by_identity(SUPPORTS_KEPT)
    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """Bins of the clipped distribution (what `sample` draws), each standing at its exact mean.

        Mass below `min_tokens` / above `max_tokens` sits at those bounds (as `sample` clips). The
        mass in between is cut at quantiles (finer in the upper tail, which carries the long
        prompts that dominate queueing) and each bin is represented by its conditional mean:
            E[X | a < X < b] = exp(mu + s^2/2) * (Phi(z_b - s) - Phi(z_a - s)) / (Phi(z_b) - Phi(z_a)),
        so the support's mean is the clipped lognormal's mean exactly.
        """
        mu, sigma = math.log(self.median_tokens), self.sigma
        low = float(norm_cdf((math.log(self.min_tokens) - mu) / sigma))
        high = float(norm_cdf((math.log(self.max_tokens) - mu) / sigma))
        edges = low + (high - low) * LOGNORMAL_BIN_EDGES
        z = norm_ppf(edges)
        mass = np.diff(edges)
        shifted = np.diff(norm_cdf(z - sigma))
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(mass > 0, math.exp(mu + sigma**2 / 2) * shifted / mass, self.median_tokens)
        values = np.concatenate(
            [[self.min_tokens], np.clip(means, self.min_tokens, self.max_tokens), [self.max_tokens]]
        )
        probs = np.concatenate([[low], mass, [1.0 - high]])
        keep = probs > 1e-12
        return values[keep].astype(np.float64), probs[keep] / probs[keep].sum()

    def mean(self) -> float:
        values, probs = self.support()
        return float(values @ probs)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        draws = rng.lognormal(math.log(self.median_tokens), self.sigma, size=n)
        return np.clip(np.rint(draws), self.min_tokens, self.max_tokens).astype(np.int64)

    def largest(self) -> int:
        """The longest length a request can draw (`sample` clips at max_tokens)."""
        return self.max_tokens


class LengthBin(StrictModel):
    """Lengths in [low_tokens, high_tokens], uniformly, with probability `share`."""

    low_tokens: TokenCount
    high_tokens: TokenCount
    share: Fraction

    @model_validator(mode="after")
    def _ordered(self) -> LengthBin:
        if self.low_tokens > self.high_tokens:
            raise ValueError(f"low_tokens ({self.low_tokens}) exceeds high_tokens ({self.high_tokens})")
        return self


class HistogramLength(StrictModel):
    """An empirical histogram of lengths; shares must sum to 1."""

    kind: Literal["histogram"]
    bins: list[LengthBin] = Field(min_length=1, max_length=MAX_BINS)

    @model_validator(mode="after")
    def _shares(self) -> HistogramLength:
        total = sum(b.share for b in self.bins)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(f"bin shares sum to {total:.6g}, expected 1")
        return self

    @kept_by_identity(SUPPORTS_KEPT)
    def support(self) -> tuple[np.ndarray, np.ndarray]:
        values = np.array([(b.low_tokens + b.high_tokens) / 2 for b in self.bins])
        return values, np.array([b.share for b in self.bins])

    def mean(self) -> float:
        values, probs = self.support()
        return float(values @ probs)

    def largest(self) -> int:
        """The longest length a request can draw (the top of the highest bin with a share)."""
        return max(b.high_tokens for b in self.bins if b.share > 0)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        shares = np.array([b.share for b in self.bins])
        index = rng.choice(len(self.bins), size=n, p=shares / shares.sum())
        low = np.array([b.low_tokens for b in self.bins])[index]
        high = np.array([b.high_tokens for b in self.bins])[index]
        return rng.integers(low, high + 1).astype(np.int64)


LengthDistribution = Annotated[FixedLength | LognormalLength | HistogramLength, Field(discriminator="kind")]


class HitBucket(StrictModel):
    """Requests whose prefix hit rate lies in [low, high), uniformly, with probability `share`."""

    low: Fraction
    high: Fraction
    share: Fraction

    @model_validator(mode="after")
    def _ordered(self) -> HitBucket:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) exceeds high ({self.high})")
        return self


class HitRateDistribution(StrictModel):
    """The prefix-cache hit rate of requests, as buckets.

    Give either `buckets` (any edges), or `article_shares`: seven shares for the article's buckets
    [0,90%), [90,95%), [95,96%), [96,97%), [97,98%), [98,99%), [99,100%].
    """

    buckets: list[HitBucket] | None = Field(default=None, max_length=MAX_BINS)
    article_shares: list[Fraction] | None = Field(default=None, min_length=7, max_length=7)

    @model_validator(mode="after")
    def _one_form(self) -> HitRateDistribution:
        if (self.buckets is None) == (self.article_shares is None):
            raise ValueError("give exactly one of `buckets` or `article_shares`")
        buckets = self.resolved_buckets()
        total = sum(b.share for b in buckets)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(f"bucket shares sum to {total:.6g}, expected 1")
        ordered = sorted(buckets, key=lambda b: b.low)
        for left, right in itertools.pairwise(ordered):
            if right.low < left.high - 1e-12:
                raise ValueError(f"buckets [{left.low}, {left.high}) and [{right.low}, {right.high}) overlap")
        return self

    def resolved_buckets(self) -> list[HitBucket]:
        """The buckets, whichever form the file used."""
        if self.buckets is not None:
            return list(self.buckets)
        shares = self.article_shares or []
        edges = ARTICLE_BUCKET_EDGES
        return [HitBucket(low=edges[i], high=edges[i + 1], share=s) for i, s in enumerate(shares)]

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """(hit values, probabilities): 8 points per bucket, for closed-form averages (read-only
        arrays, kept by the buckets' values: the optimizer asks thousands of times)."""
        if self.buckets is not None:
            return _hit_support(tuple((b.low, b.high, b.share) for b in self.buckets))
        edges = ARTICLE_BUCKET_EDGES
        return _hit_support(tuple((edges[i], edges[i + 1], s) for i, s in enumerate(self.article_shares or [])))

    def mean(self) -> float:
        values, probs = self.support()
        return float(values @ probs)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        buckets = self.resolved_buckets()
        shares = np.array([b.share for b in buckets])
        index = rng.choice(len(buckets), size=n, p=shares / shares.sum())
        low = np.array([b.low for b in buckets])[index]
        high = np.array([b.high for b in buckets])[index]
        return low + (high - low) * rng.random(n)


class MixClass(StrictModel):
    """Requests of `prompt_tokens` tokens whose prefix hit rate is `hit`, with probability `share`;
    `load_s` is the mean time to read their cached KV from a slower cache tier (host DRAM, SSD)
    before prefill, which delays their first token without occupying the prefill instance."""

    prompt_tokens: TokenCount
    hit: Fraction
    share: Fraction
    load_s: float = Field(default=0.0, ge=0, le=3600)


class RequestMix(StrictModel):
    """The joint distribution of prompt length and prefix hit rate, as classes (what a trace gives:
    long prompts tend to hit more, or less, than short ones). Where a workload has one, the
    evaluator and the simulator draw (prompt, hit) pairs from it instead of drawing the two
    independently from `prompt_tokens` and `hit_rate`, which stay as its marginals."""

    classes: list[MixClass] = Field(min_length=1, max_length=MAX_BINS)
    source: str = Field(default="", description="where the mix came from (a trace, its digest, the cache capacity)")

    @model_validator(mode="after")
    def _shares(self) -> RequestMix:
        total = sum(c.share for c in self.classes)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(f"class shares sum to {total:.6g}, expected 1")
        return self

    @kept_by_identity(SUPPORTS_KEPT)
    def support(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prompt tokens, hit rates, probabilities), one point per class."""
        prompts = np.array([float(c.prompt_tokens) for c in self.classes])
        hits = np.array([c.hit for c in self.classes])
        probs = np.array([c.share for c in self.classes])
        return prompts, hits, probs / probs.sum()

    def mean_hit(self) -> float:
        _, hits, probs = self.support()
        return float(hits @ probs)

    def largest_prompt(self) -> int:
        return max(c.prompt_tokens for c in self.classes if c.share > 0)

    def load_s(self) -> np.ndarray:
        """Each class's load time from slower tiers, aligned with `support`."""
        return np.array([c.load_s for c in self.classes])

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """n (prompt tokens, hit, load seconds) triples, each a class drawn by its share."""
        prompts, hits, probs = self.support()
        index = rng.choice(len(probs), size=n, p=probs)
        return prompts[index].astype(np.int64), hits[index], self.load_s()[index]


@lru_cache(maxsize=64)
def _hit_support(buckets: tuple[tuple[float, float, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    """`HitRateDistribution.support` of (low, high, share) buckets: 8 points per bucket at the
    middles of its eighths, each with an eighth of its share."""
    values: list[float] = []
    probs: list[float] = []
    for low, high, share in buckets:
        points = low + (high - low) * (np.arange(8) + 0.5) / 8
        values.extend(points.tolist())
        probs.extend([share / 8] * 8)
    hits, weights = read_only(np.array(values), np.array(probs))
    return hits, weights
