"""`pddplan accuracy`: how far the shipped step-time model is from measured points.

Every scored row is predicted twice: with the factors its GPU's profile holds for the row's
serving stack (what `pddplan estimate --stack` uses; the stack was calibrated on its `fit` rows),
and with the GPU's stack-agnostic factors (what `estimate` without `--stack` uses). Excluded rows
are predicted too and listed with their reason, but not scored. Held-out rows are also scored
apart by what they measure (engine step or client-side time) and step kind, by model family, by
architecture class (dense, MoE with expert-parallel or tensor-parallel experts, MLA) and by the
weight precision the experts (or the dense weights) run at (bf16, fp8, fp4, int4).
Cross-validation folds leave whole models (or serving stacks) out, never single rows: a held-out
row whose model fed the fit is flattered by it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from pddplan.calibration.calibrate import (
    ErrorSummary,
    Measurement,
    RowModels,
    accuracy_rows,
    predict,
    read_measurements,
)
from pddplan.calibration.outputs import (
    Accuracy,
    AccuracyPoint,
    CrossValidation,
    Errors,
    GpuErrors,
    Groups,
    SplitErrors,
)
from pddplan.calibration.refit import FitMemo, refit
from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.roofline import Instance
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.precision import weight_format
from pddplan.support.catalog import shipped_measurements
from pddplan.support.forking import map_forked, worker_count


def _summary(predicted: np.ndarray, measured: np.ndarray) -> SplitErrors:
    stats = ErrorSummary.of(predicted, measured)
    p90 = float(np.quantile(np.abs(predicted / measured - 1.0), 0.9)) if stats.count else None
    return SplitErrors(
        count=stats.count,
        median_abs_error=stats.median,
        p90_abs_error=p90,
        worst_abs_error=stats.worst,
        mean_abs_error=stats.mean,
    )


def _point(m: Measurement, predicted: float, gpu_level: float, origin: str) -> AccuracyPoint:
    return AccuracyPoint(
        line=m.line,
        model=m.model,
        gpu=m.gpu,
        stack=m.stack,
        tp=m.tp,
        kind=m.kind,
        tokens=m.tokens,
        cached=m.cached,
        batch=m.batch,
        context=m.context,
        measured_s=m.measured_s,
        predicted_s=predicted,
        error=predicted / m.measured_s - 1.0,
        gpu_level_predicted_s=gpu_level,
        gpu_level_error=gpu_level / m.measured_s - 1.0,
        split=m.split,
        measured_kind=m.measured_kind,
        factors=origin,
    )


def model_family(model: ModelArchitecture) -> str:
    """The attention-and-FFN family a model's step time behaves by: MLA, MoE GQA or dense GQA."""
    if model.mla is not None:
        return "MLA"
    return "MoE GQA" if model.moe is not None else "dense GQA"


ARCHITECTURE_CLASSES = ("dense", "MoE expert-parallel", "MoE tensor-parallel", "MLA")
PRECISION_CLASSES = ("bf16", "fp8", "fp4", "int4")


def architecture_class(m: Measurement) -> str:
    """dense, MoE expert-parallel (whole experts per rank), MoE tensor-parallel (experts sliced, or
    one GPU) or MLA (DeepSeek-style latent attention, MoE or not)."""
    model = load_model(m.model)
    if model.mla is not None:
        return "MLA"
    if model.moe is None:
        return "dense"
    instance = Instance(model, load_hardware(m.gpu), m.tp, m.expert_parallel, tp_attention=m.tp_attention)
    return "MoE expert-parallel" if instance.uses_ep else "MoE tensor-parallel"


def precision_class(m: Measurement) -> str:
    """The format family the row's largest weights are stored in: its routed experts' for an MoE
    model, its weights' otherwise (fp8 and fp8-block: fp8; nvfp4 and mxfp4: fp4)."""
    model = load_model(m.model)
    dense = m.weight_dtype or model.weight_dtype
    experts = m.expert_weight_dtype or (m.weight_dtype if m.weight_dtype else model.expert_dtype)
    fmt = weight_format(experts if model.moe is not None else dense)
    if fmt.weight_only:
        return "int4"
    return {"bf16": "bf16", "fp8": "fp8", "fp4": "fp4"}[fmt.compute]


def step_kind(m: Measurement) -> str:
    """prefill, cached prefill (a prefill on cached tokens), decode or extend."""
    if m.kind == "prefill" and m.cached > 0:
        return "cached prefill"
    return m.kind


