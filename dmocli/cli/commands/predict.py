"""`dmo predict`: the options PredictOptions declares (dmocli/command_options.py), one call of
`use.predict.predict`, and where its result's summary goes (PredictResult.lines; stderr when the predictions take
stdout)."""

from __future__ import annotations

from pathlib import Path

import typer

from dmocli.cli.commands.shared import engine_choice, strictness
from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit, err
from dmocli.command_options import PredictOptions
from dmocli.errors import DmoError


@takes_options(PredictOptions)
def predict(
    model: Path = typer.Argument(..., help="Model file (.safetensors)."),
    data: Path = typer.Argument(..., help="Table to score, label column not needed (`-`: a CSV on standard input)."),
    *,
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        help="Predictions file: .parquet, or CSV by its "
        "name (.csv, .csv.gz, .tsv; `-`: CSV on standard output); a directory of parquet part "
        "files with --engine dask.",
    ),
    options: PredictOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary to stdout."),
) -> None:
    """Write logit, probability and decision per row, streaming in record batches."""
    from dmocli.data.sources import is_stdin
    from dmocli.use.predict import predict as run_predict

    to_stdout = is_stdin(output)
    if to_stdout and as_json:
        raise DmoError("--json prints to standard output, where -o - writes the predictions; drop one of them")
    result = run_predict(
        model,
        data,
        output,
        options.id_col,
        engine=engine_choice(options),
        **strictness(options),
        csv_escape=options.csv_escape,
        explain=options.explain,
        decision_names=options.decision_names,
    )
    if to_stdout:  # standard output holds the predictions: the summary goes with the messages
        for line in [f"dmo: warning: {warning}" for warning in result.warnings] + result.lines():
            err.print(line, markup=False)
    else:
        emit(result.to_dict(), as_json, result.lines())
