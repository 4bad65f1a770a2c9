"""Capture every command's `--json` on the shipped workloads and examples, to show a change that
should move nothing moved nothing (issue 34's restructuring, issue 38's speed work).

    python benchmarks/capture_outputs.py OUT_DIR           # write one file per command
    python benchmarks/capture_outputs.py OUT_DIR --compare BEFORE_DIR

Each command runs as a user runs it (`python -m pddplan ... --json`, the repository as the working
folder, temporary files in a fresh folder whose path is replaced by `TMP` in the output). With
--compare, every file must be byte-identical to BEFORE_DIR's; the differing ones are listed and the
script exits 1. `--same-json` also passes a file whose bytes differ but whose document is the same
(keys in another order, an integer-valued float printed as 3.0): what moving the outputs to typed
results (issue 34) changed, and nothing else. `--no-capture` compares OUT_DIR as it stands.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = sorted(p.stem for p in (ROOT / "workloads").glob("*.yaml"))
TRACE = "examples/traces/mooncake-synthetic.jsonl"
PLAN = "examples/plans/pdd-agent-64k-pdd.yaml"
INTRA = "tests/data/export/pdd-agent-64k-pd-intra.yaml"


def commands(tmp: str) -> dict[str, list[str]]:
    """Name -> arguments of every command captured."""
    out: dict[str, list[str]] = {}
    for name in WORKLOADS:
        out[f"optimize-{name}"] = ["optimize", f"workloads/{name}.yaml", "--requests", "2000"]
        out[f"bathtub-{name}"] = ["bathtub", name, "--points", "11"]
        out[f"workloads-show-{name}"] = ["workloads", "show", name]
    out |= {
        "optimize-bench-h200": [
            "optimize",
            "examples/bench/llama70b-h200.yaml",
            "-a",
            "pd-intra",
            "--requests",
            "2000",
        ],
        "optimize-qwen3-32b": ["optimize", "benchmarks/qwen3-32b-16k.yaml", "--requests", "2000"],
        "optimize-rate": ["optimize", "pdd-agent-64k", "--rate", "2", "--no-verify"],
        "optimize-budget": ["optimize", "pdd-agent-64k", "--budget", "60", "--no-verify", "-a", "pdd"],
        "optimize-robust": ["optimize", "pdd-agent-64k-day", "--robust", "-a", "pdd", "--no-verify"],
        "optimize-survive": ["optimize", "pdd-agent-64k", "-a", "pdd", "--survive", "instance", "--no-verify"],
        "evaluate-pdd": ["evaluate", PLAN, "pdd-agent-64k"],
        "evaluate-intra": ["evaluate", INTRA, "pdd-agent-64k"],
        "evaluate-trace": ["evaluate", PLAN, "pdd-agent-64k", "--trace", TRACE, "--cache-capacity", "1TB"],
        "simulate-pdd": ["simulate", PLAN, "pdd-agent-64k", "--requests", "3000", "--seed", "3"],
        "simulate-intra": ["simulate", INTRA, "pdd-agent-64k", "--requests", "3000"],
        "whatif-rate": ["whatif", PLAN, "pdd-agent-64k", "--rate", "x1.5"],
        "whatif-fail": ["whatif", PLAN, "pdd-agent-64k", "--fail", "instance:decode"],
        "survive": ["survive", PLAN, "pdd-agent-64k", "--survive", "instance"],
        "sweep": ["sweep", "pdd-agent-64k", "--param", "arrival.rate_rps", "--values", "2,4,8"],
        "estimate-decode": [
            "estimate",
            "--model",
            "deepseek-v3.2",
            "--gpu",
            "h200",
            "--tp",
            "8",
            "--decode-batch",
            "64",
            "--context",
            "8000",
        ],
        "estimate-prefill": ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prefill", "4096"],
        "export-sglang": ["export", PLAN, "pdd-agent-64k", "--target", "sglang"],
        "export-vllm": ["export", INTRA, "pdd-agent-64k", "--target", "vllm"],
        "export-k8s": ["export", PLAN, "pdd-agent-64k", "--target", "k8s"],
        "hardware-list": ["hardware", "list"],
        "hardware-show": ["hardware", "show", "gpu-b"],
        "models-list": ["models", "list"],
        "models-show": ["models", "show", "deepseek-v3.2"],
        "workloads-list": ["workloads", "list"],
        "architectures": ["architectures"],
        "trace-import": ["trace", "import", TRACE],
        "cache-curve": ["cache-curve", TRACE, "--model", "deepseek-v3.2", "--capacity", "10GB,100GB,1TB"],
        "cache-plan": [
            "cache-plan",
            TRACE,
            "--like",
            "pdd-agent-64k",
            "--capacity",
            "0,100GB",
            "--usd-per-gb-month",
            "2",
        ],
        "accuracy": ["accuracy"],
        "calibrate": [
            "calibrate",
            "--from",
            "sglang-bench",
            "examples/bench/sglang-llama70b-h200-tp4.jsonl",
            "--gpu",
            "h200",
            "--model",
            "llama-3.1-70b",
            "--tp",
            "4",
        ],
        "gate": ["gate", "examples/ci/baseline.json"],
        "paper": ["paper"],
        "agreement": ["agreement", "--requests", "2000"],
    }
    return out


def capture(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "COLUMNS": "120"}
        for name, args in commands(tmp).items():
            done = subprocess.run(
                [sys.executable, "-m", "pddplan", *args, "--json"], cwd=ROOT, env=env, capture_output=True, text=True
            )
            text = done.stdout.replace(tmp, "TMP") + f"\n# exit {done.returncode}\n"
            (folder / f"{name}.json").write_text(text, encoding="utf-8")
            print(
                f"{name}: exit {done.returncode}, sha256 {hashlib.sha256(text.encode()).hexdigest()[:12]}",
                file=sys.stderr,
            )


def _parsed(path: Path) -> Any:
    """A captured file as (the JSON document, the exit line); None for a file that is not JSON."""
    text, _, exit_line = path.read_text(encoding="utf-8").rpartition("\n# exit ")
    try:
        return json.loads(text) if text.strip() else None, exit_line
    except json.JSONDecodeError:
        return None, exit_line


def compare(folder: Path, before: Path, same_json: bool = False) -> int:
    """1 unless every file of `before` is byte-identical in `folder`; with `same_json`, a file that
    differs in bytes passes when both parse to equal documents (key order aside, 3 == 3.0): what a
    change of serializer moves and a change of figures does not."""
    names = [p.name for p in sorted(before.glob("*.json"))]
    differ = [n for n in names if not (folder / n).is_file() or (folder / n).read_bytes() != (before / n).read_bytes()]
    reordered = [
        n for n in differ if same_json and (folder / n).is_file() and _parsed(folder / n) == _parsed(before / n)
    ]
    changed = [n for n in differ if n not in reordered]
    if reordered:
        print(f"same JSON, other bytes ({len(reordered)}): " + ", ".join(reordered), file=sys.stderr)
    if changed:
        print(f"differ ({len(changed)}): " + ", ".join(changed), file=sys.stderr)
        return 1
    print(
        f"{len(names) - len(reordered)} of {len(names)} outputs byte-identical, the rest the same JSON", file=sys.stderr
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--compare", type=Path, default=None)
    parser.add_argument("--same-json", action="store_true", help="pass files that parse to equal JSON documents")
    parser.add_argument("--no-capture", action="store_true", help="compare OUT as it is, without running")
    args = parser.parse_args()
    if not args.no_capture:
        capture(args.out)
    return compare(args.out, args.compare, args.same_json) if args.compare is not None else 0


if __name__ == "__main__":
    sys.exit(main())
