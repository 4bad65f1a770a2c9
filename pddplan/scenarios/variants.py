"""Variants of a workload: its hit rate moved (the bathtub's and whatif's shift), a numeric field set
by its dotted path (sweep, the day's scenarios), and the day's scenarios themselves.

Every variant is a copy (`model_copy`, or the file's data re-validated), never an edited file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pddplan.errors import InputError
from pddplan.inputs.input_set import InputSet
from pddplan.scenarios.scenario import gpu_price
from pddplan.specs.distributions import HitBucket, HitRateDistribution, RequestMix
from pddplan.specs.workload import TrafficScenario, Workload
from pddplan.support.loading import validate

#: how a hit-rate distribution moves to another mean: each value shifted alike, or all at one value
HitMode = Literal["shift", "fixed"]


def _mover(mean: float, hit: float) -> Callable[[float], float]:
    """The map that moves a hit-rate distribution of mean `mean` to mean `hit`: towards 1 by the
    share (hit - mean) / (1 - mean) of each value's headroom, or scaled by hit / mean; both are
    affine, so the mean lands on `hit` exactly."""

    def move(x: float) -> float:
        if hit >= mean:
            s = (hit - mean) / (1.0 - mean) if mean < 1 else 0.0
            return min(x + (1.0 - x) * s, 1.0)
        return x * hit / mean if mean > 0 else hit

    return move


def hit_distribution(workload: Workload, hit: float, mode: HitMode) -> HitRateDistribution:
    """The hit-rate distribution at sweep point `hit` (see the module docstring)."""
    if mode == "fixed":
        return HitRateDistribution(buckets=[HitBucket(low=hit, high=hit, share=1.0)])
    move = _mover(workload.hit_rate.mean(), hit)
    buckets = workload.hit_rate.resolved_buckets()
    return HitRateDistribution(buckets=[HitBucket(low=move(b.low), high=move(b.high), share=b.share) for b in buckets])


def mix_at_hit(mix: RequestMix, hit: float, mode: HitMode) -> RequestMix:
    """A request mix moved to mean hit `hit` as `hit_distribution` moves the marginal (each class
    keeps its prompt length and share, its load time scales with its hit; "fixed" gives every
    class the hit `hit`)."""
    move = (lambda _: hit) if mode == "fixed" else _mover(mix.mean_hit(), hit)

    def moved(c: Any) -> Any:
        # a class's load from a slower tier reads its cached tokens: it scales with its hit
        new_hit = move(c.hit)
        load = c.load_s * new_hit / c.hit if c.hit > 0 else 0.0
        return c.model_copy(update={"hit": new_hit, "load_s": load})

    return mix.model_copy(update={"classes": [moved(c) for c in mix.classes]})


def with_hit(workload: Workload, hit: float, mode: HitMode) -> dict[str, Any]:
    """The fields of `workload` that change at mean hit `hit`: the marginal and, where the
    workload has one, its request mix, moved alike."""
    update: dict[str, Any] = {"hit_rate": hit_distribution(workload, hit, mode)}
    if workload.request_mix is not None:
        update["request_mix"] = mix_at_hit(workload.request_mix, hit, mode)
    return update


def at_hit(workload: Workload, hit: float, mode: HitMode, chunk_tokens: int | None = None) -> Workload:
    """The workload at sweep point `hit` (and chunk size, if given)."""
    update: dict[str, Any] = with_hit(workload, hit, mode)
    if chunk_tokens is not None:
        update["serving"] = workload.serving.model_copy(update={"chunk_tokens": chunk_tokens})
    return workload.model_copy(update=update)


_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


def _like(old: Any, value: float) -> Any:
    """`value` as an int where the field held an int and the value is a whole number a float
    holds exactly (|v| <= 2^53); else the float, so that an error shows `1e+300`, not 301 digits."""
    if isinstance(old, int) and float(value).is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def set_path(data: dict[str, Any], path: str, value: float, where: str = "") -> dict[str, Any]:
    """A deep copy of `data` with the field at `path` set to `value` (ints stay ints); errors name
    the path after `where` (the flag or field that gave it, e.g. `--param`)."""
    out = copy.deepcopy(data)
    here = f"{where} {path!r}" if where else repr(path)
    current: Any = out
    parts = path.split(".")
    for depth, part in enumerate(parts):
        match = _PART.match(part)
        if not match:
            raise InputError(f"{here}: cannot read {part!r} (use keys and [index], e.g. wan_lines[0])")
        key, indexes = match.group(1), [int(i) for i in re.findall(r"\[(\d+)\]", match.group(2))]
        last = depth == len(parts) - 1 and not indexes
        if not isinstance(current, dict) or (key not in current and not last):
            raise InputError(f"{here}: no field {key!r} at {'.'.join(parts[:depth]) or 'the top'}")
        if last:
            old = current.get(key)
            current[key] = _like(old, value)
            return out
        current = current[key]
        for position, index in enumerate(indexes):
            if not isinstance(current, list) or index >= len(current):
                raise InputError(f"{here}: {key} has no item [{index}]")
            if depth == len(parts) - 1 and position == len(indexes) - 1:
                old = current[index]
                current[index] = _like(old, value)
                return out
            current = current[index]
    return out


def scenario_workloads(workload: Workload) -> list[tuple[TrafficScenario, Workload]]:
    """Each scenario's workload: overrides set (dotted paths), hit shifted, validated as a file is."""
    out = []
    for spec in workload.scenarios:
        data = workload.model_dump(mode="json", exclude_none=True)
        data["scenarios"] = []
        for path, value in spec.overrides.items():
            data = set_path(data, path, value, where=f"scenario {spec.name}: overrides:")
        changed = validate(Workload, data, f"scenario {spec.name}")
        if spec.hit_shift:
            target = min(max(changed.hit_rate.mean() + spec.hit_shift, 0.0), 1.0)
            changed = changed.model_copy(update=with_hit(changed, target, "shift"))
        out.append((spec, changed))
    return out


def scale_rate(workload: Workload, factor: float) -> Workload:
    """The workload with `arrival.rate_rps` multiplied by `factor`."""
    arrival = workload.arrival.model_copy(update={"rate_rps": workload.arrival.rate_rps * factor})
    return workload.model_copy(update={"arrival": arrival})


def scale_gpu_prices(inputs: InputSet, types: Sequence[str], factor: float) -> Workload:
    """The workload with every offer of the GPU types `types` priced at `factor` x its price (the
    offer's `usd_per_gpu_hour`, else its profile's price); other offers are untouched."""
    workload = inputs.workload
    datacenters = []
    for dc in workload.deployment.datacenters:
        gpus = [
            offer.model_copy(
                update={
                    "usd_per_gpu_hour": factor
                    * gpu_price(inputs.hardware_for(offer.type), workload, dc.name, offer.type)
                }
            )
            if offer.type in types
            else offer
            for offer in dc.gpus
        ]
        datacenters.append(dc.model_copy(update={"gpus": gpus}))
    deployment = workload.deployment.model_copy(update={"datacenters": datacenters})
    return workload.model_copy(update={"deployment": deployment})


def extend_widths(workload: Workload, widths: Sequence[int]) -> Workload:
    """The workload with `deployment.tp_options` set to `widths`."""
    deployment = workload.deployment.model_copy(update={"tp_options": list(widths)})
    return workload.model_copy(update={"deployment": deployment})


def with_serving(workload: Workload, **changes: Any) -> Workload:
    """The workload with `serving` fields changed."""
    return workload.model_copy(update={"serving": workload.serving.model_copy(update=changes)})
