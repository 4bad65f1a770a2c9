"""Input specs: hardware profiles, distributions, workloads and plans."""

from __future__ import annotations

import copy
import itertools
import math
import re
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pddplan.errors import InputError
from pddplan.inputs import load_hardware, load_hardware_catalog
from pddplan.specs.common import FREE_SOURCE_PREFIXES, Figure, Source
from pddplan.specs.distributions import (
    ARTICLE_BUCKET_EDGES,
    LOGNORMAL_BIN_EDGES,
    FixedLength,
    HistogramLength,
    HitRateDistribution,
    LognormalLength,
)
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.plan import Plan
from pddplan.specs.workload import Workload
from pddplan.support import catalog
from pddplan.support.loading import read_data, validate

ROOT = Path(__file__).resolve().parent.parent
DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


def error(model: type, data: Any, source: str = "in.yaml") -> str:
    with pytest.raises(InputError) as info:
        validate(model, data, source)
    text = str(info.value)
    assert "\n" not in text
    return text


# == hardware ====================================================================================
PROFILE_NAMES = list(catalog.entries("hardware_profiles"))


def test_there_are_built_in_profiles() -> None:
    assert {"h100-sxm", "h200", "h20", "h800", "gpu-a", "gpu-b", "b200", "mi300x"} <= set(PROFILE_NAMES)
    assert set(load_hardware_catalog()) == set(PROFILE_NAMES)


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_built_in_profile_loads_and_cites_its_sources(name: str) -> None:
    profile = load_hardware(name)
    assert profile.name == name
    figures = profile.figures()
    # the four dimensions, power and the price basis are always there
    for path in (
        "compute.bf16_dense_tflops",
        "memory.hbm_gb",
        "memory.hbm_tb_per_s",
        "interconnect.scale_up_gb_per_s",
        "interconnect.scale_up_domain",
        "interconnect.nic_gbps",
        "power.tdp_w",
    ):
        assert path in figures, f"{name}: {path} missing"
        value = figures[path].value
        assert value is not None and value > 0, f"{name}: {path}"
    for path, figure in figures.items():
        if figure.value is None:
            assert figure.source.startswith("unknown:"), f"{name}: {path}"
        if figure.source.startswith(FREE_SOURCE_PREFIXES):
            continue
        for key in figure.source.split(","):
            assert key.strip() in profile.sources, f"{name}: {path} cites '{key.strip()}'"
        if figure.as_of is not None:
            assert DATE.match(figure.as_of)
    for key, source in profile.sources.items():
        assert DATE.match(source.accessed), f"{name}: sources.{key}.accessed"
        assert source.title
    # the dense FP8 peak is at least the BF16 one where the chip has FP8
    fp8 = profile.compute.fp8_dense_tflops
    if fp8 is not None and fp8.value is not None:
        assert fp8.value >= figures["compute.bf16_dense_tflops"].value  # type: ignore[operator]


def test_h100_si_accessors() -> None:
    p = load_hardware("h100-sxm")
    assert p.hbm_bytes == 80e9
    assert p.hbm_bytes_per_s == pytest.approx(3.35e12)
    assert p.scale_up_bytes_per_s == 450e9
    assert p.scale_up_domain == 8
    assert p.nic_bytes_per_s == 400e9 / 8
    assert p.tdp_w == 700
    assert p.peak_flops_per_s("bf16") == pytest.approx(989.4e12)
    assert p.peak_flops_per_s("fp8") == pytest.approx(1978.9e12)
    # H100 has no FP4: the next wider dtype is used
    assert p.compute.fp4_dense_tflops is None
    assert p.peak_flops_per_s("fp4") == pytest.approx(1978.9e12)


def test_rental_cost() -> None:
    assert load_hardware("h100-sxm").cost_usd_per_gpu_hour("rental") == 1.370
    assert load_hardware("gpu-b").cost_usd_per_gpu_hour() == 1.7125


def test_purchase_cost_formula_h100() -> None:
    # purchase / (years * 8760 h) + tdp_kw * pue * $/kWh
    expected = 27500 / (4 * 8760) + 0.700 * 1.3 * 0.08
    assert expected == pytest.approx(0.857617, abs=1e-6)
    assert load_hardware("h100-sxm").cost_usd_per_gpu_hour("purchase") == pytest.approx(expected, rel=1e-12)


