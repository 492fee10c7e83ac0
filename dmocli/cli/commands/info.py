"""`dmo info MODEL`: the options InfoOptions declares (dmocli/command_options.py), and what a model file holds
(`use.model_info.model_info`'s InfoResult), as its lines for a person or, with --json, its report of the shared
schema (docs/report-schema.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from dmocli.cli.declared import takes_options
from dmocli.cli.output import out, print_json
from dmocli.command_options import InfoOptions

if TYPE_CHECKING:
    from dmocli.use.results.info import Importance


@takes_options(InfoOptions)
def info(
    model: Path = typer.Argument(..., help="Model file (.safetensors) written by dmo train or dmo threshold."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
    options: InfoOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
) -> None:
    """What a model file holds: problem, threshold, classes, features and how it was trained.

    Example: dmo info model.safetensors --features
    """
    from dmocli.use.model_info import model_info

    result = model_info(model, **dataclasses.asdict(options))
    if as_json:
        print_json(result.to_dict())
        return
    for line in result.lines():
        out.print(line, markup=False)
    if result.importance is not None:  # --features
        _print_importance(result.importance)


def _print_importance(importance: Importance) -> None:
    """The columns, most important first, with a linear model's coefficients (levels: the 5 largest): a table on a
    terminal, and where stdout is a pipe or file, the same rows as plain aligned lines, one per column, never
    wrapped (a table laid out for an 80-column terminal split each long row over several lines)."""
    out.print(f"\nimportance: {importance.method}", markup=False)
    linear = any(column.linear for column in importance.columns)
    headings = ["column", "kind", "importance", *(["coefficient"] if linear else [])]
    rows = [
        [
            column.name,
            column.kind,
            "" if column.importance is None else f"{column.importance:.4g}",
            *([column.coefficient_text()] if linear else []),
        ]
        for column in importance.columns
    ]
    if not (out.is_terminal and _is_tty(out.file)):  # FORCE_COLOR on a pipe still lays out for 80 columns
        for line in _plain_lines([headings, *rows]):
            out.print(line, markup=False, soft_wrap=True)
        return
    table = Table(show_edge=False)
    for heading in headings:
        table.add_column(heading)
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _is_tty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def _plain_lines(rows: list[list[str]]) -> list[str]:
    """Rows as lines of cells padded to their column's widest, two spaces apart (the last cell unpadded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
