"""Refit every shipped efficiency factor from the public measurements, level by level.

  1. defaults: the kernel priors (`pddplan.perf.priors`), not fitted (see `refit`); the per-stack
     software costs (`PER_STACK_FACTORS`: step and request overheads) keep their priors at this
     level and the next;
  2. per GPU: each GPU with at least `MIN_GPU_FIT_ROWS` fit rows of at least `MIN_GPU_FIT_MODELS`
     models (one model's rows would make its quirks the GPU's, and no fold that leaves whole models
     out could check them), fitted to its rows and pulled
     towards the defaults with the GPU's own kernel priors (`gpu_start`, `GPU_PRIOR_WEIGHT`); a GPU
     with public kernel figures (`GPU_PRIORS`) but fewer rows keeps those priors;
  3. per (GPU, stack): each pair with a fit row, fitted to that pair's rows, starting from (and
     pulled towards, `STACK_PRIOR_WEIGHT`) the GPU's factors (a copying GPU's: its original's, see `COPIES`).
Profiles without rows of their own take a sibling's factors (`COPIES`, each with its reason).
The function returns the factors; `write_catalog` puts them into the catalog files.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pddplan.calibration.calibrate import (
    Measurement,
    data_tag,
    efficiency_yaml,
    fit_gpu_efficiency,
    fit_stack_efficiency,
    read_measurements,
    with_efficiency_block,
)
from pddplan.perf.efficiency import DEFAULT_EFFICIENCY_PATH
from pddplan.perf.priors import GPU_PRIORS, PRIOR_EFFICIENCY, gpu_start
from pddplan.specs.hardware import Efficiency
from pddplan.support.catalog import catalog_dir
from pddplan.support.loading import write_atomic

MIN_GPU_FIT_ROWS = 3
MIN_GPU_FIT_MODELS = 2

#: profile -> (profile whose factors it takes, why).
COPIES: dict[str, tuple[str, str]] = {
    "h800": ("h100-sxm", "same GH100 die as the H100 SXM; no H800 fit rows"),
    "gpu-a": ("h100-sxm", "gpu-a has H800 figures; the H800 is the H100's GH100 die"),
    "gpu-b": ("h200", "gpu-b has the H200's figures"),
}


@dataclass
class CatalogFit:
    """The shipped factors: defaults, per GPU, and per (GPU, stack)."""

    defaults: Efficiency
    per_gpu: dict[str, Efficiency] = field(default_factory=dict)
    per_stack: dict[str, dict[str, Efficiency]] = field(default_factory=dict)

    def factors(self, gpu: str, stack: str | None) -> Efficiency:
        """The most specific factors for a row: its (GPU, stack), else its GPU, else the defaults."""
        stacks = self.per_stack.get(gpu, {})
        if stack and stack in stacks:
            return stacks[stack]
        return self.per_gpu.get(gpu, self.defaults)


@dataclass
class FitMemo:
    """Fits already made, by their whole input (the rows with their splits, the starting factors,
    the source line). Cross-validation refits every GPU and stack once per fold, and a fold that
    holds out none of a group's rows asks that group's fit again: 57 distinct fits of 106 over the
    shipped rows' five folds. Each fit is a pure function of its input, so a kept one is the same."""

    fits: dict[Hashable, Efficiency] = field(default_factory=dict)

    def fitted(self, key: Hashable, fit: Callable[[], Efficiency]) -> Efficiency:
        if key not in self.fits:
            self.fits[key] = fit()
        return self.fits[key]


