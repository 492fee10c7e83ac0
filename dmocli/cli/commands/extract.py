"""`dmo extract`: the options ExtractOptions declares (dmocli/command_options.py), one call of
`extract.extract` under a progress bar, and its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import typer

from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit, err
from dmocli.command_options import ExtractOptions


@takes_options(ExtractOptions, check=False)  # the runner checks the declaration once the outputs are checked
def extract(
    source: Path = typer.Argument(
        ...,
        help="Image folder (one subfolder per class; 'unlabeled/' or loose files: no label), "
        "text table (CSV/TSV/parquet/JSONL) or folder of .txt files per class.",
    ),
    *,
    output: Path = typer.Option(..., "--output", "-o", help="Parquet feature table to write."),
    options: ExtractOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
    report: Optional[Path] = typer.Option(
        None, "--report", help="Write the JSON report (incl. skipped unreadable items) here."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Embed images or texts with a pretrained backbone into a feature table `dmo train` reads.

    Example: dmo extract photos/ -o features.parquet --model ./dinov2-small --views weak:1,strong:2
    """
    from dmocli import progress
    from dmocli.extract import extract as run_extract

    # A batch scheduler's SIGTERM raises Terminated (main's handler, every command): finished rows are saved
    # for --resume on the way out, and the exit code is 143.
    with progress.task("extract", unit="items") as bar:

        def started(total: int) -> Callable[[int], None]:
            bar.update(total=total)
            return bar.advance

        result = run_extract(source, output, options, report, progress=None if bar is progress.OFF else started)
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
