"""The `dmo` commands: each parses its options and calls one library function; what it prints goes through
`_emit`. How the process runs a command and maps errors to exit codes is dmocli/cli/process.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer

from dmocli.cli import describe
from dmocli.cli.commands import evaluate, monitor, predict, subsample, threshold
from dmocli.cli.declared import CHECKED_OPTIONS, takes_options
from dmocli.cli.output import emit, err, out, report_on_refusal
from dmocli.cli.report_lines import offsets_text, outlook_line, split_lines
from dmocli.engines import torchrun
from dmocli.options import TrainOptions

app = typer.Typer(
    name="dmo",
    help="Train thresholded classifiers on imbalanced data at one operating point "
    "(precision >= a with most recall, recall >= a with best precision, or best F-beta).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _engine_option() -> Any:
    return typer.Option(
        "local",
        "--engine",
        help="local (record batches in this process) or dask (partitions on "
        "Dask workers, parquet only; needs dmocli\\[dask]).",
    )


def _scheduler_option() -> Any:
    return typer.Option(
        None, "--scheduler", help="Dask scheduler ADDRESS (default: a local cluster of --workers processes)."
    )


def _workers_option() -> Any:
    return typer.Option(2, "--workers", help="Worker processes of the local Dask cluster.")


def _print_version(value: bool) -> None:
    if value:
        from dmocli.version import __version__

        out.print(f"dmo {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    show_progress: Optional[bool] = typer.Option(
        None,
        "--progress/--no-progress",
        help="Draw the progress of long work (training, streaming passes, Dask jobs) on stderr "
        "(default: only when stderr is a terminal).",
        show_default=False,
    ),
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """dmo: exact operating points for imbalanced classification."""
    from dmocli import progress

    progress.configure(show_progress)


@takes_options(TrainOptions, check=False)
def train(
    data: Path = typer.Argument(
        ...,
        help="Training table: parquet file, directory of parquet files, or CSV; `-` reads a CSV (or gzip CSV) "
        "from standard input, in one pass (fofo, ofo, lr).",
    ),
    options: TrainOptions = None,  # type: ignore[assignment]  # the declared options, made by takes_options
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Model file to write (default: DATA's name + .dmo.safetensors)."
    ),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Train a classifier and fit its threshold for the chosen operating point.

    Example: dmo train --problem frop --target 0.8 data.parquet

    On several processes or machines (wce, ero, sigmoid-f1, lagrangian; parquet DATA):
    torchrun --nproc-per-node 4 --no-python dmo train data/ --val val.parquet
    """
    from dmocli.pipelines.train import train as run_train

    opts = options
    with report_on_refusal(as_json and not torchrun.secondary()):
        _, result = run_train(data, opts, output=output, report_path=report)
    if torchrun.secondary():  # under torchrun, process 0 prints for the group
        return
    header = [f"model: {result['model']}  (solver {result['solver']}, {result['wall_seconds']:.1f} s)"]
    if result.get("threshold") is not None:
        header.append(f"threshold (logit): {result['threshold']:.6g}")
    if "class_operating_point" in result:
        header.append(offsets_text(result["class_operating_point"]))
    if "online" in result:
        o = result["online"]
        header.append(
            f"online: F{o['beta']:g} {o['f_beta']:.4f}  precision {o['precision']:.4f}  recall {o['recall']:.4f}  "
            f"(first pass, {o['n']} rows, {o['rows_per_second']:,.0f} rows/s)"
        )
    outlook = outlook_line(result, *_held_out_rows(result))
    lines = header + _rounds_rule_line(result) + _cv_rule_line(result) + _certificate_line(result)
    lines += split_lines(result) + outlook
    lines += _infeasible_note(result)
    emit(result, as_json, lines)


def _rounds_rule_line(report: dict[str, Any]) -> list[str]:
    """For trees: early stopping or the fixed schedule, and the held-out positives that decided (solvers/trees.py)."""
    if (report.get("architecture") or {}).get("kind") != "gbdt":
        return []
    from dmocli.solvers.trees import rule_line

    line = rule_line(report.get("solver_trace") or {})
    return [line] if line else []


def _cv_rule_line(report: dict[str, Any]) -> list[str]:
    """What --cv auto decided, folds or one held-out split, and the positives it decided on (pipelines/cv_auto.py)."""
    if "cv_rule" not in report:
        return []
    from dmocli.pipelines.cv_auto import rule_line

    return [rule_line(report["cv_rule"])]


