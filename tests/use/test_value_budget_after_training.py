"""What a `--problem value` model and a model kept within an alert budget do after training (issue 48, the gaps
of the first round): `dmo threshold --adapt/--prior` of a value model (the cut of the best expected value per row
at the new rate) and its refusal for a budget; `dmo info`'s gain matrix and alert budget with its certificate;
`dmo evaluate --gate` on a budget (the flagged share against it) and on a value model (the realized value, no
target); `evaluate --history`'s realized value; monitor's chunk lines; DmoClassifier's parameters; and the value
report's figure at the threshold equal to the operating point's objective to the bit.

Real training on small generated transactions with amounts; each figure is checked against a count by hand.
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

from dmocli import DmoClassifier, TrainOptions, report_schema, train
from dmocli.models.modelfile import load_model
from dmocli.operating_point.bounds import clopper_pearson_lower
from dmocli.use.evaluate import evaluation
from dmocli.use.history import read
from dmocli.use.model_info import model_info
from dmocli.use.results.evaluation import GateFailed

GAIN = "tp=50,fp=-5,fn=-amount,tn=0.02*amount"
VALIDATOR = jsonschema.Draft202012Validator(report_schema())


def transactions(rows: int, seed: int, pos_frac: float = 0.15) -> pd.DataFrame:
    """Two-class rows with a log-normal `amount` (larger for positives), which is a feature too."""
    frame = make_binary_frame(n=rows, d=3, pos_frac=pos_frac, seed=seed)
    rng = np.random.default_rng(seed + 100)
    return frame.assign(amount=np.exp(rng.normal(3.0 + frame["label"], 1.0)))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A value model, a model kept within an alert budget alone, and one with a precision target and a budget."""
    root = tmp_path_factory.mktemp("gaps")
    transactions(1500, 1).to_parquet(root / "train.parquet")
    transactions(800, 2).to_parquet(root / "val.parquet")
    transactions(900, 3).to_parquet(root / "holdout.parquet")
    val = str(root / "val.parquet")
    models = {
        "value": TrainOptions(problem="value", gain=GAIN, val=val, seed=0),
        "budget": TrainOptions(max_alerts=100, per_rows=1000, confidence=0.9, val=val, seed=0),
        "target_budget": TrainOptions(problem="fpor", target=0.6, max_alert_rate=0.2, val=val, seed=0),
    }
    for name, opts in models.items():
        train(root / "train.parquet", opts, output=root / f"{name}.st", report_path=root / f"{name}.json")
    return root


def best_cut_by_hand(model_path: Path, rate: float) -> tuple[np.ndarray, float]:
    """Every distinct held-out score's flag at the cut of the highest expected value per row at `rate`, written out:
    each class's mean gain over its rows (flagged rows their tp or fp gain, the others fn or tn), mixed at the rate;
    the first best from the highest threshold down, and that best value."""
    curve = load_model(model_path).heldout
    gains, k = curve.gains, curve.scores.size
    best, best_flags = -np.inf, None
    for flagged_count in range(k + 1):  # flag the top `flagged_count` distinct scores
        flagged = np.arange(k) >= k - flagged_count
        positives = gains.tp[flagged].sum() + gains.fn[~flagged].sum()
        negatives = gains.fp[flagged].sum() + gains.tn[~flagged].sum()
        value = rate * positives / curve.n_pos + (1 - rate) * negatives / curve.n_neg
        if best_flags is None or value > best + 1e-9 * abs(best):
            best, best_flags = value, flagged
    return best_flags, best


