"""Drift at predict and evaluate time (issue 23, point 1): unseen text levels and emptied numeric columns are
warned about on stderr and in the report's `warnings`, summed over every batch of a stream; --strict (with
--max-unseen) makes them an error, exit 2, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import make_binary_frame, run_dmo

CARDS = np.array(["visa", "mastercard", "amex"])


def _frame(n: int, seed: int, upper_share: float = 0.0):
    """A binary table with a text column `card`; `upper_share` of its rows upper-cased (levels unseen)."""
    frame = make_binary_frame(n=n, seed=seed)
    rng = np.random.default_rng(seed)
    card = CARDS[rng.integers(0, 3, size=n)]
    upper = rng.random(n) < upper_share
    frame["card"] = np.where(upper, np.char.upper(card), card)
    return frame, int(upper.sum())


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("drift")
    frame, _ = _frame(600, seed=0)
    frame.to_csv(folder / "train.csv", index=False)
    path = folder / "m.safetensors"
    run_dmo("train", folder / "train.csv", "--impute", "median", "-o", path, check=True)
    return path


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("dmo: warning:")]


def test_predict_and_evaluate_warn_of_unseen_levels_with_count_share_and_example(model, tmp_path):
    frame, n_upper = _frame(400, seed=1, upper_share=0.3)
    frame.to_csv(tmp_path / "new.csv", index=False)
    predicted = run_dmo("predict", model, tmp_path / "new.csv", "-o", tmp_path / "p.parquet", "--json", check=True)
    expected = f"column 'card': {n_upper} of 400 rows ({n_upper / 400:.1%})"
    lines = _warnings(predicted.stderr)
    assert len(lines) == 1 and expected in lines[0]
    assert any(f"e.g. '{c.upper()}'" in lines[0] for c in CARDS)
    report = json.loads(predicted.stdout)
    assert report["unseen_levels"] == {"card": n_upper} and len(report["warnings"]) == 1
    evaluated = run_dmo("evaluate", model, tmp_path / "new.csv", "--json", check=True)
    assert expected in _warnings(evaluated.stderr)[0] and json.loads(evaluated.stdout)["warnings"]
    clean, _ = _frame(200, seed=2)
    clean.to_csv(tmp_path / "clean.csv", index=False)
    quiet = run_dmo("predict", model, tmp_path / "clean.csv", "-o", tmp_path / "q.parquet", check=True)
    assert not _warnings(quiet.stderr)


def test_strict_refuses_drift_above_the_tolerated_share_and_writes_nothing(model, tmp_path):
    frame, n_upper = _frame(400, seed=3, upper_share=0.2)
    frame.to_csv(tmp_path / "new.csv", index=False)
    out, report = tmp_path / "p.parquet", tmp_path / "r.json"
    refused = run_dmo("predict", model, tmp_path / "new.csv", "-o", out, "--strict")
    assert refused.returncode == 2 and "more than --max-unseen 0.01" in refused.stderr
    assert "Traceback" not in refused.stderr and sorted(p.name for p in tmp_path.iterdir()) == ["new.csv"]
    refused = run_dmo("evaluate", model, tmp_path / "new.csv", "--report", report, "--plot", tmp_path / "pr.png",
                      "--max-unseen", "0.1")  # fmt: skip
    assert refused.returncode == 2 and "more than --max-unseen 0.1" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.csv"]
    tolerated = run_dmo("predict", model, tmp_path / "new.csv", "-o", out, "--max-unseen", "0.5", check=True)
    assert f"{n_upper} of 400 rows" in _warnings(tolerated.stderr)[0] and out.is_file()
    for bad in (["--max-unseen", "1.5"], ["--strict", "-o", "-"]):
        proc = run_dmo("predict", model, tmp_path / "new.csv", *(["-o", out] if "-o" not in bad else []), *bad)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_drift_is_summed_over_every_batch_of_a_stream(model, tmp_path):
    """70,000 rows are two record batches; the unseen levels lie in the second alone, and the one warning
    counts them all."""
    frame, _ = _frame(70_000, seed=4)
    frame.loc[66_000:, "card"] = "Visa Gold"
    frame.to_csv(tmp_path / "big.csv", index=False)
    proc = run_dmo("predict", model, tmp_path / "big.csv", "-o", tmp_path / "p.parquet", "--json", check=True)
    lines = _warnings(proc.stderr)
    assert len(lines) == 1 and "column 'card': 4000 of 70000 rows (5.7%)" in lines[0] and "'Visa Gold'" in lines[0]
    strict = run_dmo("predict", model, tmp_path / "big.csv", "-o", tmp_path / "s.parquet", "--max-unseen", "0.05")
    assert strict.returncode == 2 and not (tmp_path / "s.parquet").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left either


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_numeric_column_missing_in_every_row_is_drift_too(model, tmp_path, value):
    """An emptied column is drift whether it arrives empty or infinite (both are filled with training's median)."""
    frame, _ = _frame(300, seed=5)
    frame["f2"] = value
    frame.to_csv(tmp_path / "empty.csv", index=False)
    warned = run_dmo("predict", model, tmp_path / "empty.csv", "-o", tmp_path / "p.parquet", check=True)
    expected = "column 'f2' is missing (or infinite) in all 300 rows; every row gets training's median there"
    assert any(expected in line for line in _warnings(warned.stderr))
    refused = run_dmo("evaluate", model, tmp_path / "empty.csv", "--strict")
    assert refused.returncode == 2 and "column 'f2' is missing (or infinite) in all 300 rows" in refused.stderr


def test_boosted_trees_say_an_emptied_column_takes_their_missing_value_branch(tmp_path):
    """Trees keep missing values (no median fill): the warning says what happens to the rows."""
    pytest.importorskip("xgboost")
    frame, _ = _frame(400, seed=6)
    frame.to_csv(tmp_path / "train.csv", index=False)
    run_dmo("train", tmp_path / "train.csv", "--model", "gbdt", "--cv", "0", "-o", tmp_path / "t.st", check=True)
    frame["f2"] = np.nan
    frame.to_csv(tmp_path / "empty.csv", index=False)
    warned = run_dmo("predict", tmp_path / "t.st", tmp_path / "empty.csv", "-o", tmp_path / "p.parquet", check=True)
    line = next(line for line in _warnings(warned.stderr) if "'f2'" in line)
    assert "the trees' missing-value branches" in line and "median" not in line