def test_purchase_cost_formula_gpu_b() -> None:
    expected = 25000 / (4 * 8760) + 0.700 * 1.3 * 0.08
    assert load_hardware("gpu-b").cost_usd_per_gpu_hour("purchase") == pytest.approx(expected, rel=1e-12)


def test_purchase_cost_formula_with_own_numbers() -> None:
    data = copy.deepcopy(read_data(ROOT / "hardware_profiles" / "h100-sxm.yaml"))
    data["price"] = {
        "purchase_usd_per_gpu": {"value": 30000, "source": "user: test"},
        "amortization_years": {"value": 5, "source": "user: test"},
        "power_usd_per_kwh": {"value": 0.10, "source": "user: test"},
        "pue": {"value": 1.5, "source": "user: test"},
    }
    data["power"]["tdp_w"] = {"value": 1000, "source": "user: test"}
    profile = validate(HardwareProfile, data, "h.yaml")
    # 30000 / 43800 = 0.684931...; 1.0 kW * 1.5 * 0.10 = 0.15
    assert profile.cost_usd_per_gpu_hour("purchase") == pytest.approx(30000 / (5 * 8760) + 1.0 * 1.5 * 0.10)
    assert profile.cost_usd_per_gpu_hour("purchase") == pytest.approx(0.834931507, rel=1e-9)
    with pytest.raises(InputError) as info:
        profile.cost_usd_per_gpu_hour("rental")
    assert str(info.value) == (
        "hardware 'h100-sxm': price.rental_usd_per_gpu_hour is unknown (not set); "
        "set it in the profile before using this GPU"
    )


def test_unknown_price_is_refused_with_its_source() -> None:
    profile = load_hardware("gpu-a")
    assert profile.price.purchase_usd_per_gpu is not None
    assert profile.price.purchase_usd_per_gpu.value is None
    with pytest.raises(InputError) as info:
        profile.cost_usd_per_gpu_hour("purchase")
    assert str(info.value) == (
        "hardware 'gpu-a': price.purchase_usd_per_gpu is unknown (unknown: no reported H800 purchase price in "
        "the research data; set your own); set it in the profile before using this GPU"
    )


def test_null_figure_needs_an_unknown_source() -> None:
    assert Figure(value=None, source="unknown: not published").value is None
    with pytest.raises(ValidationError, match="value null must have a source starting with 'unknown:'"):
        Figure(value=None, source="klockwood-h100")
    with pytest.raises(ValidationError, match="must be >= 0, got -1"):
        Figure(value=-1.0, source="user: x")
    with pytest.raises(ValidationError, match="as_of must look like"):
        Figure(value=1.0, source="user: x", as_of="May 2026")
    with pytest.raises(ValidationError, match="accessed must look like"):
        Source(title="t", accessed="2026/05")


def test_figure_cited_keys() -> None:
    assert Figure(value=1.0, source="a, b").cited_keys() == ["a", "b"]
    for prefix in FREE_SOURCE_PREFIXES:
        assert Figure(value=1.0, source=prefix + " x").cited_keys() == []


def test_profile_with_null_figure_and_cited_source_is_rejected() -> None:
    data = copy.deepcopy(read_data(ROOT / "hardware_profiles" / "h100-sxm.yaml"))
    data["memory"]["hbm_tb_per_s"]["value"] = None
    assert error(HardwareProfile, data, "h.yaml") == (
        "h.yaml: memory.hbm_tb_per_s: a figure with value null must have a source starting with 'unknown:'"
    )


def test_catalog_profile_name_must_match_file(tmp_path: Path) -> None:
    # outside the catalog a profile's name need not match its file name
    data = (ROOT / "hardware_profiles" / "h100-sxm.yaml").read_text()
    path = tmp_path / "my-gpu.yaml"
    path.write_text(data)
    assert load_hardware(str(path)).name == "h100-sxm"


# == distributions ===============================================================================
def test_fixed_length_mean_and_samples() -> None:
    d = FixedLength(kind="fixed", tokens=64512)
    assert d.mean() == 64512.0
    assert d.sample(np.random.default_rng(0), 5).tolist() == [64512] * 5
    values, probs = d.support()
    assert values.tolist() == [64512.0] and probs.tolist() == [1.0]


