"""What a command prints: the report's warnings on stderr, then its JSON or its summary lines on stdout.

Every command module of dmocli/cli/commands/ prints through `emit`, so `--json` puts one JSON object on stdout
whatever the command, and dmocli/cli/process.py can tell whether a report is out already (`printed_reports`).
Everything printed goes through `out` and `err`, which print text as text (`shown`): names and values from the
data ("[/]", "[week 1]", ":warning:", an escape sequence in a column name) are neither rich markup nor terminal
commands. A reader of stdout that went away (`| head`) does not stop the command: what is left to print goes to
/dev/null, and dmocli/cli/process.py ends a command that succeeded otherwise with 141 (`watching_stdout`).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import re
import sys
from typing import Any, Callable, Iterator

from rich.console import Console

from dmocli.errors import UnreachableTarget

# Control characters (C0 but the line break, DEL, C1) and the bidirectional overrides that reorder what a terminal
# shows: printed as their escapes (\x1b, \u202e), so a value can neither move the cursor, retitle the window, clear
# the screen nor make one text read as another.
_UNSHOWN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_INNER_BREAK = re.compile("(?<=[^\n])\n(?=[^\n])")


def shown(text: str) -> str:
    """`text` as it may reach a terminal: every control character as its escape. Line breaks that begin or end
    the text are the printer's (a blank line before a table); one inside it came from a value (a column name
    spanning lines) and is shown as \\n, so no value can print a line of its own."""
    text = _UNSHOWN.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return _INNER_BREAK.sub(r"\\n", text)


class _TextConsole(Console):
    """A rich console that prints text as text: markup and emoji codes off, control characters shown (`shown`),
    in every string it renders, a table's cells included. A reader of standard output that went away is noted
    (`stdout_reader_gone`; rich would exit 1 without a word, and throw the command's files away); on standard
    error, what cannot be said is dropped."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, soft_wrap=True, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Any:
        return super().render_str(shown(text), **{**kwargs, "markup": False, "emoji": False})

    def on_broken_pipe(self) -> None:
        del self._buffer[:]  # not written again by a later print
        if not self.stderr:
            stdout_reader_gone()


out = _TextConsole()
err = _TextConsole(stderr=True)
_READER_GONE: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar("reader_gone", default=None)


@contextlib.contextmanager
def watching_stdout() -> Iterator[list[bool]]:
    """Inside the block, a reader of standard output that goes away is noted in the yielded list (one True), for
    dmocli/cli/process.py to end the command with; a command ends as it would have, its files complete."""
    gone: list[bool] = []
    token = _READER_GONE.set(gone)
    try:
        yield gone
    finally:
        _READER_GONE.reset(token)


def stdout_reader_gone() -> None:
    """Note that stdout's reader went away, and point stdout at /dev/null: what the command prints after (the rest
    of its summary, Python's last flush) is written nowhere, and no write fails again."""
    gone = _READER_GONE.get()
    if gone is not None and not gone:
        gone.append(True)
    quiet_stdout()


def quiet_stdout() -> None:
    """Point stdout at /dev/null: Python's final flush of a closed or full stdout would fail once more."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real descriptor (a test's captured stdout): nothing to flush later
        pass
    finally:
        os.close(devnull)


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
        write_stdout(dumps(report))
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

    write_stdout(dumps(report))


def write_stdout(text: str) -> None:
    """Write `text` to standard output and flush it; a reader that went away is noted, as `out` notes it."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        if not (isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE):
            raise
        stdout_reader_gone()
