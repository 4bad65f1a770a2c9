"""`pddplan calibrate` as library steps: its options checked, the fit they ask for, and the files
it writes (the rows made of benchmark results, the refitted catalog, the calibrated profile).

    flags = CalibrateFlags([Path("measurements.csv")], gpu="h200", output_path=Path("h200.yaml"))
    fit = flags.fit()
    flags.write_profile(fit)

Every check is here, so a library caller gets the errors the command line gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pddplan.calibration.bench_import import BenchFit, calibrate_from_bench, rows_csv
from pddplan.calibration.calibrate import (
    CalibrationResult,
    ErrorSummary,
    calibrate_profile,
    efficiency_yaml,
    factors_on_bounds,
    fit_all,
    with_efficiency_block,
)
from pddplan.calibration.outputs import Calibrate, FactorOnBound, FitErrors
from pddplan.calibration.refit import refit_file, write_catalog
from pddplan.errors import InputError
from pddplan.inputs import load_hardware
from pddplan.specs.hardware import HardwareProfile
from pddplan.support import catalog
from pddplan.support.loading import write_atomic


@dataclass(frozen=True)
class CalibrationFit:
    """What `calibrate` fitted: the result, for which GPU (None: one set of default factors to every
    row) and serving stack (with `--from`, the files' own when none was given), the GPU's profile
    with the new factors, and the benchmark import the rows came from (`--from`)."""

    result: CalibrationResult
    gpu: str | None = None
    stack: str | None = None
    profile: HardwareProfile | None = None
    bench: BenchFit | None = None

    @property
    def label(self) -> str:
        """What was fitted, in words: all GPUs, a GPU, or a GPU / stack."""
        if self.gpu is None:
            return "all GPUs"
        return self.gpu if self.stack is None else f"{self.gpu} / {self.stack}"

    def to_output(self, output: Path | None) -> Calibrate:
        """The typed result `calibrate --json` prints; `output`, the profile it wrote (if any)."""
        result = self.result

        def errors(s: ErrorSummary) -> FitErrors:
            return FitErrors(count=s.count, median_abs_error=s.median, worst_abs_error=s.worst, rms_log_error=s.rms_log)

        out = Calibrate(
            target=self.label,
            efficiency=result.efficiency.model_dump(),
            before={"fit": errors(result.before_fit), "holdout": errors(result.before_holdout)},
            after={"fit": errors(result.after_fit), "holdout": errors(result.after_holdout)},
            factors_on_bounds=[
                FactorOnBound(factor=name, value=value, bound=side)
                for name, value, side in factors_on_bounds(result.efficiency)
            ],
            output=str(output) if output else None,
        )
        if self.bench is not None:
            out.from_bench = self.bench.to_output()
        return out

    @property
    def notes(self) -> list[str]:
        """What the benchmark import assumed (none without `--from`)."""
        return list(self.bench.notes) if self.bench is not None else []


@dataclass(frozen=True)
class CalibrateFlags:
    """Every option of `pddplan calibrate`, by the command's own parameter names: what a caller (the
    command line or a library user) fills in, checked when it is fitted (`fit`)."""

    files: list[Path]
    from_bench: str | None = None
    model: str | None = None
    tp: int | None = None
    decode_instances: int = 1
    rows_out: Path | None = None
    gpu: str | None = None
    stack: str | None = None
    all_gpus: bool = False
    output_path: Path | None = None
    write_catalog: bool = False
    force: bool = False
    json_out: bool = False

    def check(self) -> None:
        """InputError for a combination of the options that means nothing."""
        if (self.gpu is None) == (not self.all_gpus):
            raise InputError("give --gpu NAME to calibrate one profile, or --all for the shipped defaults")
        if self.from_bench is None:
            for flag, value in (("--model", self.model), ("--tp", self.tp), ("--rows-out", self.rows_out)):
                if value is not None:
                    raise InputError(f"{flag} goes with --from (benchmark results)")
            if len(self.files) != 1:
                raise InputError(
                    f"give one measurements CSV (got {len(self.files)} files); several files go with --from"
                )
        elif self.gpu is None:
            raise InputError("--from needs --gpu NAME: benchmark files do not say which GPU ran them")
        if self.stack is not None and self.gpu is None:
            raise InputError("--stack needs --gpu NAME: stack factors belong to one GPU's profile")
        if self.write_catalog and not self.all_gpus:
            raise InputError("--write-catalog goes with --all (it refits every shipped factor)")
        if self.write_catalog and catalog.is_installed_copy():
            raise InputError(
                "--write-catalog rewrites a source checkout's hardware_profiles/ and default factors; this pddplan "
                "is an installed package (its files are pip's): write your own profile with --gpu G --output FILE"
            )

    def fit(self) -> CalibrationFit:
        """The options checked (`check`), then the fit they ask for: one GPU's factors (`--stack`'s,
        or its default ones) to a measurements CSV or to benchmark results (`--from`), or one set
        of default factors to every row (`--all`)."""
        self.check()
        if self.gpu is None:
            return CalibrationFit(fit_all(self.files[0]))
        if self.from_bench is None:
            profile, result = calibrate_profile(self.files[0], self.gpu, stack=self.stack)
            return CalibrationFit(result, self.gpu, self.stack, profile)
        bench = calibrate_from_bench(
            self.files,
            self.from_bench,  # type: ignore[arg-type]  # checked by read_bench
            self.gpu,
            self.model,
            self.tp,
            self.stack,
            self.decode_instances,
        )
        return CalibrationFit(bench.result, self.gpu, bench.stack, bench.profile, bench)

    def write_rows(self, fit: CalibrationFit) -> None:
        """`--rows-out`: the rows made of the benchmark results, as a measurements CSV."""
        if self.rows_out is not None and fit.bench is not None:
            write_atomic(self.rows_out, rows_csv(fit.bench.rows))

    def refit_catalog(self, progress: Callable[[str], None] | None = None) -> list[Path]:
        """`--write-catalog`: refit the defaults, every GPU and every (GPU, stack) to the
        measurements and write them into the catalog (`pddplan.calibration.refit`); the files written."""
        return write_catalog(refit_file(self.files[0], progress=progress))

    def write_profile(self, fit: CalibrationFit) -> None:
        """`--output`: the calibrated profile (`write_calibrated_profile`), or with `--all` the
        default factors as an efficiency block. Refused (InputError, nothing written) when the fit
        makes its held-out rows worse (`worsens`), unless `--force`; a fit without held-out rows
        that raises its own rows' median is only warned about (it lowers what it minimizes, their
        RMS log error)."""
        if self.output_path is None:
            return
        harm = worsens(fit.result)
        if harm is not None and fit.result.before_holdout.count and not self.force:
            raise InputError(f"{harm}; {self.output_path} not written (--force writes it anyway)")
        if fit.gpu is None:
            write_atomic(self.output_path, efficiency_yaml(fit.result.efficiency))
        else:
            assert fit.profile is not None
            write_calibrated_profile(self.output_path, fit.gpu, fit.profile, fit.result, fit.stack)


def worsens(result: CalibrationResult) -> str | None:
    """What the fit makes worse, in words, or None: the held-out rows' median |error| when there are
    held-out rows (the fit's own rows cannot judge it), else the fit rows' median; a rise of more
    than half a point counts."""
    if result.before_holdout.count:
        before, after, rows = result.before_holdout, result.after_holdout, "held-out"
    else:
        before, after, rows = result.before_fit, result.after_fit, "fitted"
    if not after.median > before.median + 0.005:
        return None
    return (
        f"the fitted factors make the {after.count} {rows} rows worse: median |error| {before.median:.1%} -> "
        f"{after.median:.1%}"
    )


def write_calibrated_profile(
    output_path: Path, gpu: str, profile: HardwareProfile, result: CalibrationResult, stack: str | None
) -> None:
    """Write the calibrated profile: `output_path`'s own text (or the catalog GPU's) with its
    efficiency block, or with `stack`'s factors added to those it already holds."""
    source_path = output_path if output_path.exists() else None
    text = source_path.read_text() if source_path else profile_text(gpu)
    if stack is None:
        write_atomic(output_path, with_efficiency_block(text, result.efficiency))
    else:
        kept = load_hardware(str(source_path)).stack_efficiency if source_path else profile.stack_efficiency
        stacks = {**kept, stack: result.efficiency}
        write_atomic(output_path, with_efficiency_block(text, None, stacks))


def profile_text(gpu: str) -> str:
    """The text of the catalog's profile of `gpu`, as written."""
    return catalog.resolve("hardware_profiles", gpu, "GPU").read_text(encoding="utf-8")
