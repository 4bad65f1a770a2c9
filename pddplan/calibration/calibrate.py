"""Fit a hardware profile's efficiency factors to measured step times.

Measurements are a CSV with columns
    model, gpu, tp, kind (prefill | decode | extend), tokens, cached, batch, context, measured_s
and optionally weight_dtype (bf16 | fp8 | fp8-block | nvfp4 | mxfp4 | int4, fp4 = nvfp4; empty = the
model's own), kv_dtype, split (fit | holdout | excluded)
and stack (the serving stack that measured the row, e.g. sglang-0.5; see `efficiency_of`),
expert_parallel (true: experts expert-parallel with data-parallel attention; tp-attention: experts
expert-parallel under tensor-parallel attention; false: tensor parallelism throughout; empty: the
default rule, EP when the instance spans scale-up domains) and
measured_kind, what the number is:
    engine_step  the engine's own time for the step (a profiler, the engine's step log, or a
                 throughput the engine reports): predicted as the step alone;
    client_ttft  a client's time to first token of a lone request: the step plus the serving
                 stack's request overhead (HTTP, tokenization, scheduling, `request_overhead_s`),
                 the only rows that overhead is fitted to;
    client_itl   a client's inter-token latency or latency / tokens: predicted as the step (the
                 per-token streaming overhead, well under a millisecond, is not modelled).
Empty: client_ttft for prefill rows, client_itl for decode rows, engine_step for extend rows.
For each row the roofline predicts the step (prefill: `batch` sequences of `tokens` new tokens on
`cached` cached ones, as one step; decode: one step of `batch` sequences at mean context `context`;
extend: `tokens` tokens on `context`). The factors minimise the sum of squared log errors
sum_i log(predicted_i / measured_i)^2 over the `fit` rows, within physical bounds.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy.optimize import least_squares

from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_model
from pddplan.perf.efficiency import DEFAULT_EFFICIENCY, efficiency_of
from pddplan.perf.priors import (
    PER_STACK_FACTORS,
    PRIOR_EFFICIENCY,
    PRIOR_OF,
    PRIORS,
    Prior,
    gpu_start,
    stack_start,
)
from pddplan.perf.roofline import Instance, step_time
from pddplan.specs.hardware import Efficiency, HardwareProfile
from pddplan.specs.model import ModelArchitecture
from pddplan.specs.precision import WEIGHT_FORMATS
from pddplan.support.loading import read_text

#: Largest value each count column may hold: a GPU count of one instance, tokens of one step, sequences
#: of one batch; beyond them a row is a typo, and an infinite one would not convert.
COLUMN_BOUNDS = {"tp": 4096, "tokens": 10_000_000, "cached": 10_000_000, "batch": 1_000_000, "context": 10_000_000}
#: A measured step or first token longer than a day is no step time.
MAX_MEASURED_S = 86_400.0
REQUIRED_COLUMNS = ("model", "gpu", "tp", "kind", "tokens", "cached", "batch", "context", "measured_s")
KINDS = ("prefill", "decode", "extend")
MEASURED_KINDS = ("engine_step", "client_ttft", "client_itl")
#: what an empty measured_kind means, per step kind
DEFAULT_MEASURED_KIND = {"prefill": "client_ttft", "decode": "client_itl", "extend": "engine_step"}
SPLITS = ("fit", "holdout", "excluded")
#: the optional expert_parallel column: its values and the layout each stands for,
#: (expert_parallel, tp_attention) as `Instance` takes them
LAYOUTS: dict[str, tuple[bool | None, bool]] = {
    "": (None, False),
    "true": (True, False),
    "false": (False, False),
    "tp-attention": (True, True),
}

#: (name, lower bound, upper bound) of each fitted factor: the plausible range its public
#: microbenchmarks support (`pddplan.perf.priors`).
PARAMETERS: tuple[tuple[str, float, float], ...] = tuple((p.name, p.low, p.high) for p in PRIORS if p.fitted)

#: Where every global fit starts, and what it is pulled towards: the priors. Fixed, so that
#: refitting is repeatable (starting from the shipped defaults would let each refit start where
#: the last one ended).
FIT_START = PRIOR_EFFICIENCY
#: How hard each level's fit is pulled to the level above (the ridge weight, see `fit_efficiency`):
#: the defaults to the kernel priors at full weight (the microbenchmarks measure the kernels the
#: priors describe); one GPU's factors to the defaults a little less (its own kernels, clocks and
#: power differ); one serving stack's to its GPU's at a third (a stack picks its own kernels:
#: FlashInfer or FA3, Triton fused MoE or DeepGEMM; early releases run them far from the best).
PRIOR_WEIGHT = 1.0
GPU_PRIOR_WEIGHT = 0.7
STACK_PRIOR_WEIGHT = 0.33


FORMAT_NAMES = ", ".join(WEIGHT_FORMATS)


@dataclass(frozen=True)
class Measurement:
    """One measured step."""

    model: str
    gpu: str
    tp: int
    kind: Literal["prefill", "decode", "extend"]
    tokens: int
    cached: int
    batch: int
    context: int
    measured_s: float
    weight_dtype: str
    kv_dtype: str
    split: str
    line: int
    expert_weight_dtype: str = ""
    stack: str = ""
    expert_parallel: bool | None = None
    measured_kind: str = ""
    tp_attention: bool = False

    @property
    def adds_request_overhead(self) -> bool:
        """Whether the measured time includes the serving stack's request overhead (client TTFT)."""
        return (self.measured_kind or DEFAULT_MEASURED_KIND[self.kind]) == "client_ttft"


