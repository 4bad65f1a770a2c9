"""The multi-search commands a user waits for, each in <= 5 s on the shipped inputs (issue 38):
`gate` on the committed baseline, `agreement`, `paper`, `optimize --robust` over the day's four
scenarios, and `cache-plan` on the README's example. Whole processes with `--json`, three rounds
taken in turn (each round runs every command once), so that a drift of the machine's speed
falls on every command alike; each line is the median of its three.

    python benchmarks/bench_commands.py
"""

from __future__ import annotations

import functools

from _timing import repeat, report, run_cli

TARGET_S = 5.0
ROUNDS = 3
COMMANDS = {  # label: the command line after `pddplan`
    "pddplan gate examples/ci/baseline.json (4 scenarios)": "gate examples/ci/baseline.json",
    "pddplan agreement (every shipped workload)": "agreement --json",
    "pddplan paper": "paper --json",
    "pddplan optimize pdd-agent-64k-day --robust (4 scenarios)": "optimize pdd-agent-64k-day --robust --json",
    "pddplan cache-plan (the README's example, 5 capacities)": "cache-plan examples/traces/mooncake-synthetic.jsonl"
    " --like pdd-agent-64k --capacity 0,10GB,100GB,1TB,10TB --usd-per-gb-month 2 --json",
}


def main() -> None:
    seconds: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(ROUNDS):
        for name, args in COMMANDS.items():
            seconds[name] += repeat(functools.partial(run_cli, *args.split()), 1)
    ok = True
    for name, runs in seconds.items():
        ok &= report(name, runs, TARGET_S)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
