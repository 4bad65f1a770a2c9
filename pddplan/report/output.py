"""Where output goes: results on stdout (tables for people, or `--json` for machines, nothing else);
progress, notices, warnings and errors on stderr, so results can be piped, grepped and redirected."""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Collection
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from pddplan.support.jsontext import to_json
from pddplan.support.outputs import Output


def results() -> Console:
    """A console on stdout for the result tables, charts and summaries people read.

    When stdout is not a terminal (a pipe, a file, a CI log), tables get 160 columns instead of
    rich's 80, unless COLUMNS says otherwise.
    """
    return _console(stderr=False)


_QUIET = False


def set_quiet(quiet: bool) -> None:
    """`pddplan -q`: progress, status lines and notices on stderr are dropped (errors are not:
    they are printed apart, by the CLI)."""
    global _QUIET
    _QUIET = quiet


def diagnostics() -> Console:
    """A console on stderr for progress, notices ("wrote FILE") and warnings (silent with -q)."""
    console = _console(stderr=True)
    console.quiet = _QUIET
    console.soft_wrap = True  # a notice naming a long path stays one line (as `typer.echo` printed it)
    return console


def wrote(path: object) -> None:
    """The notice on stderr that a file was written: `wrote PATH` (silent with -q)."""
    diagnostics().print(f"wrote {path}", markup=False, highlight=False)


def progress_bar() -> Any:
    """A transient progress bar on stderr, shown only when stderr is a terminal (a CI log or a
    pipe gets no bar and no stray blank line). It redraws when a step is done (`update` with
    `refresh=True`), with no refresh thread, so the points may run on forked workers while it
    shows (`pddplan.support.forking.fork_is_safe`)."""
    console = diagnostics()
    if not console.is_terminal or console.quiet:  # no disabled rich Progress: older rich prints a newline
        return _NoProgress()

    return Progress(console=console, transient=True, auto_refresh=False)


def status(text: str) -> Any:
    """A one-line status on stderr (`with status("...") as line: line.update("...")`), shown only
    when stderr is a terminal. It redraws only when updated: no refresh thread, so the optimizer
    may fork its workers while it shows (a fork beside a running thread can deadlock the child)."""
    console = diagnostics()
    if not console.is_terminal or console.quiet:
        return _NoStatus()

    return _LiveStatus(Live(Text(text), console=console, auto_refresh=False, transient=True))


class _LiveStatus:
    def __init__(self, live: Any) -> None:
        self.live = live

    def __enter__(self) -> _LiveStatus:
        self.live.__enter__()
        self.live.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)

    def update(self, text: str) -> None:

        self.live.update(Text(text), refresh=True)


class _NoStatus:
    def __enter__(self) -> _NoStatus:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, text: str) -> None:
        return None


class _NoProgress:
    """The part of rich's Progress the commands use, doing nothing."""

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None) -> int:
        return 0

    def update(self, task: int, completed: float | None = None, refresh: bool = False) -> None:
        return None


class _Console(Console):
    """A rich console whose tables never cut a name or a number: a cell wraps at spaces when its
    column must shrink, and a table whose words alone are wider than the terminal is shown one
    record per row instead (field: value lines under the row's name)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*[self._fitted(item) for item in objects], **kwargs)

    def _fitted(self, renderable: Any) -> Any:

        if isinstance(renderable, Panel):
            renderable.renderable = self._fitted(renderable.renderable)
            return renderable
        if not isinstance(renderable, Table):
            return renderable
        for column in renderable.columns:
            column.overflow = "fold"
            column._cells = [self._fitted(cell) for cell in column._cells]
        if not renderable.columns:
            return renderable
        words = _longest_words(renderable)
        if _unbroken_width(renderable, words) > self.width:
            return _records(renderable)
        _set_widths(renderable, words, self.width)
        return self._title_apart(renderable)

    def _title_apart(self, table: Table) -> Any:
        """`table`, or its title as a line of its own above it when the title is wider than the
        table: rich wraps a title to the table's width, which breaks a long name (a field path)
        mid-word and a number from its unit; a line of its own wraps at the terminal's width."""
        if table.title is None:
            return table
        title = table.title.copy() if isinstance(table.title, Text) else Text(str(table.title))
        if title.cell_len <= min(self.measure(table).maximum, self.width):
            return table
        title.stylize(table.title_style or "table.title")
        table.title = None
        return Group(title, table)