def _grouped(
    rows: list[Measurement], predicted: np.ndarray, measured: np.ndarray, scored: np.ndarray | None = None
) -> Groups:
    """Errors of the `scored` rows (default: the held-out ones) per (engine or client measurement,
    step kind), per measurement over every step kind (`"<kind> all"`, where it has several), per
    model family, per architecture class and per weight precision."""

    families = {name: model_family(load_model(name)) for name in {m.model for m in rows}}
    held = np.array([m.split == "holdout" for m in rows]) if scored is None else scored
    groups: dict[str, dict[str, np.ndarray]] = {"by_measurement": {}, "by_family": {}}
    for m_kind in ("engine_step", "client_ttft", "client_itl"):
        kinds = 0
        for s_kind in ("prefill", "cached prefill", "decode", "extend"):
            mask = held & np.array([m.measured_kind == m_kind and step_kind(m) == s_kind for m in rows])
            if mask.any():
                groups["by_measurement"][f"{m_kind} {s_kind}"] = mask
                kinds += 1
        if kinds > 1:  # the targets are stated per measurement, every step kind together
            groups["by_measurement"][f"{m_kind} all"] = held & np.array([m.measured_kind == m_kind for m in rows])
    for family in ("dense GQA", "MoE GQA", "MLA"):
        mask = held & np.array([families[m.model] == family for m in rows])
        if mask.any():
            groups["by_family"][family] = mask
    classes = {
        "by_class": (ARCHITECTURE_CLASSES, architecture_class),
        "by_precision": (PRECISION_CLASSES, precision_class),
    }
    for name, (names, classify) in classes.items():
        groups[name] = {}
        labels = np.array([classify(m) for m in rows])
        for label in names:
            mask = held & (labels == label)
            if mask.any():
                groups[name][label] = mask
    return Groups(
        **{
            name: {key: _percentiles(predicted[mask], measured[mask]) for key, mask in masks.items()}
            for name, masks in groups.items()
        }
    )


def _percentiles(predicted: np.ndarray, measured: np.ndarray) -> Errors:
    errors = np.abs(predicted / measured - 1.0)
    return Errors(
        count=len(errors),
        median_abs_error=float(np.median(errors)),
        p90_abs_error=float(np.quantile(errors, 0.9)),
        worst_abs_error=float(errors.max()),
    )


def accuracy_report(measurements: Path | None = None) -> Accuracy:
    """Per-row errors and median/worst absolute error on the fit and held-out rows, per level.

    `summary` scores the most specific shipped factors (the row's stack where calibrated);
    `gpu_level_summary` scores the stack-agnostic factors of each GPU.
    """
    path = measurements or shipped_measurements()
    if measurements is None and not path.exists():
        raise InputError(f"{path}: the shipped measurements are missing from this install; pass a measurements CSV")
    rows = read_measurements(path)
    predicted, origin = accuracy_rows(rows, by_stack=True)
    gpu_level, _ = accuracy_rows(rows, by_stack=False)
    measured = np.array([m.measured_s for m in rows])
    splits = np.array([m.split for m in rows])
    summary = {split: _summary(predicted[splits == split], measured[splits == split]) for split in ("fit", "holdout")}
    gpu_summary = {
        split: _summary(gpu_level[splits == split], measured[splits == split]) for split in ("fit", "holdout")
    }
    gpus = np.array([m.gpu for m in rows])
    by_gpu: dict[str, GpuErrors] = {}
    for gpu in sorted({m.gpu for m in rows if m.split == "holdout"}):
        mask = (gpus == gpu) & (splits == "holdout")
        stats = ErrorSummary.of(predicted[mask], measured[mask])
        by_gpu[gpu] = GpuErrors(holdout_count=stats.count, median_abs_error=stats.median, worst_abs_error=stats.worst)
    points = [_point(m, float(p), float(g), o) for m, p, g, o in zip(rows, predicted, gpu_level, origin, strict=True)]
    return Accuracy(
        measurements=str(path),
        rows=len(rows),
        excluded=int(np.sum(splits == "excluded")),
        summary=summary,
        gpu_level_summary=gpu_summary,
        holdout_by_gpu=by_gpu,
        holdout_groups=_grouped(rows, predicted, measured),
        points=points,
    )


FOLD_UNITS = ("model", "stack")


