"""`curve_shape` names what a curve does, from its data (the bathtub's findings use it)."""

from __future__ import annotations

import numpy as np
import pytest

from pddplan.analyses.bathtub import BathtubResult, findings
from pddplan.inputs import load_workload
from pddplan.support.curve_shape import curve_shape, turns

X = np.linspace(0.0, 1.0, 11)


@pytest.mark.parametrize(
    ("values", "kind", "extremum", "dips"),
    [
        (np.linspace(1.0, 2.0, 11), "rising", None, ()),
        (np.linspace(2.0, 1.0, 11), "falling", None, ()),
        (np.full(11, 1.0) + np.linspace(0, 0.02, 11), "flat", None, ()),
        # the fixed-plan curve: 1.38 at 0%, 1.30 at 10%, 1.59 at 70%, 0.49 at 100%
        (np.array([1.38, 1.30, 1.35, 1.4, 1.45, 1.5, 1.55, 1.59, 1.2, 0.9, 0.49]), "hump", 0.7, (0.1,)),
        (np.array([2, 1.5, 1.2, 1, 1.1, 1.3, 1.5, 1.7, 1.9, 2.1, 2.2]), "valley", 0.3, ()),
        (np.array([1, 1.2, 1.1, 1.3, 1.2, 1.4, 1.3, 1.5, 1.4, 1.6, 1.5]), "sawtooth", None, (0.2, 0.4, 0.6, 0.8)),
        # rising with one 2% dip at 50%
        (np.array([1, 1.1, 1.2, 1.3, 1.4, 1.37, 1.5, 1.6, 1.7, 1.8, 1.9]), "rising", None, (0.5,)),
    ],
)
def test_known_shapes(values: np.ndarray, kind: str, extremum: float | None, dips: tuple[float, ...]) -> None:
    shape = curve_shape(X, values)
    assert shape.kind == kind
    assert shape.extremum_x == (pytest.approx(extremum) if extremum is not None else None)
    assert shape.dips_x == pytest.approx(dips)
    assert kind.split()[0] in shape.words or (kind == "hump" and "a hump" in shape.words)


def test_turns_by_hand() -> None:
    """Moves up, up, down, up: two turns; steps under 0.2% are not moves."""
    assert turns(np.array([1.0, 1.1, 1.2, 1.1, 1.2])) == 2
    assert turns(np.array([1.0, 1.001, 1.0, 1.001])) == 0


def test_nan_points_are_left_out_and_too_few_say_so() -> None:
    values = np.array([np.nan, 1.0, 2.0, 3.0, np.nan])
    assert curve_shape(np.linspace(0, 1, 5), values).kind == "rising"
    assert curve_shape(np.linspace(0, 1, 5), np.array([np.nan, 1.0, np.nan, 2.0, np.nan])).kind == "too few points"


def _result(curves: dict[str, np.ndarray]) -> BathtubResult:
    names = list(curves)
    figures = {
        arch: {
            "revenue_per_cost": curve,
            "prefill_tokens_per_gpu_s_alone": np.ones(11),
            "prefill_tokens_per_gpu_s": np.ones(11),
            "bcr": curve,
        }
        for arch, curve in curves.items()
    }
    return BathtubResult(
        workload=load_workload("pdd-agent-64k"),
        mode="shift",
        hits=X,
        architectures=names,
        figures=figures,
        plans={a: [None] * 11 for a in names},
        tail_chunks=np.zeros(11),
        chunk_tokens=8192,
    )


def test_findings_name_the_shape_the_data_has() -> None:
    """A hump is called a hump, and the no-valley note says so instead of 'moves one way'."""
    hump = np.array([1.38, 1.30, 1.35, 1.4, 1.45, 1.5, 1.55, 1.59, 1.2, 0.9, 0.49])
    f = findings(_result({"pd-intra": hump}), 64512)
    assert f["architectures"]["pd-intra"]["shape"] == "hump"
    assert "hump" in f["no_valley_note"] and "moves one way" not in f["no_valley_note"]
    monotone = findings(_result({"pd-intra": np.linspace(2, 1, 11)}), 64512)
    assert "falling across the hit rate" in monotone["no_valley_note"]
    valley = findings(_result({"pd-intra": np.array([2, 1.5, 1.2, 1, 1.1, 1.3, 1.5, 1.7, 1.9, 2.1, 2.2])}), 64512)
    assert valley["architectures"]["pd-intra"]["valley"] and valley["no_valley_note"] is None
