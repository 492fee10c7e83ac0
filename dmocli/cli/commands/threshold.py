"""`dmo threshold`: the options ThresholdOptions declares (dmocli/command_options.py: their constraints and the
rules between them), then one call of `use.apply.refit_threshold` (a new problem, or the model's own on new
labels) or, with --adapt/--prior, of `use.adapt.adapt_to_rate` (the model's own problem at a new positive rate).
What it checks itself is what no option rule can say: DATA (an argument) beside --adapt, and the problem asked."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import typer

from dmocli.cli.commands.shared import engine_choice
from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit, report_on_refusal
from dmocli.cli.report_lines import offsets_text, outlook_line, split_lines
from dmocli.command_options import ThresholdOptions
from dmocli.errors import DmoError
from dmocli.options import option_errors, refuse


@takes_options(ThresholdOptions, check=False)  # its own checks join the declared ones, in one message
def threshold(
    model: Path = typer.Argument(..., help="Model file (.safetensors) written by dmo train."),
    data: Optional[Path] = typer.Argument(
        None,
        help="Labeled table to fit the threshold on (`-`: a CSV on standard input). Without it, the held-out "
        "scores MODEL keeps (out-of-fold or validation): re-target without new labels.",
    ),
    *,
    options: ThresholdOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
    output: Path = typer.Option(..., "--output", "-o", help="New model file to write."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Re-fit a model's threshold exactly on DATA, or on the held-out scores it keeps, and write a new model file.

    Example: dmo threshold model.safetensors fresh.parquet -o refit.safetensors  (the model's own problem)
    Example: dmo threshold model.safetensors --problem fpor --target 0.95 -o strict.safetensors  (no new labels)
    Example: dmo threshold model.safetensors --adapt march.parquet -o march.safetensors  (a new positive rate)
    """
    problems = option_errors(options)  # every one found before any reading, in one message
    if options.adapt is not None or options.prior is not None:
        _adapt_threshold(model, data, options, problems, output=output, report=report, as_json=as_json)
        return
    from dmocli.operating_point.problems import Problem
    from dmocli.use.apply import refit_threshold

    # --new-rows' value is checked now; whether a --confidence goes with it (maybe the one stored in MODEL),
    # refit_threshold checks once it knows.
    asked = None
    try:
        if options.problem is not None:
            beta = 1.0 if options.beta is None else options.beta
            asked = Problem.from_options(options.problem, options.target, beta, options.confidence)
    except DmoError as exc:
        problems.append(str(exc))
    refuse(list(dict.fromkeys(problems)))  # the Problem repeats a declared refusal word for word: once is enough
    with report_on_refusal(as_json):
        result = refit_threshold(
            model,
            data,
            asked,
            output,
            confidence=options.confidence,
            allow_infeasible=options.allow_infeasible,
            report_path=report,
            engine=engine_choice(options),
            new_rows=options.new_rows,
            allow_train_rows=options.allow_train_rows,
        )
    stored = "  (stored in the model)" if result["problem_source"] == "model" else ""
    target_text = "" if result["target"] is None else f", target {result['target']:g}"
    point = result.get("class_operating_point")  # a multi-class model's offsets, not one threshold
    lines = [
        f"model: {output}  "
        + (f"threshold (logit): {result['threshold']:.6g}" if point is None else offsets_text(point)),
        f"problem: {result['problem']}{target_text}{stored}",
    ]
    # the population's value, as --confidence certifies by default: not a sample size the re-target never used
    emit(result, as_json, lines + split_lines(result) + outlook_line(result, "data", math.inf))


def _adapt_threshold(
    model: Path,
    data: Optional[Path],
    options: ThresholdOptions,
    problems: list[str],
    *,
    output: Path,
    report: Optional[Path],
    as_json: bool,
) -> None:
    """`threshold --adapt NEW | --prior R`: the model's own problem at a new positive rate. `problems`: what the
    declaration refuses (ThresholdOptions.RULES says what --adapt and --prior take with them)."""
    from dmocli.use.adapt import adapt_to_rate

    if data is not None:
        problems.append("--adapt and --prior move the threshold on the held-out scores MODEL keeps: leave DATA out")
    refuse(problems)
    with report_on_refusal(as_json):
        result = adapt_to_rate(
            model,
            output,
            new_data=options.adapt,
            prior=options.prior,
            confidence=options.confidence,
            allow_infeasible=options.allow_infeasible,
            report_path=report,
            new_rows=options.new_rows,
        )
    adapted = result["adapted"]
    lines = [
        f"model: {output}  threshold (logit): {result['threshold']:.6g} (was {result['previous_threshold']:.6g})",
        f"positive rate: {adapted['new_rate']:.4f} ({adapted['rate_source']}); trained at "
        f"{adapted['training_rate']:.4f}",
        _expected_line("at the old threshold", adapted["at_old"]),
        _expected_line("at the new threshold", adapted["at_new"]),
    ]
    if adapted.get("carried") == "share":
        lines.append(
            f"  carried to the model's scores by the share of NEW it should flag ({adapted['expected_share']:.4f}): "
            f"the cut on the held-out scores was {adapted['curve_threshold']:.6g}"
        )
    if result.get("confidence") is not None and result["problem"] != "ofbs":
        metric = "recall" if result["problem"] == "frop" else "precision"
        rows = adapted.get("new_rows")
        where = "in the population" if rows is None else f"measured on the next {rows:,} rows"
        lines.append(
            f"certified (feasible={adapted['feasible']}) for the {metric} {where} at a rate of at least "
            f"{adapted['rate_used']:.4f}"
        )
    emit(result, as_json, lines + ([adapted["note"]] if adapted.get("note") else []))


def _expected_line(where: str, figures: dict[str, Any]) -> str:
    return (
        f"  expected {where}: precision {figures['precision']:.4f}  recall {figures['recall']:.4f}  "
        f"F {figures['f_beta']:.4f}"
    )