def _certificate_line(report: dict[str, Any]) -> list[str]:
    """What a --confidence certificate promises, in one line: on how many new rows, or of the population value."""
    point = report.get("operating_point") or {}
    if not point.get("certificate") or not point.get("feasible"):
        return []
    metric = {"fpor": "precision", "frop": "recall"}[report["problem"]]
    sample = point["new_rows"]
    where = "in the population" if sample is None else f"measured on {sample:,} new rows"
    change = "--new-rows N for another sample size" if sample is None else "--new-rows N or inf to change"
    return [
        f"certified: {metric} {where} >= {report['target']:g} with probability {report['confidence']:g} "
        f"({change}; docs/operating-points.md)"
    ]


def _held_out_rows(report: dict[str, Any]) -> tuple[str, int | None]:
    """The split train searched its threshold on, and the rows of one new sample like it (one fold with --cv)."""
    split = (report.get("operating_point") or {}).get("split", "train")
    folds = (report.get("cv") or {}).get("folds")
    rows = report.get("splits", {}).get(split, {}).get("n")
    return split, (round(rows / folds) if split == "cv" and folds and rows else rows)


def _infeasible_note(report: dict[str, Any]) -> list[str]:
    """One line under train's figures where a split shows feasible=False: what it means and what to do, so a
    newcomer need not look it up."""
    missed = [name for name, s in report.get("splits", {}).items() if s.get("feasible") is False]
    metric = {"fpor": "precision", "frop": "recall"}.get(report.get("problem", ""))
    if not missed or metric is None:
        return []
    fixes = ["lower --target", "train on more labeled rows"]  # only the fixes this run has not tried already
    if report.get("solver") != "ero":
        fixes.append("try --solver ero")
    advice = f"{', '.join(fixes[:-1])} or {fixes[-1]}"
    if report.get("confidence") is None:
        advice += ", and add --confidence 0.95 for a threshold that holds the target on new data"
    return [
        f"note: feasible=False means {metric} is below the target {report['target']:g} on {' and '.join(missed)} "
        f"at this threshold, so new data may miss it too; {advice}"
    ]


