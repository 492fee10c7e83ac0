"""What a command prints: the report's warnings on stderr, then its JSON or its summary lines on stdout.

Every command module of dmocli/cli/commands/ prints through `emit`, so `--json` puts one JSON object on stdout
whatever the command, and dmocli/cli/process.py can tell whether a report is out already (`printed_reports`).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Any, Callable, Iterator

from rich.console import Console

from dmocli.errors import UnreachableTarget

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
_PRINTED: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("printed", default=None)


def emit(report: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    """The report's warnings on stderr (with --json too), then the JSON or the summary lines on stdout."""
    from dmocli.report import dumps

    for warning in report.get("warnings", []):
        err.print(f"dmo: warning: {warning}", markup=False)
    if as_json:
        noted = _PRINTED.get()
        if noted is not None:
            noted.append(report)
        sys.stdout.write(dumps(report))
    else:
        for line in lines:
            out.print(line)


@contextlib.contextmanager
def printed_reports() -> Iterator[list[dict[str, Any]]]:
    """The reports `emit` prints as JSON inside the block: dmocli/cli/process.py prints a failure's error report
    only where no report is out yet, so stdout holds one JSON object whatever the exit."""
    printed: list[dict[str, Any]] = []
    token = _PRINTED.set(printed)
    try:
        yield printed
    finally:
        _PRINTED.reset(token)


@contextlib.contextmanager
def report_on_refusal(as_json: bool, summary: Callable[[dict[str, Any]], list[str]] | None = None) -> Iterator[None]:
    """With --json, a refused target (exit 3) still prints the run's full report on stdout, so a script reads why
    (`feasible: false`, `best_achievable`, the intervals), with the `message` and `error` every failure's JSON
    carries; without it, a command that gives its `summary` prints the same lines a pass prints (a failed gate's
    figures and reasons stay in the CI log). The one-line message goes to stderr as always."""
    from dmocli.report import failure

    try:
        yield
    except UnreachableTarget as exc:
        if exc.report is not None and (as_json or summary is not None):
            refused = {**exc.report, **failure(exc.exit_code, "unreachable", str(exc))}
            emit(refused, as_json, [] if as_json or summary is None else summary(refused))
        raise


def print_json(report: dict[str, Any]) -> None:
    """The JSON of a command that describes rather than computes (solvers, info): no warnings, no refusal."""
    from dmocli.report import dumps

    sys.stdout.write(dumps(report))
