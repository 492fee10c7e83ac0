"""The semi-supervised safety net (issue 22), checked through the real `dmo` entry point on generated data.

The check is independent of the judgement inside the solver: the models of
`wce --drop-unlabeled` and `adsh --param fallback=false` are trained
separately and scored on a held-out file; with the safety net on, the saved
model must be the one of those two the held-out rows prefer, with a warning
exactly when it is the supervised one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_dmo
from safetensors.numpy import load_file

from dmocli.solvers.semisup.fallback import labeled_folds
from dmocli.use.evaluate import evaluate


@pytest.fixture(autouse=True)
def this_checkout_one_thread(monkeypatch):
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def frame(X: np.ndarray, y: list) -> pd.DataFrame:
    out = pd.DataFrame(X.astype(np.float32), columns=[f"f{i}" for i in range(X.shape[1])])
    out["label"] = pd.Series(y, dtype=object)
    return out


def misleading(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three classes; the unlabeled rows are not drawn like the labeled ones: a dense blob inside class 1's side
    of the 0/1 boundary, which self-training pushes the boundary out of, into class 0."""
    rng = np.random.default_rng(seed)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = np.repeat([0, 1, 2], n)
        x0 = np.array([-1.0, 1.0, 0.0])[y] + 0.7 * rng.normal(size=y.size)
        x1 = np.array([0.0, 0.0, 4.0])[y] + 0.7 * rng.normal(size=y.size)
        return np.c_[x0, x1, rng.normal(size=(y.size, 2))], y

    X_lab, y_lab = draw(40)
    X_unl = np.c_[0.6 + 0.4 * rng.normal(size=4000), 0.3 * rng.normal(size=4000), rng.normal(size=(4000, 2))]
    X_val, y_val = draw(150)
    return frame(np.r_[X_lab, X_unl], [*y_lab.tolist(), *[None] * 4000]), frame(X_val, y_val.tolist())


