"""A CSV saved with a UTF-8 byte-order mark (Excel's "CSV UTF-8") is read the same by every command (issue 45,
review 12: train and check read it, predict, evaluate, monitor and threshold --adapt refused it for a "missing"
first column). Every reader of a CSV file goes through dmocli/data/reading.py, whose column names must be the
shared dialect's (csv_dialect, which decodes the header as utf-8-sig), whatever the read: whole, by batches, some
columns, from standard input."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_binary_frame, run_dmo

from dmocli.data import reading
from dmocli.data.csv_dialect import csv_dialect


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A model trained on parquet (so its first column is plainly `f0`), and the same rows as BOM CSV files."""
    root = tmp_path_factory.mktemp("bom")
    frame = make_binary_frame(n=400, seed=7)
    frame.to_parquet(root / "train.parquet")
    frame.to_csv(root / "labeled.csv", index=False, encoding="utf-8-sig")
    frame.drop(columns="label").to_csv(root / "new.csv", index=False, encoding="utf-8-sig")
    make_binary_frame(n=300, seed=8).to_csv(root / "val.csv", index=False, encoding="utf-8-sig")
    run_dmo("train", root / "train.parquet", "-p", "fpor", "--target", "0.6", "-o", root / "m.st", check=True)
    assert (root / "new.csv").read_bytes().startswith(b"\xef\xbb\xbff0,")
    return root


def test_every_read_names_the_first_column_plainly(folder):
    path = folder / "new.csv"
    names = list(csv_dialect(path).names)
    assert names[0] == "f0"
    assert reading.schema(path).names == names
    assert reading.read_table(path).column_names == names
    assert reading.read_table(path, columns=["f0"]).column_names == ["f0"]
    assert next(reading.iter_batches(path, columns=["f0", "f1"])).schema.names == ["f0", "f1"]
    assert next(reading.iter_batches(path)).schema.names == names


@pytest.mark.parametrize(
    "args",
    [
        ["train", "labeled.csv", "-p", "fpor", "--target", "0.6", "-o", "t.st"],
        ["train", "train.parquet", "--val", "val.csv", "-p", "fpor", "--target", "0.6", "-o", "v.st"],
        ["check", "labeled.csv"],
        ["predict", "m.st", "new.csv", "-o", "p.parquet"],
        ["evaluate", "m.st", "val.csv"],
        ["monitor", "m.st", "new.csv"],
        ["threshold", "m.st", "--adapt", "new.csv", "-o", "a.st"],
        ["threshold", "m.st", "val.csv", "-o", "r.st"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_every_command_reads_a_bom_csv(args, folder):
    proc = run_dmo(
        *[folder / arg if (folder / arg).exists() or arg.endswith((".st", ".parquet")) else arg for arg in args]
    )
    assert proc.returncode == 0, proc.stderr
    assert "missing column" not in proc.stderr


def test_a_bom_csv_on_standard_input(folder):
    """The stream reader (dmocli/data/stdin_csv.py) too: a real process, as standard input is the point."""
    proc = run_dmo("predict", folder / "m.st", "-", "-o", folder / "stdin.parquet", stdin=folder / "new.csv")
    assert proc.returncode == 0, proc.stderr
    assert (folder / "stdin.parquet").exists()
