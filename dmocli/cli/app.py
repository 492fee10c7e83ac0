"""The `dmo` commands: each parses its options and calls one library function; what it prints goes through
`_emit`. How the process runs a command and maps errors to exit codes is dmocli/cli/process.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer

from dmocli.cli import describe
from dmocli.cli.commands import monitor, subsample
from dmocli.cli.declared import CHECKED_OPTIONS, takes_options
from dmocli.cli.output import emit, err, out, report_on_refusal
from dmocli.engines import torchrun
from dmocli.errors import DmoError
from dmocli.options import (
    NEW_ROWS_WITHOUT_CONFIDENCE,
    TrainOptions,
    check_confidence,
    new_rows_format_problem,
    read_new_rows,
    refuse,
)

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


def _strict_option() -> Any:
    return typer.Option(
        False,
        "--strict",
        help="Refuse drift (exit 2, nothing written): a text column with more than --max-unseen of its rows at "
        "levels training never saw, or a numeric column missing in every row. Without it, drift is a warning.",
    )


def _max_unseen_option() -> Any:
    return typer.Option(
        None,
        "--max-unseen",
        metavar="FRACTION",
        help="Share of a column's rows at unseen levels that --strict tolerates (default 0.01; implies --strict).",
    )


def _strictness(strict: bool, max_unseen: Optional[float]) -> dict[str, Any]:
    """--max-unseen alone asks for the check it sets the tolerance of."""
    from dmocli.prep.drift import DEFAULT_MAX_UNSEEN

    return {
        "strict": strict or max_unseen is not None,
        "max_unseen": DEFAULT_MAX_UNSEEN if max_unseen is None else max_unseen,
    }


def _split_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    constrained = {"fpor": "precision", "frop": "recall"}.get(report.get("problem") or "")
    for name, s in report.get("splits", {}).items():
        if "precision" in s and "accuracy" not in s:
            feasible = "" if s.get("feasible") is None else f"  feasible={s['feasible']}"
            lines.append(
                f"{name:>6}: {_figure(s, 'precision', constrained)}  {_figure(s, 'recall', constrained)}  "
                f"F{s['beta']:g} {s['f_beta']:.4f}  (tp {s['tp']}, fp {s['fp']}, fn {s['fn']}, n {s['n']}){feasible}"
            )
        else:
            lines.append(
                f"{name:>6}: accuracy {s['accuracy']:.4f}  balanced accuracy {s['balanced_accuracy']:.4f}  "
                f"macro F1 {s['macro_f1']:.4f}  (n {s['n']})"
                + (f"  min recall {min(s['per_class']['recall']):.4f}" if "macro_recall" in s else "")
            )
    return lines


def _figure(split: dict[str, Any], metric: str, constrained: str | None) -> str:
    """`recall 0.4120`; the constrained metric with its interval, where its value on new data lies (`precision
    0.9050 [0.879, 0.927] 95%`): a figure alone reads as more certain than a few hundred rows allow. No interval
    without trials (no predicted positive)."""
    interval = split.get(f"{metric}_interval") if metric == constrained else None
    shown = "" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}] {split['interval_level']:.0%}"
    return f"{metric} {split[metric]:.4f}{shown}"


@app.command()
@takes_options(TrainOptions, check=False)
def train(
    data: Path = typer.Argument(
        ...,
        help="Training table: parquet file, directory of parquet files, or CSV; `-` reads a CSV (or gzip CSV) "
        "from standard input, in one pass (fofo, ofo, lr).",
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Model file to write (default: DATA's name + .dmo.safetensors)."
    ),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    options: TrainOptions = None,  # type: ignore[assignment]  # made from the options above by takes_options
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
        header.append(_offsets_text(result["class_operating_point"]))
    if "online" in result:
        o = result["online"]
        header.append(
            f"online: F{o['beta']:g} {o['f_beta']:.4f}  precision {o['precision']:.4f}  recall {o['recall']:.4f}  "
            f"(first pass, {o['n']} rows, {o['rows_per_second']:,.0f} rows/s)"
        )
    outlook = _outlook_line(result, *_held_out_rows(result))
    lines = header + _rounds_rule_line(result) + _cv_rule_line(result) + _certificate_line(result)
    lines += _split_lines(result) + outlook
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


def _outlook_line(report: dict[str, Any], split_name: str, new_rows: int | None) -> list[str]:
    """The chance the target holds on the next `new_rows` rows like the split's (default: as many as it has),
    and, below 0.8, the option that makes it high. None for a certified threshold: its line says it already."""
    metric = {"fpor": "precision", "frop": "recall"}.get(report.get("problem") or "")
    split = report.get("splits", {}).get(split_name)
    if metric is None or split is None or "tp" not in split or report.get("confidence") is not None:
        return []
    from dmocli.operating_point.outlook import LOW_OUTLOOK, outlook  # scipy: only where there is a target

    rows = new_rows or split["n"]
    chance = outlook(split, metric, report["target"], rows)
    if chance is None:
        return []
    line = f"outlook: {metric} >= {report['target']:g} on the next {rows:,} rows with probability about {chance:.2f}"
    if chance < LOW_OUTLOOK:
        line += f"; below {LOW_OUTLOOK:g}: --confidence 0.95 picks a threshold that holds with probability 0.95"
    return [line]


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


@app.command()
def threshold(
    model: Path = typer.Argument(..., help="Model file (.safetensors) written by dmo train."),
    data: Optional[Path] = typer.Argument(
        None,
        help="Labeled table to fit the threshold on (`-`: a CSV on standard input). Without it, the held-out "
        "scores MODEL keeps (out-of-fold or validation): re-target without new labels.",
    ),
    problem: Optional[str] = typer.Option(
        None,
        "--problem",
        "-p",
        help="fpor, frop or ofbs (any case). Default: the problem, target and --confidence stored in MODEL.",
    ),
    target: Optional[float] = typer.Option(None, "--target", "-a", help="Target in (0,1) for fpor/frop."),
    beta: Optional[float] = typer.Option(None, "--beta", help="Beta of F-beta (default 1)."),
    confidence: Optional[float] = typer.Option(
        None, "--confidence", help="Clopper-Pearson lower bound level (e.g. 0.95)."
    ),
    new_rows: Optional[str] = typer.Option(
        None,
        "--new-rows",
        metavar="N|inf",
        help="With --confidence: the guarantee is about the metric measured on a new sample of this many rows "
        "(default: as many as DATA's labeled rows, or as NEW has with --adapt; inf: the population value). "
        "Without --problem and "
        "--confidence, the model's own certificate is re-fitted with the sample size it stored.",
    ),
    allow_infeasible: bool = typer.Option(
        False, "--allow-infeasible", help="Keep the closest threshold when unreachable."
    ),
    allow_train_rows: bool = typer.Option(
        False,
        "--allow-train-rows",
        help="Fit on DATA even when it holds the rows MODEL was trained on (refused by default: optimistic).",
    ),
    adapt: Optional[Path] = typer.Option(
        None,
        "--adapt",
        metavar="NEW",
        help="Move the threshold for the positive rate estimated on these unlabeled rows (label shift; no DATA).",
    ),
    prior: Optional[float] = typer.Option(
        None, "--prior", metavar="R", help="Move the threshold for this known positive rate (label shift; no DATA)."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="New model file to write."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    engine: str = _engine_option(),
    scheduler: Optional[str] = _scheduler_option(),
    workers: int = _workers_option(),
) -> None:
    """Re-fit a model's threshold exactly on DATA, or on the held-out scores it keeps, and write a new model file.

    Example: dmo threshold model.safetensors fresh.parquet -o refit.safetensors  (the model's own problem)
    Example: dmo threshold model.safetensors --problem fpor --target 0.95 -o strict.safetensors  (no new labels)
    Example: dmo threshold model.safetensors --adapt march.parquet -o march.safetensors  (a new positive rate)
    """
    if adapt is not None or prior is not None:
        _adapt_threshold(
            model, data, adapt, prior, problem, confidence, allow_infeasible, output, report, as_json, new_rows
        )
        return
    from dmocli.engines.choice import EngineChoice
    from dmocli.operating_point.problems import Problem
    from dmocli.pipelines.apply import refit_threshold

    problems = []  # every one found before any reading, in one message
    if problem is None and (target is not None or beta is not None):
        given = " and ".join(flag for flag, value in (("--target", target), ("--beta", beta)) if value is not None)
        problems.append(f"{given} needs --problem (without it, the problem stored in MODEL is used as it is)")
    sample = read_new_rows(new_rows)
    # Its value now; whether a --confidence goes with it (maybe the one stored in MODEL), refit_threshold checks
    # once it knows.
    problems += [problem for problem in [new_rows_format_problem(sample)] if problem]
    try:
        check_confidence(confidence)
    except DmoError as exc:
        problems.append(str(exc))
    asked = None
    try:
        if problem is not None:
            asked = Problem.from_options(problem, target, 1.0 if beta is None else beta, confidence)
    except DmoError as exc:
        problems.append(str(exc))
    refuse(problems)
    with report_on_refusal(as_json):
        result = refit_threshold(
            model,
            data,
            asked,
            output,
            confidence,
            allow_infeasible,
            report,
            EngineChoice(engine, scheduler, workers),
            sample,
            allow_train_rows,
        )
    stored = "  (stored in the model)" if result["problem_source"] == "model" else ""
    target_text = "" if result["target"] is None else f", target {result['target']:g}"
    point = result.get("class_operating_point")  # a multi-class model's offsets, not one threshold
    lines = [
        f"model: {output}  "
        + (f"threshold (logit): {result['threshold']:.6g}" if point is None else _offsets_text(point)),
        f"problem: {result['problem']}{target_text}{stored}",
    ]
    emit(result, as_json, lines + _split_lines(result) + _outlook_line(result, "data", None))


def _offsets_text(point: dict[str, Any]) -> str:
    """A multi-class operating point in one line: its class offsets and the classes left below their floor."""
    offsets = ", ".join(f"{row['class']} {row['offset']:+.3g}" for row in point["per_class"])
    below = f"; below the floor: {', '.join(map(str, point['below_floor']))}" if point["below_floor"] else ""
    return f"class offsets: {offsets}{below}"


def _adapt_threshold(
    model: Path,
    data: Optional[Path],
    adapt: Optional[Path],
    prior: Optional[float],
    problem: Optional[str],
    confidence: Optional[float],
    allow_infeasible: bool,
    output: Path,
    report: Optional[Path],
    as_json: bool,
    new_rows: Optional[str] = None,
) -> None:
    """`threshold --adapt NEW | --prior R`: the model's own problem at a new positive rate."""
    from dmocli.pipelines.adapt import adapt_to_rate

    problems = []
    if data is not None:
        problems.append("--adapt and --prior move the threshold on the held-out scores MODEL keeps: leave DATA out")
    if problem is not None:
        problems.append("--adapt and --prior keep the problem stored in MODEL: leave --problem out")
    if adapt is not None and prior is not None:
        problems.append("give --adapt NEW or --prior R, not both")
    sample = read_new_rows(new_rows)
    problems += [problem for problem in [new_rows_format_problem(sample)] if problem]
    if sample is not None and confidence is None:
        problems.append(NEW_ROWS_WITHOUT_CONFIDENCE)
    refuse(problems)
    with report_on_refusal(as_json):
        result = adapt_to_rate(
            model,
            output,
            new_data=adapt,
            prior=prior,
            confidence=confidence,
            allow_infeasible=allow_infeasible,
            report_path=report,
            new_rows=sample,
        )
    adapted = result["adapted"]
    lines = [
        f"model: {output}  threshold (logit): {result['threshold']:.6g} (was {result['previous_threshold']:.6g})",
        f"positive rate: {adapted['new_rate']:.4f} ({adapted['rate_source']}); trained at "
        f"{adapted['training_rate']:.4f}",
        _expected_line("at the old threshold", adapted["at_old"]),
        _expected_line("at the new threshold", adapted["at_new"]),
    ]
    if adapted.get("new_rows") is not None:
        metric = "recall" if result["problem"] == "frop" else "precision"
        lines.append(
            f"certified (feasible={adapted['feasible']}) for the {metric} measured on the next "
            f"{adapted['new_rows']:,} rows at a rate of at least {adapted['rate_used']:.4f}"
        )
    emit(result, as_json, lines + ([adapted["note"]] if adapted.get("note") else []))


def _expected_line(where: str, figures: dict[str, Any]) -> str:
    return (
        f"  expected {where}: precision {figures['precision']:.4f}  recall {figures['recall']:.4f}  "
        f"F {figures['f_beta']:.4f}"
    )


@app.command()
def evaluate(
    model: Path = typer.Argument(..., help="Model file (.safetensors)."),
    data: Path = typer.Argument(..., help="Labeled table to evaluate on (`-`: a CSV on standard input)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Draw the precision-recall curve with the operating point to this PNG."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    strict: bool = _strict_option(),
    max_unseen: Optional[float] = _max_unseen_option(),
    gate: bool = typer.Option(
        False,
        "--gate",
        help="Exit 3 (with the full report) when DATA shows the model's target missed: its precision (fpor) or "
        "recall (frop) below the target. An ofbs or multi-class model has no target: nothing is checked, and a "
        "warning says so.",
    ),
    gate_confidence: Optional[float] = typer.Option(
        None,
        "--gate-confidence",
        metavar="C",
        help="Fail the gate only when DATA rules the target out: the metric's one-sided Clopper-Pearson upper "
        "bound at level C (e.g. 0.95) is below it, so a small holdout's chance dip passes (implies --gate).",
    ),
    engine: str = _engine_option(),
    scheduler: Optional[str] = _scheduler_option(),
    workers: int = _workers_option(),
) -> None:
    """Precision, recall, F-beta, AP and ROC AUC of a model at its stored threshold; --gate fails a model whose
    target DATA shows missed (exit 3).

    Example: dmo evaluate fraud.safetensors holdout.csv --gate --gate-confidence 0.95
    """
    from dmocli.engines.choice import EngineChoice
    from dmocli.pipelines.apply import evaluate as run_evaluate

    with report_on_refusal(as_json):
        result = run_evaluate(
            model,
            data,
            report,
            plot,
            EngineChoice(engine, scheduler, workers),
            **_strictness(strict, max_unseen),
            gate=gate,
            gate_confidence=gate_confidence,
        )
    emit(result, as_json, _split_lines(result) + _outlook_line(result, "data", None) + _gate_lines(result))


def _gate_lines(report: dict[str, Any]) -> list[str]:
    """The gate's verdict under the figures, where it checked something (else a warning said why not)."""
    from dmocli.operating_point.gate import gate_line

    gate = report.get("gate")
    return [] if gate is None or gate["passed"] is None else [gate_line(gate, report["data"])]


@app.command()
@takes_options(TrainOptions, used=CHECKED_OPTIONS, check=False)
def check(
    data: Path = typer.Argument(..., help="Training table to check: parquet file, directory of parquet files, or CSV."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    options: TrainOptions = None,  # type: ignore[assignment]  # made from train's options by takes_options
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


@app.command()
def predict(
    model: Path = typer.Argument(..., help="Model file (.safetensors)."),
    data: Path = typer.Argument(..., help="Table to score, label column not needed (`-`: a CSV on standard input)."),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        help="Predictions file: .parquet, or CSV by its "
        "name (.csv, .csv.gz, .tsv; `-`: CSV on standard output); a directory of parquet part "
        "files with --engine dask.",
    ),
    id_col: Optional[str] = typer.Option(None, "--id-col", help="Column to copy into the output to identify rows."),
    csv_escape: bool = typer.Option(
        True,
        "--csv-escape/--no-csv-escape",
        help="CSV output: put a ' before text cells starting with = + - @ tab or CR, which spreadsheets would run "
        "as formulas; --no-csv-escape writes them verbatim.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary to stdout."),
    explain: Optional[int] = typer.Option(
        None,
        "--explain",
        metavar="K",
        help="Also each row's K largest contributions to its logit: explain_<i>_feature and explain_<i>_value "
        "(linear: exact; gbdt: XGBoost's pred_contribs; mlp: integrated gradients).",
    ),
    strict: bool = _strict_option(),
    max_unseen: Optional[float] = _max_unseen_option(),
    engine: str = _engine_option(),
    scheduler: Optional[str] = _scheduler_option(),
    workers: int = _workers_option(),
) -> None:
    """Write logit, probability and decision per row, streaming in record batches."""
    from dmocli.data.sources import is_stdin
    from dmocli.engines.choice import EngineChoice
    from dmocli.pipelines.apply import predict as run_predict

    to_stdout = is_stdin(output)
    if to_stdout and as_json:
        raise DmoError("--json prints to standard output, where -o - writes the predictions; drop one of them")
    result = run_predict(
        model,
        data,
        output,
        id_col,
        EngineChoice(engine, scheduler, workers),
        **_strictness(strict, max_unseen),
        csv_escape=csv_escape,
        explain=explain,
    )
    if to_stdout:  # standard output holds the predictions: the summary goes with the messages
        for warning in result["warnings"]:
            err.print(f"dmo: warning: {warning}", markup=False)
        err.print(f"wrote {result['rows']} predictions to standard output", markup=False)
    else:
        emit(result, as_json, [f"wrote {result['rows']} predictions to {output}"])


@app.command()
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


app.command()(subsample.subsample)
app.command()(monitor.monitor)
app.command()(describe.solvers)
app.command()(describe.info)
