"""End to end through the real `dmo` entry point on real files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from conftest import SAMPLE, make_binary_frame, run_dmo
from sklearn.metrics import precision_score, recall_score


def test_help_lists_commands_and_options():
    top = run_dmo("--help", check=True).stdout
    for command in ("train", "threshold", "evaluate", "predict", "solvers"):
        assert command in top
    train_help = run_dmo("train", "--help", check=True).stdout
    for option in ("--problem", "--target", "--solver", "--val", "--confidence", "--positive", "--seed"):
        assert option in train_help
    unwrapped = " ".join(train_help.replace("│", " ").split())  # rich wraps help text in a box
    assert "'dmocli[gbdt]'" in unwrapped and "dmocli[dask,gbdt]" in unwrapped  # install commands, not markup


def test_every_registered_solver_loads_under_its_own_name():
    """Solvers are imported lazily from a name -> "module:class" table; a typo there would only surface
    when a user picks that solver. `dmo solvers` lists them all."""
    from dmocli.solvers import available, solver_class

    assert {solver_class(name).name for name in available()} == set(available())
    listing = run_dmo("solvers", check=True).stdout
    assert all(name in listing for name in available())


def test_train_evaluate_predict_threshold_on_sample_data(tmp_path: Path):
    model = tmp_path / "pb.safetensors"
    report = tmp_path / "train.json"
    run_dmo(
        "train",
        "--problem",
        "frop",
        "--target",
        "0.8",
        SAMPLE / "train.parquet",
        "--val",
        SAMPLE / "val.parquet",
        "-o",
        model,
        "--report",
        report,
        "--device",
        "cpu",
        check=True,
    )  # CPU: evaluate's figures are exact below
    train_report = json.loads(report.read_text())
    val = train_report["splits"]["val"]
    assert val["recall"] >= 0.8 and val["feasible"] is True
    assert train_report["operating_point"]["split"] == "val"

    proc = run_dmo("evaluate", model, SAMPLE / "test.parquet", "--json", "--plot", tmp_path / "pr.png", check=True)
    ev = json.loads(proc.stdout)["splits"]["data"]
    for key in (
        "n",
        "n_pos",
        "tp",
        "fp",
        "tn",
        "fn",
        "threshold",
        "precision",
        "recall",
        "f_beta",
        "f1",
        "feasible",
        "average_precision",
        "roc_auc",
    ):
        assert key in ev
    assert (tmp_path / "pr.png").read_bytes()[:4] == b"\x89PNG"
    # the report describes the saved model exactly: evaluate and an exact re-fit on val find the same figures
    on_val = json.loads(run_dmo("evaluate", model, SAMPLE / "val.parquet", "--json", check=True).stdout)["splits"][
        "data"
    ]
    assert {k: on_val[k] for k in val if k != "feasible"} == {k: val[k] for k in val if k != "feasible"}
    same = run_dmo(
        "threshold",
        model,
        SAMPLE / "val.parquet",
        "--problem",
        "frop",
        "--target",
        "0.8",
        "-o",
        tmp_path / "same.safetensors",
        "--json",
        check=True,
    )
    assert json.loads(same.stdout)["threshold"] == train_report["threshold"]

    preds = tmp_path / "pred.parquet"
    run_dmo("predict", model, SAMPLE / "test.parquet", "-o", preds, check=True)
    table = pq.read_table(preds).to_pandas()
    truth = pd.read_parquet(SAMPLE / "test.parquet")["label"].to_numpy()
    assert len(table) == len(truth)
    # evaluate's counts agree with an independent computation from predict's decisions
    assert np.isclose(ev["precision"], precision_score(truth, table["decision"]))
    assert np.isclose(ev["recall"], recall_score(truth, table["decision"]))

    refit = tmp_path / "refit.safetensors"
    proc = run_dmo(
        "threshold",
        model,
        SAMPLE / "test.parquet",
        "--problem",
        "fpor",
        "--target",
        "0.7",
        "-o",
        refit,
        "--json",
        check=True,
    )
    refit_report = json.loads(proc.stdout)
    assert refit_report["splits"]["data"]["precision"] >= 0.7
    again = json.loads(run_dmo("evaluate", refit, SAMPLE / "test.parquet", "--json", check=True).stdout)
    assert again["problem"] == "fpor" and np.isclose(
        again["splits"]["data"]["precision"], refit_report["splits"]["data"]["precision"]
    )


def test_same_seed_same_model_bytes(tmp_path: Path, binary_parquet: Path):
    a, b, c = (tmp_path / f"{x}.safetensors" for x in "abc")
    args = ["train", binary_parquet, "--problem", "ofbs", "--model", "mlp", "--width", "16", "--param", "max_epochs=40"]
    run_dmo(*args, "--seed", "3", "-o", a, check=True)
    run_dmo(*args, "--seed", "3", "-o", b, check=True)
    run_dmo(*args, "--seed", "4", "-o", c, check=True)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_csv_input_categorical_column_and_id_passthrough(tmp_path: Path):
    frame = make_binary_frame(n=400, seed=5)
    frame["shop"] = np.where(frame["label"] == 1, "north", "south")
    frame.loc[::7, "shop"] = "east"
    frame["row_id"] = [f"r{i}" for i in range(len(frame))]
    csv = tmp_path / "data.csv"
    frame.to_csv(csv, index=False)
    model = tmp_path / "m.safetensors"
    run_dmo("train", csv, "--problem", "fpor", "--target", "0.6", "--drop", "row_id", "-o", model, check=True)
    new = frame.head(20).copy()
    new.loc[:4, "shop"] = "west"  # unseen level
    new.loc[5:7, "shop"] = ""  # an empty CSV cell: missing
    new_csv = tmp_path / "new.csv"
    new.to_csv(new_csv, index=False)
    out = tmp_path / "p.parquet"
    summary = json.loads(
        run_dmo("predict", model, new_csv, "-o", out, "--id-col", "row_id", "--json", check=True).stdout
    )
    assert summary["unseen_levels"] == {"shop": 5}
    assert summary["missing_levels"] == {"shop": 3}
    assert pq.read_table(out).column("row_id").to_pylist() == new["row_id"].tolist()


def test_multiclass_wce_and_positive_one_vs_rest(tmp_path: Path):
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [3, 0], [0, 3]])
    y = rng.choice(3, size=600, p=[0.6, 0.3, 0.1])
    frame = pd.DataFrame(rng.normal(size=(600, 2)) + centers[y], columns=["a", "b"])
    frame["label"] = np.array(["cat", "dog", "eel"])[y]
    data = tmp_path / "multi.parquet"
    frame.to_parquet(data)
    model = tmp_path / "mc.safetensors"
    report = json.loads(run_dmo("train", data, "-o", model, "--json", check=True).stdout)
    assert report["problem"] == "multiclass"
    assert report["splits"]["train"]["balanced_accuracy"] > 0.8
    preds = tmp_path / "p.parquet"
    run_dmo("predict", model, data, "-o", preds, check=True)
    assert set(pq.read_table(preds).column("predicted").to_pylist()) <= {"cat", "dog", "eel"}
    ovr = json.loads(
        run_dmo(
            "train",
            data,
            "--problem",
            "ofbs",
            "--positive",
            "eel",
            "-o",
            tmp_path / "o.safetensors",
            "--json",
            check=True,
        ).stdout
    )
    assert ovr["splits"]["train"]["n_pos"] == int((y == 2).sum())


def test_impute_median_and_confidence_option(tmp_path: Path):
    frame = make_binary_frame(n=800, seed=2)
    frame.loc[::50, "f0"] = np.nan
    data = tmp_path / "nan.parquet"
    frame.to_parquet(data)
    plain = json.loads(
        run_dmo(
            "train",
            data,
            "--problem",
            "fpor",
            "--target",
            "0.6",
            "--impute",
            "median",
            "-o",
            tmp_path / "a.safetensors",
            "--json",
            check=True,
        ).stdout
    )
    sure = json.loads(
        run_dmo(
            "train",
            data,
            "--problem",
            "fpor",
            "--target",
            "0.6",
            "--impute",
            "median",
            "--confidence",
            "0.95",
            "--new-rows",
            "inf",  # the population value: 800 rows are too few to promise a new sample's measured precision
            "-o",
            tmp_path / "b.safetensors",
            "--json",
            check=True,
        ).stdout
    )
    assert sure["operating_point"]["constraint_bound"] >= 0.6
    assert sure["splits"]["train"]["precision"] >= plain["splits"]["train"]["precision"]
