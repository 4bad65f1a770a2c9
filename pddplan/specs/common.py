"""Shared building blocks of the input specs: the strict base model and sourced figures."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from pddplan.errors import InputError
from pddplan.support.limits import MAX_RATE_RPS, MIN_RATE_RPS
from pddplan.support.units import parse_bandwidth, parse_seconds

#: Source tags that need no entry in a file's `sources` table.
FREE_SOURCE_PREFIXES = ("assumption:", "derived:", "unknown:", "user:", "calibrated:")


def _written_with_unit(parse: Callable[[str, str], float], unit: float) -> BeforeValidator:
    """A number field that also takes its quantity written with a unit (`"500ms"` in a field in
    seconds, `"40Gbps"` in one in Gbps): value = parse(text) / unit, the field's own unit in SI."""

    def convert(value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return parse(value, "value") / unit
        except InputError as error:
            raise ValueError(str(error).removeprefix(f"value = {value!r}: ")) from None

    return BeforeValidator(convert)


_IN_SECONDS = _written_with_unit(parse_seconds, 1.0)
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
# Physical bounds, each with its reason: a number beyond them is a typo or an attack, and letting it
# through turns into a hang (a 1e30-token prompt, a 1-token chunk, a 1 ns fluctuation step) or
# runaway memory (a million histogram bins) far from the field that caused it.
#: a sequence length: no model's context comes near 10 million tokens
TokenCount = Annotated[int, Field(gt=0, le=10_000_000)]
TokenLength = Annotated[float, Field(gt=0, le=10_000_000)]
#: an offered rate: a million requests/s is beyond any single deployment; one request in 11.6 days
#: (1e-6/s) is the slowest that keeps arrival times resolvable to a microsecond
RateRps = Annotated[float, Field(ge=MIN_RATE_RPS, le=MAX_RATE_RPS)]
#: a chunked-prefill budget: engines use 512-16,384; fewer than 16 tokens per step is not an engine
ChunkTokens = Annotated[int, Field(ge=16, le=10_000_000)]
#: a time in seconds the model steps through (fluctuation steps): at least a millisecond
StepSeconds = Annotated[float, Field(ge=1e-3, le=86_400), _IN_SECONDS]
#: a duration in seconds (SLA targets, retention, gaps): at most a day
Seconds = Annotated[float, Field(gt=0, le=86_400), _IN_SECONDS]
NonNegativeSeconds = Annotated[float, Field(ge=0, le=86_400), _IN_SECONDS]
#: bins of a histogram: each costs memory in the closed form's classes
MAX_BINS = 1000
#: money per unit ($/h, $/month, $ per million tokens): a billion is beyond any price
Usd = Annotated[float, Field(ge=0, le=1e9)]
PositiveUsd = Annotated[float, Field(gt=0, le=1e9)]
#: a line's capacity in Gbps: 1 Pbps is beyond any leased line, and below 1 Mbps a KV transfer of
#: a gigabyte takes hours (at 5 bytes/s the simulation spun for minutes on one transfer's events)
LineGbps = Annotated[float, Field(ge=1e-3, le=1e6), _written_with_unit(parse_bandwidth, 1e9 / 8)]
#: a round-trip time in milliseconds: a minute is beyond any network path
RttMs = Annotated[float, Field(gt=0, le=60_000), _written_with_unit(parse_seconds, 1e-3)]
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", min_length=1, max_length=64)]

_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


class StrictModel(BaseModel):
    """Base of every input spec: unknown keys rejected, no silent type coercion, immutable, and no
    NaN or infinity in any number (a `gt=0` bound lets `.inf` through)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)


class Source(StrictModel):
    """Where a figure comes from: a document and the date it was read."""

    title: str
    url: str | None = None
    accessed: str = Field(description="date read, YYYY-MM or YYYY-MM-DD")

    @model_validator(mode="after")
    def _date_format(self) -> Source:
        if not _DATE.match(self.accessed):
            raise ValueError(f"accessed must look like 2026-05 or 2026-05-01, got {self.accessed!r}")
        return self


class Figure(StrictModel):
    """A number with its provenance.

    `source` is a key of the file's `sources` table, or a free tag starting with `assumption:`,
    `derived:`, `unknown:` or `user:`. An unknown figure has `value: null` and an `unknown:` source:
    pddplan refuses to use it until the user sets it.
    """

    value: float | None
    source: str = Field(min_length=1)
    as_of: str | None = Field(default=None, description="date the figure was valid, YYYY-MM[-DD]")
    note: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Figure:
        if self.value is None and not self.source.startswith("unknown:"):
            raise ValueError("a figure with value null must have a source starting with 'unknown:'")
        if self.value is not None and self.value < 0:
            raise ValueError(f"must be >= 0, got {self.value}")
        if self.as_of is not None and not _DATE.match(self.as_of):
            raise ValueError(f"as_of must look like 2026-05 or 2026-05-01, got {self.as_of!r}")
        return self

    def cited_keys(self) -> list[str]:
        """Source-table keys this figure cites (comma-separated keys are allowed)."""
        if self.source.startswith(FREE_SOURCE_PREFIXES):
            return []
        return [key.strip() for key in self.source.split(",")]


def check_sources_cited(figures: dict[str, Figure], sources: dict[str, Source]) -> None:
    """Raise ValueError when a figure cites a key missing from the `sources` table."""
    for path, figure in figures.items():
        for key in figure.cited_keys():
            if key not in sources:
                known = ", ".join(sorted(sources)) or "none"
                raise ValueError(f"{path} cites source {key!r}, which is not in the sources table (known: {known})")