def test_histogram_mean_in_closed_form() -> None:
    d = HistogramLength.model_validate(
        {
            "kind": "histogram",
            "bins": [
                {"low_tokens": 100, "high_tokens": 300, "share": 0.25},
                {"low_tokens": 1000, "high_tokens": 2000, "share": 0.5},
                {"low_tokens": 8000, "high_tokens": 8000, "share": 0.25},
            ],
        }
    )
    # midpoints 200, 1500, 8000
    assert d.mean() == pytest.approx(0.25 * 200 + 0.5 * 1500 + 0.25 * 8000)
    assert d.mean() == pytest.approx(2800.0)
    samples = d.sample(np.random.default_rng(1), 20000)
    assert samples.min() >= 100 and samples.max() <= 8000
    in_bins = ((samples >= 100) & (samples <= 300)) | ((samples >= 1000) & (samples <= 2000)) | (samples == 8000)
    assert in_bins.all()
    assert samples.mean() == pytest.approx(2800.0, rel=0.03)


def test_histogram_shares_must_sum_to_one() -> None:
    with pytest.raises(ValidationError, match=r"bin shares sum to 0\.9, expected 1"):
        HistogramLength.model_validate(
            {"kind": "histogram", "bins": [{"low_tokens": 1, "high_tokens": 2, "share": 0.9}]}
        )
    with pytest.raises(ValidationError, match=r"low_tokens \(5\) exceeds high_tokens \(2\)"):
        HistogramLength.model_validate(
            {"kind": "histogram", "bins": [{"low_tokens": 5, "high_tokens": 2, "share": 1.0}]}
        )


LOGNORMAL = {"kind": "lognormal", "median_tokens": 800, "sigma": 0.7, "min_tokens": 16, "max_tokens": 8192}


def test_lognormal_support_is_monotone_and_bounded() -> None:
    d = LognormalLength.model_validate(LOGNORMAL)
    values, probs = d.support()
    assert np.all(np.diff(values) > 0)
    assert values.min() >= 16 and values.max() <= 8192
    assert probs.sum() == pytest.approx(1.0)
    # 24 interior bins (edges at 5% steps, then 0.98, 0.99, 0.995, 0.999) and the two clipped atoms
    assert len(values) == len(LOGNORMAL_BIN_EDGES) - 1 + 2 == 26
    z_min, z_max = math.log(16 / 800) / 0.7, math.log(8192 / 800) / 0.7
    assert probs[0] == pytest.approx(NormalDist().cdf(z_min)) and values[0] == 16
    assert probs[-1] == pytest.approx(1 - NormalDist().cdf(z_max)) and values[-1] == 8192


def test_lognormal_support_mean_is_the_clipped_mean() -> None:
    """E[min(max(X, a), b)] for X ~ LN(mu, s): a P(X<a) + b P(X>b) + e^(mu+s^2/2) (Phi(z_b - s) - Phi(z_a - s))."""
    mu, s, a, b = math.log(800), 0.7, 16, 8192
    phi = NormalDist().cdf
    z_a, z_b = (math.log(a) - mu) / s, (math.log(b) - mu) / s
    expected = a * phi(z_a) + b * (1 - phi(z_b)) + math.exp(mu + s**2 / 2) * (phi(z_b - s) - phi(z_a - s))
    assert LognormalLength.model_validate(LOGNORMAL).mean() == pytest.approx(expected, rel=1e-9)
    # and what `sample` draws (clipped, rounded) has that mean and nearly the support's spread
    d = LognormalLength.model_validate(LOGNORMAL)
    draws = d.sample(np.random.default_rng(0), 1_000_000).astype(np.float64)
    values, probs = d.support()
    assert draws.mean() == pytest.approx(expected, rel=3e-3)
    cv2_support = (values**2 @ probs) / (values @ probs) ** 2 - 1
    assert cv2_support == pytest.approx(draws.var() / draws.mean() ** 2, rel=0.03)


def test_lognormal_support_respects_tight_bounds() -> None:
    d = LognormalLength.model_validate({**LOGNORMAL, "min_tokens": 700, "max_tokens": 900})
    values, _ = d.support()
    assert np.all(np.diff(values) > 0)
    assert values.min() >= 700 and values.max() <= 900


def test_lognormal_bounds_ordered() -> None:
    with pytest.raises(ValidationError, match=r"min_tokens \(9000\) exceeds max_tokens \(8192\)"):
        LognormalLength.model_validate({**LOGNORMAL, "min_tokens": 9000})
    with pytest.raises(ValidationError):
        LognormalLength.model_validate({**LOGNORMAL, "sigma": 0})


