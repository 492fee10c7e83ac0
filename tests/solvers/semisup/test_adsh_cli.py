"""`dmo train --solver adsh|fixmatch` end to end through the real entry point, on small generated files."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import run_dmo

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.use.evaluate import evaluate


@pytest.fixture(autouse=True)
def this_checkout_one_thread(monkeypatch):
    """Run the `dmo` installed next to this interpreter (this checkout), with one torch thread (fast on a small
    machine)."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def partly_labeled(seed: int = 0, counts=(150, 50, 20), d: int = 4) -> tuple[pd.DataFrame, np.ndarray]:
    """String classes 'c' > 'b' > 'a' by size (the majority class is not the first), 80% of labels missing."""
    rng = np.random.default_rng(seed)
    names = np.array(["c", "b", "a"])
    truth = np.repeat(names, counts)
    centres = {n: rng.normal(scale=2.5, size=d) for n in names}
    X = np.stack([centres[t] for t in truth]) + rng.normal(size=(truth.size, d))
    frame = pd.DataFrame(X.astype(np.float32), columns=[f"f{i}" for i in range(d)])
    labeled = rng.random(truth.size) < 0.2
    labeled[[0, counts[0], counts[0] + counts[1]]] = True
    frame["label"] = pd.Series(np.where(labeled, truth, None), dtype=object)
    return frame, truth


FAST = ["--param", "epochs=3", "--param", "steps-per-epoch=10", "--param", "fallback=false"]
FAST_PARAMS = {"epochs": "3", "steps-per-epoch": "10", "fallback": "false"}


def test_adsh_trains_reports_and_saves_a_usable_model(tmp_path):
    frame, truth = partly_labeled()
    data, truth_path = tmp_path / "train.parquet", tmp_path / "truth.parquet"
    frame.to_parquet(data)
    pd.DataFrame({"label": truth[frame["label"].isna().to_numpy()]}).to_parquet(truth_path)  # unlabeled rows only
    model, report = tmp_path / "m.safetensors", tmp_path / "r.json"
    run_dmo(
        "train",
        data,
        "--solver",
        "adsh",
        "--model",
        "mlp",
        "--width",
        "16",
        "--unlabeled-truth",
        truth_path,
        *FAST,
        "-o",
        model,
        "--report",
        report,
        check=True,
    )
    r = json.loads(report.read_text())
    trace = r["solver_trace"]
    assert r["problem"] == "multiclass" and r["splits"]["train"]["classes"] == ["a", "b", "c"]
    assert trace["majority_class"] == 2  # 'c': most labeled rows, last in sorted order
    assert trace["n_unlabeled"] == int(frame["label"].isna().sum())
    assert len(trace["thresholds"]) == 4 and all(len(t) == 3 for t in trace["thresholds"])
    assert len(trace["pseudo_labels"]) == 3 and len(trace["pseudo_label_quality"]) == 3
    assert trace["pseudo_label_quality"][-1]["true"] == [int(np.sum(truth[frame["label"].isna()] == c)) for c in "abc"]
    test = tmp_path / "test.parquet"
    labeled = frame.dropna(subset=["label"])
    labeled.to_parquet(test)
    ev = evaluate(model, test)
    assert ev["solver"] == "adsh" and ev["splits"]["data"]["n"] == len(labeled)


def test_unlabeled_truth_with_wrong_row_count_is_refused(tmp_path):
    frame, truth = partly_labeled()
    data, bad = tmp_path / "train.parquet", tmp_path / "truth.csv"
    frame.to_parquet(data)
    pd.DataFrame({"label": truth[:7]}).to_csv(bad, index=False)
    with pytest.raises(DmoError, match=r"--unlabeled-truth .* has 7 rows; give one row per unlabeled row"):
        train(
            data,
            TrainOptions(solver="adsh", params=dict(FAST_PARAMS), unlabeled_truth=bad),
            output=tmp_path / "m.safetensors",
        )
    assert not (tmp_path / "m.safetensors").exists()


