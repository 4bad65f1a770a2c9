"""Read engine benchmark results (`sglang.bench_serving`, `vllm bench serve`) into calibration rows.

Formats (field names and units from the tools' own result dicts; docs/export.md cites them):
- sglang-bench: JSON lines, one run per line (`--output-file` appends); SGLang writes a bare
  `Infinity` for an unbounded request rate. The model is in `server_info.model_path` (0.5.5 and
  later), else nowhere.
- vllm-bench: one JSON object (`--save-result`), JSON lines (`--append-result`), or a list (the
  sweep's summary.json); the model is `model_id`; an unbounded rate is the string "inf".
Both give milliseconds in `*_ms`, token totals over successful requests, and `completed`.

Each run becomes at most two rows (`pddplan.calibration.calibrate.Measurement`):
- a client TTFT row (kind prefill, measured_kind client_ttft) when the run held one request at a
  time (max_concurrency 1): the median TTFT is one prefill of the mean prompt plus the serving
  stack's request overhead;
- a client ITL row (kind decode, measured_kind client_itl): the median inter-token latency is one
  decode step at batch = requests in flight / decode instances, at the mean context
  prompt + output / 2. Requests in flight are max_concurrency, else SGLang's measured
  `concurrency`, else Little's law: throughput (req/s) x mean end-to-end latency (s), the latency
  being mean TTFT + mean TPOT x (mean output - 1) where the file has no mean latency.
Prompt and output lengths are the measured means (total tokens / completed), never SGLang's
`random_input_len`, which is the top of a uniform range.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pddplan.calibration.calibrate import Measurement, calibrate_rows, data_tag
from pddplan.calibration.outputs import FromBench
from pddplan.errors import InputError
from pddplan.inputs import model_index
from pddplan.support.jsontext import JsonError, parse_json
from pddplan.support.loading import read_text

BenchFormat = Literal["sglang-bench", "vllm-bench"]
FORMATS: tuple[BenchFormat, ...] = ("sglang-bench", "vllm-bench")

#: Fields every run of a format must carry (what the rows are made of).
REQUIRED: dict[BenchFormat, tuple[str, ...]] = {
    "sglang-bench": ("backend", "completed", "duration", "total_input_tokens", "total_output_tokens", "median_itl_ms"),
    "vllm-bench": ("model_id", "completed", "duration", "total_input_tokens", "total_output_tokens", "median_itl_ms"),
}


@dataclass(frozen=True)
class BenchRun:
    """One benchmark run's summary, in SI units."""

    where: str  # FILE: line N
    engine: Literal["sglang", "vllm"]
    model: str | None  # what the file names (a Hugging Face repo), if anything
    version: str | None  # the server's version, when recorded
    tp: int | None
    max_concurrency: int | None
    in_flight: float | None  # mean requests in flight
    in_flight_source: str
    input_tokens: float  # mean per request
    output_tokens: float
    ttft_median_s: float | None
    itl_median_s: float
    completed: int
    failed: int


def _records(path: Path) -> list[tuple[int, Any]]:
    """(line number, parsed object) for every run in the file."""
    text = read_text(path)
    if not text.strip():
        raise InputError(f"{path}: empty file")
    try:
        whole = parse_json(text, allow_constants=True)
    except JsonError:
        whole = None
    if isinstance(whole, dict):
        return [(1, whole)]
    if isinstance(whole, list):
        return [(1, item) for item in whole]
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, parse_json(line, allow_constants=True)))
        except JsonError as exc:
            raise InputError(f"{path}: line {number}: not JSON ({exc.reason})") from None
    return out


def _number(record: dict[str, Any], key: str, where: str, positive: bool = False) -> float:
    """A finite JSON number (not a boolean, not beyond a float's range: 1e400 as an integer)."""
    value = record.get(key)
    try:
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.nan
    if not math.isfinite(number):
        raise InputError(f"{where}: {key} = {_shown(value)}: expected a finite number")
    if number < 0 or (positive and number == 0):
        raise InputError(f"{where}: {key} = {value!r}: must be {'> 0' if positive else '>= 0'}")
    return number


