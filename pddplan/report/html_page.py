"""The frame of every HTML page pddplan writes (the plan report, the curve pages of `bathtub`,
`sweep` and `cache-curve`): one self-contained document, no script and no external resource, that
reads on a phone (390 px) and on a desktop without the page itself scrolling sideways.

How it stays within the width: a viewport tag (else a phone lays the page out 980 px wide and
shrinks it), charts that scale to their container (`pddplan.report.charts.svg`), tables inside a
wrapper that scrolls on its own (`scrolling`), and long words allowed to break.
"""

from __future__ import annotations

import html

VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'
STYLE = (
    "body{font-family:sans-serif;max-width:1000px;margin:1em auto;padding:0 .8em;color:#222;line-height:1.4;"
    "overflow-wrap:break-word}"
    "h1{font-size:1.5em;overflow-wrap:anywhere}h2{font-size:1.25em}svg{max-width:100%;height:auto}"
    ".scroll{overflow-x:auto;max-width:100%}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em}"
    "td.num{text-align:right;white-space:nowrap}th{background:#f4f4f4}section{margin:1.5em 0}"
    "pre{background:#f8f8f8;padding:.8em;overflow-x:auto;font-size:12px}"
    "figure{margin:1em 0}li{margin:.3em 0}summary{cursor:pointer}.note{color:#555;font-size:.9em}"
)


def page(title: str, body: str, style: str = "") -> str:
    """An HTML document: `title` escaped into <title>, `body` (HTML) as it is, STYLE then `style`."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{VIEWPORT}'
        f"<title>{html.escape(title)}</title><style>{STYLE}{style}</style></head><body>\n"
        f"{body}\n</body></html>\n"
    )


def scrolling(table: str) -> str:
    """A table (HTML) in a wrapper that scrolls sideways by itself when the table is wider than the
    screen, so the page does not."""
    return f'<div class="scroll">{table}</div>'
