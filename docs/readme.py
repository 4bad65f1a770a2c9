"""Regenerate every figure the README quotes, from the tool itself.

Each block of README.md between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` is the
text one function below writes from pddplan's own output on the shipped inputs (commands run as a
user runs them, at 120 columns). Nothing in a block is typed by hand, so a model change that moves
a figure moves the README with it:

    python docs/readme.py            # rewrite the blocks in README.md
    python docs/readme.py --check    # exit 1 naming each block that differs

The tests check the blocks a group at a time (`stale`, tests/test_readme.py), and the paper block
from the paper run tests/test_paper.py makes anyway (`paper_words`), so no command runs twice.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- generated:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)", re.S)
COLUMNS = "120"


def run(*args: str) -> str:
    """`pddplan ARGS` as a user runs it (120 columns, the repository as the working folder): stdout."""
    env = {**os.environ, "COLUMNS": COLUMNS, "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(
        [sys.executable, "-m", "pddplan", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode not in (0,):
        raise RuntimeError(f"pddplan {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


@functools.cache
def data(*args: str) -> Any:
    """The `--json` output of `pddplan ARGS --json`, run once per process."""
    return json.loads(run(*args, "--json"))


def console(command: str, text: str) -> str:
    """A console block: the command and what it printed, trailing spaces trimmed."""
    lines = [line.rstrip() for line in text.rstrip().splitlines()]
    return "```console\n$ " + command + "\n" + "\n".join(lines) + "\n```\n"


def pct(x: float) -> str:
    return f"{x:+.1%}"


def money(x: float) -> str:
    return f"${x:,.2f}/h"


# -- the main job ----------------------------------------------------------------------------------
MAIN = ("optimize", "workloads/pdd-agent-64k.yaml")


def main_job() -> str:
    return console("pddplan " + " ".join(MAIN), run(*MAIN))


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in report["architectures"]}


def _caches(plan_path: str) -> dict[str, dict[str, Any]]:
    """evaluate's cache reports of a plan on pdd-agent-64k, by cache."""
    figures = data("evaluate", plan_path, "pdd-agent-64k")
    return {c["cache"]: c for c in figures["caches"]}


def cheaper(change: float) -> str:
    """'19.9% cheaper than' / '16.3% dearer than' / 'level with'."""
    if abs(change) < 5e-4:
        return "level with"
    return f"{abs(change):.1%} {'cheaper' if change < 0 else 'dearer'} than"


