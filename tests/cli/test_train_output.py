"""`dmo train`'s text summary explains `feasible=False` where a split shows it, in one line under the figures."""

from __future__ import annotations

import re

from conftest import make_binary_frame, run_dmo


def _flagged(stdout: str) -> list[str]:
    return [line.split(":")[0].strip() for line in stdout.splitlines() if line.endswith("feasible=False")]


def test_a_missed_target_is_explained_naming_the_splits(tmp_path):
    data = tmp_path / "noise.parquet"
    make_binary_frame(n=500, sep=0.0, seed=5).to_parquet(data)  # no signal: precision 0.99 is out of reach
    proc = run_dmo("train", data, "--problem", "fpor", "--target", "0.99", "--val-frac", "0.3",
                   "--allow-infeasible", "-o", tmp_path / "m.safetensors")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    missed = _flagged(proc.stdout)
    assert missed, proc.stdout
    notes = [line for line in proc.stdout.splitlines() if line.startswith("note: feasible=False")]
    assert len(notes) == 1 and proc.stdout.rstrip().endswith(notes[0])  # one line, under the figures
    named = re.search(r"below the target 0\.99 on (.*) at this threshold", notes[0])
    assert named and named.group(1).split(" and ") == missed
    assert "precision" in notes[0] and "--target" in notes[0] and "--confidence" in notes[0]


def test_no_note_when_every_split_meets_the_target(tmp_path):
    data = tmp_path / "easy.parquet"
    make_binary_frame(n=500, sep=4.0, seed=6).to_parquet(data)
    proc = run_dmo("train", data, "--problem", "frop", "--target", "0.5", "--val-frac", "0.3",
                   "-o", tmp_path / "m.safetensors")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not _flagged(proc.stdout) and "note:" not in proc.stdout


def test_the_note_suggests_only_what_the_run_has_not_tried(tmp_path):
    """Under --solver ero with --confidence already given, the note does not tell the user to add either."""
    data = tmp_path / "noise.parquet"
    make_binary_frame(n=500, sep=0.0, seed=5).to_parquet(data)
    proc = run_dmo("train", data, "--problem", "fpor", "--target", "0.99", "--val-frac", "0.3", "--solver", "ero",
                   "--confidence", "0.95", "--allow-infeasible", "-o", tmp_path / "m.safetensors")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.startswith("note: feasible=False")]
    assert len(notes) == 1 and "--target" in notes[0]
    assert "--solver ero" not in notes[0] and "--confidence" not in notes[0]
