"""`pddplan paper`: the article's figures next to pddplan's. Its JSON carries numbers as numbers
(each row's `values`, beside the formatted text) and matches its schema, and the committed
comparison and the README's summary of it are current: all from one run of the command as the
README quotes it (the paper's twenty thousand requests per plan), which takes a minute and more."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pddplan.cli import app
from pddplan.report.schemas import validate_output

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def paper(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    markdown = tmp_path_factory.mktemp("paper") / "comparison.md"
    result = CliRunner().invoke(app, ["paper", "--json", "--markdown", str(markdown)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert f"wrote {markdown}" in result.stderr  # it wrote the file silently before
    return json.loads(result.stdout), markdown.read_text(encoding="utf-8")


def test_every_row_carries_its_numbers(paper: tuple[dict[str, Any], str]) -> None:
    """`paper --json` gave formatted strings only ("48,068 B"): each row now has `values`."""
    data, _ = paper
    assert data["rows"]
    for row in data["rows"]:
        assert set(row) == {"metric", "article", "pddplan", "why", "values"}
        assert row["values"], row["metric"]
        assert all(isinstance(v, int | float) and math.isfinite(v) for v in row["values"].values()), row
    kv = next(row for row in data["rows"] if row["metric"].startswith("KV bytes per token"))
    assert kv["pddplan"] == f"{kv['values']['kv_bytes_per_token']:,.0f} B"


def test_the_committed_comparison_is_current(paper: tuple[dict[str, Any], str]) -> None:
    """The committed table has the same rows, and the same closed-form figures (KV sizes, which
    no random draw touches); simulated figures may move in their last digit across numpy releases."""
    _, markdown = paper
    committed = (ROOT / "examples" / "pdd-paper" / "comparison.md").read_text(encoding="utf-8")

    def rows(text: str) -> list[list[str]]:
        return [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and " | " in line]

    ours, theirs = rows(markdown), rows(committed)
    hint = "regenerate with: pddplan paper --markdown examples/pdd-paper/comparison.md"
    assert [r[0] for r in ours] == [r[0] for r in theirs], hint
    closed_form = ("| KV bytes per token", "| incremental KV", "| 100-token handoff")
    for mine, committed_row in zip(ours, theirs, strict=True):
        if mine[0].startswith(closed_form):
            assert mine == committed_row, hint


def test_paper_json_matches_its_schema(paper: tuple[dict[str, Any], str]) -> None:
    """tests/test_output_schemas.py checks every other command's output; this run serves for paper's."""
    validate_output("paper", paper[0])


def test_the_readme_paper_block_is_current(paper: tuple[dict[str, Any], str]) -> None:
    """README.md's paper summary is what docs/readme.py writes from this run's JSON (the same as
    `pddplan paper --json`'s, which the script would run otherwise); tests/test_readme.py checks the
    other blocks."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import readme  # docs/readme.py, on the path just above (mypy checks docs/ beside tests/)
    finally:
        sys.path.pop(0)
    committed = {m.group("name"): m.group("body") for m in readme.BLOCK.finditer((ROOT / "README.md").read_text())}
    assert readme.paper_words(paper[0]) == committed["paper"], "regenerate with: python docs/readme.py"