def main_job_words() -> str:
    from pddplan.inputs import load_model, load_workload
    from pddplan.perf.kv import request_kv_bytes

    # `optimize --robustness --json` is `optimize --json` with the robustness added, so one run serves
    report = {key: value for key, value in data(*MAIN, "--robustness").items() if key != "robustness"}
    archs = _by_name(report)
    gains = report["gains"]
    pdd, intra = archs["pdd"], archs["pd-intra"]
    robustness = data(*MAIN, "--robustness")["robustness"]
    hbm = next(row for row in robustness["rows"] if row["variation"] == "caches in HBM only")
    why_hbm = next((r.split(": ", 1)[1] for r in robustness["reasons"] if r.startswith("caches in HBM only")), None)
    workload = load_workload("pdd-agent-64k")
    serving = workload.serving
    prompt_gb = float(
        request_kv_bytes(load_model(workload.model), workload.prompt_tokens.largest(), serving.page_tokens)
    )
    with tempfile.TemporaryDirectory() as folder:
        # PDD's plan as `optimize -a pdd --output` writes it: the JSON carries each architecture's plan
        path = Path(folder) / "pdd.yaml"
        path.write_text(yaml.safe_dump(pdd["plan"], sort_keys=False), encoding="utf-8")
        caches = _caches(str(path))
    radix, prefix = caches["decode"], caches["prefill"]
    gap = (
        "the workload gives no turn gap, so each prefix is held the whole retention"
        if serving.turn_gap_s is None
        else f"sessions return after {serving.turn_gap_s:g} s on average"
    )
    agg = archs.get("agg")
    colocated = ""
    if agg is not None and agg["feasible"] and "agg" in gains:
        what = f"agg: {_gpus(agg)}, {money(agg['cost_usd_per_hour'])}, no line, no relay, no radix cache on decoders"
        beaten = "is the plan to beat, and" if report["best"] == "agg" else "costs more:"
        colocated = f"co-located serving ({what}) {beaten} PDD is {cheaper(gains['agg']['cost_change'])} it; "
    lines = [
        f"**On the article's scenario, as pddplan models it, the best plan is {report['best']}'s**: {colocated}"
        f"PDD is {cheaper(gains['pd-intra']['cost_change'])} intra-datacenter PD ({money(pdd['cost_usd_per_hour'])} "
        f"against {money(intra['cost_usd_per_hour'])}, BCR {pct(gains['pd-intra']['bcr_change'])}); "
        + (
            f"it is {cheaper(gains['pd-cross']['cost_change'])} cross-datacenter PD without a relay, whose "
            f"first-token tail it cuts by {-gains['pd-cross']['ttft_p90_change']:.0%} (P90; the article reports "
            "51.5%)."
            if "pd-cross" in gains
            else "cross-datacenter PD without a relay finds no plan at all: "
            + archs["pd-cross"]["infeasibility"][0]["message"].split("; loosen")[0]
            + "; the article reports PDD cutting its P90 by 51.5%."
        ),
        f"Every architecture pays for the prefix cache behind the workload's {workload.hit_rate.mean():.0%} mean "
        f"hit by the same rule (`pddplan.cache`): {prefix['holds_gb']:,.0f} GB on the prefill instances, and "
        f"for PDD also a {radix['holds_gb']:,.0f} GB radix cache on its main decoders "
        f"({workload.arrival.rate_rps:g} req/s x {serving.drc_retention_s:g} s x {prompt_gb / 1e9:.1f} GB: {gap}). "
        f"With `cache_tiers: {serving.cache_tiers}` (as SGLang's hierarchical cache) both sit in the servers' "
        f"host memory, which comes with the GPUs; a hit then loads over PCIe in "
        f"{prefix['mean_hit_load_s'] * 1e3:,.0f} ms before prefill. Kept in HBM only (`cache_tiers: hbm`), "
        + (
            f"PDD is {cheaper(hbm['cost_change_vs_best_baseline'])} {hbm['best_baseline']} "
            f"({money(hbm['subject_cost_usd_per_hour'])} against {money(hbm['best_baseline_cost_usd_per_hour'])})"
            if hbm["subject_feasible"]
            else f"PDD finds no plan within the SLA and {hbm['best_baseline']} costs "
            f"{money(hbm['best_baseline_cost_usd_per_hour'])}"
        )
        + (f": {why_hbm}." if why_hbm else ".")
        + " Where the caches live decides this comparison; `--robustness` shows it beside rate, price, widths, "
        "retention and caps.",
    ]
    return "\n".join(_wrap(line) for line in lines) + "\n"


def _gpus(arch: dict[str, Any]) -> str:
    """'56 x gpu-b' / '48 x gpu-a + 16 x gpu-b'."""
    return " + ".join(f"{n} x {gpu}" for gpu, n in arch["gpus"].items())


# -- should I disaggregate at all? (the peer planner's question) ------------------------------------
PEER = "workloads/qwen3-32b-h200-isl16k.yaml"
PEER_BUDGET = "50.4"  # 32 x H200 at the profile's $1.575/GPU-hour: the most each serves on all 32


def peer_table() -> str:
    """agg beside pd-intra on the peer planner's question: at the workload's rate (fewest GPUs) and
    on all 32 GPUs (most goodput)."""
    at_rate = _by_name(data("optimize", PEER, "-a", "agg", "-a", "pd-intra"))
    on_all = _by_name(data("optimize", PEER, "-a", "agg", "-a", "pd-intra", "--budget", PEER_BUDGET))
    rows = [
        "| question | agg (co-located) | pd-intra (disaggregated) | agg's advantage |",
        "|---|---|---|---:|",
    ]
    agg, intra = at_rate["agg"], at_rate["pd-intra"]
    rows.append(
        f"| fewest GPUs for 12 req/s | {_gpus(agg)}, {money(agg['cost_usd_per_hour'])} | {_gpus(intra)}, "
        f"{money(intra['cost_usd_per_hour'])} | {intra['cost_usd_per_hour'] / agg['cost_usd_per_hour']:.2f}x |"
    )
    agg, intra = on_all["agg"], on_all["pd-intra"]
    per_gpu = [a["goodput_rps"] / sum(a["gpus"].values()) for a in (agg, intra)]
    rows.append(
        f"| most goodput on 32 x H200 ({PEER_BUDGET} $/h) | {agg['goodput_rps']:.1f} req/s on {_gpus(agg)} | "
        f"{intra['goodput_rps']:.1f} req/s on {_gpus(intra)} | {per_gpu[0] / per_gpu[1]:.2f}x per GPU |"
    )
    tails = (
        f"TTFT P90 {agg['ttft_p90_s']:.2f} s and TPOT P90 {agg['tpot_p90_s'] * 1e3:.0f} ms (agg), "
        f"{intra['ttft_p90_s']:.2f} s and {intra['tpot_p90_s'] * 1e3:.0f} ms (pd-intra), all 32 GPUs' plans, "
        "verified by simulation."
    )
    return "\n".join(rows) + "\n\n" + _wrap(tails) + "\n"


