"""The loop closes (issue 46): each gate's advice, followed, leads to a state where the same gate passes when the
estimates hold.

A model is trained for precision 0.8 on Gaussian classes at positive rate 0.2 (tests/conftest.py make_binary_frame);
NEW is drawn from the same classes at half that rate (label shift). `dmo monitor --gate` fails (exit 3) and says
to move the threshold for the new rate; `dmo threshold MODEL --adapt NEW -o ADAPTED` does; `dmo monitor ADAPTED NEW
--gate` then compares NEW with the rate ADAPTED was adapted to and passes (exit 0); and when NEW's labels arrive,
`dmo evaluate ADAPTED NEW --gate` agrees with the realized precision. A date trend (`--dates parts,trend`) drifts in
every later period: monitor lists it, marked expected, and never fails the gate on it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame

from dmocli import load_model

TARGET = 0.8


def at_rate(rate: float, n: int, seed: int) -> pd.DataFrame:
    """n rows at positive rate `rate`, drawn from the same class-conditional distributions (label shift)."""
    pool = make_binary_frame(n=20 * n, d=4, pos_frac=0.3, seed=seed, sep=1.6)
    positives = pool[pool.label == 1].head(int(round(rate * n)))
    negatives = pool[pool.label == 0].head(n - len(positives))
    return pd.concat([positives, negatives]).sample(frac=1.0, random_state=seed).reset_index(drop=True)


@pytest.fixture(scope="module", params=["linear", "gbdt"])
def files(request, tmp_path_factory):
    """A linear model, and a gbdt `--cv` ensemble, whose adapted cut is carried to its own scores by share (the
    label-shift estimates are then read at the curve's cut, where adapt searched it)."""
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("loop")
    at_rate(0.2, 4000, seed=1).to_parquet(root / "train.parquet")
    options = TrainOptions(problem="fpor", target=TARGET, cv=3, seed=0, model=request.param)
    train(root / "train.parquet", options, output=root / "m.st")
    labeled = at_rate(0.1, 4000, seed=2)
    labeled.to_parquet(root / "new_labeled.parquet")
    labeled.drop(columns="label").to_parquet(root / "new.parquet")
    return root


def test_shift_gate_adapt_gate_labels_evaluate(dmo, files):
    model, new, adapted = files / "m.st", files / "new.parquet", files / "adapted.st"
    code, out, err = dmo("monitor", model, new, "--gate", "--json")
    report = json.loads(out)
    assert code == 3 and report["reference_rate"]["source"] == "training", err
    assert "dmo threshold MODEL --adapt NEW" in err and "(training)" in " ".join(report["gate"]["reasons"])

    code, out, err = dmo("threshold", model, "--adapt", new, "-o", adapted, "--json")
    assert code == 0, err
    stored = load_model(adapted).info["adapted"]
    new_rate = stored["new_rate"]
    assert abs(new_rate - 0.1) < 0.03

    code, out, err = dmo("monitor", adapted, new, "--gate", "--json")
    report = json.loads(out)
    assert code == 0 and report["gate"] == {"asked": True, "passed": True, "reasons": []}, err
    assert report["reference_rate"]["source"] == "adapted" and report["reference_rate"]["rate"] == new_rate
    assert report["training_rate"] == pytest.approx(0.2, abs=0.02)  # the training rate is still said
    assert report["label_shift"]["precision_interval"][1] >= TARGET
    assert report["label_shift"]["threshold"] == pytest.approx(
        stored.get("curve_threshold", load_model(adapted).threshold)
    )
    assert report["label_shift"]["precision"] == pytest.approx(TARGET, abs=0.03)  # where adapt put it
    code, out, _ = dmo("monitor", adapted, new)
    assert "; adapted to " in out.splitlines()[1] and out.splitlines()[-1] == "gate: passed"

    # NEW's labels arrive: evaluate's gate agrees with the precision they realize
    labeled = files / "new_labeled.parquet"
    realized = _realized_precision(adapted, pd.read_parquet(labeled))
    code, out, err = dmo("evaluate", adapted, labeled, "--gate", "--json")
    assert code == (0 if realized >= TARGET else 3), (realized, err)
    assert json.loads(out)["gate"]["value"] == pytest.approx(realized)
    code, _, err = dmo("evaluate", adapted, labeled, "--gate-confidence", "0.95")
    assert code == 0 and "gate passed" in _ + err  # the labels do not rule the target out: monitor's verdict holds
    # the model the gate failed still fails on the same labels: the advice, not chance, turned the gate green
    assert _realized_precision(model, pd.read_parquet(labeled)) < TARGET


def _realized_precision(model, data: pd.DataFrame) -> float:
    import pyarrow as pa

    from dmocli.scoring.scored_pass import Scorer

    loaded = load_model(model)
    scored = Scorer(loaded, labeled=True)(pa.Table.from_pandas(data))
    taken = scored.logits >= np.float32(loaded.threshold)
    return float(scored.labels[taken].mean())


def test_a_date_trend_drifts_as_expected_and_is_never_a_gate_reason(dmo, tmp_path):
    """`--dates parts,trend` keeps `created_at.days_since`: the same weeks a year later (months, weekdays and days of
    month as in training) lie past every training value of the trend (PSI far above the limit, significant), so
    monitor lists it with `expected: true` and the gate passes (boosted trees: a later value scores as the last
    training values do, so the scores do not move with it); the same drift in a feature that is not a trend fails
    it, with the advice to retrain (a moved threshold leaves drift as it is)."""
    rows = make_binary_frame(n=3000, d=3, pos_frac=0.2, seed=3, sep=1.6)
    days = np.random.default_rng(3).integers(0, 60, size=len(rows))
    rows["created_at"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(days, unit="D")
    rows.iloc[:2000].to_parquet(tmp_path / "train.parquet")
    later = rows.iloc[2000:].assign(created_at=lambda f: f.created_at + pd.Timedelta(days=364))
    later.drop(columns="label").to_parquet(tmp_path / "later.parquet")
    code, _, err = dmo(
        "train", tmp_path / "train.parquet", "--problem", "fpor", "--target", "0.7", "--dates", "parts,trend",
        "--model", "gbdt", "--seed", "0", "-o", tmp_path / "m.st",
    )  # fmt: skip
    assert code == 0, err
    assert "created_at.days_since" in load_model(tmp_path / "m.st").preprocessor.trend_features()
    code, out, err = dmo("monitor", tmp_path / "m.st", tmp_path / "later.parquet", "--gate", "--json")
    report = json.loads(out)
    trend = next(entry for entry in report["drift"] if entry["name"] == "created_at.days_since")
    assert trend["expected"] is True and trend["severity"] == "major" and trend["significant"], trend
    assert all("expected" not in entry for entry in report["drift"] if entry is not trend)
    assert not any("days_since" in reason for reason in report["gate"]["reasons"])
    assert code == 0, err

    drifted = rows.iloc[2000:].assign(f0=lambda f: f.f0 + 4.0).drop(columns="label")
    drifted.to_parquet(tmp_path / "drifted.parquet")
    code, out, err = dmo("monitor", tmp_path / "m.st", tmp_path / "drifted.parquet", "--gate", "--json")
    assert code == 3 and "retrain on rows like NEW's" in err, err  # each kind of reason's advice, not the first's
    assert any("numeric 'f0' drifted" in reason for reason in json.loads(out)["gate"]["reasons"])