def test_lognormal_sampling_is_seeded() -> None:
    d = LognormalLength.model_validate(LOGNORMAL)
    a = d.sample(np.random.default_rng(42), 5000)
    b = d.sample(np.random.default_rng(42), 5000)
    c = d.sample(np.random.default_rng(43), 5000)
    assert a.dtype == np.int64
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 16 and a.max() <= 8192
    assert np.median(a) == pytest.approx(800, rel=0.05)


def test_article_shares_map_to_the_article_buckets() -> None:
    assert ARTICLE_BUCKET_EDGES == (0.0, 0.90, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0)
    shares = [0.12, 0.13, 0.06, 0.08, 0.12, 0.19, 0.30]
    d = HitRateDistribution.model_validate({"article_shares": shares})
    buckets = d.resolved_buckets()
    assert [(b.low, b.high) for b in buckets] == [
        (0.0, 0.9),
        (0.9, 0.95),
        (0.95, 0.96),
        (0.96, 0.97),
        (0.97, 0.98),
        (0.98, 0.99),
        (0.99, 1.0),
    ]
    assert [b.share for b in buckets] == shares
    expected = 0.12 * 0.45 + 0.13 * 0.925 + 0.06 * 0.955 + 0.08 * 0.965 + 0.12 * 0.975 + 0.19 * 0.985 + 0.30 * 0.995
    assert d.mean() == pytest.approx(expected, rel=1e-12)
    assert d.mean() == pytest.approx(0.9114, abs=1e-12)  # the workload file's "mean 91.1%"


def test_hit_support_is_the_buckets_own_whatever_form_and_read_only() -> None:
    """The support is kept by the buckets' values: the article form and the same buckets written
    out give one support; other shares another; callers share it, so it cannot be written."""
    shares = [0.12, 0.13, 0.06, 0.08, 0.12, 0.19, 0.30]
    article = HitRateDistribution.model_validate({"article_shares": shares})
    written = HitRateDistribution.model_validate({"buckets": [b.model_dump() for b in article.resolved_buckets()]})
    assert written.support() is article.support()
    other = HitRateDistribution.model_validate({"article_shares": [0.3, 0.13, 0.06, 0.08, 0.12, 0.19, 0.12]})
    assert other.mean() < article.mean()
    values, probs = article.support()
    assert values[:2].tolist() == pytest.approx([0.9 / 16, 0.9 * 3 / 16]) and probs[0] == pytest.approx(0.12 / 8)
    with pytest.raises(ValueError, match="read-only"):
        probs[0] = 1.0


def test_article_shares_need_seven() -> None:
    with pytest.raises(ValidationError):
        HitRateDistribution.model_validate({"article_shares": [0.5, 0.5]})


def test_hit_buckets_must_sum_to_one() -> None:
    with pytest.raises(ValidationError, match=r"bucket shares sum to 0\.9, expected 1"):
        HitRateDistribution.model_validate(
            {"buckets": [{"low": 0.0, "high": 0.5, "share": 0.5}, {"low": 0.5, "high": 1.0, "share": 0.4}]}
        )
    with pytest.raises(ValidationError, match=r"bucket shares sum to 1\.1, expected 1"):
        HitRateDistribution.model_validate(
            {"buckets": [{"low": 0.0, "high": 0.5, "share": 0.5}, {"low": 0.5, "high": 1.0, "share": 0.6}]}
        )


def test_overlapping_hit_buckets_are_rejected() -> None:
    with pytest.raises(ValidationError, match=r"buckets \[0.0, 0.6\) and \[0.5, 1.0\) overlap"):
        HitRateDistribution.model_validate(
            {"buckets": [{"low": 0.5, "high": 1.0, "share": 0.5}, {"low": 0.0, "high": 0.6, "share": 0.5}]}
        )
    # touching buckets are fine
    HitRateDistribution.model_validate(
        {"buckets": [{"low": 0.5, "high": 1.0, "share": 0.5}, {"low": 0.0, "high": 0.5, "share": 0.5}]}
    )


def test_hit_distribution_needs_exactly_one_form() -> None:
    with pytest.raises(ValidationError, match="give exactly one of `buckets` or `article_shares`"):
        HitRateDistribution.model_validate({})
    with pytest.raises(ValidationError, match="give exactly one of `buckets` or `article_shares`"):
        HitRateDistribution.model_validate(
            {"buckets": [{"low": 0.0, "high": 1.0, "share": 1.0}], "article_shares": [0, 0, 0, 0, 0, 0, 1.0]}
        )