def robustness_table() -> str:
    from pddplan.optimize.outputs import Robustness
    from pddplan.report.robustness_report import markdown

    report = Robustness.model_validate(data(*MAIN, "--robustness")["robustness"])
    return "\n".join(markdown(report)) + "\n"


# -- the day ----------------------------------------------------------------------------------------
DAY = ("optimize", "workloads/pdd-agent-64k-day.yaml", "--robust", "-a", "pd-intra", "-a", "pdd")


def day_table() -> str:
    results = {r["architecture"]: r for r in data(*DAY)["robust"]}
    lines = [
        "| | steady (4 req/s) | robust (every scenario) | price of robustness | idle free $/h |",
        "|---|---:|---:|---:|---:|",
    ]
    for arch, label in (("pd-intra", "pd-intra"), ("pdd", "PDD")):
        r = results[arch]
        if r["plan"] is None:
            lines.append(f"| {label} | {money(r['steady_cost_usd_per_hour'])} | none | - | - |")
            continue
        lines.append(
            f"| {label} | {money(r['steady_cost_usd_per_hour'])} | {money(r['cost_usd_per_hour'])} | "
            f"{pct(r['price_of_robustness'])} | {money(r['elastic_cost_usd_per_hour'])} |"
        )
    pdd = results["pdd"]
    peak = next(s for s in pdd["scenarios"] if s["name"] == "peak")
    lines += [
        "",
        _wrap(
            (
                f"PDD's steady purchase meets the whole day ({money(pdd['cost_usd_per_hour'])})"
                if abs(pdd["price_of_robustness"]) < 1e-9
                else f"PDD's robust purchase costs {money(pdd['cost_usd_per_hour'])}, "
                f"{pct(pdd['price_of_robustness'])} over its steady plan"
            )
            + "; at the peak its "
            f"relay takes `{peak['routing_rule']}` with {peak['handoff_mode']} handoff and its TTFT is P90 "
            f"{peak['ttft_p90_s']:.2f} s / P99 {peak['ttft_p99_s']:.2f} s, inside the SLA."
            + (f" {pdd['note'][0].upper()}{pdd['note'][1:]}." if pdd["note"] else "")
        ),
    ]
    return "\n".join(lines) + "\n"


# -- the bathtub ------------------------------------------------------------------------------------
def bathtub_findings() -> str:
    from pddplan.analyses.bathtub import bathtub
    from pddplan.inputs import load_workload, workload_dir
    from pddplan.report.bathtub_report import findings_text

    result = bathtub(load_workload("pdd-agent-64k"), workload_dir("pdd-agent-64k"))
    return "".join(f"- {_wrap(line, indent='  ')}\n" for line in findings_text(result))


# -- the article ------------------------------------------------------------------------------------
PAPER = ("paper",)


def paper_summary() -> str:
    return paper_words(data(*PAPER))


def paper_words(paper: dict[str, Any]) -> str:
    """The paper block from `pddplan paper --json`'s output (tests/test_paper.py passes its own run)."""
    rows = {row["metric"]: row for row in paper["rows"]}
    cost = [rows[f"PDD cost vs baseline, GPU-B at +{p}%"]["pddplan"] for p in (20, 25, 30)]
    text = (
        f"In short: KV per token {rows['KV bytes per token (DeepSeek-V3.2, FP8 KV)']['pddplan']} (article "
        f"~46.5 KB); relay share of output tokens {rows['relay share of output tokens']['pddplan']} (6.2%); "
        f"singular traffic {rows['singular traffic (relay finishes first, transfer cancelled)']['pddplan']} "
        f"(3-4%); PDD cuts cross-datacenter PD's P90 TTFT by "
        f"{rows['TTFT reduction of PDD vs cross-DC PD (P90)']['pddplan'].lstrip('-')} (51.5%); PDD's cost "
        f"against the intra-datacenter baseline is {', '.join(cost)} at GPU-B premiums of 20, 25 and 30% "
        "(article: 3.5-7.1% less). Every input is stated in the workload file; none is tuned to the article."
    )
    return _wrap(text) + "\n"


