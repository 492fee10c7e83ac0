"""`dmo solvers [NAME]`: the registered solvers, or one with its --param keys, as `dmocli.solvers.describe`
lists them: a few lines for a person, or with --json a report of the shared schema (docs/report-schema.md)."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.table import Table

from dmocli.cli.output import out, print_json
from dmocli.errors import DmoError


def solvers(
    name: Optional[str] = typer.Argument(None, help="A solver to show in full, with its --param keys."),
    as_json: bool = typer.Option(False, "--json", help="Print the solvers (or NAME) as JSON."),
) -> None:
    """List the solvers, the default first; `dmo solvers NAME` shows one with its --param keys.

    Example: dmo solvers ero
    """
    from dmocli.options import TrainOptions
    from dmocli.report import envelope
    from dmocli.solvers import available, describe

    default = TrainOptions().solver
    if name is not None and name not in available():
        raise DmoError(f"no solver {name!r}; choose from: {', '.join(available())}")
    names = [name] if name is not None else [default, *(other for other in available() if other != default)]
    records = [describe(solver) for solver in names]
    if as_json:
        print_json(envelope("solvers", default=default, solvers=records))
        return
    if name is None:
        width = max(len(solver) for solver in names) + len(" (default)")
        for record in records:
            label = record["name"] + (" (default)" if record["name"] == default else "")
            out.print(f"{label:<{width}}  {record['summary']}", markup=False)
        out.print("\n`dmo solvers NAME` shows a solver's --param keys; `dmo train --solver NAME` trains with it.")
        return
    _print_solver(records[0], default)


def _print_solver(record: dict[str, Any], default: str) -> None:
    yes_no = {True: "yes", False: "no"}
    out.print(f"{record['name']}{' (default)' if record['name'] == default else ''}: {record['summary']}", markup=False)
    out.print(
        f"models: {', '.join(record['models'])}"
        + "".join(
            f" ({', '.join(kinds)} also with --engine {engine})"
            for engine, kinds in record["engines"].items()
            if engine != "local"
        )
        + f"; problems: {', '.join(record['problems'])}; "
        f"multi-class: {yes_no[record['multiclass']]}; "
        f"streaming: {yes_no[record['streaming']]}; unlabeled rows: {yes_no[record['uses_unlabeled']]}; "
        f"torchrun: {yes_no[record['distributed']]}; --model auto: {yes_no[record['model_auto']]}",
        markup=False,
    )
    if not record["params"]:
        return
    table = Table(show_edge=False)
    table.add_column("--param")
    table.add_column("default")
    table.add_column("meaning")
    for param in record["params"]:
        table.add_row(param["name"], repr(param["default"]), param["help"] + _scope(param))
    out.print(table)


def _scope(param: dict[str, Any]) -> str:
    """Where a parameter applies when narrower than its solver (its declared `models`, `torchrun`), as the train
    check enforces it."""
    limits = [f"--model {', '.join(param['models'])}"] if "models" in param else []
    limits += ["without torchrun"] if param.get("torchrun") is False else []
    return f" (only {', '.join(limits)})" if limits else ""
