"""The README's figures are the tool's: every generated block of README.md is what
`docs/readme.py` writes from the commands it quotes, run now (slow: it reruns them all)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_blocks_match_the_tool() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "readme.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr + "\nregenerate with: python docs/readme.py"


def test_every_generated_block_has_a_generator() -> None:
    """A block the script does not know, or a generator with no block, is an error (cheap check)."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import readme  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    names = set(readme.BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    assert {name for _, name, *_ in names} == set(readme.BLOCKS)
