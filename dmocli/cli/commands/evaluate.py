"""`dmo evaluate`: the options EvaluateOptions declares (dmocli/command_options.py), one call of
`use.evaluate.evaluation`, and its result's figures with the gate's verdict (EvaluateResult.lines)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dmocli.cli.commands.shared import engine_choice, strictness
from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit
from dmocli.command_options import EvaluateOptions


@takes_options(EvaluateOptions)
def evaluate(
    model: Path = typer.Argument(..., help="Model file (.safetensors)."),
    data: Path = typer.Argument(..., help="Labeled table to evaluate on (`-`: a CSV on standard input)."),
    *,
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Draw the precision-recall curve with the operating point to this PNG."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    options: EvaluateOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
) -> None:
    """Precision, recall, F-beta, AP and ROC AUC of a model at its stored threshold; --gate fails a model whose
    target DATA shows missed (exit 3).

    Example: dmo evaluate fraud.safetensors holdout.csv --gate --gate-confidence 0.95
    """
    from dmocli.use.evaluate import evaluation
    from dmocli.use.results.evaluation import GateFailed

    try:
        result = evaluation(
            model,
            data,
            report,
            plot,
            engine=engine_choice(options),
            **strictness(options),
            gate=options.gate,
            gate_confidence=options.gate_confidence,
            allow_train_rows=options.allow_train_rows,
            time_col=options.time_col,
            every=options.every,
            history=options.history,
        )
    except GateFailed as failed:  # the figures and the verdict, as a pass prints them; then the one-line message
        emit(failed.report, as_json, failed.result.lines())
        raise
    emit(result.to_dict(), as_json, result.lines())
