"""`--model gbdt`: gradient-boosted trees (XGBoost) trained by wce and ero, through every command unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import run_dmo
from safetensors import safe_open

EVIDENCE = ["heldout.negatives", "heldout.positives", "heldout.scores"]  # the held-out curve (heldout.py)

xgb = pytest.importorskip("xgboost")  # the test extra installs it (dmocli[gbdt]); a bare clone says so here


def schema_problems(report: dict) -> list[str]:
    """What the shipped report schema finds wrong with a report (docs/report-schema.md)."""
    from jsonschema import Draft202012Validator

    import dmocli

    return [error.message[:200] for error in Draft202012Validator(dmocli.report_schema()).iter_errors(report)]


def make_tree_frame(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    """A label no linear model can draw (a ring and an interaction), a categorical column that matters, and
    missing values in a feature: what trees are for."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    colour = rng.choice(["red", "green", "blue"], n)
    logit = 2.5 * (X[:, 0] ** 2 + X[:, 1] ** 2 > 2.5) + 2.0 * (X[:, 2] * X[:, 3] > 0.5) + (colour == "red") - 2.5
    y = (rng.random(n) < 1 / (1 + np.exp(-3 * logit))).astype(np.int64)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(4)])
    frame.loc[rng.random(n) < 0.1, "x3"] = np.nan
    frame["colour"] = colour
    frame["label"] = y
    return frame


@pytest.fixture(scope="module")
def tree_data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("trees")
    frame = make_tree_frame()
    paths = {"train": root / "train.parquet", "val": root / "val.parquet", "test": root / "test.parquet"}
    frame.iloc[:900].to_parquet(paths["train"])
    frame.iloc[900:1200].to_parquet(paths["val"])
    frame.iloc[1200:].to_parquet(paths["test"])
    return paths


def average_precision(path: Path, data: Path, tmp_path: Path) -> float:
    report = tmp_path / f"{path.stem}-eval.json"
    run_dmo("evaluate", path, data, "--report", report, check=True)
    return json.loads(report.read_text())["splits"]["data"]["average_precision"]


def test_gbdt_wce_trains_with_missing_values_and_beats_the_linear_model_where_trees_should(tree_data, tmp_path):
    trees, linear = tmp_path / "trees.safetensors", tmp_path / "linear.safetensors"
    run_dmo("train", tree_data["train"], "--model", "gbdt", "--problem", "ofbs", "--val", tree_data["val"], "-o", trees,
            check=True)  # fmt: skip
    refused = run_dmo("train", tree_data["train"], "--problem", "ofbs", "--val", tree_data["val"], "-o", linear)
    assert refused.returncode == 2 and "missing" in refused.stderr and "--impute median" in refused.stderr
    run_dmo("train", tree_data["train"], "--problem", "ofbs", "--val", tree_data["val"], "--impute", "median",
            "-o", linear, check=True)  # fmt: skip
    assert average_precision(trees, tree_data["test"], tmp_path) > average_precision(
        linear, tree_data["test"], tmp_path
    )


def test_model_file_holds_the_booster_as_bytes_and_predict_streams_the_same_scores(tree_data, tmp_path):
    model = tmp_path / "m.safetensors"
    run_dmo("train", tree_data["train"], "--model", "gbdt", "--problem", "frop", "--target", "0.7", "--val",
            tree_data["val"], "-o", model, check=True)  # fmt: skip
    with safe_open(str(model), framework="numpy") as handle:
        assert sorted(handle.keys()) == ["booster", *EVIDENCE, "training_rows.sketch"]  # trees, held-out curve
        raw = handle.get_tensor("booster")
        meta = json.loads(handle.metadata()["dmocli"])
    assert raw.dtype == np.uint8 and meta["architecture"]["kind"] == "gbdt"
    booster = xgb.Booster(model_file=bytearray(raw.tobytes()))  # XGBoost's own UBJSON: no pickle anywhere
    # the categorical column is one feature of level indices the trees split on by level sets, not 3 one-hot columns
    assert meta["preprocessing"]["categorical_codes"] and booster.feature_types == ["q"] * 4 + ["c"]
    info = json.loads(run_dmo("info", model, "--json", check=True).stdout)
    assert schema_problems(info) == [] and info["n_trees"] == booster.num_boosted_rounds() > 0
    assert "trees" in run_dmo("info", model, check=True).stdout
    out = tmp_path / "pred.parquet"
    run_dmo("predict", model, tree_data["test"], "-o", out, check=True)
    predicted = pq.read_table(out).to_pandas()
    from dmocli import load_model

    loaded = load_model(model)
    features, _ = loaded.preprocessor.transform(pq.read_table(tree_data["test"]))
    margins = booster.inplace_predict(np.ascontiguousarray(features), predict_type="margin")
    assert np.array_equal(predicted["decision"].to_numpy(), (margins >= loaded.threshold).astype(np.int8))
    assert predicted["probability"].between(0, 1).all()


