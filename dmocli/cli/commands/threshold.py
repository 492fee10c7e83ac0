"""`dmo threshold`: the options ThresholdOptions declares (dmocli/command_options.py), one call of
`use.threshold.threshold` (which decides re-fit, re-target, multi-class offsets or --adapt/--prior, and checks
what no option rule can say), and its result's summary (use/results/threshold.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit, report_on_refusal
from dmocli.command_options import ThresholdOptions


@takes_options(ThresholdOptions, check=False)  # use/threshold.py joins its own checks to the declared ones
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
    from dmocli.use.threshold import threshold as moved  # imported on use: `dmo --help` needs no torch

    with report_on_refusal(as_json):
        result = moved(model, data, options, output=output, report_path=report)
    emit(result.to_dict(), as_json, result.lines())