# -- from a trace to a plan ------------------------------------------------------------------------
TRACE = "examples/traces/mooncake-synthetic.jsonl"


@functools.cache
def traced() -> tuple[str, str, dict[str, Any]]:
    """(workload, plan, optimize's JSON) built from the trace as the README's commands build them
    (one `optimize --output --json` run gives both the plan and the figures), in a folder that
    lives as long as the process."""
    folder = Path(tempfile.mkdtemp(prefix="pddplan-readme-"))
    workload, plan = folder / "traced.yaml", folder / "plan.yaml"
    run("trace", "import", TRACE, "--workload-out", str(workload), "--like", "pdd-agent-64k")
    report = data("optimize", str(workload), "--output", str(plan))
    return str(workload), str(plan), report


def trace_words() -> str:
    from pddplan.inputs import load_workload

    summary = data("trace", "import", TRACE)
    none = summary["ideal_hit_histogram"][0] / max(summary["requests_with_hashes"], 1)
    workload_path, plan_path, report = traced()
    workload = load_workload(workload_path)
    new = _mean_new_tokens(workload)
    independent = _mean_new_tokens(workload.model_copy(update={"request_mix": None}))
    archs = _by_name(report)
    best = archs[report["best"]]
    replay = {
        capacity: data("simulate", plan_path, workload_path, "--trace", TRACE, *capacity)["ttft_p99_s"]
        for capacity in ((), ("--cache-capacity", "100GB"))
    }
    drawn = data("simulate", plan_path, workload_path)["ttft_p99_s"]
    costs = ", ".join(
        f"{name} {money(a['cost_usd_per_hour'])}" if a["feasible"] else f"{name} none within the SLA"
        for name, a in archs.items()
        if name != "pd-hetero"
    )
    text = (
        f"The trace holds {summary['requests']:,} requests over {summary['duration_s'] / 60:.0f} minutes. The "
        "workload keeps what the trace says and buckets cannot: hit and prompt length together (`request_mix`, "
        f"each request's hit replayed through the prefix cache). In this trace they are correlated "
        f"({summary['hit_vs_prompt_length_correlation']:.2f}): the long prompts are the ones that hit, and "
        f"{none:.0%} of requests hit less than 10%. Drawn independently from the same marginals, misses would land "
        f"on long prompts too: {independent / new:.1f}x the new (uncached) tokens per request. On pdd-agent-64k's "
        f"deployment the best plan is {report['best']}'s, {money(best['cost_usd_per_hour'])} (BCR "
        f"{best['bcr']:,.1f} req/$; {costs}). Replaying the trace's own requests (`--trace`) "
        f"gives P99 TTFT {replay[()]:.2f} s where draws from the workload give {drawn:.2f} s; with a 100 GB "
        f"prefix cache instead of an unbounded one, {replay[('--cache-capacity', '100GB')]:.2f} s, and the "
        "revenue follows the hits it loses."
    )
    return _wrap(text) + "\n"


def _mean_new_tokens(workload: Any) -> float:
    prompts, hits, probs = workload.prompt_hit_support()
    return float(((1 - hits) * prompts) @ probs)


CACHE_PLAN = (
    "cache-plan",
    TRACE,
    "--like",
    "pdd-agent-64k",
    "--capacity",
    "0,10GB,100GB,1TB,10TB",
    "--usd-per-gb-month",
    "2",
)


def cache_plan_table() -> str:
    plan = data(*CACHE_PLAN)
    lines = [
        "| cache | hit (tokens) | best | GPUs + lines $/h | cache $/h | total $/h | BCR req/$ |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {p['capacity']} | {p['hit_token_weighted']:.1%} | {p['architecture'] or '-'} | "
        f"{p['gpu_and_line_usd_per_hour']:,.2f} | {p['cache_usd_per_hour']:,.2f} | "
        f"{p['total_usd_per_hour']:,.2f} | {p['bcr']:,.1f} |"
        for p in plan["points"]
    )
    lines += ["", _wrap(f"The best capacity at that price: {plan['best_capacity']} (the BCR is highest there).")]
    return "\n".join(lines) + "\n"


TIERS = (
    "cache-curve",
    TRACE,
    "--model",
    "deepseek-v3.2",
    "--tier",
    "hbm:20GB",
    "--tier",
    "dram:200GB:50GB/s",
    "--tier",
    "ssd:2TB:6GB/s",
)


