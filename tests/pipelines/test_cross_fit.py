"""`dmo train --cv K`: the threshold is fitted on out-of-fold scores of every row, the model on all rows."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch
from conftest import make_binary_frame, run_dmo

from dmocli import Problem, TrainOptions, search_threshold, train
from dmocli.models.modelfile import load_model, read_metadata
from dmocli.models.networks import FoldEnsemble
from dmocli.pipelines.cross_fit import CrossFitted
from dmocli.pipelines.thresholding import Asked, FitDetails, settle_threshold
from dmocli.prep.dataset import stratified_folds
from dmocli.solvers.wce import WeightedCrossEntropy


def _overfitting_frame(n: int, seed: int, d: int = 60) -> pd.DataFrame:
    """Few informative features among many noise ones: a linear model fits its training rows better than new ones,
    so a threshold fitted on the training rows is optimistic."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.2).astype(np.int64)
    X = rng.normal(size=(n, d))
    X[:, 0] += 1.2 * y
    frame = pd.DataFrame(X.astype(np.float32), columns=[f"f{i}" for i in range(d)])
    frame["label"] = y
    return frame


def test_folds_are_stratified_and_cover_every_row_once():
    y = np.array([0] * 53 + [1] * 12)
    folds = stratified_folds(y, 5, seed=3)
    assert sorted(np.unique(folds)) == [0, 1, 2, 3, 4]
    for fold in range(5):
        assert (y[folds == fold] == 1).sum() in (2, 3) and (y[folds == fold] == 0).sum() in (10, 11)
    assert np.array_equal(folds, stratified_folds(y, 5, seed=3))


def test_a_class_smaller_than_the_folds_is_refused_by_name():
    with pytest.raises(ValueError, match="--cv 5 needs at least 5 rows of every class; class 'yes' has 3"):
        stratified_folds(np.array([0] * 20 + [1] * 3), 5, seed=0, class_names=["no", "yes"])


def test_without_val_the_threshold_is_cross_fitted_and_every_row_counts(tmp_path):
    data = tmp_path / "train.parquet"
    frame = make_binary_frame(n=500, seed=2)
    frame.to_parquet(data)
    proc = run_dmo("train", data, "--problem", "frop", "--target", "0.8", "-o", tmp_path / "m.st", "--json", check=True)
    report = json.loads(proc.stdout)
    cv = report["cv"]
    assert cv["folds"] == 5 and report["operating_point"]["split"] == "cv"
    assert sum(f["n"] for f in cv["per_fold"]) == 500 and sum(f["n_pos"] for f in cv["per_fold"]) == frame.label.sum()
    assert cv["threshold_spread"][0] <= cv["threshold_spread"][1]
    assert report["splits"]["cv"]["n"] == 500 and report["splits"]["cv"]["recall"] >= 0.8
    assert report["splits"]["cv"]["threshold"] == report["operating_point"]["threshold"] == cv["oof_threshold"]
    assert report["threshold"] == cv["oof_threshold"]  # the default transfer, ensemble, keeps it
    assert report["warnings"] == []


def test_cv_0_without_val_warns_that_the_operating_point_is_optimistic(tmp_path):
    data = tmp_path / "train.parquet"
    make_binary_frame(n=300).to_parquet(data)
    proc = run_dmo("train", data, "--cv", "0", "-o", tmp_path / "m.st", "--json", check=True)
    report = json.loads(proc.stdout)
    assert "cv" not in report and report["operating_point"]["split"] == "train"
    assert any("operating point is optimistic" in w for w in report["warnings"])
    assert "dmo: warning: the threshold was fitted on the rows the model was trained on" in proc.stderr


