"""`pddplan accuracy`: how far the shipped step-time model is from measured points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pddplan.catalog import shipped_measurements
from pddplan.errors import InputError
from pddplan.perf.calibrate import ErrorSummary, accuracy_rows, read_measurements


def accuracy_report(measurements: Path | None = None) -> dict[str, Any]:
    """Per-row errors and median/worst absolute error on the fit and held-out rows.

    Rows marked `excluded` (documented in tests/data/measurements.md) are listed but not scored.
    """
    path = measurements or shipped_measurements()
    if measurements is None and not path.exists():
        raise InputError(f"{path}: the shipped measurements are missing from this install; pass a measurements CSV")
    rows = read_measurements(path)
    scored = [m for m in rows if m.split in ("fit", "holdout")]
    predicted, origin = accuracy_rows(scored)
    measured = np.array([m.measured_s for m in scored])
    splits = np.array([m.split for m in scored])
    summary = {}
    for split in ("fit", "holdout"):
        mask = splits == split
        stats = ErrorSummary.of(predicted[mask], measured[mask])
        summary[split] = {
            "count": stats.count,
            "median_abs_error": stats.median,
            "worst_abs_error": stats.worst,
            "mean_abs_error": stats.mean,
        }
    by_gpu: dict[str, dict[str, Any]] = {}
    for gpu in sorted({m.gpu for m in scored}):
        mask = (np.array([m.gpu for m in scored]) == gpu) & (splits == "holdout")
        stats = ErrorSummary.of(predicted[mask], measured[mask])
        by_gpu[gpu] = {"holdout_count": stats.count, "median_abs_error": stats.median, "worst_abs_error": stats.worst}
    points = [
        {
            "line": m.line,
            "model": m.model,
            "gpu": m.gpu,
            "tp": m.tp,
            "kind": m.kind,
            "tokens": m.tokens,
            "cached": m.cached,
            "batch": m.batch,
            "context": m.context,
            "measured_s": m.measured_s,
            "predicted_s": float(p),
            "error": float(p / m.measured_s - 1.0),
            "split": m.split,
            "factors": o,
        }
        for m, p, o in zip(scored, predicted, origin, strict=True)
    ]
    return {
        "measurements": str(path),
        "rows": len(rows),
        "excluded": sum(m.split == "excluded" for m in rows),
        "summary": summary,
        "holdout_by_gpu": by_gpu,
        "points": points,
    }
