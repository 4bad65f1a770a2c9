"""Quantities with units (`pddplan.support.units`): hand-computed conversions and refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_results import one_error_line
from hypothesis import given
from hypothesis import strategies as st

from pddplan.errors import InputError
from pddplan.inputs import load_workload
from pddplan.support.units import parse_bandwidth, parse_seconds, parse_size


@pytest.mark.parametrize(
    ("text", "size_bytes", "tokens"),
    [
        ("10GB", 1e10, None),
        ("10 GB", 1e10, None),
        ("1GiB", 1_073_741_824.0, None),  # 2**30
        ("2TiB", 2_199_023_255_552.0, None),  # 2 x 2**40
        ("500MB", 5e8, None),
        ("2M tokens", None, 2e6),
        ("2Mtok", None, 2e6),
        ("500k tokens", None, 5e5),
        ("1 token", None, 1.0),
        ("0", 0.0, 0.0),
    ],
)
def test_sizes_by_hand(text: str, size_bytes: float | None, tokens: float | None) -> None:
    size = parse_size(text, "--capacity")
    assert size.size_bytes == size_bytes and size.tokens == tokens


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10G", "'G' is ambiguous (bytes or tokens?): write 10GB for bytes or 10G tokens"),
        ("1T", "'T' is ambiguous (bytes or tokens?): write 1TB for bytes"),
        ("2M", "write 2MB for bytes or 2M tokens"),
        ("100", "give its unit"),
        ("10Gb", "reads as bits"),
        ("40Gbps", "unknown unit 'Gbps'"),
        ("ten", "expected a number with its unit"),
        ("1e999GB", "finite"),
    ],
)
def test_ambiguous_or_unknown_sizes_are_refused_naming_the_flag(text: str, message: str) -> None:
    with pytest.raises(InputError, match="--capacity") as caught:
        parse_size(text, "--capacity")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [("40Gbps", 5e9), ("100 Gbps", 1.25e10), ("10Mbps", 1.25e6), ("5GB/s", 5e9), ("1GiB/s", 2.0**30)],
)
def test_bandwidths_by_hand(text: str, bytes_per_s: float) -> None:
    assert parse_bandwidth(text, "--bw") == pytest.approx(bytes_per_s, rel=1e-15)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("6Gb/s", "reads as bits"),
        ("100", "bandwidth such as"),
        ("5GB", ""),
        # read as 40 Gbit/s before, 8 times less than 40 GB/s: which one is meant is not said
        ("40GBps", "may be bytes or bits"),
        ("40MBPS", "may be bytes or bits"),
    ],
)
def test_bad_bandwidths(text: str, message: str) -> None:
    with pytest.raises(InputError, match="--bw") as caught:
        parse_bandwidth(text, "--bw")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "seconds"), [("500ms", 0.5), ("2s", 2.0), ("5min", 300.0), ("1h", 3600.0), ("250us", 2.5e-4)]
)
def test_times_by_hand(text: str, seconds: float) -> None:
    assert parse_seconds(text, "--t") == pytest.approx(seconds, rel=1e-15)


@pytest.mark.parametrize("text", ["2", "2S", "2 sec", "MS"])
def test_bad_times(text: str) -> None:
    with pytest.raises(InputError, match="--t"):
        parse_seconds(text, "--t")


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False), st.sampled_from(["GB", "GiB", "MB", "TB"]))
def test_a_larger_size_is_never_fewer_bytes(value: float, unit: str) -> None:
    small = parse_size(f"{value!r}{unit}", "--capacity").size_bytes
    large = parse_size(f"{value * 2 + 1!r}{unit}", "--capacity").size_bytes
    assert small is not None and large is not None and large > small


WORKLOAD = Path(__file__).resolve().parents[1] / "workloads" / "pdd-agent-64k.yaml"


def _written(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = WORKLOAD.read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "w.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_workload_takes_times_and_bandwidths_with_their_units(tmp_path: Path) -> None:
    plain = load_workload(str(WORKLOAD))
    written = load_workload(
        str(
            _written(
                tmp_path,
                ("capacity_gbps: 100\n", "capacity_gbps: 12.5GB/s\n"),  # 12.5e9 B/s x 8 = 100 Gbps
                ("ttft_p90_s: 10.0", "ttft_p90_s: 10000ms"),
                ("rtt_ms: 30 ", "rtt_ms: 0.03s "),
            )
        )
    )
    assert written.deployment.wan_lines[0].capacity_gbps == pytest.approx(100.0, rel=1e-15)
    assert written.sla.ttft_p90_s == pytest.approx(plain.sla.ttft_p90_s, rel=1e-15)
    assert written.deployment.wan_lines[0].rtt_ms == pytest.approx(30.0, rel=1e-15)


def test_a_quantity_in_the_wrong_dimension_names_file_field_and_value(cli: Any, tmp_path: Path) -> None:
    path = _written(tmp_path, ("capacity_gbps: 100\n", "capacity_gbps: 100GB\n"))
    one_error_line(
        cli("workloads", "show", str(path)),
        str(path),
        "deployment.wan_lines[0].capacity_gbps = '100GB': expected a bandwidth such as 40Gbps or 5GB/s",
    )


def test_a_quantity_out_of_bounds_shows_it_as_written_and_as_read(cli: Any, tmp_path: Path) -> None:
    """'5B/s' is 4e-08 Gbps, below a line's 1 Mbps floor: the error shows what the file says,
    not only the converted number the bound saw."""
    path = _written(tmp_path, ("capacity_gbps: 100\n", "capacity_gbps: 5B/s\n"))
    one_error_line(
        cli("workloads", "show", str(path)),
        "deployment.wan_lines[0].capacity_gbps = '5B/s' (read as 4e-08): Input should be greater than",
    )
