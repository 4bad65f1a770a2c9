"""Read a request trace one request at a time (a trace of millions of lines is never held whole).

Formats:
  mooncake  JSON lines: timestamp (ms), input_length, output_length, hash_ids (the prompt's
            block hashes, in order; the Mooncake FAST'25 trace release);
  csv       header timestamp_s,input_tokens,output_tokens[,hash_ids] (hash ids space-separated);
  azure     the Azure LLM inference trace: TIMESTAMP (date and time),ContextTokens,GeneratedTokens
            (no hashes).
Timestamps come back in seconds from the first request. A bad line raises InputError naming the
file, the line and the field.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pddplan.errors import InputError
from pddplan.support.jsontext import JsonError, parse_json
from pddplan.support.loading import check_readable

TraceFormat = Literal["mooncake", "csv", "azure"]
FORMATS: tuple[TraceFormat, ...] = ("mooncake", "csv", "azure")
HASHED_FORMATS: tuple[TraceFormat, ...] = ("mooncake", "csv")  # the formats with prompt block hashes
MAX_TOKENS = 100_000_000  # per request: beyond any context window
MAX_TRACE_BYTES = 10**13  # streamed, so only a sanity bound


def hashed_format(fmt: str, flag: str = "--trace-format", why: str = "hits need block hashes") -> TraceFormat:
    """`fmt` as a format whose requests carry prompt block hashes (mooncake, csv), which a hit rate
    or a replay needs; InputError naming `flag` and saying `why` for any other."""
    chosen = next((name for name in HASHED_FORMATS if name == fmt), None)
    if chosen is None:
        raise InputError(f"{flag} = {fmt!r}: expected mooncake or csv ({why})")
    return chosen


class TraceRequest(NamedTuple):
    """One request of a trace: arrival (s from the first), prompt and output tokens, block hashes.
    A named tuple: a trace makes millions of them, and a tuple is the cheapest to build."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None


def _count(path: Path, line: int, field: str, value: Any, typed: bool = False) -> int:
    """A whole number of tokens, 0 to MAX_TOKENS. `typed` (JSON): only a JSON number, not a string
    or a boolean (CSV cells are all text)."""
    if type(value) is int and 0 <= value <= MAX_TOKENS:  # the common case, checked in one step
        return value
    if typed and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise InputError(
            f"{path}: line {line}: {field} = {value!r}: expected a whole number of tokens, not a {_kind(value)}"
        )
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{path}: line {line}: {field} = {value!r}: expected a whole number of tokens") from None
    if not math.isfinite(number) or number < 0 or number != int(number) or number > MAX_TOKENS:
        raise InputError(
            f"{path}: line {line}: {field} = {value!r}: expected a whole number of tokens, 0-{MAX_TOKENS:,}"
        )
    return int(number)


def _kind(value: Any) -> str:
    """What a JSON value is, in JSON's words."""
    return {bool: "boolean", str: "string", list: "list", dict: "object", type(None): "null"}.get(type(value), "value")


#: Latest arrival a trace may give, in seconds from its first request: a year. Arrivals further
#: apart are a unit or clock error, and the per-minute views built from them would not fit in memory.
MAX_TRACE_SPAN_S = 366 * 86_400.0


def _seconds(path: Path, line: int, field: str, value: Any, scale: float, typed: bool = False) -> float:
    if type(value) is int and value >= 0:  # the common case (Mooncake's integer milliseconds)
        return value * scale
    if typed and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise InputError(f"{path}: line {line}: {field} = {value!r}: expected a number, not a {_kind(value)}")
    try:
        number = float(value) * scale
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{path}: line {line}: {field} = {value!r}: expected a number") from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{path}: line {line}: {field} = {value!r}: expected a finite time, at least 0")
    return number


def _hashes(path: Path, line: int, value: Any) -> tuple[int, ...]:
    """Block hashes: a JSON list of integers, or a text of whole numbers separated by spaces (CSV).
    A fractional, boolean or non-finite entry is refused, not truncated."""
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise InputError(f"{path}: line {line}: hash_ids = {value!r}: expected a list of integers")
    try:
        return tuple(map(_whole, items))
    except (TypeError, ValueError, OverflowError):
        bad = next((v for v in items if not _is_whole(v)), items[:1])
        raise InputError(f"{path}: line {line}: hash_ids: expected integers, got {bad!r}") from None


def _whole(value: Any) -> int:
    if type(value) is int:
        return value
    if type(value) is str:
        return int(value)  # ValueError for '1.5', 'x'
    raise ValueError(value)


