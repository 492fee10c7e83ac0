"""What torchrun's environment says about this process, read without importing torch.

torchrun starts one copy of the command per process and tells each its
place through environment variables; the CLI and `train` ask here whether
this process is one of several and whether it is the one that prints and
writes (rank 0). Joining the group itself is dmocli.engines.torch_distributed's job.
"""

from __future__ import annotations

import os
import time

from dmocli.errors import DmoError

REPORT_GRACE_SECONDS = 5.0


def launched() -> bool:
    """True in a process torchrun started as one of several (WORLD_SIZE > 1)."""
    return int_env("WORLD_SIZE", 1) > 1


def secondary() -> bool:
    """True in every launched process but rank 0: it neither prints results nor writes files."""
    return launched() and int_env("RANK", 0) != 0


def int_env(name: str, default: int) -> int:
    text = os.environ.get(name)
    try:
        return default if text is None else int(text)
    except ValueError as exc:
        raise DmoError(
            f"environment variable {name}={text!r} is not an integer (torchrun sets it; "
            "unset it to train in one process)"
        ) from exc


def alone(error: DmoError) -> DmoError:
    """Mark an error that only this process of a group meets (its node's GPUs, its rendezvous): it prints it."""
    error.this_process_only = True  # type: ignore[attr-defined]
    return error


def launched_quietly() -> bool:
    """launched(), False where torchrun's variables are not numbers (train then says so)."""
    try:
        return launched()
    except DmoError:
        return False


def prints(error: DmoError | None) -> bool:
    """Whether this process of a group prints `error` (None: a usage error). The processes raise the same errors
    (the same options; data errors are agreed on by ProcessGroup.agree), so rank 0 prints them, once."""
    try:
        return not secondary() or getattr(error, "this_process_only", False)
    except DmoError:  # RANK is not a number: `error` may say so, and someone must print it
        return True


def let_rank_zero_report() -> None:
    """Before a process that leaves the printing to rank 0 exits on the error: torchrun stops the whole group as
    soon as one process ends, which could stop rank 0 before its line is out. Rank 0 exits first, ending the
    wait, unless it lags by more than this grace time."""
    time.sleep(REPORT_GRACE_SECONDS)
