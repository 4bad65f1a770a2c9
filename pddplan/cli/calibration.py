"""`pddplan estimate`, `calibrate`, `accuracy`: the step-time model against measurements."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pddplan.cli.apps import app
from pddplan.cli.options import JsonFlag, KvDtypeOption, _kv_dtype, _layout_flag

if TYPE_CHECKING:
    pass


# -- performance core ---------------------------------------------------------------------------
@app.command("estimate")
def estimate(
    model: Annotated[str, typer.Option("--model", help="Catalog model, config.json or model YAML.")],
    gpu: Annotated[str, typer.Option("--gpu", help="Hardware profile name or YAML file.")],
    tp: Annotated[int, typer.Option("--tp", help="GPUs per instance (tensor/expert parallel degree).")] = 1,
    prefill: Annotated[int | None, typer.Option("--prefill", help="Prefill this many new tokens.")] = None,
    cached: Annotated[int, typer.Option("--cached", help="...on top of this many cached tokens.")] = 0,
    chunk: Annotated[int | None, typer.Option("--chunk", help="Chunked-prefill token budget.")] = None,
    decode_batch: Annotated[int | None, typer.Option("--decode-batch", help="One decode step of B sequences.")] = None,
    extend: Annotated[int | None, typer.Option("--extend", help="Recompute K tokens in one extend step.")] = None,
    context: Annotated[int | None, typer.Option("--context", help="Context tokens for decode/extend.")] = None,
    kv_dtype: KvDtypeOption = None,
    ep: Annotated[
        bool | None,
        typer.Option(
            "--ep/--no-ep",
            help="Expert parallelism with data-parallel attention (--ep) or tensor parallelism throughout "
            "(--no-ep); default: EP when the instance spans more than one scale-up domain.",
        ),
    ] = None,
    tp_attention: Annotated[
        bool,
        typer.Option(
            "--tp-attention",
            help="Experts expert-parallel under tensor-parallel attention (implies --ep; SGLang --tp N --ep N, "
            "vLLM --enable-expert-parallel without data parallelism).",
        ),
    ] = False,
    stack: Annotated[
        str | None,
        typer.Option("--stack", help="Use the GPU's factors calibrated for this serving stack (e.g. sglang-0.5)."),
    ] = None,
    mtp: Annotated[int, typer.Option("--mtp", help="Decode with multi-token prediction: K draft tokens per step.")] = 0,
    accept: Annotated[
        float | None, typer.Option("--accept", help="With --mtp: share of draft tokens accepted (0-1].")
    ] = None,
    cuda_graph_max_batch: Annotated[
        int | None,
        typer.Option(
            "--cuda-graph-max-batch",
            help="Largest decode batch the engine runs as a CUDA graph (SGLang --cuda-graph-max-bs-decode); "
            "larger ones launch eagerly, 0: none is captured. Default: every decode batch is captured.",
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Predict one prefill, decode step or extend step, with its breakdown and binding resource."""
    from pddplan.calibration.estimate import StepQuery
    from pddplan.calibration.estimate import estimate as run
    from pddplan.report import output, perf_tables

    query = StepQuery(
        prefill_tokens=prefill,
        cached_tokens=cached,
        chunk_tokens=chunk,
        decode_batch=decode_batch,
        extend_tokens=extend,
        context_tokens=context,
        mtp_draft_tokens=mtp,
        mtp_acceptance=accept,
        cuda_graph_max_batch=cuda_graph_max_batch,
    )
    result = run(
        model,
        gpu,
        tp,
        query,
        kv_dtype=_kv_dtype(kv_dtype),
        expert_parallel=_layout_flag(ep, tp_attention),
        stack=stack,
    )
    if json_out:
        output.emit_json(result)
    else:
        perf_tables.print_estimate(output.results(), result)


