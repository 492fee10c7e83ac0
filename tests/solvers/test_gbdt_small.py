"""Trees with few positives (solvers/boosting.py, docs/gbdt.md): below `stop-min-positives` held-out positives the
trees take the fixed schedule instead of early stopping on noise, in wce, ero and --val alike, and say so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import run_dmo
from safetensors import safe_open

pytest.importorskip("xgboost")

LIMIT = 20  # the default stop-min-positives (solvers/boosting.STOP_MIN_POSITIVES)


def frame_with(positives: int, negatives: int, seed: int = 0) -> pd.DataFrame:
    """Exactly `positives` positive rows (shuffled among the negatives), a non-linear signal in x0, x1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(positives + negatives, 4)).astype(np.float32)
    y = np.r_[np.ones(positives, np.int64), np.zeros(negatives, np.int64)]
    X[y == 1, 0] += 1.5
    X[y == 1, 1] = np.abs(X[y == 1, 1]) + 0.5
    order = rng.permutation(len(y))
    frame = pd.DataFrame(X[order], columns=[f"x{i}" for i in range(4)])
    frame["label"] = y[order]
    return frame


def trained(tmp_path: Path, name: str, *args: str) -> tuple[dict, str]:
    """(report, summary) of `dmo train` with these arguments."""
    report = tmp_path / f"{name}.json"
    run = run_dmo("train", *args, "-o", tmp_path / f"{name}.dmo.safetensors", "--report", report, check=True)
    return json.loads(report.read_text()), run.stdout


def test_the_rule_switches_at_stop_min_positives_held_out_by_a_stratified_tenth(tmp_path):
    """--cv 0: the stratified tenth of 190 positives holds 19 (fixed schedule), of 200 holds 20 (early stopping)."""
    for positives, rule in ((190, "fixed"), (200, "early stopping")):
        data = tmp_path / f"d{positives}.parquet"
        frame_with(positives, 1500).to_parquet(data)
        report, summary = trained(tmp_path, f"p{positives}", str(data), "--model", "gbdt", "--cv", "0")
        trace = report["solver_trace"]
        assert trace["rounds_rule"]["rule"] == rule
        assert trace["rounds_rule"]["held_out_positives"] == positives // 10
        if rule == "fixed":  # nothing held out: every row fitted, the whole conservative schedule
            assert (trace["rounds"], trace["eta"], trace["monitored_split"]) == (300, 0.05, None)
            assert (trace["subsample"], trace["colsample"]) == (0.8, 0.8)  # stochastic boosting: its regularization
            fixed = "trees: fixed schedule (300 rounds at eta 0.05, 0.8 of rows, 0.8 of features per tree)"
            assert f"{fixed}: 19 positives held out, fewer than" in summary
        else:
            assert trace["eta"] == 0.1 and trace["monitored_split"] == "0.1 of train"
            assert (trace["subsample"], trace["colsample"]) == (1.0, 1.0)
            assert "trees: early stopping: 20 positives held out, at least stop-min-positives 20" in summary


def test_val_positives_decide_with_val_and_ero_keeps_its_fixed_warm_start(tmp_path):
    train = tmp_path / "train.parquet"
    frame_with(150, 1500).to_parquet(train)
    for positives, rule in ((LIMIT - 1, "fixed"), (LIMIT, "early stopping")):
        val = tmp_path / f"val{positives}.parquet"
        frame_with(positives, 400, seed=positives).to_parquet(val)
        report, summary = trained(tmp_path, f"v{positives}", str(train), "--model", "gbdt", "--val", str(val))
        rule_of = report["solver_trace"]["rounds_rule"]
        assert (rule_of["held_out"], rule_of["held_out_positives"]) == ("val", positives)
        assert rule_of["rule"] == rule
    few = tmp_path / f"val{LIMIT - 1}.parquet"
    report, summary = trained(tmp_path, "ero", str(train), "--model", "gbdt", "--solver", "ero", "--val", str(few),
                              "--problem", "fpor", "--target", "0.6")  # fmt: skip
    trace = report["solver_trace"]
    assert trace["outer_iterations"] == 0 and trace["selected_outer"] == 0
    assert trace["rounds_rule"]["rule"] == "fixed" and "warm start kept" in trace["rounds_rule"]["ero"]
    assert trace["warm_start"]["rounds"] == 300
    fixed = "trees: fixed schedule (300 rounds at eta 0.05, 0.8 of rows, 0.8 of features per tree)"
    assert f"{fixed}: {LIMIT - 1} positives held out" in summary


def test_cross_fitting_reports_every_fold_and_the_refit_keeps_the_fixed_schedule(tmp_path):
    data = tmp_path / "d.parquet"
    frame_with(60, 1200).to_parquet(data)
    report, summary = trained(tmp_path, "ens", str(data), "--model", "gbdt")
    folds = report["solver_trace"]["fold_traces"]
    assert [fold["rounds_rule"]["rule"] for fold in folds] == ["fixed"] * 5
    assert "in 5 of 5 fits: 5 positives held out, fewer than stop-min-positives 20" in summary
    report, _ = trained(tmp_path, "apply", str(data), "--model", "gbdt", "--cv-transfer", "apply")
    final = report["solver_trace"]  # the final fit: the folds' rounds, eta and shares, not the defaults 0.1 and 1
    assert (final["rounds"], final["eta"], final["rounds_rule"]["rule"]) == (300, 0.05, "all rounds")
    assert (final["subsample"], final["colsample"]) == (0.8, 0.8)
    report, summary = trained(tmp_path, "prev", str(data), "--model", "gbdt", "--param", "stop-min-positives=0")
    assert [fold["rounds_rule"]["rule"] for fold in report["solver_trace"]["fold_traces"]] == ["early stopping"] * 5
    assert "trees: early stopping in 5 of 5 fits: 5 positives held out" in summary


