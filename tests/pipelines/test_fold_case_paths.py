"""--fold-case and the case-variant warning on the training paths besides one-process in-memory training (issue 33,
item 9): the streaming solvers, `--engine dask` trees and torchrun's loading (one process group of one). Each
folds a text column's `grocery`/`Grocery`/`GROCERY` into one level stored in the model, so predict takes any
spelling as that level; without --fold-case each names the variants in the report's warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dmocli import TrainOptions, load_model, predict, train

SPELLINGS = ["grocery", "Grocery", "GROCERY", "fuel", "online"]
FOLDED = ["fuel", "grocery", "online"]
NAMED = "'GROCERY'/'Grocery'/'grocery'"  # as the warning names the group


def shops(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """A text column `shop` spelled three ways for one level, a numeric `amount` and a binary `label`."""
    rng = np.random.default_rng(seed)
    shop = rng.choice(SPELLINGS, n)
    amount = rng.normal(size=n)
    label = (amount + 1.5 * (shop == "online") + rng.normal(size=n) > 1).astype(np.int64)
    return pd.DataFrame({"shop": shop, "amount": amount, "label": label})


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shops") / "shops.parquet"
    shops().to_parquet(path)
    return path


def case_warnings(report: dict[str, Any]) -> list[str]:
    return [w for w in report["warnings"] if "differ only in case" in w]


def assert_folds_and_scores_any_spelling(model_path: Path, data: Path, folder: Path) -> None:
    """The model knows one level for the three spellings, and scores upper-cased rows as the lower-cased ones,
    with no unseen level."""
    pre = load_model(model_path).preprocessor
    assert pre.fold_case and pre.categorical["shop"] == FOLDED
    frame = pd.read_parquet(data)
    lower, upper = frame.assign(shop=frame["shop"].str.lower()), frame.assign(shop=frame["shop"].str.upper())
    scored = {}
    for name, rows in (("lower", lower), ("upper", upper)):
        report = predict(model_path, rows, folder / f"{name}.parquet")
        assert report["warnings"] == [] and report["unseen_levels"] == {}, report["warnings"]
        scored[name] = pq.read_table(folder / f"{name}.parquet").column("logit").to_numpy()
    np.testing.assert_array_equal(scored["upper"], scored["lower"])


@pytest.mark.parametrize("solver", ["fofo", "lr"])
def test_a_streaming_solver_folds_case_and_warns_without_it(data, tmp_path, solver):
    options = dict(label_col="label", solver=solver)
    _, report = train(data, TrainOptions(**options, fold_case=True), output=tmp_path / "folded.st")
    assert case_warnings(report) == []
    assert_folds_and_scores_any_spelling(tmp_path / "folded.st", data, tmp_path)
    model, report = train(data, TrainOptions(**options), output=tmp_path / "plain.st")
    (line,) = case_warnings(report)
    assert "'shop'" in line and NAMED in line and "--fold-case" in line
    assert not model.preprocessor.fold_case and len(model.preprocessor.categorical["shop"]) == len(SPELLINGS)


@pytest.fixture(scope="module")
def scheduler():
    """A one-worker cluster in a process of its own: the preprocessing travels to the worker as a user's would."""
    pytest.importorskip("xgboost")
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def test_trees_on_dask_fold_case_and_warn_without_it(data, scheduler, tmp_path):
    options = dict(label_col="label", model="gbdt", engine="dask", scheduler=scheduler, cv=0)
    _, report = train(data, TrainOptions(**options, fold_case=True), output=tmp_path / "folded.st")
    assert case_warnings(report) == [] and report["engine"]["workers"] == 1
    assert_folds_and_scores_any_spelling(tmp_path / "folded.st", data, tmp_path)
    model, report = train(data, TrainOptions(**options), output=tmp_path / "plain.st")
    (line,) = case_warnings(report)
    assert "'shop'" in line and NAMED in line
    assert not model.preprocessor.fold_case and len(model.preprocessor.categorical["shop"]) == len(SPELLINGS)


@pytest.mark.parametrize("fold_case", [True, False])
def test_torchrun_loading_folds_case_and_warns_without_it(data, fold_case):
    """What each torchrun process reads before training (in_memory_load.load with a process group), here a group
    of one: the preprocessing it fits from the stream of DATA, and the warnings it reports."""
    from dmocli.engines.torch_distributed import OneProcess
    from dmocli.pipelines.in_memory_load import load
    from dmocli.solvers import get_solver

    opts = TrainOptions(label_col="label", fold_case=fold_case)
    loaded = load(data, opts, get_solver(opts.solver), OneProcess())
    assert loaded.pre.fold_case is fold_case
    if fold_case:
        assert loaded.pre.categorical["shop"] == FOLDED and case_warnings({"warnings": loaded.warnings}) == []
        assert loaded.train.levels.unseen == {"shop": 0}  # every spelling encoded as its folded level
    else:
        (line,) = case_warnings({"warnings": loaded.warnings})
        assert NAMED in line and len(loaded.pre.categorical["shop"]) == len(SPELLINGS)
