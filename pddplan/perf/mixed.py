"""A relay decoder co-located on prefill instances: decode tokens riding in chunked-prefill steps.

Engines that mix prefill and decode in one batch (SGLang's mixed chunks, vLLM's chunked prefill)
add the running sequences' decode tokens to every prefill step. A prefill instance that also runs
`b` relay sequences therefore has two kinds of steps:

  busy (a prefill chunk runs)   s_mix(b) = s_C + m(b): each relay sequence gets one token per step;
  idle (no prefill waiting)     tau(b), the plain decode step.

The relay's marginal cost in a mixed step is

  m(b) = T_lin(C + b) - T_lin(C) + A_dec(b, context),

T_lin the step without attention (`roofline.linear_step_s`: weights, GEMMs, collectives, overheads,
already paid by the chunk, so only the b extra rows cost) and A_dec the decode attention of b
sequences over their context. s_C is the busy step: on average the step of one of a request's
own chunks, E[A] / E[chunks] (A its chunks' engine time alone). (Packing makes some steps longer
on a tensor-parallel instance, shorter under data-parallel attention, whose lone chunk runs on one
rank; the simulator uses its actual steps.)
A relay sequence's mean time per token, with prefill busy a fraction rho of the time, is

  tau_co = 1 / (rho / s_mix(b) + (1 - rho) / tau(b))

(tokens per second while busy and while idle, time-weighted). Prefill pays the relay's marginal
cost on each of its steps: its work grows by the factor 1 + m(b) / s_C.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pddplan.perf.roofline import Instance, kept_by_instance, linear_step_s, step_time


@kept_by_instance
def relay_marginal_step_s(instance: Instance, batch: ArrayLike, context_tokens: float, step_tokens: int) -> np.ndarray:
    """m(b) = T_lin(C + b) - T_lin(C) + A_dec(b, context): what b relay sequences add to a prefill
    step of C = `step_tokens` tokens (0 for b = 0; fractional b interpolates the rows linearly).
    Under data-parallel attention a full step carries the chunk budget on each of r ranks, and the
    rows spread over them: C is r times the budget (`Instance.full_step_tokens`). Kept by content
    (`kept_by_instance`): the array returned is read-only."""
    b = np.maximum(np.asarray(batch, dtype=np.float64), 0.0)
    chunk = float(step_tokens)
    rows = linear_step_s(instance, chunk + b) - linear_step_s(instance, chunk)
    attention = step_time(instance, 1.0, context_tokens, np.maximum(b, 1e-12)).attention_s
    return np.where(b > 0, np.maximum(rows, 0.0) + attention, 0.0)


def busy_step_s(
    instance: Instance, chunk_tokens: int, attention_s_per_token: float, mean_chunk_s: float, ranks: int = 1
) -> float:
    """s_C = E[A] / E[chunks]: a busy prefill instance's mean step, a request's own chunk step on
    average (`mean_chunk_s`); a full step's, T_lin(r C) + C * (prefill attention per new token),
    when `mean_chunk_s` is 0 (no request brings a new token, or the full step is asked for): the
    chunk budget C on each of the `ranks` data-parallel-attention ranks (1 without), each rank's
    attention in parallel. A lone request's chunk runs on one rank and under data-parallel
    attention takes less than a full step and more than a packed share of it."""
    if mean_chunk_s > 0:
        return mean_chunk_s
    return float(linear_step_s(instance, float(chunk_tokens * ranks))) + chunk_tokens * attention_s_per_token


def colocated_token_s(busy_fraction: float, mixed_step_s: ArrayLike, alone_step_s: ArrayLike) -> np.ndarray:
    """tau_co = 1 / (rho / s_mix + (1 - rho) / tau): a co-located relay sequence's mean time per
    token when prefill keeps the instance busy a fraction rho (clipped to [0, 1]) of the time."""
    rho = min(max(float(busy_fraction), 0.0), 1.0)
    mixed = np.asarray(mixed_step_s, dtype=np.float64)
    alone = np.asarray(alone_step_s, dtype=np.float64)
    return 1.0 / (rho / mixed + (1.0 - rho) / alone)
