"""The README's figures are the tool's: every generated block of README.md is what
`docs/readme.py` writes from the commands it quotes, run now (slow: it reruns them all).

The blocks are checked a group at a time, each group the blocks that share their commands' runs, so
the test workers split the commands between them; the paper block is checked in tests/test_paper.py,
from the `pddplan paper` run that file makes anyway."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: the blocks that share their commands' runs (docs/readme.py caches a run per process)
GROUPS = {
    "the main job": ("main-job", "main-job-words", "robustness"),
    "the day": ("day",),
    "a trace to a plan": ("trace",),
    "cache-plan": ("cache-plan",),
    "the quick ones": ("bathtub", "tiers", "calibration", "peer"),
}
#: checked elsewhere, from a run of its command that test makes anyway
ELSEWHERE = {"paper": "tests/test_paper.py::test_the_readme_paper_block_is_current"}


def readme_script() -> ModuleType:
    """docs/readme.py, imported."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import readme  # docs/readme.py, on the path just above (mypy checks docs/ beside tests/)
    finally:
        sys.path.pop(0)
    return readme


@pytest.mark.parametrize("group", list(GROUPS))
def test_readme_blocks_match_the_tool(group: str) -> None:
    stale = readme_script().stale(GROUPS[group])
    assert not stale, f"README blocks differ from the tool: {', '.join(stale)}; regenerate with: python docs/readme.py"


def test_every_generated_block_has_a_generator() -> None:
    """A block the script does not know, or a generator with no block, is an error; and every block
    is checked by one test (cheap checks)."""
    readme = readme_script()
    names = set(readme.BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    assert {name for _, name, *_ in names} == set(readme.BLOCKS)
    checked = [name for group in GROUPS.values() for name in group] + list(ELSEWHERE)
    assert sorted(checked) == sorted(readme.BLOCKS)