def fits(console: Console, table: Table) -> bool:
    """Whether `table` prints as a table at `console`'s width with no word broken (a table that
    does not becomes one record per row when printed)."""
    return _unbroken_width(table, _longest_words(table)) <= console.width


def key_columns(console: Console, table: Table, keep: Collection[str]) -> Table:
    """`table` itself when it fits `console`'s width; otherwise a copy holding only the columns
    whose headers are in `keep` (the key figures), its caption naming the columns left out and
    `--detail`, which shows them all (`pddplan hardware list` at 80 columns)."""
    if fits(console, table):
        return table
    narrow = copy.copy(table)
    narrow.columns = [column for column in table.columns if str(column.header) in keep]
    left_out = [" ".join(str(column.header).split()) for column in table.columns if str(column.header) not in keep]
    if left_out:
        note = f"{len(left_out)} more column{'s' if len(left_out) > 1 else ''} with --detail: {', '.join(left_out)}"
        narrow.caption = f"{table.caption}; {note}" if table.caption else note
        narrow.caption_justify = "left"
    return narrow


def _longest_words(table: Any) -> list[int]:
    """Per column, its longest word (header or cell): a name or a number never breaks."""

    def longest_word(value: Any) -> int:
        return max((len(word) for word in _plain(value).split()), default=0)

    return [
        max([longest_word(column.header), *(longest_word(cell) for cell in column._cells)]) for column in table.columns
    ]


def _plain(value: Any) -> str:

    return value.plain if isinstance(value, Text) else str(value) if isinstance(value, str | int | float) else ""


def _set_widths(table: Any, words: list[int], width: int) -> None:
    """When the table is wider than `width`, fix each column's width: at least its longest word,
    plus a share of the room left in proportion to how much longer its longest line is (rich's
    own shrinking can cut a column below its longest word)."""
    lines = [
        max(len(line) for value in [column.header, *column._cells] for line in (_plain(value).splitlines() or [""]))
        for column in table.columns
    ]
    overhead = _unbroken_width(table, [0] * len(words))
    if sum(lines) + overhead <= width:
        return
    room = width - overhead - sum(words)
    extra = [line - word for line, word in zip(lines, words, strict=True)]
    total_extra = sum(extra)
    shares = [room * e // total_extra if total_extra else 0 for e in extra]
    for column, word, share in zip(table.columns, words, shares, strict=True):
        column.width = word + share


def _unbroken_width(table: Any, words: list[int]) -> int:
    """Columns a table needs when no word may break: the longest words, padding and borders."""
    borders = len(words) + 1 if table.box is not None else 0
    return sum(words) + _horizontal_padding(table) * len(words) + borders


def _horizontal_padding(table: Any) -> int:
    """Left plus right padding of a cell (rich stores padding as top, right, bottom, left)."""
    _, right, _, left = table.padding
    return int(right + left)


def _records(table: Any) -> Any:
    """`table` as one block per row: the row's first cell as a heading, then `header: value` for
    every other column (what a table too wide for the terminal becomes)."""

    blocks: list[Any] = []
    if table.title:
        blocks.append(Text(str(table.title), style="bold"))
    columns = table.columns
    for row in range(table.row_count):
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for column in columns[1:]:
            grid.add_row(" ".join(str(column.header).split()), column._cells[row])
        blocks += [Text(" ".join(str(columns[0]._cells[row]).split()), style="bold"), grid]
    if table.caption:
        blocks.append(Text(str(table.caption)))
    return Group(*blocks)


def _console(stderr: bool) -> Console:
    console = _Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = _Console(stderr=stderr, highlight=False, width=160)
    return console


def emit_json(data: Output | list[Output] | Any) -> None:
    """Write `data` (a command's typed result, or a list of them) as JSON to stdout, and nothing else."""
    if isinstance(data, Output):
        data = data.json_data()
    elif isinstance(data, list) and data and isinstance(data[0], Output):
        data = [item.json_data() for item in data]
    sys.stdout.write(to_json(data) + "\n")
    sys.stdout.flush()
