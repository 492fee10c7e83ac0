"""How a `dmo` process runs one command and ends: exit codes, one-line errors, Ctrl-C and SIGTERM, and the
quiet exit of the processes of a torchrun group.

Errors the user can fix (DmoError) become one line on stderr and exit code
2 (3 when a target is unreachable); anything else is exit code 1, with the
traceback only under --debug. With --json, every failure is also told on stdout as one JSON report carrying
`error` (docs/report-schema.md#errors), so a script reads stdout whatever the exit. A reader of stdout that went
away (`dmo ... | head`) ends the command with 141, as a shell reports a writer stopped by SIGPIPE, and one line;
the files the command wrote are kept.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from dmocli.cli.app import app
from dmocli.cli.command_line import click_command, refuse_repeated_options
from dmocli.cli.machine_failures import MACHINE_FAILURE, machine_failure
from dmocli.cli.output import err, printed_reports, quiet_stdout, watching_stdout, write_stdout
from dmocli.data.outputs import outputs_together
from dmocli.engines import torchrun
from dmocli.errors import DmoError, ReaderStopped, UnreachableTarget, speak_cli

if TYPE_CHECKING:
    from dmocli.report import ErrorKind

INTERRUPTED = 128 + signal.SIGINT  # the exit status of a command stopped by Ctrl-C, as shells report it
READER_STOPPED = 128 + signal.SIGPIPE  # stdout's reader went away: what shells report for `yes | head`'s yes
READER_STOPPED_LINE = (
    "dmo: standard output was closed by its reader before all of it was written; any file the command wrote is "
    "complete and kept"
)
PROGRESS_FLAGS = ("--progress", "--no-progress")
JSON_FLAG = "--json"
OUTPUT_FLAGS = ("-o", "--output")
HELP_FLAGS = ("-h", "--help")


@dataclass
class _Ending:
    """How one run tells a failure: its one line on stderr (in a torchrun group, the line of the process that
    prints it) and, when the run was given --json, the same as an error report on stdout, unless the command
    printed its own report already (a refused target's and check's carry `error` in it): one JSON object, always."""

    in_group: bool
    json_command: str | None = None  # the command given --json, where it takes that flag
    printed: list[dict[str, Any]] = field(default_factory=list)  # the reports the command printed

    def tell(self, line: str, code: int, kind: ErrorKind, exc: DmoError | None = None) -> None:
        _report(line, exc, self.in_group)
        self.print_json(line, code, kind, exc)

    def print_json(self, line: str, code: int, kind: ErrorKind, exc: DmoError | None = None) -> None:
        """The error report of exit status `code`; `message` is the stderr line without its `dmo: error: `."""
        if self.json_command is None or self.printed or (self.in_group and not torchrun.prints(exc)):
            return
        from dmocli.report import dumps, envelope, failure

        message = line.removeprefix("dmo: ").removeprefix("error: ")
        try:
            sys.stdout.write(dumps(envelope(self.json_command, **failure(code, kind, message))))
            sys.stdout.flush()
        except (OSError, ValueError):  # stdout itself failed (closed, full): the exit status and stderr still tell
            pass


def _json_command(group: Any, args: list[str]) -> str | None:
    """The command of `args` when it was given --json and takes it; None otherwise: an unknown command, and where
    stdout holds other output (the help page of -h, predict's rows with `-o -`, which a JSON object would spoil)."""
    position = next((i for i, arg in enumerate(args) if not arg.startswith("-")), None)
    if position is None or any(arg in HELP_FLAGS for arg in args) or _rows_to_stdout(args):
        return None
    rest = args[position + 1 :]
    command = group.commands.get(args[position])
    given = JSON_FLAG in (rest[: rest.index("--")] if "--" in rest else rest)
    takes = command is not None and any(JSON_FLAG in getattr(param, "opts", ()) for param in command.params)
    return args[position] if given and takes else None


def _rows_to_stdout(args: list[str]) -> bool:
    """`-o -` in any spelling: the command writes its rows on standard output."""
    pairs = zip(args, args[1:])
    return any(name in OUTPUT_FLAGS and value == "-" for name, value in pairs) or any(
        arg in ("-o-", "--output=-") for arg in args
    )


def _click_kind(exc: BaseException) -> set[str]:
    """Names of the click exception classes `exc` is (typer may vendor its own copy of click, so by name)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def _exit_on_click_error(exc: Exception, debug: bool, ending: _Ending) -> None:
    """Click's usage errors as one line like every other error (exit 2); `dmo` alone prints the help, as
    before."""
    kinds = _click_kind(exc)
    ctx = getattr(exc, "ctx", None)
    if "NoArgsIsHelpError" in kinds:  # typer has printed the help already
        sys.exit(2)
    if "Abort" in kinds:
        err.print("dmo: interrupted", markup=False)
        ending.print_json("dmo: interrupted", INTERRUPTED, "interrupted")
        sys.exit(INTERRUPTED)
    if "UsageError" in kinds and not debug:
        hint = f" (see `{ctx.command_path} -h`)" if ctx else ""
        code = getattr(exc, "exit_code", 2)
        ending.tell(f"dmo: error: {exc.format_message()}{hint}", code, "usage")  # type: ignore[attr-defined]
        sys.exit(code)


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
    (it swaps stdout for a wrapper that swallows the final flush), and so does the rich console of typer's help
    page (raising it while handling the BrokenPipeError); either is a stopped reader like any other."""
    try:
        return command.main(args=args, prog_name="dmo", standalone_mode=False)
    except SystemExit as exc:
        pacified = type(sys.stdout).__name__.endswith("PacifyFlushWrapper")  # typer vendors click, renamed
        if pacified or isinstance(exc.__context__, BrokenPipeError):
            raise ReaderStopped("standard output was closed") from None
        raise


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
    if in_group and not torchrun.prints(None) and any(arg in HELP_FLAGS for arg in args):
        sys.exit(0)  # the help page once, from process 0, not once per process
    with printed_reports() as printed:
        _run_and_end(args, debug, _Ending(in_group, printed=printed))


def _run_and_end(args: list[str], debug: bool, ending: _Ending) -> NoReturn:
    """Run the command of `args` and exit with its status, each failure told by `ending`."""
    in_group = ending.in_group
    try:
        # Not standalone: click's usage errors come here too, to be one line like every other error.
        command = click_command(app)
        ending.json_command = _json_command(command, args)
        refuse_repeated_options(command, args)
        with watching_stdout() as reader_gone, outputs_together():  # the model and report appear, or neither
            code = _main_telling_a_closed_stdout(command, args)
            write_stdout("")  # a full disk under stdout fails here, before the files appear
        if reader_gone and code in (0, None):  # a failure keeps its own status (and its line)
            raise ReaderStopped("standard output was closed")
        if code == INTERRUPTED and (
            not in_group or torchrun.prints(None)
        ):  # typer ends a Ctrl-C'd command so, silently
            err.print("dmo: interrupted", markup=False)
            ending.print_json("dmo: interrupted", INTERRUPTED, "interrupted")
        sys.exit(code if isinstance(code, int) else 0)
    except UnreachableTarget as exc:
        if debug:
            raise
        ending.tell(f"dmo: {exc}", exc.exit_code, "unreachable", exc)
        sys.exit(exc.exit_code)
    except DmoError as exc:
        if debug:
            raise
        # raised alike by every process of a group: one line, rank 0's
        ending.tell(f"dmo: error: {exc}", exc.exit_code, "bad_input", exc)
        sys.exit(exc.exit_code)
    except ReaderStopped:  # `| head`: what was printed reached the reader it wanted; the files are complete and kept
        quiet_stdout()
        if not in_group or torchrun.prints(None):
            err.print(READER_STOPPED_LINE, markup=False)
        sys.exit(READER_STOPPED)
    except (KeyboardInterrupt, Terminated) as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        line = "dmo: interrupted" if interrupted else "dmo: terminated"
        code = INTERRUPTED if interrupted else 128 + signal.SIGTERM
        if not in_group or torchrun.prints(None):
            err.print(line, markup=False)
            ending.print_json(line, code, "interrupted")
        sys.exit(code)
    except Exception as exc:  # noqa: BLE001 - last line of defence for a CLI
        _exit_on_click_error(exc, debug, ending)
        if debug:
            raise
        cause = machine_failure(exc)
        if cause is not None:
            ending.tell(f"dmo: error: {cause}", MACHINE_FAILURE, "machine")  # before stdout goes to /dev/null
            quiet_stdout()
            sys.exit(MACHINE_FAILURE)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        where = f" in process {torchrun.int_env('RANK', 0)}" if in_group else ""  # each process says its own
        line = f"dmo: unexpected error{where}: {type(exc).__name__}: {first} (rerun with --debug for the traceback)"
        err.print(line, markup=False)
        ending.print_json(line, 1, "unexpected")
        sys.exit(1)


if __name__ == "__main__":
    main()
