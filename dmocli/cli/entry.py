"""The `dmo` console script. It imports the CLI (typer, rich, pyarrow: a few tenths of a second) under a Ctrl-C
guard, so an interrupt that early ends like one during a command: one line and exit status 130, no traceback.

Before anything starts OpenMP (torch, XGBoost), idle OpenMP threads are told to sleep rather than spin
(OMP_WAIT_POLICY=PASSIVE, unless the environment sets it): on a machine whose cores are busy with other jobs,
spinning threads took turns with the working ones and a 3-class boosted-tree fit of 3,000 rows took 140 s
instead of 3.6 s (docs/training.md)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        from dmocli.cli.process import main as run
    except KeyboardInterrupt:
        sys.stderr.write("dmo: interrupted\n")
        raise SystemExit(130) from None
    run()
