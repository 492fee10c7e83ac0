"""`dmo evaluate`: the options EvaluateOptions declares (dmocli/command_options.py), one call of
`pipelines.evaluate.evaluate`, and its figures with the gate's verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from dmocli.cli.commands.shared import engine_choice, strictness
from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit, report_on_refusal
from dmocli.cli.report_lines import outlook_line, split_lines
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
    from dmocli.use.evaluate import evaluate as run_evaluate

    with report_on_refusal(as_json, _summary):
        result = run_evaluate(
            model,
            data,
            report,
            plot,
            engine=engine_choice(options),
            **strictness(options),
            gate=options.gate,
            gate_confidence=options.gate_confidence,
            allow_train_rows=options.allow_train_rows,
        )
    emit(result, as_json, _summary(result))


def _summary(report: dict[str, Any]) -> list[str]:
    """The figures and the gate's verdict: printed alike whether the gate passed or failed (exit 3), so a CI log
    shows why."""
    return split_lines(report) + outlook_line(report, "data", None) + _gate_lines(report)


def _gate_lines(report: dict[str, Any]) -> list[str]:
    """The gate's verdict under the figures, where it checked something (else a warning said why not)."""
    from dmocli.operating_point.gate import gate_line

    gate = report.get("gate")
    return [] if gate is None or gate["passed"] is None else [gate_line(gate, report["data"])]