def _measured_kind(row: dict[str, str], kind: str, where: str) -> str:
    """The row's measured_kind, its step kind's default when empty (module docstring)."""
    measured_kind = (row.get("measured_kind") or "").strip()
    if not measured_kind:
        return DEFAULT_MEASURED_KIND[kind]
    if measured_kind not in MEASURED_KINDS:
        raise InputError(f"{where}: measured_kind = {measured_kind!r}: expected one of {', '.join(MEASURED_KINDS)}")
    if measured_kind == "client_ttft" and kind != "prefill":
        raise InputError(f"{where}: measured_kind = client_ttft: only a prefill row is a TTFT")
    return measured_kind


def read_measurements(path: Path) -> list[Measurement]:
    """Parse and validate a measurements CSV; InputError naming the line and column on bad data."""
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    columns = reader.fieldnames or []
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; need {', '.join(REQUIRED_COLUMNS)}")
    rows = list(reader)
    out = []
    for number, row in enumerate(rows, start=2):
        short = [c for c in REQUIRED_COLUMNS if row.get(c) is None]
        if short:
            raise InputError(f"{path}: line {number}: missing value(s) for {', '.join(short)}")
        kind = row["kind"].strip()
        if kind not in KINDS:
            raise InputError(f"{path}: line {number}: kind = {kind!r}: expected one of {', '.join(KINDS)}")
        values: dict[str, Any] = {}
        for column, most in COLUMN_BOUNDS.items():
            text = (row[column] or "0").strip()
            try:
                figure = float(text)
            except ValueError:
                raise InputError(f"{path}: line {number}: {column} = {text!r}: expected a whole number") from None
            if not 0 <= figure <= most:  # NaN fails too
                raise InputError(f"{path}: line {number}: {column} = {text}: expected 0 to {most:,}")
            values[column] = int(figure)
        try:
            measured = float(row["measured_s"])
        except (TypeError, ValueError):
            raise InputError(f"{path}: line {number}: measured_s = {row['measured_s']!r}: expected seconds") from None
        if not 0 < measured <= MAX_MEASURED_S:
            raise InputError(f"{path}: line {number}: measured_s = {measured}: expected above 0, at most a day")
        if values["tp"] < 1:
            raise InputError(f"{path}: line {number}: tp = {values['tp']}: must be >= 1")
        layout = (row.get("expert_parallel") or "").strip().lower()
        if layout not in LAYOUTS:
            raise InputError(
                f"{path}: line {number}: expert_parallel = {layout!r}: expected true, false, tp-attention or "
                "empty (the default rule)"
            )
        measured_kind = _measured_kind(row, kind, f"{path}: line {number}")
        split = (row.get("split") or "fit").strip() or "fit"
        if split not in SPLITS:
            raise InputError(f"{path}: line {number}: split = {split!r}: expected one of {', '.join(SPLITS)}")
        out.append(
            Measurement(
                model=row["model"].strip(),
                gpu=row["gpu"].strip(),
                tp=values["tp"],
                kind=kind,  # type: ignore[arg-type]
                tokens=max(values["tokens"], 1),
                cached=values["cached"],
                batch=max(values["batch"], 1),
                context=values["context"],
                measured_s=measured,
                weight_dtype=(row.get("weight_dtype") or "").strip(),
                expert_weight_dtype=(row.get("expert_weight_dtype") or "").strip(),
                kv_dtype=(row.get("kv_dtype") or "").strip(),
                split=split,
                line=number,
                stack=(row.get("stack") or "").strip(),
                expert_parallel=LAYOUTS[layout][0],
                tp_attention=LAYOUTS[layout][1],
                measured_kind=measured_kind,
            )
        )
    _check_names(out, path)
    return out


