"""How the decision of `pddplan optimize` moves: the same workload re-optimized under a few variations.

One line of the optimizer ("PDD is 33% cheaper than intra-datacenter PD") can flip with small
changes of its inputs: the request rate, the price of the GPU that only PDD decodes on, or the
instance widths the search may use. `robustness` re-optimizes the workload under each of these
(same options, verification included) and reports, per variation, the best architecture, PDD's
cost and BCR, the cheapest feasible baseline and PDD's cost change against it; `verdict` says in
one sentence whether the sign of PDD's gain over the best baseline flips.

Every variation is a copy of the workload (`model_copy`), never an edited file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pddplan import architectures
from pddplan.evaluate.capacity_view import capacity_view
from pddplan.inputs.input_set import InputSet, load_input_set
from pddplan.optimize.candidates import tp_degrees
from pddplan.optimize.options import OptimizeOptions
from pddplan.optimize.outputs import Robustness, RobustnessRow
from pddplan.optimize.run import Headline, OptimizeReport, headline, optimize_variants
from pddplan.optimize.search import ArchitectureResult
from pddplan.scenarios.variants import extend_widths, scale_gpu_prices, scale_rate, with_serving
from pddplan.specs.plan import ArchitectureName
from pddplan.specs.workload import Workload

RATE_FACTORS = (0.5, 2.0)
PRICE_FACTORS = (0.9, 1.1)
EXTRA_WIDTHS = 2  # powers of two added above the widest instance width
RETENTION_FACTORS = (0.5, 2.0)  # the caches' retention (drc_retention_s), halved and doubled
#: the decode batch cap tried when the workload sets none: vLLM's --max-num-seqs default
ENGINE_DEFAULT_DECODE_CAP = 256
# Re-optimizations `robustness` runs at most (the nominal run is reused): two rates, two prices,
# widths, the two cache placements the workload does not use, two retentions, one cap.
RUNS = len(RATE_FACTORS) + len(PRICE_FACTORS) + 1 + 2 + len(RETENTION_FACTORS) + 1
EQUAL = 1e-9  # a relative cost change smaller than this counts as a tie


@dataclass(frozen=True)
class Variation:
    """One variant of the workload to re-optimize."""

    label: str  # as the table shows it: 'rate x2', 'gpu-b price +10%', 'tp up to 64'
    kind: str  # nominal, rate, price, widths, cache, retention, cap
    workload: Workload
    options: OptimizeOptions
    change: dict[str, Any] = field(default_factory=dict)  # what was changed, for the JSON


@dataclass
class RobustnessReport:
    """One row per variation (nominal first), the verdict, and notes on variations skipped."""

    rows: list[RobustnessRow]
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return verdict(self.rows)

    @property
    def reasons(self) -> list[str]:
        return reasons(self.rows)

    def to_output(self) -> Robustness:
        """The typed result `optimize --robustness --json` prints under `robustness`."""
        return Robustness(rows=self.rows, verdict=self.verdict, reasons=self.reasons, notes=self.notes)

    @classmethod
    def from_output(cls, data: Robustness) -> RobustnessReport:
        """The report `to_output` gave (the verdict is recomputed from the rows)."""
        return cls(rows=list(data.rows), notes=list(data.notes))


# -- the variations -------------------------------------------------------------------------------
def default_widths(inputs: InputSet) -> list[int]:
    """The instance widths the search tries: the workload's `tp_options`, else the union over the
    offered GPU types of the default (`candidates.tp_degrees`)."""
    workload = inputs.workload
    if workload.deployment.tp_options:
        return sorted(set(workload.deployment.tp_options))
    widths = {tp for gpu in inputs.hardware for tp in tp_degrees(workload, inputs.hardware_for(gpu).scale_up_domain)}
    return sorted(widths)


def wider(widths: Sequence[int], extra: int = EXTRA_WIDTHS) -> list[int]:
    """`widths` and the next `extra` powers of two above their maximum: [8, 16] -> [8, 16, 32, 64]."""
    top = 1 << (max(widths) - 1).bit_length()  # the least power of two >= the maximum
    if top == max(widths):
        top *= 2
    return sorted(set(widths) | {top << k for k in range(extra)})


def repriced_types(report: OptimizeReport) -> list[str]:
    """The GPU types the subject's plan decodes on (role decode) that the best baseline's plan does
    not use at all; every decode type when no baseline is feasible, none when the subject is not."""
    subject = report.result(architectures.subject().name)
    if subject is None or not subject.feasible or subject.plan is None:
        return []
    decode = [spec.gpu for name, spec in subject.plan.roles().items() if name == "decode"]
    baseline = best_baseline(report)
    used = {spec.gpu for spec in baseline.plan.roles().values()} if baseline and baseline.plan else set()
    return [gpu for gpu in decode if gpu not in used]


def variations(inputs: InputSet, options: OptimizeOptions, types: Sequence[str]) -> list[Variation]:
    """The variants re-optimized after the nominal run: rate x0.5 and x2, the price of `types` -10% and
    +10% (none when `types` is empty), and the instance widths two powers of two wider.

    In `--rate` mode the target rate (`options.rate`) is scaled with the workload's rate, since it
    overrides it. The widths variant sets `tp_options`, which applies to every GPU type alike."""
    workload = inputs.workload
    out = []
    for factor in RATE_FACTORS:
        scaled = replace(options, rate=options.rate * factor) if options.rate is not None else options
        out.append(
            Variation(
                f"rate x{factor:g}",
                "rate",
                scale_rate(workload, factor),
                scaled,
                {"arrival.rate_rps": workload.arrival.rate_rps * factor},
            )
        )
    names = ", ".join(types)
    out.extend(
        Variation(
            f"{names} price {factor - 1:+.0%}",
            "price",
            scale_gpu_prices(inputs, types, factor),
            options,
            {"gpu_types": list(types), "price_factor": factor},
        )
        for factor in (PRICE_FACTORS if types else ())
    )
    widths = wider(default_widths(inputs))
    out.append(
        Variation(
            f"tp up to {max(widths)}",
            "widths",
            extend_widths(workload, widths),
            options,
            {"deployment.tp_options": widths},
        )
    )
    out.extend(cache_variations(workload, options))
    return out


PLACEMENT_LABELS = {"hbm": "caches in HBM only", "dram": "caches to host DRAM", "ssd": "caches to DRAM and SSD"}


def cache_variations(workload: Workload, options: OptimizeOptions) -> list[Variation]:
    """The cache placements the workload does not use (`serving.cache_tiers`), the caches' retention
    halved and doubled, and the decode batch cap: an engine default when the workload sets none,
    none when it sets one."""
    serving = workload.serving
    out = [
        Variation(
            PLACEMENT_LABELS[tier],
            "cache",
            with_serving(workload, cache_tiers=tier),
            options,
            {"serving.cache_tiers": tier},
        )
        for tier in ("hbm", "dram", "ssd")
        if tier != serving.cache_tiers
    ]
    for factor in RETENTION_FACTORS:
        retention = serving.drc_retention_s * factor
        out.append(
            Variation(
                f"retention {retention:g} s",
                "retention",
                with_serving(workload, drc_retention_s=retention),
                options,
                {"serving.drc_retention_s": retention},
            )
        )
    cap = None if serving.max_decode_batch is not None else ENGINE_DEFAULT_DECODE_CAP
    out.append(
        Variation(
            f"decode batch cap {cap}" if cap else "no decode batch cap",
            "cap",
            with_serving(workload, max_decode_batch=cap),
            options,
            {"serving.max_decode_batch": cap},
        )
    )
    return out


# -- the figures ----------------------------------------------------------------------------------
def best_baseline(report: OptimizeReport) -> ArchitectureResult | None:
    """The cheapest feasible baseline of the report (an ArchitectureResult), or None."""
    names = {a.name for a in architectures.baselines()}
    feasible = [r for r in report.feasible if r.name in names]
    if not feasible:
        return None
    return min(feasible, key=lambda r: headline(r).cost_usd_per_hour)


def row_of(
    report: OptimizeReport, variation: str, kind: str = "nominal", change: dict[str, Any] | None = None
) -> RobustnessRow:
    """The decision one optimize report makes."""
    subject_name = architectures.subject().name
    subject = report.result(subject_name)
    mine = headline(subject) if subject is not None and subject.feasible else None
    baseline = best_baseline(report)
    theirs = headline(baseline) if baseline is not None else None
    vs: dict[str, dict[str, Any]] = {}
    baseline_names = {a.name for a in architectures.baselines()}
    for result in report.results:
        if result.name not in baseline_names:
            continue
        other = headline(result) if result.feasible else None
        vs[result.name] = {
            "feasible": result.feasible,
            "cost_usd_per_hour": other.cost_usd_per_hour if other else None,
            "cost_change": _change(mine, other),
        }
    best = report.best
    plans, limits = _plans_and_limits(report)
    return RobustnessRow(
        variation=variation,
        kind=kind,
        best=best.name if best is not None else None,
        subject=subject_name,
        subject_feasible=mine is not None,
        subject_cost_usd_per_hour=mine.cost_usd_per_hour if mine else None,
        subject_bcr=mine.bcr if mine else None,
        best_baseline=baseline.name if baseline is not None else None,
        best_baseline_cost_usd_per_hour=theirs.cost_usd_per_hour if theirs else None,
        cost_change_vs_best_baseline=_change(mine, theirs),
        vs_baselines=vs,
        change=change or {},
        plans=plans,
        limits=limits,
    )


def _plans_and_limits(report: OptimizeReport) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Per feasible architecture: each role's instances in words, and the term that sets its capacity."""
    plans: dict[str, dict[str, str]] = {}
    limits: dict[str, dict[str, str]] = {}
    for result in report.feasible:
        if result.plan is None or result.scenario is None:
            continue
        plans[result.name] = {
            role: f"{spec.count} x {spec.gpu} TP{spec.tp}" + (f" PP{spec.pp}" if spec.pp > 1 else "")
            for role, spec in result.plan.roles().items()
        }
        if result.plan.relay_on_prefill:
            plans[result.name]["relay"] = "on the prefill instances"
        limits[result.name] = dict(capacity_view(result.scenario).limits)
    return plans, limits


