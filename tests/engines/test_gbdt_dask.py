"""`dmo train --model gbdt --engine dask`: XGBoost's Dask training on a real 2-worker local cluster, against the
same trees trained in one process; and the Dask engine of evaluate/predict on a gbdt model file."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import run_dmo
from test_gbdt import schema_problems

pytest.importorskip("xgboost")
pytest.importorskip("distributed")


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = ((X[:, 0] ** 2 + X[:, 1] > 1.5) ^ (rng.random(n) < 0.05)).astype(np.int64)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(5)])
    frame.loc[rng.random(n) < 0.05, "x4"] = np.nan
    return frame.assign(kind=rng.choice(["a", "b", "c"], n), label=y)


def test_dask_training_matches_one_process_and_scores_on_the_cluster(dask_processes, tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(4):
        _frame(2_000, seed=i).to_parquet(parts / f"part-{i}.parquet")
    test = tmp_path / "test.parquet"
    _frame(3_000, seed=99).to_parquet(test)
    on_dask, local = tmp_path / "dask.safetensors", tmp_path / "local.safetensors"
    report = tmp_path / "dask.json"
    run_dmo("train", parts, "--model", "gbdt", "--engine", "dask", "--scheduler", dask_processes, "--problem", "fpor",
            "--target", "0.8", "-o", on_dask, "--report", report, check=True)  # fmt: skip
    run_dmo("train", parts, "--model", "gbdt", "--problem", "fpor", "--target", "0.8", "--val-frac", "0.1",
            "--cv", "0", "-o", local, check=True)  # fmt: skip
    trained = json.loads(report.read_text())
    assert schema_problems(trained) == []
    assert trained["engine"]["workers"] == 2 and trained["solver_trace"]["engine"] == "dask"
    assert trained["splits"]["train"]["n"] + trained["splits"]["val"]["n"] == 8_000
    scores = {}
    for name, model in (("dask", on_dask), ("local", local)):
        out = tmp_path / f"{name}-eval.json"
        run_dmo("evaluate", model, test, "--report", out, check=True)
        scores[name] = json.loads(out.read_text())["splits"]["data"]
    assert abs(scores["dask"]["average_precision"] - scores["local"]["average_precision"]) < 0.02
    assert scores["dask"]["precision"] > 0.75 and scores["local"]["precision"] > 0.75
    predicted = tmp_path / "pred"
    run_dmo("predict", on_dask, test, "-o", predicted, "--engine", "dask", "--scheduler", dask_processes, check=True)
    local_pred = tmp_path / "pred.parquet"
    run_dmo("predict", on_dask, test, "-o", local_pred, check=True)
    assert np.array_equal(pq.read_table(predicted).column("decision"), pq.read_table(local_pred).column("decision"))


def test_what_dask_training_does_not_cover_is_refused_in_one_message(tmp_path):
    data = tmp_path / "d.parquet"
    _frame(200, seed=0).to_parquet(data)
    proc = run_dmo(
        "train", data, "--engine", "dask", "--cv", "5", "--val-frac", "0.2", "-o", tmp_path / "m.safetensors"
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert "trains --model gbdt --solver wce" in line and "drop --cv" in line and "drop --val-frac" in line


def test_multiclass_trees_on_dask_with_a_validation_file(dask_processes, tmp_path):
    """K-class margins (n, K) come back from the workers as the pipelines' logits; --val judges early stopping."""
    rng = np.random.default_rng(7)

    def three_classes(n: int) -> pd.DataFrame:
        X = rng.normal(size=(n, 3))
        label = np.where(X[:, 0] > 0.5, "a", np.where(X[:, 1] > 0.8, "b", "c"))
        return pd.DataFrame(X, columns=["p", "q", "r"]).assign(kind=rng.choice(["u", "v"], n), label=label)

    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(3):
        three_classes(1_000).to_parquet(parts / f"part-{i}.parquet")
    val, model, report = tmp_path / "val.parquet", tmp_path / "m.safetensors", tmp_path / "r.json"
    three_classes(600).to_parquet(val)
    run_dmo("train", parts, "--model", "gbdt", "--engine", "dask", "--scheduler", dask_processes, "--val", val,
            "-o", model, "--report", report, check=True)  # fmt: skip
    trained = json.loads(report.read_text())
    assert schema_problems(trained) == [] and trained["solver_trace"]["monitored_split"] == "val"
    assert trained["splits"]["val"]["n"] == 600 and trained["splits"]["val"]["balanced_accuracy"] > 0.9