def _check_names(rows: list[Measurement], path: Path) -> None:
    """Every row's GPU, model and weight dtype exist; InputError naming the file and the first line
    that uses a bad one (not "unknown GPU" later, with no file or line)."""
    checked: set[tuple[str, str]] = set()
    for m in rows:
        named = (("gpu", m.gpu), ("model", m.model), ("weight_dtype", m.weight_dtype))
        for column, value in (*named, ("expert_weight_dtype", m.expert_weight_dtype)):
            if (column, value) in checked:
                continue
            checked.add((column, value))
            try:
                if column == "gpu":
                    load_hardware(value)
                elif column == "model":
                    load_model(value)
                elif value and value not in WEIGHT_FORMATS:
                    raise InputError(f"expected one of {FORMAT_NAMES}")
            except InputError as exc:
                raise InputError(f"{path}: line {m.line}: {column} = {value!r}: {exc}") from None


#: models by (name, weight format, expert format, KV dtype), as the rows name them
RowModels = dict[tuple[str, str, str, str], ModelArchitecture]


def _model_for(m: Measurement, cache: RowModels) -> ModelArchitecture:
    """The row's model at the row's weight formats: `weight_dtype` for every weight, then
    `expert_weight_dtype` for the routed experts where the row sets it."""
    key = (m.model, m.weight_dtype, m.expert_weight_dtype, m.kv_dtype)
    if key not in cache:
        model = load_model(m.model, m.kv_dtype or None)  # type: ignore[arg-type]
        for column, value in (("weight_dtype", m.weight_dtype), ("expert_weight_dtype", m.expert_weight_dtype)):
            if value and value not in WEIGHT_FORMATS:  # read_measurements checked the file's rows
                raise InputError(f"line {m.line}: {column} = {value!r}: expected one of {FORMAT_NAMES}")
        if m.weight_dtype:
            model = model.model_copy(update={"weight_dtype": m.weight_dtype, "expert_weight_dtype": None})
        if m.expert_weight_dtype:
            model = model.model_copy(update={"expert_weight_dtype": m.expert_weight_dtype})
        cache[key] = model
    return cache[key]


