"""Multi-class probabilities estimate P(class | x): temperature and per-class bias fitted on held-out logits (out of
fold by default), checked against known truth, the decision still the arg-max of the logits, through the model
file, `dmo predict` and `DmoClassifier`, with old files unchanged and malformed ones refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import make_gaussian_classes, run_dmo
from jsonschema import Draft202012Validator
from pyarrow import csv
from safetensors import safe_open
from safetensors.numpy import save_file
from test_cli_explains import one_line_error

import dmocli
from dmocli import DmoClassifier, load_model
from dmocli.operating_point.multiclass_calibration import fit_temperature_bias, multiclass_calibration_figures, softmax

PRIORS = (0.85, 0.10, 0.05)
VALIDATOR = Draft202012Validator(dmocli.report_schema())


def _frame(n: int, seed: int, sep: float = 1.0):
    return make_gaussian_classes(n, seed=seed, d=5, priors=PRIORS, sep=sep)


def test_maximum_likelihood_recovers_a_known_temperature_and_bias():
    rng = np.random.default_rng(0)
    z = rng.normal(scale=3.0, size=(60_000, 3))
    bias = np.array([1.5, -0.5, -1.0])
    y = np.array([rng.choice(3, p=p) for p in softmax(z / 2.0 + bias)])
    fitted = fit_temperature_bias(z, y, "test")
    assert fitted.temperature == pytest.approx(2.0, rel=0.03)
    assert np.allclose(fitted.bias, bias - bias.mean(), atol=0.05)
    assert fitted == fit_temperature_bias(z, y, "test")  # deterministic
    assert fit_temperature_bias(z, np.where(y == 2, 0, y), "test") is None  # a class never seen: nothing to fit


def test_the_figures_match_their_definitions():
    rng = np.random.default_rng(1)
    proba = softmax(rng.normal(size=(2000, 4)))
    y, predicted = rng.integers(0, 4, 2000), rng.integers(0, 4, 2000)
    figures = multiclass_calibration_figures(proba, y, predicted)
    assert figures["brier"] == pytest.approx(np.mean(np.sum((proba - np.eye(4)[y]) ** 2, axis=1)))
    confidence, correct = proba[np.arange(2000), predicted], predicted == y
    ece = sum(
        abs(confidence[b].sum() - correct[b].sum())
        for b in (np.minimum((confidence * 10).astype(int), 9) == k for k in range(10))
    )
    assert figures["ece"] == pytest.approx(ece / 2000)
    assert figures["class_rate"] == pytest.approx(np.bincount(y, minlength=4) / 2000)
    assert figures["mean_probability"] == pytest.approx(proba.mean(axis=0))


def test_calibrated_class_rates_hold_on_fresh_rows_and_the_decision_is_unchanged():
    """Known truth: class priors 0.85/0.10/0.05. wce weighs the classes alike, so the raw softmax answers as if
    each were a third; the calibrated mean probability of every class is within 10 % of its rate on 40,000 fresh
    rows. The decision stays the arg-max of the logits, which the calibrated arg-max is not."""
    train, fresh = _frame(3000, 0, sep=0.5), _frame(40_000, 7, sep=0.5)  # overlapping classes: a soft softmax
    clf = DmoClassifier(problem="multiclass", seed=0).fit(train.drop(columns="label"), train["label"])
    X = fresh.drop(columns="label")
    proba, logits = clf.predict_proba(X), clf.decision_function(X)
    rates = np.bincount(fresh["label"], minlength=3) / len(fresh)
    calibrated, raw = proba.mean(axis=0), softmax(logits).mean(axis=0)
    assert np.all(np.abs(calibrated / rates - 1.0) < 0.10), (calibrated, rates)
    assert raw[2] > 2 * rates[2] and raw[0] < 0.8 * rates[0]  # what the probabilities were before
    assert clf.model_.info["calibration"]["fitted_on"] == "cv"
    predicted = clf.predict(X)
    assert np.array_equal(predicted, clf.classes_[logits.argmax(axis=1)])
    assert (proba.argmax(axis=1) != logits.argmax(axis=1)).mean() > 0.01  # the bias would have moved it


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One multi-class model trained as a user would (`dmo train`, default --cv 5), its report, and fresh rows."""
    root = tmp_path_factory.mktemp("mcal")
    _frame(2000, 0).to_parquet(root / "train.parquet")
    _frame(3000, 1).to_parquet(root / "fresh.parquet")
    proc = run_dmo("train", root / "train.parquet", "-o", root / "m.st", "--report", root / "r.json", check=True)
    assert proc.stderr == ""  # no warning: the map is fitted on out-of-fold logits
    return {"root": root, "model": root / "m.st", "report": root / "r.json", "fresh": root / "fresh.parquet"}


