"""The drift profile every model file keeps for `dmo monitor` (issue 35): its training rows' feature columns and the
score of the held-out rows its threshold was searched on, built on every training path where the rows are read
anyway, refused on load when damaged, kept by `dmo threshold`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import REPO, make_binary_frame
from test_hostile_models import assert_refused_everywhere, with_metadata

from dmocli import TrainOptions, load_model, refit_threshold, train
from dmocli.models.modelfile import read_metadata
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.shift.drift_profile import Profile

SAMPLE_DATA = REPO / "sample_data" / "train.parquet"


def with_kind(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The frame with a text column, so the profile holds level counts beside the numeric bins."""
    rng = np.random.default_rng(seed)
    return frame.assign(kind=rng.choice(["red", "green", "blue"], len(frame), p=[0.6, 0.3, 0.1]))


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("profile")
    frame = with_kind(make_binary_frame(n=1200, d=4, pos_frac=0.2, seed=7, sep=1.2), seed=7)
    frame.iloc[:900].to_parquet(root / "train.parquet")
    frame.iloc[900:].to_parquet(root / "holdout.parquet")
    return root


def features_of(model, table) -> Profile:
    """The profile of `table`'s rows as training builds it for `model`, in one batch (the same for any batching)."""
    builder = ProfileBuilder.for_preprocessor(model.preprocessor)
    builder.add(table)
    return builder.finish()


def scores_profile(scores: np.ndarray):
    builder = ProfileBuilder()
    builder.add_scores(scores)
    return builder.finish().score


