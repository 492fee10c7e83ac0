"""The probability column estimates P(positive | x): Platt scaling on held-out scores, checked against known
truth, end to end through `dmo predict`, and with old model files unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import make_binary_frame, run_dmo

from dmocli import DmoClassifier, load_model
from dmocli.operating_point.calibration import calibration_figures, fit_platt


def test_platt_recovers_a_known_logistic_link():
    rng = np.random.default_rng(0)
    z = rng.normal(scale=2.0, size=40_000)
    y = (rng.random(z.size) < 1.0 / (1.0 + np.exp(-(0.5 * z - 2.0)))).astype(int)
    fitted = fit_platt(z, y, "test")
    assert fitted.slope == pytest.approx(0.5, abs=0.03) and fitted.intercept == pytest.approx(-2.0, abs=0.06)
    assert fit_platt(z, np.zeros_like(y), "test") is None  # one class: nothing to calibrate to


@pytest.mark.parametrize("size", [1e-6, 1e-3, 1e5, 1e30])
def test_logits_of_any_size_get_the_same_link_without_a_library_warning(recwarn, size):
    """Logits of a feature of size 1e30, or of a model whose scores barely move, on a scale L-BFGS cannot step on:
    it stopped at slope 0 (every probability the base rate's) or half the slope, silently or with scikit-learn's
    ConvergenceWarning on the user's stderr. Any size now gives the link fitted at unit size, scaled."""
    rng = np.random.default_rng(1)
    z = rng.normal(scale=2.0, size=4_000)
    y = (rng.random(z.size) < 1.0 / (1.0 + np.exp(-(0.5 * z - 2.0)))).astype(int)
    plain, scaled = fit_platt(z, y, "test"), fit_platt(z * size, y, "test")
    assert scaled.slope * size == pytest.approx(plain.slope, rel=2e-3)  # both within L-BFGS's tolerance
    assert scaled.intercept == pytest.approx(plain.intercept, abs=2e-3)
    assert not [w for w in recwarn if "converge" in str(w.message)]


def test_brier_and_ece_match_their_definitions():
    rng = np.random.default_rng(1)
    p, y = rng.random(1000), (rng.random(1000) < 0.3).astype(int)
    figures = calibration_figures(p, y)
    assert figures["brier"] == pytest.approx(np.mean((p - y) ** 2))
    ece = (
        sum(
            abs(p[(p >= k / 10) & (p < (k + 1) / 10)].sum() - y[(p >= k / 10) & (p < (k + 1) / 10)].sum())
            for k in range(10)
        )
        / p.size
    )
    assert figures["ece"] == pytest.approx(ece) and figures["positive_rate"] == pytest.approx(y.mean())


@pytest.mark.parametrize("transfer", ["ensemble", "apply"])
def test_the_probability_of_a_class_weighted_model_is_no_longer_inflated(transfer):
    """wce weighs the classes equally, so the raw sigmoid answers as if half the rows were positive; the calibrated
    probability's mean on fresh rows is within 10 % of their positive rate, whether --cv keeps the fold models
    (each member's raw logit is the class-weighted one) or refits one."""
    train, fresh = make_binary_frame(n=3000, pos_frac=0.06, seed=0), make_binary_frame(n=20_000, pos_frac=0.06, seed=9)
    clf = DmoClassifier(problem="ofbs", seed=0, cv_transfer=transfer).fit(train.drop(columns="label"), train["label"])
    proba = clf.predict_proba(fresh.drop(columns="label"))[:, list(clf.classes_).index(1)]
    rate = fresh["label"].mean()
    network = clf.model_.module()
    raw_scorer = network.members[0] if transfer == "ensemble" else network
    fresh_table = pa.Table.from_pandas(fresh.drop(columns="label"), preserve_index=False)
    features = torch.from_numpy(np.ascontiguousarray(clf.model_.preprocessor.transform(fresh_table)[0]))
    with torch.no_grad():
        raw = torch.sigmoid(raw_scorer(features)).numpy()
    assert abs(proba.mean() / rate - 1.0) < 0.10
    assert raw.mean() > 2 * rate  # what the column held before


def test_predict_writes_the_calibrated_probability_and_old_files_keep_the_sigmoid(tmp_path):
    data = tmp_path / "train.parquet"
    make_binary_frame(n=1500, pos_frac=0.08, seed=3).to_parquet(data)
    run_dmo("train", data, "-o", tmp_path / "m.st", check=True)
    run_dmo("predict", tmp_path / "m.st", data, "-o", tmp_path / "p.parquet", check=True)
    model = load_model(tmp_path / "m.st")
    out = pq.read_table(tmp_path / "p.parquet")
    logits = out.column("logit").to_numpy()
    assert model.info["calibration"]["fitted_on"] == "cv"
    assert np.allclose(out.column("probability").to_numpy(), model.calibration.probability(logits), atol=1e-6)
    # A file written before calibration existed (no `calibration` in its info) predicts as it always did.
    info = {key: value for key, value in model.info.items() if key != "calibration"}
    model = model.with_decision(dataclasses.replace(model.decision, info=info))
    model.save(tmp_path / "old.st")
    run_dmo("predict", tmp_path / "old.st", data, "-o", tmp_path / "q.parquet", check=True)
    old = pq.read_table(tmp_path / "q.parquet").column("probability").to_numpy()
    assert np.allclose(old, 1.0 / (1.0 + np.exp(-logits.astype(np.float64))), atol=1e-6)
