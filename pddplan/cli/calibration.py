"""`pddplan estimate`, `calibrate`, `accuracy`: the step-time model against measurements."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pddplan.cli.apps import app
from pddplan.cli.options import DetailFlag, JsonFlag, KvDtypeOption

if TYPE_CHECKING:
    pass


# -- performance core ---------------------------------------------------------------------------
ModelOption = Annotated[str, typer.Option("--model", help="Catalog model, config.json or model YAML.")]
GpuOption = Annotated[str, typer.Option("--gpu", help="Hardware profile name or YAML file.")]
TpOption = Annotated[int, typer.Option("--tp", help="GPUs per instance (tensor/expert parallel degree).")]
PpOption = Annotated[
    int,
    typer.Option(
        "--pp",
        help="Pipeline stages, each the next layers on its own --tp GPUs (tp x pp GPUs); steps are a stage's, "
        "decode per token (SGLang --pp-size, vLLM --pipeline-parallel-size).",
    ),
]
PrefillOption = Annotated[int | None, typer.Option("--prefill", help="Prefill this many new tokens.")]
CachedOption = Annotated[int, typer.Option("--cached", help="...on top of this many cached tokens.")]
ChunkOption = Annotated[int | None, typer.Option("--chunk", help="Chunked-prefill token budget.")]
DecodeBatchOption = Annotated[
    int | None, typer.Option("--decode-batch", help="One decode step of B sequences (with --context).")
]
ExtendOption = Annotated[int | None, typer.Option("--extend", help="Recompute K tokens in one extend step.")]
ContextOption = Annotated[int | None, typer.Option("--context", help="Context tokens for decode/extend.")]
EpOption = Annotated[
    bool | None,
    typer.Option(
        "--ep/--no-ep",
        help="Expert parallelism with data-parallel attention (--ep) or tensor parallelism throughout "
        "(--no-ep); default: EP when the instance spans more than one scale-up domain.",
    ),
]
TpAttentionOption = Annotated[
    bool,
    typer.Option(
        "--tp-attention",
        help="Experts expert-parallel under tensor-parallel attention (implies --ep; SGLang --tp N --ep N, "
        "vLLM --enable-expert-parallel without data parallelism).",
    ),
]
EstimateStackOption = Annotated[
    str | None,
    typer.Option("--stack", help="Use the GPU's factors calibrated for this serving stack (e.g. sglang-0.5)."),
]
MtpOption = Annotated[int, typer.Option("--mtp", help="Decode with multi-token prediction: K draft tokens per step.")]
AcceptOption = Annotated[
    float | None, typer.Option("--accept", help="With --mtp: share of draft tokens accepted (0-1].")
]
WeightsOption = Annotated[
    str | None,
    typer.Option(
        "--weights",
        help="Weight format of every weight: bf16, fp8, fp8-block, nvfp4 (fp4), mxfp4 or int4. Default: the "
        "model's own (its quantization_config).",
    ),
]
ExpertWeightsOption = Annotated[
    str | None,
    typer.Option("--expert-weights", help="Weight format of the routed experts alone (after --weights)."),
]
CudaGraphMaxBatchOption = Annotated[
    int | None,
    typer.Option(
        "--cuda-graph-max-batch",
        help="Largest decode batch the engine runs as a CUDA graph (SGLang --cuda-graph-max-bs-decode); "
        "larger ones launch eagerly, 0: none is captured. Default: every decode batch is captured.",
    ),
]


@app.command("estimate")
def estimate(
    model: ModelOption,
    gpu: GpuOption,
    tp: TpOption = 1,
    pp: PpOption = 1,
    prefill: PrefillOption = None,
    cached: CachedOption = 0,
    chunk: ChunkOption = None,
    decode_batch: DecodeBatchOption = None,
    extend: ExtendOption = None,
    context: ContextOption = None,
    kv_dtype: KvDtypeOption = None,
    ep: EpOption = None,
    tp_attention: TpAttentionOption = False,
    stack: EstimateStackOption = None,
    mtp: MtpOption = 0,
    accept: AcceptOption = None,
    cuda_graph_max_batch: CudaGraphMaxBatchOption = None,
    weights: WeightsOption = None,
    expert_weights: ExpertWeightsOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Predict one prefill, decode step or extend step, with its breakdown and binding resource."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.calibration.estimate import EstimateFlags
    from pddplan.report import output, perf_tables

    result = EstimateFlags(**given).estimate()
    if json_out:
        output.emit_json(result)
    else:
        perf_tables.print_estimate(output.results(), result)


# -- calibration ----------------------------------------------------------------------------------
MeasurementFilesArg = Annotated[
    list[Path],
    typer.Argument(
        help="CSV of measured step times: columns model, gpu, tp, kind (prefill, decode or extend), tokens, "
        "cached, batch, context, measured_s; optional weight_dtype, kv_dtype, split (fit, holdout, excluded), "
        "stack, expert_parallel (tests/data/measurements.md describes each). With --from: benchmark result files.",
        show_default=False,
    ),
]
FromBenchOption = Annotated[
    str | None,
    typer.Option(
        "--from",
        help="Read benchmark results instead: sglang-bench (sglang.bench_serving --output-file) or vllm-bench "
        "(vllm bench serve --save-result); with --gpu.",
    ),
]
BenchModelOption = Annotated[
    str | None, typer.Option("--model", help="With --from: the model the runs served (default: from the file).")
]
BenchTpOption = Annotated[
    int | None, typer.Option("--tp", help="With --from: GPUs per instance (default: from the file).")
]
DecodeInstancesOption = Annotated[
    int, typer.Option("--decode-instances", help="With --from: decode servers behind the benchmark's endpoint.")
]
RowsOutOption = Annotated[
    Path | None, typer.Option("--rows-out", help="With --from: also write the rows made, as a measurements CSV.")
]
CalibrateGpuOption = Annotated[str | None, typer.Option("--gpu", help="Fit this GPU's factors to its rows.")]
CalibrateStackOption = Annotated[
    str | None,
    typer.Option("--stack", help="With --gpu: fit only the rows of this serving stack (the CSV's stack column)."),
]
AllGpusOption = Annotated[bool, typer.Option("--all", help="Fit one set of default factors to every row.")]
ProfileOutputOption = Annotated[Path | None, typer.Option("--output", help="Write the calibrated profile here.")]
WriteCatalogOption = Annotated[
    bool,
    typer.Option(
        "--write-catalog",
        help="With --all: refit the defaults, every GPU and every (GPU, stack) and write them into the catalog.",
    ),
]

ForceOption = Annotated[
    bool,
    typer.Option("--force", help="With --output: write the factors even when they make the held-out rows worse."),
]


@app.command("calibrate")
def calibrate(
    files: MeasurementFilesArg,
    from_bench: FromBenchOption = None,
    model: BenchModelOption = None,
    tp: BenchTpOption = None,
    decode_instances: DecodeInstancesOption = 1,
    rows_out: RowsOutOption = None,
    gpu: CalibrateGpuOption = None,
    stack: CalibrateStackOption = None,
    all_gpus: AllGpusOption = False,
    output_path: ProfileOutputOption = None,
    write_catalog: WriteCatalogOption = False,
    force: ForceOption = False,
    json_out: JsonFlag = False,
) -> None:
    """Fit efficiency factors to measured step times; report the error before and after."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.calibration.command import CalibrateFlags, worsens
    from pddplan.report import output, perf_tables

    flags = CalibrateFlags(**given)
    fit = flags.fit()
    for note in fit.notes:
        output.diagnostics().print(f"note: {note}", markup=False, highlight=False)
    harm = worsens(fit.result)
    if harm is not None:
        output.diagnostics().print(f"warning: {harm}", markup=False, highlight=False)
    flags.write_rows(fit)
    if write_catalog:
        with output.status("refitting the catalog...") as status:
            written = flags.refit_catalog(progress=status.update)
        for path in written:
            output.wrote(path)
    flags.write_profile(fit)
    perf_tables.show_calibration(flags, fit)


