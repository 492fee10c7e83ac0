"""The `dmo` console script. It imports the CLI (typer, rich, pyarrow: a few tenths of a second) under a Ctrl-C
guard, so an interrupt that early ends like one during a command: one line and exit status 130, no traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from dmocli.cli.process import main as run
    except KeyboardInterrupt:
        sys.stderr.write("dmo: interrupted\n")
        raise SystemExit(130) from None
    run()