def _shown(value: Any) -> str:
    """`value` as a message shows it: a long number cut to its first digits."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def _optional_number(record: dict[str, Any], key: str, where: str) -> float | None:
    return None if record.get(key) is None else _number(record, key, where)


def _server_info(record: dict[str, Any]) -> dict[str, Any]:
    """SGLang's server dump: flat, or the PD router's {prefill: [...], decode: [...]} (decode's
    args describe the servers the ITL measures)."""
    info = record.get("server_info")
    if not isinstance(info, dict):
        return {}
    for side in ("decode", "prefill"):
        servers = info.get(side)
        if isinstance(servers, list) and servers and isinstance(servers[0], dict):
            return servers[0]
    return info


def _check_format(record: dict[str, Any], fmt: BenchFormat, where: str) -> None:
    looks_vllm = "model_id" in record and "num_prompts" in record
    if fmt == "sglang-bench" and looks_vllm:
        raise InputError(f"{where}: this is `vllm bench serve` output (model_id, num_prompts): use --from vllm-bench")
    if fmt == "vllm-bench" and not looks_vllm and "dataset_name" in record:
        raise InputError(f"{where}: this is `sglang.bench_serving` output (no model_id): use --from sglang-bench")
    missing = [key for key in REQUIRED[fmt] if key not in record]
    if missing:
        raise InputError(f"{where}: missing field(s) {', '.join(missing)} of a {fmt} result")


def _in_flight(record: dict[str, Any], max_concurrency: int | None, where: str) -> tuple[float | None, str]:
    """Mean requests in flight and how it was found (module docstring)."""
    if max_concurrency is not None:
        return float(max_concurrency), "max_concurrency"
    measured = _optional_number(record, "concurrency", where)
    if measured:
        return measured, "measured concurrency"
    e2e_ms = _optional_number(record, "mean_e2e_latency_ms", where) or _optional_number(record, "mean_e2el_ms", where)
    duration = _number(record, "duration", where, positive=True)
    throughput = record["completed"] / duration
    if e2e_ms:
        return throughput * e2e_ms / 1e3, "Little's law (throughput x mean latency)"
    ttft_ms = _optional_number(record, "mean_ttft_ms", where)
    tpot_ms = _optional_number(record, "mean_tpot_ms", where)
    if ttft_ms is not None and tpot_ms is not None:
        output = record["total_output_tokens"] / record["completed"]
        latency_s = (ttft_ms + tpot_ms * max(output - 1.0, 0.0)) / 1e3
        return throughput * latency_s, "Little's law (throughput x (mean TTFT + mean TPOT x (output - 1)))"
    return None, "unknown (no max_concurrency, concurrency, mean latency, or mean TTFT and TPOT)"


#: Largest concurrency a benchmark run can have meant: no serving benchmark holds a million requests open.
MAX_CONCURRENCY = 1_000_000


def read_bench(path: Path, fmt: BenchFormat) -> list[BenchRun]:
    """Every run in a benchmark result file; InputError (one line: file, line, field) on bad data."""
    if fmt not in FORMATS:
        raise InputError(f"--from = {fmt!r}: expected one of {', '.join(FORMATS)}")
    runs = []
    for number, record in _records(path):
        where = f"{path}: line {number}"
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object (one benchmark run)")
        _check_format(record, fmt, where)
        completed = int(_number(record, "completed", where))
        if completed == 0:
            raise InputError(f"{where}: completed = 0: every request failed; the run measured nothing")
        raw_concurrency = record.get("max_concurrency")
        max_concurrency = None
        if raw_concurrency is not None:
            concurrency = _number(record, "max_concurrency", where)
            if not 1 <= concurrency <= MAX_CONCURRENCY:
                raise InputError(
                    f"{where}: max_concurrency = {raw_concurrency!r}: must be at least 1, at most {MAX_CONCURRENCY:,}"
                )
            max_concurrency = int(concurrency)
        in_flight, source = _in_flight(record, max_concurrency, where)
        ttft_ms = _optional_number(record, "median_ttft_ms", where)
        server = _server_info(record)
        model = record.get("model_id") if fmt == "vllm-bench" else server.get("model_path")
        tp = server.get("tp_size")
        stages = server.get("pp_size")
        if isinstance(stages, int) and stages > 1:
            raise InputError(
                f"{where}: the server ran pp_size {stages}: pipeline-parallel runs are not calibrated (a step "
                "fitted as one stage would mix the stages' sends and fill into the factors)"
            )
        runs.append(
            BenchRun(
                where=where,
                engine="sglang" if fmt == "sglang-bench" else "vllm",
                model=str(model) if model else None,
                version=str(server["version"]) if server.get("version") else None,
                tp=int(tp) if isinstance(tp, int) and tp >= 1 else None,
                max_concurrency=max_concurrency,
                in_flight=in_flight,
                in_flight_source=source,
                input_tokens=_number(record, "total_input_tokens", where, positive=True) / completed,
                output_tokens=_number(record, "total_output_tokens", where, positive=True) / completed,
                ttft_median_s=ttft_ms / 1e3 if ttft_ms else None,
                itl_median_s=_number(record, "median_itl_ms", where, positive=True) / 1e3,
                completed=completed,
                failed=int(_optional_number(record, "failed", where) or 0),
            )
        )
    return runs


def catalog_model_of(repo: str | None) -> str | None:
    """The catalog model whose Hugging Face repo is `repo` (case-insensitive), if any."""
    if not repo:
        return None

    for name, entry in model_index().items():
        if str(entry.get("hf_repo", "")).lower() == repo.lower():
            return name
    return None


def default_stack(runs: list[BenchRun]) -> str:
    """The serving stack the rows calibrate: `sglang-0.5` from a recorded server version
    0.5.x, else the engine's name."""
    engine = runs[0].engine
    versions = {r.version for r in runs if r.version}
    if len(versions) == 1:
        parts = versions.pop().split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return f"{engine}-{parts[0]}.{parts[1]}"
    return engine


