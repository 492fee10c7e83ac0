"""`dmo train --problem value --gain ...` end to end on generated transactions with amounts: the value section, the
search on the held-out rows against brute force, --cv with --val, --time-col, the re-target from the stored curve,
the model file's gain tensors (and files without them), and the refusals, each in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from jsonschema import Draft202012Validator
from safetensors.numpy import load_file, save_file

import dmocli
from dmocli.models.modelfile import load_model, read_metadata
from dmocli.operating_point.gain import GainMatrix, value_at_cuts

VALIDATOR = Draft202012Validator(dmocli.report_schema())
FRAUD = "tp=50,fp=-5,fn=-amount,tn=0.02*amount"


def transactions(n: int, seed: int, *, start: str = "2024-01-01") -> pd.DataFrame:
    """Payments whose fraud odds rise with two features and the amount; the amount is a feature and the loss."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    amount = rng.exponential(100, n).round(2)
    label = (rng.random(n) < 1 / (1 + np.exp(-(1.5 * x1 + x2 - 2.5 + 0.004 * amount)))).astype(int)
    seconds = np.sort(rng.choice(90 * 86_400, size=n, replace=False))
    created = (pd.Timestamp(start) + pd.to_timedelta(seconds, unit="s")).strftime("%Y-%m-%d %H:%M:%S")
    return pd.DataFrame({"created_at": created, "x1": x1, "x2": x2, "amount": amount, "label": label})


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("value")
    paths = {"train": root / "train.parquet", "val": root / "val.parquet", "root": root}
    transactions(700, 0).drop(columns="created_at").to_parquet(paths["train"])
    transactions(400, 1, start="2024-04-01").drop(columns="created_at").to_parquet(paths["val"])
    return paths


def report_of(dmo, *args: str | Path, code: int = 0) -> dict:
    status, out, err = dmo(*args, "--json")
    assert status == code, err
    report = json.loads(out)
    assert [error.message for error in VALIDATOR.iter_errors(report)] == []
    return report


def best_on_rows(logits: np.ndarray, labels: np.ndarray, amount: np.ndarray, gain: str = FRAUD) -> float:
    """The best total value of any cut of these rows' scores, by brute force over every one."""
    gains = GainMatrix.parse(gain).row_gains({"amount": amount}, labels.size)
    cuts = np.concatenate(([np.inf], np.unique(logits)))
    return max(float(gains.realized(labels, logits >= cut).sum()) for cut in cuts)


def test_the_threshold_is_the_best_value_on_the_val_rows_by_brute_force(dmo, files) -> None:
    model = files["root"] / "val.safetensors"
    report = report_of(
        dmo, "train", files["train"], "--val", files["val"], "--problem", "value", "--gain", FRAUD, "-o", model
    )
    value = report["value"]
    assert value["split"] == "val" and value["rows"] == 400 and value["gain"] == FRAUD
    table = pq.read_table(files["val"])
    logits, _ = load_model(model).logits(table)
    frame = table.to_pandas()
    best = best_on_rows(logits, frame["label"].to_numpy(), frame["amount"].to_numpy())
    assert value["at_threshold"]["total"] == pytest.approx(best, rel=1e-9)
    assert report["operating_point"]["objective"] == pytest.approx(best / 400, rel=1e-9)
    assert value["at_threshold"]["total"] >= value["at_default_cut"]["total"] - 1e-6  # the default is one cut
    assert value["over_flag_nothing"] == pytest.approx(best - value["flag_nothing"]["total"])
    low, high = value["at_threshold"]["per_row_interval"]
    assert low < value["at_threshold"]["per_row"] < high


def test_cv_with_val_pools_the_rows_and_the_stored_curve_retargets_to_the_bit(dmo, files) -> None:
    model, again, doubled = (files["root"] / f"{name}.safetensors" for name in ("cv", "again", "doubled"))
    args = ("--val", files["val"], "--cv", "3", "--problem", "value", "--gain", FRAUD)
    trained = report_of(dmo, "train", files["train"], *args, "-o", model)
    assert trained["value"]["split"] == "cv" and trained["value"]["rows"] == 1100  # --val pooled into the folds
    assert len(trained["cv"]["per_fold"]) == 3
    retargeted = report_of(dmo, "threshold", model, "-o", again)
    assert retargeted["threshold"] == trained["threshold"]  # the stored curve is the search's own input
    assert retargeted["value"]["at_threshold"] == trained["value"]["at_threshold"]
    costlier = "tp=50,fp=-5,fn=-3*amount,tn=0.02*amount"
    moved = report_of(dmo, "threshold", model, "--problem", "value", "--gain", costlier, "-o", doubled)
    assert moved["value"]["gain"] == costlier and moved["threshold"] <= trained["threshold"]  # misses cost more
    curve = load_model(doubled).heldout
    assert curve.gain.text == costlier
    assert moved["value"]["at_threshold"]["total"] == pytest.approx(value_at_cuts(curve).max(), rel=1e-12)