def test_same_seed_same_trees_and_cv_sets_the_rounds_without_val(tree_data, tmp_path):
    first, second = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    for path in (first, second):
        run_dmo("train", tree_data["train"], "--model", "gbdt", "--problem", "ofbs", "--seed", "3", "-o", path,
                "--report", path.with_suffix(".json"), "--cv-transfer", "apply", check=True)  # fmt: skip
    with safe_open(str(first), framework="numpy") as a, safe_open(str(second), framework="numpy") as b:
        assert np.array_equal(a.get_tensor("booster"), b.get_tensor("booster"))
    ensembles = [tmp_path / "e1.safetensors", tmp_path / "e2.safetensors"]  # the default keeps the 5 fold models
    for path in ensembles:
        run_dmo("train", tree_data["train"], "--model", "gbdt", "--problem", "ofbs", "--seed", "3", "-o", path,
                check=True)  # fmt: skip
    with safe_open(str(ensembles[0]), framework="numpy") as a, safe_open(str(ensembles[1]), framework="numpy") as b:
        keys = [*EVIDENCE, "member_map"] + [f"members.{i}.booster" for i in range(5)]  # the members' map too
        keys += ["training_rows.sketch"]
        assert sorted(a.keys()) == keys == sorted(b.keys())
        assert all(np.array_equal(a.get_tensor(key), b.get_tensor(key)) for key in a.keys())
    report = json.loads(first.with_suffix(".json").read_text())
    assert schema_problems(report) == []
    # each fold early-stops on its own held-out tenth; the final trees take the folds' median round count
    assert report["cv"]["folds"] == 5 and report["params"]["early_stopping"] == 0
    assert report["solver_trace"]["rounds"] == report["params"]["rounds"] < 1000


def test_multiclass_gbdt_and_the_estimator(tmp_path):
    from dmocli import DmoClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0.3, "a", np.where(X[:, 2] > 0.8, "b", "c"))
    frame = pd.DataFrame(X, columns=["p", "q", "r"]).assign(label=y)
    data, model = tmp_path / "three.csv", tmp_path / "three.safetensors"
    frame.to_csv(data, index=False)
    run_dmo("train", data, "--model", "gbdt", "--val-frac", "0.25", "-o", model, check=True)
    report = tmp_path / "eval.json"
    run_dmo("evaluate", model, data, "--report", report, check=True)
    assert json.loads(report.read_text())["splits"]["data"]["balanced_accuracy"] > 0.8
    clf = DmoClassifier(model="gbdt", problem="ofbs", seed=0).fit(X, (y == "a").astype(int))
    assert clf.predict_proba(X).shape == (600, 2) and ((clf.predict(X) == 1) == (y == "a")).mean() > 0.85


def test_ero_round_gradients_are_the_penalty_functions_derivative():
    """The per-row gradient a boosting round fits is d(n F)/df of penalty_value (solvers/ero/penalty.py), checked
    by central differences of that function, and the curvature is positive."""
    import torch

    from dmocli.operating_point.problems import Problem
    from dmocli.solvers.ero.penalty import penalty_value
    from dmocli.solvers.ero.penalty_boosting import round_gradients
    from dmocli.solvers.relaxation import soft_counts

    torch.manual_seed(0)
    n = 40
    logits = torch.randn(n, dtype=torch.float64)
    s = torch.rand(n, dtype=torch.float64)
    positive = torch.rand(n) < 0.3
    row_penalty, row_reg = torch.rand(n, dtype=torch.float64) * 50, torch.ones(n, dtype=torch.float64)
    problem = Problem("fpor", 0.8)
    n_pos = int(positive.sum())
    grad, hess = round_gradients(
        logits, s, positive=positive, problem=problem, n_pos=n_pos, row_penalty=row_penalty, row_reg=row_reg, mu0=100.0
    )

    def n_f(values: torch.Tensor) -> float:
        loss, _ = penalty_value(
            values,
            s,
            positive_rows=positive,
            totals=soft_counts(s, positive),
            scale=1.0,
            problem=problem,
            n_pos=n_pos,
            row_penalty=row_penalty,
            row_reg=row_reg,
            mu0=100.0,
        )
        return float(loss) * n

    eps = 1e-6
    for i in range(n):
        up, down = logits.clone(), logits.clone()
        up[i] += eps
        down[i] -= eps
        assert grad[i] == pytest.approx((n_f(up) - n_f(down)) / (2 * eps), rel=1e-3, abs=1e-4)
    assert (hess > 0).all()