def predict(
    rows: Iterable[Measurement],
    efficiency: Efficiency | None = None,
    hardware: dict[str, HardwareProfile] | None = None,
    by_stack: bool = False,
    models: RowModels | None = None,
) -> np.ndarray:
    """Predicted step seconds for each row: with `efficiency` for every GPU, or each GPU's own
    factors (`by_stack`: those of the row's stack where the GPU's profile holds them). `models`:
    the rows' models already resolved (a fit predicts the same rows hundreds of times), else
    resolved here. Rows of one instance and step kind are predicted in one vectorized step."""
    models = {} if models is None else models
    profiles = dict(hardware or {})
    rows = list(rows)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, m in enumerate(rows):
        if m.gpu not in profiles:
            profiles[m.gpu] = load_hardware(m.gpu)
        stack = m.stack if by_stack and m.stack in profiles[m.gpu].stack_efficiency else None
        key = (
            m.gpu,
            (m.model, m.weight_dtype, m.expert_weight_dtype, m.kv_dtype),
            m.tp,
            m.expert_parallel,
            stack,
            m.tp_attention,
            m.kind,
            m.adds_request_overhead,
        )
        groups.setdefault(key, []).append(index)
    out = np.empty(len(rows))
    for (gpu, _, tp, expert_parallel, stack, tp_attention, kind, overhead), members in groups.items():
        first = rows[members[0]]
        instance = Instance(
            _model_for(first, models),
            profiles[gpu],
            tp,
            expert_parallel,
            efficiency,
            stack=stack,
            tp_attention=tp_attention,
        )

        def column(name: str, members: list[int] = members) -> np.ndarray:
            return np.array([getattr(rows[i], name) for i in members], dtype=np.float64)

        if kind == "prefill":
            seconds = step_time(instance, column("tokens"), column("cached"), column("batch")).total_s
            if overhead:
                seconds = seconds + instance.efficiency.request_overhead_s
        elif kind == "decode":
            seconds = step_time(instance, 1.0, column("context"), column("batch"), decode=True).total_s
        else:
            seconds = step_time(instance, column("tokens"), column("context"), 1.0).total_s
        out[members] = seconds
    return out


@dataclass(frozen=True)
class ErrorSummary:
    """Absolute relative errors |predicted / measured - 1|, and the root-mean-square log error
    sqrt(mean(log(predicted / measured)^2)), the quantity a fit minimises (a fit never raises it
    on its own rows; it may raise the median)."""

    count: int
    median: float
    worst: float
    mean: float
    rms_log: float = math.nan

    @staticmethod
    def of(predicted: np.ndarray, measured: np.ndarray) -> ErrorSummary:
        if len(measured) == 0:
            return ErrorSummary(0, math.nan, math.nan, math.nan)
        errors = np.abs(predicted / measured - 1.0)
        rms_log = float(np.sqrt(np.mean(np.log(predicted / measured) ** 2)))
        return ErrorSummary(len(errors), float(np.median(errors)), float(errors.max()), float(errors.mean()), rms_log)


def held_out_note(held_out: ErrorSummary) -> str:
    """What a fit's `source` says of its accuracy on the rows kept out of it, so every reader of
    the factors (`estimate`, `hardware show`) sees how far to trust them."""
    if held_out.count == 0:
        return "; no held-out rows to check it"
    rows = "row" if held_out.count == 1 else "rows"
    return (
        f"; on its {held_out.count} held-out {rows}: median |error| {held_out.median:.0%}, worst {held_out.worst:.0%}"
    )


@dataclass(frozen=True)
class CalibrationResult:
    """Fitted factors and errors before and after, on the fit and holdout rows."""

    efficiency: Efficiency
    before_fit: ErrorSummary
    after_fit: ErrorSummary
    before_holdout: ErrorSummary
    after_holdout: ErrorSummary
    rows: list[Measurement]
    predicted_before: np.ndarray
    predicted_after: np.ndarray


#: factors fitted on a log scale (their ranges span orders of magnitude)
LOG_FACTORS = frozenset(p.name for p in PRIORS if p.log)
BOUND_TOLERANCE = 0.01  # a factor within 1% of its range (log range for the log-encoded ones) of a bound