def _change(mine: Headline | None, theirs: Headline | None) -> float | None:
    if mine is None or theirs is None:
        return None
    return float(mine.cost_usd_per_hour / theirs.cost_usd_per_hour - 1)


def robustness(
    workload: Workload,
    base_dir: Path | None,
    options: OptimizeOptions,
    nominal_report: OptimizeReport,
    names: Sequence[ArchitectureName] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RobustnessReport:
    """Re-optimize `workload` under each variation (at most `RUNS` runs) with the nominal run's
    options and architectures, and tabulate the decision; the nominal row is `nominal_report`'s."""
    inputs = load_input_set(workload, base_dir)
    types = repriced_types(nominal_report)
    notes = [] if types else [_no_price_note(nominal_report)]
    rows = [row_of(nominal_report, "nominal")]
    chosen = variations(inputs, options, types)
    if progress:
        progress(f"robustness: {len(chosen)} variations ({', '.join(v.label for v in chosen)})")
    reports = optimize_variants([(v.workload, v.options) for v in chosen], base_dir, names, progress)
    for variation, report in zip(chosen, reports, strict=True):
        rows.append(row_of(report, variation.label, variation.kind, variation.change))
    return RobustnessReport(rows=rows, notes=notes)


def _no_price_note(report: OptimizeReport) -> str:
    subject = report.result(architectures.subject().name)
    if subject is None or not subject.feasible:
        why = "PDD has no feasible plan at nominal"
    else:
        why = "the best baseline also uses every GPU type PDD's main decoders run on"
    return f"GPU price variations skipped: {why}"


# -- the verdict ----------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{x:+.1%}"


def _where(row: RobustnessRow) -> str:
    """'at nominal', 'at rate x2', 'with tp up to 64'."""
    return f"{'at' if row.kind in ('nominal', 'rate') else 'with'} {row.variation}"


def _side(change: float) -> str:
    if abs(change) < EQUAL:
        return "level"
    return "cheaper" if change < 0 else "dearer"


_THAN = {"cheaper": "cheaper than", "dearer": "dearer than", "level": "level with"}


def _missing(rows: Sequence[RobustnessRow]) -> list[str]:
    out = []
    for row in rows:
        if not row.subject_feasible and row.best_baseline is None:
            out.append(f"neither PDD nor any baseline is feasible {_where(row)}")
        elif not row.subject_feasible:
            out.append(f"no feasible PDD plan {_where(row)}")
        elif row.best_baseline is None:
            out.append(f"no feasible baseline {_where(row)}")
    return out


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def verdict(rows: Sequence[RobustnessRow]) -> str:
    """One sentence: whether the sign of PDD's cost change against the best baseline is the same
    under every variation (and its range), or which variations flip it; then the variations where
    PDD or every baseline had no feasible plan."""
    known = [
        row
        for row in rows
        if row.cost_change_vs_best_baseline is not None and math.isfinite(row.cost_change_vs_best_baseline)
    ]
    missing = _missing(rows)
    if not known:
        text = "no variation has both a feasible PDD plan and a feasible baseline"
        return text + (f" ({'; '.join(missing)})" if missing else "")
    sides = {_side(row.cost_change_vs_best_baseline) for row in known if row.cost_change_vs_best_baseline is not None}
    if len(sides) == 1:
        side = sides.pop()
        changes = sorted(
            (row.cost_change_vs_best_baseline for row in known if row.cost_change_vs_best_baseline is not None), key=abs
        )
        low, high = _pct(changes[0]), _pct(changes[-1])
        span = low if low == high else f"{low} to {high}"
        scope = "every variation tried" if not missing else "every variation where both are feasible"
        text = f"PDD is {_THAN[side]} the best baseline under {scope} ({span})"
    else:
        reference = next((row for row in known if row.kind == "nominal"), known[0])
        side = _side(reference.cost_change_vs_best_baseline or 0.0)
        others: dict[str, list[str]] = {}
        for row in known:
            if row is not reference and _side(row.cost_change_vs_best_baseline or 0.0) != side:
                others.setdefault(_side(row.cost_change_vs_best_baseline or 0.0), []).append(
                    f"{_where(row)} ({_pct(row.cost_change_vs_best_baseline or 0.0)})"
                )
        flips = " and ".join(f"{other} {_join(where)}" for other, where in others.items())
        text = (
            f"the sign of PDD's gain over the best baseline flips: {side} {_where(reference)} "
            f"({_pct(reference.cost_change_vs_best_baseline or 0.0)}) but {flips}"
        )
    return text + (f"; {'; '.join(missing)}" if missing else "")


def _moves(nominal: RobustnessRow, row: RobustnessRow, arch: str) -> list[str]:
    """How `arch`'s plan moved from the nominal row's, role by role, with the term that sets each
    moved role's capacity under the variation ('its MD: 1 x gpu-b TP16 -> 2 x gpu-b TP16, set by
    the radix cache beyond the tiers below HBM')."""
    before, after = nominal.plans.get(arch), row.plans.get(arch)
    if before is None and after is None:
        return []
    if after is None:
        return [f"{arch} has no feasible plan"]
    if before is None:
        return [f"{arch} becomes feasible"]
    out = []
    for role in ("prefill", "split", "relay", "decode"):
        old, new = before.get(role), after.get(role)
        if old == new:
            continue
        limit = row.limits.get(arch, {}).get(role)
        why = f", set by {limit}" if limit else ""
        out.append(f"{arch}'s {role}: {old or 'none'} -> {new or 'none'}{why}")
    return out


def reasons(rows: Sequence[RobustnessRow]) -> list[str]:
    """For each variation whose sign of PDD's gain differs from the nominal's: what moved in PDD's
    plan and in the best baseline's, role by role, and the term that binds each moved role (the
    decision changes because one of these terms does); 'nothing moved' when only prices did."""
    nominal = next((row for row in rows if row.kind == "nominal"), None)
    if nominal is None or nominal.cost_change_vs_best_baseline is None:
        return []
    side = _side(nominal.cost_change_vs_best_baseline)
    out = []
    for row in rows:
        change = row.cost_change_vs_best_baseline
        if row is nominal or change is None or _side(change) == side:
            continue
        archs = [row.subject] + ([row.best_baseline] if row.best_baseline else [])
        if nominal.best_baseline and nominal.best_baseline not in archs:
            archs.append(nominal.best_baseline)
        moved = [text for arch in archs for text in _moves(nominal, row, arch)]
        what = "; ".join(moved) if moved else "no plan moved: the prices did"
        out.append(f"{row.variation} ({_pct(change)}): {what}")
    return out
