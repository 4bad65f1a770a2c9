"""pddplan.support.loading: parsing YAML/JSON, the one-line validation messages, and atomic writes."""

from __future__ import annotations

import copy
import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

import pddplan.architectures  # noqa: F401  (registers the names a workload's `architectures` field checks)
from pddplan.errors import InfeasibleError, InputError, PddplanError
from pddplan.specs.common import StrictModel
from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.workload import Workload
from pddplan.support.loading import (
    describe_validation_error,
    load,
    parse_text,
    read_data,
    validate,
    write_atomic,
    write_atomic_bytes,
)

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "workloads" / "pdd-agent-64k.yaml"
PROFILE = ROOT / "hardware_profiles" / "h100-sxm.yaml"


def good_workload() -> dict[str, Any]:
    return copy.deepcopy(read_data(WORKLOAD))


def good_profile() -> dict[str, Any]:
    return copy.deepcopy(read_data(PROFILE))


def message(model: type, data: Any, source: str = "in.yaml") -> str:
    with pytest.raises(InputError) as info:
        validate(model, data, source)
    text = str(info.value)
    assert "\n" not in text, f"error message is not one line: {text!r}"
    return text


# -- errors --------------------------------------------------------------------------------------
def test_error_exit_codes() -> None:
    assert InputError.exit_code == 2
    assert InfeasibleError.exit_code == 3
    assert PddplanError.exit_code == 1
    assert issubclass(InputError, PddplanError)
    assert issubclass(InfeasibleError, PddplanError)


# -- parsing -------------------------------------------------------------------------------------
def test_yaml_parses_to_plain_data() -> None:
    assert parse_text("a: 1\nb: [x, 2.5]\nc: {d: null}\n", "s") == {"a": 1, "b": ["x", 2.5], "c": {"d": None}}


def test_dates_stay_strings() -> None:
    data = parse_text("as_of: 2026-05-01\naccessed: 2026-12\nwhen: 2001-12-14t21:59:43.10-05:00\n", "s")
    assert data == {"as_of": "2026-05-01", "accessed": "2026-12", "when": "2001-12-14t21:59:43.10-05:00"}
    assert all(isinstance(v, str) for v in data.values())


def test_yaml_reads_json_text_like_json() -> None:
    """parse_text documents YAML as 'a superset of JSON': JSON text must parse as json.loads does,
    exponent floats without a dot included (e.g. a loss rate written 1e-5)."""
    text = '{"loss_rate": 1e-5, "rate": 2.5, "n": 3, "ok": true, "none": null, "s": "x"}'
    assert parse_text(text, "s") == json.loads(text)


def test_read_json_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"a": 1e-5, "b": [1, 2], "c": "2026-05-01"}')
    assert read_data(path) == {"a": 1e-5, "b": [1, 2], "c": "2026-05-01"}


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as info:
        read_data(path)
    assert str(info.value) == f"{path}: file not found"


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_data(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a directory, expected a file"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(InputError) as info:
        read_data(path)
    assert str(info.value) == f"{path}: not a UTF-8 text file"


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("name: x\n  bad: [\n", 2, 6),  # a mapping value where none may be
        ("a: 1\n\tb: 2\n", 2, 1),  # a tab in the indentation
        ("a: [1, 2\nb: 3\n", 2, 2),  # an unclosed flow sequence
    ],
)
def test_invalid_yaml_names_line_and_column(tmp_path: Path, text: str, line: int, column: int) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_data(path)
    msg = str(info.value)
    prefix = f"{path}: not valid YAML at line {line}, column {column}: "
    assert msg.startswith(prefix), msg
    assert len(msg) > len(prefix)  # the parser's description of the problem follows
    assert "\n" not in msg


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "a": 1,\n  "b": \n}\n')
    with pytest.raises(InputError) as info:
        read_data(path)
    assert str(info.value) == f"{path}: not valid JSON at line 4, column 1: Expecting value"


@pytest.mark.parametrize(
    ("text", "kind"),
    [("- 1\n- 2\n", "list"), ("", "empty"), ("just text\n", "str"), ("42\n", "int")],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = tmp_path / "top.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load(Workload, path)
    assert str(info.value) == f"{path}: expected a mapping of fields at the top level, got {kind}"


# -- validation messages -------------------------------------------------------------------------
def test_valid_workload_loads() -> None:
    workload = validate(Workload, good_workload(), "w.yaml")
    assert workload.name == "pdd-agent-64k"
    assert workload.arrival.rate_rps == 4.0


def test_unknown_key_suggests_the_nearest_field() -> None:
    data = good_workload()
    data["arrival"]["proces"] = data["arrival"].pop("process")
    assert message(Workload, data, "w.yaml") == "w.yaml: arrival.proces: unknown field; did you mean 'process'?"


def test_unknown_key_inside_a_list_suggests_the_nearest_field() -> None:
    data = good_workload()
    data["deployment"]["datacenters"][0]["gpus"][0]["usd_per_gpu_hr"] = 2.0
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: deployment.datacenters[0].gpus[0].usd_per_gpu_hr: unknown field; did you mean 'usd_per_gpu_hour'?"
    )