def refit(
    rows: list[Measurement],
    name: str = "measurements.csv",
    progress: Callable[[str], None] | None = None,
    memo: FitMemo | None = None,
) -> CatalogFit:
    """Fit the three levels to the `fit` rows of `rows` (holdout and excluded rows never count);
    `name` says which data it was (`data_tag`: file, hash and date). `memo` keeps the fits for the
    next call (cross-validation's folds)."""
    memo = memo if memo is not None else FitMemo()

    def say(text: str) -> None:
        if progress:
            progress(text)

    scored = [m for m in rows if m.split in ("fit", "holdout")]
    # The defaults are the kernel priors themselves: the shipped rows mix vendors (MI300X's ROCm
    # kernels) and early releases whose steps ran at half the speed of later ones on the same GPU,
    # and a fit across them would drag every uncalibrated GPU towards the slowest stacks.
    defaults = PRIOR_EFFICIENCY.model_copy(
        update={
            "source": "priors: public kernel microbenchmarks (pddplan.perf.priors, tests/data/kernel_priors.md); "
            f"not fitted to {name}, whose rows calibrate each GPU and stack instead"
        }
    )
    result = CatalogFit(defaults)
    for gpu in sorted({m.gpu for m in scored} | set(GPU_PRIORS)):
        mine = [m for m in scored if m.gpu == gpu]
        count = sum(m.split == "fit" for m in mine)
        models = len({m.model for m in mine if m.split == "fit"})
        start = gpu_start(gpu, defaults)
        if count >= MIN_GPU_FIT_ROWS and models >= MIN_GPU_FIT_MODELS:
            say(f"fitting {gpu}")
            source = f"calibrated: fitted by `pddplan calibrate` to {count} {gpu} rows of {name}"
            gpu_key = ("gpu", tuple(mine), start.model_dump_json(), source)
            result.per_gpu[gpu] = memo.fitted(gpu_key, partial(_gpu_fit, mine, start, source))
        elif gpu in GPU_PRIORS:
            own = ", ".join(sorted(GPU_PRIORS[gpu]))
            note = f"the defaults with this GPU's own kernel priors ({own}; pddplan.perf.priors.GPU_PRIORS); "
            result.per_gpu[gpu] = _noted(start, note)
    for gpu, stack in sorted({(m.gpu, m.stack) for m in scored if m.stack}):
        mine = [m for m in scored if m.gpu == gpu and m.stack == stack]
        count = sum(m.split == "fit" for m in mine)
        if count == 0:
            continue
        say(f"fitting {gpu} / {stack}")
        start = result.per_gpu.get(gpu) or result.per_gpu.get(COPIES.get(gpu, ("", ""))[0], defaults)
        source = f"calibrated: fitted by `pddplan calibrate --stack` to {count} {gpu} rows of stack {stack} in {name}"
        stack_key = ("stack", tuple(mine), gpu, stack, start.model_dump_json(), source)
        fitted = memo.fitted(stack_key, partial(_stack_fit, mine, gpu, stack, start, source))
        result.per_stack.setdefault(gpu, {})[stack] = fitted
    for copy, (original, why) in COPIES.items():
        if copy in result.per_gpu or original not in result.per_gpu:
            continue
        note = f"copied from {original}'s calibration ({why}); "
        result.per_gpu[copy] = _noted(result.per_gpu[original], note)
        inherited = {stack: _noted(f, note) for stack, f in result.per_stack.get(original, {}).items()}
        merged = {**inherited, **result.per_stack.get(copy, {})}  # the copy's own stacks win
        if merged:
            result.per_stack[copy] = merged
    return result


def _gpu_fit(rows: list[Measurement], start: Efficiency, source: str) -> Efficiency:
    return fit_gpu_efficiency(rows, start, source).efficiency


def _stack_fit(rows: list[Measurement], gpu: str, stack: str, start: Efficiency, source: str) -> Efficiency:
    return fit_stack_efficiency(rows, gpu, stack, start, source).efficiency


def _noted(factors: Efficiency, note: str) -> Efficiency:
    return factors.model_copy(update={"source": f"calibrated: {note}{factors.source.removeprefix('calibrated: ')}"})


def refit_file(measurements: Path, progress: Callable[[str], None] | None = None) -> CatalogFit:
    """`refit` over a measurements CSV."""
    return refit(read_measurements(measurements), data_tag(measurements), progress)


def write_catalog(fit: CatalogFit, hardware_dir: Path | None = None, defaults_path: Path | None = None) -> list[Path]:
    """Write the defaults file and every refitted profile's `efficiency` / `stack_efficiency` blocks.

    Each file is replaced atomically; a profile's other fields are kept as written. Returns the paths.
    """
    hardware_dir = hardware_dir or catalog_dir("hardware_profiles")
    defaults_path = defaults_path or DEFAULT_EFFICIENCY_PATH
    write_atomic(defaults_path, efficiency_yaml(fit.defaults))
    written = [defaults_path]
    for gpu in sorted(set(fit.per_gpu) | set(fit.per_stack)):
        path = hardware_dir / f"{gpu}.yaml"
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        write_atomic(path, with_efficiency_block(text, fit.per_gpu.get(gpu), fit.per_stack.get(gpu, {})))
        written.append(path)
    return written