def _is_whole(value: Any) -> bool:
    try:
        _whole(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _mooncake(path: Path, lines: Iterator[str]) -> Iterator[tuple[int, float, int, int, tuple[int, ...] | None]]:
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            row = parse_json(text)
        except JsonError as exc:
            raise InputError(f"{path}: line {number}: not JSON ({exc.reason})") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}: line {number}: expected a JSON object")
        for key in ("timestamp", "input_length", "output_length"):
            if key not in row:
                raise InputError(f"{path}: line {number}: {key}: missing")
        hashes = _hashes(path, number, row["hash_ids"]) if "hash_ids" in row else None
        yield (
            number,
            _seconds(path, number, "timestamp", row["timestamp"], 1e-3, typed=True),
            _count(path, number, "input_length", row["input_length"], typed=True),
            _count(path, number, "output_length", row["output_length"], typed=True),
            hashes,
        )


def _table(
    path: Path, lines: Iterator[str], azure: bool
) -> Iterator[tuple[int, float, int, int, tuple[int, ...] | None]]:
    reader = csv.DictReader(lines)
    need = (
        ("TIMESTAMP", "ContextTokens", "GeneratedTokens") if azure else ("timestamp_s", "input_tokens", "output_tokens")
    )
    missing = [name for name in need if name not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{path}: line 1: missing column(s) {', '.join(missing)} (need {', '.join(need)})")
    for row in reader:
        number = reader.line_num
        if azure:
            try:
                arrival = datetime.fromisoformat(str(row["TIMESTAMP"]).strip()[:26]).timestamp()
            except ValueError:
                raise InputError(
                    f"{path}: line {number}: TIMESTAMP = {row['TIMESTAMP']!r}: expected a date and time"
                ) from None
            yield (
                number,
                arrival,
                _count(path, number, "ContextTokens", row["ContextTokens"]),
                _count(path, number, "GeneratedTokens", row["GeneratedTokens"]),
                None,
            )
        else:
            hashes = _hashes(path, number, row["hash_ids"]) if row.get("hash_ids") else None
            yield (
                number,
                _seconds(path, number, "timestamp_s", row["timestamp_s"], 1.0),
                _count(path, number, "input_tokens", row["input_tokens"]),
                _count(path, number, "output_tokens", row["output_tokens"]),
                hashes,
            )


def read_trace(path: Path, fmt: TraceFormat = "mooncake", block_tokens: int = 512) -> Iterator[TraceRequest]:
    """The trace's requests in file order, arrivals in seconds from the first request's. InputError
    when a timestamp goes backwards (traces are in arrival order), when a request lists more block
    hashes than its prompt has blocks of `block_tokens` (ceil(prompt / block_tokens)), when it
    arrives more than MAX_TRACE_SPAN_S after the first, or when the file holds no request."""
    if fmt not in FORMATS:
        raise InputError(f"--format = {fmt!r}: expected one of {', '.join(FORMATS)}")
    check_readable(path, max_bytes=MAX_TRACE_BYTES)  # a regular file: not a pipe, device or folder
    with path.open(encoding="utf-8", errors="strict", newline="") as handle:
        try:
            rows = _mooncake(path, handle) if fmt == "mooncake" else _table(path, handle, fmt == "azure")
            first: float | None = None
            last = -math.inf
            for number, arrival, inputs, outputs, hashes in rows:
                if arrival < last:
                    raise InputError(
                        f"{path}: line {number}: the timestamp goes backwards (traces are in arrival order)"
                    )
                if hashes is not None and len(hashes) > -(-inputs // block_tokens):
                    raise InputError(
                        f"{path}: line {number}: hash_ids lists {len(hashes)} blocks, more than the "
                        f"{-(-inputs // block_tokens)} blocks of {block_tokens} tokens its {inputs}-token prompt has"
                    )
                last = arrival
                first = arrival if first is None else first
                if arrival - first > MAX_TRACE_SPAN_S:
                    raise InputError(
                        f"{path}: line {number}: arrives {arrival - first:.3g} s after the first request, more "
                        f"than a year ({MAX_TRACE_SPAN_S:.0f} s): a unit or clock error"
                    )
                yield TraceRequest(arrival - first, inputs, outputs, hashes)
            if first is None:
                raise InputError(f"{path}: no requests (an empty trace)")
        except UnicodeDecodeError:
            raise InputError(f"{path}: not UTF-8 text (a trace is JSON lines or CSV)") from None