def fold_groups(rows: list[Measurement], folds: int, unit: str = "model") -> list[list[int]]:
    """The fit rows' indices in `folds` folds, each holding whole models (or serving stacks): the
    units sorted by name are dealt to the folds in turn, largest first so that folds stay even."""
    if unit not in FOLD_UNITS:
        raise InputError(f"--fold-by = {unit!r}: expected one of {', '.join(FOLD_UNITS)}")
    fit_index = [i for i, m in enumerate(rows) if m.split == "fit"]
    units: dict[str, list[int]] = {}
    for i in fit_index:
        key = rows[i].model if unit == "model" else (rows[i].stack or f"{rows[i].gpu} (no stack)")
        units.setdefault(key, []).append(i)
    if len(units) < folds:
        raise InputError(f"--folds = {folds}: more folds than the {len(units)} {unit}s with fit rows")
    groups: list[list[int]] = [[] for _ in range(folds)]
    for key in sorted(units, key=lambda k: (-len(units[k]), k)):
        smallest = min(range(folds), key=lambda k: (len(groups[k]), k))
        groups[smallest].extend(units[key])
    return [sorted(group) for group in groups]


def cross_validation(
    rows: list[Measurement],
    folds: int = 5,
    progress: Callable[[str], None] | None = None,
    unit: str = "model",
) -> CrossValidation:
    """K-fold cross-validation of the whole refit (`pddplan.calibration.refit`: defaults, per GPU, per
    stack) on the `fit` rows, by whole models (or stacks, `unit`): fold k holds every fit row of the
    models `fold_groups` deals it; each fold is predicted by the factors refitted without it (with
    the most specific level its row has, as `accuracy` does). Held-out and excluded rows never
    enter. Errors are |predicted / measured - 1|: median, p90 and worst, overall and per group
    (`_grouped`)."""

    if folds < 2:
        raise InputError(f"--folds = {folds}: cross-validation needs at least 2 folds")
    predicted = np.full(len(rows), np.nan)
    models: RowModels = {}
    memo = FitMemo()  # a fold that holds out none of a group's rows refits it as an earlier fold did

    def fold_predictions(group: list[int]) -> list[float]:
        """The held-out rows of one fold, predicted by the factors refitted without them."""
        held = set(group)
        fit = refit([replace(m, split="holdout") if i in held else m for i, m in enumerate(rows)], memo=memo)
        return [float(predict([rows[i]], fit.factors(rows[i].gpu, rows[i].stack), models=models)[0]) for i in group]

    groups = fold_groups(rows, folds, unit)
    workers = worker_count(None, folds)
    if progress:
        held_out = ", ".join(str(len(group)) for group in groups)
        progress(f"cross-validation: {folds} folds by {unit} ({held_out} rows held out) on {workers} workers")
    # the folds are independent: forked workers refit them side by side (each keeps its own memo)
    for group, values in zip(groups, map_forked(fold_predictions, groups, workers), strict=True):
        predicted[group] = values
    scored = ~np.isnan(predicted)
    measured = np.array([m.measured_s for m in rows])
    return CrossValidation(
        folds=folds,
        fold_by=unit,
        overall=_percentiles(predicted[scored], measured[scored]),
        **_grouped(rows, np.where(scored, predicted, 1.0), measured, scored).json_data(),
    )


@dataclass(frozen=True)
class AccuracyFlags:
    """Every option of `pddplan accuracy`, by the command's own parameter names."""

    measurements: Path | None = None
    folds: int = 0
    fold_by: str = "model"
    json_out: bool = False

    def __post_init__(self) -> None:
        if self.fold_by not in FOLD_UNITS:
            raise InputError(f"--fold-by = {self.fold_by!r}: expected one of {', '.join(FOLD_UNITS)}")

    def report(self) -> Accuracy:
        """The accuracy report of these measurements (`accuracy_report`; default: the shipped set)."""
        return accuracy_report(self.measurements)

    def cross_validated(self, report: Accuracy, progress: Callable[[str], None] | None = None) -> Accuracy:
        """`report` with the K-fold cross-validation `--folds` asks for under `cross_validation`
        (`cross_validation` of the rows the report scored); `report` itself for no folds."""
        if not self.folds:
            return report
        rows = read_measurements(Path(report.measurements))
        checked = report.model_copy()
        checked.cross_validation = cross_validation(rows, self.folds, progress, unit=self.fold_by)
        return checked