def factors_on_bounds(efficiency: Efficiency, fixed: Iterable[str] = ()) -> list[tuple[str, float, str]]:
    """The fitted factors that sit on a bound of PARAMETERS: (name, value, "lower" or "upper").

    A factor on a bound means the model's structure, not the data, limits the fit (the fit wanted
    to go further than physics allows): `calibrate` warns about each."""
    frozen = set(fixed)
    out = []
    for name, low, high in PARAMETERS:
        if name in frozen:
            continue
        value = float(getattr(efficiency, name))
        logs = name in LOG_FACTORS
        lo, hi, v = (math.log(low), math.log(high), math.log(value)) if logs else (low, high, value)
        margin = BOUND_TOLERANCE * (hi - lo)
        if v <= lo + margin:
            out.append((name, value, "lower"))
        elif v >= hi - margin:
            out.append((name, value, "upper"))
    return out


def ridge_spread(prior: Prior, stack_level: bool) -> float:
    """The ridge spread of one factor: its stack-level spread in a stack's fit, if it has one."""
    return prior.stack_spread if stack_level and prior.stack_spread is not None else prior.spread


def fit_efficiency(
    rows: list[Measurement],
    start: Efficiency = DEFAULT_EFFICIENCY,
    source: str = "calibrated",
    fixed: Iterable[str] = (),
    prior_weight: float = 0.0,
    min_fit_rows: int = 3,
    stack_level: bool = False,
) -> CalibrationResult:
    """Least-squares fit of the efficiency factors on the rows whose split is `fit`.

    With `prior_weight` > 0 each factor is also pulled towards its `start` value, a ridge term
    w * (x - start) / spread on the encoded factor with the spread of its public figures
    (`pddplan.perf.priors`): sum_i log(pred_i / meas_i)^2 + sum_j (w (x_j - start_j) / spread_j)^2.
    A few rows then cannot drag a well-measured kernel factor far from its microbenchmarks, and a
    stack with a single fit row (`min_fit_rows` 1) can be calibrated at all. A `stack_level` fit
    (one serving stack's factors around its GPU's) uses each factor's `stack_spread` where it has one.
    """

    rows = [m for m in rows if m.split in ("fit", "holdout")]
    fit_rows = [m for m in rows if m.split == "fit"]
    if len(fit_rows) < min_fit_rows:
        raise InputError(f"calibration needs at least {min_fit_rows} fit rows, got {len(fit_rows)}")
    measured_fit = np.array([m.measured_s for m in fit_rows])
    hardware = {gpu: load_hardware(gpu) for gpu in {m.gpu for m in rows}}
    frozen = set(fixed)
    free = [(name, low, high) for name, low, high in PARAMETERS if name not in frozen]
    logs = LOG_FACTORS

    def to_efficiency(vector: np.ndarray) -> Efficiency:
        values = start.model_dump()
        for (name, _, _), value in zip(free, vector, strict=True):
            values[name] = float(math.exp(value)) if name in logs else float(value)
        values["source"] = source
        return Efficiency(**values)

    def encode(name: str, value: float, low: float, high: float) -> float:
        value = min(max(value, low), high)
        return math.log(value) if name in logs else value

    x0 = np.array([encode(name, getattr(start, name), low, high) for name, low, high in free])
    lower = np.array([math.log(low) if name in logs else low for name, low, _ in free])
    upper = np.array([math.log(high) if name in logs else high for name, _, high in free])

    spread = np.array([ridge_spread(PRIOR_OF[name], stack_level) for name, _, _ in free])

    models: RowModels = {}  # resolved once, not at each of the solver's evaluations

    def residuals(vector: np.ndarray) -> np.ndarray:
        predicted = predict(fit_rows, to_efficiency(vector), hardware, models=models)
        errors = np.log(predicted / measured_fit)
        if prior_weight <= 0:
            return errors
        return np.concatenate([errors, prior_weight * (vector - x0) / spread])

    solution = least_squares(residuals, x0, bounds=(lower, upper), x_scale="jac", max_nfev=400)
    fitted = to_efficiency(solution.x)
    measured_all = np.array([m.measured_s for m in rows])
    before = predict(rows, start, hardware, models=models)
    after = predict(rows, fitted, hardware, models=models)
    is_fit = np.array([m.split == "fit" for m in rows])
    after_holdout = ErrorSummary.of(after[~is_fit], measured_all[~is_fit])
    return CalibrationResult(
        efficiency=fitted.model_copy(update={"source": source + held_out_note(after_holdout)}),
        before_fit=ErrorSummary.of(before[is_fit], measured_all[is_fit]),
        after_fit=ErrorSummary.of(after[is_fit], measured_all[is_fit]),
        before_holdout=ErrorSummary.of(before[~is_fit], measured_all[~is_fit]),
        after_holdout=after_holdout,
        rows=rows,
        predicted_before=before,
        predicted_after=after,
    )