def test_unknown_key_without_a_near_name_lists_the_fields() -> None:
    data = good_workload()
    data["zzz"] = 1
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: zzz: unknown field; expected one of: name, description, model, kv_dtype, weights, expert_weights, "
        "role_weights, arrival, "
        "prompt_tokens, output_tokens, hit_rate, request_mix, sla, prices, deployment, serving, scenarios, sources"
    )


def test_misspelled_required_key_is_reported_as_the_typo() -> None:
    """A typo of a required key is both an unknown key and a missing one; the message must point
    at the typo and suggest the right name, not only say the right name is missing."""
    data = good_workload()
    data["arival"] = data.pop("arrival")
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: arival: unknown field; did you mean 'arrival'? (also arrival: required field is missing)"
    )


def test_unknown_key_in_a_length_distribution_suggests_from_that_kind() -> None:
    """output_tokens is a union discriminated by `kind`: the suggestion must come from the
    lognormal fields (min_tokens), not from another member of the union."""
    data = good_workload()
    data["output_tokens"]["min_token"] = data["output_tokens"].pop("min_tokens")
    msg = message(Workload, data, "w.yaml")
    assert msg.startswith("w.yaml: output_tokens.")
    assert msg.endswith("min_token: unknown field; did you mean 'min_tokens'?"), msg


def test_missing_required_field() -> None:
    data = good_workload()
    del data["sla"]["ttft_p99_s"]
    assert message(Workload, data, "w.yaml") == "w.yaml: sla.ttft_p99_s: required field is missing"


def test_missing_required_top_level_field() -> None:
    data = good_workload()
    del data["prices"]
    assert message(Workload, data, "w.yaml") == "w.yaml: prices: required field is missing"


@pytest.mark.parametrize("value", ["4.0", "four"])
def test_string_for_a_number_is_rejected(value: str) -> None:
    data = good_workload()
    data["arrival"]["rate_rps"] = value
    assert message(Workload, data, "w.yaml") == f"w.yaml: arrival.rate_rps = '{value}': Input should be a valid number"


def test_string_for_an_integer_is_rejected() -> None:
    data = good_workload()
    data["deployment"]["datacenters"][0]["gpus"][0]["max_count"] = "256"
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: deployment.datacenters[0].gpus[0].max_count = '256': Input should be a valid integer"
    )


def test_float_for_an_integer_is_rejected() -> None:
    data = good_workload()
    data["serving"]["page_tokens"] = 64.5
    assert message(Workload, data, "w.yaml") == "w.yaml: serving.page_tokens = 64.5: Input should be a valid integer"


def test_string_for_a_bool_is_rejected() -> None:
    from pddplan.specs.plan import Plan

    data = {
        "architecture": "pd-intra",
        "prefill": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 8, "count": 1},
        "decode": {"datacenter": "dc-a", "gpu": "gpu-a", "tp": 8, "count": 1},
        "routing": {"singular_filter": "yes"},
    }
    assert message(Plan, data, "p.yaml") == "p.yaml: routing.singular_filter = 'yes': Input should be a valid boolean"


def test_an_integer_is_accepted_for_a_float() -> None:
    data = good_workload()
    data["arrival"]["rate_rps"] = 4
    assert validate(Workload, data, "w.yaml").arrival.rate_rps == 4.0


def test_negative_wan_bandwidth() -> None:
    data = good_workload()
    data["deployment"]["wan_lines"][0]["capacity_gbps"] = -100
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: deployment.wan_lines[0].capacity_gbps = -100: Input should be greater than or equal to 0.001"
    )


def test_negative_memory_bandwidth_figure() -> None:
    data = good_profile()
    data["memory"]["hbm_tb_per_s"]["value"] = -3.35
    assert message(HardwareProfile, data, "h.yaml") == ("h.yaml: memory.hbm_tb_per_s: must be >= 0, got -3.35")


def test_hit_rate_above_one() -> None:
    data = good_workload()
    data["hit_rate"] = {"buckets": [{"low": 0.0, "high": 1.3, "share": 1.0}]}
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: hit_rate.buckets[0].high = 1.3: Input should be less than or equal to 1"
    )