def cluster_gap(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two well separated clusters (x0 = -3 and +3); class 1's few labeled rows come from its far tail (x0 near 6),
    so wce puts the boundary inside class 1, and the unlabeled rows show where the gap is."""
    rng = np.random.default_rng(seed)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 2, n)
        return np.c_[np.where(y == 1, 3.0, -3.0) + rng.normal(size=n), rng.normal(size=(n, 3))], y

    X0 = np.c_[-3 + rng.normal(size=10), rng.normal(size=(10, 3))]
    X1 = np.c_[6 + 0.3 * rng.normal(size=10), rng.normal(size=(10, 3))]
    X_unl, _ = draw(2000)
    X_val, y_val = draw(400)
    labels = ["a"] * 10 + ["b"] * 10 + [None] * 2000
    return frame(np.r_[X0, X1, X_unl], labels), frame(X_val, np.where(y_val == 1, "b", "a").tolist())


def train_three(tmp_path: Path, data: pd.DataFrame, val: pd.DataFrame, *extra: str) -> dict:
    """wce (labeled rows), adsh without and with the safety net; each model's held-out score and the reports."""
    data_path, val_path = tmp_path / "data.parquet", tmp_path / "val.parquet"
    data.to_parquet(data_path)
    val.to_parquet(val_path)
    runs = {
        "wce": ["--solver", "wce", "--drop-unlabeled", "--cv-transfer", "apply"],  # one fit, as the fallback's
        "semi": ["--solver", "adsh", "--param", "fallback=false", *extra],
        "net": ["--solver", "adsh", "--val", val_path, *extra],
    }
    out = {}
    for name, args in runs.items():
        model, report = tmp_path / f"{name}.safetensors", tmp_path / f"{name}.json"
        proc = run_dmo(
            "train", data_path, *args, "--problem", "multiclass", "-o", model, "--report", report, check=True
        )
        out[name] = {
            "score": evaluate(model, val_path)["splits"]["data"]["balanced_accuracy"],
            "report": json.loads(report.read_text()),
            "stderr": proc.stderr,
            "weights": load_file(str(model)),
        }
    return out


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_misleading_unlabeled_rows_fall_back_to_the_supervised_model_with_a_warning(tmp_path):
    runs = train_three(tmp_path, *misleading())
    assert runs["semi"]["score"] < runs["wce"]["score"]  # the premise: these unlabeled rows hurt
    verdict = runs["net"]["report"]["solver_trace"]["fallback"]
    assert verdict["saved"] == "wce" and verdict["difference"] < 0
    assert verdict["wce"] == pytest.approx(runs["wce"]["score"])  # judged on --val, as evaluate scores it
    assert same_weights(runs["net"]["weights"], runs["wce"]["weights"])
    assert runs["net"]["score"] == pytest.approx(runs["wce"]["score"])
    assert "unlabeled rows did not help" in runs["net"]["stderr"]
    assert any("did not help" in w for w in runs["net"]["report"]["warnings"])
    assert "did not help" not in runs["semi"]["stderr"]


def test_helpful_unlabeled_rows_keep_the_semi_supervised_model_without_a_warning(tmp_path):
    runs = train_three(tmp_path, *cluster_gap())
    assert runs["semi"]["score"] > runs["wce"]["score"] + 0.02  # the premise: the unlabeled rows show the gap
    verdict = runs["net"]["report"]["solver_trace"]["fallback"]
    assert verdict["saved"] == "adsh" and verdict["difference"] > 0
    assert runs["net"]["score"] == pytest.approx(verdict["adsh"])
    assert runs["net"]["score"] > runs["wce"]["score"] + 0.02
    assert "did not help" not in runs["net"]["stderr"]
    assert runs["net"]["report"]["warnings"] == []
    assert 0 < verdict["standard_error"] < verdict["difference"]


def test_a_gain_within_the_margin_of_noise_keeps_the_supervised_model(tmp_path):
    """The same helpful rows, but the gain must exceed 1000 standard errors: the supervised model is saved."""
    data, val = cluster_gap()
    data_path, val_path, report = tmp_path / "d.parquet", tmp_path / "v.parquet", tmp_path / "r.json"
    data.to_parquet(data_path)
    val.to_parquet(val_path)
    proc = run_dmo(
        "train", data_path, "--solver", "adsh", "--val", val_path, "--problem", "multiclass",
        "--param", "fallback-margin=1000", "-o", tmp_path / "m.safetensors", "--report", report, check=True,
    )  # fmt: skip
    verdict = json.loads(report.read_text())["solver_trace"]["fallback"]
    assert verdict["difference"] > 0 and verdict["saved"] == "wce" and verdict["margin"] == 1000
    assert "did not help" in proc.stderr and "1000 x" in proc.stderr


def test_binary_semi_supervised_through_the_cli_fits_the_exact_threshold(tmp_path):
    """frop with unlabeled rows: the saved model's threshold is the exact search's on --val-frac's rows, and the
    fallback judges by the objective at that threshold."""
    rng = np.random.default_rng(1)
    n = 1500
    y = (rng.random(n) < 0.2).astype(int)
    X = rng.normal(size=(n, 4)) + 1.6 * y[:, None] * np.array([1.0, 0.6, 0.3, 0.0])
    labels = np.where(rng.random(n) < 0.3, y, -1)
    data = frame(X, [int(v) if v >= 0 else None for v in labels])
    path, model, report = tmp_path / "d.parquet", tmp_path / "m.safetensors", tmp_path / "r.json"
    data.to_parquet(path)
    run_dmo(
        "train", path, "--solver", "adsh", "--problem", "frop", "--target", "0.7", "--val-frac", "0.3",
        "-o", model, "--report", report, check=True,
    )  # fmt: skip
    rep = json.loads(report.read_text())
    verdict = rep["solver_trace"]["fallback"]
    assert verdict["metric"].startswith("precision") and verdict["saved"] in ("adsh", "wce")
    val = rep["splits"]["val"]
    assert val["recall"] >= 0.7 and val["feasible"]
    assert rep["operating_point"]["threshold"] == pytest.approx(val["threshold"])
    # the winner's precision on --val-frac's rows at its exact threshold is what the fallback reported
    assert verdict[verdict["saved"]] == pytest.approx(val["precision"])
    scored = evaluate(model, path)["splits"]["data"]
    assert scored["n"] == int((labels >= 0).sum())


def test_folds_keep_singleton_classes_in_training_and_spread_small_classes():
    y = np.array([0] * 7 + [1] * 2 + [2] + [-1] * 5)
    folds = labeled_folds(y, 3, seed=0)
    assert (folds[y == -1] == -1).all() and folds[y == 2] == -1  # unlabeled and a one-row class: never held out
    assert sorted(np.bincount(folds[y == 0], minlength=3)) == [2, 2, 3]
    assert len(set(folds[y == 1])) == 2  # the two rows of class 1 are in different folds
