"""The `dmo` app: its global flags and the registration of its commands, one module each in dmocli/cli/commands/
(a shim that takes its declared options and calls one library function; what it prints goes through
dmocli/cli/output.py). How the process runs a command and maps errors to exit codes is dmocli/cli/process.py."""

from __future__ import annotations

from typing import Optional

import typer

from dmocli.cli.commands import (
    check,
    evaluate,
    extract,
    info,
    monitor,
    predict,
    report,
    solvers,
    subsample,
    threshold,
    train,
)
from dmocli.cli.output import out

app = typer.Typer(
    name="dmo",
    help="Train thresholded classifiers on imbalanced data at one operating point "
    "(precision >= a with most recall, recall >= a with best precision, or best F-beta).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from dmocli.version import __version__

        out.print(f"dmo {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    show_progress: Optional[bool] = typer.Option(
        None,
        "--progress/--no-progress",
        help="Draw the progress of long work (training, streaming passes, Dask jobs) on stderr "
        "(default: only when stderr is a terminal).",
        show_default=False,
    ),
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """dmo: exact operating points for imbalanced classification."""
    from dmocli import progress

    progress.configure(show_progress)


# In the order `dmo --help` lists them.
for command in (
    train.train,
    threshold.threshold,
    subsample.subsample,
    evaluate.evaluate,
    check.check,
    monitor.monitor,
    predict.predict,
    extract.extract,
    solvers.solvers,
    info.info,
    report.report,
):
    app.command()(command)
