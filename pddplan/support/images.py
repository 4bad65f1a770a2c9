"""Whether PNG and SVG charts can be drawn: they come from matplotlib, an optional extra
(`pip install 'pddplan[plot]'`), so a command that is asked for one checks before its work starts,
not after it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pddplan.errors import InputError


def require_image_support(fmt: str) -> None:
    """InputError when matplotlib (the `plot` extra) is not installed: checked before a command
    starts its work, not after it."""
    if importlib.util.find_spec("matplotlib") is None:
        raise InputError(f"--{fmt} needs matplotlib, an optional extra: pip install 'pddplan[plot]' (or use --html)")


def check_image_outputs(png: Path | None, svg: Path | None) -> None:
    """InputError when `--png` or `--svg` (whichever is asked for, PNG first) cannot be drawn, or
    names a file of another kind (`--png chart.svg` wrote PNG bytes under an .svg name)."""
    for fmt, path in (("png", png), ("svg", svg)):
        if path is not None:
            if path.suffix.lower() != f".{fmt}":
                raise InputError(f"--{fmt} = {str(path)!r}: the chart is {fmt.upper()}; name it .{fmt}")
            require_image_support(fmt)