def test_same_seed_same_trees_on_the_fixed_schedule(tmp_path):
    data = tmp_path / "d.parquet"
    frame_with(40, 800).to_parquet(data)
    boosters = []
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):  # the trees draw rows and features: by the seed
        trained(tmp_path, name, str(data), "--model", "gbdt", "--cv", "0", "--seed", seed)
        with safe_open(str(tmp_path / f"{name}.dmo.safetensors"), framework="numpy") as handle:
            boosters.append(handle.get_tensor("booster"))
    assert boosters[0].shape == boosters[1].shape and (boosters[0] == boosters[1]).all()
    assert boosters[0].shape != boosters[2].shape or (boosters[0] != boosters[2]).any()


def generated_draw(seed: int, positives: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A non-linear set with known structure: `positives` positives among 25x as many negatives to train on, and a
    large test set from the same law."""

    def rows(n: int, rng: np.random.Generator) -> pd.DataFrame:
        X = rng.normal(size=(n, 8)).astype(np.float32)
        score = X[:, 0] * X[:, 1] + np.abs(X[:, 2]) + 0.5 * X[:, 3]
        frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(8)])
        frame["label"] = (score + 0.7 * rng.normal(size=n) > 2.3).astype(np.int64)
        return frame

    rng = np.random.default_rng(seed)
    pool = rows(40_000, rng)
    pos, neg = pool[pool.label == 1], pool[pool.label == 0]
    train = pd.concat([pos.iloc[:positives], neg.iloc[: 25 * positives]]).sample(frac=1, random_state=seed)
    return train, rows(20_000, rng)


@pytest.mark.slow
def test_the_rule_is_not_worse_than_early_stopping_on_few_positives_over_draws():
    """Six draws of 40 positives: test F1 at the out-of-fold threshold, the rule against stop-min-positives=0 (the
    early stopping it replaces). The bench (bench/gbdt_small.py) measures the size of the gain; here it must at
    least not lose on average, and win on most draws."""
    from dmocli import TrainOptions, train

    gains = []
    for seed in range(6):
        data, test = generated_draw(seed)
        f1 = []
        for params in ({}, {"stop-min-positives": "0"}):
            opts = TrainOptions(problem="ofbs", model="gbdt", seed=seed, device="cpu")
            opts.params = params
            model, _ = train(data, opts)
            logits, _ = model.logits(pa.Table.from_pandas(test, preserve_index=False))
            decided, y = model.decide(logits), test.label.to_numpy()
            tp = int((decided & (y == 1)).sum())
            f1.append(2 * tp / (decided.sum() + (y == 1).sum()))
        gains.append(f1[0] - f1[1])
    assert np.mean(gains) >= 0, gains
    assert sum(gain >= 0 for gain in gains) >= 4, gains


def test_the_trees_are_xgboost_with_scale_pos_weight_once_the_weight_scale_is_matched():
    """Independent check against XGBoost used directly (bench/gbdt_small.py's `xgb_fixed_oof`): dmo's balanced
    weights are scale_pos_weight's (negatives 1, positives neg/pos) times s = n / (2 neg), the same fit as
    scale_pos_weight with reg-lambda and min-child-weight times s; and dmo's histogram bins follow the rows, not
    the class weights, as scale_pos_weight's do (1,040 rows: more than max-bin's 256 values per feature, so a
    class-weighted sketch would cut elsewhere). With the scale matched, on the fixed schedule, dmo's trees give
    XGBClassifier(300 rounds, eta 0.05, depth 6, 0.8 of the rows and features per tree, scale_pos_weight)'s margins
    at the same seed (the rows each tree draws do not depend on their weights); at the defaults the regularization
    is 1/s (about twice) stronger, so they differ."""
    import xgboost as xgb

    from dmocli import TrainOptions, train

    data, test = generated_draw(3)
    y = data.label.to_numpy()
    scale = float(len(y) / (2 * (y == 0).sum()))
    direct = xgb.XGBClassifier(n_estimators=300, learning_rate=0.05, max_depth=6, tree_method="hist", n_jobs=1,
                               subsample=0.8, colsample_bytree=0.8, random_state=0,
                               scale_pos_weight=(y == 0).sum() / (y == 1).sum())  # fmt: skip
    direct.fit(data.drop(columns="label").to_numpy(np.float32), y)
    expected = direct.predict(test.drop(columns="label").to_numpy(np.float32), output_margin=True)
    table = pa.Table.from_pandas(test, preserve_index=False)
    margins = {}
    for name, params in (("matched", {"reg-lambda": repr(scale), "min-child-weight": repr(scale)}), ("default", {})):
        opts = TrainOptions(problem="ofbs", model="gbdt", seed=0, device="cpu", cv=0)  # 40 positives: fixed schedule
        opts.params = params
        with xgb.config_context(nthread=1):  # one thread: small trees, a busy machine
            model, report = train(pa.Table.from_pandas(data, preserve_index=False), opts)
        assert report["solver_trace"]["rounds_rule"]["rule"] == "fixed"
        margins[name], _ = model.logits(table)
    assert np.abs(margins["matched"] - expected).max() < 1e-4
    assert np.abs(margins["default"] - expected).max() > 0.05