@app.command("calibrate")
def calibrate(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="CSV of measured step times: columns model, gpu, tp, kind (prefill, decode or extend), tokens, "
            "cached, batch, context, measured_s; optional weight_dtype, kv_dtype, split (fit, holdout, excluded), "
            "stack, expert_parallel (tests/data/measurements.md describes each). With --from: benchmark result files.",
            show_default=False,
        ),
    ],
    from_bench: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Read benchmark results instead: sglang-bench (sglang.bench_serving --output-file) or vllm-bench "
            "(vllm bench serve --save-result); with --gpu.",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="With --from: the model the runs served (default: from the file).")
    ] = None,
    tp: Annotated[
        int | None, typer.Option("--tp", help="With --from: GPUs per instance (default: from the file).")
    ] = None,
    decode_instances: Annotated[
        int, typer.Option("--decode-instances", help="With --from: decode servers behind the benchmark's endpoint.")
    ] = 1,
    rows_out: Annotated[
        Path | None, typer.Option("--rows-out", help="With --from: also write the rows made, as a measurements CSV.")
    ] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Fit this GPU's factors to its rows.")] = None,
    stack: Annotated[
        str | None,
        typer.Option("--stack", help="With --gpu: fit only the rows of this serving stack (the CSV's stack column)."),
    ] = None,
    all_gpus: Annotated[bool, typer.Option("--all", help="Fit one set of default factors to every row.")] = False,
    output_path: Annotated[Path | None, typer.Option("--output", help="Write the calibrated profile here.")] = None,
    write_catalog: Annotated[
        bool,
        typer.Option(
            "--write-catalog",
            help="With --all: refit the defaults, every GPU and every (GPU, stack) and write them into the catalog.",
        ),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Fit efficiency factors to measured step times; report the error before and after."""
    from pddplan.calibration import calibrate as cal
    from pddplan.report import output, perf_tables

    _check_calibrate_options(files, gpu, all_gpus, stack, write_catalog, from_bench, (model, tp, rows_out))
    from_summary = None
    if gpu is not None:
        if from_bench is not None:
            from pddplan.calibration import bench_import

            fit = bench_import.calibrate_from_bench(files, from_bench, gpu, model, tp, stack, decode_instances)  # type: ignore[arg-type]
            for note in fit.notes:
                output.diagnostics().print(f"note: {note}", markup=False, highlight=False)
            if rows_out is not None:
                from pddplan.support.loading import write_atomic

                write_atomic(rows_out, bench_import.rows_csv(fit.rows))
            profile, result, stack, from_summary = fit.profile, fit.result, fit.stack, fit.summary()
        else:
            profile, result = cal.calibrate_profile(files[0], gpu, stack=stack)
        if output_path is not None:
            _write_calibrated_profile(output_path, gpu, profile, result, stack)
    else:
        result = cal.fit_all(files[0])
        if write_catalog:
            from pddplan.calibration.refit import refit_file
            from pddplan.calibration.refit import write_catalog as write

            with output.status("refitting the catalog...") as status:
                refit = refit_file(files[0], progress=lambda text: status.update(text))
            for path in write(refit):
                output.diagnostics().print(f"wrote {path}")
        if output_path is not None:
            from pddplan.support.loading import write_atomic

            write_atomic(output_path, cal.efficiency_yaml(result.efficiency))
    label = "all GPUs" if gpu is None else (gpu if stack is None else f"{gpu} / {stack}")
    summary = perf_tables.calibration_summary(result, label, output_path)
    if from_summary is not None:
        summary["from_bench"] = from_summary
    for item in summary["factors_on_bounds"]:
        output.diagnostics().print(
            f"warning: {item['factor']} = {item['value']:.4g} sits on its {item['bound']} bound: the step "
            "model's structure, not the data, limits this fit (see docs/model.md)",
            markup=False,
            highlight=False,
        )
    if json_out:
        output.emit_json(summary)
    else:
        perf_tables.print_calibration(output.results(), summary)
    if output_path is not None:
        output.diagnostics().print(f"wrote {output_path}")


def _check_calibrate_options(
    files: list[Path],
    gpu: str | None,
    all_gpus: bool,
    stack: str | None,
    write_catalog: bool,
    from_bench: str | None,
    bench_only: tuple[object, object, object],
) -> None:
    """InputError for a combination of calibrate's options that means nothing."""
    from pddplan.errors import InputError

    if (gpu is None) == (not all_gpus):
        raise InputError("give --gpu NAME to calibrate one profile, or --all for the shipped defaults")
    if from_bench is None:
        for flag, value in zip(("--model", "--tp", "--rows-out"), bench_only, strict=True):
            if value is not None:
                raise InputError(f"{flag} goes with --from (benchmark results)")
        if len(files) != 1:
            raise InputError(f"give one measurements CSV (got {len(files)} files); several files go with --from")
    elif gpu is None:
        raise InputError("--from needs --gpu NAME: benchmark files do not say which GPU ran them")
    if stack is not None and gpu is None:
        raise InputError("--stack needs --gpu NAME: stack factors belong to one GPU's profile")
    if write_catalog and not all_gpus:
        raise InputError("--write-catalog goes with --all (it refits every shipped factor)")
    if write_catalog:
        from pddplan.support.catalog import is_installed_copy

        if is_installed_copy():
            raise InputError(
                "--write-catalog rewrites a source checkout's hardware_profiles/ and default factors; this pddplan "
                "is an installed package (its files are pip's): write your own profile with --gpu G --output FILE"
            )


def _write_calibrated_profile(output_path: Path, gpu: str, profile: Any, result: Any, stack: str | None) -> None:
    """Write the calibrated profile: `output_path`'s own text (or the catalog GPU's) with its
    efficiency block, or with `stack`'s factors added to those it already holds."""
    from pddplan.calibration import calibrate as cal
    from pddplan.inputs import load_hardware
    from pddplan.support.loading import write_atomic

    source_path = output_path if output_path.exists() else None
    text = source_path.read_text() if source_path else _profile_text(gpu)
    if stack is None:
        write_atomic(output_path, cal.with_efficiency_block(text, result.efficiency))
    else:
        kept = load_hardware(str(source_path)).stack_efficiency if source_path else profile.stack_efficiency
        stacks = {**kept, stack: result.efficiency}
        write_atomic(output_path, cal.with_efficiency_block(text, None, stacks))


def _profile_text(gpu: str) -> str:
    from pddplan.support import catalog

    return catalog.resolve("hardware_profiles", gpu, "GPU").read_text(encoding="utf-8")


@app.command("accuracy")
def accuracy(
    measurements: Annotated[
        Path | None, typer.Argument(help="Measured step times; default: the shipped public set.")
    ] = None,
    folds: Annotated[
        int,
        typer.Option(
            "--folds",
            help="Also K-fold cross-validate the whole refit on the fit rows (K refits, about 15 s each).",
        ),
    ] = 0,
    json_out: JsonFlag = False,
) -> None:
    """Error of the shipped step-time model against measured points, held-out rows apart."""
    from pddplan.calibration.accuracy import accuracy_report, cross_validation
    from pddplan.calibration.calibrate import read_measurements
    from pddplan.report import output, perf_tables

    report = accuracy_report(measurements)
    if folds:
        with output.status("cross-validating...") as status:
            rows = read_measurements(Path(report["measurements"]))
            report["cross_validation"] = cross_validation(rows, folds, progress=lambda text: status.update(text))
    if json_out:
        output.emit_json(report)
    else:
        perf_tables.print_accuracy(output.results(), report)