def test_hit_bucket_bounds() -> None:
    with pytest.raises(ValidationError, match=r"low \(0.8\) exceeds high \(0.2\)"):
        HitRateDistribution.model_validate({"buckets": [{"low": 0.8, "high": 0.2, "share": 1.0}]})
    with pytest.raises(ValidationError):
        HitRateDistribution.model_validate({"buckets": [{"low": 0.0, "high": 1.3, "share": 1.0}]})


def test_hit_sampling_is_seeded_and_follows_shares() -> None:
    d = HitRateDistribution.model_validate({"article_shares": [0.12, 0.13, 0.06, 0.08, 0.12, 0.19, 0.30]})
    a = d.sample(np.random.default_rng(7), 50000)
    assert np.array_equal(a, d.sample(np.random.default_rng(7), 50000))
    assert a.min() >= 0 and a.max() <= 1
    assert np.mean(a < 0.9) == pytest.approx(0.12, abs=0.01)
    assert np.mean(a >= 0.99) == pytest.approx(0.30, abs=0.01)
    assert np.mean(a >= 0.95) == pytest.approx(0.75, abs=0.01)  # "70-80% of requests hit > 95%"
    assert a.mean() == pytest.approx(d.mean(), abs=0.005)


@st.composite
def bucket_sets(draw: st.DrawFn) -> list[dict[str, float]]:
    """1-8 non-overlapping buckets in [0, 1], touching or with gaps, shares summing to 1."""
    n = draw(st.integers(min_value=1, max_value=8))
    gapped = draw(st.booleans())
    count = 2 * n if gapped else n + 1
    edges = sorted(draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=count, max_size=count)))
    pairs = [(edges[2 * i], edges[2 * i + 1]) for i in range(n)] if gapped else list(itertools.pairwise(edges))
    weights = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))
    if sum(weights) == 0:
        weights[0] = 1
    total = sum(weights)
    return [{"low": lo, "high": hi, "share": w / total} for (lo, hi), w in zip(pairs, weights, strict=True)]


@settings(max_examples=150, deadline=None)
@given(bucket_sets(), st.integers(0, 2**31 - 1))
def test_hit_distribution_properties(buckets: list[dict[str, float]], seed: int) -> None:
    d = HitRateDistribution.model_validate({"buckets": buckets})
    lo = min(b["low"] for b in buckets)
    hi = max(b["high"] for b in buckets)
    mean = d.mean()
    assert lo - 1e-12 <= mean <= hi + 1e-12
    # uniform within each bucket: the mean is the share-weighted midpoint, exactly
    assert mean == pytest.approx(sum(b["share"] * (b["low"] + b["high"]) / 2 for b in buckets), abs=1e-12)
    _, probs = d.support()
    assert probs.sum() == pytest.approx(1.0)
    samples = d.sample(np.random.default_rng(seed), 200)
    assert samples.shape == (200,)
    inside = np.zeros(200, dtype=bool)
    for b in buckets:
        if b["share"] > 0:
            inside |= (samples >= b["low"]) & (samples <= b["high"])
    assert inside.all(), "a sampled hit rate fell outside every bucket with a share"
    assert np.array_equal(samples, d.sample(np.random.default_rng(seed), 200))


# == workloads ===================================================================================
def workload_data() -> dict[str, Any]:
    return copy.deepcopy(read_data(ROOT / "workloads" / "pdd-agent-64k.yaml"))


def test_workload_defaults() -> None:
    w = validate(Workload, workload_data(), "w.yaml")
    assert w.deployment.home == "dc-a"
    assert w.deployment.datacenter("dc-b").gpus[0].type == "gpu-b"
    assert w.prompt_tokens.mean() == 64512.0
    assert w.deployment.wan_lines[0].tcp.window_bytes == 64 * 2**20


def test_poisson_with_another_cv_is_rejected() -> None:
    data = workload_data()
    data["arrival"]["cv"] = 2.0
    msg = error(Workload, data, "w.yaml")
    assert msg.startswith("w.yaml: arrival: ")
    assert msg.endswith(": a poisson process has cv 1; use process: gamma for another cv")
    data["arrival"]["process"] = "gamma"
    assert validate(Workload, data, "w.yaml").arrival.cv == 2.0


