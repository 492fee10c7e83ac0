"""A model trained with `--problem value` after training (issue 48): `dmo evaluate` counts the value labeled rows
realize under its gain matrix, and `dmo monitor` the value expected per row at a section's estimated positive rate,
from the held-out curve's gains alone.

Real training on small generated transactions with amounts; every figure is checked against a count by hand on the
same rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import make_binary_frame

from dmocli import TrainOptions, report_schema, train
from dmocli.errors import DmoError
from dmocli.models.modelfile import load_model
from dmocli.operating_point.calibration import probability
from dmocli.use.evaluate import evaluation
from dmocli.use.monitor import monitor

GAIN = "tp=50,fp=-5,fn=-amount,tn=0.02*amount"


def transactions(rows: int, seed: int) -> pd.DataFrame:
    """Two-class rows with a log-normal `amount` (larger for positives), which is a feature too."""
    frame = make_binary_frame(n=rows, d=3, pos_frac=0.15, seed=seed)
    rng = np.random.default_rng(seed + 100)
    return frame.assign(amount=np.exp(rng.normal(3.0 + frame["label"], 1.0)))


def hand_value(labels: np.ndarray, flagged: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Each row's value under scikit-learn's fraud example's matrix, written out cell by cell."""
    return np.where(labels == 1, np.where(flagged, 50.0, -amount), np.where(flagged, -5.0, 0.02 * amount))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("value")
    transactions(1500, 1).to_parquet(root / "train.parquet")
    transactions(800, 2).to_parquet(root / "val.parquet")
    transactions(900, 3).to_parquet(root / "holdout.parquet")
    opts = TrainOptions(problem="value", gain=GAIN, val=str(root / "val.parquet"), seed=0)
    train(root / "train.parquet", opts, output=root / "m.st")
    return root


