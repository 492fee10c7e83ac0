"""The held-out curve a model file keeps, re-targeting without new labels, and the training-rows fingerprint
(issue 35, items 1 and 2).

Re-targeting on the stored curve must give the threshold `dmo train` gives for that target and seed: the curve is
checked against a second training run, for each way the held-out scores are made (--cv ensemble, --val, gbdt, a
streaming solver with --val).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame

from dmocli import Problem, TrainOptions, load_model, refit_threshold, train
from dmocli.errors import DmoError
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.search import search, search_curve
from dmocli.prep.row_fingerprint import SKETCH_SIZE, row_hashes, share_of_sketched_rows, sketch


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("evidence")
    frame = make_binary_frame(n=1200, d=5, pos_frac=0.2, seed=7, sep=1.2)
    frame.iloc[:900].to_parquet(root / "train.parquet")
    frame.iloc[900:].to_parquet(root / "holdout.parquet")
    return root


WAYS = {  # how the held-out scores are made, and two problems of a kind the solver solves
    "cv ensemble": (dict(cv=3), dict(problem="fpor", target=0.5), dict(problem="fpor", target=0.7)),
    "val split": (dict(cv=0, val_frac=0.3), dict(problem="frop", target=0.6), dict(problem="frop", target=0.8)),
    "gbdt cv": (
        dict(model="gbdt", cv=2, params={"rounds": "20"}),
        dict(problem="fpor", target=0.5),
        dict(problem="fpor", target=0.7),
    ),
    "streaming with --val": (
        dict(solver="lr", val="holdout.parquet", adjust=True),
        dict(problem="ofbs", beta=1.0),
        dict(problem="ofbs", beta=2.0),
    ),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_retargeting_on_the_stored_curve_gives_trains_threshold(tables, tmp_path, way):
    spec, first, second = WAYS[way]
    spec = {**spec, **({"val": tables / spec["val"]} if "val" in spec else {})}
    if way == "gbdt cv":
        pytest.importorskip("xgboost")
    trained = {}
    for name, problem in (("first", first), ("second", second)):
        trained[name] = tmp_path / f"{name}.st"
        train(tables / "train.parquet", TrainOptions(seed=3, **spec, **problem), output=trained[name])
    moved = tmp_path / "moved.st"
    second_problem = Problem(second["problem"], second.get("target"), second.get("beta", 1.0))
    report = refit_threshold(trained["first"], None, second_problem, moved)
    assert load_model(moved).threshold == load_model(trained["second"]).threshold, way
    assert report["threshold"] == load_model(trained["second"]).threshold and "held-out" in report["data"]
    if first["problem"] != "ofbs":  # a certificate's default sample: training's (here none: the population)
        certified = refit_threshold(
            trained["first"],
            None,
            Problem(first["problem"], 0.6),
            tmp_path / "c.st",
            confidence=0.9,
            allow_infeasible=True,
        )
        assert certified["operating_point"]["new_rows"] is None is load_model(trained["first"]).info.get("new_rows")


def test_the_curve_is_the_searchs_own_curve_and_round_trips(tables, tmp_path):
    rng = np.random.default_rng(0)
    scores = np.round(rng.normal(size=5000), 2).astype(np.float32)  # ties
    labels = (rng.random(5000) < 1 / (1 + np.exp(-2 * scores))).astype(np.int8)
    curve = HeldOutCurve.from_scores(scores, labels, split="cv", certified_rows=1000)
    direct = ScoreCurve.from_scores(scores, labels)
    stored = curve.score_curve()
    for name in ("values", "tp", "fp"):
        assert np.array_equal(getattr(stored, name), getattr(direct, name)), name
    assert stored.dtype is direct.dtype
    for problem in (Problem("fpor", 0.8), Problem("frop", 0.7), Problem("ofbs")):
        assert search_curve(stored, problem) == search(scores, labels, problem)
    again = HeldOutCurve.from_file(curve.tensors(), curve.info())
    assert again == curve or all(np.array_equal(getattr(again, n), getattr(curve, n)) for n in curve.tensors())


def test_a_merged_curve_keeps_only_exact_cuts():
    """Beyond max_points distinct scores, bins keep their lowest score: every stored cut counts the rows that
    really score at least it."""
    rng = np.random.default_rng(1)
    scores = rng.normal(size=20_000).astype(np.float32)
    labels = (rng.random(20_000) < 0.3).astype(np.int8)
    curve = HeldOutCurve.from_scores(scores, labels, split="val", certified_rows=20_000, max_points=500)
    assert not curve.exact and curve.scores.size <= 500
    assert curve.n_pos == labels.sum() and curve.n_neg == (1 - labels).sum()
    stored = curve.score_curve()
    for k in rng.choice(stored.values.size, 50, replace=False):
        taken = scores >= stored.values[k]
        assert stored.tp[k] == labels[taken].sum() and stored.fp[k] == (1 - labels[taken]).sum()


def test_bytes_per_held_out_row(tables, tmp_path):
    """Twelve bytes a distinct score: the model file grows by about that per held-out row of a linear model."""
    with_curve = tmp_path / "m.st"
    train(tables / "train.parquet", TrainOptions(problem="ofbs", cv=3, seed=0), output=with_curve)
    model = load_model(with_curve)
    stored_bytes = sum(array.nbytes for array in model.heldout.tensors().values())
    assert stored_bytes == 12 * model.heldout.scores.size
    assert model.heldout.info()["rows"] == 900


def test_the_training_rows_are_told_apart_from_new_rows(tables, tmp_path):
    model = tmp_path / "m.st"
    train(tables / "train.parquet", TrainOptions(problem="fpor", target=0.6, cv=3, seed=0), output=model)
    copy = tmp_path / "same_rows.csv"
    pd.read_parquet(tables / "train.parquet").sample(frac=0.5, random_state=1).to_csv(copy, index=False)
    for data in (tables / "train.parquet", copy):  # the file, and half its rows shuffled into a CSV
        with pytest.raises(DmoError, match="holds the rows the model was trained on"):
            refit_threshold(model, data, Problem("fpor", 0.7), tmp_path / "out.st")
    assert not (tmp_path / "out.st").exists()
    refit_threshold(model, tables / "holdout.parquet", Problem("fpor", 0.7), tmp_path / "out.st")
    allowed = refit_threshold(
        model, tables / "train.parquet", Problem("fpor", 0.7), tmp_path / "out2.st", allow_train_rows=True
    )
    assert allowed["threshold"] is not None
    assert load_model(tmp_path / "out.st").heldout.split == "data"


def test_the_fingerprint_estimates_the_share_of_training_rows():
    rng = np.random.default_rng(2)
    train_rows = rng.normal(size=(50_000, 4)).astype(np.float32)
    new_rows = rng.normal(size=(50_000, 4)).astype(np.float32)
    labels = np.zeros(50_000, np.int8)
    stored = sketch(row_hashes(train_rows, labels))
    assert stored.size == SKETCH_SIZE
    for share in (0.0, 0.3, 0.7, 1.0):
        mixed = np.concatenate([train_rows[: int(share * 20_000)], new_rows[: 20_000 - int(share * 20_000)]])
        estimate, counted = share_of_sketched_rows(stored, row_hashes(mixed, labels[: len(mixed)]))
        assert abs(estimate - share) < 0.12, (share, estimate, counted)
    flipped = share_of_sketched_rows(stored, row_hashes(train_rows, np.ones(50_000, np.int8)))[0]
    assert flipped < 0.05  # the same features with the other label are other rows


def test_a_streamed_models_training_rows_are_told_apart_too(tables, tmp_path):
    """fofo reads its rows batch by batch: the sketch is merged per batch on the first pass, and equals the
    in-memory sketch of the same rows."""
    model = tmp_path / "fofo.st"
    train(tables / "train.parquet", TrainOptions(problem="ofbs", solver="fofo", seed=0), output=model)
    stored = load_model(model).training_rows
    in_memory = tmp_path / "wce.st"
    train(tables / "train.parquet", TrainOptions(problem="fpor", target=0.6, cv=3, seed=0), output=in_memory)
    assert stored is not None and np.array_equal(stored, load_model(in_memory).training_rows)
    with pytest.raises(DmoError, match="holds the rows the model was trained on"):
        refit_threshold(model, tables / "train.parquet", Problem("fpor", 0.7), tmp_path / "out.st")
    refit_threshold(model, tables / "holdout.parquet", Problem("fpor", 0.7), tmp_path / "out.st")