@pytest.mark.parametrize("rate", [0.05, 0.4])
def test_prior_moves_a_value_cut_to_the_best_value_per_row_at_the_rate(dmo, root: Path, tmp_path: Path, rate) -> None:
    code, out, err = dmo("threshold", root / "value.st", "--prior", rate, "-o", tmp_path / "m.st", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert list(VALIDATOR.iter_errors(report)) == []
    adapted = report["adapted"]
    flags, best = best_cut_by_hand(root / "value.st", rate)
    curve = load_model(root / "value.st").heldout
    moved = load_model(tmp_path / "m.st")
    assert np.array_equal(curve.scores >= np.float32(moved.threshold), flags)
    assert adapted["at_new"]["value_per_row"] == pytest.approx(best, rel=1e-9)
    assert adapted["at_new"]["value_per_row"] >= adapted["at_old"]["value_per_row"]
    assert adapted["feasible"] is None and adapted["problem"]["problem"] == "value"
    assert "maximizes the expected value per row" in adapted["note"]
    assert err == ""  # what the cut maximizes is the report's note, not a warning


def test_adapt_of_a_value_model_reads_the_rate_of_new_rows(dmo, root: Path, tmp_path: Path) -> None:
    transactions(1200, 7, pos_frac=0.35).to_parquet(tmp_path / "new.parquet")
    code, out, err = dmo("threshold", root / "value.st", "--adapt", tmp_path / "new.parquet", "-o", tmp_path / "m.st")
    assert code == 0, err
    assert "value per row" in out and "the adapted cut maximizes the expected value per row" in out
    assert load_model(tmp_path / "m.st").threshold != load_model(root / "value.st").threshold  # the rate moved


def test_what_adapting_cannot_do_is_refused_in_one_line(dmo, root: Path, tmp_path: Path) -> None:
    code, _, err = dmo("threshold", root / "value.st", "--prior", "0.2", "--confidence", "0.9", "-o", tmp_path / "a")
    assert code == 2 and "--problem value maximizes the expected value" in err and err.count("\n") == 1
    for budgeted in ("budget.st", "target_budget.st"):
        code, _, err = dmo("threshold", root / budgeted, "--prior", "0.2", "-o", tmp_path / "b.st")
        assert code == 2 and "do not move a model kept within an alert budget" in err and err.count("\n") == 1
        assert not (tmp_path / "b.st").exists()


def test_info_shows_the_gain_matrix_and_the_budget_with_its_certificate(dmo, root: Path) -> None:
    value = model_info(root / "value.st")
    assert value.gain is not None and value.gain.gain == GAIN and value.gain.columns == ["amount"]
    assert value.gain.cells == {"tp": "50", "fp": "-5", "fn": "-amount", "tn": "0.02*amount"}
    assert value.alert_budget is None and "alert_budget" not in value.to_dict()
    budget = model_info(root / "budget.st")
    trained = json.loads((root / "budget.json").read_text())["alert_budget"]
    assert budget.alert_budget is not None and budget.alert_budget.to_dict() == trained  # the train report's, again
    assert budget.gain is None and "gain" not in budget.to_dict()
    for path in ("value.st", "budget.st", "target_budget.st"):
        code, out, _ = dmo("info", root / path, "--json")
        assert code == 0 and list(VALIDATOR.iter_errors(json.loads(out))) == []
    _, text, _ = dmo("info", root / "budget.st")
    assert "alerts at confidence 0.9 (the alerts of the next 1,000 rows)" in text
    assert "alert budget: at most 100 alerts per 1,000 rows" in text and "certified <= " in text
    _, text, _ = dmo("info", root / "value.st")
    assert "gain matrix (value per row): tp 50  fp -5  fn -amount  tn 0.02*amount" in text


def flagged_share(model_path: Path, data: Path) -> tuple[int, int]:
    model = load_model(model_path)
    logits, _ = model.logits(pq.read_table(data))
    return int(np.count_nonzero(np.asarray(logits) >= np.float32(model.threshold))), len(logits)


def test_evaluate_gate_judges_the_flagged_share_against_the_budget(dmo, root: Path, tmp_path: Path) -> None:
    """Rows with three times the positives flag more than the budget: the point rule fails them (exit 3, the budget's
    advice); the lower bound at the gate's confidence fails them only when the share is over beyond chance."""
    transactions(900, 11, pos_frac=0.45).to_parquet(tmp_path / "shifted.parquet")
    flagged, rows = flagged_share(root / "budget.st", tmp_path / "shifted.parquet")
    assert flagged / rows > 0.1
    code, out, err = dmo("evaluate", root / "budget.st", tmp_path / "shifted.parquet", "--gate", "--json")
    gate = json.loads(out)["gate"]
    assert code == 3 and gate["rule"] == "point" and gate["metric"] == "flagged_share" and gate["passed"] is False
    assert gate["value"] == flagged / rows and gate["target"] == 0.1
    assert "over the alert budget 0.1" in err and "re-target within the budget" in err
    code, out, _ = dmo("evaluate", root / "budget.st", tmp_path / "shifted.parquet", "--gate-confidence", "0.99")
    lower = float(clopper_pearson_lower(flagged, rows, 0.99))
    assert (code == 3) == (lower > 0.1)
    # rows like the training ones: a share at the budget's edge, within it beyond chance at 0.9
    result = evaluation(root / "budget.st", root / "holdout.parquet", gate_confidence=0.9)
    lower = float(clopper_pearson_lower(*flagged_share(root / "budget.st", root / "holdout.parquet"), 0.9))
    assert result.gate.rule == "lower_bound" and result.gate.interval[0] == pytest.approx(lower, rel=1e-12)
    assert result.gate.passed is (lower <= 0.1)
    assert list(VALIDATOR.iter_errors(json.loads(json.dumps(result.to_dict())))) == []


def test_evaluate_gate_of_a_target_and_a_budget_needs_both(root: Path, tmp_path: Path) -> None:
    transactions(900, 12, pos_frac=0.6).to_parquet(tmp_path / "shifted.parquet")
    passing = evaluation(root / "target_budget.st", root / "holdout.parquet", gate_confidence=0.9)
    gate = passing.gate  # rows like the training ones: neither the target nor the budget ruled out beyond chance
    assert gate.metric == "precision" and gate.rule == "upper_bound" and gate.alert_budget.rule == "lower_bound"
    assert gate.passed is True and gate.interval[1] >= 0.6 and gate.alert_budget.interval[0] <= 0.2
    flagged, rows = flagged_share(root / "target_budget.st", tmp_path / "shifted.parquet")
    assert flagged / rows > 0.2  # far more rows flagged than the budget allows; precision rises with the rate
    with pytest.raises(GateFailed) as failed:
        evaluation(root / "target_budget.st", tmp_path / "shifted.parquet", gate=True)
    gate = failed.value.result.gate
    assert gate.value >= 0.6 and gate.alert_budget.passed is False and gate.passed is False
    assert "re-target within the budget" in str(failed.value)
    assert list(VALIDATOR.iter_errors(json.loads(json.dumps(failed.value.report)))) == []


def test_evaluate_gate_of_a_value_model_says_there_is_no_target_and_gives_the_value(dmo, root: Path) -> None:
    code, out, err = dmo("evaluate", root / "value.st", root / "holdout.parquet", "--gate")
    result = evaluation(root / "value.st", root / "holdout.parquet")
    assert code == 0 and "nothing to check" in err
    assert f"the value it realizes under its gain matrix: {result.value.at_threshold.per_row:.4g} per row" in err
    assert "value per row: " in out


def test_evaluate_history_records_the_realized_value(root: Path, tmp_path: Path) -> None:
    history = tmp_path / "h.parquet"
    result = evaluation(root / "value.st", root / "holdout.parquet", history=history)
    rows = read(history).to_pylist()
    assert [row["realized_value"] for row in rows] == [result.value.at_threshold.per_row]
    evaluation(root / "budget.st", root / "holdout.parquet", history=tmp_path / "other.parquet")
    assert read(tmp_path / "other.parquet").column("realized_value").to_pylist() == [None]
    old = pq.read_table(history).drop_columns(["realized_value"])  # a history written before the column
    pq.write_table(old, tmp_path / "old.parquet")
    assert read(tmp_path / "old.parquet").column("realized_value").to_pylist() == [None]


def test_monitor_chunk_lines_show_the_value(dmo, root: Path) -> None:
    code, out, err = dmo("monitor", root / "value.st", root / "holdout.parquet", "--chunk-size", "300")
    assert code == 0, err
    chunks = [line for line in out.splitlines() if line.startswith("  chunk ")]
    assert len(chunks) == 3 and all("value per row " in line for line in chunks)


def test_the_value_at_the_threshold_is_the_objective_to_the_bit(root: Path) -> None:
    """The operating point's objective and the value section's per row are one computation (the search's
    cumulative sum), not two that round differently; across splits and matrices with fractional coefficients."""
    frame = transactions(1200, 21)
    for seed, extra in ((0, {"val_frac": 0.3}), (1, {"cv": 3})):
        for gain in (GAIN, "tp=0.7*amount,fp=-3.3,fn=-1.1*amount,tn=0.013*amount"):
            _, report = train(frame, TrainOptions(problem="value", gain=gain, seed=seed, **extra))
            assert report["operating_point"]["objective"] == report["value"]["at_threshold"]["per_row"]


def test_dmo_classifier_takes_the_decision_options(root: Path) -> None:
    frame = pd.read_parquet(root / "train.parquet")
    labels = frame.pop("label")
    value = DmoClassifier(problem="value", gain=GAIN, val_frac=0.3, seed=0)
    assert {"gain", "max_alert_rate", "max_alerts", "per_rows", "review_budget"} <= set(value.get_params())
    value.fit(frame, labels)
    assert value.report_["value"]["gain"] == GAIN and value.model_.heldout.gain.text == GAIN
    budget = DmoClassifier(max_alerts=50, per_rows=1000, val_frac=0.3, seed=0).fit(frame, labels)
    assert budget.report_["problem"] == "alerts" and budget.report_["alert_budget"]["flagged_share"] <= 0.05
    band = DmoClassifier(problem="fpor", target=0.6, review_budget=0.1, val_frac=0.3, seed=0).fit(frame, labels)
    assert band.model_.review_threshold is not None and band.model_.review_threshold < band.threshold_


def test_model_auto_within_a_budget_names_the_objective_it_chose_by(root: Path) -> None:
    """--model auto compares the candidates' out-of-fold objective: within a budget alone, the recall."""
    from dmocli.pipelines.model_choice import summary_line

    frame = pd.read_parquet(root / "train.parquet")
    _, report = train(frame, TrainOptions(model="auto", max_alert_rate=0.1, cv=3, seed=0))
    chosen = {c["model"]: c for c in report["model_selection"]["candidates"]}[report["model_selection"]["chosen"]]
    assert report["problem"] == "alerts" and chosen["objective"] == pytest.approx(report["operating_point"]["recall"])
    line = summary_line(report)
    assert f"(out-of-fold recall {chosen['objective']:.2f} within the alert budget; " in line and " F1 " not in line
