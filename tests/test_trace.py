"""`pddplan trace import`: streaming a trace (Mooncake JSON lines, CSV, Azure) into a summary, by hand
on tiny traces, on the shipped Mooncake trace, and on bad files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_results import json_of, one_error_line

from pddplan.errors import InputError
from pddplan.trace import read_trace, summarize

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "examples" / "traces" / "mooncake-synthetic.jsonl"


def mooncake(tmp_path: Path, rows: list[dict[str, Any]], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


THREE = [
    {"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]},
    {"timestamp": 1000, "input_length": 1536, "output_length": 20, "hash_ids": [1, 2, 3]},
    {"timestamp": 3000, "input_length": 600, "output_length": 30, "hash_ids": [1, 4]},
]


def test_three_requests_by_hand(tmp_path: Path) -> None:
    """Gaps 1 s and 2 s: mean 1.5, sd 0.5, CV 1/3; rate 3 requests / 3 s. Hits with 512-token
    blocks and an unbounded cache: 0 (nothing seen), 1024/1536 (blocks 1, 2 seen), min(512, 600)/600
    (block 1 seen, block 4 not); token-weighted (0 + 1024 + 512) / (1024 + 1536 + 600)."""
    summary = summarize(read_trace(mooncake(tmp_path, THREE)), 512).to_output("t", "mooncake").json_data()
    assert summary["requests"] == 3
    assert summary["duration_s"] == pytest.approx(3.0)
    assert summary["rate_rps"] == pytest.approx(1.0)
    assert summary["interarrival_cv"] == pytest.approx(1 / 3)
    assert summary["input_tokens_mean"] == pytest.approx((1024 + 1536 + 600) / 3)
    assert summary["ideal_hit_rate_token_weighted"] == pytest.approx(1536 / 3160)
    assert summary["unique_blocks"] == 4
    assert summary["requests_per_minute"] == [3]
    hits = summary["ideal_hit_histogram"]
    assert sum(hits) == 3 and hits[0] == 1  # the first request: no hit
    assert hits[6] == 1 and hits[8] == 1  # 0.667 in [0.6, 0.7), 0.853 in [0.8, 0.9)


def test_csv_and_azure_formats(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("timestamp_s,input_tokens,output_tokens,hash_ids\n0,1024,5,1 2\n2,1024,5,1 2\n")
    summary = summarize(read_trace(table, "csv")).to_output("t", "mooncake").json_data()
    assert summary["requests"] == 2 and summary["duration_s"] == pytest.approx(2.0)
    assert summary["ideal_hit_rate_token_weighted"] == pytest.approx(0.5)  # the second prompt hits whole
    azure = tmp_path / "azure.csv"
    azure.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
    )
    requests = list(read_trace(azure, "azure"))
    assert [r.input_tokens for r in requests] == [374, 396] and requests[0].hash_ids is None
    assert requests[1].arrival_s == pytest.approx(4.314579, abs=1e-5)
    assert (
        summarize(requests).to_output("t", "mooncake").json_data()["ideal_hit_rate_token_weighted"] is None
    )  # no hashes


def test_the_shipped_mooncake_trace() -> None:
    """As its README states: 3,993 requests over ~1,022 s, mean input 15,325, output 149 tokens."""
    summary = summarize(read_trace(MOONCAKE)).to_output("t", "mooncake").json_data()
    assert summary["requests"] == 3993
    assert summary["duration_s"] == pytest.approx(1022, abs=1)
    assert summary["input_tokens_mean"] == pytest.approx(15325, abs=1)
    assert summary["output_tokens_mean"] == pytest.approx(149, abs=1)
    assert 0.9 < summary["interarrival_cv"] < 1.1  # Poisson arrivals
    assert 0 < summary["ideal_hit_rate_token_weighted"] < 1
    assert math.isfinite(summary["hit_vs_prompt_length_correlation"])


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json\n", "line 1: not JSON"),
        ('{"timestamp": 0, "input_length": -5, "output_length": 1}\n', "line 1: input_length = -5"),
        ('{"timestamp": 0, "input_length": 1.5, "output_length": 1}\n', "input_length = 1.5"),
        ('{"timestamp": "NaN", "input_length": 5, "output_length": 1}\n', "timestamp = 'NaN'"),
        ('{"input_length": 5, "output_length": 1}\n', "line 1: timestamp: missing"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "x"}\n', "hash_ids"),
        (
            '{"timestamp": 5, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": 5, '
            '"output_length": 1}\n',
            "line 2: the timestamp goes backwards",
        ),
        ("[1, 2]\n", "expected a JSON object"),
    ],
)
def test_bad_lines_name_the_line_and_field(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(InputError, match=None) as error:
        list(read_trace(path))
    assert fragment in str(error.value) and str(path) in str(error.value)


def test_cli_bad_inputs(cli: Any, tmp_path: Path) -> None:
    one_error_line(cli("trace", "import", str(MOONCAKE), "--format", "parquet"), "--format = 'parquet'")
    one_error_line(cli("trace", "import", str(tmp_path)), str(tmp_path))  # a folder
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 10)
    one_error_line(cli("trace", "import", str(binary)), "not UTF-8")
    table = tmp_path / "t.csv"
    table.write_text("time,in,out\n1,2,3\n")
    one_error_line(cli("trace", "import", str(table), "--format", "csv"), "missing column(s) timestamp_s")
    one_error_line(cli("trace", "import", str(MOONCAKE), "--block-tokens", "0"), "--block-tokens")


def test_cli_json_and_table(cli: Any) -> None:
    data = json_of(cli("trace", "import", str(MOONCAKE), "--json"))
    assert data["requests"] == 3993 and data["format"] == "mooncake"
    result = cli("trace", "import", str(MOONCAKE))
    assert result.exit_code == 0 and "3,993" in result.stdout and "unbounded cache" in result.stdout


def test_the_prefetching_reader_gives_the_same_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked reader process (used for large traces) yields the same requests in the same order."""
    from pddplan.trace import prefetch

    monkeypatch.setattr(prefetch, "MIN_PREFETCH_BYTES", 0)
    monkeypatch.setattr(prefetch, "BATCH", 97)  # several batches, the last one partial
    assert list(prefetch.stream_trace(MOONCAKE)) == list(read_trace(MOONCAKE))
    assert (
        summarize(prefetch.stream_trace(MOONCAKE)).to_output("t", "mooncake").json_data()
        == summarize(read_trace(MOONCAKE)).to_output("t", "mooncake").json_data()
    )


def test_the_prefetching_reader_reports_a_bad_line_and_stops_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pddplan.trace import prefetch

    monkeypatch.setattr(prefetch, "MIN_PREFETCH_BYTES", 0)
    monkeypatch.setattr(prefetch, "BATCH", 2)
    rows: list[dict[str, Any]] = [*THREE, {"timestamp": 4000, "input_length": -1, "output_length": 1}]
    with pytest.raises(InputError, match="line 4: input_length = -1"):
        list(prefetch.stream_trace(mooncake(tmp_path, rows)))
    stream = prefetch.stream_trace(MOONCAKE)
    assert next(stream).input_tokens > 0
    stream.close()  # the reader process is ended, not left behind


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]}\n',
            "line 1: hash_ids lists 3",
        ),
        ("", "no requests (an empty trace)"),
        ("\n\n", "no requests (an empty trace)"),
    ],
)
def test_more_hashes_than_blocks_or_no_request(cli: Any, tmp_path: Path, text: str, fragment: str) -> None:
    """600 tokens are 2 blocks of 512: a third hash cannot be one of its blocks. A file without a
    request is refused rather than summarized as nothing. Both in one line, exit 2."""
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    result = cli("trace", "import", str(path))
    assert result.exit_code == 2 and fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1