def test_wan_line_to_an_unknown_datacenter() -> None:
    data = workload_data()
    data["deployment"]["wan_lines"][0]["between"] = ["dc-a", "dc-c"]
    msg = error(Workload, data, "w.yaml")
    assert msg.startswith("w.yaml: deployment: ")
    assert msg.endswith(": wan_lines[0].between names 'dc-c', not a datacenter (dc-a, dc-b)")


def test_wan_line_joining_a_datacenter_to_itself() -> None:
    data = workload_data()
    data["deployment"]["wan_lines"][1]["between"] = ["dc-b", "dc-b"]
    assert error(Workload, data, "w.yaml").endswith(": wan_lines[1] joins 'dc-b' to itself")


def test_duplicate_datacenter_names() -> None:
    data = workload_data()
    data["deployment"]["datacenters"][1]["name"] = "dc-a"
    assert error(Workload, data, "w.yaml").endswith(": datacenter names repeat: ['dc-a', 'dc-a']")


def test_duplicate_wan_line_names() -> None:
    data = workload_data()
    data["deployment"]["wan_lines"][1]["name"] = "express-100g"
    assert error(Workload, data, "w.yaml").endswith(": wan line names repeat: ['express-100g', 'express-100g']")


def test_duplicate_gpu_type_in_a_datacenter() -> None:
    data = workload_data()
    data["deployment"]["datacenters"][0]["gpus"].append({"type": "gpu-a", "max_count": 8})
    msg = error(Workload, data, "w.yaml")
    assert msg.startswith("w.yaml: deployment.datacenters[0]: ")
    assert msg.endswith(": a GPU type is listed twice: ['gpu-a', 'gpu-a']")


def test_unknown_home_datacenter() -> None:
    data = workload_data()
    data["deployment"]["home_datacenter"] = "dc-z"
    assert error(Workload, data, "w.yaml").endswith(": home_datacenter 'dc-z' is not a datacenter (dc-a, dc-b)")
    data["deployment"]["home_datacenter"] = "dc-b"
    assert validate(Workload, data, "w.yaml").deployment.home == "dc-b"


def test_ttft_p99_below_p90_is_rejected() -> None:
    data = workload_data()
    data["sla"]["ttft_p99_s"] = 5.0
    msg = error(Workload, data, "w.yaml")
    assert msg == ("w.yaml: sla: ttft_p99_s (5.0) is below ttft_p90_s (10.0)")
    data["sla"]["ttft_p99_s"] = 10.0  # equal is allowed
    validate(Workload, data, "w.yaml")


def test_cached_price_above_input_price_is_rejected() -> None:
    data = workload_data()
    data["prices"]["cached_input_usd_per_mtok"] = 0.3
    msg = error(Workload, data, "w.yaml")
    assert msg.startswith("w.yaml: prices: ")
    assert msg.endswith(": cached_input_usd_per_mtok exceeds input_usd_per_mtok")


def test_trace_fluctuation_needs_a_file() -> None:
    data = workload_data()
    data["deployment"]["wan_lines"][0]["fluctuation"] = {"kind": "trace"}
    assert error(Workload, data, "w.yaml").endswith(": kind trace needs trace_file")
    data["deployment"]["wan_lines"][0]["fluctuation"] = {"kind": "ou", "trace_file": "x.csv"}
    assert error(Workload, data, "w.yaml").endswith(": trace_file is only read with kind: trace")


def test_loss_rate_range() -> None:
    data = workload_data()
    data["deployment"]["wan_lines"][0]["loss_rate"] = 0.2
    assert error(Workload, data, "w.yaml") == (
        "w.yaml: deployment.wan_lines[0].loss_rate = 0.2: Input should be less than 0.15"
    )


def test_datacenter_name_pattern() -> None:
    data = workload_data()
    data["deployment"]["datacenters"][0]["name"] = "DC A"
    assert error(Workload, data, "w.yaml") == (
        "w.yaml: deployment.datacenters[0].name = 'DC A': String should match pattern '^[a-z0-9][a-z0-9.\\-]*$'"
    )


def test_workload_specs_are_immutable() -> None:
    w = validate(Workload, workload_data(), "w.yaml")
    with pytest.raises(ValidationError):
        w.arrival.rate_rps = 9.0  # type: ignore[misc]