def test_train_cross_fits_by_default_and_reports_each_fold(trained):
    report = json.loads(trained["report"].read_text())
    assert list(VALIDATOR.iter_errors(report)) == []
    cv = report["cv"]
    assert cv["folds"] == 5 and len(cv["per_fold"]) == 5 and sum(f["n"] for f in cv["per_fold"]) == 2000
    assert all(0.5 < f["accuracy"] <= 1 and 0 < f["macro_f1"] <= 1 for f in cv["per_fold"])
    assert report["calibration"]["method"] == "temperature-bias" and report["calibration"]["fitted_on"] == "cv"
    assert set(report["splits"]) == {"train", "cv"} and report["threshold"] is None
    for split in report["splits"].values():
        figures = split["calibration"]
        assert np.allclose(figures["mean_probability"], figures["class_rate"], atol=0.02)
    info = json.loads(run_dmo("info", trained["model"], "--json", check=True).stdout)
    assert info["training"]["calibration"] == report["calibration"] and list(VALIDATOR.iter_errors(info)) == []
    assert "probabilities: softmax(logits / " in run_dmo("info", trained["model"], check=True).stdout


def test_predict_and_evaluate_use_the_stored_map(trained):
    model, root = load_model(trained["model"]), trained["root"]
    assert model.calibration.to_dict() == json.loads(trained["report"].read_text())["calibration"]  # round trip
    model_path = trained["model"]
    run_dmo("predict", model_path, trained["fresh"], "-o", root / "p.parquet", check=True)
    run_dmo("predict", model_path, trained["fresh"], "-o", root / "p.csv", check=True)
    logits, _ = model.logits(pq.read_table(trained["fresh"]))
    expected = model.class_probabilities(logits)
    out = pq.read_table(root / "p.parquet")
    listed = np.asarray(out.column("probabilities").to_pylist())
    assert np.allclose(listed, expected, atol=1e-6) and not np.allclose(listed, softmax(logits), atol=0.01)
    assert np.array_equal(out.column("predicted").to_numpy(), logits.argmax(axis=1))  # the raw arg-max
    best = logits.argmax(axis=1)
    assert np.allclose(out.column("probability").to_numpy(), expected[np.arange(len(best)), best], atol=1e-6)
    columns = csv.read_csv(root / "p.csv")
    assert np.allclose(np.column_stack([columns.column(f"probability_{k}") for k in range(3)]), expected, atol=1e-6)
    report = json.loads(run_dmo("evaluate", model_path, trained["fresh"], "--json", check=True).stdout)
    assert list(VALIDATOR.iter_errors(report)) == []
    y = pq.read_table(trained["fresh"]).column("label").to_numpy()
    assert report["splits"]["data"]["log_loss"] == pytest.approx(-np.log(expected[np.arange(len(y)), y]).mean())


