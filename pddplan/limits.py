"""Bounds on the run-size numbers a user passes (flags and library arguments), with their reasons.

The input specs bound the numbers in files (`pddplan.specs.common`); these bound the ones given on
the command line or to the library, so that a typo (an extra six zeros) is a one-line error
instead of a run that exhausts memory or never ends.
"""

from __future__ import annotations

from pddplan.errors import InputError

#: simulated requests: ~1 KB of state each and ~30 µs of work on this class of machine, so the
#: maximum is ~5 GB and ~3 minutes; more does not sharpen a P99 that 100,000 already resolve
MAX_REQUESTS = 5_000_000
#: hit-rate points of a bathtub: each sizes every architecture once (~20 ms)
MAX_POINTS = 10_001
#: the largest seed numpy's generators take without folding (a 64-bit unsigned integer)
MAX_SEED = 2**64 - 1
#: an offered or target rate: a million requests/s is beyond any single deployment
MAX_RATE_RPS = 1e6


def check_requests(requests: int, flag: str = "--requests") -> None:
    """1 <= requests <= MAX_REQUESTS."""
    if not 1 <= requests <= MAX_REQUESTS:
        raise InputError(
            f"{flag} = {requests}: must be between 1 and {MAX_REQUESTS:,} (about 5 GB of simulation state)"
        )


def check_seed(seed: int, flag: str = "--seed") -> None:
    """0 <= seed <= 2^64 - 1."""
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"{flag} = {seed}: must be a whole number from 0 to 2^64 - 1")


def check_rate(rate_rps: float, flag: str = "--rate") -> None:
    """0 < rate <= MAX_RATE_RPS, finite."""
    if not 0 < rate_rps <= MAX_RATE_RPS:  # False for NaN too
        raise InputError(f"{flag} = {rate_rps}: must be above 0 and at most {MAX_RATE_RPS:g} requests/s")


def check_points(points: int, flag: str = "--points") -> None:
    """3 <= points <= MAX_POINTS."""
    if not 3 <= points <= MAX_POINTS:
        raise InputError(f"{flag} = {points}: must be between 3 and {MAX_POINTS:,}")
