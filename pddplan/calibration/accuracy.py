"""`pddplan accuracy`: how far the shipped step-time model is from measured points.

Every scored row is predicted twice: with the factors its GPU's profile holds for the row's
serving stack (what `pddplan estimate --stack` uses; the stack was calibrated on its `fit` rows),
and with the GPU's stack-agnostic factors (what `estimate` without `--stack` uses). Excluded rows
are predicted too and listed with their reason, but not scored. Held-out rows are also scored
apart by what they measure (engine step or client-side time) and step kind, and by model family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pddplan.calibration.calibrate import ErrorSummary, Measurement, accuracy_rows, predict, read_measurements
from pddplan.calibration.refit import refit
from pddplan.errors import InputError
from pddplan.inputs import load_model
from pddplan.specs.model import ModelArchitecture
from pddplan.support.catalog import shipped_measurements


def _summary(predicted: np.ndarray, measured: np.ndarray) -> dict[str, Any]:
    stats = ErrorSummary.of(predicted, measured)
    p90 = float(np.quantile(np.abs(predicted / measured - 1.0), 0.9)) if stats.count else None
    return {
        "count": stats.count,
        "median_abs_error": stats.median,
        "p90_abs_error": p90,
        "worst_abs_error": stats.worst,
        "mean_abs_error": stats.mean,
    }


def _point(m: Measurement, predicted: float, gpu_level: float, origin: str) -> dict[str, Any]:
    return {
        "line": m.line,
        "model": m.model,
        "gpu": m.gpu,
        "stack": m.stack,
        "tp": m.tp,
        "kind": m.kind,
        "tokens": m.tokens,
        "cached": m.cached,
        "batch": m.batch,
        "context": m.context,
        "measured_s": m.measured_s,
        "predicted_s": predicted,
        "error": predicted / m.measured_s - 1.0,
        "gpu_level_predicted_s": gpu_level,
        "gpu_level_error": gpu_level / m.measured_s - 1.0,
        "split": m.split,
        "measured_kind": m.measured_kind,
        "factors": origin,
    }


def model_family(model: ModelArchitecture) -> str:
    """The attention-and-FFN family a model's step time behaves by: MLA, MoE GQA or dense GQA."""
    if model.mla is not None:
        return "MLA"
    return "MoE GQA" if model.moe is not None else "dense GQA"


def step_kind(m: Measurement) -> str:
    """prefill, cached prefill (a prefill on cached tokens), decode or extend."""
    if m.kind == "prefill" and m.cached > 0:
        return "cached prefill"
    return m.kind


def _grouped(
    rows: list[Measurement], predicted: np.ndarray, measured: np.ndarray, scored: np.ndarray | None = None
) -> dict[str, Any]:
    """Errors of the `scored` rows (default: the held-out ones) per (engine or client measurement,
    step kind), per measurement over every step kind (`"<kind> all"`, where it has several) and per
    model family."""

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
    return {
        name: {key: _percentiles(predicted[mask], measured[mask]) for key, mask in masks.items()}
        for name, masks in groups.items()
    }


def _percentiles(predicted: np.ndarray, measured: np.ndarray) -> dict[str, Any]:
    errors = np.abs(predicted / measured - 1.0)
    return {
        "count": len(errors),
        "median_abs_error": float(np.median(errors)),
        "p90_abs_error": float(np.quantile(errors, 0.9)),
        "worst_abs_error": float(errors.max()),
    }


def accuracy_report(measurements: Path | None = None) -> dict[str, Any]:
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
    by_gpu: dict[str, dict[str, Any]] = {}
    for gpu in sorted({m.gpu for m in rows if m.split == "holdout"}):
        mask = (gpus == gpu) & (splits == "holdout")
        stats = ErrorSummary.of(predicted[mask], measured[mask])
        by_gpu[gpu] = {"holdout_count": stats.count, "median_abs_error": stats.median, "worst_abs_error": stats.worst}
    points = [_point(m, float(p), float(g), o) for m, p, g, o in zip(rows, predicted, gpu_level, origin, strict=True)]
    return {
        "measurements": str(path),
        "rows": len(rows),
        "excluded": int(np.sum(splits == "excluded")),
        "summary": summary,
        "gpu_level_summary": gpu_summary,
        "holdout_by_gpu": by_gpu,
        "holdout_groups": _grouped(rows, predicted, measured),
        "points": points,
    }


def cross_validation(
    rows: list[Measurement], folds: int = 5, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """K-fold cross-validation of the whole refit (`pddplan.calibration.refit`: defaults, per GPU, per
    stack) on the `fit` rows: fold k holds the fit rows at positions k, k + K, k + 2K, ... in file
    order; each fold is predicted by the factors refitted without it (with the most specific level
    its row has, as `accuracy` does). Held-out and excluded rows never enter. Errors are
    |predicted / measured - 1|: median, p90 and worst, overall and per group (`_grouped`)."""

    if folds < 2:
        raise InputError(f"--folds = {folds}: cross-validation needs at least 2 folds")
    fit_index = [i for i, m in enumerate(rows) if m.split == "fit"]
    if len(fit_index) < folds:
        raise InputError(f"--folds = {folds}: more folds than the {len(fit_index)} fit rows")
    predicted = np.full(len(rows), np.nan)
    for k in range(folds):
        held = set(fit_index[k::folds])
        if progress:
            progress(f"cross-validation: fold {k + 1} of {folds} ({len(held)} rows held out)")
        train = [replace(m, split="holdout") if i in held else m for i, m in enumerate(rows)]
        fit = refit(train)
        for i in sorted(held):
            m = rows[i]
            predicted[i] = float(predict([m], fit.factors(m.gpu, m.stack))[0])
    scored = ~np.isnan(predicted)
    measured = np.array([m.measured_s for m in rows])
    return {
        "folds": folds,
        "overall": _percentiles(predicted[scored], measured[scored]),
        **_grouped(rows, np.where(scored, predicted, 1.0), measured, scored),
    }


@dataclass(frozen=True)
class AccuracyFlags:
    """Every option of `pddplan accuracy`, by the command's own parameter names."""

    measurements: Path | None = None
    folds: int = 0
    json_out: bool = False

    def report(self) -> dict[str, Any]:
        """The accuracy report of these measurements (`accuracy_report`; default: the shipped set)."""
        return accuracy_report(self.measurements)

    def cross_validated(self, report: dict[str, Any], progress: Callable[[str], None] | None = None) -> dict[str, Any]:
        """`report` with the K-fold cross-validation `--folds` asks for under `cross_validation`
        (`cross_validation` of the rows the report scored); `report` itself for no folds."""
        if not self.folds:
            return report
        rows = read_measurements(Path(report["measurements"]))
        return report | {"cross_validation": cross_validation(rows, self.folds, progress)}