def test_a_file_without_the_map_keeps_the_plain_softmax(trained):
    model, root = load_model(trained["model"]), trained["root"]
    info = {key: value for key, value in model.info.items() if key != "calibration"}
    model = model.with_decision(dataclasses.replace(model.decision, info=info))
    model.save(root / "old.st")
    run_dmo("predict", root / "old.st", trained["fresh"], "-o", root / "old.parquet", check=True)
    logits, _ = model.logits(pq.read_table(trained["fresh"]))
    listed = np.asarray(pq.read_table(root / "old.parquet").column("probabilities").to_pylist())
    assert np.allclose(listed, softmax(logits), atol=1e-6)


@pytest.mark.parametrize(
    "stored",
    [
        {"method": "temperature-bias", "temperature": "hot", "bias": [0, 0, 0], "fitted_on": "cv"},
        {"method": "temperature-bias", "temperature": -1.0, "bias": [0, 0, 0], "fitted_on": "cv"},
        {"method": "temperature-bias", "temperature": float("nan"), "bias": [0, 0, 0], "fitted_on": "cv"},
        {"method": "temperature-bias", "temperature": 1.0, "bias": [0, 0], "fitted_on": "cv"},
        {"method": "temperature-bias", "temperature": 1.0, "bias": [0, "x", 0], "fitted_on": "cv"},
        {"method": "platt", "slope": 1.0, "intercept": 0.0, "fitted_on": "cv"},
        "softmax",
    ],
)
def test_a_malformed_stored_map_is_refused_in_one_line(trained, stored, tmp_path):
    with safe_open(str(trained["model"]), framework="numpy") as handle:
        meta, tensors = json.loads(handle.metadata()["dmocli"]), {k: handle.get_tensor(k) for k in handle.keys()}
    meta["info"]["calibration"] = stored
    bad = tmp_path / "bad.st"
    save_file(tensors, str(bad), metadata={"dmocli": json.dumps(meta)})
    line = one_line_error(run_dmo("predict", bad, trained["fresh"], "-o", tmp_path / "p.parquet"))
    assert str(bad) in line and "calibration" in line


def test_val_then_training_rows_and_confidence_refused(tmp_path):
    _frame(600, 2).to_parquet(data := tmp_path / "d.parquet")
    _frame(600, 3).to_parquet(val := tmp_path / "v.parquet")
    with_val = json.loads(run_dmo("train", data, "--val", val, "-o", tmp_path / "a.st", "--json", check=True).stdout)
    assert with_val["calibration"]["fitted_on"] == "val" and "cv" not in with_val
    proc = run_dmo("train", data, "--cv", "0", "-o", tmp_path / "b.st", "--json", check=True)
    report = json.loads(proc.stdout)
    assert report["calibration"]["fitted_on"] == "train" and "overconfident" in proc.stderr
    assert any("calibrated on the rows the model was trained on" in w for w in report["warnings"])
    line = one_line_error(
        run_dmo("train", data, "--problem", "multiclass", "--confidence", "0.9", "-o", tmp_path / "c")
    )
    assert "--confidence" in line and "multiclass" in line


@pytest.mark.parametrize("model", ["mlp", "gbdt"])
def test_cv_with_the_mlp_and_trees(model, tmp_path):
    _frame(900, 4).to_parquet(data := tmp_path / "d.parquet")
    args = ["--param", "max_epochs=30"] if model == "mlp" else ["--param", "rounds=60"]
    proc = run_dmo("train", data, "--model", model, "--cv", "3", *args, "-o", tmp_path / "m.st", "--json", check=True)
    report = json.loads(proc.stdout)
    assert list(VALIDATOR.iter_errors(report)) == []
    assert report["cv"]["folds"] == 3 and len(report["cv"]["per_fold"]) == 3
    assert report["calibration"]["fitted_on"] == "cv"
    assert report["architecture"]["members"] == 3  # the fold models, averaged (--cv-transfer ensemble)
    rates = np.asarray(report["splits"]["cv"]["calibration"]["class_rate"])
    assert np.allclose(report["splits"]["cv"]["calibration"]["mean_probability"], rates, atol=0.02)
