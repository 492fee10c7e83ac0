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
