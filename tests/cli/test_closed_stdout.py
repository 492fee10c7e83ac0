"""A reader of standard output that goes away (`dmo train ... | head -n 1`) must not cost the command its files
(issue 45, review 2: the model and report were thrown away, exit 1, nothing on stderr).

The convention, for every command: the files the command wrote are complete and kept, the exit status is 141 (as a
shell reports `yes | head`'s yes) with one line on stderr, and a command that failed for its own reason keeps its
status. Real processes and real pipes, as they are the point: stdout is a pipe whose reader has closed before dmo
starts (a reader that stops at once), so every run meets the closed pipe on its first write, deterministically.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import dmo_command, make_binary_frame, run_dmo

from dmocli.cli.process import READER_STOPPED, READER_STOPPED_LINE

CLOSED = "standard output was closed by its reader"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Labeled and unlabeled rows and a model trained once in this process (its training is not the point)."""
    root = tmp_path_factory.mktemp("closed")
    frame = make_binary_frame(n=400, seed=3)
    frame.to_parquet(root / "data.parquet")
    frame.drop(columns="label").to_parquet(root / "new.parquet")
    run_dmo("train", root / "data.parquet", "--problem", "fpor", "--target", "0.6", "-o", root / "m.st", check=True)
    return root


def run_closed(args: list, cwd: Path) -> subprocess.CompletedProcess:
    """`dmo ARGS` with stdout the write end of a pipe whose read end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [*dmo_command(), *map(str, args)], stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=300
        )
    finally:
        os.close(write_end)


# Each command with its outputs: the files that must be there, complete, after its stdout was closed.
CASES = {
    "train": (["train", "data.parquet", "-p", "ofbs", "--cv", "0", "-o", "t.st", "--report", "t.json"], ["t.st"]),
    "threshold": (["threshold", "m.st", "-p", "fpor", "--target", "0.5", "-o", "r.st", "--report", "r.json"], ["r.st"]),
    "threshold --prior": (["threshold", "m.st", "--prior", "0.3", "-o", "a.st", "--report", "a.json"], ["a.st"]),
    "evaluate": (["evaluate", "m.st", "data.parquet", "--report", "e.json", "--plot", "e.png"], ["e.png"]),
    "monitor": (["monitor", "m.st", "new.parquet", "--report", "mo.json"], []),
    "predict -o -": (["predict", "m.st", "new.parquet", "-o", "-"], []),
    "predict --json": (["predict", "m.st", "new.parquet", "-o", "p.parquet", "--json"], ["p.parquet"]),
    "check": (["check", "data.parquet"], []),
    "info --json": (["info", "m.st", "--json"], []),
    "--version": (["--version"], []),
    "help": (["train", "--help"], []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_closed_stdout_keeps_the_files_and_exits_141(case, folder):
    args, files = CASES[case]
    reports = [args[i + 1] for i, arg in enumerate(args) if arg == "--report"]
    for name in [*files, *reports]:
        (folder / name).unlink(missing_ok=True)
    proc = run_closed(args, folder)
    assert proc.returncode == READER_STOPPED == 141, (proc.returncode, proc.stderr)
    assert said(proc) == [READER_STOPPED_LINE], proc.stderr  # one line, beside the command's warnings
    for name in files:
        assert (folder / name).stat().st_size > 0, name
    for name in reports:  # complete: a whole JSON report of this command
        assert json.loads((folder / name).read_text())["command"] == args[0]
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no temporary file left


def said(proc: subprocess.CompletedProcess) -> list[str]:
    """The lines of stderr but the command's warnings (rows the model was trained on, and the like)."""
    return [line for line in proc.stderr.splitlines() if not line.startswith("dmo: warning: ")]


def test_the_kept_model_is_the_one_the_summary_names(folder):
    """The model written under a closed stdout is a whole model file: it scores as one written with stdout open."""
    (folder / "k.st").unlink(missing_ok=True)
    proc = run_closed(["threshold", "m.st", "--problem", "fpor", "--target", "0.5", "-o", "k.st"], folder)
    assert proc.returncode == 141, proc.stderr
    info = run_dmo("info", folder / "k.st", "--json", check=True)
    assert json.loads(info.stdout)["target"] == 0.5


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["train", "missing.parquet", "-o", "x.st"], 2),  # bad input: its own line and status
        (["evaluate", "m.st", "missing.parquet", "--json"], 2),
        (["threshold", "m.st", "--problem", "fpor", "--target", "0.999", "--confidence", "0.99", "-o", "u.st"], 3),
    ],
)
def test_a_failure_keeps_its_status_and_its_line(args, code, folder):
    proc = run_closed(args, folder)
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = said(proc)
    assert len(lines) == 1 and CLOSED not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