def test_an_explicit_cv_pools_the_validation_rows(tmp_path):
    data, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    make_binary_frame(n=300, seed=0).to_parquet(data)
    make_binary_frame(n=200, seed=1).to_parquet(val)
    proc = run_dmo("train", data, "--val", val, "--cv", "4", "-o", tmp_path / "m.st", "--json", check=True)
    report = json.loads(proc.stdout)
    assert report["cv"]["folds"] == 4 and report["cv"]["pooled_val"] is True
    assert sum(f["n"] for f in report["cv"]["per_fold"]) == 500 and "val" not in report["splits"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cv", "1"], "--cv 1 leaves no fold to hold out"),
        (["--cv", "3", "--solver", "fofo"], "solver fofo streams once"),
        (["--cv", "3", "--val-frac", "0.2"], "give either --cv K or --val-frac"),
        (["--cv", "3", "--no-adjust"], "--no-adjust keeps the solver's own"),
        (["--cv", "-1"], "--cv -1 must be at least 0"),
    ],
)
def test_what_cv_cannot_do_is_refused_before_reading(tmp_path, args, message):
    garbage = tmp_path / "data.parquet"
    garbage.write_bytes(b"not parquet")
    proc = run_dmo("train", garbage, *args, "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and message in proc.stderr and "cannot read" not in proc.stderr


def test_rank_transfer_keeps_the_share_of_rows_predicted_positive():
    """The out-of-fold scores carried to the final model's by rank: the cut searched on them flags, on the final
    model's own scores, the rows the out-of-fold cut flagged; `apply` keeps the out-of-fold scale."""
    rng = np.random.default_rng(0)
    y = (rng.random(200) < 0.3).astype(np.int64)
    oof = (rng.normal(size=200) + 2 * y).astype(np.float32)
    final = (rng.normal(size=200) * 3 + 1).astype(np.float32)
    crossed = CrossFitted(oof, y, np.zeros(200, dtype=np.int64), 0.0, [], kind="gbdt")
    assert crossed.carries_by_rank("rank") and not crossed.carries_by_rank("apply")
    assert not crossed.carries_by_rank("ensemble")  # no probability map: its members' logits are averaged
    assert not crossed.mapped((1.0, 0.0)).carries_by_rank("ensemble")  # kept on the out-of-fold scale (docs/gbdt.md)
    truth, problem = {"train": y, "cv": y}, Problem("frop", 0.8)
    asked = Asked(problem=problem)
    kept = settle_threshold({"train": final, "cv": oof}, truth, asked)
    carried = settle_threshold({"train": final, "cv": oof}, truth, asked, FitDetails(carry_to=final))
    flagged = np.count_nonzero(oof >= np.float32(kept.threshold))
    assert np.count_nonzero(final >= np.float32(carried.threshold)) == flagged
    assert carried.oof_threshold == float(oof[oof >= np.float32(kept.threshold)].min())


def test_cross_fitting_holds_the_target_on_new_data_where_training_rows_flatter():
    """A simulation with known truth: many noise features, 8 draws. The threshold fitted on the training rows
    misses recall 0.8 on fresh rows from the same distribution; the cross-fitted one comes closer, on average."""
    recall = {0: [], 5: []}
    for seed in range(8):
        frame, fresh = _overfitting_frame(300, seed), _overfitting_frame(4000, 100 + seed)
        for folds in (0, 5):
            opts = TrainOptions(problem="frop", target=0.8, cv=folds, seed=seed, device="cpu")
            model, _ = train(pa.Table.from_pandas(frame, preserve_index=False), opts)
            table = pa.Table.from_pandas(fresh, preserve_index=False)
            decided = model.decide(model.logits(table)[0])
            positives = fresh.label.to_numpy() == 1
            recall[folds].append(decided[positives].mean())
    print({k: np.round(v, 3).tolist() for k, v in recall.items()})
    assert np.mean(recall[5]) > np.mean(recall[0]) + 0.03
    assert np.mean(recall[0]) < 0.8 and np.mean(recall[5]) > 0.75


def test_the_mlp_stops_on_held_out_rows_and_after_cross_fitting_trains_for_the_folds_median_epochs():
    """Without --val each wce MLP fit holds out a stratified tenth of its rows to stop on; the final model after
    --cv has no rows to spare, so it trains on all of them for the folds' median best epoch."""
    frame = _overfitting_frame(400, seed=1, d=20)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    alone = TrainOptions(problem="ofbs", model="mlp", width=16, cv=0, seed=0, device="cpu")
    _, report = train(table, alone)
    trace = report["solver_trace"]
    assert trace["monitored_split"] == "0.1 of train" and 1 <= trace["best_epoch"] <= trace["epochs"] < 300

    solver = WeightedCrossEntropy()
    held = "0.1 of train"
    folds = [{"best_epoch": e, "epochs": e + 20, "monitored_split": held} for e in (7, 12, 30)]
    refit = solver.refit_params(solver.parse_params({}), folds)
    assert (refit.max_epochs, refit.stop_frac) == (12, 0.0)
    on_train_loss = [{**fold, "monitored_split": "train"} for fold in folds]  # torchrun, stop-frac=0: as given
    assert solver.refit_params(solver.parse_params({}), on_train_loss) == solver.parse_params({})
    refitted = TrainOptions(problem="ofbs", model="mlp", width=16, cv=3, cv_transfer="apply", seed=0, device="cpu")
    _, report = train(table, refitted)
    assert report["params"]["stop_frac"] == 0.0 and report["params"]["max_epochs"] < 300
    assert report["solver_trace"]["monitored_split"] == "train"
    assert report["solver_trace"]["epochs"] <= report["params"]["max_epochs"]
    _, report = train(table, dataclasses.replace(refitted, cv_transfer="ensemble"))  # no final fit to shorten
    assert report["params"]["stop_frac"] == 0.1 and report["params"]["max_epochs"] == 300
    assert all(fold["monitored_split"] == held for fold in report["solver_trace"]["fold_traces"])


def test_the_ensemble_is_the_fold_models_each_scoring_the_fold_it_never_saw():
    """--cv-transfer ensemble (the default) saves the K fold models. Checked from outside: dealing the same folds,
    member f's scores on fold f are the out-of-fold scores; a logistic fit of the label on them (scikit-learn's,
    unpenalized) is the members' probability map, the exact search on the mapped scores gives the report's
    threshold and counts, and the saved model's probability is the mean of the members' mapped probabilities."""
    from sklearn.linear_model import LogisticRegression

    frame = make_binary_frame(n=400, d=5, seed=4, sep=1.0)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    model, report = train(table, TrainOptions(problem="frop", target=0.8, cv=4, seed=3, device="cpu"))
    assert isinstance(model.network, FoldEnsemble) and model.architecture.members == 4
    assert report["cv"]["transfer"] == "ensemble" and report["solver_trace"]["ensemble_of_folds"] == 4

    y = frame.label.to_numpy()
    features = torch.from_numpy(np.ascontiguousarray(model.preprocessor.transform(table)[0]))
    with torch.no_grad():
        members = np.stack([member(features).squeeze(-1).numpy() for member in model.network.members])
    folds = stratified_folds(y, 4, seed=3)
    oof = members[folds, np.arange(y.size)]
    platt = LogisticRegression(C=np.inf, max_iter=1000).fit(oof.reshape(-1, 1).astype(np.float64), y)
    slope, intercept = float(platt.coef_[0, 0]), float(platt.intercept_[0])
    assert slope > 0 and np.allclose(model.network.member_map.numpy(), [slope, intercept], rtol=1e-3, atol=1e-3)
    slope, intercept = model.network.member_map.tolist()
    point = search_threshold((slope * oof.astype(np.float64) + intercept).astype(np.float32), y, Problem("frop", 0.8))
    assert point.threshold == report["cv"]["oof_threshold"] == model.threshold
    assert point.recall == report["splits"]["cv"]["recall"] and point.precision == report["splits"]["cv"]["precision"]
    mean_probability = (1.0 / (1.0 + np.exp(-(slope * members.astype(np.float64) + intercept)))).mean(axis=0)
    assert np.allclose(model.probability(model.logits(table)[0]), mean_probability, atol=1e-4)
    assert not np.allclose(members[0], members[1])  # four different fits, not one copied


def test_the_ensemble_probability_is_the_mean_of_its_members_and_keeps_the_positive_rate():
    """Averaging the members' logits would pull a rare class's probability down (the mean of disagreeing logits
    is less extreme than each); averaging their mapped probabilities keeps the mean probability on new rows near
    the positive rate. Known truth: rows drawn from one logistic model at a 5 % positive rate, MLP members that
    disagree; the mean probability on 20,000 new rows is compared with theirs."""
    rng = np.random.default_rng(0)

    def draw(n: int) -> pd.DataFrame:
        X = rng.normal(size=(n, 8)).astype(np.float32)
        logit = -3.6 + X[:, 0] + 0.8 * X[:, 1] * X[:, 2]
        frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(8)])
        frame["label"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
        return frame

    train_table = pa.Table.from_pandas(draw(3000), preserve_index=False)
    new = draw(20000)
    opts = TrainOptions(problem="ofbs", model="mlp", width=32, cv=5, seed=1, device="cpu")
    model, _ = train(train_table, opts)
    logits, _ = model.logits(pa.Table.from_pandas(new, preserve_index=False))
    rate = new.label.mean()
    assert abs(model.probability(logits).mean() / rate - 1) < 0.1
    assert np.all(np.diff(model.probability(np.sort(logits))) >= 0)  # still one increasing map of the decision score


@pytest.mark.parametrize("kind", ["mlp", "gbdt"])
def test_an_ensemble_model_file_loads_as_tensors_and_scores_as_saved(tmp_path, kind):
    if kind == "gbdt":
        pytest.importorskip("xgboost")  # the test extra installs it; a bare clone says so here
    data = tmp_path / "train.parquet"
    make_binary_frame(n=300, seed=5).to_parquet(data)
    path = tmp_path / "m.safetensors"
    opts = TrainOptions(problem="fpor", target=0.6, model=kind, width=8, cv=3, seed=2, device="cpu")
    model, _ = train(data, opts, output=path)
    assert read_metadata(path)["architecture"]["members"] == 3
    loaded = load_model(path)
    table = pa.Table.from_pandas(make_binary_frame(n=200, seed=6), preserve_index=False)
    assert np.array_equal(model.logits(table)[0], loaded.logits(table)[0]) and loaded.threshold == model.threshold
    proc = run_dmo("evaluate", path, data, "--json", check=True)
    assert json.loads(proc.stdout)["splits"]["data"]["threshold"] == model.threshold


def test_a_refitted_model_is_one_network_trained_on_all_rows():
    frame = make_binary_frame(n=300, seed=7)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    opts = TrainOptions(problem="frop", target=0.8, cv=3, cv_transfer="apply", seed=0, device="cpu")
    model, report = train(table, opts)
    assert not isinstance(model.network, FoldEnsemble) and "members" not in report["architecture"]
    assert report["cv"]["transfer"] == "apply" and "ensemble_of_folds" not in report["solver_trace"]


def test_the_default_cv_says_when_the_rarest_class_allows_fewer_folds():
    """Three positives: the default --cv takes 3 folds, and says so; an explicit --cv 3 is what was asked."""
    frame = make_binary_frame(n=400, seed=8)
    positives = np.flatnonzero(frame.label.to_numpy() == 1)
    frame = frame.drop(index=positives[3:]).reset_index(drop=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    _, report = train(table, TrainOptions(problem="ofbs", seed=0, device="cpu"))
    assert report["cv"]["folds"] == 3
    assert any("cross-fitted on 3 folds, not 5" in warning for warning in report["warnings"])
    _, asked = train(table, TrainOptions(problem="ofbs", cv=3, seed=0, device="cpu"))
    assert not any("folds, not" in warning for warning in asked["warnings"])


def test_val_naming_the_training_file_is_warned_about(tmp_path):
    data = tmp_path / "train.csv"
    make_binary_frame(n=300, seed=9).to_csv(data, index=False)
    proc = run_dmo("train", data, "--val", data, "-o", tmp_path / "m.st", check=True)
    assert "--val" in proc.stderr and "is DATA's own file" in proc.stderr
    other = tmp_path / "val.csv"
    make_binary_frame(n=300, seed=10).to_csv(other, index=False)
    assert "own file" not in run_dmo("train", data, "--val", other, "-o", tmp_path / "n.st", check=True).stderr


def test_a_threshold_on_a_validation_split_of_few_positives_is_warned_about():
    """A tiny --val-frac leaves a handful of positives to fit the threshold on; the report says so, and a split
    with enough positives does not."""
    table = pa.Table.from_pandas(make_binary_frame(n=1000, pos_frac=0.1, seed=11), preserve_index=False)
    _, tiny = train(table, TrainOptions(problem="ofbs", val_frac=0.03, seed=0, device="cpu"))
    positives = tiny["splits"]["val"]["tp"] + tiny["splits"]["val"]["fn"]
    assert positives < 10 and any(f"validation split's {positives} positive" in w for w in tiny["warnings"])
    _, enough = train(table, TrainOptions(problem="ofbs", val_frac=0.25, seed=0, device="cpu"))
    assert not any("validation split's" in w for w in enough["warnings"])


def test_a_cv_transfer_with_nothing_cross_fitted_is_said_to_do_nothing():
    table = pa.Table.from_pandas(make_binary_frame(n=300, seed=9), preserve_index=False)
    _, report = train(table, TrainOptions(problem="frop", target=0.8, val_frac=0.3, cv_transfer="apply", seed=0))
    assert any(w.startswith("--cv-transfer apply applies to a cross-fitted threshold") for w in report["warnings"])
    _, report = train(table, TrainOptions(problem="frop", target=0.8, cv=3, cv_transfer="apply", seed=0))
    assert not any("--cv-transfer" in w for w in report["warnings"])
