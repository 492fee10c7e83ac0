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
