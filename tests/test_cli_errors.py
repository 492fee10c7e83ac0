"""Every bad input: one clear stderr line, exit code 2 (3 for an unreachable target), no traceback, no output."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from conftest import make_binary_frame, run_dmo


def assert_clean_failure(proc, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle.lower() in proc.stderr.lower(), proc.stderr


@pytest.fixture
def trained(tmp_path: Path, binary_parquet: Path) -> Path:
    model = tmp_path / "model.safetensors"
    run_dmo("train", binary_parquet, "--problem", "ofbs", "-o", model, check=True)
    return model


def train_fails(tmp_path: Path, data: Path, *extra: str):
    out = tmp_path / "out.safetensors"
    proc = run_dmo("train", data, "-o", out, *extra)
    assert not out.exists(), "a failed run must not leave an output file"
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".out.")], "temporary file left behind"
    return proc


def test_missing_file(tmp_path):
    proc = train_fails(tmp_path, tmp_path / "nope.parquet", "--problem", "ofbs")
    assert_clean_failure(proc, 2, "not found", "nope.parquet")


def test_corrupt_parquet(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not really parquet" * 10)
    proc = train_fails(tmp_path, bad, "--problem", "ofbs")
    assert_clean_failure(proc, 2, "cannot read", "bad.parquet")


def test_empty_table(tmp_path):
    empty = tmp_path / "empty.parquet"
    make_binary_frame().iloc[:0].to_parquet(empty)
    assert_clean_failure(train_fails(tmp_path, empty, "--problem", "ofbs"), 2, "no rows")


def test_no_label_column(tmp_path):
    path = tmp_path / "nolabel.parquet"
    make_binary_frame().rename(columns={"label": "target"}).to_parquet(path)
    assert_clean_failure(train_fails(tmp_path, path, "--problem", "ofbs"), 2, "no label column 'label'", "--label-col")


def test_one_class_only(tmp_path):
    path = tmp_path / "one.parquet"
    frame = make_binary_frame()
    frame["label"] = 0
    frame.to_parquet(path)
    assert_clean_failure(train_fails(tmp_path, path, "--problem", "ofbs"), 2, "only one class")


def test_multiclass_without_positive(tmp_path):
    path = tmp_path / "multi.parquet"
    frame = make_binary_frame()
    frame["label"] = np.arange(len(frame)) % 3
    frame.to_parquet(path)
    assert_clean_failure(train_fails(tmp_path, path, "--problem", "frop", "--target", "0.8"), 2, "3 classes", "--positive")


@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_nan_inf_features(tmp_path, bad_value):
    path = tmp_path / "nan.parquet"
    frame = make_binary_frame()
    frame.loc[3, "f1"] = bad_value
    frame.to_parquet(path)
    assert_clean_failure(train_fails(tmp_path, path, "--problem", "ofbs"), 2, "f1", "--impute median")


@pytest.mark.parametrize("target", ["1.5", "0", "-0.2"])
def test_target_outside_unit_interval(tmp_path, binary_parquet, target):
    proc = train_fails(tmp_path, binary_parquet, "--problem", "fpor", "--target", target)
    assert_clean_failure(proc, 2, "outside (0, 1)")


def test_unreachable_target_exit_3(tmp_path):
    path = tmp_path / "noisy.parquet"
    make_binary_frame(sep=0.2, seed=3).to_parquet(path)
    proc = train_fails(tmp_path, path, "--problem", "fpor", "--target", "0.99")
    assert_clean_failure(proc, 3, "not reachable", "best achievable precision")


def test_model_data_column_mismatch(tmp_path, trained):
    path = tmp_path / "fewer.parquet"
    make_binary_frame().drop(columns=["f2"]).to_parquet(path)
    out = tmp_path / "pred.parquet"
    proc = run_dmo("predict", trained, path, "-o", out)
    assert_clean_failure(proc, 2, "missing column", "f2")
    assert not out.exists()


def test_corrupt_model_file(tmp_path, binary_parquet):
    model = tmp_path / "junk.safetensors"
    model.write_bytes(os.urandom(200))
    assert_clean_failure(run_dmo("evaluate", model, binary_parquet), 2, "not a readable dmo model")


def test_safetensors_that_is_not_a_dmo_model(tmp_path, binary_parquet):
    model = tmp_path / "other.safetensors"
    save_file({"w": np.zeros(3, dtype=np.float32)}, str(model))
    assert_clean_failure(run_dmo("evaluate", model, binary_parquet), 2, "not a dmo model")


def test_unwritable_output_path(tmp_path, binary_parquet):
    proc = run_dmo("train", binary_parquet, "--problem", "ofbs", "-o", tmp_path / "no" / "such" / "dir" / "m.safetensors")
    assert_clean_failure(proc, 2, "output directory does not exist")


def test_unknown_option_is_usage_error(binary_parquet):
    proc = run_dmo("train", binary_parquet, "--no-such-option")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_debug_shows_traceback(tmp_path):
    proc = run_dmo("--debug", "train", tmp_path / "nope.parquet", "--problem", "ofbs")
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
