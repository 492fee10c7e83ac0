"""Exceptions that the CLI turns into one stderr line and a stable exit code.

Library code raises these instead of printing, so that both the CLI and
Python callers get the same message; the CLI maps them to exit codes
(2: bad input or usage, 3: target not reachable).
"""

from __future__ import annotations

_SPELLING = {"cli": False}  # set by the `dmo` process (dmocli/cli/process.py); a Python caller keeps False


def speak_cli() -> None:
    """Messages from now on name command-line flags (`--allow-infeasible`); by default they name the Python
    keywords (`allow_infeasible=True`) a library caller passes instead."""
    _SPELLING["cli"] = True


def option_hint(flag: str, keyword: str) -> str:
    """How a message tells the caller to set an option: the flag on the command line, the keyword in Python."""
    return flag if _SPELLING["cli"] else keyword


class DmoError(ValueError):
    """A problem the user can fix; the message names the problem and the fix.

    A ValueError, so Python callers (and scikit-learn's estimator contract, which expects one for input it
    cannot use) can catch it with the usual exception for bad input.
    """

    exit_code = 2


class UnreachableTarget(DmoError):
    """No threshold meets (or certifies) the requested constraint; carries the best achievable value and, once
    the pipeline has made it, the full report of the refused run (printed by `--json`, written by `--report`)."""

    exit_code = 3

    def __init__(self, message: str, best_achievable: float | None = None):
        super().__init__(message)
        self.best_achievable = best_achievable
        self.report: dict | None = None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (arrow's run on for many lines)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class ReaderStopped(BrokenPipeError):
    """The reader of standard output went away before dmo wrote all of it (`dmo train ... | head -n 1`,
    `dmo predict ... -o - | head`, `--json | head -c 10`): what it read is what it wanted. Every file output the
    command completed is kept (dmocli/data/outputs.py:outputs_together), and the command ends with exit 141, as a
    shell reports `yes | head`'s yes, and one line on stderr (dmocli/cli/process.py). Raised without an errno, so
    click does not take it for its own broken pipe and end the command with exit 1."""