def rows_from_runs(
    runs: list[BenchRun],
    gpu: str,
    model: str | None,
    tp: int | None,
    stack: str,
    decode_instances: int = 1,
) -> tuple[list[Any], list[str]]:
    """Calibration rows (`Measurement`) from benchmark runs, and the notes that say what each
    assumed or skipped (module docstring)."""

    if decode_instances < 1:
        raise InputError(f"--decode-instances = {decode_instances}: must be at least 1")
    rows: list[Measurement] = []
    notes: list[str] = []
    for run in runs:
        name = model or catalog_model_of(run.model)
        if name is None:
            named = f"names {run.model!r}, not a catalog model's repo" if run.model else "names no model"
            raise InputError(f"{run.where}: the run {named}: give --model NAME (a catalog model or a config file)")
        width = tp or run.tp
        if width is None:
            raise InputError(f"{run.where}: the file does not record the tensor-parallel size: give --tp N")
        if tp is not None and run.tp is not None and tp != run.tp:
            raise InputError(f"{run.where}: --tp {tp} but the server ran tp_size {run.tp}")
        if run.failed:
            notes.append(
                f"{run.where}: {run.failed} request(s) failed; the figures cover the {run.completed} that completed"
            )
        common: dict[str, Any] = {
            "model": name,
            "gpu": gpu,
            "tp": width,
            "weight_dtype": "",
            "kv_dtype": "",
            "split": "fit",
            "stack": stack,
        }
        line = len(rows) + 2  # as if in a CSV written from these rows (header on line 1)
        prompt = max(1, round(run.input_tokens))
        if run.max_concurrency == 1 and run.ttft_median_s:
            rows.append(
                Measurement(
                    kind="prefill",
                    tokens=prompt,
                    cached=0,
                    batch=1,
                    context=0,
                    measured_s=run.ttft_median_s,
                    line=line,
                    measured_kind="client_ttft",
                    **common,
                )
            )
            line += 1
        elif run.ttft_median_s:
            notes.append(
                f"{run.where}: TTFT at concurrency {run.max_concurrency or 'unbounded'} includes queueing; not used"
            )
        if run.in_flight is None:
            notes.append(f"{run.where}: requests in flight {run.in_flight_source}; ITL not used")
            continue
        batch = max(1, round(run.in_flight / decode_instances))
        context = round(run.input_tokens + run.output_tokens / 2)
        rows.append(
            Measurement(
                kind="decode",
                tokens=1,
                cached=0,
                batch=batch,
                context=context,
                measured_s=run.itl_median_s,
                line=line,
                measured_kind="client_itl",
                **common,
            )
        )
        notes.append(
            f"{run.where}: ITL {run.itl_median_s * 1e3:.2f} ms -> decode step at batch {batch} "
            f"({run.in_flight:.1f} in flight by {run.in_flight_source}, {decode_instances} decode instance(s)), "
            f"context {context}"
        )
    if not rows:
        raise InputError("the benchmark files gave no calibration rows (see the notes above)")
    return rows, notes


def rows_csv(rows: list[Any]) -> str:
    """The rows as a measurements CSV `pddplan calibrate` reads."""

    columns = (
        "model",
        "gpu",
        "tp",
        "kind",
        "tokens",
        "cached",
        "batch",
        "context",
        "measured_s",
        "measured_kind",
        "stack",
    )
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow(
            [
                r.model,
                r.gpu,
                r.tp,
                r.kind,
                r.tokens,
                r.cached,
                r.batch,
                r.context,
                f"{r.measured_s:.6g}",
                r.measured_kind,
                r.stack,
            ]
        )
    return buffer.getvalue()


@dataclass(frozen=True)
class BenchFit:
    """`calibrate --from`'s result: the rows made, what they assumed, and the fit."""

    format: str
    files: list[Path]
    stack: str
    rows: list[Any]
    notes: list[str]
    profile: Any  # HardwareProfile with the stack's factors
    result: Any  # CalibrationResult

    def to_output(self) -> FromBench:
        """What `calibrate --from` read, as `--json` prints it under `from_bench`."""
        return FromBench(
            format=self.format,
            files=[str(p) for p in self.files],
            stack=self.stack,
            rows=len(self.rows),
            notes=self.notes,
        )


def calibrate_from_bench(
    files: list[Path],
    fmt: BenchFormat,
    gpu: str,
    model: str | None = None,
    tp: int | None = None,
    stack: str | None = None,
    decode_instances: int = 1,
) -> BenchFit:
    """Fit `gpu`'s factors for `stack` (default: from the files) to the rows the benchmark files
    give (`rows_from_runs`), pulled towards the profile's own factors."""

    runs = [run for path in files for run in read_bench(path, fmt)]
    if not runs:
        raise InputError(f"{', '.join(map(str, files))}: no benchmark runs in the file(s)")
    stack = stack or default_stack(runs)
    rows, notes = rows_from_runs(runs, gpu, model, tp, stack, decode_instances)
    where = ", ".join(map(str, files))
    profile, result = calibrate_rows(rows, gpu, data_tag(*files), where, stack=stack)
    return BenchFit(fmt, list(files), stack, rows, notes, profile, result)