# -- accuracy -------------------------------------------------------------------------------------
MeasurementsArg = Annotated[Path | None, typer.Argument(help="Measured step times; default: the shipped public set.")]
FoldsOption = Annotated[
    int,
    typer.Option(
        "--folds",
        help="Also K-fold cross-validate the whole refit on the fit rows (K refits, one to a few seconds each).",
    ),
]


FoldByOption = Annotated[
    str,
    typer.Option(
        "--fold-by",
        help="What a fold leaves out whole: model (every row of a model) or stack (every row of a serving stack).",
    ),
]


@app.command("accuracy")
def accuracy(
    measurements: MeasurementsArg = None,
    folds: FoldsOption = 0,
    fold_by: FoldByOption = "model",
    detail: DetailFlag = False,
    json_out: JsonFlag = False,
) -> None:
    """Error of the shipped step-time model against measured points, held-out rows apart."""
    given = dict(locals())  # the parameters above are the command's options, by name
    from pddplan.calibration.accuracy import AccuracyFlags
    from pddplan.report import output, perf_tables

    given.pop("detail")  # how the tables show, not what is computed
    flags = AccuracyFlags(**given)
    report = flags.report()
    if folds:
        with output.status("cross-validating...") as status:
            report = flags.cross_validated(report, progress=status.update)
    if json_out:
        output.emit_json(report)
    else:
        perf_tables.print_accuracy(output.results(), report, detail)
