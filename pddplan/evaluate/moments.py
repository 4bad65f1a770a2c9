"""Means of a workload's length distributions, computed in one place.

Every stage that needs a mean (the decoders' context for step times and KV per sequence, the mean
output for decode rates) reads it from here, so the closed form, the capacity model, the optimizer
and the simulator use the same float, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

from pddplan.specs.workload import Workload


@dataclass(frozen=True)
class WorkloadMoments:
    """E[prompt tokens] and E[output tokens] of a workload's distributions (their support points)."""

    prompt_tokens: float
    output_tokens: float

    @property
    def context_tokens(self) -> float:
        """Mean context of a decoding sequence: E[prompt] + E[output] / 2."""
        return self.prompt_tokens + self.output_tokens / 2


def workload_moments(workload: Workload) -> WorkloadMoments:
    """E[X] = sum_i x_i p_i over each distribution's support points."""
    prompts, _, prompt_probs = workload.prompt_hit_support()
    outputs, output_probs = workload.output_tokens.support()
    return WorkloadMoments(float(prompts @ prompt_probs), float(outputs @ output_probs))