def tier_words() -> str:
    tiered = data(*TIERS)["tiered"]
    shares = ", ".join(f"{t['tier'].upper()} {t['hit_share_of_prompt_tokens']:.1%}" for t in tiered["tiers"])
    text = (
        f"{shares} of the prompt tokens ({tiered['hit_token_weighted']:.1%} in all); loading them costs "
        f"{tiered['load_s_mean'] * 1e3:,.0f} ms per request on average, {tiered['load_s_p99'] * 1e3:,.0f} ms at "
        "the 99th percentile."
    )
    return _wrap(text) + "\n"


# -- from plan to cluster and back -------------------------------------------------------------------
def calibration_words() -> str:
    import shutil

    bench = ROOT / "examples" / "bench"
    first = _by_name(data("optimize", str(bench / "llama70b-h200.yaml"), "-a", "pd-intra"))["pd-intra"]
    folder = Path(tempfile.mkdtemp(prefix="pddplan-readme-"))
    shutil.copy(bench / "llama70b-h200-calibrated.yaml", folder)
    fit = data(
        "calibrate",
        "--from",
        "sglang-bench",
        str(bench / "sglang-llama70b-h200-tp4.jsonl"),
        "--gpu",
        "h200",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "4",
        "--output",
        str(folder / "h200.yaml"),
    )
    second = _by_name(data("optimize", str(folder / "llama70b-h200-calibrated.yaml"), "-a", "pd-intra"))["pd-intra"]
    before, after = fit["before"]["fit"], fit["after"]["fit"]
    verb = "worse" if after["median_abs_error"] > before["median_abs_error"] else "better"

    def plan_words(arch: dict[str, Any]) -> str:
        roles = arch["roles"]
        return (
            f"{roles['prefill']['count']} prefill + {roles['decode']['count']} decode instances of "
            f"{roles['decode']['tp']} x H200, {money(arch['cost_usd_per_hour'])}"
        )

    text = (
        f"The first plan, on the catalog's H200 factors, is {plan_words(first)}. The benchmark's "
        f"{before['count']} runs become {before['count']} decode rows (the runs were Poisson arrivals, not one "
        "request at a time, so their TTFTs include queueing and are not used; requests in flight come from "
        f"Little's law); fitted under the stack `sglang`, they move the median error from "
        f"{before['median_abs_error']:.0%} to {after['median_abs_error']:.0%} ({verb}: the fit minimizes squared "
        f"log errors with a pull towards the GPU's own factors, not the median; its worst row moves from "
        f"{before['worst_abs_error']:.1%} to {after['worst_abs_error']:.1%}), and the plan on the calibrated "
        f"profile is {plan_words(second)}."
    )
    return _wrap(text) + "\n"


def _wrap(text: str, width: int = 100, indent: str = "") -> str:
    """`text` wrapped at `width` columns (continuation lines indented by `indent`)."""
    import textwrap

    return textwrap.fill(text, width=width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)


BLOCKS: dict[str, Callable[[], str]] = {
    "main-job": main_job,
    "main-job-words": main_job_words,
    "robustness": robustness_table,
    "day": day_table,
    "bathtub": bathtub_findings,
    "paper": paper_summary,
    "trace": trace_words,
    "cache-plan": cache_plan_table,
    "tiers": tier_words,
    "calibration": calibration_words,
    "peer": peer_table,
}


def stale(names: Iterable[str]) -> list[str]:
    """The named blocks whose text in README.md differs from what their generators write now."""
    bodies = {match.group("name"): match.group("body") for match in BLOCK.finditer(README.read_text(encoding="utf-8"))}
    return [name for name in names if BLOCKS[name]() != bodies[name]]


def regenerate(text: str) -> tuple[str, list[str]]:
    """README text with every block rewritten, and the names of the blocks that changed."""
    changed: list[str] = []
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in BLOCKS:
            raise KeyError(f"README block {name!r} has no generator in docs/readme.py")
        seen.add(name)
        body = BLOCKS[name]()
        if body != match.group("body"):
            changed.append(name)
        return match.group(1) + body + match.group(4)

    out = BLOCK.sub(replace, text)
    missing = set(BLOCKS) - seen
    if missing:
        raise KeyError(f"README has no block for {', '.join(sorted(missing))}")
    return out, changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a block differs, without writing")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    new, changed = regenerate(text)
    if args.check:
        if changed:
            print("README blocks differ from the tool: " + ", ".join(changed), file=sys.stderr)
            return 1
        return 0
    if changed:
        README.write_text(new, encoding="utf-8")
        print("rewrote README blocks: " + ", ".join(changed), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
