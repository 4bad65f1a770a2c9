"""Co-located serving (agg): an instance decodes its running sequences in the steps that prefill.

Engines with chunked prefill mix the waiting prompts' chunks into the decode steps of the running
sequences (`pddplan.perf.mixed` has the step model: a step carrying a chunk of C tokens and b
decode rows takes s_C + m(b)). At lam requests/s over n instances, r = lam / n each, rho_0 the
prefill pool's utilization without decode rows (`pddplan.evaluate.prefill_queue`):

  prefill busy share    rho(b) = rho_0 f(b),   f(b) = 1 + m(b) / s_C, s_C a busy step: the
                        request's own chunk alone, or a full step when requests wait (by P(wait);
                        under data-parallel attention by how many ranks are busy, and rho_0 the
                        share of time any rank prefills: `PrefillQueue.busy_share`, `loaded_share`)
  time per token        tau(b) = 1 / (rho(b) / (s_C + m(b)) + (1 - rho(b)) / tau_dec(b))
  running batch         B = r E[O] tau(B)                         (Little's law; B < 1: a lone row)
  prefill queue         the G/G/c queue of the classes with every engine time f(B) times longer; by
                        time scaling that is the queue at rate f lam with every wait f times longer
  first token           one step after prefill: s_C + m(B) when the instance has prefill work left
                        (a request waits: P(wait) of the slowed queue, since departures see what
                        arrivals see), else tau_dec(B)

The batch must fit the KV room an instance leaves beside the prompt it prefills and its prefix
cache's HBM, at the slot utilization where a request waits for a slot with probability <= 5%.
The same functions serve the closed form (one row) and the optimizer's capacities (a row per pool
size and rate), so the program sizes pools by the formulas the plan is judged with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pddplan.evaluate.classes import RequestClasses
from pddplan.perf.mixed import busy_step_s, relay_marginal_step_s
from pddplan.perf.roofline import Instance, decode_step_time


@dataclass(frozen=True)
class MixedSteps:
    """Step times of one instance kind with 0..M decode rows beside a prefill chunk (rate-free)."""

    marginal_s: np.ndarray  # m(b) for b = 0..M (m(0) = 0)
    alone_s: np.ndarray  # tau_dec(b) for b = 1..M, the decode step with no chunk
    busy_s: float  # s_C, a busy instance's mean chunk step without decode rows
    full_chunk_s: float  # a full chunk's step without decode rows (the longest gap's base)
    ranks: int = 1  # data-parallel-attention ranks that prefill apart

    @property
    def largest(self) -> int:
        return len(self.alone_s)

    @property
    def batches(self) -> np.ndarray:
        return np.arange(1.0, self.largest + 1.0)

    def marginal_at(self, batch: ArrayLike) -> np.ndarray:
        """m(B), interpolated between whole batches (B beyond M: m(M))."""
        grid = np.arange(0.0, self.largest + 1.0)
        b = np.minimum(np.asarray(batch, dtype=np.float64), float(self.largest))
        return np.interp(b, grid, self.marginal_s)

    def busy_step_s(self, waiting: ArrayLike) -> np.ndarray:
        """A busy instance's mean step: its own chunk's (s_C) when it started alone, a full chunk's
        when the step was formed while requests waited (packed to the budget), mixed by P(wait)."""
        p = np.clip(np.asarray(waiting, dtype=np.float64), 0.0, 1.0)
        return (1.0 - p) * self.busy_s + p * self.full_chunk_s

    def next_busy_step_s(self, loaded_share: ArrayLike) -> np.ndarray:
        """The step an instance runs next when it has prefill work left: packed to the budget (a
        full chunk's) on one server; under data-parallel attention the other ranks' steps, as full
        as `loaded_share` (`PrefillQueue.loaded_share`) says."""
        if self.ranks == 1:
            return np.broadcast_to(np.float64(self.full_chunk_s), np.shape(loaded_share))
        return self.busy_step_s(loaded_share)


def mixed_steps(instance: Instance, chunk_tokens: int, classes: RequestClasses, largest_batch: int) -> MixedSteps:
    """The step tables of `instance` for decode batches up to `largest_batch` (at least 1), at the
    classes' mean decode context."""
    context = classes.mean_context_tokens
    largest = max(int(largest_batch), 1)
    with_zero = np.arange(0.0, largest + 1.0)
    attention = classes.attention_s_per_new_token()
    ranks = classes.prefill_ranks
    return MixedSteps(
        marginal_s=relay_marginal_step_s(instance, with_zero, context, instance.full_step_tokens(chunk_tokens)),
        alone_s=decode_step_time(instance, with_zero[1:], context),
        busy_s=busy_step_s(instance, chunk_tokens, attention, classes.alone_s_per_chunk()),
        full_chunk_s=busy_step_s(instance, chunk_tokens, attention, 0.0, ranks),
        ranks=ranks,
    )


@dataclass(frozen=True)
class OperatingPoint:
    """Per row: the running batch B per instance, its mean time per token tau(B), the prefill
    slowdown f(B), prefill's busy share rho(B), the two first-token steps, and whether the row is
    stable (B solves Little's law within the room, and rho(B) < 1)."""

    batch: np.ndarray
    token_s: np.ndarray
    slowdown: np.ndarray
    busy_fraction: np.ndarray
    mixed_s: np.ndarray
    alone_s: np.ndarray
    stable: np.ndarray
    marginal_s: np.ndarray  # m(B): what the decode rows add to a step


def operating_point(
    steps: MixedSteps,
    per_instance_rps: ArrayLike,
    rho_0: ArrayLike,
    mean_output: float,
    room: ArrayLike,
    waiting: ArrayLike = 0.0,
) -> OperatingPoint:
    """Solve B = r E[O] tau(B) per row (module docstring), r = `per_instance_rps`, rho_0 the
    unslowed prefill utilization, `room` the sequences an instance may run and `waiting` the
    prefill queue's P(wait), which sets the busy step s_C (`MixedSteps.busy_step_s`); arrays
    broadcast. tau is tabulated per whole batch and B interpolated around the first whole batch b
    where r E[O] tau(b) <= b (`_first_crossing`)."""
    r, rho0, limit, p = np.broadcast_arrays(
        np.asarray(per_instance_rps, dtype=np.float64),
        np.asarray(rho_0, dtype=np.float64),
        np.asarray(room, dtype=np.float64),
        np.asarray(waiting, dtype=np.float64),
    )
    r, rho0, limit, p = r.ravel(), rho0.ravel(), limit.ravel(), p.ravel()
    table = _TokenTimes(steps, steps.busy_step_s(p), rho0)
    demand = r * mean_output
    found, index = _first_crossing(table, demand)
    batches = steps.batches
    prev = np.maximum(index - 1, 0)
    at_index = table.at(index)
    r0 = demand * table.at(prev) - batches[prev]
    r1 = demand * at_index - batches[index]
    below_one = found & (index == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        between = batches[prev] + np.where(r0 != r1, r0 / (r0 - r1), 0.0)
    batch = np.where(below_one, demand * at_index, between)
    batch = np.where(found, batch, math.inf)
    b_eval = np.clip(np.where(np.isfinite(batch), batch, float(steps.largest)), 1.0, float(steps.largest))
    low = np.floor(b_eval).astype(int)
    high = np.minimum(low + 1, steps.largest)
    share = b_eval - low
    token_s = table.at(low - 1) * (1.0 - share) + table.at(high - 1) * share
    # the rows a step carries on average: B itself below one (m(0) = 0), the table's last beyond it
    rows_per_step = np.clip(np.where(np.isfinite(batch), batch, float(steps.largest)), 0.0, float(steps.largest))
    marginal = steps.marginal_at(rows_per_step)
    busy_s = table.busy_s
    slowdown = 1.0 + marginal / busy_s
    rho = rho0 * slowdown
    alone = np.interp(b_eval, batches, steps.alone_s)
    stable = found & (batch <= limit) & (rho < 1.0) & (limit >= 1.0)
    return OperatingPoint(
        batch=np.where(found, batch, math.inf),
        token_s=np.where(stable, token_s, math.inf),
        slowdown=slowdown,
        busy_fraction=np.clip(rho, 0.0, 1.0),
        mixed_s=busy_s + marginal,
        marginal_s=marginal,
        alone_s=alone,
        stable=stable,
    )


def _token_time(marginal: np.ndarray, alone: np.ndarray, busy_s: np.ndarray, rho0: np.ndarray) -> np.ndarray:
    """tau = 1 / (busy / (s_C + m) + (1 - busy) / tau_dec), busy = clip(rho_0 (1 + m / s_C), 0, 1),
    from m(b) (`marginal`), tau_dec(b) (`alone`), s_C (`busy_s`) and rho_0 (`rho0`), broadcast;
    each step in place on the array the first one makes."""
    busy = marginal / busy_s
    busy += 1.0
    busy *= rho0
    np.clip(busy, 0.0, 1.0, out=busy)
    idle = 1.0 - busy
    busy /= busy_s + marginal
    idle /= alone
    busy += idle
    return np.divide(1.0, busy, out=busy)


@dataclass(frozen=True)
class _TokenTimes:
    """tau(b) (`_token_time`) per row for whole batches b = 1..M (column b - 1), computed where
    asked, s_C the row's busy step (`busy_s`) and rho_0 its unslowed prefill utilization (`rho0`)."""

    steps: MixedSteps
    busy_s: np.ndarray
    rho0: np.ndarray

    def block(self, rows: np.ndarray, start: int, stop: int) -> np.ndarray:
        """tau of `rows` at the columns start..stop - 1, as a (rows, columns) array."""
        return _token_time(
            self.steps.marginal_s[None, 1 + start : 1 + stop],
            self.steps.alone_s[None, start:stop],
            self.busy_s[rows, None],
            self.rho0[rows, None],
        )

    def at(self, columns: np.ndarray) -> np.ndarray:
        """tau of every row at its own column (`columns`, one per row)."""
        return _token_time(self.steps.marginal_s[1 + columns], self.steps.alone_s[columns], self.busy_s, self.rho0)


#: the first columns scanned for the crossing; each later block twice the last, up to the largest
_FIRST_BLOCK, _LARGEST_BLOCK = 16, 256


def _first_crossing(table: _TokenTimes, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, whether some whole batch b = 1..M has demand tau(b) - b <= 0, and the column of
    the first (0 where none). Scanned in blocks of columns, each over the rows not yet crossed:
    most rows cross early, and a block's arrays stay in the processor's cache."""
    n, largest = len(demand), table.steps.largest
    found = np.zeros(n, dtype=bool)
    index = np.zeros(n, dtype=int)
    pending = np.arange(n)
    start, width = 0, _FIRST_BLOCK
    while start < largest and len(pending):
        stop = min(start + width, largest)
        residual = table.block(pending, start, stop)
        residual *= demand[pending, None]
        residual -= table.steps.batches[None, start:stop]
        crossed = residual <= 0
        hit = crossed.any(axis=1)
        index[pending[hit]] = start + np.argmax(crossed[hit], axis=1)
        found[pending[hit]] = True
        pending = pending[~hit]
        start, width = stop, min(2 * width, _LARGEST_BLOCK)
    return found, index
