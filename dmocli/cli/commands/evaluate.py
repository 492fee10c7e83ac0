"""`dmo evaluate`: the options EvaluateOptions declares (dmocli/command_options.py), one call of
`use.evaluate.evaluation`, and its result's figures with the gate's verdict (EvaluateResult.lines); --html draws
the evaluation page (dmocli/pages/evaluation.py) from the report, as `dmo report` draws it later from the JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dmocli.cli.commands.shared import engine_choice, strictness, write_report_page
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
    html: Optional[Path] = typer.Option(
        None, "--html", help="Write the evaluation page here: one self-contained HTML file (docs/pages.md)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    options: EvaluateOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
) -> None:
    """Precision, recall, F-beta, AP and ROC AUC of a model at its stored threshold; --gate fails a model whose
    target DATA shows missed (exit 3).

    Example: dmo evaluate fraud.safetensors holdout.csv --gate --gate-confidence 0.95
    """
    from dmocli.data.outputs import check_outputs
    from dmocli.pages.write import refuse_misnamed_page
    from dmocli.use.evaluate import evaluation
    from dmocli.use.results.evaluation import GateFailed

    if html is not None:  # a page that cannot be written, or not under an .html name, is refused before DATA is read
        check_outputs({"--html": html}, {})
        refuse_misnamed_page(html, "--html")
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
        write_report_page(html, failed.report)  # a failed gate's page is the one a reviewer opens
        emit(failed.report, as_json, failed.result.lines())
        raise
    write_report_page(html, result.to_dict())
    emit(result.to_dict(), as_json, result.lines())