def test_ero_on_trees_drives_the_row_violations_down_and_keeps_the_target(tree_data, tmp_path):
    """From a deliberately small warm start (20 stumps of depth 2: the training rows are not yet separated, so the
    penalty has rows to work on), the outer iterations shrink the violations of the one-sided identities."""
    report = tmp_path / "ero.json"
    run_dmo("train", tree_data["train"], "--model", "gbdt", "--solver", "ero", "--problem", "fpor", "--target",
            "0.7", "--val", tree_data["val"], "--param", "outer-patience=0", "--param", "max-depth=2", "--param",
            "rounds=20", "-o", tmp_path / "ero.safetensors",
            "--report", report, check=True)  # fmt: skip
    result = json.loads(report.read_text())
    history = result["solver_trace"]["history"]
    assert len(history) == 5 and history[-1]["n_violating"] < history[0]["n_violating"]
    assert history[-1]["max_violation"] < history[0]["max_violation"]
    assert result["splits"]["val"]["feasible"] and result["solver_trace"]["selected_rounds"] >= 1


def test_tree_and_network_parameters_are_refused_for_the_other_family_in_one_message(tree_data, tmp_path):
    out = tmp_path / "x.safetensors"
    wrong = run_dmo("train", tree_data["train"], "--param", "rounds=10", "--param", "eta=0.3", "-o", out)
    assert wrong.returncode == 2 and "--param rounds, eta applies to --model gbdt" in wrong.stderr
    wrong = run_dmo("train", tree_data["train"], "--model", "gbdt", "--param", "lr=0.1", "-o", out)
    assert wrong.returncode == 2 and "--param lr applies to the torch models" in wrong.stderr
    wrong = run_dmo("train", tree_data["train"], "--model", "gbdt", "--solver", "fofo", "-o", out)
    assert wrong.returncode == 2 and "solver fofo does not train --model gbdt (solvers that do: ero, wce)" in (
        wrong.stderr
    )
    assert not out.exists() and "Traceback" not in wrong.stderr


def test_without_xgboost_one_line_names_the_extra(tree_data, tmp_path):
    """A machine without the optional dependency: training and loading a gbdt model say what to install."""
    model = tmp_path / "m.safetensors"
    run_dmo("train", tree_data["train"], "--model", "gbdt", "--problem", "ofbs", "--cv", "0", "-o", model, check=True)
    shim = tmp_path / "shim" / "xgboost"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('xgboost is not installed here')\n")
    import os
    import subprocess
    import sys

    from conftest import dmo_command

    env = {**os.environ, "PYTHONPATH": str(shim.parent)}
    for args in (["train", tree_data["train"], "--model", "gbdt", "-o", tmp_path / "n.safetensors"],
                 ["predict", model, tree_data["test"], "-o", tmp_path / "p.csv"]):  # fmt: skip
        proc = subprocess.run([*dmo_command(), *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert 'pip install "dmocli[gbdt]"' in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sys.modules.get("xgboost") is not None  # this process still has the real one


def test_corrupt_booster_bytes_are_one_line_and_exit_2(tree_data, tmp_path):
    from safetensors.numpy import save_file

    model = tmp_path / "m.safetensors"
    run_dmo("train", tree_data["train"], "--model", "gbdt", "--problem", "ofbs", "--cv", "0", "-o", model, check=True)
    with safe_open(str(model), framework="numpy") as handle:
        metadata = handle.metadata()
        raw = handle.get_tensor("booster")
    broken = tmp_path / "broken.safetensors"
    save_file({"booster": raw[: len(raw) // 2].copy()}, str(broken), metadata=metadata)
    proc = run_dmo("predict", broken, tree_data["test"], "-o", tmp_path / "p.csv")
    assert proc.returncode == 2 and "corrupt" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "p.csv").exists()