# how the model is trained, the held-out split its threshold is searched on, and that split's rows
WAYS = {
    "linear cv": (dict(cv=3, problem="fpor", target=0.6), "cv", 900),
    "linear --val": (dict(cv=0, val="holdout.parquet", problem="frop", target=0.7), "val", 300),
    "linear --val-frac": (dict(cv=0, val_frac=0.3, problem="frop", target=0.7), "val", 270),
    "gbdt cv": (dict(model="gbdt", cv=2, params={"rounds": "10"}, problem="fpor", target=0.6), "cv", 900),
    "streaming lr --val": (dict(solver="lr", val="holdout.parquet", adjust=True, problem="ofbs"), "val", 300),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_every_path_profiles_its_training_rows_and_held_out_scores(tables, tmp_path, way):
    spec, split, held_out_rows = WAYS[way]
    if way == "gbdt cv":
        pytest.importorskip("xgboost")
    spec = {**spec, **({"val": tables / spec["val"]} if "val" in spec else {})}
    train(tables / "train.parquet", TrainOptions(seed=3, **spec), output=tmp_path / "m.st")
    model = load_model(tmp_path / "m.st")
    profile = model.profile
    training_rows = model.info["rows"]
    assert training_rows == (630 if way == "linear --val-frac" else 900)
    columns = [*profile.numeric, *profile.categorical]
    assert columns == model.preprocessor.input_columns == ["f0", "f1", "f2", "f3", "kind"]
    assert {entry.rows for entry in [*profile.numeric.values(), *profile.categorical.values()]} == {training_rows}
    assert profile.categorical["kind"].levels[0] == "red" and profile.categorical["kind"].unseen == 0
    if way != "linear --val-frac":  # every row of DATA trained the model: its profile is DATA's
        assert profile.numeric == features_of(model, pq.read_table(tables / "train.parquet")).numeric
    assert model.heldout.split == split
    if model.heldout.carried:  # a gbdt ensemble's curve is on its own scores of DATA (issue 45): no drift reference
        assert way == "gbdt cv" and profile.score is None
    else:
        assert profile.score.rows == held_out_rows
        assert profile.score == scores_profile(model.heldout.rows()[0]), "the score profile is of the searched scores"
    assert "profile" not in model.info and read_metadata(tmp_path / "m.st")["info"]["profile"] == profile.to_dict()


def test_multiclass_and_rank_transferred_models_keep_features_without_a_score(tables, tmp_path):
    frame = pd.read_parquet(tables / "train.parquet")
    three = frame.assign(label=np.where(frame["f1"] > 0.8, 2, frame["label"]))
    _, report = train(three, TrainOptions(problem="multiclass", cv=2, seed=0), output=tmp_path / "multi.st")
    multi = load_model(tmp_path / "multi.st")
    assert multi.profile.score is None and multi.profile.numeric["f0"].rows == report["splits"]["train"]["n"] == 900
    train(tables / "train.parquet", TrainOptions(cv=2, cv_transfer="rank", seed=0), output=tmp_path / "rank.st")
    ranked = load_model(tmp_path / "rank.st")
    assert ranked.profile.categorical["kind"].rows == 900
    # the out-of-fold scores carried to the refit's own scale by rank (issue 45) make its curve, whose scores are the
    # refit's on the rows it was fitted on: no reference for the drift of its score
    assert ranked.heldout.carried and ranked.profile.score is None


@pytest.mark.parametrize("solver", ["wce", "lr"])
def test_unlabeled_rows_dropped_from_training_are_not_profiled(tables, tmp_path, solver):
    frame = pd.read_parquet(tables / "train.parquet")
    frame["label"] = frame["label"].astype("Int64")
    frame.loc[frame.index[::9], "label"] = pd.NA  # 100 rows without a label
    frame.to_parquet(tmp_path / "partly.parquet")
    options = TrainOptions(solver=solver, drop_unlabeled=True, val=tables / "holdout.parquet", seed=0)
    train(tmp_path / "partly.parquet", options, output=tmp_path / "m.st")
    profile = load_model(tmp_path / "m.st").profile
    assert profile.numeric["f2"].rows == profile.categorical["kind"].rows == 800 and profile.score.rows == 300


def test_cv_with_val_profiles_the_pooled_rows(tables, tmp_path):
    options = TrainOptions(cv=2, val=tables / "holdout.parquet", problem="fpor", target=0.6, seed=0)
    _, report = train(tables / "train.parquet", options, output=tmp_path / "m.st")
    profile = load_model(tmp_path / "m.st").profile
    assert profile.numeric["f0"].rows == report["splits"]["train"]["n"] == 1200 and profile.score.rows == 1200


def test_dmo_threshold_keeps_the_profile_and_older_files_load_without_one(tables, tmp_path):
    train(tables / "train.parquet", TrainOptions(cv=2, problem="fpor", target=0.6, seed=0), output=tmp_path / "m.st")
    kept = load_model(tmp_path / "m.st").profile
    refit_threshold(tmp_path / "m.st", None, None, tmp_path / "moved.st")
    refit_threshold(tmp_path / "m.st", tables / "holdout.parquet", None, tmp_path / "on-data.st")
    assert load_model(tmp_path / "moved.st").profile == kept == load_model(tmp_path / "on-data.st").profile
    older = with_metadata(tmp_path / "m.st", tmp_path / "older.st", lambda meta: meta["info"].pop("profile"))
    model = load_model(older)
    assert model.profile is None and model.threshold == load_model(tmp_path / "m.st").threshold
    refit_threshold(older, None, None, tmp_path / "older-moved.st")
    assert "profile" not in read_metadata(tmp_path / "older-moved.st")["info"]


def edit_profile(change):
    return lambda meta: change(meta["info"]["profile"])


def set_first(field: str, value):
    return edit_profile(lambda profile: profile["numeric"]["f0"][field].__setitem__(0, value))


PROBES = [
    ("edges decreasing", set_first("edges", 1e9), "increasing"),
    ("edge NaN", set_first("edges", float("nan")), "finite"),
    ("count negative", set_first("counts", -1), "non-negative"),
    ("count as text", set_first("counts", "7"), "non-negative"),
    ("a count short", edit_profile(lambda p: p["numeric"]["f0"]["counts"].pop()), "one count more"),
    ("level repeated", edit_profile(lambda p: p["categorical"]["kind"]["levels"].__setitem__(1, "red")), "distinct"),
    ("format unknown", edit_profile(lambda p: p.update(format=2)), "format 2"),
    ("field missing", edit_profile(lambda p: p.pop("numeric")), "no field 'numeric'"),
    ("not an object", lambda meta: meta["info"].update(profile=[1, 2]), "not a JSON object"),
    ("numeric not an object", edit_profile(lambda p: p.update(numeric=[1])), "drift profile"),
    ("other columns", edit_profile(lambda p: p["numeric"].update(x=p["numeric"].pop("f0"))), "feature columns"),
    ("other level matching", edit_profile(lambda p: p.update(fold_case=True)), "matches levels"),
]


@pytest.fixture(scope="module")
def plain_model(tables, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plain") / "m.st"
    train(tables / "train.parquet", TrainOptions(cv=2, seed=0), output=path)
    return path


@pytest.mark.parametrize("probe,edit,words", PROBES, ids=[p for p, _, _ in PROBES])
def test_a_damaged_profile_is_refused_with_one_line(tables, plain_model, tmp_path, dmo, probe, edit, words):
    path = with_metadata(plain_model, tmp_path / "m.st", edit)
    assert_refused_everywhere(path, tables / "holdout.parquet", dmo, words)


def test_the_sample_datas_profile_is_small(tmp_path):
    train(SAMPLE_DATA, TrainOptions(problem="fpor", target=0.8, cv=2, seed=0), output=tmp_path / "m.st")
    stored = json.dumps(read_metadata(tmp_path / "m.st")["info"]["profile"])
    profile = load_model(tmp_path / "m.st").profile
    assert len(profile.numeric) == 10 and profile.score.rows == profile.numeric["x0"].rows == 3283
    assert len(stored) < 4096, f"sample_data's profile takes {len(stored)} bytes of the model file's metadata"


def test_dask_trees_profile_every_labeled_row_on_the_client(tmp_path):
    pytest.importorskip("xgboost")
    pytest.importorskip("distributed")
    parts = tmp_path / "parts"
    parts.mkdir()
    frames = [with_kind(make_binary_frame(n=500, seed=i), seed=i) for i in range(2)]
    for i, frame in enumerate(frames):
        frame.to_parquet(parts / f"part-{i}.parquet")
    options = TrainOptions(model="gbdt", engine="dask", workers=1, problem="fpor", target=0.6, params={"rounds": "10"})
    _, report = train(parts, options, output=tmp_path / "m.st")
    model = load_model(tmp_path / "m.st")
    expected = features_of(model, pq.read_table(parts))
    assert model.profile.numeric == expected.numeric and model.profile.categorical == expected.categorical
    assert model.profile.numeric["f0"].rows == 1000 and model.profile.score.rows == report["splits"]["val"]["n"]
