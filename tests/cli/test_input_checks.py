"""Option values and model files no command can use are refused up front, by name, with exit 2 and no
output; results that would be useless (an empty subsample) are refused too. Found by a fuzzing pass."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import make_binary_frame, run_dmo
from safetensors.numpy import load_file, save_file

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.models.modelfile import METADATA_KEY, load_model, read_metadata
from dmocli.operating_point.problems import Problem
from dmocli.pipelines.subsample import SubsampleOptions, subsample
from dmocli.report import dumps
from dmocli.solvers import get_solver


def one_line_exit_2(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def test_seed_out_of_range_is_refused_by_every_command(tmp_path, binary_parquet):
    assert "--seed -1" in one_line_exit_2(run_dmo("train", binary_parquet, "--seed", "-1", "-o", tmp_path / "m.st"))
    with pytest.raises(DmoError, match="--seed"):
        subsample(binary_parquet, tmp_path / "s.parquet", SubsampleOptions(gamma=2, seed=2**64))
    assert not (tmp_path / "m.st").exists() and not (tmp_path / "s.parquet").exists()


@pytest.mark.parametrize("beta", [math.inf, math.nan, 0.0])
def test_beta_must_be_positive_and_finite(beta):
    with pytest.raises(DmoError, match="--beta"):
        Problem("ofbs", beta=beta)


@pytest.mark.parametrize(
    "solver, param, message",
    [
        ("wce", {"lr": "nan"}, "finite"),
        ("wce", {"lr": "-1"}, "positive"),
        ("wce", {"batch-size": "0"}, "at least 1"),
        ("wce", {"max-epochs": "0"}, "at least 1"),
        ("wce", {"weight-decay": "-5"}, "at least 0"),
        ("fofo", {"lr": "inf"}, "finite"),
        ("ero", {"lr": "0"}, "positive"),
        ("lus", {"max-iter": "0"}, "at least 1"),
        ("lus", {"l2": "-1"}, "at least 0"),
        ("sigmoid-f1", {"tau": "0"}, "positive"),
        ("fixmatch", {"ema": "1"}, r"ema=1.0 must be in \[0, 1\)"),
        ("adsh", {"tau1": "1.5"}, "at most 1"),
        ("ero", {"growth": "0.5"}, "growth=0.5 must be at least 1"),
        ("ero", {"outer": "0"}, "outer=0 must be at least 1"),
        ("lagrangian", {"lr-multiplier": "0"}, "positive"),
    ],
)
def test_solver_parameters_outside_their_range_are_refused(solver, param, message):
    with pytest.raises(DmoError, match=message):
        get_solver(solver).parse_params(param)


def test_optional_parameters_take_none_for_their_default_and_say_so_when_misspelled():
    assert get_solver("wce").parse_params({"l2": "none"}).l2 is None  # wce: 1/rows, scikit-learn's C=1
    assert get_solver("ero").parse_params({"outer": "None"}).outer is None  # from the preset
    with pytest.raises(DmoError, match=r"expected a number \(or none, for the default\)"):
        get_solver("wce").parse_params({"l2": "abc"})
    with pytest.raises(DmoError, match=r"expected a number$"):
        get_solver("lus").parse_params({"l2": "none"})  # not optional there


def test_confidence_is_checked_before_training_and_refused_without_a_constraint(tmp_path, binary_parquet):
    table = pa.Table.from_pandas(make_binary_frame(n=200), preserve_index=False)
    with pytest.raises(DmoError, match=r"\[0.5, 1\)"):
        train(table, TrainOptions(problem="frop", target=0.8, confidence=0.3, params={"max-epochs": "100000"}))
    with pytest.raises(DmoError, match="ofbs"):
        train(table, TrainOptions(confidence=0.9))  # a two-class label: ofbs by default


def test_a_network_too_large_to_train_is_refused_by_size():
    with pytest.raises(DmoError, match="weights"):
        Architecture("mlp", 10, 1, width=100_000_000, depth=2)
    with pytest.raises(DmoError, match="1000 layers"):
        Architecture("mlp", 10, 1, width=10, depth=100_000)
    assert Architecture("mlp", 10, 1, width=100, depth=10).parameters == 94_101  # the paper's 10 x 100 MLP


def test_reports_write_non_finite_figures_as_null():
    text = dumps({"loss": math.inf, "f": float("nan"), "ok": [1.5, np.float32("nan")], "n": 3})
    assert json.loads(text) == {"loss": None, "f": None, "ok": [1.5, None], "n": 3}


def _edited_model(tmp_path: Path, model: Path, name: str, edit) -> Path:
    meta = read_metadata(model)
    edit(meta)
    path = tmp_path / f"{name}.st"
    save_file(load_file(str(model)), str(path), metadata={METADATA_KEY: json.dumps(meta)})
    return path


def test_model_files_with_inconsistent_metadata_are_refused(tmp_path, binary_parquet):
    model = tmp_path / "m.st"
    run_dmo("train", binary_parquet, "-o", model, check=True)
    edits = {
        "threshold": lambda m: m.update(threshold=None),
        "means": lambda m: m["preprocessing"].update(mean=[0.0]),
        "problem": lambda m: m.update(problem="bogus"),
        "positive": lambda m: m["labels"].update(positive=7),
        "labels": lambda m: m.pop("labels"),
        "kind": lambda m: m["architecture"].update(kind="transformer"),
    }
    for name, edit in edits.items():
        with pytest.raises(DmoError, match="corrupt or inconsistent dmo metadata"):
            load_model(_edited_model(tmp_path, model, name, edit))
    stderr = one_line_exit_2(run_dmo("evaluate", tmp_path / "threshold.st", binary_parquet))
    assert "threshold None is not a finite number" in stderr


def test_two_class_labels_the_model_never_saw_are_refused_not_scored_as_negatives(tmp_path, binary_parquet):
    model = tmp_path / "m.st"
    run_dmo("train", binary_parquet, "-o", model, check=True)
    shifted = tmp_path / "shifted.parquet"
    make_binary_frame().assign(label=lambda f: f["label"] + 2).to_parquet(shifted)
    assert "label value(s) 2, 3 in column" in one_line_exit_2(run_dmo("evaluate", model, shifted))  # both named


def test_a_subsample_that_keeps_no_row_is_refused_and_not_written(tmp_path, binary_parquet):
    with pytest.raises(DmoError, match="keeps no rows"):
        subsample(binary_parquet, tmp_path / "s.parquet", SubsampleOptions(gamma=1e12))
    with pytest.raises(DmoError, match="pilot sample is empty"):
        subsample(binary_parquet, tmp_path / "s.parquet", SubsampleOptions(gamma=2, pilot_frac=1e-6))
    assert not list(tmp_path.glob("*s.parquet*"))


def test_outputs_get_the_users_file_mode_not_a_private_one(tmp_path, binary_parquet):
    model = tmp_path / "m.st"
    run_dmo("train", binary_parquet, "-o", model, check=True)
    mask = os.umask(0)
    os.umask(mask)
    assert model.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_validation_fraction_that_empties_a_side_of_a_class_is_refused(tmp_path):
    """--val-frac 0.999 used to train on one row per class, and a class of one row was missing from val."""
    from dmocli.prep.dataset import stratified_split

    y = np.array([0] * 191 + [1] * 9)
    with pytest.raises(DmoError, match=r"class 'pos' \(9 labeled rows\) with no training row; use a --val-frac below"):
        stratified_split(y, 0.999, seed=0, class_names=["neg", "pos"])
    with pytest.raises(DmoError, match="give --val FILE instead"):
        stratified_split(np.array([0, 0, 0, 1]), 0.5, seed=0)
    _, val_rows = stratified_split(y, 0.01, seed=0)  # a rare class still gets one validation row
    assert (y[val_rows] == 1).sum() == 1 and (y[val_rows] == 0).sum() == 2
    train_rows, val_rows = stratified_split(y, 0.9, seed=0)  # 1 positive left to train: allowed, the user's call
    assert (y[train_rows] == 1).sum() == 1 and (y[val_rows] == 1).sum() == 8
    assert np.array_equal(np.sort(np.concatenate([train_rows, val_rows])), np.arange(y.size))


def test_refusals_are_value_errors_exported_at_the_top_level(tmp_path, binary_parquet):
    import dmocli

    with pytest.raises(ValueError, match="--seed") as info:
        dmocli.train(binary_parquet, dmocli.TrainOptions(seed=-1), output=tmp_path / "m.st")
    assert isinstance(info.value, dmocli.DmoError) and issubclass(dmocli.UnreachableTarget, dmocli.DmoError)
