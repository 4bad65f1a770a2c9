"""The README's resilience walk-through ("Plans that survive the day") can be followed as written:
its three commands run in order in an empty folder, the first writes the `plan.yaml` the others
read, and what the prose says of their outputs is what they print (slow: a robust optimize)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def walkthrough() -> tuple[list[list[str]], str]:
    """(the commands of the section's bash block, the section's prose after the block)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Plans that survive the day", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    commands = [shlex.split(line, comments=True) for line in block[1].splitlines() if line.strip()]
    return commands, section[block.end() :]


def test_the_resilience_walkthrough_runs_as_written(tmp_path: Path) -> None:
    commands, prose = walkthrough()
    assert [c[:2] for c in commands] == [["pddplan", "optimize"], ["pddplan", "whatif"], ["pddplan", "survive"]]
    outputs = []
    for command in commands:
        args = [str(ROOT / a) if a.startswith("workloads/") else a for a in command[1:]]
        done = subprocess.run(
            [sys.executable, "-m", "pddplan", *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])
        outputs.append(done.stdout + done.stderr)
    assert (tmp_path / "plan.yaml").is_file()
    plan = (tmp_path / "plan.yaml").read_text(encoding="utf-8")
    assert "architecture: pdd" in plan and "option: express-40g" in plan and "count: 1" in plan
    assert "one express-40g line" in prose
    assert "all traffic is shed" in outputs[1] and "every request shed" in prose
    grown = re.search(r"price of survival ([+-][0-9.]+%)", outputs[2])
    assert grown is not None and "+1 express-40g line" in outputs[2]
    assert f"one more express-40g line, {grown[1]}" in prose
