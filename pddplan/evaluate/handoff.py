"""The relay's handoff policy, in one place for the closed form, the capacity model and the simulator.

When the main decoder (MD) has a relayed request's KV, the relay (RLD) sends the IDs of its eager
tokens and the MD recomputes them in one extend step.
  one-shot   all k0 eager tokens in one chunk: the relay stops at once; the MD's extend covers k0.
  catch-up   chunk by chunk while the relay keeps decoding: while the MD recomputes chunk k_i
             (extend time e_i) and the IDs make a round trip, the relay produces
             k_{i+1} = (RTT + e_i) / tau_RLD more; stop when k_{i+1} <= the threshold (at most
             MAX_CATCHUP_ROUNDS rounds). The relay works sum_i (RTT + e_i) longer; the user sees
             only the last chunk's extend as a hiccup, the earlier ones ran while the relay streamed.
  adaptive   catch-up while the relay's utilization is below `adaptive_load_threshold`, else one-shot.
Each chunk's extend stalls the MD instance while it runs (its other sequences wait): the MD's stall
per handoff is the sum of every chunk's extend time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pddplan.specs.plan import Handoff

MAX_CATCHUP_ROUNDS = 6


def wants_catch_up(handoff: Handoff, relay_utilization: float) -> bool:
    """catch-up: always; one-shot: never; adaptive: relay utilization < adaptive_load_threshold."""
    if handoff.mode == "catch-up":
        return True
    if handoff.mode == "one-shot":
        return False
    return relay_utilization < handoff.adaptive_load_threshold


@dataclass(frozen=True)
class CatchUp:
    """Outcome of a handoff, per request class (arrays of the first chunk's shape)."""

    extra_relay_s: np.ndarray  # relay time after the first handoff: sum over rounds of RTT + e_i
    last_chunk_tokens: np.ndarray  # eager tokens the final chunk hands over
    earlier_extend_s: np.ndarray  # MD extend time of the chunks before the final one

    def md_stall_s(self, extend_s: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """MD instance time spent on the handoff: every chunk's extend, sum_i e_i."""
        return self.earlier_extend_s + extend_s(np.maximum(self.last_chunk_tokens, 1.0))


def catch_up_rounds(
    first_chunk_tokens: np.ndarray,
    relay_step_s: float,
    rtt_s: float,
    threshold_tokens: float,
    extend_s: Callable[[np.ndarray], np.ndarray],
    catch_up: bool,
) -> CatchUp:
    """The rounds of one handoff (see the module docstring); one-shot is the zero-round case."""
    first = np.asarray(first_chunk_tokens, dtype=np.float64)
    extra = np.zeros_like(first)
    earlier = np.zeros_like(first)
    chunk = first.copy()
    if not catch_up:
        return CatchUp(extra, chunk, earlier)
    active = chunk > threshold_tokens
    for _ in range(MAX_CATCHUP_ROUNDS):
        if not active.any():
            break
        # only the classes still catching up take another round (the extend is the cost)
        extend = extend_s(np.maximum(chunk[active], 1.0))
        round_s = rtt_s + extend
        extra[active] += round_s
        earlier[active] += extend
        chunk[active] = round_s / relay_step_s
        active &= chunk > threshold_tokens
    return CatchUp(extra, chunk, earlier)


def catch_up_chunks(
    first_chunk_tokens: float,
    relay_step_s: float,
    rtt_s: float,
    threshold_tokens: float,
    extend_s: Callable[[float], float],
    catch_up: bool,
) -> tuple[list[float], float]:
    """One request's handoff in plain floats (the simulator's, once per relayed request): the MD's
    extend time e_i of each chunk before the final one, in order, and the final chunk's tokens. The
    rounds of `catch_up_rounds`: while the chunk k_i > the threshold (at most MAX_CATCHUP_ROUNDS),
    e_i = extend(max(k_i, 1)) and k_{i+1} = (RTT + e_i) / tau_RLD."""
    chunk = first_chunk_tokens
    earlier: list[float] = []
    if not catch_up:
        return earlier, chunk
    for _ in range(MAX_CATCHUP_ROUNDS):
        if not chunk > threshold_tokens:
            break
        extend = extend_s(max(chunk, 1.0))
        earlier.append(extend)
        chunk = (rtt_s + extend) / relay_step_s
    return earlier, chunk
