"""`dmo subsample`: the options SubsampleOptions declares (dmocli/command_options.py), one call of
`pipelines.subsample.subsample`, and its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit
from dmocli.command_options import SubsampleOptions


@takes_options(SubsampleOptions, check=False)  # the pipeline checks the declaration first: the API gets it too
def subsample(
    data: Path = typer.Argument(
        ..., help="Labeled table: parquet file, directory of parquet files, or CSV (local engine)."
    ),
    *,
    options: SubsampleOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
    output: Path = typer.Option(
        ..., "--output", "-o", help="Subsample parquet to write (a directory of parts with --engine dask)."
    ),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Keep an informative subsample with per-class log acceptance columns for `dmo train`.

    Example: dmo subsample big.parquet --gamma 10 -o sub.parquet && dmo train --solver lus sub.parquet
    """
    from dmocli.pipelines.subsample import subsample as run_subsample

    result = run_subsample(data, output, options, report)
    pilot = "" if result["pilot_accuracy"] is None else f"  pilot accuracy {result['pilot_accuracy']:.4f}"
    emit(
        result,
        as_json,
        [
            f"wrote {result['rows_written']} of {result['rows_read']} rows to {output} "
            f"({result['method']}, gamma {options.gamma:g}"
            + (
                f": {result['rows_kept']} accepted + {result['pilot_rows_written']} pilot rows)"
                if result["pilot_rows_written"]
                else ")"
            ),
            f"fraction kept {result['realized_fraction']:.4f} (expected {result['expected_fraction']:.4f}), "
            f"with pilot {result['fraction_used']:.4f}{pilot}  [{result['wall_seconds']:.1f} s]",
        ],
    )