def test_more_problems_are_counted() -> None:
    data = good_workload()
    data["arrival"]["rate_rps"] = -1
    expected = "w.yaml: arrival.rate_rps = -1: Input should be greater than or equal to 0.000001"
    assert message(Workload, data, "w.yaml") == expected
    data["sla"]["ttft_p90_s"] = -1
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: arrival.rate_rps = -1: Input should be greater than or equal to 0.000001 "
        "(also sla.ttft_p90_s = -1: Input should be greater than 0)"
    )
    data["deployment"]["wan_lines"][0]["capacity_gbps"] = -1
    data["serving"]["chunk_tokens"] = 0
    assert message(Workload, data, "w.yaml") == (
        "w.yaml: arrival.rate_rps = -1: Input should be greater than or equal to 0.000001 "
        "(also sla.ttft_p90_s = -1: Input should be greater than 0; and 2 more)"
    )


def test_long_values_are_shortened() -> None:
    data = good_workload()
    data["hit_rate"]["article_shares"] = [0.1] * 7  # sums to 0.7: a check across a mapping shows no value
    assert message(Workload, data, "w.yaml") == "w.yaml: hit_rate: bucket shares sum to 0.7, expected 1"
    data = good_workload()
    data["arrival"]["rate_rps"] = "x" * 200
    msg = message(Workload, data, "w.yaml")
    shown = msg.split(" = ", 1)[1].split(": Input should", 1)[0]
    assert len(shown) == 60 and shown.endswith("...")


def test_model_level_error_at_top_level() -> None:
    data = good_profile()
    data["memory"]["hbm_gb"]["source"] = "no-such-key"
    assert message(HardwareProfile, data, "h.yaml") == (
        "h.yaml: top level: memory.hbm_gb cites source 'no-such-key', which is not in the sources table "
        "(known: aimultiple-gpu-index, dgx-h100-guide, dgx-h100-manual, epoch-cost-trends, gdsio-report, "
        "klockwood-h100, omniyq-cn-rental, vllm-kv-offloading)"
    )


class _Small(StrictModel):
    count: int = Field(ge=0)
    ratio: float = Field(default=0.5, ge=0, le=1)


def test_describe_validation_error_directly() -> None:
    from pydantic import ValidationError

    data = {"count": -1, "ratio": 2.0}
    with pytest.raises(ValidationError) as info:
        _Small.model_validate(data)
    assert describe_validation_error(info.value, _Small, data, "src") == (
        "src: count = -1: Input should be greater than or equal to 0 "
        "(also ratio = 2.0: Input should be less than or equal to 1)"
    )


def test_load_reads_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(good_workload()))
    assert load(Workload, path).name == "pdd-agent-64k"


# -- atomic writes -------------------------------------------------------------------------------
def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_write_atomic_writes_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "out.yaml"
    write_atomic(path, "first\n")
    assert path.read_text() == "first\n"
    write_atomic(path, "second é\n")
    assert path.read_text(encoding="utf-8") == "second é\n"
    write_atomic_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert _leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml"]


def test_write_atomic_keeps_old_file_when_rename_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out.yaml"
    path.write_text("old content\n")

    def fail(src: Any, dst: Any) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(InputError) as info:
        write_atomic(path, "new content\n")
    assert str(info.value) == f"{path}: cannot write: Permission denied"
    assert path.read_text() == "old content\n"
    assert _leftovers(tmp_path) == []


def test_write_atomic_keeps_old_file_when_the_disk_fills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_mid_write: Any
) -> None:
    path = tmp_path / "out.yaml"
    path.write_text("old content\n")
    fail_mid_write(OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(InputError) as info:
        write_atomic(path, "new content that is longer\n")
    monkeypatch.undo()
    assert str(info.value) == f"{path}: cannot write: No space left on device"
    assert path.read_text() == "old content\n"
    assert _leftovers(tmp_path) == []


def test_write_atomic_into_a_vanished_directory(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    folder.rmdir()
    path = folder / "out.yaml"
    with pytest.raises(InputError) as info:
        write_atomic(path, "x")
    assert str(info.value) == f"{path}: cannot write: No such file or directory"
    assert not folder.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_leaves_no_tmp_file_when_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt (Ctrl-C) between writing the temporary file and the rename must not leave the
    hidden .tmp file behind; the old file stays whole."""
    path = tmp_path / "out.yaml"
    path.write_text("old content\n")

    def interrupted(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new content\n")
    assert path.read_text() == "old content\n"
    assert _leftovers(tmp_path) == []


def test_write_atomic_temp_file_sits_beside_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename is atomic only within one directory: the temporary file must be a sibling."""
    seen: list[tuple[Path, Path]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        seen.append((Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    path = tmp_path / "out.json"
    write_atomic(path, "{}")
    assert len(seen) == 1
    src, dst = seen[0]
    assert dst == path
    assert src.parent == path.parent
    assert src.name.startswith(".out.json.") and src.name.endswith(".tmp")