def scored(root: Path, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(logits, labels, amounts, threshold) of a table's rows under the trained model."""
    model = load_model(root / "m.st")
    table = pq.read_table(root / f"{name}.parquet")
    logits, _ = model.logits(table)
    frame = table.to_pandas()
    return np.asarray(logits), frame["label"].to_numpy(), frame["amount"].to_numpy(np.float64), model.threshold


def test_evaluate_counts_the_realized_value_by_hand(trained: Path) -> None:
    logits, labels, amount, threshold = scored(trained, "holdout")
    result = evaluation(trained / "m.st", trained / "holdout.parquet")
    value = result.value
    assert value is not None and value.gain == GAIN and value.rows == labels.size
    at = hand_value(labels, logits >= threshold, amount)
    assert value.at_threshold.total == pytest.approx(at.sum(), rel=1e-12)
    assert value.at_threshold.per_row == pytest.approx(at.mean(), rel=1e-12)
    assert value.at_threshold.flagged == int((logits >= threshold).sum())
    low, high = value.at_threshold.per_row_interval
    half = 1.959963984540054 * at.std(ddof=1) / np.sqrt(at.size)
    assert (low, high) == pytest.approx((at.mean() - half, at.mean() + half), rel=1e-9)
    nothing = hand_value(labels, np.zeros(labels.size, bool), amount)
    assert value.flag_nothing.total == pytest.approx(nothing.sum(), rel=1e-12) and value.flag_nothing.flagged == 0
    model = load_model(trained / "m.st")
    default = hand_value(labels, probability(logits, model.calibration) >= 0.5, amount)
    assert value.at_default_cut.total == pytest.approx(default.sum(), rel=1e-12)
    assert value.at_default_cut.rule == "calibrated probability >= 0.5"
    assert value.over_flag_nothing == pytest.approx(at.sum() - nothing.sum(), rel=1e-9)
    # the threshold was chosen for this matrix: on fresh rows it beats flagging nothing by a wide margin
    assert value.at_threshold.per_row > value.flag_nothing.per_row
    report = json.loads(json.dumps(result.to_dict()))
    assert list(jsonschema.Draft202012Validator(report_schema()).iter_errors(report)) == []
    assert any(line.startswith("value per row: ") for line in result.lines())


def test_evaluate_of_a_model_without_a_gain_has_no_value_key(tmp_path: Path) -> None:
    transactions(600, 4).to_parquet(tmp_path / "t.parquet")
    train(tmp_path / "t.parquet", TrainOptions(problem="ofbs", val_frac=0.3, seed=0), output=tmp_path / "m.st")
    result = evaluation(tmp_path / "m.st", tmp_path / "t.parquet", allow_train_rows=True)
    assert result.value is None and "value" not in result.to_dict()


def test_evaluate_of_data_without_the_amounts_warns_and_keeps_no_value(tmp_path: Path) -> None:
    """A gain column that is not a feature (`--drop amount`): DATA without it is evaluated, with a warning naming
    the column instead of a value; DATA with it gets its value."""
    transactions(1000, 5).to_parquet(tmp_path / "t.parquet")
    transactions(600, 6).to_parquet(tmp_path / "fresh.parquet")
    transactions(600, 6).drop(columns="amount").to_parquet(tmp_path / "no_amount.parquet")
    opts = TrainOptions(problem="value", gain=GAIN, drop=("amount",), val_frac=0.3, seed=0)
    train(tmp_path / "t.parquet", opts, output=tmp_path / "m.st")
    result = evaluation(tmp_path / "m.st", tmp_path / "no_amount.parquet")
    assert result.value is None and "value" not in result.to_dict()
    assert [w for w in result.warnings if "no column 'amount' the gain matrix reads" in w]
    assert evaluation(tmp_path / "m.st", tmp_path / "fresh.parquet").value is not None


def test_evaluate_refuses_a_negative_loss_in_one_line(trained: Path, tmp_path: Path) -> None:
    """`fn=-amount` counts the amount as a loss: a negative one is refused, naming the column and the rows."""
    frame = pd.read_parquet(trained / "holdout.parquet")
    frame.loc[frame.index[:3], "amount"] = -1.0
    frame.to_parquet(tmp_path / "negative.parquet")
    with pytest.raises(DmoError, match="'amount' is negative in 3 of 900 labeled rows"):
        evaluation(trained / "m.st", tmp_path / "negative.parquet")


def test_monitor_expects_the_heldout_value_at_the_reference_rate(trained: Path) -> None:
    logits, labels, amount, threshold = scored(trained, "val")
    heldout = hand_value(labels, logits >= threshold, amount)
    result = monitor(trained / "m.st", trained / "holdout.parquet")
    section = result.overall.value
    assert section is not None and section.gain == GAIN
    assert section.reference_rate == pytest.approx(labels.mean(), rel=1e-12)
    assert section.per_row_at_reference == pytest.approx(heldout.mean(), rel=1e-9)
    # at the section's estimated rate r: r times the held-out positives' mean value plus (1 - r) the negatives'
    rate = result.overall.positive_rate.estimate
    expected = rate * heldout[labels == 1].mean() + (1 - rate) * heldout[labels == 0].mean()
    assert section.rate == rate and section.per_row == pytest.approx(expected, rel=1e-9)
    assert section.total == pytest.approx(result.overall.rows * expected, rel=1e-9)
    low, high = section.per_row_interval
    assert low < section.per_row < high
    report = json.loads(json.dumps(result.to_dict()))
    assert list(jsonschema.Draft202012Validator(report_schema()).iter_errors(report)) == []
    assert any("expected value per row" in line for line in result.lines())


def test_monitor_value_moves_with_the_rate(trained: Path, tmp_path: Path) -> None:
    """Rows at twice the positive rate: the value expected moves the way the held-out class means say, and the
    realized value on those rows lies in the expected interval."""
    frame = pd.read_parquet(trained / "holdout.parquet")
    positives, negatives = frame[frame["label"] == 1], frame[frame["label"] == 0]
    shifted = pd.concat([positives, positives.sample(frac=1.0, random_state=0), negatives]).reset_index(drop=True)
    shifted.to_parquet(tmp_path / "shifted.parquet")
    logits, labels, amount, threshold = scored(trained, "val")
    heldout = hand_value(labels, logits >= threshold, amount)
    result = monitor(trained / "m.st", tmp_path / "shifted.parquet")
    section = result.overall.value
    gap = heldout[labels == 1].mean() - heldout[labels == 0].mean()
    assert np.sign(section.per_row - section.per_row_at_reference) == np.sign(gap)
    model = load_model(trained / "m.st")
    new_logits, _ = model.logits(pq.read_table(tmp_path / "shifted.parquet"))
    realized = hand_value(
        shifted["label"].to_numpy(), np.asarray(new_logits) >= threshold, shifted["amount"].to_numpy()
    )
    low, high = section.per_row_interval
    assert low <= realized.mean() <= high
