"""A model used from Python as the command uses it: DmoClassifier.load, dmocli.predict returning a DataFrame,
dmocli.evaluate on a DataFrame, each checked against `dmo predict` / `dmo evaluate` on the same rows, and the
OpenMP wait policy `import dmocli` sets (issue 37)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, make_binary_frame, run_dmo

import dmocli
from dmocli.errors import DmoError


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    """A model trained by `dmo train` on a table with a text column, new rows, and `dmo predict`'s parquet output."""
    root = tmp_path_factory.mktemp("api")
    frame = make_binary_frame(n=800, seed=3)
    frame["shop"] = np.asarray(["north", "south", "east"], dtype=object)[np.arange(len(frame)) % 3]
    frame.to_parquet(root / "train.parquet")
    new = make_binary_frame(n=300, seed=4)
    new["shop"] = np.asarray(["east", "north", "west"], dtype=object)[np.arange(len(new)) % 3]  # west: unseen
    new.to_parquet(root / "new.parquet")
    run_dmo("train", root / "train.parquet", "-o", root / "m.safetensors", "--seed", "1", check=True)
    run_dmo("predict", root / "m.safetensors", root / "new.parquet", "-o", root / "out.parquet", check=True)
    return root / "m.safetensors", new, pd.read_parquet(root / "out.parquet")


def test_predict_without_output_returns_what_dmo_predict_writes(trained) -> None:
    model, new, written = trained
    with pytest.warns(UserWarning, match="west"):  # the unseen level, as dmo predict warns
        frame = dmocli.predict(model, new)
    pd.testing.assert_frame_equal(frame, written)


def test_loaded_estimator_scores_as_dmo_predict(trained) -> None:
    model, new, written = trained
    clf = dmocli.DmoClassifier.load(model)
    shuffled = new[["label", "shop", *reversed([c for c in new.columns if c.startswith("f")])]]  # order, extra
    np.testing.assert_array_equal(clf.decision_function(shuffled).astype(np.float32), written["logit"])
    np.testing.assert_array_equal(clf.predict_proba(shuffled)[:, 1].astype(np.float32), written["probability"])
    np.testing.assert_array_equal(clf.predict(new), written["predicted"])
    assert list(clf.classes_) == [0, 1] and clf.threshold_ == pytest.approx(dmocli.load_model(model).threshold)
    assert clf.n_features_in_ == 5 and list(clf.feature_names_in_) == ["f0", "f1", "f2", "f3", "shop"]


def test_loaded_estimator_reads_a_numeric_array_in_the_models_column_order(tmp_path: Path) -> None:
    frame = make_binary_frame(n=500, seed=5)
    frame.to_parquet(tmp_path / "t.parquet")
    run_dmo("train", tmp_path / "t.parquet", "-o", tmp_path / "m.safetensors", check=True)
    clf = dmocli.DmoClassifier.load(tmp_path / "m.safetensors")
    features = frame.drop(columns="label")
    np.testing.assert_array_equal(clf.predict_proba(features.to_numpy()), clf.predict_proba(features))
    with pytest.raises(DmoError, match="the model reads 4 columns"):
        clf.predict(features.to_numpy()[:, :3])


def test_a_missing_column_is_named_as_dmo_predict_names_it(trained) -> None:
    model, new, _ = trained
    with pytest.raises(DmoError, match="shop"):
        dmocli.DmoClassifier.load(model).predict(new.drop(columns="shop"))
    with pytest.raises(DmoError, match="shop"):
        dmocli.predict(model, new.drop(columns="shop"))


def test_evaluate_a_dataframe_gives_the_report_of_the_file(trained) -> None:
    model, new, _ = trained
    from_file = dmocli.evaluate(model, model.parent / "new.parquet")
    in_memory = dmocli.evaluate(dmocli.DmoClassifier.load(model), new)
    assert in_memory["splits"] == from_file["splits"]
    assert in_memory["model"] == "<in-memory model>" and from_file["model"] == str(model)


def test_a_model_fitted_in_the_session_predicts_without_a_file() -> None:
    frame = make_binary_frame(n=500, seed=6)
    y = frame.pop("label")
    clf = dmocli.DmoClassifier(seed=0).fit(frame, y)
    predictions = dmocli.predict(clf, frame, explain=2)
    np.testing.assert_array_equal(predictions["predicted"], clf.predict(frame))
    assert list(predictions.columns[-4:]) == [
        "explain_1_feature",
        "explain_1_contribution",
        "explain_2_feature",
        "explain_2_contribution",
    ]
    with pytest.raises(DmoError, match="not list"):
        dmocli.predict([1, 2], frame)


def test_the_index_of_a_dataframe_is_kept(trained) -> None:
    model, new, _ = trained
    shifted = new.set_index(new.index + 1000)
    with pytest.warns(UserWarning):
        assert list(dmocli.predict(model, shifted).index) == list(shifted.index)


@pytest.mark.parametrize("given", [None, "ACTIVE"])
def test_import_sets_a_passive_openmp_wait_unless_the_caller_set_one(given: str | None) -> None:
    """A real process: the variable has to be in the environment before torch starts OpenMP."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(REPO)
    if given:
        env["OMP_WAIT_POLICY"] = given
    script = "import os, dmocli, sys; assert 'torch' not in sys.modules; print(os.environ['OMP_WAIT_POLICY'])"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (given or "PASSIVE")