def test_unlabeled_rows_are_refused_by_wce_and_required_by_fixmatch(tmp_path):
    frame, truth = partly_labeled()
    data, full = tmp_path / "train.parquet", tmp_path / "full.parquet"
    frame.to_parquet(data)
    frame.assign(label=truth).to_parquet(full)
    with pytest.raises(DmoError, match="--drop-unlabeled"):
        train(data, TrainOptions(solver="wce"), output=tmp_path / "m.safetensors")
    with pytest.raises(DmoError, match="needs unlabeled rows"):
        train(full, TrainOptions(solver="fixmatch", params=dict(FAST_PARAMS)), output=tmp_path / "m.safetensors")
    with pytest.raises(DmoError, match="--unlabeled-truth applies"):
        train(full, TrainOptions(solver="wce", unlabeled_truth=full), output=tmp_path / "m.safetensors")
    assert not (tmp_path / "m.safetensors").exists()


def test_csv_with_empty_string_labels_and_the_original_as_truth(tmp_path):
    """An empty label cell in a CSV is an unlabeled row (not a class ''); the truth file may be the full original."""
    frame, truth = partly_labeled()
    data, full = tmp_path / "train.csv", tmp_path / "full.csv"
    frame.to_csv(data, index=False)
    assert ",\n" in data.read_text()  # missing labels are written as empty cells
    frame.assign(label=truth).to_csv(full, index=False)
    _, report = train(
        data,
        TrainOptions(solver="fixmatch", params=dict(FAST_PARAMS), unlabeled_truth=full),
        output=tmp_path / "m.safetensors",
    )
    assert report["splits"]["train"]["classes"] == ["a", "b", "c"]
    quality = report["solver_trace"]["pseudo_label_quality"][-1]
    assert quality["true"] == [int(np.sum(truth[frame["label"].isna()] == c)) for c in "abc"]


def test_view_columns_replace_noise_views_and_binary_problems_get_a_threshold(tmp_path):
    rng = np.random.default_rng(2)
    n, d = 240, 5
    y = (rng.random(n) < 0.25).astype(np.int64)
    X = rng.normal(size=(n, d)) + 1.5 * y[:, None]
    labeled = rng.random(n) < 0.3
    frame = pd.DataFrame(
        {
            "features": list(X.astype(np.float32)),
            "features_weak": list((X + 0.05 * rng.normal(size=X.shape)).astype(np.float32)),
            "features_strong": list((X + 0.5 * rng.normal(size=X.shape)).astype(np.float32)),
            "label": pd.array(np.where(labeled, y, 0), dtype="Int64"),
        }
    )
    frame.loc[~labeled, "label"] = pd.NA
    data = tmp_path / "emb.parquet"
    frame.to_parquet(data)
    _, r = train(
        data,
        TrainOptions(solver="fixmatch", problem="ofbs", params=dict(FAST_PARAMS)),
        output=tmp_path / "m.safetensors",
    )
    assert r["solver_trace"]["views"] == {"weak": "column", "strong": "column"}
    assert r["threshold"] is not None and r["n_features"] == d
    assert len(r["solver_trace"]["thresholds"][0]) == 2
    _, r = train(
        data,
        TrainOptions(solver="fixmatch", problem="ofbs", params={**FAST_PARAMS, "views": "noise"}),
        output=tmp_path / "m.safetensors",
    )
    assert r["solver_trace"]["views"] == {"weak": "noise", "strong": "noise"}


def test_view_columns_as_dmo_extract_names_them(tmp_path):
    """`dmo extract --views weak:1,strong:2` writes features_weak_0 / features_strong_0, _1: the first is used."""
    rng = np.random.default_rng(4)
    n, d = 200, 4
    y = (rng.random(n) < 0.3).astype(np.int64)
    X = (rng.normal(size=(n, d)) + 1.5 * y[:, None]).astype(np.float32)
    frame = pd.DataFrame(
        {
            "features": list(X),
            "features_weak_0": list(X),
            "features_strong_0": list(X * 0.5),
            "features_strong_1": list(X * 0.7),
            "label": pd.array(np.where(rng.random(n) < 0.4, y, -1), dtype="Int64"),
        }
    )
    frame.loc[frame["label"] == -1, "label"] = pd.NA
    data = tmp_path / "extracted.parquet"
    frame.to_parquet(data)
    _, r = train(
        data,
        TrainOptions(solver="fixmatch", problem="ofbs", params=dict(FAST_PARAMS)),
        output=tmp_path / "m.safetensors",
    )
    assert r["solver_trace"]["views"] == {"weak": "column", "strong": "column"}