def fit_gpu_efficiency(rows: list[Measurement], start: Efficiency, source: str) -> CalibrationResult:
    """One GPU's stack-agnostic factors: its rows, pulled towards `start` with `GPU_PRIOR_WEIGHT`;
    the per-stack software costs keep their values."""
    return fit_efficiency(rows, start, source, fixed=PER_STACK_FACTORS, prior_weight=GPU_PRIOR_WEIGHT)


def fit_stack_efficiency(
    rows: list[Measurement], gpu: str, stack: str, start: Efficiency, source: str
) -> CalibrationResult:
    """One serving stack's factors on one GPU: its rows (one is enough), pulled with
    `STACK_PRIOR_WEIGHT` and each factor's stack-level spread towards the GPU's factors `start`,
    where the stack has public priors of its own (`STACK_PRIORS`) towards those."""
    first = stack_start(gpu, stack, start)
    return fit_efficiency(rows, first, source, prior_weight=STACK_PRIOR_WEIGHT, min_fit_rows=1, stack_level=True)


def calibrate_profile(
    measurements: Path, gpu: str, start: Efficiency | None = None, stack: str | None = None
) -> tuple[HardwareProfile, CalibrationResult]:
    """Fit `gpu`'s factors to its rows of `measurements`; return the calibrated profile and the fit.

    The fit starts from the shipped defaults with the GPU's own kernel priors (`gpu_start`) and is
    pulled towards them (`GPU_PRIOR_WEIGHT`), as `--all --write-catalog` fits it, so a GPU with few
    rows moves only as far as its rows demand. With `stack`, only that stack's rows
    count; the fit starts from (and is pulled towards) the profile's own factors and lands in
    `stack_efficiency`.
    """
    return calibrate_rows(read_measurements(measurements), gpu, data_tag(measurements), str(measurements), start, stack)


def calibrate_rows(
    all_rows: list[Measurement],
    gpu: str,
    tag: str,
    where: str,
    start: Efficiency | None = None,
    stack: str | None = None,
) -> tuple[HardwareProfile, CalibrationResult]:
    """`calibrate_profile` on rows already read (`tag` names their data in the fit's source line,
    `where` in errors)."""
    profile = load_hardware(gpu)
    rows = [m for m in all_rows if m.gpu in (gpu, profile.name)]
    if not rows:
        raise InputError(f"{where}: no rows for gpu '{profile.name}'")
    rows = [Measurement(**{**m.__dict__, "gpu": profile.name}) if m.gpu != profile.name else m for m in rows]
    if stack is not None:
        rows = [m for m in rows if m.stack == stack]
        if not rows:
            raise InputError(f"{where}: no rows for gpu '{profile.name}' with stack '{stack}'")
    what = "rows" if stack is None else f"rows of stack {stack} in"
    source = (
        f"calibrated: fitted by `pddplan calibrate` to {sum(m.split == 'fit' for m in rows)} {what} "
        f"{'of ' if stack is None else ''}{tag}"
    )
    if stack is None:
        first = start or gpu_start(profile.name, DEFAULT_EFFICIENCY)
        result = fit_gpu_efficiency(rows, first, source)
        return profile.model_copy(update={"efficiency": result.efficiency}), result
    base = start or efficiency_of(profile)
    result = fit_stack_efficiency(rows, profile.name, stack, base, source)
    stacks = {**profile.stack_efficiency, stack: result.efficiency}
    return profile.model_copy(update={"stack_efficiency": stacks}), result


