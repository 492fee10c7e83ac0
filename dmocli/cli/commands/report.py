"""`dmo report INPUT... -o PAGE.html`: a page drawn later from what a run kept (a report JSON, a model file, monitor
reports or a monitoring history), the same bytes as the run's own --html page of the same report
(dmocli/pages/inputs.py decides which page; docs/pages.md says what each shows)."""

from pathlib import Path  # no `from __future__ import annotations`: the parameters' types are read as objects

import typer


def report(
    inputs: list[Path] = typer.Argument(
        ...,
        help="A train, evaluate or monitor report JSON (--report of the command), a model file, several monitor "
        "reports in time order, or one monitoring history (.parquet, --history of dmo monitor).",
    ),
    output: Path = typer.Option(..., "--output", "-o", help="The page to write: one self-contained HTML file."),
) -> None:
    """Draw the page of a report, a model file or a monitoring history: one HTML file, no network needed.

    Example: dmo report train.json -o train.html
    """
    from dmocli.data.outputs import check_outputs
    from dmocli.pages.inputs import page_for
    from dmocli.pages.write import refuse_misnamed_page, write_page

    check_outputs({"-o": output}, {f"INPUT {k + 1}" if len(inputs) > 1 else "INPUT": p for k, p in enumerate(inputs)})
    refuse_misnamed_page(output, "-o")
    write_page(page_for(inputs), output)
