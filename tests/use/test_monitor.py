"""`dmo monitor` and `dmo threshold --adapt/--prior` on data with a known shift (issue 35, items 4 and 5).

The rows are Gaussian classes (tests/conftest.py make_binary_frame); a new sample at another positive rate is drawn
from the same class-conditional distributions (label shift), so the true rate and the true precision at any
threshold are known from a large labeled sample of the same shift.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import make_binary_frame

from dmocli import load_model, report_schema

TARGET = 0.8


def shifted(rate: float, n: int, seed: int) -> pd.DataFrame:
    """n rows at positive rate `rate`, drawn from the training classes' distributions."""
    pool = make_binary_frame(n=40 * n, d=4, pos_frac=0.3, seed=seed, sep=1.6)
    positives = pool[pool.label == 1].head(int(round(rate * n)))
    negatives = pool[pool.label == 0].head(n - len(positives))
    return pd.concat([positives, negatives]).sample(frac=1.0, random_state=seed).reset_index(drop=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("monitor")
    shifted(0.2, 4000, seed=1).to_parquet(root / "train.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=TARGET, cv=3, seed=0), output=root / "m.st")
    train(root / "train.parquet", TrainOptions(problem="frop", target=TARGET, cv=3, seed=0), output=root / "r.st")
    return root


def realized_precision(path, model, data: pd.DataFrame) -> float:
    from dmocli.scoring.scored_pass import Scorer

    scored = Scorer(load_model(model), labeled=True)(__import__("pyarrow").Table.from_pandas(data))
    logits, y = scored.logits, scored.labels
    taken = logits >= np.float32(load_model(model).threshold)
    return float(y[taken].mean())


def test_monitor_estimates_the_new_rate_and_the_precision_it_brings(dmo, trained, tmp_path):
    new = shifted(0.05, 6000, seed=2)
    new.drop(columns="label").to_parquet(tmp_path / "new.parquet")
    code, out, err = dmo("monitor", trained / "m.st", tmp_path / "new.parquet", "--json")
    assert code == 0, err
    report = json.loads(out)
    jsonschema.validate(report, report_schema())
    low, high = report["positive_rate"]["interval"]
    assert low <= 0.05 <= high and abs(report["positive_rate"]["training"] - 0.2) < 0.02
    truth = realized_precision(tmp_path, trained / "m.st", new)
    estimate = report["label_shift"]
    assert estimate["precision_interval"][0] <= truth <= estimate["precision_interval"][1], (truth, estimate)
    assert estimate["precision"] < TARGET - 0.1 and "realized" not in report  # the x0.25 rate costs precision


def test_the_gate_fires_where_the_target_is_ruled_out_and_not_on_the_training_rate(dmo, trained, tmp_path):
    shifted(0.05, 6000, seed=3).to_parquet(tmp_path / "low.parquet")  # labels present: shown as realized
    shifted(0.2, 6000, seed=4).to_parquet(tmp_path / "same.parquet")
    code, out, err = dmo("monitor", trained / "m.st", tmp_path / "low.parquet", "--gate", "--json")
    assert code == 3 and "gate failed: all rows: estimated precision" in err, err
    report = json.loads(out)
    jsonschema.validate(report, report_schema())
    assert report["gate"]["passed"] is False and report["error"]["code"] == 3
    assert report["realized"]["precision"] < TARGET
    code, out, err = dmo("monitor", trained / "m.st", tmp_path / "same.parquet", "--gate")
    assert code == 0 and "gate: passed" in out, err


def test_chunks_in_order_and_a_drifted_feature_is_named(dmo, trained, tmp_path):
    weeks = {"2026-01": shifted(0.2, 3000, seed=5), "2026-02": shifted(0.05, 3000, seed=6)}
    weeks["2026-03"] = shifted(0.2, 3000, seed=8)
    weeks["2026-03"]["f3"] += 2.0  # a feature that moved
    for week, rows in weeks.items():
        rows["week"] = week
    pd.concat([weeks["2026-03"], weeks["2026-01"], weeks["2026-02"]]).to_parquet(tmp_path / "weeks.parquet")
    code, out, err = dmo("monitor", trained / "m.st", tmp_path / "weeks.parquet", "--chunk-col", "week", "--json")
    assert code == 0, err
    report = json.loads(out)
    jsonschema.validate(report, report_schema())
    chunks = {chunk["chunk"]: chunk for chunk in report["chunks"]}
    assert list(chunks) == ["2026-01", "2026-02", "2026-03"]
    assert chunks["2026-01"]["positive_rate"]["estimate"] > chunks["2026-02"]["positive_rate"]["estimate"]
    assert chunks["2026-03"]["drift"][0]["name"] == "f3" and chunks["2026-03"]["drift_reasons"]
    assert not chunks["2026-01"]["drift_reasons"] and not chunks["2026-02"]["drift_reasons"]
    assert report["gate"]["passed"] is False and any("chunk 2026-03" in r for r in report["gate"]["reasons"])
    code, _, err = dmo("monitor", trained / "m.st", tmp_path / "weeks.parquet", "--chunk-col", "day")
    assert code == 2 and "--chunk-col 'day'" in err
    code, _, err = dmo("monitor", trained / "m.st", tmp_path / "weeks.parquet", "--chunk-col", "f0")
    assert code == 2 and "more than 1000 values" in err, err


def test_adapting_to_a_lower_rate_restores_the_precision_target(dmo, trained, tmp_path):
    new = shifted(0.05, 20_000, seed=7)
    before = realized_precision(tmp_path, trained / "m.st", new)
    code, out, err = dmo("threshold", trained / "m.st", "--prior", "0.05", "-o", tmp_path / "a.st", "--json")
    assert code == 0, err
    report = json.loads(out)
    jsonschema.validate(report, report_schema())
    after = realized_precision(tmp_path, tmp_path / "a.st", new)
    assert before < TARGET - 0.1 and after >= TARGET - 0.04, (before, after)
    assert report["threshold"] > report["previous_threshold"] and report["adapted"]["new_rate"] == 0.05
    assert load_model(tmp_path / "a.st").info["adapted"]["new_rate"] == 0.05
    new.drop(columns="label").to_parquet(tmp_path / "new.parquet")
    code, out, err = dmo("threshold", trained / "m.st", "--adapt", tmp_path / "new.parquet", "-o", tmp_path / "b.st")
    assert code == 0 and "positive rate: 0.0" in out, err
    assert realized_precision(tmp_path, tmp_path / "b.st", new) >= TARGET - 0.05


def test_frop_does_not_move_and_bad_combinations_are_one_line(dmo, trained, tmp_path):
    code, out, err = dmo("threshold", trained / "r.st", "--prior", "0.05", "-o", tmp_path / "r2.st", "--json")
    assert code == 0 and json.loads(out)["threshold"] == load_model(trained / "r.st").threshold
    assert "recall does not move" in json.loads(out)["adapted"]["note"]
    for args, words in (
        (["--prior", "0.05", trained / "train.parquet"], "leave DATA out"),
        (["--prior", "0.05", "--adapt", trained / "train.parquet"], "not both"),
        (["--prior", "1.5"], "strictly between 0 and 1"),
    ):
        code, _, err = dmo("threshold", trained / "m.st", *args, "-o", tmp_path / "x.st")
        assert code == 2 and words in err and err.count("\n") == 1, err


def test_adapting_to_rows_whose_estimated_rate_is_zero_is_an_answer_not_a_crash(dmo, trained, tmp_path):
    """PACC clips an estimate to 0 when the rows hold fewer positives than it can tell; the rate re-targeted for
    is then half a row's worth, where FPOR 0.8 is out of reach: exit 3 with the reason, as any unreachable target."""
    negatives = shifted(0.0, 3000, seed=9)
    negatives.drop(columns="label").to_parquet(tmp_path / "none.parquet")
    code, _, err = dmo("threshold", trained / "m.st", "--adapt", tmp_path / "none.parquet", "-o", tmp_path / "z.st")
    assert code in (0, 3) and "Traceback" not in err and err.count("\n") <= 1, err


def test_adapt_with_confidence_certifies_what_the_model_was_certified_on_by_default(dmo, trained, tmp_path):
    """--adapt NEW --confidence: the certificate is about what the model's was (`adapted.new_rows`; this model has
    none: the population value, issue 45); --new-rows names a count; --new-rows needs --confidence."""
    new = shifted(0.1, 5000, seed=11)
    new.drop(columns="label").to_parquet(tmp_path / "new.parquet")
    base = ("threshold", trained / "m.st", "--adapt", tmp_path / "new.parquet", "--confidence", "0.9")
    thresholds = {}
    for extra, rows in (((), None), (("--new-rows", "5000"), 5000), (("--new-rows", "50000"), 50000)):
        code, out, err = dmo(*base, *extra, "-o", tmp_path / "c.st", "--json", "--allow-infeasible")
        assert code == 0, err
        report = json.loads(out)
        jsonschema.validate(report, report_schema())
        assert report["adapted"]["new_rows"] == rows and report["adapted"]["feasible"] is not None
        thresholds[rows] = report["threshold"]
    # The precision measured on 50,000 rows scatters around the population value: a cut at least as high.
    assert thresholds[50000] >= thresholds[None], thresholds
    code, _, err = dmo(*base, "--new-rows", "5000", "-o", tmp_path / "e.st")  # about 500 positives: too few here
    assert code == 3 and "measured on 5,000 new rows" in err and "--new-rows inf" in err, err
    prior = ("threshold", trained / "m.st", "--prior", "0.1", "--confidence", "0.9", "--allow-infeasible", "--json")
    code, out, err = dmo(*prior, "-o", tmp_path / "p.st")  # --prior: what training certified (no certificate)
    assert code == 0 and json.loads(out)["adapted"]["new_rows"] is None
    code, _, err = dmo("threshold", trained / "m.st", "--prior", "0.1", "--new-rows", "100", "-o", tmp_path / "d.st")
    assert code == 2 and "give --confidence C with it" in err and err.count("\n") == 1, err


def test_a_threshold_above_every_new_score_is_warned_about():
    """The stored curve may reach scores the model never gives (a --cv ensemble of boosted trees): a threshold
    above all of NEW's scores flags nothing, and the adapted report says so."""
    from dmocli.use.adapt import _flags_nothing

    scores = np.array([-1.0, 0.5, 1.67], dtype=np.float32)
    assert "flags none of its rows" in _flags_nothing(28.5, scores)[0]
    assert _flags_nothing(1.67, scores) == [] and _flags_nothing(28.5, None) == []


def test_the_gate_fires_on_a_rate_that_moved_far_and_surely_and_seldom_on_an_unmoved_one(dmo, trained, tmp_path):
    """FPOR's precision and OFBS's best threshold move with the rate: a doubled rate fires the gate though the
    target holds (precision rises), a halved one too; FROP's threshold does not move, so FROP passes. At the
    training rate the rule (moved by 1.25 either way, the 95% interval excluding the training rate) fires in at
    most 5% of 100 samples of 1,500 rows, and at half and twice the rate in at least 90%."""
    from dmocli.shift.prevalence import estimate_prevalence
    from dmocli.use.verdicts import ReferenceRate, rate_drift

    shifted(0.4, 6000, seed=11).drop(columns="label").to_parquet(tmp_path / "high.parquet")
    code, out, err = dmo("monitor", trained / "m.st", tmp_path / "high.parquet", "--gate", "--json")
    assert code == 3 and "gate failed: all rows: the positive rate moved from 0.2" in err, err
    report = json.loads(out)
    assert report["label_shift"]["precision"] > TARGET and len(report["gate"]["reasons"]) == 1
    code, out, err = dmo("monitor", trained / "r.st", tmp_path / "high.parquet", "--gate")
    assert code == 0 and "gate: passed" in out, err

    model = load_model(trained / "m.st")
    fired = {}
    for rate in (0.1, 0.2, 0.4):
        rows = make_binary_frame(n=150_000, d=4, pos_frac=rate, seed=12, sep=1.6).drop(columns="label")
        logits, _ = model.logits(pa.Table.from_pandas(rows))  # 100 samples, each with a binomial count
        fired[rate] = 0
        for rows in logits.reshape(100, 1500):
            estimate = estimate_prevalence(model.heldout, rows, model.calibration, 0.95)
            training = ReferenceRate(source="training", rate=model.heldout.rate, interval=None)
            fired[rate] += bool(rate_drift(estimate.rate, [estimate.low, estimate.high], training))
    assert fired[0.2] <= 5 and fired[0.1] >= 90 and fired[0.4] >= 90, fired
