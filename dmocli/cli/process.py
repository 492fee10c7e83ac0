"""How a `dmo` process runs one command and ends: exit codes, one-line errors, Ctrl-C and SIGTERM, and the
quiet exit of the processes of a torchrun group.

Errors the user can fix (DmoError) become one line on stderr and exit code
2 (3 when a target is unreachable); anything else is exit code 1, with the
traceback only under --debug.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
from typing import Any, NoReturn

from dmocli.cli.app import app, err
from dmocli.cli.command_line import click_command, refuse_repeated_options
from dmocli.cli.machine_failures import MACHINE_FAILURE, machine_failure
from dmocli.data.outputs import outputs_together
from dmocli.engines import torchrun
from dmocli.errors import DmoError, ReaderStopped, UnreachableTarget, speak_cli

INTERRUPTED = 128 + signal.SIGINT  # the exit status of a command stopped by Ctrl-C, as shells report it
PROGRESS_FLAGS = ("--progress", "--no-progress")


def _click_kind(exc: BaseException) -> set[str]:
    """Names of the click exception classes `exc` is (typer may vendor its own copy of click, so by name)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def _exit_on_click_error(exc: Exception, debug: bool, in_group: bool) -> None:
    """Click's usage errors as one line like every other error (exit 2); `dmo` alone prints the help, as
    before."""
    kinds = _click_kind(exc)
    ctx = getattr(exc, "ctx", None)
    if "NoArgsIsHelpError" in kinds:  # typer has printed the help already
        sys.exit(2)
    if "Abort" in kinds:
        err.print("dmo: interrupted", markup=False)
        sys.exit(INTERRUPTED)
    if "UsageError" in kinds and not debug:
        hint = f" (see `{ctx.command_path} -h`)" if ctx else ""
        _report(f"dmo: error: {exc.format_message()}{hint}", None, in_group)  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))


def _in_torchrun_train(args: list[str]) -> bool:
    """`dmo train` started by torchrun as one of several processes: the only command that runs as a group, where
    every process meets the same errors and process 0 prints them. Any other command prints its own, even with
    torchrun's variables set (a user's own distributed job calling dmo)."""
    command = next((arg for arg in args if not arg.startswith("-")), None)
    return command == "train" and torchrun.launched_quietly()


def _report(line: str, exc: DmoError | None, in_group: bool) -> None:
    """Print an error line, unless another process of the group prints it (then give it time to)."""
    if not in_group or torchrun.prints(exc):
        err.print(line, markup=False)
    else:
        torchrun.let_rank_zero_report()


class Terminated(BaseException):
    """SIGTERM (a batch scheduler's stop, `timeout`, `kill`), raised in the main thread like Ctrl-C so the
    temporary output files are removed on the way out."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    speak_cli()
    in_group = _in_torchrun_train(args)
    if not in_group:
        _run_command(args, in_group)
        return
    try:
        _run_command(args, in_group)
    except SystemExit as exc:
        _leave_torchrun_process(exc.code)
    except Terminated:  # torchrun stops the other processes once one has ended (process 0, after its error line)
        _leave_torchrun_process(128 + signal.SIGTERM)


def _leave_torchrun_process(code: object) -> NoReturn:
    """End a process of a torchrun group with os._exit, skipping the interpreter's teardown.

    By now the process group is destroyed and every output written and renamed. In the teardown, a process that
    had finished its work sometimes aborted (SIGABRT, "terminate called without an active exception"; 3 of 100
    two-process runs), and torchrun then reports the whole job as failed.
    """
    if isinstance(code, str):
        err.print(code, markup=False)  # what sys.exit(text) prints
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can reach it
            pass
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def _main_telling_a_closed_stdout(command: Any, args: list[str]) -> Any:
    """The command's exit status. Click ends a command whose stdout reader went away with exit 1 and no word
    (it swaps stdout for a wrapper that swallows the final flush); that lost the report a script asked for, so it
    becomes the machine failure it is."""
    try:
        return command.main(args=args, prog_name="dmo", standalone_mode=False)
    except SystemExit:
        if type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):  # typer vendors click, renamed
            raise BrokenPipeError(errno.EPIPE, "standard output was closed") from None
        raise


def _quiet_stdout() -> None:
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


def _run_command(args: list[str], in_group: bool) -> None:
    """Run one dmo command; it always ends in SystemExit with the command's exit status."""
    if threading.current_thread() is threading.main_thread():  # a handler can only be set there
        signal.signal(signal.SIGTERM, _raise_terminated)
    debug = "--debug" in args
    if debug:  # a global option, accepted after the command too (`dmo train --debug ...`), as users type it
        args = ["--debug", *(arg for arg in args if arg != "--debug")]
    shown = [arg for arg in args if arg in PROGRESS_FLAGS]
    if shown:  # global too; the last one given wins, as for any flag
        args = [shown[-1], *(arg for arg in args if arg not in PROGRESS_FLAGS)]
    if in_group and not torchrun.prints(None) and ("--help" in args or "-h" in args):
        sys.exit(0)  # the help page once, from process 0, not once per process
    try:
        # Not standalone: click's usage errors come here too, to be one line like every other error.
        command = click_command(app)
        refuse_repeated_options(command, args)
        with outputs_together():  # the model, report and printed report all appear, or none of them
            code = _main_telling_a_closed_stdout(command, args)
            sys.stdout.flush()  # a full disk or closed pipe under stdout fails here, before the files appear
        if code == INTERRUPTED and (
            not in_group or torchrun.prints(None)
        ):  # typer ends a Ctrl-C'd command so, silently
            err.print("dmo: interrupted", markup=False)
        sys.exit(code if isinstance(code, int) else 0)
    except UnreachableTarget as exc:
        if debug:
            raise
        _report(f"dmo: {exc}", exc, in_group)
        sys.exit(exc.exit_code)
    except DmoError as exc:
        if debug:
            raise
        _report(f"dmo: error: {exc}", exc, in_group)  # raised alike by every process of a group: one line, rank 0's
        sys.exit(exc.exit_code)
    except ReaderStopped:  # predictions piped into `head` and the like
        _quiet_stdout()
        sys.exit(0)
    except (KeyboardInterrupt, Terminated) as exc:
        if not in_group or torchrun.prints(None):
            err.print("dmo: interrupted" if isinstance(exc, KeyboardInterrupt) else "dmo: terminated", markup=False)
        sys.exit(INTERRUPTED if isinstance(exc, KeyboardInterrupt) else 128 + signal.SIGTERM)
    except Exception as exc:  # noqa: BLE001 - last line of defence for a CLI
        _exit_on_click_error(exc, debug, in_group)
        if debug:
            raise
        cause = machine_failure(exc)
        if cause is not None:
            _quiet_stdout()
            _report(f"dmo: error: {cause}", None, in_group)
            sys.exit(MACHINE_FAILURE)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        where = f" in process {torchrun.int_env('RANK', 0)}" if in_group else ""  # each process says its own
        err.print(
            f"dmo: unexpected error{where}: {type(exc).__name__}: {first} (rerun with --debug for the traceback)",
            markup=False,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