# == plans =======================================================================================
def role(dc: str, gpu: str = "gpu-a", tp: int = 8, count: int = 2) -> dict[str, Any]:
    return {"datacenter": dc, "gpu": gpu, "tp": tp, "count": count}


def pdd_plan() -> dict[str, Any]:
    return {
        "name": "p",
        "architecture": "pdd",
        "prefill": role("dc-a"),
        "relay": role("dc-a", count=1),
        "decode": role("dc-b", "gpu-b"),
        "wan": [{"option": "express-100g", "count": 1}],
    }


def plan_error(data: dict[str, Any]) -> str:
    msg = error(Plan, data, "p.yaml")
    assert msg.startswith("p.yaml: "), msg
    # a whole-plan check that names its field reads `p.yaml: relay.datacenter = ...`, others
    # `p.yaml: top level: ...`
    return msg[len("p.yaml: ") :].removeprefix("top level: ")


def test_valid_plans() -> None:
    plan = validate(Plan, pdd_plan(), "p.yaml")
    assert list(plan.roles()) == ["prefill", "relay", "decode"]
    assert plan.prefill.gpus == 16
    assert plan.routing.hit_threshold == 0.9
    assert plan.handoff.mode == "adaptive"
    cross = {**pdd_plan(), "architecture": "pd-cross"}
    del cross["relay"]
    assert list(validate(Plan, cross, "p.yaml").roles()) == ["prefill", "decode"]
    intra = {"architecture": "pd-intra", "prefill": role("dc-a"), "decode": role("dc-a")}
    assert validate(Plan, intra, "p.yaml").wan == []


def test_pdd_without_relay() -> None:
    data = pdd_plan()
    del data["relay"]
    needs = "architecture pdd needs relay instances (relay.count > 0) or relay_on_prefill: true"
    assert plan_error(data) == needs
    data["relay"] = role("dc-a", count=0)
    assert plan_error(data) == needs


def test_relay_in_another_datacenter_than_prefill() -> None:
    data = pdd_plan()
    data["relay"] = role("dc-b", count=1)
    assert plan_error(data) == (
        "relay.datacenter = 'dc-b': the relay must sit with prefill in 'dc-a' (it is fed over RDMA)"
    )


def test_relay_in_a_non_pdd_plan() -> None:
    data = {**pdd_plan(), "architecture": "pd-cross"}
    assert plan_error(data) == "architecture pd-cross has no relay; remove `relay`"


def test_pd_intra_across_datacenters() -> None:
    data = {"architecture": "pd-intra", "prefill": role("dc-a"), "decode": role("dc-b")}
    assert plan_error(data) == "architecture pd-intra keeps prefill and decode in one datacenter"


def test_pd_cross_within_one_datacenter() -> None:
    data = {"architecture": "pd-cross", "prefill": role("dc-a"), "decode": role("dc-a"), "wan": []}
    assert plan_error(data) == "architecture pd-cross puts decode in another datacenter than prefill"


def test_pd_cross_without_wan() -> None:
    data = {"architecture": "pd-cross", "prefill": role("dc-a"), "decode": role("dc-b")}
    assert plan_error(data) == "architecture pd-cross needs at least one WAN line (`wan`)"


def test_decode_count_zero() -> None:
    data = pdd_plan()
    data["decode"]["count"] = 0
    assert plan_error(data) == "decode.count = 0: a plan needs at least one (main) decode instance"


def test_prefill_count_zero() -> None:
    data = pdd_plan()
    data["prefill"]["count"] = 0
    assert plan_error(data) == "prefill.count = 0: a plan needs at least one prefill instance"


def test_plan_field_ranges() -> None:
    data = pdd_plan()
    data["routing"] = {"hit_threshold": 1.3}
    assert error(Plan, data, "p.yaml") == "p.yaml: routing.hit_threshold = 1.3: Input should be less than or equal to 1"
    data = pdd_plan()
    data["handoff"] = {"mode": "two-shot"}
    assert error(Plan, data, "p.yaml") == (
        "p.yaml: handoff.mode = 'two-shot': Input should be 'one-shot', 'catch-up' or 'adaptive'"
    )
    data = pdd_plan()
    data["prefill"]["tp"] = 0
    assert error(Plan, data, "p.yaml") == "p.yaml: prefill.tp = 0: Input should be greater than 0"
