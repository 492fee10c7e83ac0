"""The progress display: drawn on stderr when it is a terminal (a real pseudo-terminal here), silent in pipes and
logs, and forced either way by `--progress/--no-progress`."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
from conftest import dmo_command, make_binary_frame, run_dmo

from dmocli import progress

ELAPSED = "0:00:"  # rich's elapsed-time column, present in every drawn line


def run_on_terminal(*args: str | os.PathLike, timeout: float = 240) -> tuple[int, str, str]:
    """Run `dmo ARGS` with stderr on a pseudo-terminal (stdout a pipe, as `dmo ... > out` on a terminal);
    returns the exit code, stdout and what was drawn on the terminal."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONHASHSEED": "0", "TERM": "xterm-256color", "COLUMNS": "200"}
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [*dmo_command(), *map(str, args)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, env=env
    ) as proc:
        os.close(follower)
        drawn = bytearray()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the child closed the terminal (EIO on Linux)
                    break
                if not chunk:
                    break
                drawn += chunk
            elif proc.poll() is not None:
                break
        os.close(leader)
        stdout = proc.stdout.read().decode() if proc.stdout else ""
        code = proc.wait(timeout=30)
    return code, stdout, drawn.decode(errors="replace")


@pytest.fixture
def train_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.parquet"
    make_binary_frame(n=400, seed=3).to_parquet(path)
    return path


def test_train_on_a_terminal_draws_the_epochs_and_elapsed_time(train_file, tmp_path):
    code, stdout, drawn = run_on_terminal(
        "train", train_file, "--model", "mlp", "--width", "8", "--depth", "1", "--val-frac", "0.3",
        "--param", "max-epochs=5", "-o", tmp_path / "m.safetensors",
    )  # fmt: skip
    assert code == 0, drawn
    assert "model:" in stdout  # the summary stays on stdout
    assert "wce" in drawn and "epochs" in drawn and ELAPSED in drawn and "monitored loss" in drawn


def test_ero_on_a_terminal_draws_its_objective_and_violations(train_file, tmp_path):
    code, _, drawn = run_on_terminal(
        "train", train_file, "--problem", "frop", "--target", "0.8", "--solver", "ero", "--val-frac", "0.3",
        "--param", "outer=2", "-o", tmp_path / "m.safetensors",
    )  # fmt: skip
    assert code == 0, drawn
    assert "ero" in drawn and "/2 outer iterations" in drawn, drawn
    assert "train objective" in drawn and "violating rows" in drawn and "max violation" in drawn, drawn


def test_cross_fitting_shows_its_folds_beside_the_fit(train_file, tmp_path):
    code, _, drawn = run_on_terminal("train", train_file, "--cv", "3", "-o", tmp_path / "m.safetensors")
    assert code == 0, drawn
    assert "cross-fitting" in drawn and "folds" in drawn and "lbfgs" in drawn


def test_streaming_train_and_predict_show_rows(train_file, tmp_path):
    model = tmp_path / "m.safetensors"
    code, _, drawn = run_on_terminal("train", train_file, "--solver", "fofo", "-o", model)
    assert code == 0, drawn
    assert "fofo" in drawn and "/400 rows" in drawn and "online F" in drawn
    code, _, drawn = run_on_terminal("predict", model, train_file, "-o", tmp_path / "p.parquet")
    assert code == 0, drawn
    assert "predicting" in drawn and "400/400 rows" in drawn


def test_predictions_on_stdout_stay_clean_while_stderr_draws(train_file, tmp_path):
    model = tmp_path / "m.safetensors"
    run_dmo("train", train_file, "--cv", "0", "-o", model, check=True)
    code, stdout, drawn = run_on_terminal("predict", model, train_file, "-o", "-")
    assert code == 0, drawn
    lines = stdout.splitlines()
    assert len(lines) == 401 and lines[0].startswith('"logit"') and "\x1b" not in stdout
    assert "predicting" in drawn and "400/400 rows" in drawn


def test_help_documents_the_flags():
    proc = run_dmo("--help")
    assert "--progress" in proc.stdout and "--no-progress" in proc.stdout and "terminal" in proc.stdout


def test_no_terminal_means_no_progress_output(train_file, tmp_path):
    proc = run_dmo("train", train_file, "--cv", "2", "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no bar, no control codes: a CI log stays clean


def test_no_progress_keeps_a_terminal_quiet(train_file, tmp_path):
    """fofo draws its rows on a terminal (test_streaming_train_and_predict_show_rows) and its process starts in
    under a second, where wce's imports torch's optimizers and scikit-learn (seconds)."""
    code, stdout, drawn = run_on_terminal(
        "train", train_file, "--solver", "fofo", "-o", tmp_path / "m.safetensors", "--no-progress"
    )
    assert code == 0, drawn
    assert "model:" in stdout and drawn.strip() == ""


def test_progress_forces_the_display_into_a_pipe(train_file, tmp_path):
    proc = run_dmo("--progress", "train", train_file, "--cv", "2", "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 0, proc.stderr
    assert "cross-fitting" in proc.stderr and ELAPSED in proc.stderr


def test_the_library_api_is_a_no_op_when_off_and_counts_when_forced(capsys):
    progress.configure(False)
    try:
        with progress.task("x", total=3) as bar:
            assert bar is progress.OFF
            bar.advance(1, objective=0.5)
        assert list(progress.advancing([[1, 2], [3]], bar)) == [[1, 2], [3]]
        progress.configure(True)
        with progress.task("gbdt", total=lambda: 4, unit="trees") as bar:
            assert bar is not progress.OFF
            with progress.task("inner", unit="rows") as inner:  # a nested task joins the same display
                inner.advance(10)
            for _ in range(4):
                bar.advance(1, loss=0.25)
    finally:
        progress.configure(None)
    err = capsys.readouterr().err
    assert "4/4 trees" in err and "loss 0.25" in err and "10 rows" in err


def test_a_dask_job_shows_its_partitions(train_file, tmp_path):
    pytest.importorskip("distributed")
    model = tmp_path / "m.safetensors"
    run_dmo("train", train_file, "--cv", "0", "-o", model, check=True)
    parts = tmp_path / "parts"
    parts.mkdir()
    frame = make_binary_frame(n=400, seed=3)
    frame.iloc[:250].to_parquet(parts / "part-0.parquet")
    frame.iloc[250:].to_parquet(parts / "part-1.parquet")
    code, stdout, drawn = run_on_terminal("evaluate", model, parts, "--engine", "dask", "--workers", "1")
    assert code == 0, drawn
    assert "n 400" in stdout and "dask" in drawn and "2/2 partitions" in drawn
