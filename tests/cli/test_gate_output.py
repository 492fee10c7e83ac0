"""A failed gate (exit 3) prints its summary like a pass does (issue 45, trial item 1).

A CI job that runs `dmo monitor M NEW --gate` or `dmo evaluate M DATA --gate` keeps only what stdout and stderr
show: the figures that explain a failure must be there without --json or --report, and --json and --report still
give the full report.
"""

from __future__ import annotations

import json

import jsonschema
import pandas as pd
import pytest
from conftest import make_binary_frame

from dmocli import report_schema


def at_rate(rate: float, n: int, seed: int) -> pd.DataFrame:
    """n rows at positive rate `rate`, drawn from make_binary_frame's classes (a label shift)."""
    pool = make_binary_frame(n=30 * n, d=4, pos_frac=0.3, seed=seed, sep=1.6)
    positives = pool[pool.label == 1].head(int(round(rate * n)))
    negatives = pool[pool.label == 0].head(n - len(positives))
    return pd.concat([positives, negatives]).sample(frac=1.0, random_state=seed).reset_index(drop=True)


@pytest.fixture(scope="module")
def fpor_model(tmp_path_factory):
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("gate_output")
    at_rate(0.2, 3000, seed=1).to_parquet(root / "train.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.8, cv=3, seed=0), output=root / "m.st")
    at_rate(0.03, 4000, seed=2).to_parquet(root / "low.parquet")  # precision falls far below 0.8
    return root


@pytest.mark.parametrize("command", ["monitor", "evaluate"])
def test_a_failed_gate_prints_its_figures_and_reasons(dmo, fpor_model, command):
    code, out, err = dmo(command, fpor_model / "m.st", fpor_model / "low.parquet", "--gate")
    assert code == 3, err
    assert "gate failed" in err  # the one line on stderr, as before
    if command == "monitor":
        assert "positive rate:" in out and "label shift:" in out, out
        assert "gate: failed on" in out and "all rows: estimated precision" in out, out
    else:
        assert "precision" in out and "recall" in out, out
        assert "gate failed: precision" in out and "is below the target 0.8" in out, out


@pytest.mark.parametrize("command", ["monitor", "evaluate"])
def test_a_failed_gate_still_gives_the_json_and_the_report(dmo, fpor_model, command, tmp_path):
    report = tmp_path / "r.json"
    code, out, err = dmo(command, fpor_model / "m.st", fpor_model / "low.parquet", "--gate", "--json")
    assert code == 3, err
    printed = json.loads(out)  # one JSON object, no summary lines mixed in
    jsonschema.validate(printed, report_schema())
    assert printed["gate"]["passed"] is False and printed["error"]["code"] == 3
    code, out, err = dmo(command, fpor_model / "m.st", fpor_model / "low.parquet", "--gate", "--report", report)
    assert code == 3 and "gate" in out, err
    assert json.loads(report.read_text())["gate"]["passed"] is False


def test_an_ensembles_own_score_is_never_shown_or_gated_as_drift(dmo, tmp_path):
    """Issue 45, trial item 4: a boosted-tree ensemble's score was listed as drift ("PSI 6.599 (major)") though its
    held-out scores are its members' (another scale): not a drift figure. A single model's score still is one."""
    from dmocli import TrainOptions, train

    at_rate(0.2, 1500, seed=1).to_parquet(tmp_path / "train.parquet")
    at_rate(0.2, 1500, seed=5).drop(columns="label").to_parquet(tmp_path / "new.parquet")
    train(
        tmp_path / "train.parquet",
        TrainOptions(problem="fpor", target=0.8, cv=3, model="gbdt"),
        output=tmp_path / "g.st",
    )
    train(tmp_path / "train.parquet", TrainOptions(problem="fpor", target=0.8, cv=0), output=tmp_path / "l.st")
    listed = {}
    for name in ("g.st", "l.st"):
        code, out, err = dmo("monitor", tmp_path / name, tmp_path / "new.parquet", "--chunk-size", "500", "--json")
        assert code == 0, err
        report = json.loads(out)
        sections = [report, *report["chunks"]]
        listed[name] = [any(d["kind"] == "score" for d in section["drift"]) for section in sections]
        assert not any("score" in reason for section in sections for reason in section["drift_reasons"])
        code, out, err = dmo("monitor", tmp_path / name, tmp_path / "new.parquet")
        assert ("drift score" in out) == (name == "l.st"), out
    assert listed == {"g.st": [False] * 4, "l.st": [True] * 4}, listed


@pytest.fixture(scope="module")
def multiclass(tmp_path_factory):
    """A 3-class model trained for recall >= 0.6 in every class, and DATA where class 1's recall is exactly 0.5."""
    from conftest import make_gaussian_classes

    from dmocli import TrainOptions, predict, train

    root = tmp_path_factory.mktemp("gate_classes")
    make_gaussian_classes(3000, seed=1, d=5, priors=(0.3, 0.4, 0.3), sep=1.5).to_parquet(root / "train.parquet")
    train(root / "train.parquet", TrainOptions(problem="frop", target=0.6, cv=3, seed=0), output=root / "m.st")
    holdout = make_gaussian_classes(6000, seed=2, d=5, priors=(0.3, 0.4, 0.3), sep=1.5)
    predicted = predict(root / "m.st", holdout.drop(columns="label"))["predicted"].to_numpy()
    hit = (holdout.label == 1).to_numpy() & (predicted == 1)
    miss = (holdout.label == 1).to_numpy() & (predicted != 1)
    n = min(hit.sum(), miss.sum(), 300)
    keep = holdout[holdout.label != 1]
    low = pd.concat([keep, holdout[hit].head(n), holdout[miss].head(n)]).reset_index(drop=True)
    low.to_parquet(root / "low.parquet")
    low.groupby("label").head(10).to_parquet(root / "tiny.parquet")  # 5 hits and 5 misses of class 1
    holdout.to_parquet(root / "holdout.parquet")
    return root


def test_evaluate_gates_a_multiclass_models_class_floors(dmo, multiclass):
    """Issue 45, hostile 7: a class's recall of 0.5 under its 0.6 floor passed (exit 0) with a false warning that
    the model's problem has no target."""
    code, out, err = dmo("evaluate", multiclass / "m.st", multiclass / "low.parquet", "--gate")
    assert code == 3, err
    assert "no target" not in out + err
    assert "gate failed: class 1's recall 0.5000" in out and "is below the target 0.6 (its floor" in out, out
    code, out, err = dmo("evaluate", multiclass / "m.st", multiclass / "low.parquet", "--gate", "--json")
    gate = json.loads(out)["gate"]
    jsonschema.validate(json.loads(out), report_schema())
    assert gate["rule"] == "point" and gate["failing_class"] == 1 and gate["passed"] is False
    assert [entry["class"] for entry in gate["classes"]] == [0, 1, 2]
    assert [entry["passed"] for entry in gate["classes"]] == [e["value"] >= 0.6 for e in gate["classes"]]


def test_the_class_gate_keeps_gate_confidences_meaning(dmo, multiclass):
    """--gate-confidence C fails only where DATA rules a floor out: half of some 500 rules 0.6 out, 5 of 10 does not
    (each class's upper bound at 1 - (1 - C) / 3, Bonferroni over the three floors)."""
    code, out, err = dmo("evaluate", multiclass / "m.st", multiclass / "low.parquet", "--gate-confidence", "0.95")
    assert code == 3 and "its upper bound is below the target 0.6" in out, out
    assert "one-sided bounds at 0.983333" in out, out
    code, out, err = dmo("evaluate", multiclass / "m.st", multiclass / "tiny.parquet", "--gate-confidence", "0.95")
    assert code == 0 and "gate passed: class" in out, out
    code, out, err = dmo("evaluate", multiclass / "m.st", multiclass / "holdout.parquet", "--gate-confidence", "0.95")
    assert code == 0 and "gate passed" in out, out


def test_a_section_too_small_to_say_anything_says_so_and_is_not_gated(dmo, fpor_model, tmp_path):
    """Issue 45, hostile 5: one row gave rate 0.886 with a "95 %" interval [0.829, 0.950] and exit 3 under --gate."""
    pd.read_parquet(fpor_model / "low.parquet").drop(columns="label").head(1).to_parquet(tmp_path / "one.parquet")
    code, out, err = dmo("monitor", fpor_model / "m.st", tmp_path / "one.parquet", "--gate", "--json")
    assert code == 0, err
    report = json.loads(out)
    jsonschema.validate(report, report_schema())
    low, high = report["positive_rate"]["interval"]
    assert report["too_small"] and low <= 0.05 and high >= 0.95, report["positive_rate"]
    assert "NEW has 1 row(s), too few to tell a positive rate" in err, err
    code, out, err = dmo("monitor", fpor_model / "m.st", tmp_path / "one.parquet", "--gate")
    assert code == 0 and "too small to say anything" in out and "gate: passed" in out, out
    at_rate(0.2, 200, seed=9).drop(columns="label").to_parquet(tmp_path / "new.parquet")
    code, out, err = dmo("monitor", fpor_model / "m.st", tmp_path / "new.parquet", "--chunk-size", "4", "--json")
    report = json.loads(out)
    assert code == 0 and all(chunk["too_small"] for chunk in report["chunks"]) and not report["too_small"], err
    assert "50 of 50 chunks have too few rows" in err, err


def test_a_psi_is_called_drift_only_beside_a_change_chance_could_not_give(dmo, fpor_model, tmp_path):
    """A handful of rows leaves most bins empty, so their PSI is large whatever the data (one row: about 8): the
    summary reads a PSI as "major" only where the chi-square test says the rows changed, and a too-small section's
    covariate-shift intervals are the whole range (their normal approximation gave [0, 0] on one row)."""
    pd.read_parquet(fpor_model / "low.parquet").drop(columns="label").head(1).to_parquet(tmp_path / "one.parquet")
    code, out, err = dmo("monitor", fpor_model / "m.st", tmp_path / "one.parquet", "--json")
    report = json.loads(out)
    jsonschema.validate(report, report_schema())
    assert code == 0 and report["drift"] and not any(drift["significant"] for drift in report["drift"]), err
    assert max(drift["psi"] for drift in report["drift"]) >= 0.25  # what the summary used to call "major"
    for metric in ("precision", "recall", "f_beta"):
        assert report["covariate_shift"][f"{metric}_interval"] == [0.0, 1.0], report["covariate_shift"]
    code, out, err = dmo("monitor", fpor_model / "m.st", tmp_path / "one.parquet")
    drift_lines = [line for line in out.splitlines() if line.strip().startswith("drift ")]
    assert drift_lines and all("within chance at 1 row)" in line for line in drift_lines), out
    assert "major" not in out, out
    # A real shift, on enough rows, is still called what it is.
    shifted = at_rate(0.2, 2000, seed=11).drop(columns="label")
    shifted[shifted.columns[0]] = shifted[shifted.columns[0]] + 3.0
    shifted.to_parquet(tmp_path / "shifted.parquet")
    code, out, err = dmo("monitor", fpor_model / "m.st", tmp_path / "shifted.parquet", "--json")
    report = json.loads(out)
    moved = [drift for drift in report["drift"] if drift["name"] == shifted.columns[0]]
    assert moved and moved[0]["significant"] and moved[0]["severity"] == "major", report["drift"]
    code, out, err = dmo("monitor", fpor_model / "m.st", tmp_path / "shifted.parquet")
    assert f"drift {shifted.columns[0]}: PSI" in out and "(major)" in out, out
