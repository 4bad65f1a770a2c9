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
#: Slowest offered rate: one request in 11.6 days. Below it arrival times grow so large that a
#: millisecond no longer changes them in floating point, and no capacity question remains.
MIN_RATE_RPS = 1e-6


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
    """MIN_RATE_RPS <= rate <= MAX_RATE_RPS, finite."""
    if not MIN_RATE_RPS <= rate_rps <= MAX_RATE_RPS:  # False for NaN too
        raise InputError(
            f"{flag} = {rate_rps}: must be above 0 and at most {MAX_RATE_RPS:g} requests/s (at least {MIN_RATE_RPS:g})"
        )


def check_points(points: int, flag: str = "--points") -> None:
    """3 <= points <= MAX_POINTS."""
    if not 3 <= points <= MAX_POINTS:
        raise InputError(f"{flag} = {points}: must be between 3 and {MAX_POINTS:,}")


#: a token count (prompt, context, step): no model's context comes near 10 million tokens
MAX_TOKENS = 10_000_000
#: a chunked-prefill budget: fewer than 16 tokens per step is not an engine (as the workload's field)
MIN_CHUNK_TOKENS = 16
#: GPUs in one model instance: 100,000 is beyond any scale-up or scale-out domain a model spans
MAX_GPUS_PER_INSTANCE = 100_000
#: pipeline stages of one instance (engines split a model's layers over a few nodes; 64 is beyond any)
MAX_PIPELINE_STAGES = 64
#: parallel workers: more than a thousand processes on one machine is a typo
MAX_JOBS = 1024
#: a solver time limit: a day per solve is beyond any planning loop
MAX_SOLVE_S = 86_400.0
#: a budget in $/hour: a billion is beyond any deployment (the specs bound prices the same way)
MAX_BUDGET_USD_PER_HOUR = 1e9


def check_tokens(tokens: int, flag: str, least: int = 1) -> None:
    """least <= tokens <= MAX_TOKENS."""
    if not least <= tokens <= MAX_TOKENS:
        raise InputError(f"{flag} = {tokens}: must be between {least} and {MAX_TOKENS:,} tokens")


def check_chunk(chunk_tokens: int, flag: str = "--chunk") -> None:
    """MIN_CHUNK_TOKENS <= chunk <= MAX_TOKENS."""
    check_tokens(chunk_tokens, flag, MIN_CHUNK_TOKENS)


def check_jobs(jobs: int, flag: str = "--jobs") -> None:
    """1 <= jobs <= MAX_JOBS."""
    if not 1 <= jobs <= MAX_JOBS:
        raise InputError(f"{flag} = {jobs}: must be between 1 and {MAX_JOBS:,}")


def check_time_limit(seconds: float, flag: str = "--time-limit") -> None:
    """0 < seconds <= MAX_SOLVE_S, finite."""
    if not 0 < seconds <= MAX_SOLVE_S:  # False for NaN too
        raise InputError(f"{flag} = {seconds}: must be above 0 and at most {MAX_SOLVE_S:g} s")


def check_budget(usd_per_hour: float, flag: str = "--budget") -> None:
    """0 < budget <= MAX_BUDGET_USD_PER_HOUR, finite."""
    if not 0 < usd_per_hour <= MAX_BUDGET_USD_PER_HOUR:  # False for NaN too
        raise InputError(f"{flag} = {usd_per_hour}: must be above 0 and at most {MAX_BUDGET_USD_PER_HOUR:g} $/hour")


def check_gpus_per_instance(gpus: int, flag: str = "--tp") -> None:
    """1 <= gpus <= MAX_GPUS_PER_INSTANCE."""
    if not 1 <= gpus <= MAX_GPUS_PER_INSTANCE:
        raise InputError(f"{flag} = {gpus}: must be between 1 and {MAX_GPUS_PER_INSTANCE:,} GPUs")