def efficiency_yaml(efficiency: Efficiency, key: str = "efficiency", indent: str = "") -> str:
    """The `efficiency:` block of a hardware profile (or any block named `key`), as YAML text."""
    lines = [f"{indent}{key}:"]
    for name, value in efficiency.model_dump().items():
        if name == "source":
            lines.append(f"{indent}  source: {json.dumps(value)}")
        else:
            text = f"{float(value):.6g}"
            if "e" in text and "." not in text.split("e")[0]:
                text = text.replace("e", ".0e")  # YAML 1.1 reads 1e-06 as a string, 1.0e-06 as a float
            lines.append(f"{indent}  {name}: {text}")
    return "\n".join(lines) + "\n"


def stack_efficiency_yaml(stacks: dict[str, Efficiency]) -> str:
    """The `stack_efficiency:` block of a hardware profile, stacks in name order."""
    if not stacks:
        return ""
    body = "".join(efficiency_yaml(stacks[name], name, "  ") for name in sorted(stacks))
    return "stack_efficiency:\n" + body


def _without_block(text: str, key: str) -> str:
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.startswith(f"{key}:"):
            skipping = True
            continue
        if skipping and line and not line[0].isspace() and not line.startswith("#"):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept).rstrip() + "\n"


def with_efficiency_block(
    profile_text: str, efficiency: Efficiency | None, stacks: dict[str, Efficiency] | None = None
) -> str:
    """Profile YAML text with its `efficiency:` (and, given `stacks`, `stack_efficiency:`) block
    replaced or added at the end, the rest kept as written."""
    text = profile_text
    if efficiency is not None:
        text = _without_block(text, "efficiency")
    if stacks is not None:
        text = _without_block(text, "stack_efficiency")
    if efficiency is not None:
        text += efficiency_yaml(efficiency)
    if stacks is not None:
        text += stack_efficiency_yaml(stacks)
    return text


def accuracy_rows(rows: list[Measurement], by_stack: bool = False) -> tuple[np.ndarray, list[str]]:
    """Predictions with the shipped factors and where each row's factors came from: its stack's
    block of the GPU's profile ("stack", with `by_stack`), the GPU's own block ("profile"), or the
    defaults ("default")."""
    hardware = {gpu: load_hardware(gpu) for gpu in {m.gpu for m in rows}}
    predicted = predict(rows, None, hardware, by_stack)
    origin = [
        "stack"
        if by_stack and m.stack in hardware[m.gpu].stack_efficiency
        else ("profile" if hardware[m.gpu].efficiency is not None else "default")
        for m in rows
    ]
    return predicted, origin


def fit_date() -> str:
    """The date a fit is stamped with: SOURCE_DATE_EPOCH's (the reproducible-builds convention,
    so that a refit can repeat byte for byte), else today's."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        try:
            return datetime.fromtimestamp(int(epoch), tz=UTC).date().isoformat()
        except (ValueError, OverflowError, OSError):
            raise InputError(f"SOURCE_DATE_EPOCH = {epoch!r}: expected whole seconds since 1970") from None
    return date.today().isoformat()


def data_tag(*files: Path) -> str:
    """`NAME (sha256 0123456789ab) on DATE`: which data a fit used, exactly, and when it ran (the
    digest covers every file, in order)."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return f"{', '.join(p.name for p in files)} (sha256 {digest.hexdigest()[:12]}) on {fit_date()}"


def fit_all(measurements: Path) -> CalibrationResult:
    """One set of factors fitted to every GPU's `fit` rows (the shipped defaults)."""
    rows = read_measurements(measurements)
    source = (
        f"calibrated: fitted by `pddplan calibrate --all` to {sum(m.split == 'fit' for m in rows)} rows of "
        f"{data_tag(measurements)}"
    )
    return fit_efficiency(rows, FIT_START, source, fixed=PER_STACK_FACTORS, prior_weight=PRIOR_WEIGHT)