def test_time_col_fits_the_value_on_the_later_blocks(dmo, tmp_path: Path) -> None:
    data = tmp_path / "dated.parquet"
    transactions(900, 4).sample(frac=1, random_state=1).to_parquet(data)
    args = ("--time-col", "created_at", "--drop", "created_at", "--problem", "value", "--gain", FRAUD)
    report = report_of(dmo, "train", data, *args, "-o", tmp_path / "m.safetensors")
    assert report["value"]["split"] == "cv"
    assert report["value"]["rows"] == report["time_blocks"]["held_out"]["rows"]


def test_the_model_file_keeps_the_gain_sums_as_tensors_and_checks_them(dmo, files, tmp_path: Path) -> None:
    model = tmp_path / "m.safetensors"
    report_of(dmo, "train", files["train"], "--val", files["val"], "--problem", "value", "--gain", FRAUD, "-o", model)
    tensors = load_file(model)  # plain tensors: nothing to unpickle
    assert {f"heldout.gain_{name}" for name in ("pos", "neg", "pos_sq", "neg_sq")} <= set(tensors)
    assert tensors["heldout.gain_pos"].shape == (1, tensors["heldout.scores"].size)
    meta = read_metadata(model)
    assert meta["problem"] == "value"
    assert meta["info"]["heldout"]["gain"] == FRAUD and meta["info"]["heldout"]["gain_columns"] == ["amount"]
    frame = pd.read_parquet(files["val"])
    positives = frame["amount"][frame["label"] == 1].sum()
    assert tensors["heldout.gain_pos"].sum() == pytest.approx(positives)
    tampered = tmp_path / "tampered.safetensors"
    save_file(
        {**tensors, "heldout.gain_neg": tensors["heldout.gain_neg"].astype(np.float32)},
        tampered,
        {"dmocli": json.dumps(meta)},
    )
    status, _, err = dmo("info", tampered)
    assert status == 2 and "gain_neg is missing or not float64" in err and len(err.strip().splitlines()) == 1


def test_a_model_trained_without_gain_loads_as_before_and_cannot_be_valued(dmo, files, tmp_path: Path) -> None:
    model = tmp_path / "plain.safetensors"
    report_of(dmo, "train", files["train"], "--val", files["val"], "-o", model)
    assert not any(name.startswith("heldout.gain") for name in load_file(model))
    assert "gain" not in read_metadata(model)["info"]["heldout"]
    assert load_model(model).heldout.gain is None and load_model(model).heldout.gains is None
    status, _, err = dmo("threshold", model, "--problem", "value", "--gain", FRAUD, "-o", tmp_path / "v.safetensors")
    assert status == 2 and "trained without --gain" in err


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--problem", "value"), "--problem value needs --gain"),
        (("--gain", FRAUD), "--gain weighs the decisions of --problem value"),
        (("--problem", "ofbs", "--gain", FRAUD), "--gain weighs the decisions of --problem value"),
        (("--problem", "value", "--gain", "tp=1,tp=2"), "--gain gives tp twice"),
        (("--problem", "value", "--gain", FRAUD, "--confidence", "0.9"), "--confidence bounds the constrained"),
        (("--problem", "value", "--gain", FRAUD, "--target", "0.5"), "--target applies to fpor/frop"),
        (("--problem", "value", "--gain", "fn=-fee"), "--gain names column(s) fee, which DATA lacks"),
        (("--problem", "value", "--gain", FRAUD, "--model", "auto"), "--model auto chooses on F-beta"),
        (("--problem", "value", "--gain", FRAUD, "--solver", "ofo"), "in one process, in memory"),
    ],
)
def test_what_value_cannot_do_is_refused_in_one_line(dmo, files, tmp_path: Path, extra, named) -> None:
    status, out, err = dmo("train", files["train"], *extra, "-o", tmp_path / "m.safetensors")
    assert status == 2 and out == "" and named in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.safetensors").exists()


def test_bad_amounts_and_multi_class_labels_are_refused_naming_the_fix(dmo, tmp_path: Path) -> None:
    negative = tmp_path / "negative.parquet"
    transactions(300, 2).drop(columns="created_at").assign(amount=lambda f: f["amount"] - 50).to_parquet(negative)
    status, _, err = dmo("train", negative, "--problem", "value", "--gain", FRAUD, "-o", tmp_path / "m.safetensors")
    assert status == 2 and "'amount' is negative in" in err and "-1*amount" in err
    classes = tmp_path / "classes.parquet"
    transactions(300, 3).drop(columns="created_at").assign(label=lambda f: np.arange(len(f)) % 3).to_parquet(classes)
    status, _, err = dmo("train", classes, "--problem", "value", "--gain", FRAUD, "-o", tmp_path / "m.safetensors")
    assert status == 2 and "applies to binary labels; give --positive CLASS" in err


def test_check_reads_the_gain_columns_as_train_does(dmo, files, tmp_path: Path) -> None:
    status, out, _ = dmo("check", files["train"], "--problem", "value", "--gain", FRAUD)
    assert status == 0 and "problem value" in out
    status, out, err = dmo("check", files["train"], "--problem", "value", "--gain", "fn=-amount,fp=-fee")
    assert status == 2 and "--gain names column(s) fee, which DATA lacks" in out + err
