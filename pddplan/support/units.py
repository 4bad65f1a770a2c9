"""Quantities written with their unit, read where they enter (flags and strings in files), so
that every value inside the library is in SI units and one spelling means one thing.

- sizes: bytes in decimal (`B`, `KB`, `MB`, `GB`, `TB`, `PB`; 1 GB = 1e9 B) or binary units
  (`KiB`, `MiB`, `GiB`, `TiB`, `PiB`; 1 GiB = 2**30 B), or a count of tokens written as such
  (`500k tokens`, `2M tokens`, `2Mtok`; multipliers k/K = 1e3, M = 1e6, G = 1e9);
- bandwidths: bits per second (`Mbps`, `Gbps`, `Tbps`) or bytes per second (`MB/s`, `GB/s`,
  `TB/s`, `GiB/s`);
- times: `us`, `ms`, `s`, `min`, `h`.

A lone multiplier (`10G`, `2M`, `1T`) is refused: it says neither bytes nor tokens. A bare number
is accepted only where its unit is already fixed (a field whose name carries it, or zero).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pddplan.errors import InputError

BYTE_UNITS = {
    "B": 1.0,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "PB": 1e15,
    "KIB": 2.0**10,
    "MIB": 2.0**20,
    "GIB": 2.0**30,
    "TIB": 2.0**40,
    "PIB": 2.0**50,
}
TOKEN_MULTIPLIERS = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
BIT_RATE_UNITS = {"BPS": 1.0 / 8, "KBPS": 1e3 / 8, "MBPS": 1e6 / 8, "GBPS": 1e9 / 8, "TBPS": 1e12 / 8}
TIME_UNITS = {"US": 1e-6, "MS": 1e-3, "S": 1.0, "MIN": 60.0, "H": 3600.0}

SIZE_SPELLINGS = "10GB, 10GiB, 1TB or 2M tokens"
BANDWIDTH_SPELLINGS = "40Gbps or 5GB/s"
TIME_SPELLINGS = "500ms, 2s or 5min"

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_QUANTITY = re.compile(_NUMBER + r"\s*([A-Za-z/ ]*?)\s*")
_TOKENS = re.compile(r"([kKMG]?)\s*(?:tokens?|tok)")


@dataclass(frozen=True)
class Size:
    """A size as written: bytes (`size_bytes`) or tokens (`tokens`), exactly one of them set,
    except zero, which is both."""

    text: str
    size_bytes: float | None
    tokens: float | None


def _split(text: str, where: str, spellings: str) -> tuple[float, str]:
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise InputError(f"{where} = {text!r}: expected a number with its unit, e.g. {spellings}")
    value = float(match.group(1))
    if not math.isfinite(value):
        raise InputError(f"{where} = {text!r}: expected a finite number")
    return value, match.group(2).strip()


def parse_size(text: str, where: str) -> Size:
    """`10GB` -> 1e10 bytes, `1GiB` -> 2**30 bytes, `2M tokens` -> 2e6 tokens, `0` -> nothing.
    InputError naming `where` for a lone multiplier (`10G`), an unknown unit or a bare non-zero
    number."""
    value, unit = _split(text, where, SIZE_SPELLINGS)
    if unit == "":
        if value == 0:
            return Size(text, 0.0, 0.0)
        raise InputError(f"{where} = {text!r}: give its unit, e.g. {SIZE_SPELLINGS}")
    tokens = _TOKENS.fullmatch(unit)
    if tokens is not None:
        return Size(text, None, value * TOKEN_MULTIPLIERS[tokens.group(1).upper()])
    if unit.upper() in BYTE_UNITS and not unit.endswith("b"):
        return Size(text, value * BYTE_UNITS[unit.upper()], None)
    if unit.upper() in BYTE_UNITS:
        raise InputError(f"{where} = {text!r}: {unit!r} reads as bits; write {value:g}{unit[:-1]}B for bytes")
    if unit.upper() in ("K", "M", "G", "T", "P"):
        tokens_too = f" or {value:g}{unit} tokens" if unit.upper() in TOKEN_MULTIPLIERS else ""
        raise InputError(
            f"{where} = {text!r}: {unit!r} is ambiguous (bytes or tokens?): write {value:g}{unit.upper()}B "
            f"for bytes{tokens_too}"
        )
    raise InputError(f"{where} = {text!r}: unknown unit {unit!r}; expected e.g. {SIZE_SPELLINGS}")


def parse_bandwidth(text: str, where: str) -> float:
    """Bytes per second: `40Gbps` -> 5e9, `5GB/s` -> 5e9, `1GiB/s` -> 2**30. A bare number, a
    bit rate written as `Gb/s`, and `GBps` or `GBPS` (bytes or bits? they differ 8 times) are
    refused (`b` or `B` is easy to miss: `bps` or `B/s` say it)."""
    value, unit = _split(text, where, BANDWIDTH_SPELLINGS)
    if unit.upper() in BIT_RATE_UNITS:
        if not unit.endswith("bps"):
            raise InputError(
                f"{where} = {text!r}: {unit!r} may be bytes or bits; write {value:g}{unit[:-3]}bps for bits "
                f"or {value:g}{unit[:-3].upper()}B/s for bytes"
            )
        return value * BIT_RATE_UNITS[unit.upper()]
    if unit.endswith("/s") and unit[:-2].upper() in BYTE_UNITS and not unit[:-2].endswith("b"):
        return value * BYTE_UNITS[unit[:-2].upper()]
    if unit.endswith("b/s"):
        raise InputError(f"{where} = {text!r}: {unit!r} reads as bits; write {value:g}{unit[:-3]}bps or bytes as GB/s")
    raise InputError(f"{where} = {text!r}: expected a bandwidth such as {BANDWIDTH_SPELLINGS}")


def parse_seconds(text: str, where: str) -> float:
    """`500ms` -> 0.5, `2s` -> 2, `5min` -> 300; a bare number is refused."""
    value, unit = _split(text, where, TIME_SPELLINGS)
    if unit.upper() not in TIME_UNITS or unit != unit.lower():
        raise InputError(f"{where} = {text!r}: expected a time such as {TIME_SPELLINGS}")
    return value * TIME_UNITS[unit.upper()]