@takes_options(TrainOptions, used=CHECKED_OPTIONS, check=False)
def check(
    data: Path = typer.Argument(..., help="Training table to check: parquet file, directory of parquet files, or CSV."),
    options: TrainOptions = None,  # type: ignore[assignment]  # made from train's options by takes_options
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Every problem `dmo train` would refuse DATA for, each with its fix, in one run (exit 2 when there are
    any); or what train would make of its columns. It takes a whole `dmo train` command line: the options that
    decide the data checks are used, the others (listed apart below) only checked for their values.

    Example: dmo check fraud.csv --label-col is_fraud --drop transaction_id
    """
    from dmocli.pipelines.check import check as run_check
    from dmocli.report import failure

    result = run_check(data, options)
    if not result["ok"]:  # with --json, the error every failure's report carries
        result = {**result, **failure(2, "bad_input", _check_findings(result)[0].rstrip(":"))}
    emit(result, as_json, _check_lines(result))
    if not result["ok"]:
        raise typer.Exit(2)


def _check_lines(report: dict[str, Any]) -> list[str]:
    """The findings of `dmo check`, escaped: a type such as date32[day] is no rich markup."""
    from rich.markup import escape

    return [escape(line) for line in _check_findings(report)]


def _check_findings(report: dict[str, Any]) -> list[str]:
    problems = report["problems"]
    if problems:
        head = "a problem" if len(problems) == 1 else f"{len(problems)} problems"
        return [f"{report['data']}: {head} to fix before `dmo train` takes it:"] + [
            f"  {i}. {problem}" for i, problem in enumerate(problems, 1)
        ]
    columns = report["columns"]
    kinds = []
    if columns["numeric"]:
        kinds.append(f"{len(columns['numeric'])} numeric ({', '.join(columns['numeric'])})")
    if columns["categorical"]:
        levels = ", ".join(f"{name}: {n} levels" for name, n in columns["categorical"].items())
        kinds.append(f"{len(columns['categorical'])} text, one-hot ({levels})")
    if columns["embedding"]:
        kinds.append(f"the vector column {columns['embedding']}")
    classes = report["classes"]
    positive = f", positive {report['positive']!r}" if report["positive"] is not None else ""
    counts = ", ".join(f"{c!r}: {n}" for c, n in zip(classes, report["class_counts"]))
    return [
        f"{report['data']}: ok, train would take it ({report['rows']} rows)",
        f"  label '{report['label_col']}': {counts}{positive}; problem {report['problem']}",
        f"  features: {report['n_features']} from {'; '.join(kinds)}"
        + (f"; missing values filled ({report['impute']})" if report["impute"] != "none" else ""),
    ] + [f"  {name}: read as {how['read']}" for name, how in columns.get("derived", {}).items()]


def extract(
    source: Path = typer.Argument(
        ...,
        help="Image folder (one subfolder per class; 'unlabeled/' or loose files: no label), "
        "text table (CSV/TSV/parquet/JSONL) or folder of .txt files per class.",
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Parquet feature table to write."),
    kind: str = typer.Option("auto", "--kind", help="image, text or auto (a table or .txt folder is text)."),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        help="Local model folder (save_pretrained layout, or a timm "
        "folder) or a hub name already in the local Hugging Face cache; offline only. "
        "Default: facebook/dinov2-small (image), sentence-transformers/all-MiniLM-L6-v2 (text).",
    ),
    device: str = typer.Option("auto", "--device", help="auto (CUDA if present), cpu or cuda."),
    batch_size: int = typer.Option(64, "--batch-size", help="Items per forward pass."),
    dtype: str = typer.Option(
        "auto", "--dtype", help="auto (bf16 for images on CUDA, else fp32), fp32, bf16 or fp16 (autocast)."
    ),
    workers: Optional[int] = typer.Option(
        None,
        "--workers",
        help="Image decode worker processes (0: in the main process; default: one per core, at most 8).",
    ),
    pooling: str = typer.Option(
        "auto",
        "--pooling",
        help="cls, mean (text: attention-masked) or auto (the checkpoint's own; else mean for text, cls for images).",
    ),
    normalize: Optional[bool] = typer.Option(
        None,
        "--normalize/--no-normalize",
        help="L2-normalize the features (default: as a sentence-transformers checkpoint says, else no).",
    ),
    views: Optional[str] = typer.Option(
        None,
        "--views",
        help="Augmented image views as extra columns, e.g. weak:1,strong:2 -> features_weak_0, features_strong_0, "
        "features_strong_1.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the augmented views."),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Keep the rows already in OUTPUT (or in a killed run's checkpoints) and extract only the rest.",
    ),
    checkpoint_every: int = typer.Option(
        4096, "--checkpoint-every", help="Save finished rows for --resume every N items."
    ),
    text_col: str = typer.Option("text", "--text-col", help="Text column of a table."),
    label_col: str = typer.Option(
        "label", "--label-col", help="Label column of a table (missing column: all rows unlabeled). Written as 'label'."
    ),
    max_length: Optional[int] = typer.Option(
        None, "--max-length", help="Truncate texts to this many tokens (default: the model's limit)."
    ),
    report: Optional[Path] = typer.Option(
        None, "--report", help="Write the JSON report (incl. skipped unreadable items) here."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Embed images or texts with a pretrained backbone into a feature table `dmo train` reads.

    Example: dmo extract photos/ -o features.parquet --model ./dinov2-small --views weak:1,strong:2
    """
    from dmocli import progress
    from dmocli.extract import ExtractOptions
    from dmocli.extract import extract as run_extract

    # A batch scheduler's SIGTERM raises Terminated (main's handler, every command): finished rows are saved
    # for --resume on the way out, and the exit code is 143.
    opts = ExtractOptions(
        kind=kind,
        model=model,
        device=device,
        batch_size=batch_size,
        dtype=dtype,
        workers=workers,
        pooling=pooling,
        normalize=normalize,
        views=views,
        seed=seed,
        resume=resume,
        text_col=text_col,
        label_col=label_col,
        max_length=max_length,
        checkpoint_every=checkpoint_every,
    )
    with progress.task("extract", unit="items") as bar:

        def started(total: int) -> Callable[[int], None]:
            bar.update(total=total)
            return bar.advance

        result = run_extract(source, output, opts, report, None if bar is progress.OFF else started)
    if result["n_skipped"]:
        err.print(
            f"dmo: warning: skipped {result['n_skipped']} unreadable item(s), e.g. "
            f"{next(iter(result['skipped'][0].values()))}" + ("" if report else " (list them with --report FILE)"),
            markup=False,
        )
    rate = f", {result['items_per_second']:.1f} items/s" if result["items_per_second"] else ""
    emit(
        result,
        as_json,
        [
            f"wrote {result['n_rows']} rows x {result['dim']} features to {output} "
            f"({result['n_extracted']} extracted in {result['extract_seconds']:.1f} s{rate}, "
            f"{result['n_resumed']} resumed, {result['n_skipped']} skipped)"
        ],
    )


# In the order `dmo --help` lists them.
for command in (
    train,
    threshold.threshold,
    subsample.subsample,
    evaluate.evaluate,
    check,
    monitor.monitor,
    predict.predict,
    extract,
    describe.solvers,
    describe.info,
):
    app.command()(command)
